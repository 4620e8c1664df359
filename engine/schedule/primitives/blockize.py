"""blockize: turn the subtree under a loop into one outer block around it.

The block under the loop keeps its name and its body; its axes are split in two: an
*outer* part, bound by the loops above the given loop, which becomes the axes of a new
block ``<name>_o``, and an *inner* part, bound by the given loop and the loops below it,
which stays on the original block (renamed ``v_i``). A reduction's init moves to the outer
block (as a loop nest around a block ``<name>_init``), so the outer block is a complete
reduction of its own: the shape :mod:`.tensorize` matches against a tensor intrinsic.

The split of each binding is TVM's subspace division, for the affine bindings a schedule
builds: ``binding = outer * E + inner`` where ``inner`` uses only the inner loops and
ranges over ``[0, E)``, and ``outer`` uses no inner loop. A binding that uses only outer
or only inner loops (even ``fused // 16``) is split trivially.
"""
from __future__ import annotations

from engine.arith import bound_of, relax, simplify
from engine.arith.simplify import Analyzer
from engine.ir import expr as E
from engine.ir.buffer import BufferRegion, Range
from engine.ir.functor import Mutator, collect_vars, substitute, uses_var
from engine.ir.stmt import Block, BlockRealize, For, IterType, IterVar, seq

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import as_bool, conj, conjuncts, fresh_name, is_true, subject_of, true_const


def single_block_under(ctx: Ctx, loop: For, method: str) -> tuple[list[For], BlockRealize]:
    """The loops from ``loop`` down to the one block realize under it (outermost first);
    refused unless the subtree is a chain of loops around exactly one block."""
    chain = [loop]
    cur = loop.body
    while isinstance(cur, For):
        chain.append(cur)
        cur = cur.body
    if not isinstance(cur, BlockRealize):
        n = len(ctx.index.child_blocks(loop))
        what = "no block" if n == 0 else (f"{n} blocks" if n > 1 else
                                          "other statements besides the block")
        raise ctx.error(subject_of(loop), f"the loops from {loop.loop_var.name} down must "
                        f"hold exactly one block and nothing else, but they hold {what}",
                        "pick a loop whose subtree is a chain of loops around one block "
                        "(blockize a list of blocks instead when there are several)",
                        highlight=[loop.loop_var.name])
    return chain, cur


class Division:
    """One axis split: ``outer`` (binding, extent) and ``inner`` (binding, extent)."""

    __slots__ = ("outer", "outer_extent", "inner", "inner_extent")

    def __init__(self, outer, outer_extent, inner, inner_extent):
        self.outer, self.outer_extent = outer, outer_extent
        self.inner, self.inner_extent = inner, inner_extent


def _ranges(loops) -> dict:
    out = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None:
            out[lp.loop_var] = (lo, lo + ext - 1)
    return out


