"""rfactor: factor a reduction over one loop into a partial-result block and a write-back.

``rfactor(loop, factor_axis)`` follows TVM: the rfactor block ``<name>_rf`` computes
partial results into a new buffer ``<buffer>_rf`` that has one extra dimension (indexed by
the rfactor loop, inserted at ``factor_axis``); the original block becomes the write-back
block, which combines the partial results over the rfactor loop. The partial results are
independent across the rfactor loop, so that loop of the rfactor block may then be
parallelized or vectorized — the point of the primitive.
"""
from __future__ import annotations

from typing import Any

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import collect_vars, substitute, uses_var
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, seq
from engine.ir.structural import structural_equal

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import conjuncts, expect_loop, fresh_name, is_int
from .buffers import buffer_names, compose, rewrite_stmts


def _float_limits(dtype: str):
    import numpy as np
    if dtype.startswith("float"):
        fi = np.finfo(dtype)
        return float(fi.min), float(fi.max)
    ii = np.iinfo(dtype)
    return int(ii.min), int(ii.max)


def _const_value(e: Any):
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    if isinstance(e, E.Cast):
        return _const_value(e.value)
    return None


def match_combiner(block: Block):
    """Recognise ``init`` / update of a reduction block as a commutative reducer.

    Returns ``(kind, store, lhs, rhs)`` with kind "sum", "max" or "min", where the update is
    ``store.buffer[idx] = combine(lhs, rhs)`` and ``lhs`` loads ``store.buffer[idx]``; or a
    string explaining why not."""
    body = block.body
    if not isinstance(body, BufferStore):
        return "its body is not a single store (only single-buffer reductions are supported)"
    init = block.init
    if not isinstance(init, BufferStore) or init.buffer is not body.buffer:
        return "its T.init() does not initialise the buffer it updates"
    v = body.value
    buf, idx = body.buffer, body.indices

    def is_self(x):
        return isinstance(x, E.BufferLoad) and x.buffer is buf and \
            structural_equal(tuple(x.indices), tuple(idx))

    kind = None
    if isinstance(v, E.Add):
        kind = "sum"
    elif isinstance(v, E.Max):
        kind = "max"
    elif isinstance(v, E.Min):
        kind = "min"
    if kind is None:
        return "its update is not a sum, max or min of the buffer's old value"
    if is_self(v.a) and not uses_load(v.b, buf):
        lhs, rhs = v.a, v.b
    elif is_self(v.b) and not uses_load(v.a, buf):
        lhs, rhs = v.b, v.a
    else:
        return "its update does not combine the buffer's old value with a new term"
    if not structural_equal(tuple(init.indices), tuple(idx)):
        return "its T.init() writes other elements than the update"
    val = _const_value(init.value)
    lo, hi = _float_limits(buf.dtype)
    ok = {"sum": (0,), "max": (lo, float("-inf")), "min": (hi, float("inf"))}[kind]
    if val is None or val not in ok:
        want = {"sum": "0", "max": "the smallest value of the type (or -inf)",
                "min": "the largest value of the type (or inf)"}[kind]
        return (f"its T.init() value is not the identity of a {kind} ({want}), so partial "
                "results could not be combined")
    return kind, body, lhs, rhs


def uses_load(e: Any, buf: Buffer) -> bool:
    from engine.ir.functor import collect
    return any(x.buffer is buf for x in collect(e, E.BufferLoad))


def _combine(kind: str, a, b):
    return {"sum": E.Add, "max": E.Max, "min": E.Min}[kind](a, b)


