"""rolling_buffer: keep only a sliding window of an intermediate buffer, as a ring.

After ``compute_at`` of a producer into a tiled consumer (a pooling or convolution chain),
each iteration of the outer loop computes a window of the intermediate buffer that overlaps
the previous one (rows ``4 * i0 .. 4 * i0 + 5`` with a stride of 4: two rows in common).
rolling_buffer folds the buffer along that dimension to the window's size, indexes it
modulo that size, and adds a ``T.where`` to the producer so that the overlapping elements,
still in the ring from the previous iteration, are not computed again.
"""
from __future__ import annotations

from engine.arith import Analyzer
from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.functor import Mutator, post_order_visit, substitute
from engine.ir.stmt import Block, BlockRealize, BufferStore, ForKind, IterType
from engine.ir.structural import structural_equal
from engine.script.regions import infer_block_regions

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import conj, expect_block
from .buffers import alloc_site, need_attrs, nth_buffer, reads_buf, writes_buf
from .cache_stage import scope_children
from .region_inference import access_bounds


def _stride_of(lo: E.PrimExpr):
    """``(var, stride)`` when a window start is ``v``, ``v * s`` or ``(v * s) // d`` (TVM's
    rolling patterns), ``(None, 0)`` for a constant, else None."""
    if isinstance(lo, E.IntImm):
        return None, 0
    if isinstance(lo, E.Var):
        return lo, 1
    if isinstance(lo, E.Mul):
        a, b = (lo.a, lo.b) if isinstance(lo.a, E.Var) else (lo.b, lo.a)
        if isinstance(a, E.Var) and isinstance(b, E.IntImm):
            return a, b.value
    if isinstance(lo, E.FloorDiv) and isinstance(lo.b, E.IntImm) and lo.b.value > 0:
        inner = _stride_of(lo.a)
        if inner and inner[0] is not None:
            return inner[0], -(-inner[1] // lo.b.value)
    return None


class _Roll(Mutator):
    """Every access of ``old`` becomes one of ``new`` with index ``axis`` taken modulo
    ``size``; the blocks that access it get their regions inferred again."""

    def __init__(self, old: Buffer, new: Buffer, axis: int, size: int):
        self.old, self.new, self.axis, self.size = old, new, axis, size

    def opaque_rolled(self, before: Block, after: Block) -> tuple:
        """``after``'s spatial axes that index the rolled dimension of the buffer marked
        opaque (TVM's rolling_buffer: nothing may move them any more). TVM marks such
        reduction axes opaque too; here they stay reduction axes: a reduction's init runs
        where its reduction axes are at their minimum (TVM's lowering counts reduction axes
        only), and an opaque one would no longer count — the init would run again."""
        from engine.ir.functor import collect
        rolled: set = set()
        for part in (before.body, before.init):
            if part is None:
                continue
            for x in collect(part, (E.BufferLoad, BufferStore)):
                if x.buffer is self.old and self.axis < len(x.indices):
                    rolled |= {id(v) for v in collect(x.indices[self.axis], E.Var)}
        return tuple(iv.replace(iter_type=IterType.OPAQUE)
                     if id(iv.var) in rolled and iv.iter_type is IterType.SPATIAL else iv
                     for iv in after.iter_vars)

    def index(self, indices) -> tuple:
        return tuple(E.FloorMod(i, E.const(self.size, "int32")) if d == self.axis else i
                     for d, i in enumerate(indices))

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)  # the buffer is already the new one (visit_buffer)
        return E.BufferLoad(self.new, self.index(e.indices)) if e.buffer is self.new else e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        if s.buffer is not self.new:
            return s
        return BufferStore(self.new, s.value, self.index(s.indices))

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_Block(self, b):
        touches = any(r.buffer is self.old for r in (*b.reads, *b.writes))
        b2 = self.generic_visit(b)
        if not touches:
            return b2
        b2 = b2.replace(iter_vars=self.opaque_rolled(b, b2))
        reads, writes = infer_block_regions(b2.body, b2.init, b2.alloc_buffers)
        new_r = next((r for r in reads if r.buffer is self.new), None)
        new_w = next((w for w in writes if w.buffer is self.new), None)

        def splice(regions, inferred):
            return tuple(inferred if r.buffer is self.new else r for r in regions
                         if r.buffer is not self.new or inferred is not None)
        return b2.replace(reads=splice(b2.reads, new_r), writes=splice(b2.writes, new_w))


