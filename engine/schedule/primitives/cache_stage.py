"""The copy stage of cache_read / cache_write (TVM's MakeCacheStage and its placement).

A cache stage is a new buffer (``A_global``, ``C_local``) plus a block of the same name that
copies between it and the original buffer over the region one block writes. It is placed
as TVM places it: in the innermost loop (or the scope block) that encloses both the block
that writes the buffer and the first block that reads it, between the two. The accesses
the stage takes over are then rewritten to the cache, and the cache is allocated in the
scope block. :func:`add_cache_stage` does all of that for both primitives; what differs
between them (their checks, which blocks read the cache, where the stage goes when there
is no writer or no reader) stays in :mod:`.cache`. The copied region is relaxed over loops
as compute_at's is (:mod:`.region_inference`).
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer
from engine.arith.guarded import GuardedBounds
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import post_order_visit, substitute
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, seq

from ..registry import Ctx, Result
from ..tree import flatten_seq
from ._common import conj, conjuncts, fresh_name, is_true
from .buffers import BufferSwap, buffer_names, compose, rewrite_stmts
from .cache_regions import relaxed_box, union_box
from .region_inference import access_bounds, inner_loops


def scope_children(ctx: Ctx, scope_blk: Block) -> list[Block]:
    """Blocks whose nearest enclosing block is ``scope_blk``, in execution order."""
    idx = ctx.index
    return [b for b in idx.all_blocks() if idx.scope_block(idx.realize[id(b)]) is scope_blk]


def common_location(ctx: Ctx, a: Block, b: Block, scope_blk: Block):
    """TVM's cache location: the innermost loop (or the scope block) enclosing both ``a``
    and ``b``, and the position in its body of the child that contains ``b``.

    Returns ``(node, children, pos_a, pos_b)``."""
    idx = ctx.index
    ra, rb = idx.realize[id(a)], idx.realize[id(b)]
    anc_b = {id(x) for x in idx.ancestors(rb)}
    node = scope_blk
    for x in idx.ancestors(ra):
        if id(x) in anc_b and isinstance(x, (For, Block)):
            node = x
            break
    children = flatten_seq(node.body)
    pos_a = pos_b = -1
    for i, c in enumerate(children):
        if idx.contains(c, ra):
            pos_a = i
        if idx.contains(c, rb):
            pos_b = i
    return node, children, pos_a, pos_b


def loops_between(ctx: Ctx, blk: Block, outer: Any) -> list[For]:
    """Loops around ``blk`` strictly inside ``outer`` (a For or a Block), outermost first."""
    realize = ctx.index.realize[id(blk)]
    if isinstance(outer, For):
        return inner_loops(ctx, outer, realize)
    return ctx.index.loops_above(realize)


def relaxed_region(ctx: Ctx, blk: Block, region: BufferRegion, loops: list[For]):
    """The region ``blk`` accesses over all iterations of ``loops``, per dimension
    ``(min_expr, extent_expr)`` in the variables of the loops outside them; a dimension
    that cannot be bounded covers the whole buffer."""
    empty_loop = any(E.as_const_int(lp.extent) is not None and E.as_const_int(lp.extent) < 1
                     for lp in loops)
    bounds = None if empty_loop else access_bounds(ctx, blk, region, loops)
    an = Analyzer()
    out = []
    for d in range(len(region.region)):
        full = (E.const(0, "int32"), region.buffer.shape[d])
        if bounds is None or bounds[d] is None:
            out.append(full)
            continue
        lo, hi = bounds[d]
        clo, chi = E.as_const_int(lo), E.as_const_int(hi)
        size = E.as_const_int(region.buffer.shape[d])
        if clo is not None and chi is not None and size is not None:  # clamp to the buffer
            lo, hi = E.const(max(clo, 0), "int32"), E.const(min(chi, size - 1), "int32")
        ext = an.simplify(hi - lo + 1)
        if E.as_const_int(ext) is None:
            out.append(full)
            continue
        out.append((an.simplify(lo), ext))
    return out


def copy_stage(name: str, src: Buffer, dst: Buffer, region: list, an: Analyzer):
    """The loop nest ``for ax0, ax1, ... : dst[v] = src[v]`` over ``region`` (TVM's
    MakeCacheStage): one loop per dimension, block axes ``v0, v1, ...`` spanning the whole
    buffer, bound to ``min + ax``. A guard keeps the axes inside the buffer when the region
    may stick out (e.g. the tail of a non-divisible split). Returns (nest, block)."""
    shape = src.shape
    loop_vars, values, ivs, preds = [], [], [], []
    for d, (mn, ext) in enumerate(region):
        dt = _index_dtype(ext, shape[d])      # int64 for an int64 buffer, as TVM
        ax = E.Var(f"ax{d}", dt)
        loop_vars.append((ax, ext))
        val = an.simplify(mn + ax) if not E.is_const_int(mn, 0) else ax
        values.append(val)
        ivs.append(IterVar(E.Var(f"v{d}", dt), Range(E.const(0, dt), shape[d]),
                           IterType.SPATIAL))
        e = E.as_const_int(ext)
        lo_b = an.bound(mn)
        hi_b = an.bound(an.simplify(mn + (ext - 1))) if e is not None else None
        size = E.as_const_int(shape[d])
        if not (lo_b and lo_b[0] is not None and lo_b[0] >= 0):
            preds.append(E.binary(E.LE, E.const(0, dt), val))
        if not (hi_b and hi_b[1] is not None and size is not None and hi_b[1] < size):
            preds.append(E.binary(E.LT, val, shape[d]))
    idx = tuple(iv.var for iv in ivs)
    point = tuple(Range(v, E.const(1, v.dtype)) for v in idx)
    block = Block(tuple(ivs), (BufferRegion(src, point),), (BufferRegion(dst, point),), name,
                  BufferStore(dst, E.BufferLoad(src, idx), idx))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for p in preds:
        pred = conj(pred, p)
    nest: Any = BlockRealize(tuple(values), pred, block)
    for ax, ext in reversed(loop_vars):
        nest = For(ax, E.const(0, ax.dtype), ext, ForKind.SERIAL, nest)
    return nest, block


def _index_dtype(*sizes) -> str:
    """int64 when any of ``sizes`` is an int64 expression, else int32."""
    return "int64" if any(isinstance(s, E.PrimExpr) and s.dtype == "int64" for s in sizes) \
        else "int32"


def _insert_at(node, pos: int, stage):
    children = flatten_seq(node.body)
    return node.replace(body=seq(*(children[:pos] + [stage] + children[pos:])))


def _add_alloc(buf: Buffer):
    return lambda b: b.replace(alloc_buffers=b.alloc_buffers + (buf,))


# ---------------------------------------------------------------------------
# the region a stage copies (TVM's RelaxBufferRegion and its nested predicates)
# ---------------------------------------------------------------------------
def location_analyzer(ctx: Ctx, node: Any) -> GuardedBounds:
    """What holds at ``node`` (inside it, where a stage goes): the ranges of the loops
    around it (and of ``node`` itself when it is a loop), the domains of the axes of the
    blocks around it (``node``'s own when it is a block) and their ``T.where``."""
    an = GuardedBounds()
    chain = [node] + ctx.index.ancestors(node)
    for a in chain:
        if isinstance(a, For):
            _know_range(an, a.loop_var, a.min, a.extent)
        elif isinstance(a, Block):
            for iv in a.iter_vars:
                _know_range(an, iv.var, iv.dom.min, iv.dom.extent)
            r = ctx.index.realize.get(id(a))
            if r is not None and not is_true(r.predicate):
                an.assume(r.predicate)
    return an


def _know_range(an: GuardedBounds, v: E.Var, mn, ext) -> None:
    lo, n = E.as_const_int(mn), E.as_const_int(ext)
    if lo is not None and n is not None:
        if n > 0:
            an.ranges[v] = (lo, lo + n - 1)
        return
    an.assume(E.binary(E.GE, v, mn))
    an.assume(E.binary(E.LT, v, E.binary(E.Add, mn, ext)))


def nested_alternatives(blk: Block, buf: Buffer, kind: str) -> list:
    """TVM's CollectNestedBlockPredicates: the ``T.where`` of each block nested in ``blk``
    that reads (``kind="read"``) or writes ``buf``, in ``blk``'s variables, as lists of
    conjuncts; the access happens under one of them (a union, never their conjunction).
    ``[[]]`` (no restriction) when no nested block accesses ``buf`` or one does without a
    predicate."""
    alts: list = []
    trivial = [False]

    def fn(x):
        if not isinstance(x, BlockRealize):
            return
        regions = x.block.reads if kind == "read" else x.block.writes
        if not any(r.buffer is buf for r in regions):
            return
        pred = substitute(x.predicate, {iv.var: v for iv, v in
                                        zip(x.block.iter_vars, x.iter_values)})
        if is_true(pred):
            trivial[0] = True
        alts.append([c for c in conjuncts(pred) if not is_true(c)])
    post_order_visit(blk.body, fn)
    return [[]] if trivial[0] or not alts else alts


def stage_region(ctx: Ctx, blk: Block, region: BufferRegion, node: Any,
                 alternatives: list | None = None) -> list:
    """The region ``region`` (an access region of ``blk``) covers over the loops between
    ``blk`` and ``node``, under ``blk``'s ``T.where`` and, when given, one of
    ``alternatives`` (the nested blocks' predicates: the union of the boxes), per
    dimension ``(min, extent)`` in the variables outside those loops; clamped to the
    buffer when constant; a dimension that cannot be bounded (or whose extent is not a
    constant) covers the whole buffer."""
    r = ctx.index.realize[id(blk)]
    vmap = {iv.var: v for iv, v in zip(blk.iter_vars, r.iter_values)}
    loops = loops_between(ctx, blk, node)
    an = location_analyzer(ctx, node)
    base = [c for c in conjuncts(r.predicate) if not is_true(c)]
    ranges = [(substitute(rg.min, vmap),
               substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1), vmap))
              for rg in region.region]
    boxes = [relaxed_box(ranges, base + [substitute(c, vmap) for c in alt], loops, an)
             for alt in (alternatives or [[]])]
    box = boxes[0] if len(boxes) == 1 else union_box(boxes, an)
    return box_region(box, region.buffer, an)


