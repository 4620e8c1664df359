"""reindex, reindex_cache_read, reindex_cache_write: a copy stage whose buffer is indexed by
the block's own axes (or by an index map of them) instead of the original indices.

* ``reindex`` puts a buffer the block accesses behind a copy ``<name>_reindex`` laid out by
  the axes its indices use, in the block's order: ``B[vk, vj]`` becomes
  ``B_reindex[vj, vk]``, so the access is a plain ``[axes]`` point (what tensorization and
  layout rewriting want).
* ``reindex_cache_read`` / ``reindex_cache_write`` are cache_read / cache_write of one
  block's single-point access where the cache is indexed through a user index map of the
  block's axes: ``lambda vi, vj, vk: (vk, vi)``. The copy stage runs the block's own loops
  (those its accessed axes are bound to), so it is as easy to move as the block.

The stages are built by :func:`.stages.grid_stage` (reindex) or here (the cache stages copy
the block's loops); index maps are read as :mod:`.layout` reads them.
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer, bound_of
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, collect_vars, post_order_visit, substitute
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IterType,
                             IterVar, LetStmt, SeqStmt, seq)

from ..error import ScheduleError, TraceError
from ..literals import py_str
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import affine_bindings, expect_block, fresh_name, is_true
from .buffers import (buffer_index_of, buffer_names, check_scope, compose, loads_buf,
                      need_attrs, nth_buffer, reads_buf, rewrite_stmts, writes_buf)
from .cache_stage import common_location, scope_children
from .index_map_check import CheckBudgetError, IndexMapError, injective
from .layout import _buffer_arg, map_text, normalize_index_map, parse_index_map, \
    tvm_index_map_from_json
from .stages import grid_stage

READ, WRITE = 0, 1
_NAMES = {READ: "read", WRITE: "write"}


class _Reaccess(Mutator):
    """Every load/store of ``old`` becomes an access of ``new`` at ``indices``; regions of
    ``old`` become that point (nested blocks are not entered: the block is a leaf)."""

    def __init__(self, old: Buffer, new: Buffer, indices: tuple):
        self.old, self.new, self.indices = old, new, tuple(indices)

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        return E.BufferLoad(self.new, self.indices) if e.buffer is self.old else e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        return BufferStore(self.new, s.value, self.indices) if s.buffer is self.old else s

    def regions(self, regions: tuple) -> tuple:
        point = _point(self.indices)
        return tuple(BufferRegion(self.new, point) if r.buffer is self.old else r
                     for r in regions)

    def block(self, b: Block) -> Block:
        init = None if b.init is None else self.visit(b.init)
        return b.replace(body=self.visit(b.body), init=init, reads=self.regions(b.reads),
                         writes=self.regions(b.writes))


def _point(indices) -> tuple:
    """The one-element region at ``indices``: each extent 1 of its index's dtype (an int64
    index has an int64 extent, as TVM's and the parser's regions)."""
    return tuple(Range(i, E.IntImm(i.dtype, 1)) for i in indices)


def _same_index(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """``a`` and ``b`` are the same index: their difference is 0 (variables compared by
    identity — ``A[vj, vi]`` and ``A[vi, vj]`` are two accesses, not one)."""
    if a is b:
        return True
    try:
        return E.is_const_int(Analyzer().simplify(E.Sub(a, b)), 0)
    except Exception:  # noqa: BLE001 - an index the simplifier cannot subtract
        return False


def _access_indices(ctx: Ctx, blk: Block, buf: Buffer) -> tuple:
    """The one index tuple every load/store of ``buf`` in the leaf block uses (TVM's rule)."""
    found: list = []
    nested = ctx.index.blocks_under(blk)

    def fn(x):
        if isinstance(x, (E.BufferLoad, BufferStore)) and x.buffer is buf:
            found.append(tuple(x.indices))
    for part in (blk.init, blk.body):
        if part is not None:
            post_order_visit(part, fn)
    name = blk.name_hint
    why = ""
    if nested:
        why = f"block {name} is not a leaf block (it contains block {nested[0].name_hint})"
    elif not found:
        why = f"block {name} does not load or store {buf.name}"
    elif any(len(f) != len(found[0]) or not all(_same_index(a, b) for a, b in zip(f, found[0]))
             for f in found[1:]):
        shown = " and ".join(dict.fromkeys(
            f"{buf.name}[{', '.join(str(i) for i in f)}]" for f in found))
        why = f"block {name} accesses {buf.name} at different indices ({shown})"
    if why:
        raise ctx.error(f"block {name}", f"{why} (requirement 1)", "reindex a buffer the block "
                        "accesses at one point, in a block without inner blocks",
                        highlight=[name])
    an = Analyzer({iv.var: (0, E.as_const_int(iv.dom.extent) - 1) for iv in blk.iter_vars
                   if E.as_const_int(iv.dom.extent)})
    return tuple(an.simplify(i) for i in found[0])


def _check_read_copy(ctx: Ctx, blk: Block, buf: Buffer, indices: tuple, covered: list):
    """The copy of an input reads ``buf`` at every value of the axes, before the block: the
    block must not write ``buf`` (its stores would go to the copy), and every index read
    must be inside ``buf`` (a load the block guards, ``T.if_then_else(vi > 0, A[vi - 1],
    ...)``, is read unguarded by the copy)."""
    name = blk.name_hint
    if writes_buf(blk, buf) or _stores(blk, buf):
        raise ctx.error(f"block {name}", f"block {name} also writes {buf.name}, so its "
                        f"stores would go to the copy and {buf.name} would never be written "
                        "(requirement 3)", f"reindex the write of {buf.name} instead",
                        highlight=[name])
    ranges = {iv.var: (0, E.as_const_int(iv.dom.extent) - 1) for iv in covered}
    for d, (i, n) in enumerate(zip(indices, buf.shape)):
        lo, hi = bound_of(i, ranges)
        size = E.as_const_int(n)
        if lo is None or hi is None or size is None or lo < 0 or hi >= size:
            raise ctx.error(f"block {name}", f"the copy would read {buf.name} at index {i} "
                            f"(dimension {d}) for every value of the axes, which can fall "
                            f"outside {buf.name} (requirement 3)", "", highlight=[name])


def _stores(blk: Block, buf: Buffer) -> list:
    """The stores of ``buf`` in the block, each with whether it runs unconditionally
    (not under an ``if`` or a loop inside the block)."""
    out: list = []

    def walk(s, guarded):
        if isinstance(s, BufferStore):
            if s.buffer is buf:
                out.append(not guarded)
            return
        kids = [getattr(s, f) for f in ("body", "then_case", "else_case", "seq")
                if hasattr(s, f)]
        inner = guarded or not isinstance(s, (SeqStmt, LetStmt))
        for k in kids:
            for c in (k if isinstance(k, tuple) else (k,)):
                if c is not None:
                    walk(c, inner)
    walk(blk.body, False)
    return out


def _check_write_copy(ctx: Ctx, blk: Block, buf: Buffer, indices: tuple, covered: list):
    """The copy back writes ``buf`` at every value of the axes, after the block: the block
    must have written each of those elements exactly there. So: it does not read the old
    contents of ``buf`` (without a ``T.init`` the copy would start from uninitialised
    memory), it stores unconditionally, its instances take every value of the axes (its
    bindings are an affine map of its loops and its ``T.where`` skips nothing inside the
    axes' domains), and different values of the axes write different elements."""
    name = blk.name_hint
    if blk.init is None and (reads_buf(blk, buf) or loads_buf(blk.body, buf)):
        raise ctx.error(f"block {name}", f"block {name} reads the old contents of "
                        f"{buf.name} without a T.init, which the copy would not hold "
                        "(requirement 3)", "", highlight=[name])
    stores = _stores(blk, buf)
    if not stores or not all(stores):
        raise ctx.error(f"block {name}", f"block {name} stores {buf.name} only under a "
                        "condition, so the copy back would store elements it did not compute "
                        "(requirement 3)", "", highlight=[name])
    idx = ctx.index
    realize = idx.realize[id(blk)]
    res = affine_bindings(realize.iter_values, idx.loops_above(realize), realize.predicate)
    for iv in covered:
        k = blk.iter_vars.index(iv)
        want = (0, E.as_const_int(iv.dom.extent))
        if not res.ok or res.ranges[k] != want:
            where = "" if is_true(realize.predicate) else " and its T.where"
            raise ctx.error(f"block {name}", f"cannot show that block {name} runs for every "
                            f"value of axis {iv.var.name} in [0, {want[1]}) (its bindings"
                            f"{where} must be an affine map of its loops onto the axes' "
                            "domains), so the copy back could store elements it did not "
                            "compute (requirement 3)", "reindex the write before such loop "
                            "transformations", highlight=[name])
    if not all(isinstance(i, E.Var) for i in indices) or \
            len({id(i) for i in indices}) != len(indices):
        params = [iv.var for iv in covered]
        shape = tuple(E.as_const_int(iv.dom.extent) for iv in covered)
        try:
            ok = injective(params, list(indices), shape, tuple(E.as_const_int(n) or 0
                                                                for n in buf.shape))
        except (CheckBudgetError, IndexMapError) as e:
            raise ctx.error(f"block {name}", str(e), "") from None
        if not ok:
            raise ctx.error(f"block {name}", f"block {name} writes some element of "
                            f"{buf.name} for two values of its axes, and the copy back would "
                            "store them in another order (requirement 3)", "",
                            highlight=[name])


def _chain_top(ctx: Ctx, blk: Block, method: str):
    """The outermost statement of the block's loop chain (each loop holding only the next)."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    cur: Any = realize
    for loop in reversed(idx.loops_above(realize)):
        if loop.body is not cur:
            raise ctx.error(f"block {blk.name_hint}", f"loop {loop.loop_var.name} holds more "
                            f"than block {blk.name_hint}; {method} needs the block's loops "
                            "to form a single chain (requirement 2)", "apply it before "
                            "compute_at or decompose_reduction", highlight=[blk.name_hint])
        cur = loop
    return cur


def _index_map(ctx: Ctx, blk: Block, text: Any) -> tuple[list, list]:
    """The index map of a reindex cache: one parameter per block axis, renamed to them."""
    try:
        if isinstance(text, str) and text.lstrip().startswith("{"):
            params, exprs = tvm_index_map_from_json(text)
        else:
            params, exprs = parse_index_map(text)
    except IndexMapError as e:
        raise ctx.error(f"block {blk.name_hint}", str(e), "") from None
    axes = [iv.var for iv in blk.iter_vars]
    if len(params) != len(axes):
        raise ctx.error(f"block {blk.name_hint}", f"the index map takes {len(params)} "
                        f"index(es) but block {blk.name_hint} has {len(axes)} axes "
                        "(requirement 3)", "give the lambda one parameter per block axis, "
                        f"e.g. lambda {', '.join(a.name for a in axes)}: (...)",
                        highlight=[blk.name_hint])
    vmap = dict(zip(params, axes))
    return axes, [substitute(x, vmap) for x in exprs]


@register
class ReIndex(Primitive):
    kind = "ReIndex"
    method = "reindex"
    returns = "one"
    attr_kinds = (("buffer_index", "int"), ("buffer_index_type", "int"))

    def call(self, sch, block, buffer):
        """Put a buffer the block accesses behind a copy ``<name>_reindex`` indexed by the
        block's axes, in the block's order; returns the new copy block.

        ``buffer`` is ``("read", n)`` / ``("write", n)`` (the n-th buffer of ``T.reads`` /
        ``T.writes``) or a buffer name. The copy of an input runs before the block's loop
        nest, the copy back of an output after it; its axes are those the original indices
        use (an axis the indices do not use is left out).

        It requires: 1) the block contains no other block and accesses the buffer at one
        point (every load and store with the same indices: ``A[vj, vi] + A[vi, vj]`` is
        refused, as in TVM); 2) the block's loops form a single chain (each loop holds
        only the next one); 3) the copy computes what the block did. For a read: the
        block does not also write the buffer, and the copy's reads (every value of the
        axes) stay inside it. For a write: the block does not read the buffer's old
        contents without a ``T.init``, stores it unconditionally, runs for every value of
        the axes (bindings an affine map of its loops, a ``T.where`` that skips nothing
        inside the axes' domains: a split's tail guard is fine) and writes different
        elements for different values of them.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vj, vi] * T.float32(2)

        Call::

            sch.reindex(sch.get_block("B"), ("read", 0))

        After::

            A_reindex = T.alloc_buffer((128, 128))
            for ax0, ax1 in T.grid(128, 128):
                with T.block("A_reindex_reindex"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    A_reindex[v0, v1] = A[v1, v0]
            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A_reindex[vi, vj] * T.float32(2)
        """
        btype, bindex = _buffer_arg(sch, block, buffer, self.method)
        return sch._run(self, [block], [bindex, btype])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        bindex, btype = need_attrs(ctx, attrs, 2, "reindex")[:2]
        if btype not in (READ, WRITE) or isinstance(btype, bool):
            raise ctx.error(f"block {blk.name_hint}", f"the buffer kind must be 0 (read) or 1 "
                            f"(write), got {btype!r}", "")
        buf = nth_buffer(ctx, blk, bindex, _NAMES[btype], "buffer")
        indices = _access_indices(ctx, blk, buf)
        used = {id(v) for i in indices for v in collect_vars(i)}
        covered = [iv for iv in blk.iter_vars if id(iv.var) in used]
        for iv in covered:
            if not E.is_const_int(iv.dom.min, 0) or E.as_const_int(iv.dom.extent) is None:
                raise ctx.error(f"block {blk.name_hint}", f"axis {iv.var.name} does not start "
                                "at 0 with a constant extent", "", highlight=[blk.name_hint])
        top = _chain_top(ctx, blk, "reindex")
        if btype == READ:
            _check_read_copy(ctx, blk, buf, indices, covered)
        else:
            _check_write_copy(ctx, blk, buf, indices, covered)
        idx = ctx.index
        scope_blk = idx.scope_block(idx.realize[id(blk)])
        names = buffer_names(ctx.func)
        new = Buffer(fresh_name(f"{buf.name}_reindex", names),
                     tuple(iv.dom.extent for iv in covered), buf.dtype, buf.scope, (), 0,
                     buf.align)
        dst_name = new.name if btype == READ else buf.name
        stage_name = fresh_name(f"{dst_name}_reindex", set(idx.blocks))

        def build(vs):
            target = tuple(substitute(i, {iv.var: v for iv, v in zip(covered, vs)})
                           for i in indices)
            point = tuple(vs)
            src, src_idx, dst, dst_idx = (buf, target, new, point) if btype == READ else \
                (new, point, buf, target)
            return ([BufferRegion(src, _point(src_idx))],
                    [BufferRegion(dst, _point(dst_idx))],
                    BufferStore(dst, E.BufferLoad(src, src_idx), dst_idx))
        nest, stage = grid_stage(stage_name, [iv.dom.extent for iv in covered], build)
        edits: dict = {}
        access = _Reaccess(buf, new, tuple(iv.var for iv in covered))
        compose(edits, id(blk), access.block)
        pos = next(i for i, c in enumerate(flatten_seq(scope_blk.body)) if c is top)
        pos += 1 if btype == WRITE else 0

        def insert(s):
            kids = flatten_seq(s.body)
            return s.replace(body=seq(*(kids[:pos] + [nest] + kids[pos:])),
                             alloc_buffers=s.alloc_buffers + (new,))
        compose(edits, id(scope_blk), insert)
        return Result(rewrite_stmts(ctx.func, edits), [stage])

    def python_args(self, inputs, attrs, dialect):
        btype = self.attr(attrs, 1)
        if btype not in ("0", "1"):
            raise TraceError(f"ReIndex's buffer_index_type must be 0 (read) or 1 (write), "
                             f"got {btype}")
        buf = f'("{_NAMES[int(btype)]}", {self.attr(attrs, 0)})'
        if dialect == "engine":
            return [fmt(inputs[0]), buf]
        return [f"block={fmt(inputs[0])}", f"buffer={buf}"]


# ---------------------------------------------------------------------------
# reindex_cache_read / reindex_cache_write
# ---------------------------------------------------------------------------
def _map_text_arg(method: str, index_map: Any) -> str:
    try:
        return normalize_index_map(index_map)
    except IndexMapError as e:
        raise ScheduleError(method, "index_map", str(e), "") from None


def _cache_buffer(ctx: Ctx, blk: Block, buf: Buffer, scope: str, axes: list, exprs: list,
                  used: list, method: str) -> Buffer:
    """The cache buffer: its shape is the image of the block's domain under the map, which
    must use exactly the axes the old indices use and be one-to-one on them."""
    name = blk.name_hint
    in_map = {id(v) for x in exprs for v in collect_vars(x)}
    for ax in axes:
        if (id(ax) in in_map) != (id(ax) in used):
            where, other = ("the old indices", "the index map") if id(ax) in used else \
                ("the index map", "the old indices")
            raise ctx.error(f"block {name}", f"axis {ax.name} appears in {where} of "
                            f"{buf.name} but not in {other} (requirement 3)",
                            "map exactly the axes the access uses", highlight=[name])
    dom = {iv.var: iv.dom for iv in blk.iter_vars}
    involved = [a for a in axes if id(a) in used]
    ranges = {a: (0, E.as_const_int(dom[a].extent) - 1) for a in involved
              if E.as_const_int(dom[a].extent)}
    shape = []
    for d, x in enumerate(exprs):
        lo, hi = bound_of(x, ranges)
        if lo is None or hi is None or lo < 0:
            raise ctx.error(f"block {name}", f"new index {d} of the cache is negative or "
                            "unbounded over the block's axes (requirement 3)",
                            "the new indices must start at 0", highlight=[name])
        shape.append(hi + 1)
    try:
        ok = injective(involved, exprs, tuple(ranges[a][1] + 1 for a in involved),
                       tuple(shape)) if len(ranges) == len(involved) else False
    except (CheckBudgetError, IndexMapError) as e:
        raise ctx.error(f"block {name}", str(e), "") from None
    if not ok:
        raise ctx.error(f"block {name}", f"the index map sends two elements of {buf.name} "
                        "to the same place of the cache (requirement 3)",
                        "use a one-to-one map of the axes", highlight=[name])
    return Buffer(fresh_name(f"{buf.name}_{scope}", buffer_names(ctx.func)), tuple(shape),
                  buf.dtype, scope, (), 0, buf.align)


def _single_point(ctx: Ctx, blk: Block, region: BufferRegion, method: str) -> tuple:
    if not all(E.is_const_int(r.extent, 1) for r in region.region):
        raise ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint} accesses a region "
                        f"of {region.buffer.name}, not one element (requirement 2)",
                        f"{method} caches single-point accesses; use "
                        f"{method.replace('reindex_', '')} for regions",
                        highlight=[blk.name_hint])
    return tuple(r.min for r in region.region)


def _cache_nest(ctx: Ctx, blk: Block, location: Any, involved: list, body_of) -> tuple:
    """The cache stage: the block's loops below ``location`` that its involved axes are
    bound to (new variables, same ranges) around a block with those axes (spatial)."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    loops = idx.loops_above(realize)
    if isinstance(location, For):
        loops = [lp for lp in loops if lp is not location and idx.contains(location, lp)]
    needed = {id(v) for iv in involved for v in collect_vars(binding[iv.var])}
    kept = [lp for lp in loops if id(lp.loop_var) in needed]
    lmap = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in kept}
    ivs = tuple(IterVar(E.Var(iv.var.name, iv.var.dtype), iv.dom, IterType.SPATIAL)
                for iv in involved)
    amap = {iv.var: n.var for iv, n in zip(involved, ivs)}
    values = tuple(substitute(binding[iv.var], lmap) for iv in involved)
    pred = realize.predicate
    if not (isinstance(pred, E.IntImm) and pred.value == 1):
        dropped = {id(lp.loop_var) for lp in loops if lp not in kept}
        if any(id(v) in dropped for v in collect_vars(pred)):
            raise ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint}'s T.where uses "
                            "a loop the cache stage does not run", "apply it before the split "
                            "that made the T.where", highlight=[blk.name_hint])
        pred = substitute(pred, lmap)
    reads, writes, body = body_of(amap)
    stage = Block(ivs, tuple(reads), tuple(writes), "", body)
    return kept, lmap, values, pred, stage


