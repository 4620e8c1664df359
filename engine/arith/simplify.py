"""Expression simplifier with a canonical affine form and range-aware div/mod folding.

Integer expressions are brought to a *linear form* ``sum(coef * atom) + const`` where an
atom is a variable or a non-linear sub-expression (``x // 4``, ``x * y``, ``T.min(..)``).
Terms keep their first-appearance order, so a split binding prints as TVM prints it::

    j_0 * 4 + j_1          # not 4*j_0 + j_1 or j_1 + j_0*4

Division and modulo by a positive constant ``c`` split the linear form into a part
divisible by ``c`` and a remainder ``R``; when the known loop ranges bound ``R`` to
``[k*c, k*c + c - 1]`` the result folds: ``(x * 4 + y) // 4 -> x`` and
``(x * 4 + y) % 4 -> y`` for ``0 <= y < 4``. A quotient also folds coefficient by
coefficient (``(c * 360 + 7) // 16 -> c * 22`` for ``c`` in [0, 1]: ``c * 8 + 7`` stays
below 16) and drops a common factor (``(i * 8 + 7) // 16 -> i // 2``), as TVM's; bounds also
see ``(o * 8 + k) // 16`` as ``o // 2`` for ``k`` in [0, 7] (the expression keeps its form).

Use :func:`simplify` (optionally with ``var_ranges={var: (min, max)}``, inclusive, or
``{var: Range}``) or an :class:`Analyzer` that keeps the ranges.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from engine.ir import expr as E
from engine.ir.buffer import Range
from engine.ir.dtype import is_float, is_int
from engine.ir.functor import Mutator, collect_vars

Lin = tuple  # (dict[key, (atom, coef)], const)


def _key(e: Any) -> Any:
    """A hashable structural key of an expression (variables by identity)."""
    if isinstance(e, E.Var):
        return ("v", id(e))
    if isinstance(e, E.IntImm):
        return ("i", e.dtype, e.value)
    if isinstance(e, E.FloatImm):
        return ("f", e.dtype, e.value)
    if isinstance(e, E.PrimExpr):
        parts: list[Any] = [type(e).__name__]
        for name, v in e.fields():
            if isinstance(v, E.PrimExpr):
                parts.append(_key(v))
            elif isinstance(v, tuple):
                parts.append(tuple(_key(x) if isinstance(x, E.PrimExpr) else x for x in v))
            elif hasattr(v, "shape") and hasattr(v, "dtype"):  # a Buffer
                parts.append(("buf", id(v)))
            else:
                parts.append(v)
        return tuple(parts)
    return ("o", id(e))


def _scalar_int(e: E.PrimExpr) -> bool:
    try:
        dt = e.dtype
    except Exception:  # noqa: BLE001
        return False
    return is_int(dt) and "x" not in dt


def _norm_ranges(var_ranges: Mapping | None) -> dict:
    out: dict = {}
    for v, r in (var_ranges or {}).items():
        if isinstance(r, Range):
            lo, ext = E.as_const_int(r.min), E.as_const_int(r.extent)
            if lo is None or ext is None:
                continue
            out[v] = (lo, lo + ext - 1)
        else:
            lo, hi = r
            out[v] = (E.as_const_int(lo) if not isinstance(lo, int) else lo,
                      E.as_const_int(hi) if not isinstance(hi, int) else hi)
    return out


class Analyzer:
    """Simplifier and integer bound analysis under known variable ranges."""

    def __init__(self, var_ranges: Mapping | None = None):
        self.ranges: dict = _norm_ranges(var_ranges)

    def bind(self, var: E.Var, lo: int, hi: int) -> None:
        self.ranges[var] = (lo, hi)

    # ----------------------------------------------------------- linear forms
    def linear(self, e: E.PrimExpr) -> Lin:
        """Linear form of an integer expression: ({key: (atom, coef)}, const)."""
        if isinstance(e, E.IntImm):
            return {}, e.value
        if isinstance(e, E.Add):
            return self._merge_divmod(_lin_add(self.linear(e.a), self.linear(e.b), 1))
        if isinstance(e, E.Sub):
            return self._merge_divmod(_lin_add(self.linear(e.a), self.linear(e.b), -1))
        if isinstance(e, E.Mul):
            la, lb = self.linear(e.a), self.linear(e.b)
            if not la[0]:
                return _lin_scale(lb, la[1])
            if not lb[0]:
                return _lin_scale(la, lb[1])
            return self._atom(E.Mul(self.rebuild(la, e.dtype), self.rebuild(lb, e.dtype)))
        if isinstance(e, E.FloorDiv):
            return self._floordiv(e)
        if isinstance(e, E.FloorMod):
            return self._floormod(e)
        if isinstance(e, (E.Min, E.Max)):
            a, b = self.simplify(e.a), self.simplify(e.b)
            ia, ib = E.as_const_int(a), E.as_const_int(b)
            is_min = isinstance(e, E.Min)
            if ia is not None and ib is not None:
                return {}, (min(ia, ib) if is_min else max(ia, ib))
            d = self.bound(self._sub(a, b))
            if d is not None:
                lo, hi = d
                if hi is not None and hi <= 0:
                    return self.linear(a if is_min else b)
                if lo is not None and lo >= 0:
                    return self.linear(b if is_min else a)
            return self._atom(type(e)(a, b))
        if isinstance(e, E.Var):
            return {("v", id(e)): (e, 1)}, 0
        return self._atom(self._simplify_other(e))

    def _merge_divmod(self, lin: Lin) -> Lin:
        """``k * c * (x // c) + k * (x % c)  ->  k * x`` (floor division's identity), so
        the index of a fused pair of split loops reads as the fused loop itself."""
        terms = lin[0]
        for key, (atom, coef) in list(terms.items()):
            if not isinstance(atom, E.FloorMod) or key not in terms:
                continue
            c = E.as_const_int(atom.b)
            if c is None or c <= 0:
                continue
            div_key = ("FloorDiv",) + key[1:]
            div = terms.get(div_key)
            if div is None or div[1] != coef * c:
                continue
            rest = {k: v for k, v in terms.items() if k not in (key, div_key)}
            lin = _lin_add((rest, lin[1]), _lin_scale(self.linear(atom.a), coef), 1)
            return self._merge_divmod(lin)
        return lin

    def _atom(self, e: E.PrimExpr) -> Lin:
        if isinstance(e, E.IntImm):
            return {}, e.value
        return {_key(e): (e, 1)}, 0

    def _sub(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return self.rebuild(_lin_add(self.linear(a), self.linear(b), -1), a.dtype)

    def _split(self, lin: Lin, c: int) -> tuple[Lin, Lin]:
        """lin = c * X + R with X collecting the terms (and const part) divisible by c."""
        terms, const = lin
        xt, rt = {}, {}
        for k, (atom, coef) in terms.items():
            if coef % c == 0:
                xt[k] = (atom, coef // c)
            else:
                rt[k] = (atom, coef)
        return (xt, const // c), (rt, const % c)

    def _floordiv(self, e: E.FloorDiv) -> Lin:
        b = self.simplify(e.b)
        c = E.as_const_int(b)
        la = self.linear(e.a)
        if c is None or c <= 0:
            return self._atom(E.FloorDiv(self.rebuild(la, e.dtype), b))
        if c == 1:
            return la
        if not la[0]:
            return {}, la[1] // c
        x, r = self._split(la, c)
        if not r[0]:
            return x  # r is a constant in [0, c)
        rexpr = self.rebuild(r, e.dtype)
        bd = self.bound(rexpr)
        if bd is not None and bd[0] is not None and bd[1] is not None and \
                bd[0] // c == bd[1] // c:
            return _lin_add(x, ({}, bd[0] // c), 1)
        # (c_o * 360 + 7) // 16 -> c_o * 22 + (c_o * 8 + 7) // 16 -> c_o * 22 when the
        # remainders of the coefficients leave a part bounded in one multiple of c
        folded = self._floordiv_by_coef_remainders(r, c, e.dtype)
        if folded is not None:
            return _lin_add(x, folded, 1)
        # (y // a) // c  ->  y // (a * c)
        if len(r[0]) == 1 and r[1] == 0:
            (atom, coef), = r[0].values()
            if coef == 1 and isinstance(atom, E.FloorDiv) and \
                    (E.as_const_int(atom.b) or 0) > 0:
                inner = E.FloorDiv(atom.a, E.const(E.as_const_int(atom.b) * c, e.dtype))
                return _lin_add(x, self._atom(inner), 1)
        # (g * Y + s) // (g * c') -> Y // c' for 0 <= s < g: (i * 8 + 7) // 16 -> i // 2
        common = self._common_factor_quotient(r, c, e.dtype, with_terms=False)
        if common is not None:
            return _lin_add(x, common, 1)
        return _lin_add(x, self._atom(E.FloorDiv(rexpr, E.const(c, e.dtype))), 1)

    def _common_factor_quotient(self, r: Lin, c: int, dtype: str,
                                with_terms: bool) -> Lin | None:
        """``r // c`` as ``Y // (c / g)`` when ``r = g * Y + s`` with ``0 <= s < g`` (``g``
        dividing ``c``): ``s`` is the constant's remainder, and ``with_terms`` also the terms
        whose coefficients ``g`` does not divide when their sum stays in ``[0, g)``
        (``(o * 8 + k) // 16 -> o // 2`` for ``k`` in [0, 7]); None when no ``g`` fits."""
        for g in sorted({math.gcd(c, coef) for _a, coef in r[0].values()} - {1},
                        reverse=True):
            big = {k: (atom, coef // g) for k, (atom, coef) in r[0].items() if coef % g == 0}
            small = ({k: v for k, v in r[0].items() if k not in big}, r[1] % g)
            if small[0] and not with_terms:
                continue
            sb = self._bound_terms(small) if small[0] else (small[1], small[1])
            if sb[0] is None or sb[1] is None or sb[0] < 0 or sb[1] >= g:
                continue
            y = (big, r[1] // g)
            return self._floordiv(E.FloorDiv(self.rebuild(y, dtype), E.const(c // g, dtype)))
        return None

    def _floordiv_by_coef_remainders(self, r: Lin, c: int, dtype: str) -> Lin | None:
        """``r // c`` as ``sum((coef // c) * atom) + k`` when ``sum((coef % c) * atom) +
        const`` is bounded in ``[k * c, k * c + c - 1]`` (floor division's identity for each
        coefficient ``coef = (coef // c) * c + coef % c``); None otherwise."""
        terms, const = r
        if not any(coef // c for _atom, coef in terms.values()):
            return None
        quot = {k: (atom, coef // c) for k, (atom, coef) in terms.items() if coef // c}
        rem = ({k: (atom, coef % c) for k, (atom, coef) in terms.items() if coef % c}, const)
        bd = self._bound_lin(rem)
        if bd[0] is None or bd[1] is None or bd[0] // c != bd[1] // c:
            return None
        return quot, bd[0] // c

    def _floormod(self, e: E.FloorMod) -> Lin:
        b = self.simplify(e.b)
        c = E.as_const_int(b)
        la = self.linear(e.a)
        if c is None or c <= 0:
            return self._atom(E.FloorMod(self.rebuild(la, e.dtype), b))
        if c == 1:
            return {}, 0
        if not la[0]:
            return {}, la[1] % c
        _, r = self._split(la, c)
        if not r[0]:
            return {}, r[1]
        rexpr = self.rebuild(r, e.dtype)
        bd = self.bound(rexpr)
        if bd is not None and bd[0] is not None and bd[1] is not None and \
                bd[0] // c == bd[1] // c:
            return _lin_add(r, ({}, -(bd[0] // c) * c), 1)
        # (y % m) % c -> y % c when c divides m
        if len(r[0]) == 1 and r[1] == 0:
            (atom, coef), = r[0].values()
            m = E.as_const_int(atom.b) if isinstance(atom, E.FloorMod) else None
            if coef == 1 and m is not None and m > 0 and m % c == 0:
                return self._atom(E.FloorMod(atom.a, E.const(c, e.dtype)))
        return self._atom(E.FloorMod(rexpr, E.const(c, e.dtype)))

    def rebuild(self, lin: Lin, dtype: str = "int32") -> E.PrimExpr:
        """Expression of a linear form, terms in first-appearance order, constant last (first
        when no term is positive: ``9 - i``)."""
        terms, const = lin
        out: E.PrimExpr | None = None
        if const > 0 and terms and all(coef <= 0 for _a, coef in terms.values()):
            # no positive term: the constant leads (``9 - i``, not ``i * -1 + 9``)
            out = E.const(const, dtype)
            const = 0
        for atom, coef in terms.values():
            if coef == 0:
                continue
            if out is None:
                out = atom if coef == 1 else E.Mul(atom, E.const(coef, dtype))
                continue
            mag = abs(coef)
            t = atom if mag == 1 else E.Mul(atom, E.const(mag, dtype))
            out = E.Add(out, t) if coef > 0 else E.Sub(out, t)
        if out is None:
            return E.const(const, dtype)
        if const > 0:
            out = E.Add(out, E.const(const, dtype))
        elif const < 0:
            out = E.Sub(out, E.const(-const, dtype))
        return out

    # ----------------------------------------------------------- bounds
    def bound(self, e: E.PrimExpr) -> tuple | None:
        """Inclusive integer bounds (lo, hi) of ``e`` (either may be None = unbounded)."""
        if not _scalar_int(e):
            return None
        return self._bound_lin(self.linear(e))

    def _bound_lin(self, lin: Lin) -> tuple:
        got = self._bound_terms(lin)
        for alt in (self._absorb_into_quotients(lin), self._refold_quotients(lin)):
            if alt is None:
                continue
            lo, hi = self._bound_terms(alt)
            got = (got[0] if lo is None else lo if got[0] is None else max(lo, got[0]),
                   got[1] if hi is None else hi if got[1] is None else min(hi, got[1]))
        return got

    def _refold_quotients(self, lin: Lin) -> Lin | None:
        """``lin`` with each quotient ``N // c`` that drops a common factor together with
        small terms written so (``(o * 8 + k) // 16`` as ``o // 2`` for ``k`` in [0, 7]), for
        bounds only: ``(o * 8 + k) // 16 - o // 2`` is 0. The simplifier keeps the quotient
        (the digit of ``o * 8 + k`` the race and vector proofs read); None when none is."""
        terms, const = lin
        if len(terms) < 2:
            return None
        out: Lin = ({}, const)
        changed = False
        for key, (atom, k) in terms.items():
            c = E.as_const_int(atom.b) if isinstance(atom, E.FloorDiv) else None
            folded = None
            if c is not None and c > 1 and _scalar_int(atom):
                x, r = self._split(self.linear(atom.a), c)
                if r[0]:
                    folded = self._common_factor_quotient(r, c, atom.dtype, with_terms=True)
                    if folded is not None:
                        folded = _lin_add(x, folded, 1)
            if folded is None:
                out = _lin_add(out, ({key: (atom, k)}, 0), 1)
            else:
                out = _lin_add(out, _lin_scale(folded, k), 1)
                changed = True
        return out if changed else None

    def _absorb_into_quotients(self, lin: Lin) -> Lin | None:
        """``k * (N // c) + m * x`` as ``k * ((N + (m // k) * c * x) // c)`` for a variable
        ``x`` of ``N`` with ``k`` dividing ``m``: the same integers, bounded together
        (``(o * 18 + c) // 4 - o * 4`` is ``(o * 2 + c) // 4``, at most 4 for ``o <= 1``,
        ``c <= 17``, where the parts apart reach 8); None when no term is absorbed."""
        terms, const = lin
        divs = [(key, atom, k) for key, (atom, k) in terms.items()
                if isinstance(atom, E.FloorDiv) and (E.as_const_int(atom.b) or 0) > 0]
        if not divs or len(terms) < 2:
            return None
        out = dict(terms)
        changed = False
        for key, atom, k in divs:
            inside = {id(v) for v in collect_vars(atom.a)}
            num = atom.a
            for k2, (x, m) in list(out.items()):
                if k2 != key and isinstance(x, E.Var) and id(x) in inside and m % k == 0:
                    num = num + x * E.const((m // k) * E.as_const_int(atom.b), x.dtype)
                    del out[k2]
            if num is not atom.a:
                new = E.FloorDiv(self.rebuild(self.linear(num), atom.dtype), atom.b)
                del out[key]
                out[_key(new)] = (new, k)
                changed = True
        return (out, const) if changed else None

    def _bound_terms(self, lin: Lin) -> tuple:
        terms, const = lin
        lo: int | None = const
        hi: int | None = const
        for atom, coef in terms.values():
            b = self._bound_atom(atom)
            alo, ahi = b if b is not None else (None, None)
            if coef < 0:
                alo, ahi = ahi, alo
            lo = None if lo is None or alo is None else lo + coef * alo
            hi = None if hi is None or ahi is None else hi + coef * ahi
        return lo, hi

    def _bound_atom(self, a: E.PrimExpr) -> tuple | None:
        if isinstance(a, E.Var):
            return self.ranges.get(a)
        if isinstance(a, E.IntImm):
            return a.value, a.value
        if isinstance(a, E.FloorDiv):
            c = E.as_const_int(a.b)
            if c is None or c <= 0:
                return None
            lo, hi = self._bound_lin(self.linear(a.a))
            return (None if lo is None else lo // c, None if hi is None else hi // c)
        if isinstance(a, E.FloorMod):
            c = E.as_const_int(a.b)
            if c is None or c <= 0:
                return None
            lo, hi = self._bound_lin(self.linear(a.a))
            if lo is not None and hi is not None and lo // c == hi // c:
                return lo % c, hi % c
            return 0, c - 1
        if isinstance(a, (E.Min, E.Max)):
            ba, bb = self.bound(a.a), self.bound(a.b)
            if ba is None or bb is None:
                return None
            f = min if isinstance(a, E.Min) else max
            lo = None if ba[0] is None or bb[0] is None else f(ba[0], bb[0])
            hi = None if ba[1] is None or bb[1] is None else f(ba[1], bb[1])
            if isinstance(a, E.Min):
                lo = None if ba[0] is None or bb[0] is None else min(ba[0], bb[0])
                hi = ba[1] if bb[1] is None else (bb[1] if ba[1] is None else min(ba[1], bb[1]))
            else:
                hi = None if ba[1] is None or bb[1] is None else max(ba[1], bb[1])
                lo = ba[0] if bb[0] is None else (bb[0] if ba[0] is None else max(ba[0], bb[0]))
            return lo, hi
        if isinstance(a, E.Mul):
            ba, bb = self.bound(a.a), self.bound(a.b)
            if ba is None or bb is None or None in ba or None in bb:
                return None
            prods = [x * y for x in ba for y in bb]
            return min(prods), max(prods)
        return None

    def can_prove(self, cond: E.PrimExpr) -> bool:
        """True when ``cond`` holds for every value in the known ranges."""
        s = self.simplify(cond)
        return isinstance(s, E.IntImm) and s.value == 1

    # ----------------------------------------------------------- simplify
    def simplify(self, e: Any) -> Any:
        if isinstance(e, E.PrimExpr):
            return self._simplify_expr(e)
        return _StmtSimplifier(self).visit(e)

    def _simplify_expr(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, (E.IntImm, E.FloatImm, E.Var, E.StringImm)):
            return e
        if _scalar_int(e) and isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod,
                                             E.Min, E.Max)):
            return self.rebuild(self.linear(e), e.dtype)
        return self._simplify_other(e)

    def _simplify_other(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, E.CmpOp) and not isinstance(e, (E.And, E.Or)):
            return self._cmp(e)
        if isinstance(e, (E.And, E.Or)):
            a, b = self.simplify(e.a), self.simplify(e.b)
            ca, cb = _bool_const(a), _bool_const(b)
            if isinstance(e, E.And):
                if ca is False or cb is False:
                    return E.IntImm("bool", 0)
                if ca is True:
                    return b
                if cb is True:
                    return a
                merged = _conjunction(a, b)
                if merged is not None:
                    return merged
            else:
                if ca is True or cb is True:
                    return E.IntImm("bool", 1)
                if ca is False:
                    return b
                if cb is False:
                    return a
            return e if a is e.a and b is e.b else type(e)(a, b)
        if isinstance(e, E.Not):
            a = self.simplify(e.a)
            ca = _bool_const(a)
            if ca is not None:
                return E.IntImm("bool", int(not ca))
            return e if a is e.a else E.Not(a)
        if isinstance(e, E.BinaryOp):
            a, b = self.simplify(e.a), self.simplify(e.b)
            folded = _fold_float(type(e), a, b)
            if folded is not None:
                return folded
            return e if a is e.a and b is e.b else type(e)(a, b)
        if isinstance(e, E.Select):
            c = self.simplify(e.condition)
            cc = _bool_const(c)
            t, f = self.simplify(e.true_value), self.simplify(e.false_value)
            if cc is True:
                return t
            if cc is False:
                return f
            if c is e.condition and t is e.true_value and f is e.false_value:
                return e
            return E.Select(c, t, f)
        return _ExprChildren(self).generic_visit(e)

    def _cmp(self, e: E.CmpOp) -> E.PrimExpr:
        a, b = self.simplify(e.a), self.simplify(e.b)
        if _scalar_int(a) and _scalar_int(b):
            d = self.bound(self._sub(a, b))  # bounds of a - b
            if d is not None:
                lo, hi = d
                t = type(e)
                verdict = None
                if t is E.LT:
                    verdict = True if hi is not None and hi < 0 else \
                        (False if lo is not None and lo >= 0 else None)
                elif t is E.LE:
                    verdict = True if hi is not None and hi <= 0 else \
                        (False if lo is not None and lo > 0 else None)
                elif t is E.GT:
                    verdict = True if lo is not None and lo > 0 else \
                        (False if hi is not None and hi <= 0 else None)
                elif t is E.GE:
                    verdict = True if lo is not None and lo >= 0 else \
                        (False if hi is not None and hi < 0 else None)
                elif t is E.EQ:
                    if lo is not None and lo == hi == 0:
                        verdict = True
                    elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
                        verdict = False
                elif t is E.NE:
                    if lo is not None and lo == hi == 0:
                        verdict = False
                    elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
                        verdict = True
                if verdict is not None:
                    return E.IntImm("bool", int(verdict))
        fa, fb = _fconst(a), _fconst(b)
        if fa is not None and fb is not None:
            ops = {E.LT: fa < fb, E.LE: fa <= fb, E.GT: fa > fb, E.GE: fa >= fb,
                   E.EQ: fa == fb, E.NE: fa != fb}
            return E.IntImm("bool", int(ops[type(e)]))
        unfolded = _floordiv_bound(type(e), a, b)
        if unfolded is not None:
            return self._cmp(unfolded)
        return e if a is e.a and b is e.b else type(e)(a, b)


def _conjuncts(e) -> list:
    return _conjuncts(e.a) + _conjuncts(e.b) if isinstance(e, E.And) else [e]


def _conjunction(a, b):
    """``a and b`` with a term repeated once only, and ``x < c * k and x % c < m`` (``m <
    c``) tightened to ``x < c * (k - 1) + m`` (TVM's form: the last ``c - m`` values below
    ``c * k`` fail the second term); None when nothing changes."""
    from engine.ir.structural import structural_equal
    terms: list = []
    for t in _conjuncts(a) + _conjuncts(b):
        if not any(structural_equal(t, u) for u in terms):
            terms.append(t)
    changed = len(terms) != len(_conjuncts(a)) + len(_conjuncts(b))
    for pos, t in enumerate(terms):
        if not (isinstance(t, E.LT) and isinstance(t.b, E.IntImm)):
            continue
        for u in terms:
            if isinstance(u, E.LT) and isinstance(u.a, E.FloorMod) and \
                    isinstance(u.a.b, E.IntImm) and isinstance(u.b, E.IntImm) and \
                    structural_equal(u.a.a, t.a):
                c, m, bound = u.a.b.value, u.b.value, t.b.value
                if c > 0 and 0 < m < c and bound % c == 0:
                    terms[pos] = E.LT(t.a, E.const(bound - c + m, t.b.dtype))
                    changed = True
    if not changed:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = E.And(out, t)
    return out


def _floordiv_bound(t, a, b):
    """``x // c < k`` as ``x < c * k`` (and <=, >, >= alike) for a constant ``c > 0``: the
    same integers, and TVM's canonical form (``i // 128 < 127`` is ``i < 16256``)."""
    if not (isinstance(a, E.FloorDiv) and isinstance(a.b, E.IntImm) and a.b.value > 0
            and isinstance(b, E.IntImm) and _scalar_int(a.a) and t in (E.LT, E.LE, E.GT, E.GE)):
        return None
    c, k, x = a.b.value, b.value, a.a
    if t is E.LT:
        return E.LT(x, E.const(c * k, x.dtype))
    if t is E.LE:
        return E.LT(x, E.const(c * (k + 1), x.dtype))
    if t is E.GT:
        return E.GE(x, E.const(c * (k + 1), x.dtype))
    return E.GE(x, E.const(c * k, x.dtype))


def _fconst(e):
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    return None


def _bool_const(e) -> bool | None:
    if isinstance(e, E.IntImm) and e.dtype == "bool":
        return bool(e.value)
    return None


def _fold_float(t, a, b):
    if not (isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm) and a.dtype == b.dtype):
        if t in (E.Add,) and isinstance(b, E.FloatImm) and b.value == 0.0 and \
                is_float(a.dtype) and "x" not in a.dtype:
            return a
        if t is E.Mul and isinstance(b, E.FloatImm) and b.value == 1.0:
            return a
        return None
    x, y = a.value, b.value
    try:
        if t is E.Add:
            v = x + y
        elif t is E.Sub:
            v = x - y
        elif t is E.Mul:
            v = x * y
        elif t is E.Div:
            v = x / y
        elif t is E.Min:
            v = min(x, y)
        elif t is E.Max:
            v = max(x, y)
        else:
            return None
    except ZeroDivisionError:
        return None
    if a.dtype == "float32":
        import numpy as np
        v = float(np.float32(v))
    return E.FloatImm(a.dtype, v)


def _lin_add(a: Lin, b: Lin, sign: int) -> Lin:
    terms = dict(a[0])
    for k, (atom, coef) in b[0].items():
        if k in terms:
            c = terms[k][1] + sign * coef
            if c == 0:
                del terms[k]
            else:
                terms[k] = (terms[k][0], c)
        else:
            terms[k] = (atom, sign * coef)
    return terms, a[1] + sign * b[1]


def _lin_scale(a: Lin, c: int) -> Lin:
    if c == 0:
        return {}, 0
    return {k: (atom, coef * c) for k, (atom, coef) in a[0].items()}, a[1] * c


class _ExprChildren(Mutator):
    """Simplify the expressions directly below a node (with the analyzer's known ranges)."""

    def __init__(self, an: Analyzer):
        self.an = an

    def visit(self, n):
        if isinstance(n, E.PrimExpr):
            return self.an.simplify(n)
        return super().visit(n)


class _StmtSimplifier(_ExprChildren):
    """Simplify every expression inside statements, learning loop ranges on the way."""

    def visit_For(self, s):
        lo, ext = E.as_const_int(s.min), E.as_const_int(s.extent)
        saved = self.an.ranges.get(s.loop_var)
        if lo is not None and ext is not None and ext > 0:
            self.an.ranges[s.loop_var] = (lo, lo + ext - 1)
        try:
            return self.generic_visit(s)
        finally:
            if saved is None:
                self.an.ranges.pop(s.loop_var, None)
            else:
                self.an.ranges[s.loop_var] = saved


def simplify(e: Any, var_ranges: Mapping | None = None) -> Any:
    """Simplify an expression (or every expression inside a statement).

    ``var_ranges`` maps variables to inclusive ``(min, max)`` bounds or to Ranges; loop
    variables of statements being simplified are learned automatically.
    """
    return Analyzer(var_ranges).simplify(e)
