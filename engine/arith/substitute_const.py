"""Substitute a constant for a variable in simplified IR, folding what it touches.

:func:`substitute_const` is what unrolling does once per copy
(:func:`engine.lower.legalize.expand_unrolled`): the loop body has been simplified once
(:func:`engine.arith.lower_simplify`), so its integer index arithmetic is in canonical
linear form — terms in first-appearance order, constant last::

    C[i_0 * 32768 + i_1 * 4096 + i_2 * 1024 + j_0 * 64 + 48]

With ``i_2 = 3`` the term ``i_2 * 1024`` joins the constant, the other terms keep their
order — exactly what simplifying the substituted copy again would give::

    C[i_0 * 32768 + i_1 * 4096 + j_0 * 64 + 3120]

Only linear chains (``+``, ``-``, variables, ``variable * constant``, constants), ``Ramp``,
``Broadcast``, loads, stores, sequences, loops and conditions (whose bounds and condition
do not use the variable) and floating-point arithmetic around them are handled here. When
the variable appears anywhere else (a division, a condition, a loop bound, ...), the answer
is ``None``: the caller substitutes and simplifies the whole copy (the same result, about
3x slower for the unrolled micro-kernel of the best matmul).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import is_float, is_int, lanes_of
from engine.ir.functor import _kids


class _Unhandled(Exception):
    """The variable appears where only a full simplification gives the canonical form."""


def substitute_const(n: Any, var: E.Var, value: int, memo: dict | None = None) -> Any:
    """``n`` with ``var`` replaced by the integer ``value`` and the linear arithmetic
    around it folded, or None when that needs a full simplification (see the module
    docstring). Subtrees without ``var`` are returned as the same objects.

    ``memo`` (optional, a dict) remembers which nodes of ``n`` use ``var``: pass the same
    dict for every copy of one body (and keep ``n`` alive meanwhile)."""
    f = _Folder(var, value, memo)
    try:
        return f.stmt(n) if isinstance(n, S.Stmt) else f.expr(n)
    except _Unhandled:
        return None


class _Folder:
    def __init__(self, var: E.Var, value: int, memo: dict | None = None):
        self.var = var
        self.value = value
        # id(node) -> node contains var
        self.seen: dict[int, bool] = memo if memo is not None else {}

    # ------------------------------------------------------------------ queries
    def has_var(self, n: Any) -> bool:
        if isinstance(n, E.Var):
            return n is self.var
        if isinstance(n, (E.IntImm, E.FloatImm, E.StringImm)):
            return False
        k = id(n)
        hit = self.seen.get(k)
        if hit is None:
            hit = any(self.has_var(c) for c in _children(n))
            self.seen[k] = hit
        return hit

    # ------------------------------------------------------------------ statements
    def stmt(self, s: S.Stmt) -> S.Stmt:
        if not self.has_var(s):
            return s
        if isinstance(s, S.SeqStmt):
            return S.SeqStmt(tuple(self.stmt(x) for x in s.seq))
        if isinstance(s, S.BufferStore):
            return S.BufferStore(s.buffer, self.expr(s.value),
                                 tuple(self.expr(i) for i in s.indices))
        if isinstance(s, S.Evaluate):
            return S.Evaluate(self.expr(s.value))
        if isinstance(s, S.For) and not self.has_var(s.min) and not self.has_var(s.extent):
            return dataclasses.replace(s, body=self.stmt(s.body))
        if isinstance(s, S.IfThenElse) and not self.has_var(s.condition):
            # e.g. a reduction's "if k == 0: init" around an unrolled copy
            return dataclasses.replace(
                s, then_case=self.stmt(s.then_case),
                else_case=None if s.else_case is None else self.stmt(s.else_case))
        raise _Unhandled(type(s).__name__)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: E.PrimExpr) -> E.PrimExpr:
        if not self.has_var(e):
            return e
        if isinstance(e, E.Var):
            return E.const(self.value, e.dtype)
        if is_int(e.dtype) and lanes_of(e.dtype) == 1 and isinstance(e, (E.Add, E.Sub, E.Mul)):
            return self.linear(e)
        if isinstance(e, E.BufferLoad):
            return E.BufferLoad(e.buffer, tuple(self.expr(i) for i in e.indices))
        if isinstance(e, E.Ramp):
            return E.Ramp(self.expr(e.base), self.expr(e.stride), e.lanes)
        if isinstance(e, E.Broadcast):
            return E.Broadcast(self.expr(e.value), e.lanes)
        if is_float(e.dtype) and isinstance(e, (E.Add, E.Sub, E.Mul)):
            return type(e)(self.expr(e.a), self.expr(e.b))
        raise _Unhandled(type(e).__name__)

    def linear(self, e: E.PrimExpr) -> E.PrimExpr:
        """Fold a canonical chain ``t1 +/- t2 +/- ... +/- c`` where one term is the
        variable (or the variable times a constant)."""
        terms: list[tuple[int, E.PrimExpr]] = []   # (sign, term) in order
        node = e
        const = 0
        while isinstance(node, (E.Add, E.Sub)):
            sign = 1 if isinstance(node, E.Add) else -1
            terms.append((sign, node.b))
            node = node.a
        terms.append((1, node))
        terms.reverse()
        kept: list[tuple[int, E.PrimExpr]] = []
        for sign, t in terms:
            c = E.as_const_int(t)
            if c is not None:
                const += sign * c
                continue
            if not self.has_var(t):
                kept.append((sign, t))
                continue
            if t is self.var:
                const += sign * self.value
                continue
            if isinstance(t, E.Mul) and t.a is self.var and E.as_const_int(t.b) is not None:
                const += sign * self.value * E.as_const_int(t.b)
                continue
            raise _Unhandled("a term with the variable inside")
        dtype = e.dtype

        def negated(sign: int, t: E.PrimExpr) -> E.PrimExpr | None:
            """``-t`` written without a sign (None when the term is not negative)."""
            if sign < 0:
                return t
            c = E.as_const_int(t.b) if isinstance(t, E.Mul) else None
            if c is None or c >= 0:
                return None
            return t.a if c == -1 else E.Mul(t.a, E.const(-c, dtype))
        if kept and const > 0 and all(negated(s, t) is not None for s, t in kept):
            # no positive term: the constant leads, as the simplifier writes it (1 - i1)
            out_c: E.PrimExpr = E.const(const, dtype)
            for s, t in kept:
                out_c = E.Sub(out_c, negated(s, t))
            return out_c
        if kept and kept[0][0] < 0:
            # the first term left is subtracted: canonical form starts with "atom * -c"
            t = kept[0][1]
            c = E.as_const_int(t.b) if isinstance(t, E.Mul) else None
            kept[0] = (1, E.Mul(t.a, E.const(-c, dtype)) if c is not None
                       else E.Mul(t, E.const(-1, dtype)))
        out: E.PrimExpr | None = None
        for sign, t in kept:
            out = t if out is None else (E.Add(out, t) if sign > 0 else E.Sub(out, t))
        if out is None:
            return E.const(const, dtype)
        # lowering's simplifier writes "x - c" as "x + -c"
        return E.Add(out, E.const(const, dtype)) if const else out


def _children(n: Any):
    """The IR nodes directly below ``n`` (expressions, statements, tuples of them)."""
    return _kids(n, [])