def _nest_of(name: str, kept: list, lmap: dict, values: tuple, pred, stage: Block):
    stage = stage.replace(name_hint=name)
    nest: Any = BlockRealize(values, pred, stage)
    for lp in reversed(kept):
        nest = For(lmap[lp.loop_var], lp.min, lp.extent, ForKind.SERIAL, nest)
    return nest, stage


def _reindex_cache(prim, ctx: Ctx, inputs, attrs, direction: str) -> Result:
    blk = expect_block(ctx, inputs[0])
    text = inputs[1] if len(inputs) > 1 else None
    index, scope = need_attrs(ctx, attrs, 2, prim.method)[:2]
    check_scope(ctx, f"block {blk.name_hint}", scope)
    buf = nth_buffer(ctx, blk, index, direction, f"{direction}_buffer_index")
    regions = blk.reads if direction == "read" else blk.writes
    old = _single_point(ctx, blk, next(r for r in regions if r.buffer is buf), prim.method)
    axes, exprs = _index_map(ctx, blk, text)
    used = {id(v) for i in old for v in collect_vars(i)}
    involved = [iv for iv in blk.iter_vars if id(iv.var) in used]
    cache = _cache_buffer(ctx, blk, buf, scope, axes, exprs, used, prim.method)
    idx = ctx.index
    scope_blk = idx.scope_block(idx.realize[id(blk)])
    kids = scope_children(ctx, scope_blk)
    name = blk.name_hint
    if direction == "read":
        writers = [b for b in kids if writes_buf(b, buf)]
        if blk in writers or len(writers) > 1:
            raise ctx.error(f"block {name}", f"buffer {buf.name} is written by "
                            f"{'block ' + name if blk in writers else 'several blocks'}, so "
                            "a read cache would go stale (requirement 1)",
                            "use reindex_cache_write on the writer", highlight=[name])
        if writers:
            if idx.order[id(blk)] < idx.order[id(writers[0])]:
                raise ctx.error(f"block {name}", f"block {name} reads {buf.name} before "
                                f"block {writers[0].name_hint} writes it", "",
                                highlight=[name])
            location, _c, _pa, pos = common_location(ctx, writers[0], blk, scope_blk)
        else:
            location, pos = scope_blk, 0
    else:
        others = [b for b in kids if writes_buf(b, buf) and b is not blk]
        if others:
            raise ctx.error(f"block {name}", f"buffer {buf.name} is also written by block "
                            f"{others[0].name_hint} (requirement 1)", "reindex_cache_write "
                            "needs the block to be its only writer", highlight=[name])
        if blk.init is None and (reads_buf(blk, buf) or loads_buf(blk.body, buf)):
            raise ctx.error(f"block {name}", f"block {name} reads the old contents of "
                            f"{buf.name} without a T.init, which the cache would not hold "
                            "(requirement 1)", "", highlight=[name])
        readers = [b for b in kids if b is not blk and reads_buf(b, buf)
                   and idx.order[id(b)] > idx.order[id(blk)]]
        if readers:
            location, _c, _pa, pos = common_location(ctx, blk, readers[0], scope_blk)
        else:
            location, pos = scope_blk, len(flatten_seq(scope_blk.body))

    def body_of(amap):
        src_idx = tuple(substitute(i, amap) for i in old)
        dst_idx = tuple(substitute(x, amap) for x in exprs)
        src, dst = buf, cache
        if direction == "write":
            src, src_idx, dst, dst_idx = cache, dst_idx, buf, src_idx
        return ([BufferRegion(src, _point(src_idx))],
                [BufferRegion(dst, _point(dst_idx))],
                BufferStore(dst, E.BufferLoad(src, src_idx), dst_idx))
    parts = _cache_nest(ctx, blk, location, involved, body_of)
    nest, stage = _nest_of(fresh_name(cache.name, set(idx.blocks)), *parts)
    edits: dict = {}
    compose(edits, id(blk), _Reaccess(buf, cache, tuple(exprs)).block)

    def insert(s):
        kids2 = flatten_seq(s.body)
        return s.replace(body=seq(*(kids2[:pos] + [nest] + kids2[pos:])))
    compose(edits, id(location), insert)
    compose(edits, id(scope_blk), lambda b: b.replace(alloc_buffers=b.alloc_buffers + (cache,)))
    return Result(rewrite_stmts(ctx.func, edits), [stage])


