"""Bounds with symbolic ends: proofs about loops whose extents are sizes like ``n * 32``.

The :class:`~engine.arith.simplify.Analyzer` bounds expressions by integers. Under a loop
``k_0`` of extent ``n`` (a symbolic size) it knows nothing of ``k_0``, yet
``k_0 * 32 + ax0 < n * 32`` holds for ``ax0`` in [0, 31]: the largest value of the left
side is ``(n - 1) * 32 + 31``. :func:`prove_le` proves ``a <= b`` so (TVM's
``ProofStrength::kSymbolicBound``): each variable with a known range (its ends may be
expressions of other variables) is replaced by the end that makes ``b - a`` smallest, and
what is left must simplify to a non-negative integer. ``x // n`` and ``x % n`` by a
variable ``n`` known to be positive (a size some loop runs over: a loop of extent
``n * 32`` runs at all only if ``n >= 1``) are bounded as well: ``x // n <= 31`` when
``x <= n * 32 - 1``, ``0 <= x % n <= n - 1``.
"""
from __future__ import annotations

from typing import Mapping

from engine.ir import expr as E

from .simplify import Analyzer, _scalar_int

#: how many times ranges are substituted into one another (ends depending on other ends)
_DEPTH = 4


def _const(v: int, dtype: str) -> E.PrimExpr:
    return E.const(v, dtype)


class SymbolicBounds:
    """Symbolic lower and upper ends of integer expressions.

    ``ranges`` maps a variable to its inclusive ``(lo, hi)`` (expressions or integers);
    ``positive`` is a set of variables known to be at least 1 (divisors). ``an`` knows
    the integer ranges (used to simplify the results)."""

    def __init__(self, ranges: Mapping, positive=(), an: Analyzer | None = None):
        self.ranges = {id(v): r for v, r in ranges.items()}
        self.positive = {id(v) for v in positive}
        self.an = an or Analyzer()

    def _end(self, e: E.PrimExpr, upper: bool, depth: int) -> E.PrimExpr | None:
        """An expression that is ``>= e`` (``upper``) or ``<= e`` over the ranges."""
        if not _scalar_int(e):
            return None
        dt = e.dtype
        terms, const = self.an.linear(e)
        out: E.PrimExpr = _const(const, dt)
        for atom, coef in terms.values():
            want_upper = upper if coef > 0 else not upper
            end = self._atom_end(atom, want_upper, depth)
            if end is None:
                return None
            out = out + (end if coef == 1 else end * _const(coef, dt))
        return self.an.simplify(out)

    def _atom_end(self, a: E.PrimExpr, upper: bool, depth: int) -> E.PrimExpr | None:
        if isinstance(a, E.Var):
            r = self.ranges.get(id(a))
            if r is None or depth <= 0:
                return a            # a symbol of its own (a size): kept as it is
            end = r[1] if upper else r[0]
            if end is None:
                return None
            end = end if isinstance(end, E.PrimExpr) else _const(end, a.dtype)
            return self._end(end, upper, depth - 1)
        if isinstance(a, E.FloorMod):
            c = E.as_const_int(a.b)
            if c is not None and c > 0:
                return _const(c - 1 if upper else 0, a.dtype)
            if isinstance(a.b, E.Var) and id(a.b) in self.positive:
                return a.b - _const(1, a.dtype) if upper else _const(0, a.dtype)
            return None
        if isinstance(a, E.FloorDiv):
            x = self._end(a.a, upper, depth)
            if x is None:
                return None
            c = E.as_const_int(a.b)
            if c is not None and c > 0:
                return self.an.simplify(E.FloorDiv(x, a.b))
            if isinstance(a.b, E.Var) and id(a.b) in self.positive:
                return _div_by_symbol(self.an, x, a.b, upper)
            return None
        return None

    def upper(self, e: E.PrimExpr) -> E.PrimExpr | None:
        return self._end(e, True, _DEPTH)

    def lower(self, e: E.PrimExpr) -> E.PrimExpr | None:
        return self._end(e, False, _DEPTH)

    def prove_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """``a <= b`` for every value of the variables in their ranges."""
        if not (_scalar_int(a) and _scalar_int(b)):
            return False
        lo = self.lower(self.an.simplify(b - a))
        if lo is None:
            return False
        lo_c = E.as_const_int(lo)
        if lo_c is not None:
            return lo_c >= 0
        bd = self.an.bound(lo)
        return bd is not None and bd[0] is not None and bd[0] >= 0


def _div_by_symbol(an: Analyzer, x: E.PrimExpr, n: E.Var, upper: bool) -> E.PrimExpr | None:
    """An end of ``x // n`` for ``n >= 1``, ``x`` = ``k * n + r`` with ``r`` an integer:
    ``k + r // n``, where ``r // n`` is in [r, -1] for ``r < 0`` and in [0, r] else."""
    terms, const = an.linear(x)
    k = 0
    for atom, coef in terms.values():
        if atom is not n:
            return None
        k = coef
    dt = x.dtype
    if const < 0:
        q = -1 if upper else const
    else:
        q = const if upper else 0
    return _const(k + q, dt)


def prove_le(a: E.PrimExpr, b: E.PrimExpr, ranges: Mapping, positive=(),
             an: Analyzer | None = None) -> bool:
    """``a <= b`` whatever the variables of ``ranges`` (inclusive ``(lo, hi)``, ends may be
    expressions) take; see :class:`SymbolicBounds`."""
    return SymbolicBounds(ranges, positive, an).prove_le(a, b)
