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
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, seq

from ..registry import Ctx, Result
from ..tree import flatten_seq
from ._common import conj, fresh_name
from .buffers import BufferSwap, buffer_names, compose, rewrite_stmts
from .region_inference import access_bounds, inner_loops, outer_analyzer


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


def add_cache_stage(ctx: Ctx, direction: str, buf: Buffer, scope: str, scope_blk: Block,
                    node: Any, pos: int, writer: Block | None, readers: list) -> Result:
    """Add the cache of ``buf`` in ``scope`` and its copy stage, the common part of
    cache_read (``direction="read"``: the stage copies ``buf`` into the cache) and
    cache_write (``"write"``: ``writer`` writes the cache, the stage copies it back).

    The stage copies what ``writer`` writes of ``buf`` over the loops between it and
    ``node`` (the whole buffer when there is no writer) and is inserted at position ``pos``
    among ``node``'s children; ``readers`` read the cache instead of ``buf``; the cache is
    allocated in ``scope_blk``. Returns the new function and the stage block."""
    cache = Buffer(fresh_name(f"{buf.name}_{scope}", buffer_names(ctx.func)), buf.shape,
                   buf.dtype, scope, (), 0, buf.align)
    stage_name = fresh_name(cache.name, set(ctx.index.blocks))
    if writer is None:
        region = [(E.const(0, _index_dtype(s)), s) for s in buf.shape]
        an = Analyzer()
    else:
        wreg = next(w for w in writer.writes if w.buffer is buf)
        region = relaxed_region(ctx, writer, wreg, loops_between(ctx, writer, node))
        an = outer_analyzer(ctx, node)
    src, dst = (buf, cache) if direction == "read" else (cache, buf)
    nest, stage = copy_stage(stage_name, src, dst, region, an)
    edits: dict = {}
    compose(edits, id(node), lambda s, p=pos, n=nest: _insert_at(s, p, n))
    if direction == "write":
        compose(edits, id(writer), BufferSwap(buf, cache).visit)
    swap = BufferSwap(buf, cache, loads=True, stores=False, reads=True, writes=False)
    for c in readers:
        compose(edits, id(c), swap.visit)
    compose(edits, id(scope_blk), _add_alloc(cache))
    return Result(rewrite_stmts(ctx.func, edits), [stage])
