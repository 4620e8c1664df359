"""``tvm.tirx`` (TVM 0.27; the course's ``tvm.tir``): the engine's IR classes under TVM's
names, ``const``, ``floordiv``/``floormod``, and the submodules ``expr``, ``stmt``,
``stmt_functor``, ``function``, ``buffer``."""
from __future__ import annotations

from typing import Any

from engine.ir.expr import FloorDiv as _FloorDiv
from engine.ir.expr import FloorMod as _FloorMod
from engine.ir.expr import binary as _binary
from engine.ir.expr import const
from engine.ir.buffer import Range

from . import buffer, expr, function, stmt, stmt_functor
from .buffer import Buffer, BufferRegion, decl_buffer
from .expr import *  # noqa: F403 - the expression classes
from .expr import __all__ as _expr_names
from .function import PrimFunc, TensorIntrin
from .stmt import *  # noqa: F403 - the statement classes
from .stmt import __all__ as _stmt_names
from .stmt_functor import post_order_visit, pre_order_visit

__all__ = ["const", "floordiv", "floormod", "Range", "Buffer", "BufferRegion", "decl_buffer",
           "PrimFunc", "TensorIntrin", "post_order_visit", "pre_order_visit", "expr", "stmt",
           "stmt_functor", "function", "buffer", *_expr_names, *_stmt_names]


def floordiv(a: Any, b: Any) -> Any:
    """``a // b`` rounded towards minus infinity (the engine's ``FloorDiv``)."""
    return _binary(_FloorDiv, a, b)


def floormod(a: Any, b: Any) -> Any:
    """The remainder of :func:`floordiv` (the engine's ``FloorMod``)."""
    return _binary(_FloorMod, a, b)
