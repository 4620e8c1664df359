"""Interval bounds: constant bounds of an expression, and symbolic relaxation.

* :func:`bound_of` — ``(min, max)`` integers (None when unbounded) of an integer
  expression given variable ranges.
* :func:`relax` — the symbolic ``(min_expr, max_expr)`` of an expression when some
  variables range over given intervals and all others stay fixed. Region inference
  uses it: relaxing the inner loops ``ax0 in [0, 3]`` of ``j_0 * 4 + ax0`` gives
  ``(j_0 * 4, j_0 * 4 + 3)``.
"""
from __future__ import annotations

from typing import Mapping

from engine.ir import expr as E

from .simplify import Analyzer, _key, _scalar_int


def bound_of(expr: E.PrimExpr, var_ranges: Mapping | None = None) -> tuple:
    """Inclusive ``(min, max)`` of an integer expression; an end is None if unbounded."""
    an = Analyzer(var_ranges)
    b = an.bound(expr)
    return (None, None) if b is None else b


def _uses_any(e: E.PrimExpr, keys: set) -> bool:
    from engine.ir.functor import collect_vars
    return any(id(v) in keys for v in collect_vars(e))


def relax(expr: E.PrimExpr, relax_ranges: Mapping, var_ranges: Mapping | None = None):
    """Symbolic bounds of ``expr`` when each var in ``relax_ranges`` takes any value in its
    inclusive ``(lo, hi)`` (ints or expressions) and the other variables are fixed.

    Returns ``(lo_expr, hi_expr)`` (simplified) or None when the expression is not
    monotone enough to bound (e.g. a non-constant product of relaxed variables).
    ``var_ranges`` gives known ranges of fixed variables, used only for simplification.
    """
    an = Analyzer(var_ranges)
    if not _scalar_int(expr):
        return None
    rk = {id(v) for v in relax_ranges}
    rr = {id(v): r for v, r in relax_ranges.items()}
    res = _relax(an, expr, rk, rr)
    if res is None:
        return None
    lo, hi = res
    return an.simplify(lo), an.simplify(hi)


def _c(v, dtype):
    return v if isinstance(v, E.PrimExpr) else E.const(v, dtype)


def _relax(an: Analyzer, e: E.PrimExpr, rk: set, rr: dict):
    if not _uses_any(e, rk):
        return e, e
    dt = e.dtype
    terms, const = an.linear(e)
    lo_parts: list = []
    hi_parts: list = []
    for atom, coef in terms.values():
        if not _uses_any(atom, rk):
            lo_parts.append((atom, coef))
            hi_parts.append((atom, coef))
            continue
        if isinstance(atom, E.Var):
            alo, ahi = rr[id(atom)]
            alo, ahi = _c(alo, dt), _c(ahi, dt)
        else:
            r = _relax_atom(an, atom, rk, rr)
            if r is None:
                return None
            alo, ahi = r
        if coef < 0:
            alo, ahi = ahi, alo
        lo_parts.append((alo, coef))
        hi_parts.append((ahi, coef))

    def build(parts):
        out = E.const(const, dt)
        for x, coef in parts:
            out = out + (x if coef == 1 else x * E.const(coef, dt))
        return an.simplify(out)

    return build(lo_parts), build(hi_parts)


def _relax_atom(an: Analyzer, a: E.PrimExpr, rk: set, rr: dict):
    if isinstance(a, E.FloorDiv):
        c = E.as_const_int(a.b)
        if c is None or c <= 0:
            return None
        r = _relax(an, a.a, rk, rr)
        if r is None:
            return None
        return E.FloorDiv(r[0], a.b), E.FloorDiv(r[1], a.b)
    if isinstance(a, E.FloorMod):
        c = E.as_const_int(a.b)
        if c is None or c <= 0:
            return None
        r = _relax(an, a.a, rk, rr)
        if r is not None:
            span = an.simplify(r[1] - r[0])
            lo_q = an.simplify(E.FloorDiv(r[0], a.b))
            hi_q = an.simplify(E.FloorDiv(r[1], a.b))
            if E.as_const_int(span) is not None and _key(lo_q) == _key(hi_q):
                return E.FloorMod(r[0], a.b), E.FloorMod(r[1], a.b)
        return E.const(0, a.dtype), E.const(c - 1, a.dtype)
    if isinstance(a, (E.Min, E.Max)):
        ra, rb = _relax(an, a.a, rk, rr), _relax(an, a.b, rk, rr)
        if ra is None or rb is None:
            return None
        t = type(a)
        return t(ra[0], rb[0]), t(ra[1], rb[1])
    return None