def box_region(box: list | None, buf: Buffer, an: Analyzer) -> list:
    """Inclusive ``(lo, hi)`` per dimension as ``(min, extent)``, clamped to ``buf`` when
    constant; a dimension unknown or of no constant extent covers the whole buffer."""
    out = []
    for d, size_e in enumerate(buf.shape):
        full = (E.const(0, _index_dtype(size_e)), size_e)
        if box is None or box[d] is None:
            out.append(full)
            continue
        lo, hi = box[d]
        clo, chi = E.as_const_int(lo), E.as_const_int(hi)
        size = E.as_const_int(size_e)
        if clo is not None and chi is not None and size is not None:  # clamp to the buffer
            dt = _index_dtype(size_e)
            lo, hi = E.const(max(clo, 0), dt), E.const(min(chi, size - 1), dt)
        ext = an.simplify(hi - lo + 1)
        if E.as_const_int(ext) is None or E.as_const_int(ext) < 1:
            out.append(full)
            continue
        out.append((an.simplify(lo), ext))
    return out


def region_box(region: list) -> list:
    """``(min, extent)`` per dimension as inclusive ``(lo, hi)``."""
    return [(mn, mn + ext - 1) for mn, ext in region]


# ---------------------------------------------------------------------------
# the compact cache (TVM's cache_full_region=False)
# ---------------------------------------------------------------------------
def compact_copy_stage(name: str, buf: Buffer, cache: Buffer, region: list, direction: str,
                       an: Analyzer):
    """The copy between ``buf[min + v]`` and ``cache[v]`` over ``region``: loops ``ax0,
    ax1, ...`` over the extents, block axes ``v0, v1, ...`` spanning the cache, bound to
    the loops (TVM's stage of a compact cache); ``direction`` "read" copies into the
    cache, "write" back to ``buf``. A guard keeps ``min + v`` inside ``buf`` where that
    is not proven. Returns (nest, block)."""
    loop_vars, ivs, buf_idx, preds = [], [], [], []
    for d, (mn, ext) in enumerate(region):
        dt = _index_dtype(ext, buf.shape[d])
        ax = E.Var(f"ax{d}", dt)
        v = E.Var(f"v{d}", dt)
        loop_vars.append((ax, ext))
        ivs.append(IterVar(v, Range(E.const(0, dt), ext), IterType.SPATIAL))
        buf_idx.append(v if E.is_const_int(mn, 0) else E.binary(E.Add, mn, v))
        lo_b = an.bound(mn)
        if not (lo_b and lo_b[0] is not None and lo_b[0] >= 0):
            preds.append(E.binary(E.LE, E.const(0, dt), E.binary(E.Add, mn, ax)))
        hi_b = an.bound(an.simplify(mn + ext - 1 - buf.shape[d]))
        if not (hi_b and hi_b[1] is not None and hi_b[1] < 0):
            preds.append(E.binary(E.LT, E.binary(E.Add, mn, ax), buf.shape[d]))
    cache_idx = tuple(iv.var for iv in ivs)
    buf_point = tuple(Range(i, E.const(1, i.dtype)) for i in buf_idx)
    cache_point = tuple(Range(v, E.const(1, v.dtype)) for v in cache_idx)
    if direction == "read":
        reads, writes = (BufferRegion(buf, buf_point),), (BufferRegion(cache, cache_point),)
        body = BufferStore(cache, E.BufferLoad(buf, tuple(buf_idx)), cache_idx)
    else:
        reads, writes = (BufferRegion(cache, cache_point),), (BufferRegion(buf, buf_point),)
        body = BufferStore(buf, E.BufferLoad(cache, cache_idx), tuple(buf_idx))
    block = Block(tuple(ivs), reads, writes, name, body)
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for p in preds:
        pred = conj(pred, p)
    nest: Any = BlockRealize(tuple(ax for ax, _ in loop_vars), pred, block)
    for ax, ext in reversed(loop_vars):
        nest = For(ax, E.const(0, ax.dtype), ext, ForKind.SERIAL, nest)
    return nest, block


