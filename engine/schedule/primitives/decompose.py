"""decompose_reduction: split a reduction block into an init block and an update block."""
from __future__ import annotations

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import BufferRegion
from engine.ir.functor import collect_vars, substitute, uses_var
from engine.ir.stmt import Block, BlockRealize, For, IterType, IterVar, seq

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import conjuncts, expect_block, expect_loop, fresh_name


@register
class DecomposeReduction(Primitive):
    kind = "DecomposeReduction"
    attr_kinds = ()
    method = "decompose_reduction"
    returns = "one"

    def call(self, sch, block, loop):
        """Decompose a reduction block into an init block (``<name>_init``), placed just
        before ``loop``, and an update block (the original, renamed ``<name>_update``).

        It requires: 1) the block is a reduction block with a ``T.init()``; 2) ``loop``
        is one of the block's loops; 3) every loop bound to a reduction axis of the
        block is ``loop`` or inside it; 4) no loop is bound to both a spatial and a
        reduction axis. The init block gets copies (``j_1_init``) of the loops between
        ``loop`` and the block that index spatial axes, and the block's annotations (as
        TVM's). Handles to the block now refer
        to the update block; the init block's handle is returned.

        Before::

            for i, j_0 in T.grid(128, 32):
                for k, j_1 in T.grid(128, 4):
                    with T.block("Y"):
                        ...
                        with T.init():
                            Y[vi, vj] = T.float32(0)
                        Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            sch.decompose_reduction(block_Y, k)

        After::

            for i, j_0 in T.grid(128, 32):
                for j_1_init in T.serial(4):
                    with T.block("Y_init"):
                        vi = T.axis.spatial(128, i)
                        vj = T.axis.spatial(128, j_0 * 4 + j_1_init)
                        T.reads()
                        T.writes(Y[vi, vj])
                        Y[vi, vj] = T.float32(0)
                for k, j_1 in T.grid(128, 4):
                    with T.block("Y_update"):
                        ...
                        T.reads(Y[vi, vj], A[vi, vk], B[vk, vj])
                        Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        """
        return sch._run(self, [block, loop], [])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        loop = expect_loop(ctx, inputs[1])
        idx = ctx.index
        bname, lname = blk.name_hint, loop.loop_var.name
        hl = [bname, lname]
        realize = idx.realize[id(blk)]
        if blk.init is None or not any(iv.iter_type is IterType.REDUCE for iv in blk.iter_vars):
            raise ctx.error(f"block {bname}", f"block {bname} is not a reduction block with "
                            "an init part (T.init)", "decompose a block that accumulates, "
                            "e.g. the matmul block", highlight=[bname])
        loops = idx.loops_above(realize)
        if loop not in loops:
            raise ctx.error(f"block {bname}", f"loop {lname} is not one of the loops around "
                            f"block {bname}", "pass a loop from sch.get_loops(block)",
                            highlight=hl)
        pos = loops.index(loop)
        outer, inner = loops[:pos], loops[pos:]
        bind = list(zip(blk.iter_vars, realize.iter_values))
        for lp in loops:
            sp = any(uses_var(v, lp.loop_var) for iv, v in bind if iv.iter_type is IterType.SPATIAL)
            rd = any(uses_var(v, lp.loop_var) for iv, v in bind if iv.iter_type is IterType.REDUCE)
            if sp and rd:
                raise ctx.error(f"block {bname}", f"loop {lp.loop_var.name} is bound to both "
                                "spatial and reduction axes", "split or reorder before fusing "
                                "them", highlight=hl + [lp.loop_var.name])
            if rd and lp in outer:
                raise ctx.error(f"block {bname}", f"loop {lp.loop_var.name} is a reduction "
                                f"loop outside loop {lname}, so the init would run again for "
                                "every step of the reduction",
                                f"decompose at loop {lp.loop_var.name} or further out",
                                highlight=hl + [lp.loop_var.name])
        # loops of the init nest: copies of inner loops that index spatial axes
        vmap = {}
        init_loops = []
        for lp in inner:
            if any(uses_var(v, lp.loop_var) for iv, v in bind if iv.iter_type is IterType.SPATIAL):
                nv = E.Var(lp.loop_var.name + "_init", lp.loop_var.dtype)
                vmap[lp.loop_var] = nv
                init_loops.append((lp, nv))
        new_ivs, new_vals, var_map = [], [], {}
        for iv, v in bind:
            if iv.iter_type is IterType.SPATIAL:
                nv = E.Var(iv.var.name, iv.var.dtype)
                var_map[iv.var] = nv
                new_ivs.append(IterVar(nv, iv.dom, IterType.SPATIAL))
                new_vals.append(simplify(substitute(v, vmap)))
        init_loop_vars = {id(nv) for _, nv in init_loops}
        outer_vars = {id(lp.loop_var) for lp in outer}
        keep = []
        for c in conjuncts(realize.predicate):
            if isinstance(c, E.IntImm):
                continue
            c2 = substitute(c, vmap)
            used = {id(v) for v in collect_vars(c2)}
            if used <= (init_loop_vars | outer_vars):
                keep.append(c2)
            elif used & init_loop_vars:
                raise ctx.error(f"block {bname}", "the block's predicate mixes spatial and "
                                "reduction loops", "", highlight=hl)
        pred = E.IntImm("bool", 1)
        for c in keep:
            pred = c if isinstance(pred, E.IntImm) else E.And(pred, c)
        names = set(idx.blocks)
        init_name = fresh_name(bname + "_init", names)
        upd_name = fresh_name(bname + "_update", names | {init_name})
        writes = tuple(substitute(w, var_map) for w in blk.writes)
        # the block's annotations go to the init block too, as TVM's
        init_block = Block(tuple(new_ivs), (), writes, init_name,
                           substitute(blk.init, var_map), None, (), blk.annotations)
        init_nest = BlockRealize(tuple(new_vals), pred, init_block)
        for lp, nv in reversed(init_loops):
            init_nest = For(nv, lp.min, lp.extent, lp.kind, init_nest, lp.annotations,
                            lp.thread_tag)
        reads = tuple(BufferRegion(w.buffer, w.region) for w in blk.writes
                      if not any(r.buffer is w.buffer for r in blk.reads)) + blk.reads
        upd = blk.replace(name_hint=upd_name, init=None, reads=reads)
        new_realize = realize.replace(block=upd)
        new_loop = replace_stmts_in(loop, realize, new_realize)
        func = replace_stmts(ctx.func, {loop: seq(init_nest, new_loop)})
        return Result(func, [init_block], renames={bname: upd_name})

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(x) for x in inputs]
        return [f"block={fmt(inputs[0])}", f"loop={fmt(inputs[1])}"]


def replace_stmts_in(root, old, new):
    """``root`` with ``old`` replaced by ``new`` (copy-on-write on the path)."""
    from ..tree import _rebuild
    return _rebuild(root, {id(old): new})
