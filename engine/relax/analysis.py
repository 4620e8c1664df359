"""Relax analyses with TVM's names (``relax.analysis``):

* :func:`remove_all_unused` — a function without the dataflow bindings nothing reads (the
  course's clean-up after a rewrite leaves ``lv0 = R.multiply(x, y)`` unused);
* :func:`get_var2val` — each bound variable's value;
* :func:`post_order_visit` — a callback on every expression, children first.
"""
from __future__ import annotations

from typing import Any, Callable

from . import expr as X
from .functor import post_order_visit as _post_order_visit
from .transform.dead_code import remove_unused_bindings

__all__ = ["remove_all_unused", "get_var2val", "post_order_visit"]


def remove_all_unused(func: X.Function) -> X.Function:
    """``func`` without the dataflow bindings no result depends on (chains of them too).

    Bindings outside dataflow blocks are kept: they may have side effects."""
    if not isinstance(func, X.Function):
        raise TypeError(f"remove_all_unused takes a Relax function, got {type(func).__name__}")
    return remove_unused_bindings(func)


def get_var2val(func: X.Function) -> dict:
    """``{var: value}`` for every binding of ``func``."""
    return {b.var: b.value for b in func.bindings()}


def post_order_visit(expr: Any, fvisit: Callable[[Any], None]) -> None:
    """Call ``fvisit`` on every expression under ``expr`` (children first)."""
    _post_order_visit(expr, lambda n: fvisit(n) if isinstance(n, X.Expr) else None)
