"""Bounds proof: every buffer access of a program provably stays inside its buffer.

Runs on the loop form (after blocks -> loops, before flattening), where every access still
has its buffer's shape. For every ``BufferLoad`` and ``BufferStore``, the interval of each
index (:class:`engine.arith.guarded.GuardedBounds`: the loop ranges, ``let`` values, and the
conditions that guard the access — ``if`` statements, ``T.where`` predicates, the chosen
branch of ``T.if_then_else``) must lie in ``[0, extent - 1]`` of its dimension; a vector
index ``Ramp(base, stride, lanes)`` covers ``base .. base + (lanes - 1) * stride``.

An access that cannot be proven in bounds is refused with an :class:`AccessBoundsError`
naming it::

    B[i] may write past the end of B (i reaches 71, B has 8 elements)

``Select`` evaluates both of its values (as the generated code does), so its condition
guards nothing; neither do the operands of ``and``/``or``. An index read from a buffer is
bounded only by its dtype, a clamp (``T.min``/``T.max``) or a guard; otherwise it is
refused too (the generated code checks no index at run time).
"""
from __future__ import annotations

from typing import Any

from engine.arith.guarded import GuardedBounds
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import lanes_of
from engine.ir.functor import collect
from engine.script.printer.module import repr_node

from .errors import BuildError


class AccessBoundsError(BuildError):
    """An access that may fall outside its buffer; ``buffer`` and ``access`` name it (the
    access as text, e.g. ``"B[i]"``) so a page can point at it."""

    def __init__(self, message: str, buffer: str, access: str):
        super().__init__(message)
        self.buffer = buffer
        self.access = access
        self.hint = ("bound the loop by the buffer's size, or guard the access with an "
                     "if (or T.where) that keeps the index inside the buffer")


def check_bounds(body: S.Stmt, func_name: str) -> None:
    """Raise :class:`AccessBoundsError` for the first access not provably in bounds."""
    _Checker(func_name).stmt(body)


def _shape_of(buf: Any) -> tuple | None:
    try:
        return buf.const_shape()
    except ValueError:
        return None  # symbolic shapes are refused by flattening, with their own message


