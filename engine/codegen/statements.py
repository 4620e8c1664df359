"""Statements other than loops and stores: sequences, lets, conditionals, allocations.

``local`` buffers and ``global`` ones up to :data:`STACK_LIMIT` bytes are ``alloca``'d
(64-byte aligned) in the function's entry block; bigger ones use ``aligned_alloc``/``free``,
and so do buffers of a symbolic size (their size computed, overflow-checked, where they are
allocated).
Scalar integer buffers are zero-filled each time their ``Allocate`` runs (the bounds proof,
:mod:`engine.lower.bounds_check`, bounds an index read from one by 0 and its stored values).
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import bytes_of, lanes_of, zero_filled
from engine.ir.buffer import base_scope

from .generator import restore
from .llvm_types import I32, I64, PTR, mem_type, sanitize

STACK_LIMIT = 64 * 1024          # global-scope buffers up to this size live on the stack
LOCAL_STACK_LIMIT = 1024 * 1024  # local-scope buffers above this go to the heap


class StatementMixin:
    """``s_<Node>`` methods for the statements of a lowered body (loops aside)."""

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm)):
            return
        self.expr(s.value)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        v = self.expr(s.value)
        old = self.vars.get(id(s.var))
        self.vars[id(s.var)] = v
        self.stmt(s.body)
        restore(self.vars, id(s.var), old)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        if lanes_of(s.condition.dtype) > 1:
            self._masked_if(s)
            return
        cond = self.as_i1(self.expr(s.condition), s.condition.dtype)
        b = self.builder
        if s.else_case is None:
            with b.if_then(cond):
                self.stmt(s.then_case)
        else:
            with b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmt(s.then_case)
                with otherwise:
                    self.stmt(s.else_case)

    def _dynamic_allocate(self, s: S.Allocate) -> None:
        """An allocation of a symbolic size (a buffer shaped by the function's sizes): on
        the heap, its element count computed in i64 with every product checked for
        overflow and held below 2**31 when its indices are int32 (else the kernel fails
        with -1, as when the allocation fails)."""
        buf = s.buffer
        b = self.builder
        count, overflow = self._checked_count(buf.shape[0])
        limit = 2**31 - 1 if buf.shape[0].dtype != "int64" else 2**62 // max(1, bytes_of(buf.dtype))
        bad = b.or_(overflow, b.icmp_signed(">", count, ir.Constant(I64, limit)))
        bad = b.or_(bad, b.icmp_signed("<", count, ir.Constant(I64, 0)))
        self.fail_with(b.select(bad, ir.Constant(I32, -1), ir.Constant(I32, 0)))
        b = self.builder
        nbytes = b.mul(count, ir.Constant(I64, bytes_of(buf.dtype)))
        size = b.and_(b.add(nbytes, ir.Constant(I64, 64)), ir.Constant(I64, -64))  # > 0
        alloc = self.declare("aligned_alloc", PTR, [I64, I64])
        raw = b.call(alloc, [ir.Constant(I64, 64), size], name=sanitize(buf.name) + "_mem")
        null = b.icmp_unsigned("==", raw, ir.Constant(PTR, None))
        self.fail_with(b.select(null, ir.Constant(I32, -1), ir.Constant(I32, 0)))
        if zero_filled(buf.dtype):
            memset = self.declare("memset", PTR, [PTR, I32, I64])
            self.builder.call(memset, [raw, ir.Constant(I32, 0), nbytes])
        old = self.bufs.get(id(buf))
        self.bufs[id(buf)] = raw
        self.stmt(s.body)
        self.builder.call(self.declare("free", ir.VoidType(), [PTR]), [raw])
        restore(self.bufs, id(buf), old)

    def _checked_count(self, e: E.PrimExpr) -> tuple:
        """``(value, overflowed)`` of an element count in i64: products multiplied with
        LLVM's overflow check, anything else computed as written and sign-extended."""
        b = self.builder
        if isinstance(e, E.Mul):
            a, oa = self._checked_count(e.a)
            c, oc = self._checked_count(e.b)
            prod = b.smul_with_overflow(a, c)
            value, flag = b.extract_value(prod, 0), b.extract_value(prod, 1)
            return value, b.or_(flag, b.or_(oa, oc))
        if isinstance(e, E.Cast) and e.value.dtype.startswith("int"):
            return self._checked_count(e.value)
        v = self.expr(e)
        if v.type != I64:
            v = b.sext(v, I64)
        return v, ir.Constant(ir.IntType(1), 0)

    def s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if E.as_const_int(buf.shape[0]) is None:
            self._dynamic_allocate(s)
            return
        n = 1
        for d in buf.const_shape():
            n *= d
        nbytes = max(1, n * bytes_of(buf.dtype))
        ety = mem_type(buf.dtype)
        heap = (base_scope(buf.scope) != "local" and nbytes > STACK_LIMIT) or nbytes > LOCAL_STACK_LIMIT
        b = self.builder
        if not heap:
            ptr = self.frame.alloca(ir.ArrayType(ety, max(n, 1)), sanitize(buf.name),
                                    align=max(64, buf.align))
        else:
            size = (nbytes + 63) // 64 * 64
            alloc = self.declare("aligned_alloc", PTR, [I64, I64])
            raw = b.call(alloc, [ir.Constant(I64, 64), ir.Constant(I64, size)],
                         name=sanitize(buf.name) + "_mem")
            null = b.icmp_unsigned("==", raw, ir.Constant(PTR, None))
            code = b.select(null, ir.Constant(I32, -1), ir.Constant(I32, 0))
            self.fail_with(code)
            ptr = raw
        if zero_filled(buf.dtype):
            # integer buffers start as zeros: the bounds proof bounds an index read from one
            # by 0 and the values stored into it
            memset = self.declare("memset", PTR, [PTR, I32, I64])
            b.call(memset, [ptr, ir.Constant(I32, 0), ir.Constant(I64, nbytes)])
        old = self.bufs.get(id(buf))
        self.bufs[id(buf)] = ptr
        self.stmt(s.body)
        if heap:
            self.builder.call(self.declare("free", ir.VoidType(), [PTR]), [raw])
        restore(self.bufs, id(buf), old)
