"""Loads, stores and flat index arithmetic.

Index arithmetic is done with ``nsw`` in i64 from the loops' counters (an int32 loop
counts in i64: see :meth:`engine.codegen.loops.LoopMixin.serial_loop`); other int32
operands are sign extended where they meet them. Identical index arithmetic within a basic
block is emitted once. Vector accesses are :mod:`.vectors`'s.
"""
from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import bytes_of, element_of, is_bool, is_int, is_uint, lanes_of

from .llvm_types import I8, I64, mem_type


#: the index arithmetic CodeGen.index shares within a block: expression type -> LLVM op
_INDEX_OPS = {E.Add: "add", E.Sub: "sub", E.Mul: "mul", E.FloorDiv: "sdiv", E.FloorMod: "srem"}


def _signed_int(dtype: str) -> bool:
    """int8..int64 scalars (not uint, not bool, not vectors)."""
    return is_int(dtype) and not is_uint(dtype) and not is_bool(dtype) and lanes_of(dtype) == 1


class MemoryMixin:
    """Buffer pointers, scalar loads and stores, and flat indices."""

    def _ptr(self, buf: Buffer) -> ir.Value:
        p = self.bufs.get(id(buf))
        if p is None:
            raise self.err(f"buffer {buf.name!r} is used outside of its allocation "
                           "(not a parameter and not allocated by an enclosing block)")
        return p

    def _elem_ptr(self, buf: Buffer, idx: ir.Value) -> ir.Value:
        ety = mem_type(buf.dtype)
        return self.builder.gep(self._ptr(buf), [self.cast_int(idx, I64)], inbounds=True,
                                source_etype=ety)

    # ------------------------------------------------------------------ loads and stores
    def _access(self, buf: Buffer, idx_e: E.PrimExpr, store_val: ir.Value | None):
        """Load (store_val None) or store at a flat index, scalar or vector (see
        :meth:`engine.codegen.vectors.VectorMixin._vector_access`)."""
        b = self.builder
        ety = mem_type(buf.dtype)
        esize = max(1, bytes_of(element_of(buf.dtype)))
        lanes = lanes_of(idx_e.dtype)
        if lanes == 1:
            p = self._elem_ptr(buf, self.index(idx_e))
            if store_val is None:
                return b.load(p, typ=ety, align=esize)
            b.store(store_val, p, align=esize)
            return None
        return self._vector_access(buf, idx_e, store_val, ety, esize, lanes)

    def e_BufferLoad(self, e: E.BufferLoad):
        if len(e.indices) != 1:
            raise self.err(f"load from buffer {e.buffer.name!r} is not flattened")
        v = self._access(e.buffer, e.indices[0], None)
        if is_bool(e.buffer.dtype):
            zero = ir.Constant(v.type, None) if isinstance(v.type, ir.VectorType) else ir.Constant(I8, 0)
            v = self.builder.icmp_unsigned("!=", v, zero)
        return v

    def s_BufferStore(self, s: S.BufferStore) -> None:
        buf = s.buffer
        if len(s.indices) != 1:
            raise self.err(f"store to buffer {buf.name!r} is not flattened")
        val = self.expr(s.value)
        idx_e = s.indices[0]
        lanes = lanes_of(idx_e.dtype)
        if lanes > 1 and not isinstance(val.type, ir.VectorType):
            val = self.splat(val, lanes)
        if is_bool(buf.dtype):
            val = self.builder.zext(val, ir.VectorType(I8, lanes) if lanes > 1 else I8)
        elif lanes == 1 and isinstance(val.type, ir.VectorType):
            raise self.err(f"vector value stored at a scalar index of buffer {buf.name!r}")
        self._access(buf, idx_e, val)

    # ------------------------------------------------------------------ flat indices
    def index(self, e: E.PrimExpr) -> ir.Value:
        """A scalar flat index as an i64 value; identical index arithmetic in one basic
        block is emitted once.

        The 16 copies of an unrolled micro-kernel's ``C[i_0 * 32768 + i_1 * 4096 + ...]``
        compute their common part once (common sub-expressions of signed integer ``+ - *``
        and of floor division / modulo by a positive constant).

        An int32 loop variable stands for its i64 counter here, so an index over loop
        variables is i64 arithmetic from the start, as TVM's ``int64`` indices are. The
        same arithmetic in int32, sign extended at the end, cost LLVM's IndVarSimplify its
        widening (about a quarter of O3 on the course's mm_relu steps) and left a sign
        extension per access in the hot loop (0.69 against 0.61 ms at n=128). ``nsw`` on
        both: an overflow of the int32 arithmetic was already undefined, and every access
        is proven inside its buffer (``engine.lower.bounds_check``).
        """
        v, key = self._index(e)
        if v.type == I64:
            return v
        return self._cse(None if key is None else ("i64", key),
                         lambda: self.cast_int(v, I64))[0]

    def _index(self, e: E.PrimExpr) -> tuple[ir.Value, Any]:
        """(value in e's type, structural key or None); see :meth:`index`."""
        t = type(e)
        if t is E.IntImm:
            v = self.e_IntImm(e)
            return v, (e.dtype, int(e.value))
        if t is E.Var:
            v = self.wide.get(id(e))
            if v is None:
                v = self.e_Var(e)
            return v, ("v", id(v))
        op = _INDEX_OPS.get(t)
        if op is None or not _signed_int(e.dtype):
            return self.expr(e), None
        if op in ("sdiv", "srem"):
            c = E.as_const_int(e.b)
            if c is None or c <= 0:
                return self.expr(e), None
            if c & (c - 1) == 0:       # a power of two: floor semantics for any sign
                a, ka = self._index(e.a)
                if op == "sdiv":
                    k = c.bit_length() - 1
                    if k == 0:
                        return a, ka
                    return self._cse(None if ka is None else ("ashr", ka, k),
                                     lambda: self.builder.ashr(a, ir.Constant(a.type, k)))
                return self._cse(None if ka is None else ("and", ka, c - 1),
                                 lambda: self.builder.and_(a, ir.Constant(a.type, c - 1)))
            if not self._nonneg_expr(e.a):  # truncating division = floor division
                return self.expr(e), None
        a, ka = self._index(e.a)
        b, kb = self._index(e.b)
        a, b = self.match(a, b)
        if a.type != b.type:       # a loop variable's i64 value with int32 operands
            a, b = self.cast_int(a, I64), self.cast_int(b, I64)
        key = None if ka is None or kb is None else (op, ka, kb)
        if op in ("add", "sub", "mul"):
            return self._cse(key, lambda: getattr(self.builder, op)(a, b, flags=["nsw"]))
        return self._cse(key, lambda: getattr(self.builder, op)(a, b))

    def _cse(self, key, make) -> tuple[ir.Value, Any]:
        """``make()``, or the value made for ``key`` earlier in the current basic block
        (which dominates the insertion point)."""
        block = self.builder.block
        if key is not None:
            hit = self.index_values.get(key)
            if hit is not None and hit[0] is block:
                return hit[1], key
        v = make()
        if key is not None:
            self.index_values[key] = (block, v)
        return v, key