def _reindex_cache_args(prim, inputs, attrs, dialect, arg):
    raw = inputs[1] if len(inputs) > 1 else None
    try:
        text = map_text(*parse_index_map(normalize_index_map(fmt_text(raw))))
    except IndexMapError as e:
        raise TraceError(f"{prim.kind}'s index_map: {e}") from None
    except RecursionError:
        raise TraceError(f"{prim.kind}'s index_map is nested too deeply") from None
    if dialect == "engine":
        return [fmt(inputs[0]), prim.attr(attrs, 0), prim.attr(attrs, 1), py_str(text)]
    return [f"block={fmt(inputs[0])}", f"{arg}={prim.attr(attrs, 0)}",
            f"storage_scope={prim.attr(attrs, 1)}", f"index_map={text}"]


def fmt_text(raw: Any) -> str:
    """The index map of a trace input: a string literal written with its quotes."""
    import json
    if isinstance(raw, str) and raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, str):
            return value
    raise TraceError(f"the index map must be a string literal, got {raw!r:.40}")


def _run_reindex_cache(prim, sch, block, buffer_index, direction, storage_scope, index_map):
    index = buffer_index_of(sch, block, buffer_index, direction, prim.method,
                            f"{direction}_buffer_index")
    text = _map_text_arg(prim.method, index_map)
    return sch._run(prim, [block, text], [index, storage_scope])[0]





