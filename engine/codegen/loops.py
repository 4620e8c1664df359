"""Loops: serial loops (with their unroll metadata); parallel ones go to :mod:`.functions`.

A ``T.unroll`` loop that reaches the code generator gets ``llvm.loop.unroll.full`` on its
back edge; an outer loop around a loop that stays a loop gets ``llvm.loop.unroll.disable``.
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S

from .generator import restore
from .llvm_types import llvm_type, sanitize
from .target import UNROLL_FULL_MD


class _LoopID(ir.values.MDValue):
    """A distinct, self-referential loop-ID node: ``distinct !{!N, <options>}``.

    llvmlite's :class:`~llvmlite.ir.values.MDValue` cannot refer to itself; LLVM only reads
    ``!llvm.loop`` options from a node whose first operand is the node itself.
    """

    def __init__(self, module: ir.Module, options: list):
        super().__init__(module, options, name=str(len(module.metadata)))

    def descr(self, buf):
        ops = ", ".join([self.get_reference()] + [op.get_reference() for op in self.operands])
        buf += (f"distinct !{{{ops}}}", "\n")

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


#: a loop with at least this many iterations is never unrolled completely by LLVM's O3
#: (its full-unroll threshold is 300 instructions, an iteration costs at least about 5)
LONG_LOOP_TRIP = 64


def unroll_disable_loop_id(module: ir.Module) -> ir.values.MDValue:
    """A new loop ID asking LLVM not to unroll its loop."""
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    return _LoopID(module, [option])


def unroll_full_loop_id(module: ir.Module) -> ir.values.MDValue:
    """A new loop ID asking LLVM to unroll its loop completely."""
    option = module.add_metadata([ir.MetaDataString(module, UNROLL_FULL_MD)])
    return _LoopID(module, [option])


class LoopMixin:
    """``For`` statements: serial and unrolled loops, and the dispatch of parallel ones."""

    def s_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.PARALLEL and self.frame.parallel_depth == 0:
            self.parallel_for(s)
            return
        for k, v in s.annotations:
            if k == "vectorize_fallback":
                self.builder.comment(f"vectorize fallback for loop {s.loop_var.name}: {v}")
                if self.info is not None:
                    self.info.num_vector_fallbacks += 1
            elif k == "unroll_skipped":
                self.builder.comment(f"loop {s.loop_var.name} not unrolled: {v}")
        if s.kind is S.ForKind.PARALLEL:
            self.builder.comment(f"nested parallel loop {s.loop_var.name} runs serially")
        lo = self.expr(s.min)
        ext = self.expr(s.extent)
        self.serial_loop(s.loop_var, lo, ext, s.body, nonneg=self._nonneg_expr(s.min),
                         unroll=s.kind is S.ForKind.UNROLLED)

    def serial_loop(self, var: E.Var, lo: ir.Value, ext: ir.Value, body: S.Stmt,
                    nonneg: bool = False, hi: ir.Value | None = None,
                    unroll: bool = False) -> None:
        b = self.builder
        ty = llvm_type(var.dtype)
        lo = self.cast_int(lo, ty)
        if hi is None:
            ext = self.cast_int(ext, ty)
            if isinstance(lo, ir.Constant) and isinstance(ext, ir.Constant):
                hi = ir.Constant(ty, int(lo.constant) + int(ext.constant))
            else:
                hi = b.add(lo, ext, flags=["nsw"])
        else:
            hi = self.cast_int(hi, ty)
        pre = b.block
        head = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}")
        loop_body = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}_body")
        done = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}_end")
        b.branch(head)
        b.position_at_end(head)
        phi = b.phi(ty, name=sanitize(var.name))
        phi.add_incoming(lo, pre)
        cond = b.icmp_signed("<", phi, hi)
        b.cbranch(cond, loop_body, done)
        b.position_at_end(loop_body)
        old = self.vars.get(id(var))
        self.vars[id(var)] = phi
        if nonneg:
            self.nonneg.add(id(var))
        long_before = self.long_loops
        self.stmt(body)
        nxt = self.builder.add(phi, ir.Constant(ty, 1), flags=["nsw"])
        phi.add_incoming(nxt, self.builder.block)
        latch = self.builder.branch(head)
        if unroll:
            latch.set_metadata("llvm.loop", unroll_full_loop_id(self.module))
            if self.info is not None:
                self.info.num_unrolled_loops += 1
        elif self.long_loops > long_before:
            # an outer loop around a loop that stays a loop: unrolling it only copies the
            # inner loop (k_0 around a 128-long k_1 became 8 copies of k_1, each then
            # unrolled 16x by LLVM: 2x the compile time for the same inner loop)
            latch.set_metadata("llvm.loop", unroll_disable_loop_id(self.module))
        const_trip = (isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant))
        if not unroll and (not const_trip or int(hi.constant) - int(lo.constant)
                           >= LONG_LOOP_TRIP):
            self.long_loops += 1
        self.builder.position_at_end(done)
        self.nonneg.discard(id(var))
        restore(self.vars, id(var), old)