class ShiftedSwap(BufferSwap):
    """:class:`.buffers.BufferSwap` onto a cache that starts at ``mins`` of the buffer
    (zeros for a cache of the buffer's shape): the indices and regions of the accesses
    moved to it lose that offset (``A[vi] -> A_local[vi - i * 16]``), and so do the
    regions of the ``T.match_buffer`` views of the buffer, which view the cache."""

    def __init__(self, old: Buffer, new: Buffer, mins: list, an: Analyzer, **kinds):
        super().__init__(old, new, **kinds)
        self.mins, self.an = mins, an

    def _shift(self, indices) -> tuple:
        return tuple(i if E.is_const_int(m, 0) else self.an.simplify(i - m)
                     for i, m in zip(indices, self.mins))

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        if self.loads and e.buffer is self.old:
            return E.BufferLoad(self.new, self._shift(e.indices))
        return e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        if self.stores and s.buffer is self.old:
            return BufferStore(self.new, s.value, self._shift(s.indices))
        return s

    def visit_Block(self, b):
        b2 = self.generic_visit(b)
        changes = {}
        for field, on in (("reads", self.reads), ("writes", self.writes)):
            regions = getattr(b2, field)
            if on and any(r.buffer is self.old for r in regions):
                changes[field] = tuple(self._region(r) if r.buffer is self.old else r
                                       for r in regions)
        views = getattr(b2, "match_buffers", ())
        if self.loads and any(m.source.buffer is self.old for m in views):
            # a T.match_buffer view of the buffer now views the cache (TVM's too)
            changes["match_buffers"] = tuple(
                m.replace(source=self._region(m.source)) if m.source.buffer is self.old
                else m for m in views)
        return b2.replace(**changes) if changes else b2

    def _region(self, r: BufferRegion) -> BufferRegion:
        mins = self._shift([rg.min for rg in r.region])
        return BufferRegion(self.new, tuple(Range(m, rg.extent)
                                            for m, rg in zip(mins, r.region)))