@register
class ReindexCacheRead(Primitive):
    kind = "ReindexCacheRead"
    method = "reindex_cache_read"
    returns = "one"
    attr_kinds = (("read_buffer_index", "int"), ("storage_scope", "str"))

    def call(self, sch, block, read_buffer_index, storage_scope: str, index_map):
        """cache_read for one block whose single-point read is copied into a cache indexed
        through ``index_map`` of the block's axes; returns the copy block.

        ``index_map`` is a lambda (or lambda string) of the block's axes, e.g.
        ``"lambda vi, vj: (vj, vi)"``. The copy block runs the block's own loops that its
        read uses (an axis the read does not use, and its loop, is left out), at the place
        cache_read would put it; unlike cache_read, only this block reads the cache.

        It requires: 1) for a read cache, the buffer is written by no other block than one
        that runs before this block (not by this block); for a write cache, this block is
        its only writer and, if it reads the buffer, it has a ``T.init()``; 2) the block
        accesses the buffer at one element; 3) ``index_map`` takes one parameter per block
        axis, uses exactly the axes the old indices use, and is one-to-one with
        non-negative results; 4) ``storage_scope`` is "global", "local" or "shared".
        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

        Call::

            sch.reindex_cache_read(sch.get_block("B"), 0, "local", "lambda vi, vj: (vj, vi)")

        After::

            A_local = T.alloc_buffer((128, 128), scope="local")
            for i, j in T.grid(128, 128):
                with T.block("A_local"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    A_local[vj, vi] = A[vi, vj]
            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A_local[vj, vi] * T.float32(2)
        """
        return _run_reindex_cache(self, sch, block, read_buffer_index, "read", storage_scope,
                                  index_map)

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return _reindex_cache(self, ctx, inputs, attrs, "read")

    def python_args(self, inputs, attrs, dialect):
        return _reindex_cache_args(self, inputs, attrs, dialect, "read_buffer_index")


