"""Interval bounds under guards: the ranges of loop variables plus the facts of the
conditions that enclose an expression (``if i * 4 + j < 70:``).

:class:`GuardedBounds` is an :class:`~engine.arith.simplify.Analyzer` whose bounds also use

* **facts** ``lo <= d <= hi`` of linear expressions ``d``, added from comparisons with
  :meth:`GuardedBounds.assume` (conjunctions are split; a negated comparison is flipped).
  A bound of ``e`` uses a fact by writing ``e = k * d + rest``: ``e <= k * hi + max(rest)``.
  So ``i0 * 4 + i1`` under ``i0 * 4 + i1 < 70`` is at most 69, and so is
  ``(i0 * 4 + i1) // 8`` at most 8. A fact on one variable also narrows its range;
* more atoms than the plain analyzer bounds: casts between integers, ``Select`` and
  ``if_then_else`` (either value), truncating ``Div``/``Mod`` by a positive constant, and
  integer loads (the range of their dtype, e.g. ``uint8`` in ``[0, 255]``, met with what
  the caller's ``load_bound`` knows of the loaded buffer).

A *disjunction* (``a or b``, or the negation of ``a and b``: the false branch of
``T.if_then_else(i == 3 and 2 <= j, pad, A[i * 4 + j])``) is kept as cases:
:meth:`GuardedBounds.bound_tree` bounds the expression under each case in turn (a case that
contradicts the ranges is skipped) and joins the results, for at most
:data:`_MAX_CASE_SPLITS` disjunctions. ``v != c`` with ``c`` at an end of ``v``'s range
narrows the range (``i != 3`` for ``i`` in 0..3 is ``i <= 2``).

Facts and ranges are scoped by the caller: :meth:`GuardedBounds.scope` saves and restores.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from engine.ir import expr as E
from engine.ir.dtype import bits_of, is_bool, is_int, is_uint, lanes_of

from .simplify import Analyzer, _lin_add, _lin_scale, _scalar_int

#: comparisons as ``a - b`` in [lo, hi] (None = unbounded)
_CMP_FACTS = {E.LT: (None, -1), E.LE: (None, 0), E.GT: (1, None), E.GE: (0, None),
              E.EQ: (0, 0)}
#: facts chained in one bound (each subset is tried once: 2**n work at most)
_MAX_CHAINED_FACTS = 8
_NEGATED = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.NE: E.EQ, E.EQ: E.NE}
#: disjunctions split into cases in one bound (2 ** n cases at most for two-way ones)
_MAX_CASE_SPLITS = 3
#: alternatives of one disjunction kept as cases (a longer one is forgotten: still sound)
_MAX_ALTERNATIVES = 4


def dtype_range(dtype: str) -> tuple | None:
    """Inclusive range of a scalar integer or bool dtype (None for other dtypes)."""
    if is_bool(dtype):
        return 0, 1
    if not is_int(dtype) or lanes_of(dtype) != 1:
        return None
    bits = bits_of(dtype)
    if is_uint(dtype):
        return 0, 2 ** bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _meet(a: tuple, b: tuple) -> tuple:
    lo = b[0] if a[0] is None else (a[0] if b[0] is None else max(a[0], b[0]))
    hi = b[1] if a[1] is None else (a[1] if b[1] is None else min(a[1], b[1]))
    return lo, hi


def _join(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return None
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def _scaled(k: int, lo, hi) -> tuple:
    """The interval of ``k * x`` for ``x`` in [lo, hi]."""
    if k < 0:
        lo, hi = hi, lo
    return (None if lo is None else k * lo), (None if hi is None else k * hi)


class GuardedBounds(Analyzer):
    """Bounds under loop ranges and guard facts (see the module docstring)."""

    def __init__(self, var_ranges=None, load_bound=None):
        super().__init__(var_ranges)
        #: ``load_bound(load)``: an inclusive (lo, hi) every element of the loaded buffer
        #: lies in, or None (then only the dtype bounds a load)
        self.load_bound = load_bound
        self.facts: list[tuple] = []  # (linear form of d, lo, hi)
        #: disjunctions: each a tuple of alternatives (cond, negate), one of which holds
        self.cases: list[tuple] = []
        self._plain = False
        self._splitting = False

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Facts and ranges added inside the ``with`` are forgotten at its end."""
        facts, ranges, cases = list(self.facts), dict(self.ranges), list(self.cases)
        try:
            yield
        finally:
            self.facts, self.ranges, self.cases = facts, ranges, cases

    # ----------------------------------------------------------- facts
    def assume(self, cond: E.PrimExpr, negate: bool = False) -> None:
        """Learn what holds where ``cond`` is true (or false, with ``negate``)."""
        if isinstance(cond, E.Not):
            self.assume(cond.a, not negate)
            return
        if isinstance(cond, E.And) and not negate:
            self.assume(cond.a)
            self.assume(cond.b)
            return
        if isinstance(cond, E.Or) and negate:
            self.assume(cond.a, True)
            self.assume(cond.b, True)
            return
        if isinstance(cond, (E.Or, E.And)):     # a or b / not (a and b): cases
            alternatives = _alternatives(cond, negate)
            if len(alternatives) <= _MAX_ALTERNATIVES:
                self.cases.append(alternatives)
            return
        t = type(cond)
        if negate:
            t = _NEGATED.get(t)
        if t is E.NE and _scalar_int(cond.a) and _scalar_int(cond.b):
            self._exclude(_lin_add(self.linear(cond.a), self.linear(cond.b), -1))
            return
        if t not in _CMP_FACTS or not (_scalar_int(cond.a) and _scalar_int(cond.b)):
            return
        lo, hi = _CMP_FACTS[t]
        lin = _lin_add(self.linear(cond.a), self.linear(cond.b), -1)
        self._add_fact(lin, lo, hi)

    def _exclude(self, lin: tuple) -> None:
        """``lin != 0``: a variable ``v`` (``lin`` is ``±v + c``) whose range ends at the
        excluded value loses that end."""
        terms, const = lin
        if len(terms) != 1:
            return
        (atom, coef), = terms.values()
        if not isinstance(atom, E.Var) or coef not in (1, -1):
            return
        value = -const * coef      # coef * v + const == 0
        lo, hi = self.ranges.get(atom) or (None, None)
        if lo is not None and lo == value:
            self.ranges[atom] = (lo + 1, hi)
        elif hi is not None and hi == value:
            self.ranges[atom] = (lo, hi - 1)

    def infeasible(self) -> bool:
        """Do the ranges learnt contradict one another (a variable with no value left)?"""
        return any(r is not None and r[0] is not None and r[1] is not None and r[0] > r[1]
                   for r in self.ranges.values())

    def _add_fact(self, lin: tuple, lo, hi) -> None:
        terms, const = lin
        if not terms:
            return
        if len(terms) == 1:
            (atom, coef), = terms.values()
            if isinstance(atom, E.Var) and coef in (1, -1):
                # coef * v + const in [lo, hi]  ->  v in ...
                vlo, vhi = _scaled(coef, None if lo is None else lo - const,
                                   None if hi is None else hi - const)
                old = self.ranges.get(atom) or (None, None)
                self.ranges[atom] = _meet(old, (vlo, vhi))
                return
        self.facts.append((lin, lo, hi))

    # ----------------------------------------------------------- bounds
    def _bound_lin(self, lin: tuple) -> tuple:
        lo, hi = super()._bound_lin(lin)
        if not self.facts or self._plain:
            return lo, hi
        self._plain = True
        try:
            usable = frozenset(range(min(len(self.facts), _MAX_CHAINED_FACTS)))
            return _meet((lo, hi), self._through_facts(lin, usable, {}))
        finally:
            self._plain = False

    def _through_facts(self, lin: tuple, usable: frozenset, memo: dict) -> tuple:
        """Bounds of ``lin`` using the facts in ``usable``, each at most once, chained:
        ``4 * d2 + 2 * d1 + i`` under ``d2 <= 2`` and ``d1 <= 1`` is at most 11 only when
        both facts are used (nested imperfect splits give one such guard per split)."""
        key = (usable, tuple(sorted((k, c) for k, (_, c) in lin[0].items())), lin[1])
        if key in memo:
            return memo[key]
        best = super()._bound_lin(lin)
        for i in usable:
            split = self._split_by_fact(lin, *self.facts[i])
            if split is None:
                continue
            rest, (dlo, dhi) = split
            rlo, rhi = self._through_facts(rest, usable - {i}, memo)
            best = _meet(best, (None if rlo is None or dlo is None else rlo + dlo,
                                None if rhi is None or dhi is None else rhi + dhi))
        memo[key] = best
        return best

    def _split_by_fact(self, lin: tuple, flin: tuple, flo, fhi) -> tuple | None:
        """``lin`` written as ``rest + k * d`` for the fact ``d`` in [flo, fhi]: returns
        ``rest`` and the interval of ``k * d`` (None when ``lin`` has no multiple of d)."""
        terms = lin[0]
        key, (_, fcoef) = next(iter(flin[0].items()))
        if key not in terms:
            return None
        coef = terms[key][1]
        if coef % fcoef:
            return None
        k = coef // fcoef
        return _lin_add(lin, _lin_scale(flin, k), -1), _scaled(k, flo, fhi)

    def _bound_atom(self, a: E.PrimExpr) -> tuple | None:
        got = super()._bound_atom(a)
        if got is not None:
            return got
        if isinstance(a, E.Cast):
            target = dtype_range(a.dtype)
            inner = self.bound(a.value) if _scalar_int(a.value) else None
            if target is None:
                return None
            if inner is not None and None not in inner and \
                    target[0] <= inner[0] and inner[1] <= target[1]:
                return inner
            return target
        if isinstance(a, E.Select):
            return _join(self.bound(a.true_value), self.bound(a.false_value))
        if isinstance(a, E.Call) and a.op == "if_then_else":
            return _join(self.bound(a.args[1]), self.bound(a.args[2]))
        if isinstance(a, (E.Div, E.Mod)):
            return self._bound_trunc(a)
        if isinstance(a, E.BufferLoad):
            known = dtype_range(a.dtype)
            extra = self.load_bound(a) if self.load_bound is not None else None
            return known if extra is None or known is None else _meet(known, extra)
        return None

    def _bound_trunc(self, a: E.PrimExpr) -> tuple | None:
        """Truncating division / remainder by a positive constant."""
        c = E.as_const_int(a.b)
        if c is None or c <= 0 or not _scalar_int(a.a):
            return None
        lo, hi = self.bound(a.a)
        if isinstance(a, E.Mod):
            if lo is not None and lo >= 0:
                return 0, c - 1 if hi is None else min(hi, c - 1)
            return -(c - 1), c - 1
        div = lambda x: None if x is None else (abs(x) // c) * (1 if x >= 0 else -1)  # noqa: E731
        return div(lo), div(hi)

    def bound_tree(self, e: E.PrimExpr) -> tuple:
        """:meth:`bound` met with the interval computed on the expression as written, so a
        guard on ``j`` still bounds ``j // 2`` when the canonical form has split ``j``
        (``(i * 4 + k) // 2 -> i * 2 + k // 2``); under disjunctions, the join of the
        bounds under each of their cases (see the module docstring)."""
        if self.cases and not self._splitting:
            return _meet(self._tree(e), self._split_cases(e, self.cases[-_MAX_CASE_SPLITS:]))
        return self._tree(e)

    def _split_cases(self, e: E.PrimExpr, pending: list) -> tuple:
        if not pending:
            self._splitting = True
            try:
                return self._tree(e)
            finally:
                self._splitting = False
        out: tuple | None = None
        for cond, negate in pending[0]:
            with self.scope():
                self.cases = []
                self.assume(cond, negate)
                if self.infeasible():
                    continue
                got = self._split_cases(e, pending[1:])
            out = got if out is None else _join(out, got)
        return (None, None) if out is None else out

    def _tree(self, e: E.PrimExpr) -> tuple:
        got = self.bound(e) if _scalar_int(e) else None
        got = (None, None) if got is None else got
        if isinstance(e, (E.Add, E.Sub)):
            a, b = self._tree(e.a), self._tree(e.b)
            if isinstance(e, E.Sub):
                b = (None if b[1] is None else -b[1], None if b[0] is None else -b[0])
            return _meet(got, (None if a[0] is None or b[0] is None else a[0] + b[0],
                               None if a[1] is None or b[1] is None else a[1] + b[1]))
        if isinstance(e, E.Mul):
            k = E.as_const_int(e.b)
            if k is not None:
                return _meet(got, _scaled(k, *self._tree(e.a)))
            return got
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            c = E.as_const_int(e.b)
            if c is None or c <= 0:
                return got
            lo, hi = self._tree(e.a)
            if isinstance(e, E.FloorDiv):
                return _meet(got, (None if lo is None else lo // c, None if hi is None else hi // c))
            if lo is not None and hi is not None and lo // c == hi // c:
                return _meet(got, (lo % c, hi % c))
            return _meet(got, (0, c - 1))
        return got


def _alternatives(cond: E.PrimExpr, negate: bool) -> tuple:
    """The alternatives ``(cond, negate)`` of a disjunction: ``a or b`` (or ``not (a and
    b)``, whose alternatives are ``not a``, ``not b``), nested ones flattened."""
    if isinstance(cond, E.Not):
        return _alternatives(cond.a, not negate)
    if isinstance(cond, E.Or) and not negate or isinstance(cond, E.And) and negate:
        return _alternatives(cond.a, negate) + _alternatives(cond.b, negate)
    return ((cond, negate),)