def add_cache_stage(ctx: Ctx, direction: str, buf: Buffer, scope: str, scope_blk: Block,
                    node: Any, pos: int, writer: Block | None, readers: list,
                    region: list) -> Result:
    """Add the cache of ``buf`` in ``scope`` and its copy stage, the common part of
    cache_read (``direction="read"``: the stage copies ``buf`` into the cache) and
    cache_write (``"write"``: ``writer`` writes the cache, the stage copies it back).

    The stage copies ``region`` (per dimension ``(min, extent)``: what ``writer`` writes
    over the loops between it and ``node``, or what the readers need) and is inserted at
    position ``pos`` among ``node``'s children; ``readers`` read the cache instead of
    ``buf``; the cache is allocated in ``scope_blk``. As TVM's, when the stage goes into
    a block (``node`` is the scope block, so every access to the cache is under it) the
    cache holds just the region — its shape the region's extents, the accesses moved to
    it shifted by the region's start; inside a loop it has the buffer's shape. Returns
    the new function and the stage block."""
    compact = isinstance(node, Block)
    shape = tuple(ext for _mn, ext in region) if compact else buf.shape
    cache = Buffer(fresh_name(f"{buf.name}_{scope}", buffer_names(ctx.func)), shape,
                   buf.dtype, scope, (), 0, buf.align)
    stage_name = fresh_name(cache.name, set(ctx.index.blocks))
    an = location_analyzer(ctx, node)
    if compact:
        nest, stage = compact_copy_stage(stage_name, buf, cache, region, direction, an)
    else:
        src, dst = (buf, cache) if direction == "read" else (cache, buf)
        nest, stage = copy_stage(stage_name, src, dst, region, an)
    mins = [mn if compact else E.const(0, _index_dtype(mn)) for mn, _ext in region]

    def swap(**kinds):
        return ShiftedSwap(buf, cache, mins, an, **kinds)
    edits: dict = {}
    compose(edits, id(node), lambda s, p=pos, n=nest: _insert_at(s, p, n))
    if direction == "write":
        compose(edits, id(writer), swap().visit)
    read_swap = swap(loads=True, stores=False, reads=True, writes=False)
    for c in readers:
        compose(edits, id(c), read_swap.visit)
    compose(edits, id(scope_blk), _add_alloc(cache))
    return Result(rewrite_stmts(ctx.func, edits), [stage])