@register
class ReindexCacheWrite(Primitive):
    kind = "ReindexCacheWrite"
    method = "reindex_cache_write"
    returns = "one"
    attr_kinds = (("write_buffer_index", "int"), ("storage_scope", "str"))

    def call(self, sch, block, write_buffer_index, storage_scope: str, index_map):
        """cache_write for one block whose single-point write goes to a cache indexed
        through ``index_map`` of the block's axes; returns the write-back block.

        The write-back block runs the block's own loops that the write uses, at the place
        cache_write would put it (before the first reader, else at the end).

        It requires: 1) for a read cache, the buffer is written by no other block than one
        that runs before this block (not by this block); for a write cache, this block is
        its only writer and, if it reads the buffer, it has a ``T.init()``; 2) the block
        accesses the buffer at one element; 3) ``index_map`` takes one parameter per block
        axis, uses exactly the axes the old indices use, and is one-to-one with
        non-negative results; 4) ``storage_scope`` is "global", "local" or "shared".
        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

        Call::

            sch.reindex_cache_write(sch.get_block("B"), 0, "local",
                                    "lambda vi, vj: (vi // 2, vi % 2, vj)")

        After::

            B_local = T.alloc_buffer((64, 2, 128), scope="local")
            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B_local[vi // 2, vi % 2, vj] = A[vi, vj] * T.float32(2)
            for i, j in T.grid(128, 128):
                with T.block("B_local"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = B_local[vi // 2, vi % 2, vj]
        """
        return _run_reindex_cache(self, sch, block, write_buffer_index, "write", storage_scope,
                                  index_map)

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return _reindex_cache(self, ctx, inputs, attrs, "write")

    def python_args(self, inputs, attrs, dialect):
        return _reindex_cache_args(self, inputs, attrs, dialect, "write_buffer_index")