@register
class RollingBuffer(Primitive):
    kind = "RollingBuffer"
    method = "rolling_buffer"
    attr_kinds = (("write_buffer_index", "int"),)

    def call(self, sch, block, write_buffer_index):
        """Compute the buffer the block writes as a rolling buffer: fold it along the
        dimension whose window slides with the outermost loop that moves it, index it
        modulo the window, and skip the elements the previous iteration already computed.

        The block is the producer, usually moved with compute_at under a tile loop of its
        consumer. For each dimension, the window the producer writes in one iteration of
        the loop shared with its consumers starts at ``v``, ``v * s`` or ``(v * s) // d``
        for a loop variable ``v``; where the window is longer than the stride it overlaps
        the previous one (a loop of extent 1 moves no window). The outermost such loop
        picks the rolling dimension. The producer's ``T.where`` gets, per overlapping
        dimension, ``v < 1 or overlap <= <offset in the window>``, simplified with the
        ``T.where`` it had (TVM's form).

        It requires: 1) the buffer is allocated by the function (not an output) and the
        block is its only writer, the other blocks only read it; 2) ``write_buffer_index``
        names a buffer the block writes; 3) the innermost statement holding the block and
        all the readers is a loop, and the loops that move the window run in order (not
        parallel nor vectorized);
        4) one dimension's window overlaps the previous one (a positive overlap).

        Before::

            B = T.alloc_buffer((10, 10))
            for i0, i1 in T.grid(2, 2):
                for ax0, ax1, ax2, ax3 in T.grid(6, 6, 3, 3):
                    with T.block("B"):
                        vi = T.axis.spatial(10, i0 * 4 + ax0)
                        vj = T.axis.spatial(10, i1 * 4 + ax1)
                        rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                        with T.init():
                            B[vi, vj] = T.float32(0)
                        B[vi, vj] = B[vi, vj] + A[vi + rv0, vj + rv1]
                for ax0, ax1, ax2, ax3 in T.grid(4, 4, 3, 3):
                    with T.block("C"):
                        ...
                        C[vi, vj] = C[vi, vj] + B[vi + rv0, vj + rv1]

        Call::

            sch.rolling_buffer(sch.get_block("B"), 0)

        After::

            B = T.alloc_buffer((6, 10))
            for i0, i1 in T.grid(2, 2):
                for ax0, ax1, ax2, ax3 in T.grid(6, 6, 3, 3):
                    with T.block("B"):
                        vi = T.axis.spatial(10, i0 * 4 + ax0)
                        vj = T.axis.spatial(10, i1 * 4 + ax1)
                        rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                        T.where((i0 < 1 or 2 <= ax0) and (i1 < 1 or 2 <= ax1))
                        with T.init():
                            B[vi % 6, vj] = T.float32(0)
                        B[vi % 6, vj] = B[vi % 6, vj] + A[vi + rv0, vj + rv1]
                for ax0, ax1, ax2, ax3 in T.grid(4, 4, 3, 3):
                    with T.block("C"):
                        ...
                        C[vi, vj] = C[vi, vj] + B[(vi + rv0) % 6, vj + rv1]
        """
        sch._run(self, [block], [write_buffer_index])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        (index,) = need_attrs(ctx, attrs, 1, self.method)[:1]
        name = blk.name_hint
        buf = nth_buffer(ctx, blk, index, "write", "write_buffer_index")
        idx = ctx.index
        if alloc_site(ctx.func, idx, buf) is None:
            raise ctx.error(f"block {name}", f"{buf.name} is a parameter of the function; "
                            "rolling_buffer folds intermediate buffers only (requirement 1)",
                            "", highlight=[name])
        realize = idx.realize[id(blk)]
        scope_blk = idx.scope_block(realize)
        kids = scope_children(ctx, scope_blk)
        others = [b for b in kids if b is not blk and writes_buf(b, buf)]
        if others:
            raise ctx.error(f"block {name}", f"block {others[0].name_hint} also writes "
                            f"{buf.name}; the producer must be its only writer "
                            "(requirement 1)", "", highlight=[name, others[0].name_hint])
        readers = [b for b in kids if b is not blk and reads_buf(b, buf)]
        if not readers:
            raise ctx.error(f"block {name}", f"no other block reads {buf.name}", "",
                            highlight=[name])
        lca = None
        mine = idx.loops_above(realize)
        common = [lp for lp in mine if all(idx.contains(lp, idx.realize[id(r)])
                                           for r in readers)]
        if common:
            lca = common[-1]
        if lca is None:
            raise ctx.error(f"block {name}", f"block {name} and the blocks reading "
                            f"{buf.name} share no loop; move the producer under a loop of "
                            "its consumer first (requirement 3)", "compute_at the block into "
                            "a tile loop of its consumer", highlight=[name])
        below = mine[mine.index(lca) + 1:]
        wreg = next(w for w in blk.writes if w.buffer is buf)
        bounds = access_bounds(ctx, blk, wreg, below)
        an = Analyzer()
        # a loop of extent 1 moves nothing: its variable reads as its only value
        unit = {lp.loop_var: lp.min for lp in mine if E.as_const_int(lp.extent) == 1}
        windows = []   # per dim: (var, stride, extent, overlap) or None
        for d in range(buf.ndim):
            b = bounds[d] if bounds is not None else None
            if b is None:
                windows.append(None)
                continue
            lo, hi = an.simplify(substitute(b[0], unit)), an.simplify(substitute(b[1], unit))
            ext = E.as_const_int(an.simplify(hi - lo + 1))
            pat = _stride_of(lo)
            if ext is None or pat is None or pat[0] is None or ext - pat[1] <= 0:
                windows.append(None)
                continue
            windows.append((pat[0], pat[1], ext, ext - pat[1]))
        axis = None
        for lp in mine:
            hit = [d for d, w in enumerate(windows) if w is not None and w[0] is lp.loop_var]
            if hit:
                axis = hit[0]
                break
        if axis is None:
            raise ctx.error(f"block {name}", f"no dimension of {buf.name} has a window that "
                            "slides with a loop and overlaps the previous one "
                            "(requirement 4)", "tile the consumer and compute_at the "
                            "producer under the tile loop", highlight=[name])
        moving = {w[0] for w in windows if w is not None}
        for lp in mine:
            if lp.loop_var in moving and lp.kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
                raise ctx.error(f"block {name}", f"loop {lp.loop_var.name} moves the window "
                                f"but is {lp.kind.value}: a ring needs its iterations in order "
                                "(requirement 3)", "", highlight=[name, lp.loop_var.name])
        size = windows[axis][2]
        shape = tuple(E.const(size, "int32") if d == axis else s for d, s in
                      enumerate(buf.shape))
        new = Buffer(buf.name, shape, buf.dtype, buf.scope, (), 0, buf.align)
        # the producer skips what the previous iteration computed
        binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
        store_idx = _store_indices(blk, buf)
        pred = realize.predicate
        for d, w in enumerate(windows):
            if w is None or store_idx is None:
                continue
            var, _stride, _ext, overlap = w
            offset = an.simplify(substitute(substitute(store_idx[d], binding), {var: 0}))
            pred = conj(pred, E.Or(E.binary(E.LT, var, 1),
                                   E.binary(E.LE, E.const(overlap, offset.dtype), offset)))
        if pred is not realize.predicate:
            pred = an.simplify(pred)
        roll = _Roll(buf, new, axis, size)
        rolled_realize = BlockRealize(realize.iter_values, pred, realize.block)
        func = replace_stmts(ctx.func, {realize: rolled_realize})
        body = roll.visit(func.body)
        return Result(func.replace(body=body), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0)]
        return [f"block={fmt(inputs[0])}", f"write_buffer_index={self.attr(attrs, 0)}"]


def _store_indices(blk: Block, buf: Buffer):
    """The indices of the block's stores to ``buf`` (None unless they all agree)."""
    found: list = []
    post_order_visit(blk.body, lambda x: found.append(x.indices)
                     if isinstance(x, BufferStore) and x.buffer is buf else None)
    if not found or any(not all(structural_equal(a, b) for a, b in zip(f, found[0]))
                        for f in found[1:]):
        return None
    return found[0]