class _Checker:
    def __init__(self, func_name: str):
        self.func_name = func_name
        self.an = GuardedBounds()

    # statements --------------------------------------------------------------
    def stmt(self, s: Any) -> None:
        if s is None:
            return
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is not None:
            meth(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_For(self, s: S.For) -> None:
        self.expr(s.min)
        self.expr(s.extent)
        lo = self.an.bound(s.min) if _is_scalar_int(s.min) else None
        last = E.binary(E.Sub, E.binary(E.Add, s.min, s.extent), E.const(1, s.extent.dtype))
        hi = self.an.bound(last) if _is_scalar_int(last) else None
        ext = self.an.bound(s.extent) if _is_scalar_int(s.extent) else None
        if ext is not None and ext[1] is not None and ext[1] <= 0:
            return  # the body never runs
        with self.an.scope():
            self.an.ranges[s.loop_var] = (None if lo is None else lo[0],
                                          None if hi is None else hi[1])
            self.stmt(s.body)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        self.expr(s.condition)
        with self.an.scope():
            self.an.assume(s.condition)
            self.stmt(s.then_case)
        with self.an.scope():
            self.an.assume(s.condition, negate=True)
            self.stmt(s.else_case)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        self.expr(s.value)
        with self.an.scope():
            self._bind_let(s.var, s.value)
            self.stmt(s.body)

    def s_Allocate(self, s: S.Allocate) -> None:
        self.stmt(s.body)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        self.expr(s.value)

    def s_BufferStore(self, s: S.BufferStore) -> None:
        self.expr(s.value)
        for i in s.indices:
            self.expr(i)
        self.access(s.buffer, s.indices, "write")

    # expressions -------------------------------------------------------------
    def expr(self, e: Any) -> None:
        """Check every load inside ``e`` (under the guards that protect it)."""
        if not isinstance(e, E.PrimExpr) or not collect(e, E.BufferLoad):
            return
        if isinstance(e, E.BufferLoad):
            for i in e.indices:
                self.expr(i)
            self.access(e.buffer, e.indices, "read")
            return
        if isinstance(e, E.Call) and e.op == "if_then_else":
            cond, then, other = e.args
            self.expr(cond)
            for value, negate in ((then, False), (other, True)):
                with self.an.scope():
                    self.an.assume(cond, negate=negate)
                    self.expr(value)
            return
        if isinstance(e, E.Let):
            self.expr(e.value)
            with self.an.scope():
                self._bind_let(e.var, e.value)
                self.expr(e.body)
            return
        for _, v in e.fields():
            if isinstance(v, E.PrimExpr):
                self.expr(v)
            elif isinstance(v, tuple):
                for x in v:
                    self.expr(x)

    def _bind_let(self, var: E.Var, value: E.PrimExpr) -> None:
        if _is_scalar_int(value):
            self.an.ranges[var] = self.an.bound(value)
        else:
            self.an.ranges.pop(var, None)

    # the proof ---------------------------------------------------------------
    def access(self, buf: Any, indices: tuple, kind: str) -> None:
        shape = _shape_of(buf)
        if shape is None or len(shape) != len(indices):
            return  # flattening refuses these with its own message
        for dim, (idx, n) in enumerate(zip(indices, shape)):
            lo, hi = self.index_bound(idx)
            if lo is not None and hi is not None and 0 <= lo and hi <= n - 1:
                continue
            raise self.refusal(buf, indices, kind, dim, idx, n, lo, hi)

    def index_bound(self, idx: E.PrimExpr) -> tuple:
        """Inclusive (lo, hi) of every lane of an index (None ends when unknown)."""
        if lanes_of(idx.dtype) == 1:
            return self.an.bound_tree(idx) if _is_scalar_int(idx) else (None, None)
        if isinstance(idx, E.Broadcast):
            return self.index_bound(idx.value)
        if isinstance(idx, E.Ramp):
            last = E.binary(E.Add, idx.base, E.binary(E.Mul, idx.stride,
                                                      E.const(idx.lanes - 1, idx.stride.dtype)))
            first, end = self.index_bound(idx.base), self.index_bound(last)
            lo = None if first[0] is None or end[0] is None else min(first[0], end[0])
            hi = None if first[1] is None or end[1] is None else max(first[1], end[1])
            return lo, hi
        return None, None

    def refusal(self, buf, indices, kind, dim, idx, n, lo, hi) -> AccessBoundsError:
        access = f"{buf.name}[{', '.join(repr_node(i) for i in indices)}]"
        idx_text = repr_node(idx)
        size = (f"{buf.name} has {n} elements" if len(indices) == 1 else
                f"{buf.name} has {n} elements along axis {dim} of its shape "
                f"{tuple(_shape_of(buf))}")
        past = hi is None or hi > n - 1
        where = "past the end of" if past else "before the start of"
        reach = hi if past else lo
        loads = sorted({ld.buffer.name for ld in collect(idx, E.BufferLoad)})
        if loads:
            why = (f"{idx_text} is read from {', '.join(loads)} and nothing bounds it; "
                   f"{size}: clamp the index with T.min/T.max or guard the access with an if")
        elif reach is not None:
            why = f"{idx_text} reaches {reach}, {size}"
        else:
            why = (f"{idx_text} has no bound that can be proven; {size}: bound the loops "
                   "or guard the access with an if")
        msg = f"{access} may {kind} {where} {buf.name} ({why})"
        return AccessBoundsError(msg, buf.name, access)


def _is_scalar_int(e: Any) -> bool:
    dt = getattr(e, "dtype", "")
    return isinstance(e, E.PrimExpr) and lanes_of(dt) == 1 and \
        (dt.startswith("int") or dt.startswith("uint"))
