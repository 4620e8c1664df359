"""Simplifications used by lowering (added next to :mod:`engine.arith.simplify`).

:func:`lower_simplify` runs :func:`engine.arith.simplify` and then folds what lowering
produces most often:

* ``(x // c) * c + x % c -> x`` (a fused loop's flattened index);
* constants: ``Cast`` of a constant, comparisons/``And``/``Or``/``Not``/``Select`` of
  constants, ``(x + c1) + c2 -> x + (c1 + c2)``, ``(x * c1) * c2``;
* integer division by a positive constant ``c`` of a sum whose terms split into multiples
  of ``c`` and a remainder provably in ``[0, c)``, using the ranges of enclosing loop
  variables: ``(i * 128 + j) // 128 -> i`` and ``(i * 128 + j) % 128 -> j`` when
  ``0 <= j < 128`` (the patterns split/fuse leave behind);
* statements: ``IfThenElse`` on a constant condition, loops of extent 0 (removed) and 1
  (the variable is replaced by the loop's minimum, for serial/unrolled loops);
* vector indices (:mod:`engine.arith.vector_index`): ``Ramp(b, s, L) // c ->
  Broadcast(b // c, L)`` and ``Ramp(b, s, L) % c -> Ramp(b % c, s, L)`` when the lanes
  provably stay between two multiples of ``c`` (divisibility of ``b`` and the ranges of
  enclosing loops), then ``Broadcast``/``Ramp`` arithmetic folds, so that::

      B_global[T.Ramp(x * 16, 1, 16) // T.Broadcast(64, 16) * T.Broadcast(16384, 16)
               + T.Broadcast(k * 64, 16) + T.Ramp(x * 16, 1, 16) % T.Broadcast(64, 16)]

  becomes ``B_global[T.Ramp(x // 4 * 16384 + k * 64 + x % 4 * 16, 1, 16)]`` (one
  contiguous vector store). Nothing is rewritten when it cannot be proven.

``lower_simplify(n, var_ranges={var: (lo, hi)})`` adds known inclusive ranges of free
variables (e.g. the loops enclosing a vectorized loop body simplified on its own).
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import is_bool, is_float, is_int, lanes_of
from engine.ir.functor import Mutator, substitute

from .simplify import simplify
from .vector_index import fold_vector_arith, ramp_divmod


def _c(e: Any) -> int | None:
    return e.value if isinstance(e, E.IntImm) and lanes_of(e.dtype) == 1 else None


def _wrap(dtype: str, v: int) -> int:
    if is_bool(dtype):
        return 1 if v else 0
    bits = int(dtype.lstrip("uint"))
    v &= (1 << bits) - 1
    if not dtype.startswith("uint") and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


class _LowerSimplifier(Mutator):
    def __init__(self, var_ranges: Any = None) -> None:
        self.ranges: dict[int, tuple[int, int]] = {}
        self.range_vars: dict[int, E.Var] = {}
        for v, r in (var_ranges or {}).items():
            if hasattr(r, "extent"):  # a Range
                lo, ext = E.as_const_int(r.min), E.as_const_int(r.extent)
                hi = None if lo is None or ext is None else lo + ext - 1
            else:
                lo, hi = E.as_const_int(E.convert(r[0])), E.as_const_int(E.convert(r[1]))
            if lo is not None and hi is not None and lo <= hi:
                self.ranges[id(v)] = (lo, hi)
                self.range_vars[id(v)] = v

    # ---- ranges --------------------------------------------------------------
    def bound(self, e: E.PrimExpr) -> tuple[int, int] | None:
        """A conservative integer interval [lo, hi] of ``e``, or None if unknown."""
        c = _c(e)
        if c is not None:
            return (c, c)
        if isinstance(e, E.Var):
            return self.ranges.get(id(e))
        if isinstance(e, (E.Add, E.Sub, E.Mul)):
            a, b = self.bound(e.a), self.bound(e.b)
            if a is None or b is None:
                return None
            if isinstance(e, E.Add):
                return (a[0] + b[0], a[1] + b[1])
            if isinstance(e, E.Sub):
                return (a[0] - b[1], a[1] - b[0])
            ps = [x * y for x in a for y in b]
            return (min(ps), max(ps))
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            a, cb = self.bound(e.a), _c(e.b)
            if cb is None or cb <= 0:
                return None
            if isinstance(e, E.FloorMod):
                if a is not None and 0 <= a[0] and a[1] < cb:
                    return a
                return (0, cb - 1)
            if a is None:
                return None
            return (a[0] // cb, a[1] // cb)
        if isinstance(e, (E.Min, E.Max)):
            a, b = self.bound(e.a), self.bound(e.b)
            if a is None or b is None:
                return None
            f = min if isinstance(e, E.Min) else max
            return (f(a[0], b[0]), f(a[1], b[1]))
        if isinstance(e, E.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
            return self.bound(e.value)
        return None

    # ---- statements ------------------------------------------------------------
    def visit_For(self, s: S.For):
        mn, ext = self.visit(s.min), self.visit(s.extent)
        cm, ce = _c(mn), _c(ext)
        if ce is not None and ce <= 0:
            return S.Evaluate(E.IntImm("int32", 0))
        if ce == 1 and s.kind in (S.ForKind.SERIAL, S.ForKind.UNROLLED) and not s.annotations:
            return self.visit(substitute(s.body, {s.loop_var: mn}))
        saved = self.ranges.get(id(s.loop_var))
        self.range_vars[id(s.loop_var)] = s.loop_var
        if cm is not None and ce is not None:
            self.ranges[id(s.loop_var)] = (cm, cm + ce - 1)
        else:
            lo, hi = self.bound(mn), self.bound(ext)
            if lo is not None and hi is not None:
                self.ranges[id(s.loop_var)] = (lo[0], lo[1] + hi[1] - 1)
        body = self.visit(s.body)
        if saved is None:
            self.ranges.pop(id(s.loop_var), None)
        else:
            self.ranges[id(s.loop_var)] = saved
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(s.loop_var, mn, ext, s.kind, body, s.annotations, s.thread_tag)

    def visit_IfThenElse(self, s: S.IfThenElse):
        cond = self.visit(s.condition)
        c = _c(cond)
        if c is not None:
            branch = s.then_case if c else s.else_case
            return self.visit(branch) if branch is not None else S.Evaluate(E.IntImm("int32", 0))
        then, els = self.visit(s.then_case), self.visit(s.else_case)
        if cond is s.condition and then is s.then_case and els is s.else_case:
            return s
        return S.IfThenElse(cond, then, els)

    # ---- expressions -------------------------------------------------------------
    def visit_Cast(self, e: E.Cast):
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        c = _c(v) if lanes_of(e.dtype) == 1 else None
        if c is not None and (is_int(e.dtype) or is_bool(e.dtype)):
            return E.IntImm(e.dtype, _wrap(e.dtype, c))
        if c is not None and is_float(e.dtype):
            return E.FloatImm(e.dtype, float(c))
        return e if v is e.value else E.Cast(e.dtype, v)

    def _cmp(self, e):
        e = self.generic_visit(e)
        a, b = _c(e.a), _c(e.b)
        if a is not None and b is not None:
            r = {E.EQ: a == b, E.NE: a != b, E.LT: a < b, E.LE: a <= b, E.GT: a > b,
                 E.GE: a >= b}[type(e)]
            return E.IntImm("bool", int(r))
        if isinstance(e, (E.EQ, E.LE, E.GE)) and e.a is e.b and is_int(e.a.dtype):
            return E.IntImm("bool", 1)
        ba, bb = self.bound(e.a), self.bound(e.b)
        if ba is not None and bb is not None:
            t = type(e)
            if t is E.LT and ba[1] < bb[0] or t is E.LE and ba[1] <= bb[0] \
                    or t is E.GT and ba[0] > bb[1] or t is E.GE and ba[0] >= bb[1]:
                return E.IntImm("bool", 1)
            if t is E.LT and ba[0] >= bb[1] or t is E.LE and ba[0] > bb[1] \
                    or t is E.GT and ba[1] <= bb[0] or t is E.GE and ba[1] < bb[0]:
                return E.IntImm("bool", 0)
        return e

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _cmp

    def visit_And(self, e):
        e = self.generic_visit(e)
        a, b = _c(e.a), _c(e.b)
        if a is not None:
            return e.b if a else E.IntImm(e.dtype, 0)
        if b is not None:
            return e.a if b else E.IntImm(e.dtype, 0)
        return e

    def visit_Or(self, e):
        e = self.generic_visit(e)
        a, b = _c(e.a), _c(e.b)
        if a is not None:
            return E.IntImm(e.dtype, 1) if a else e.b
        if b is not None:
            return E.IntImm(e.dtype, 1) if b else e.a
        return e

    def visit_Not(self, e):
        e = self.generic_visit(e)
        a = _c(e.a)
        if a is not None and is_bool(e.a.dtype):
            return E.IntImm("bool", 0 if a else 1)
        return e

    def visit_Select(self, e):
        e = self.generic_visit(e)
        c = _c(e.condition)
        if c is not None:
            return e.true_value if c else e.false_value
        return e

    # ---- vector indices (engine.arith.vector_index) -------------------------------
    def _scalar(self, e: E.PrimExpr) -> E.PrimExpr:
        """Simplify a scalar built by a vector rule (with the known loop ranges)."""
        if lanes_of(e.dtype) != 1:
            return self._vector(e)
        rng = {self.range_vars[k]: r for k, r in self.ranges.items() if k in self.range_vars}
        return self.visit(simplify(e, rng))

    def _vector(self, e: E.PrimExpr) -> E.PrimExpr:
        """Simplify the scalar parts of a Ramp/Broadcast a vector rule built."""
        if isinstance(e, E.Ramp):
            base, stride = self._scalar(e.base), self._scalar(e.stride)
            return E.Ramp(base, stride, e.lanes)
        if isinstance(e, E.Broadcast):
            return E.Broadcast(self._scalar(e.value), e.lanes)
        return e

    def _vec_rules(self, e: E.PrimExpr) -> E.PrimExpr | None:
        """Ramp/Broadcast folds and the Ramp // c, Ramp % c rules, or None."""
        if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.a, E.Ramp):
            d = e.b.value if isinstance(e.b, E.Broadcast) else e.b
            c = _c(d)
            if c is not None and c > 0 and lanes_of(e.b.dtype) in (1, e.a.lanes):
                out = ramp_divmod(type(e), e.a, c, self._bound_scalar)
                if out is not None:
                    return self._vector(out)
        out = fold_vector_arith(e)
        return self._vector(out) if out is not None else None

    def _bound_scalar(self, e: E.PrimExpr):
        return self.bound(e) if lanes_of(e.dtype) == 1 else None

    def visit_Add(self, e):
        e = self.generic_visit(e)
        if lanes_of(e.dtype) > 1:
            out = self._vec_rules(e)
            return e if out is None else out
        a, b = e.a, e.b
        if is_int(e.dtype) and lanes_of(e.dtype) == 1:
            # (x // c) * c + x % c -> x   (what a fused loop's flattened index looks like)
            if isinstance(a, E.Mul) and isinstance(a.a, E.FloorDiv) and isinstance(b, E.FloorMod):
                c1, c2, c3 = _c(a.b), _c(a.a.b), _c(b.b)
                if c1 is not None and c1 == c2 == c3 and c1 > 0:
                    from engine.ir.structural import structural_equal
                    if structural_equal(a.a.a, b.a):
                        return b.a
            cb = _c(b)
            if cb == 0:
                return a
            if _c(a) == 0:
                return b
            if cb is not None and isinstance(a, E.Add) and _c(a.b) is not None:
                return E.Add(a.a, E.IntImm(e.dtype, _wrap(e.dtype, _c(a.b) + cb)))
            if cb is not None and isinstance(a, E.Sub) and _c(a.b) is not None:
                return self.visit_Add(E.Add(a.a, E.IntImm(e.dtype, _wrap(e.dtype, cb - _c(a.b)))))
            if _c(a) is not None and cb is None:
                return E.Add(b, a)
            if cb is not None and _c(a) is not None:
                return E.IntImm(e.dtype, _wrap(e.dtype, _c(a) + cb))
        return e

    def visit_Sub(self, e):
        e = self.generic_visit(e)
        if lanes_of(e.dtype) > 1:
            out = self._vec_rules(e)
            return e if out is None else out
        if is_int(e.dtype) and lanes_of(e.dtype) == 1:
            ca, cb = _c(e.a), _c(e.b)
            if ca is not None and cb is not None:
                return E.IntImm(e.dtype, _wrap(e.dtype, ca - cb))
            if cb is not None:
                return self.visit_Add(E.Add(e.a, E.IntImm(e.dtype, _wrap(e.dtype, -cb))))
            if e.a is e.b:
                return E.IntImm(e.dtype, 0)
        return e

    def visit_Mul(self, e):
        e = self.generic_visit(e)
        if lanes_of(e.dtype) > 1:
            out = self._vec_rules(e)
            return e if out is None else out
        if is_int(e.dtype) and lanes_of(e.dtype) == 1:
            ca, cb = _c(e.a), _c(e.b)
            if ca is not None and cb is not None:
                return E.IntImm(e.dtype, _wrap(e.dtype, ca * cb))
            if ca is not None:
                e, ca, cb = E.Mul(e.b, e.a), None, ca
            if cb == 1:
                return e.a
            if cb == 0:
                return E.IntImm(e.dtype, 0)
            if cb is not None and isinstance(e.a, E.Mul) and _c(e.a.b) is not None:
                return E.Mul(e.a.a, E.IntImm(e.dtype, _wrap(e.dtype, _c(e.a.b) * cb)))
        return e

    def _terms(self, e: E.PrimExpr) -> list:
        if isinstance(e, E.Add):
            return self._terms(e.a) + self._terms(e.b)
        return [e]

    def _divisible(self, t: E.PrimExpr, c: int) -> E.PrimExpr | None:
        """``t / c`` when t is a constant multiple of c (``x * (k*c)`` or a constant)."""
        ct = _c(t)
        if ct is not None:
            return E.IntImm(t.dtype, ct // c) if ct % c == 0 else None
        if isinstance(t, E.Mul) and _c(t.b) is not None and _c(t.b) % c == 0:
            k = _c(t.b) // c
            return t.a if k == 1 else E.Mul(t.a, E.IntImm(t.dtype, k))
        return None

    def _divmod(self, e):
        e = self.generic_visit(e)
        if lanes_of(e.dtype) > 1:
            out = self._vec_rules(e)
            return e if out is None else out
        c = _c(e.b)
        if c is None or c <= 0 or not is_int(e.dtype) or lanes_of(e.dtype) != 1:
            return e
        if c == 1:
            return e.a if isinstance(e, E.FloorDiv) else E.IntImm(e.dtype, 0)
        ca = _c(e.a)
        if ca is not None:
            return E.IntImm(e.dtype, ca // c if isinstance(e, E.FloorDiv) else ca % c)
        quot, rest = [], []
        for t in self._terms(e.a):
            q = self._divisible(t, c)
            (quot.append(q) if q is not None else rest.append(t))
        rsum = None
        for t in rest:
            rsum = t if rsum is None else E.Add(rsum, t)
        rb = self.bound(rsum) if rsum is not None else (0, 0)
        if rb is None or not (0 <= rb[0] and rb[1] < c):
            return e
        if isinstance(e, E.FloorMod):
            return rsum if rsum is not None else E.IntImm(e.dtype, 0)
        out = None
        for q in quot:
            out = q if out is None else E.Add(out, q)
        return out if out is not None else E.IntImm(e.dtype, 0)

    visit_FloorDiv = visit_FloorMod = _divmod


def lower_simplify(n: Any, var_ranges: Any = None) -> Any:
    """Simplify an expression or statement for lowering (see the module docstring).

    ``var_ranges`` (optional) maps variables to inclusive ``(lo, hi)`` bounds or to
    Ranges: known ranges of variables that are free in ``n`` (enclosing loops).
    """
    return _LowerSimplifier(var_ranges).visit(simplify(n, var_ranges))