@register
class RFactor(Primitive):
    kind = "RFactor"
    attr_kinds = (("factor_axis", "int"),)
    method = "rfactor"
    returns = "one"
    death_verb = "merged into the rfactor block"

    def call(self, sch, loop, factor_axis: int):
        """Factorize a reduction over ``loop``: a new rfactor block (``<name>_rf``) computes
        partial results into a new buffer (``<buffer>_rf``, with an extra dimension of the
        loop's extent at position ``factor_axis``), and the original block becomes the
        write-back block that combines them. Returns the rfactor block; the original
        block's handle now refers to the write-back block.

        It requires: 1) the loop contains exactly one block, a reduction block with a
        ``T.init()`` (rfactor before decompose_reduction); 2) the loop is serial and bound
        only to reduction axes of the block; 3) no loop around the block is bound to both
        spatial and reduction axes; 4) the block's update is a sum, max or min of the
        buffer's old value with a new term and its init is that reducer's identity (0 for
        a sum); 5) ``factor_axis`` is in ``[-(ndim + 1), ndim]`` for the written buffer's
        ``ndim``.

        Before::

            for i, k_0, k_1 in T.grid(128, 32, 4):
                with T.block("B"):
                    vi = T.axis.spatial(128, i)
                    vk = T.axis.reduce(128, k_0 * 4 + k_1)
                    T.reads(A[vi, vk])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]

        Call::

            i, k_0, k_1 = sch.get_loops(sch.get_block("B"))
            B_rf = sch.rfactor(k_1, factor_axis=1)

        After::

            B_rf = T.alloc_buffer((128, 4))
            for i, k_0, k_1 in T.grid(128, 32, 4):
                with T.block("B_rf"):
                    vk_1, vi, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])
                    T.reads(A[vi, vk_0 * 4 + vk_1])
                    T.writes(B_rf[vi, vk_1])
                    with T.init():
                        B_rf[vi, vk_1] = T.float32(0)
                    B_rf[vi, vk_1] = B_rf[vi, vk_1] + A[vi, vk_0 * 4 + vk_1]
            for i, k_1 in T.grid(128, 4):
                with T.block("B"):
                    vk_1, vi = T.axis.remap("RS", [k_1, i])
                    T.reads(B_rf[vi, vk_1])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + B_rf[vi, vk_1]
        """
        return sch._run(self, [loop], [factor_axis])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        idx = ctx.index
        lname = loop.loop_var.name
        factor_axis = attrs[0] if attrs else None
        blocks = idx.blocks_under(loop)
        if len(blocks) != 1:
            what = "no block" if not blocks else \
                f"{len(blocks)} blocks ({', '.join(b.name_hint for b in blocks)})"
            raise ctx.error(f"loop {lname}", f"loop {lname} contains {what}; rfactor needs a "
                            "loop around exactly one reduction block",
                            "move the other blocks out of the loop first",
                            highlight=[lname] + [b.name_hint for b in blocks])
        blk = blocks[0]
        bname = blk.name_hint
        hl = [lname, bname]
        realize = idx.realize[id(blk)]
        if blk.init is None or not any(iv.iter_type is IterType.REDUCE for iv in blk.iter_vars):
            raise ctx.error(f"loop {lname}", f"block {bname} is not a reduction block with a "
                            "T.init()", "apply rfactor before decompose_reduction",
                            highlight=hl)
        if loop.kind is not ForKind.SERIAL:
            raise ctx.error(f"loop {lname}", f"loop {lname} is {loop.kind.value}, and rfactor "
                            "needs a serial loop", "apply rfactor before parallel/vectorize/"
                            "unroll, then annotate the loops of the rfactor block",
                            highlight=hl)
        loops = idx.loops_above(realize)
        bind = list(zip(blk.iter_vars, realize.iter_values))
        sp_vars, rd_vars = set(), set()
        for iv, v in bind:
            target = sp_vars if iv.iter_type is IterType.SPATIAL else rd_vars
            target.update(id(x) for x in collect_vars(v))
        lv = id(loop.loop_var)
        if lv in sp_vars:
            raise ctx.error(f"loop {lname}", f"loop {lname} is bound to a spatial axis of block "
                            f"{bname}; rfactor factors a reduction loop",
                            "choose a loop over a reduction axis (e.g. k)", highlight=hl)
        if lv not in rd_vars:
            raise ctx.error(f"loop {lname}", f"loop {lname} is not bound to any reduction axis "
                            f"of block {bname}", "choose a loop over a reduction axis",
                            highlight=hl)
        met_reduction = False
        for lp in loops:
            v = id(lp.loop_var)
            if v in sp_vars and v in rd_vars:
                raise ctx.error(f"loop {lname}", f"loop {lp.loop_var.name} is bound to both "
                                f"spatial and reduction axes of block {bname}",
                                "split or reorder before fusing such loops",
                                highlight=hl + [lp.loop_var.name])
            if v in rd_vars:
                met_reduction = True
            elif v not in sp_vars and met_reduction and not E.is_const_int(lp.extent, 1):
                raise ctx.error(f"loop {lname}", f"loop {lp.loop_var.name}, inside a reduction "
                                f"loop, is not bound to any axis of block {bname}",
                                "", highlight=hl + [lp.loop_var.name])
        first_red = next(lp for lp in loops if id(lp.loop_var) in rd_vars)
        if len(idx.blocks_under(first_red)) != 1:
            others = [b.name_hint for b in idx.blocks_under(first_red) if b is not blk]
            raise ctx.error(f"loop {lname}", f"the reduction loop {first_red.loop_var.name} "
                            f"also contains block {others[0]}",
                            "move that block out of the reduction loops first",
                            highlight=hl + [first_red.loop_var.name, others[0]])
        outer = loops[0]
        scope_blk = idx.scope_block(realize)
        firsts = idx.child_blocks(outer)
        if firsts and firsts[0] is not blk:
            raise ctx.error(f"loop {lname}", f"block {bname} is not the first block under its "
                            f"outermost loop {outer.loop_var.name}",
                            "move the blocks before it out of that loop first", highlight=hl)
        m = match_combiner(blk)
        if isinstance(m, str):
            raise ctx.error(f"block {bname}", f"block {bname} is not a reduction rfactor can "
                            f"factor: {m}", "only sums, maxima and minima that start from "
                            "the identity can be factored", highlight=hl)
        kind, store, lhs, rhs = m
        buf = store.buffer
        nd = buf.ndim
        if not is_int(factor_axis) or not -(nd + 1) <= factor_axis <= nd:
            raise ctx.error(f"loop {lname}", f"factor_axis={factor_axis!r} is out of range for "
                            f"{buf.name}, which has {nd} dimension(s)",
                            f"use an integer from {-(nd + 1)} to {nd}", highlight=hl)
        fa = factor_axis + nd + 1 if factor_axis < 0 else factor_axis

        # --- the rfactor buffer
        rf_buf = Buffer(fresh_name(f"{buf.name}_rf", buffer_names(ctx.func)),
                        buf.shape[:fa] + (loop.extent,) + buf.shape[fa:], buf.dtype, buf.scope,
                        (), 0, buf.align)

        # --- the rfactor block (iterators as TVM builds them)
        rf_var = E.Var("v" + lname, loop.loop_var.dtype)
        rf_ivs = [IterVar(rf_var, Range(loop.min, loop.extent), IterType.SPATIAL)]
        rf_vals: list = [loop.loop_var]
        loop_to_iter = {loop.loop_var: rf_var}
        loop_by_var = {lp.loop_var: lp for lp in loops}
        var_map = {}
        for iv, v in bind:
            if iv.iter_type is IterType.SPATIAL or not uses_var(v, loop.loop_var):
                rf_ivs.append(iv)
                rf_vals.append(v)
                continue
            for x in collect_vars(v):
                lp = loop_by_var.get(x)
                if lp is None or x in loop_to_iter:
                    continue
                nv = E.Var("v" + x.name, x.dtype)
                loop_to_iter[x] = nv
                rf_ivs.append(IterVar(nv, Range(lp.min, lp.extent), IterType.REDUCE))
                rf_vals.append(x)
            var_map[iv.var] = simplify(substitute(v, loop_to_iter))
        rf_idx = tuple(store.indices[:fa]) + (rf_var,) + tuple(store.indices[fa:])
        rf_idx = tuple(substitute(i, var_map) for i in rf_idx)
        rf_load = E.BufferLoad(rf_buf, rf_idx)
        if any(iv.iter_type is IterType.REDUCE for iv in rf_ivs):
            rf_body = BufferStore(rf_buf, _combine(kind, rf_load, substitute(rhs, var_map)),
                                  rf_idx)
            rf_init = BufferStore(rf_buf, blk.init.value, rf_idx)
        else:  # nothing left to reduce: each partial result is a single term (as TVM)
            rf_body, rf_init = BufferStore(rf_buf, substitute(rhs, var_map), rf_idx), None
        point = tuple(Range(i, 1) for i in rf_idx)
        rf_reads = tuple(BufferRegion(r.buffer, tuple(substitute(rg, var_map) for rg in r.region))
                         for r in blk.reads if r.buffer is not buf)
        rf_name = fresh_name(bname + "_rf", set(idx.blocks))
        rf_block = Block(tuple(rf_ivs), rf_reads, (BufferRegion(rf_buf, point),), rf_name,
                         rf_body, rf_init, (), blk.annotations)
        # copies of all the loops, with new variables of the same names
        new_loop_vars = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype)
                         for lp in loops}
        rf_realize = BlockRealize(tuple(substitute(v, new_loop_vars) for v in rf_vals),
                                  substitute(realize.predicate, new_loop_vars), rf_block)
        rf_nest: Any = rf_realize
        for lp in reversed(loops):
            rf_nest = lp.replace(loop_var=new_loop_vars[lp.loop_var], body=rf_nest)

        # --- the write-back block (keeps the name and the spatial loops)
        wb_rd = E.Var("v" + lname, loop.loop_var.dtype)
        wb_ivs = [IterVar(wb_rd, Range(loop.min, loop.extent), IterType.REDUCE)]
        wb_vals: list = [loop.loop_var]
        wb_map = {rf_var: wb_rd}
        for iv, v in bind:
            if iv.iter_type is IterType.SPATIAL:
                nv = E.Var(iv.var.name, iv.var.dtype)
                wb_map[iv.var] = nv
                wb_ivs.append(IterVar(nv, iv.dom, IterType.SPATIAL))
                wb_vals.append(v)
        wb_out_idx = tuple(substitute(i, wb_map) for i in store.indices)
        wb_rf_idx = tuple(substitute(i, wb_map) for i in rf_idx)
        for x in collect_vars(wb_out_idx + wb_rf_idx):
            if x in var_map or any(x is iv.var for iv, _ in bind
                                   if iv.iter_type is IterType.REDUCE):
                raise ctx.error(f"block {bname}", f"the output index of block {bname} depends "
                                "on a reduction axis", "", highlight=hl)
        wb_load = E.BufferLoad(rf_buf, wb_rf_idx)
        wb_body = BufferStore(buf, _combine(kind, E.BufferLoad(buf, wb_out_idx), wb_load),
                              wb_out_idx)
        wb_init = BufferStore(buf, blk.init.value, wb_out_idx)
        kept = [lp for lp in loops if lp is loop or id(lp.loop_var) not in rd_vars]
        kept_ids = {id(lp.loop_var) for lp in kept}
        pred = E.IntImm("bool", 1)
        for c in conjuncts(realize.predicate):
            if isinstance(c, E.IntImm):
                continue
            used = {id(v) for v in collect_vars(c)}
            if used <= kept_ids:
                pred = c if isinstance(pred, E.IntImm) else E.And(pred, c)
            elif used & (kept_ids - {id(loop.loop_var)}):
                raise ctx.error(f"block {bname}", f"the predicate of block {bname} mixes its "
                                "spatial loops with other reduction loops", "", highlight=hl)
        wb_block = Block(tuple(wb_ivs), (BufferRegion(rf_buf, tuple(Range(i, 1)
                                                                   for i in wb_rf_idx)),),
                         (BufferRegion(buf, tuple(Range(i, 1) for i in wb_out_idx)),), bname,
                         wb_body, wb_init, (), blk.annotations)
        wb_realize = BlockRealize(tuple(wb_vals), pred, wb_block)

        # --- rebuild: drop the reduction loops (except the rfactor loop) around the block
        def rebuild(s):
            if isinstance(s, BlockRealize):
                return wb_realize if s is realize else s
            if isinstance(s, For) and any(s is lp for lp in loops):
                body = seq(*[rebuild(c) for c in flatten_seq(s.body)])
                if s is loop or id(s.loop_var) not in rd_vars:
                    return s.replace(body=body)
                return body
            return s

        new_outer = rebuild(outer)
        edits: dict = {}
        compose(edits, id(outer), lambda s: seq(rf_nest, new_outer))
        compose(edits, id(scope_blk),
                lambda b: b.replace(alloc_buffers=b.alloc_buffers + (rf_buf,)))
        return Result(rewrite_stmts(ctx.func, edits), [rf_block])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), f"factor_axis={self.attr(attrs, 0)}"]
        return [f"loop={fmt(inputs[0])}", f"factor_axis={self.attr(attrs, 0)}"]
