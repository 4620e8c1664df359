"""Affine detection: is an index/binding expression a linear function of variables?

* :func:`affine_terms` — ``({var: coef}, const)`` for ``sum(coef * var) + const`` with
  integer coefficients, else None.
* :func:`is_quasi_affine` — affine, or built from affine pieces with ``//`` and ``%`` by
  positive constants (what fuse produces: ``i_j_fused // 128``); TVM's iterator maps
  accept these as well.
"""
from __future__ import annotations

from engine.ir import expr as E

from .simplify import Analyzer, _scalar_int


def affine_terms(expr: E.PrimExpr):
    """``({Var: coef}, const)`` if ``expr`` is affine in its variables, else None."""
    if not _scalar_int(expr):
        return None
    terms, const = Analyzer().linear(expr)
    out = {}
    for atom, coef in terms.values():
        if not isinstance(atom, E.Var):
            return None
        out[atom] = coef
    return out, const


def is_quasi_affine(expr: E.PrimExpr) -> bool:
    """Affine up to floordiv/floormod by positive constants."""
    if not _scalar_int(expr):
        return False
    terms, _ = Analyzer().linear(expr)
    for atom, _coef in terms.values():
        if isinstance(atom, E.Var):
            continue
        if isinstance(atom, (E.FloorDiv, E.FloorMod)):
            c = E.as_const_int(atom.b)
            if c is None or c <= 0 or not is_quasi_affine(atom.a):
                return False
            continue
        return False
    return True