def divide(ctx: Ctx, realize: BlockRealize, outer_ranges: dict, inner_loops: list,
           subject: str, hl: list) -> list[Division]:
    """TVM's subspace division of every binding of ``realize`` (refused when one cannot
    be divided)."""
    inner_vars = {id(lp.loop_var) for lp in inner_loops}
    inner_ranges = _ranges(inner_loops)
    all_ranges = {**outer_ranges, **inner_ranges}
    out = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        dom = E.as_const_int(iv.dom.extent)
        used = [v for v in collect_vars(value)]
        has_inner = any(id(v) in inner_vars for v in used)
        has_outer = any(id(v) not in inner_vars for v in used)
        if not has_inner:
            out.append(Division(value, iv.dom.extent, E.const(0, value.dtype),
                                E.const(1, value.dtype)))
            continue
        if not has_outer:
            out.append(Division(E.const(0, value.dtype), E.const(1, value.dtype), value,
                                iv.dom.extent))
            continue
        terms, const = Analyzer().linear(value)
        inner_part: E.PrimExpr = E.const(0, value.dtype)
        outer_terms = []
        for atom, coef in terms.values():
            vs = collect_vars(atom)
            if all(id(v) in inner_vars for v in vs):
                inner_part = inner_part + atom * E.const(coef, value.dtype)
            elif not any(id(v) in inner_vars for v in vs):
                outer_terms.append((atom, coef))
            else:
                raise _not_divisible(ctx, realize, iv, subject, hl)
        lo, hi = bound_of(simplify(inner_part), inner_ranges)
        if lo != 0 or hi is None:
            raise _not_divisible(ctx, realize, iv, subject, hl)
        extent = hi + 1
        if const % extent or any(c % extent for _, c in outer_terms):
            raise _not_divisible(ctx, realize, iv, subject, hl)
        outer: E.PrimExpr = E.const(const // extent, value.dtype)
        for atom, c in outer_terms:
            outer = outer + atom * E.const(c // extent, value.dtype)
        outer = simplify(outer)
        olo, ohi = bound_of(outer, all_ranges)
        if olo is None or ohi is None or olo < 0:
            raise _not_divisible(ctx, realize, iv, subject, hl)
        if dom is not None and (ohi + 1) * extent > dom and not _guarded(realize):
            raise _not_divisible(ctx, realize, iv, subject, hl)
        out.append(Division(outer, E.const(ohi + 1, value.dtype), simplify(inner_part),
                            E.const(extent, value.dtype)))
    return out


def _guarded(realize: BlockRealize) -> bool:
    return not is_true(realize.predicate)


def _not_divisible(ctx: Ctx, realize: BlockRealize, iv: IterVar, subject: str, hl: list):
    name = realize.block.name_hint
    return ctx.error(subject, f"the binding of axis {iv.var.name} of block {name} cannot be "
                     "split into a part of the loops outside and a part of the loops inside "
                     "(it is not of the form outer * E + inner with inner in [0, E))",
                     "blockize at a loop whose loops below bind whole tiles of every axis, "
                     "e.g. after split and reorder", highlight=hl + [name])


def split_predicate(ctx: Ctx, realize: BlockRealize, inner_vars: set, subject: str,
                    hl: list) -> tuple:
    """(outer predicate, inner predicate): each conjunct goes to the side whose loops it
    uses; one using both is refused."""
    outer, inner = true_const(), true_const()
    for c in conjuncts(realize.predicate):
        if is_true(c):
            continue
        vs = collect_vars(c)
        if all(id(v) in inner_vars for v in vs):
            inner = conj(inner, c)
        elif not any(id(v) in inner_vars for v in vs):
            outer = conj(outer, c)
        else:
            raise ctx.error(subject, f"the T.where guard of block {realize.block.name_hint} "
                            "mixes loops outside and inside the blockized loop",
                            "split with factors that divide the extent, or blockize at the "
                            "outer of the split loops", highlight=hl)
    return outer, inner


class _Simplify(Mutator):
    """Simplify every buffer index and region after a substitution."""

    def visit_BufferLoad(self, e):
        return E.BufferLoad(e.buffer, tuple(simplify(self.visit(i)) for i in e.indices))

    def visit_BufferStore(self, s):
        return s.replace(value=self.visit(s.value),
                         indices=tuple(simplify(self.visit(i)) for i in s.indices))

    def visit_BufferRegion(self, r):
        return BufferRegion(r.buffer, tuple(Range(simplify(g.min), simplify(g.extent))
                                            for g in r.region))

    def visit_BlockRealize(self, r):
        r = self.generic_visit(r)
        return r.replace(iter_values=tuple(simplify(v) for v in r.iter_values),
                         predicate=simplify(r.predicate))


def relax_regions(regions, ranges: dict) -> tuple:
    """Each region relaxed over ``ranges`` (var -> (lo, hi)); whole dimension when the
    bound is not found."""
    out = []
    for r in regions:
        dims = []
        for d, g in enumerate(r.region):
            lo = relax(g.min, ranges)
            hi = relax(simplify(g.min + g.extent - 1), ranges)
            if lo is None or hi is None:
                dims.append(Range(0, r.buffer.shape[d]))
            else:
                dims.append(Range(lo[0], simplify(hi[1] - lo[0] + 1)))
        out.append(BufferRegion(r.buffer, tuple(dims)))
    return tuple(out)


def _without_unit_axes(realize: BlockRealize) -> BlockRealize:
    """``realize`` with its block's axes of extent 1 replaced by their minimum (TVM's
    blockize with ``preserve_unit_iters=False``)."""
    blk = realize.block
    units = {iv.var: iv.dom.min for iv in blk.iter_vars if E.is_const_int(iv.dom.extent, 1)}
    if not units:
        return realize
    keep = [(iv, v) for iv, v in zip(blk.iter_vars, realize.iter_values) if iv.var not in units]
    new = substitute(blk.replace(iter_vars=()), units).replace(
        iter_vars=tuple(iv for iv, _ in keep))
    return realize.replace(block=new, iter_values=tuple(v for _, v in keep))


def blockize_blocks(ctx: Ctx, blocks: list, preserve_unit_iters: bool = True) -> Result:
    """``blockize([b1, b2, ...])`` (TVM's blockize of blocks): the consecutive statements of
    one sequence that hold the blocks — each statement exactly one of them — wrapped in one
    new block ``outer_<names>_`` with a unit spatial axis per axis of the first block (as
    TVM builds it), reading and writing the union of what they read and write.

    Before::

        for m in range(6):
            for i, j in T.grid(3, 1):
                with T.block("B"): ...
            for i, j in T.grid(128, 64):
                with T.block("C"): ...

    Call::

        sch.blockize([sch.get_block("B"), sch.get_block("C")])

    After::

        for m in range(6):
            with T.block("outer_B_C_"):
                vi_o = T.axis.spatial(1, 0)
                vj_o = T.axis.spatial(1, 0)
                T.reads(A[0:128, 0:128])
                T.writes(B[0:128, 0:128])
                for i, j in T.grid(3, 1):
                    with T.block("B"): ...
                for i, j in T.grid(128, 64):
                    with T.block("C"): ...
    """
    from engine.ir.stmt import SeqStmt
    names = [b.name_hint if isinstance(b, Block) else "?" for b in blocks]
    hl = [n for n in names if n != "?"]
    if not blocks or not all(isinstance(b, Block) for b in blocks):
        raise ctx.error("target", "blockize takes a loop or a list of blocks", "", highlight=hl)
    if len({id(b) for b in blocks}) != len(blocks):
        raise ctx.error("target", "a block is given twice", "", highlight=hl)
    # the statement of the enclosing sequence that holds each block
    holders = []
    parent = None
    for b in blocks:
        realize = ctx.index.realize[id(b)]
        top, up = realize, ctx.index.parent.get(id(realize))
        while up is not None and not isinstance(up, SeqStmt):
            if isinstance(up, Block):
                raise ctx.error(f"block {b.name_hint}", "the blocks must be statements of "
                                "one sequence (siblings under one loop or block)", "",
                                highlight=hl)
            top, up = up, ctx.index.parent.get(id(up))
        if up is None or (parent is not None and up is not parent):
            raise ctx.error(f"block {b.name_hint}", "the blocks must be statements of one "
                            "sequence (siblings under one loop or block)", "", highlight=hl)
        parent = up
        holders.append(top)
    seq_items = list(parent.seq)
    pos = sorted(seq_items.index(h) for h in holders)
    if pos != list(range(pos[0], pos[0] + len(pos))):
        raise ctx.error("target", "the blocks must follow one another, with nothing between "
                        "them", "", highlight=hl)
    for h, b in zip(holders, blocks):
        inside = [x for x in ctx.index.blocks_under(h) if x is not b] \
            if not isinstance(h, BlockRealize) else []
        if inside:
            raise ctx.error(f"block {b.name_hint}", f"its loops also hold block "
                            f"{inside[0].name_hint}, which is not in the list", "",
                            highlight=[*hl, inside[0].name_hint])
    reads, writes = [], []
    for h, b in zip(holders, blocks):
        realize = ctx.index.realize[id(b)]
        ranges = _ranges([lp for lp in ctx.index.loops_above(realize)
                          if lp is h or ctx.index.contains(h, lp)])
        bind = dict(zip((iv.var for iv in b.iter_vars), realize.iter_values))

        def at_loops(regions):
            return [BufferRegion(r.buffer, tuple(
                Range(simplify(substitute(g.min, bind)), g.extent) for g in r.region))
                for r in regions]
        reads += relax_regions(at_loops(b.reads), ranges)
        writes += relax_regions(at_loops(b.writes), ranges)
    first = blocks[0]
    ivs = tuple(IterVar(E.Var(iv.var.name + "_o", iv.var.dtype),
                        Range(E.const(0, iv.var.dtype), E.const(1, iv.var.dtype)),
                        IterType.SPATIAL) for iv in first.iter_vars)
    ordered = [seq_items[p] for p in pos]
    if not preserve_unit_iters:
        mapping = {}
        for b in blocks:
            realize = ctx.index.realize[id(b)]
            mapping[realize] = _without_unit_axes(realize)
        ordered = [_replaced(s, mapping) for s in ordered]
    outer = Block(ivs, union_regions(reads), union_regions(writes),
                  "outer_" + "".join(n + "_" for n in names), seq(*ordered))
    realize = BlockRealize(tuple(E.const(0, iv.var.dtype) for iv in ivs), true_const(), outer)
    new_seq = seq_items[:pos[0]] + [realize] + seq_items[pos[-1] + 1:]
    func = replace_stmts(ctx.func, {parent: seq(*new_seq)})
    return Result(func, [outer])


def _replaced(stmt, mapping: dict):
    """``stmt`` with the statements of ``mapping`` (by identity) replaced."""
    by_id = {id(k): v for k, v in mapping.items()}

    class SwapById(Mutator):
        def visit(self, n):
            if isinstance(n, BlockRealize) and id(n) in by_id:
                return by_id[id(n)]
            return super().visit(n)
    return SwapById().visit(stmt)


def union_regions(regions) -> tuple:
    """One region per buffer: the bounding box of its regions (TVM's UnionRegions)."""
    from engine.arith import Analyzer
    an = Analyzer()
    out: dict = {}
    for r in regions:
        key = id(r.buffer)
        if key not in out:
            out[key] = r
            continue
        old, dims = out[key], []
        for a, b in zip(old.region, r.region):
            lo = an.simplify(E.Min(a.min, b.min))
            hi = an.simplify(E.Max(a.min + a.extent, b.min + b.extent))
            dims.append(Range(lo, an.simplify(hi - lo)))
        out[key] = BufferRegion(r.buffer, tuple(dims))
    return tuple(out.values())


def _dom(extent: E.PrimExpr, dtype: str) -> Range:
    """The domain ``[0, extent)`` of a new axis of ``dtype`` (an int64 axis: int64 bounds)."""
    n = extent if isinstance(extent, int) else E.as_const_int(extent)
    if n is not None:
        extent = E.const(n, dtype)
    return Range(E.const(0, dtype), extent if extent.dtype == dtype else extent.astype(dtype))


def blockize_loop(ctx: Ctx, loop: For, preserve_unit_iters: bool, method: str
                  ) -> tuple[BlockRealize, Block]:
    """The outer block realize that replaces ``loop`` (and the new inner block)."""
    subject, hl = subject_of(loop), [loop.loop_var.name]
    inner_loops, realize = single_block_under(ctx, loop, method)
    block = realize.block
    outer_loops = ctx.index.loops_above(loop)
    outer_ranges = _ranges(outer_loops)
    for a in ctx.index.ancestors(loop):
        if isinstance(a, Block):
            for iv in a.iter_vars:
                lo, ext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
                if lo is not None and ext is not None:
                    outer_ranges[iv.var] = (lo, lo + ext - 1)
    division = divide(ctx, realize, outer_ranges, inner_loops, subject, hl)
    inner_vars = {id(lp.loop_var) for lp in inner_loops}
    outer_pred, inner_pred = split_predicate(ctx, realize, inner_vars, subject, hl)
    # the new axes: every axis gets an outer one; those with an inner extent > 1 an inner one
    outer_ivs, outer_vals, inner_ivs, inner_vals, vmap = [], [], [], [], {}
    # without preserve_unit_iters a loop of one iteration is its minimum (TVM's iterator
    # maps drop unit iterators): the outer binding ``i0`` becomes ``0``
    units = {} if preserve_unit_iters else {
        lp.loop_var: lp.min for lp in outer_loops if E.is_const_int(lp.extent, 1)}
    for iv, dv in zip(block.iter_vars, division):
        dtype = iv.var.dtype
        o = IterVar(E.Var(f"{iv.var.name}_o", dtype), _dom(dv.outer_extent, dtype),
                    iv.iter_type)
        outer_ivs.append(o)
        outer_vals.append(simplify(substitute(dv.outer, units) if units else dv.outer))
        if E.is_const_int(dv.inner_extent, 1):
            unit = E.is_const_int(dv.outer_extent, 1) and not preserve_unit_iters
            vmap[iv.var] = E.const(0, dtype) if unit else o.var
            continue
        i = IterVar(E.Var(f"{iv.var.name}_i", dtype), _dom(dv.inner_extent, dtype),
                    iv.iter_type)
        inner_ivs.append(i)
        inner_vals.append(dv.inner)
        vmap[iv.var] = i.var if E.is_const_int(dv.outer_extent, 1) else \
            o.var * dv.inner_extent + i.var
    sub = _Simplify().visit(substitute(block, vmap))
    outer_reduce = sub.init is not None and any(o.iter_type is IterType.REDUCE
                                               for o in outer_ivs)
    reads = tuple(sub.writes) + tuple(sub.reads) if outer_reduce else sub.reads
    inner_block = sub.replace(iter_vars=tuple(inner_ivs), init=None, reads=reads)
    inner_realize = BlockRealize(tuple(inner_vals), inner_pred, inner_block)
    body = inner_realize
    for lp in reversed(inner_loops):
        body = lp.replace(body=body)
    inner_dom = {i.var: (0, E.as_const_int(i.dom.extent) - 1) for i in inner_ivs}
    used = {b.name_hint for bs in ctx.index.blocks.values() for b in bs}
    outer_name = fresh_name(f"{block.name_hint}_o", used)
    used.add(outer_name)
    init = None
    if sub.init is not None:
        init = _outer_init(ctx, sub.init, inner_realize, inner_loops,
                           fresh_name(f"{block.name_hint}_init", used))
    outer_block = Block(tuple(outer_ivs), relax_regions(sub.reads, inner_dom),
                        relax_regions(sub.writes, inner_dom), outer_name, body, init,
                        (), ())
    return BlockRealize(tuple(outer_vals), outer_pred, outer_block), inner_block


def _outer_init(ctx: Ctx, init, inner_realize: BlockRealize, inner_loops: list, name: str):
    """The outer block's init: the original init in a block over the inner spatial axes
    it uses, inside copies of the inner loops those axes are bound to (TVM's rule).

    The inner block's ``T.where`` holds for the init where it held at the first iteration
    of the reduction: the loops the init does not copy are read at their minimum (a split
    reduction's tail guard ``k_0 * 3 + k_1 < 16`` is true there and disappears). That is
    the original's init only when every reduction axis is at its minimum there; otherwise
    the step is refused."""
    blk = inner_realize.block
    vmap, ivs, vals = {}, [], []
    for iv, val in zip(blk.iter_vars, inner_realize.iter_values):
        if iv.iter_type is IterType.SPATIAL and uses_var(init, iv.var):
            new = IterVar(E.Var(f"{iv.var.name}_init", iv.var.dtype), iv.dom, iv.iter_type)
            vmap[iv.var] = new.var
            ivs.append(new)
            vals.append(val)
    kept = [lp for lp in inner_loops if any(uses_var(v, lp.loop_var) for v in vals)]
    dropped = [lp for lp in inner_loops if lp not in kept]
    pred = inner_realize.predicate
    if any(uses_var(pred, lp.loop_var) for lp in dropped):
        first = {lp.loop_var: lp.min for lp in dropped}
        for iv, val in zip(blk.iter_vars, inner_realize.iter_values):
            if iv.iter_type is not IterType.REDUCE:
                continue
            at = E.as_const_int(simplify(substitute(val, first)))
            if at is None or at != E.as_const_int(iv.dom.min):
                raise ctx.error(
                    f"block {blk.name_hint}", f"its T.where reads the reduction loops, and "
                    f"axis {iv.var.name} is not at its minimum at their first iteration, so "
                    "the init's condition cannot be told",
                    "blockize a loop that keeps the reduction loops inside the block's "
                    "inner loops, or remove the guard first")
        pred = simplify(substitute(pred, first))
    writes = substitute(blk.writes, vmap)
    stmt = BlockRealize(tuple(vals), pred,
                        Block(tuple(ivs), (), writes, name, substitute(init, vmap)))
    for lp in reversed(kept):
        nv = E.Var(lp.loop_var.name, lp.loop_var.dtype)
        vmap[lp.loop_var] = nv
        stmt = For(nv, lp.min, lp.extent, lp.kind, stmt, lp.annotations, lp.thread_tag)
    return substitute(stmt, vmap)


@register
class Blockize(Primitive):
    kind = "Blockize"
    attr_kinds = (("preserve_unit_iters", "bool"),)
    required_attrs = 0
    method = "blockize"
    returns = "one"
    list_inputs = (0,)          # TVM's target: a loop, or a list of blocks

    def call(self, sch, target, preserve_unit_iters: bool = True):
        """Convert the subtree rooted at a loop into a block: a new outer block whose
        axes are the tiles the loops above bind, around the loops and the original block.

        It requires: 1) ``target`` is a valid loop handle; 2) the loops from ``target``
        down hold exactly one block and nothing else; 3) every binding of that block can
        be divided into a part of the loops outside ``target`` and a part of the loops
        inside it (``outer * E + inner`` with ``inner`` in ``[0, E)``, or using only one
        side); 4) a ``T.where`` guard does not mix the two sides. A reduction's init
        moves to the new block, as a loop nest around a block ``<name>_init``.

        Before::

            for i_0, j_0, i_1, j_1 in T.grid(8, 8, 16, 16):
                with T.block("C"):
                    vi = T.axis.spatial(128, i_0 * 16 + i_1)
                    vj = T.axis.spatial(128, j_0 * 16 + j_1)
                    C[vi, vj] = A[vi, vj] * T.float32(2)

        Call::

            i_0, j_0, i_1, j_1 = sch.get_loops(sch.get_block("C"))
            c_o = sch.blockize(i_1)

        After::

            for i_0, j_0 in T.grid(8, 8):
                with T.block("C_o"):
                    vi_o, vj_o = T.axis.remap("SS", [i_0, j_0])
                    T.reads(A[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                    T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                    for i_1, j_1 in T.grid(16, 16):
                        with T.block("C"):
                            vi_i, vj_i = T.axis.remap("SS", [i_1, j_1])
                            C[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = ...

        Returns the new outer block; handles to the original block and the loops inside
        stay valid.
        """
        if isinstance(target, (list, tuple)):
            target = list(target)
        return sch._run(self, [target], [bool(preserve_unit_iters)])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = inputs[0]
        if isinstance(loop, list):
            keep = as_bool(ctx, attrs[0], "preserve_unit_iters") if attrs else True
            return blockize_blocks(ctx, loop, keep)
        if not isinstance(loop, For):
            raise ctx.error(subject_of(loop), "the target must be a loop handle",
                            "get loops with sch.get_loops(block)")
        keep = as_bool(ctx, attrs[0], "preserve_unit_iters") if attrs else True
        outer, _inner = blockize_loop(ctx, loop, keep, self.method)
        return Result(replace_stmts(ctx.func, {loop: outer}), [outer.block])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            keep = self.attr(attrs, 0, default=True)
            return [fmt(inputs[0])] + ([] if keep == "True" else [f"preserve_unit_iters={keep}"])
        return [f"target={fmt(inputs[0])}",
                f"preserve_unit_iters={self.attr(attrs, 0, default=True)}"]
