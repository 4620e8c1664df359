"""Vectors: splats, ``Ramp``/``Broadcast``, vector loads and stores, lane predicates.

``Ramp`` indices with stride 1 become one vector load/store of ``lanes`` elements; other
vector indices gather/scatter element by element. Under a lane predicate (a ``T.where`` on
a vectorized loop, ``if_then_else`` on lanes) vector accesses become masked.
"""
from __future__ import annotations

import math

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

from .llvm_types import I1, I32, type_suffix


def _negative_zero(c) -> bool:
    """True for the float -0.0 (equal to 0, but not zeroinitializer's +0.0)."""
    return isinstance(c, float) and math.copysign(1.0, c) < 0


class VectorMixin:
    """Vector values and predicated regions."""

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        """``v`` repeated in ``lanes`` lanes (a vector ``v`` as it is)."""
        if isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            if v.constant is None:
                return self._splat_dyn(v, vt)
            if v.constant == 0 and not _negative_zero(v.constant):
                # printed as `zeroinitializer`, not lanes x `float 0x0`: the initialising
                # stores of an unrolled micro-kernel print (and parse) faster
                return ir.Constant(vt, None)
            return ir.Constant(vt, [v.constant] * lanes)
        return self._splat_dyn(v, vt)

    def _splat_dyn(self, v, vt):
        b = self.builder
        undef = ir.Constant(vt, ir.Undefined)
        ins = b.insert_element(undef, v, ir.Constant(I32, 0))
        mask = ir.Constant(ir.VectorType(I32, vt.count), [0] * vt.count)
        return b.shuffle_vector(ins, undef, mask)

    def match(self, a: ir.Value, b: ir.Value):
        """The operands with a scalar one splat to the other's lanes."""
        la = a.type.count if isinstance(a.type, ir.VectorType) else 1
        lb = b.type.count if isinstance(b.type, ir.VectorType) else 1
        if la == lb:
            return a, b
        if la == 1:
            return self.splat(a, lb), b
        if lb == 1:
            return a, self.splat(b, la)
        raise self.err(f"vector operands with different lanes ({la} and {lb})")

    def e_Ramp(self, e: E.Ramp):
        base = self.expr(e.base)
        stride = self.expr(e.stride)
        b = self.builder
        lanes = e.lanes
        vb = self.splat(base, lanes)
        vs = self.splat(stride, lanes)
        st = base.type
        iota = ir.Constant(ir.VectorType(st, lanes), list(range(lanes)))
        return b.add(vb, b.mul(vs, iota))

    def e_Broadcast(self, e: E.Broadcast):
        return self.splat(self.expr(e.value), e.lanes)

    def _vector_access(self, buf: Buffer, idx_e: E.PrimExpr, store_val: ir.Value | None,
                       ety: ir.Type, esize: int, lanes: int):
        """Vector load (store_val None) or store of ``lanes`` elements at the flat vector
        index ``idx_e``: one (masked) vector access for a stride-1 Ramp, else a gather /
        scatter lane by lane."""
        b = self.builder
        vty = ir.VectorType(ety, lanes)
        mask = self.mask
        if mask is not None and mask.type.count != lanes:
            raise self.err(f"access to {buf.name!r} with {lanes} lanes under a predicate "
                           f"of {mask.type.count} lanes")
        if isinstance(idx_e, E.Ramp) and E.as_const_int(idx_e.stride) == 1:
            p = self._elem_ptr(buf, self.index(idx_e.base))
            # the pointer's address space names the intrinsic (p0 on the CPU; the GPU's
            # global and shared memory are p1 and p3)
            pty = p.type
            suffix = f"{type_suffix(vty)}.p{getattr(pty, 'addrspace', 0)}"
            if store_val is None:
                if mask is None:
                    return b.load(p, typ=vty, align=esize)
                fn = self.declare(f"llvm.masked.load.{suffix}", vty, [pty, I32, mask.type, vty])
                return b.call(fn, [p, ir.Constant(I32, esize), mask, ir.Constant(vty, None)])
            if mask is None:
                b.store(store_val, p, align=esize)
            else:
                fn = self.declare(f"llvm.masked.store.{suffix}", ir.VoidType(),
                                  [vty, pty, I32, mask.type])
                b.call(fn, [store_val, p, ir.Constant(I32, esize), mask])
            return None
        # gather / scatter lane by lane (a lane masked off is not touched at all)
        idx = self.expr(idx_e)
        out = ir.Constant(vty, None) if store_val is None else None
        for lane in range(lanes):
            lc = ir.Constant(I32, lane)
            li = b.extract_element(idx, lc)
            if mask is None:
                p = self._elem_ptr(buf, li)
                if store_val is None:
                    out = b.insert_element(out, b.load(p, typ=ety, align=esize), lc)
                else:
                    b.store(b.extract_element(store_val, lc), p, align=esize)
                continue
            on = b.extract_element(mask, lc)
            if store_val is None:
                before = b.block
                with b.if_then(on):
                    p = self._elem_ptr(buf, li)
                    loaded = b.insert_element(out, b.load(p, typ=ety, align=esize), lc)
                    inside = b.block
                phi = b.phi(vty)
                phi.add_incoming(loaded, inside)
                phi.add_incoming(out, before)
                out = phi
            else:
                with b.if_then(on):
                    b.store(b.extract_element(store_val, lc), self._elem_ptr(buf, li),
                            align=esize)
        return out

    # ---- vector predicates (a T.where on a vectorized loop, if_then_else on lanes) ----
    def _and_mask(self, cond: ir.Value) -> ir.Value:
        if self.mask is None:
            return cond
        return self.builder.and_(self.mask, cond)

    def _any(self, mask: ir.Value) -> ir.Value:
        fn = self.declare(f"llvm.vector.reduce.or.{type_suffix(mask.type)}", I1, [mask.type])
        return self.builder.call(fn, [mask])

    def _under_mask(self, mask: ir.Value, emit) -> None:
        """Run ``emit()`` with ``mask`` active, only if some lane is active.

        Vector loads/stores inside become masked (never touching inactive lanes' memory);
        lane-invariant scalar loads inside run only when some lane is active, i.e. only
        when the scalar program would have executed them too.
        """
        saved = self.mask
        with self.builder.if_then(self._any(mask)):
            self.mask = mask
            try:
                emit()
            finally:
                self.mask = saved

    def _masked_if(self, s: S.IfThenElse) -> None:
        cond = self.as_i1v(s.condition)
        b = self.builder
        self._under_mask(self._and_mask(cond), lambda: self.stmt(s.then_case))
        if s.else_case is not None:
            self._under_mask(self._and_mask(b.not_(cond)), lambda: self.stmt(s.else_case))
