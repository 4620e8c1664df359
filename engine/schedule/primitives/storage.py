"""Storage primitives: cache_read, cache_write, set_scope, storage_align.

``cache_read``/``cache_write`` add a *copy stage*: a new buffer (``A_global``, ``C_local``)
and a new block of the same name that copies between it and the original buffer, placed
as TVM places it — at the outermost level, right before the first consumer (or, for an
input buffer, at the start of the scope; for an output with no consumer, at the end). The
learner then moves the stage with ``compute_at`` / ``reverse_compute_at``, which shrinks
the copied region to what one iteration needs.

The helpers at the top (buffer look-up by index or name, fresh names, the post-order
statement rewriter, copy-stage construction) are shared with :mod:`.reduction` and
:mod:`.layout`.
"""
from __future__ import annotations

from typing import Any, Callable

from engine.arith import Analyzer, relax
from engine.ir import expr as E
from engine.ir.buffer import SCOPES, Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, post_order_visit, substitute
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar,
                            seq)

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, quote, register
from ..tree import flatten_seq, map_children
from ._common import conj, expect_block, fresh_name, is_int, subject_of

# ---------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------


def all_buffers(func) -> list[Buffer]:
    """Every buffer of a function: parameters, then allocations (in order, no repeats)."""
    out: dict[int, Buffer] = {id(p): p for p in func.params}

    def fn(x):
        if isinstance(x, Block):
            for b in x.alloc_buffers:
                out.setdefault(id(b), b)
    post_order_visit(func.body, fn)
    return list(out.values())


def buffer_names(func) -> set:
    return {b.name for b in all_buffers(func)}


def alloc_site(func, index, buf: Buffer) -> Block | None:
    """The block whose ``alloc_buffers`` holds ``buf`` (None for a function parameter)."""
    for bs in index.blocks.values():
        for b in bs:
            if any(a is buf for a in b.alloc_buffers):
                return b
    return None


def check_scope(ctx: Ctx, subject: str, scope: Any) -> str:
    if not isinstance(scope, str) or scope not in SCOPES:
        raise ctx.error(subject, f"unknown storage scope {scope!r}",
                        f"use one of {', '.join(repr(s) for s in SCOPES)} ('local' keeps a "
                        "small buffer in registers/on the stack; 'shared' is treated as "
                        "'global' on a CPU)", highlight=[subject.split(" ", 1)[-1]])
    return scope


def nth_buffer(ctx: Ctx, blk: Block, index: Any, kind: str, arg: str) -> Buffer:
    """The ``index``-th buffer the block reads (kind "read") or writes ("write")."""
    regions = blk.reads if kind == "read" else blk.writes
    names = ", ".join(f"{i}: {r.buffer.name}" for i, r in enumerate(regions)) or "none"
    verb = "reads" if kind == "read" else "writes"
    if not is_int(index) or not 0 <= index < len(regions):
        raise ctx.error(f"block {blk.name_hint}", f"{arg}={index!r} is not the index of a "
                        f"buffer block {blk.name_hint} {verb} (it {verb}: {names})",
                        f"pass an index from 0 to {len(regions) - 1} or a buffer name"
                        if regions else f"block {blk.name_hint} {verb} no buffer",
                        highlight=[blk.name_hint])
    return regions[index].buffer


def buffer_index_of(sch, block, buf: Any, kind: str, method: str, arg: str) -> int:
    """Turn a buffer name (or Buffer) into its index among the block's reads/writes (what
    newer TVM accepts for ``read_buffer_index`` & co.); an int passes through."""
    if is_int(buf):
        return buf
    if not isinstance(buf, (str, Buffer)):
        raise ScheduleError(method, repr(buf), f"{arg} must be an index or a buffer name, "
                            f"got {type(buf).__name__}", "e.g. 0 or \"A\"")
    blk = sch._lookup(block, method)[1]
    if not isinstance(blk, Block):
        raise ScheduleError(method, subject_of(blk), "the block argument must be a block "
                            "handle", "get blocks with sch.get_block(name)")
    regions = blk.reads if kind == "read" else blk.writes
    for i, r in enumerate(regions):
        if r.buffer is buf or (isinstance(buf, str) and r.buffer.name == buf):
            return i
    verb = "reads" if kind == "read" else "writes"
    have = ", ".join(r.buffer.name for r in regions) or "nothing"
    name = buf if isinstance(buf, str) else buf.name
    raise ScheduleError(method, f"block {blk.name_hint}", f"block {blk.name_hint} {verb} no "
                        f"buffer named {name!r} (it {verb}: {have})", "",
                        highlight=[blk.name_hint])


def rewrite_stmts(func, edits: dict[int, Callable]) -> Any:
    """A new PrimFunc where each statement ``s`` with ``id(s)`` in ``edits`` becomes
    ``edits[id(s)](s_rebuilt)`` — ``s_rebuilt`` being ``s`` with its children already
    rewritten (post-order), so edits of nested statements compose."""
    def rec(s):
        new = map_children(s, rec)
        fn = edits.get(id(s))
        return fn(new) if fn is not None else new

    body = rec(func.body)
    return func if body is func.body else func.replace(body=body)


def compose(edits: dict, key: int, fn: Callable) -> None:
    prev = edits.get(key)
    edits[key] = fn if prev is None else (lambda s, a=prev, b=fn: b(a(s)))


class BufferSwap(Mutator):
    """Replace a buffer by another in loads, stores and regions (same indices).

    ``loads``/``stores``/``regions`` choose what is rewritten; nested blocks are entered.
    """

    def __init__(self, old: Buffer, new: Buffer, loads=True, stores=True,
                 reads=True, writes=True):
        self.old, self.new = old, new
        self.loads, self.stores, self.reads, self.writes = loads, stores, reads, writes

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        if self.loads and e.buffer is self.old:
            return E.BufferLoad(self.new, e.indices)
        return e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        if self.stores and s.buffer is self.old:
            return BufferStore(self.new, s.value, s.indices)
        return s

    def visit_Block(self, b):
        b2 = self.generic_visit(b)
        changes = {}
        if self.reads:
            r = _swap_regions(b2.reads, self.old, self.new)
            if r is not b2.reads:
                changes["reads"] = r
        if self.writes:
            w = _swap_regions(b2.writes, self.old, self.new)
            if w is not b2.writes:
                changes["writes"] = w
        return b2.replace(**changes) if changes else b2


def _swap_regions(regions: tuple, old: Buffer, new: Buffer) -> tuple:
    if not any(r.buffer is old for r in regions):
        return regions
    return tuple(BufferRegion(new, r.region) if r.buffer is old else r for r in regions)


class ReplaceBuffer(Mutator):
    """Replace a buffer object everywhere (loads, stores, regions, alloc_buffers)."""

    def __init__(self, old: Buffer, new: Buffer):
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf


def scope_children(ctx: Ctx, scope_blk: Block) -> list[Block]:
    """Blocks whose nearest enclosing block is ``scope_blk``, in execution order."""
    idx = ctx.index
    return [b for b in idx.all_blocks() if idx.scope_block(idx.realize[id(b)]) is scope_blk]


def reads_buf(blk: Block, buf: Buffer) -> bool:
    return any(r.buffer is buf for r in blk.reads)


def writes_buf(blk: Block, buf: Buffer) -> bool:
    return any(w.buffer is buf for w in blk.writes)


def loads_buf(stmt: Any, buf: Buffer) -> bool:
    found = []

    def fn(x):
        if isinstance(x, E.BufferLoad) and x.buffer is buf:
            found.append(x)
    post_order_visit(stmt, fn)
    return bool(found)


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
    idx = ctx.index
    loops = idx.loops_above(idx.realize[id(blk)])
    if isinstance(outer, For):
        return [lp for lp in loops if lp is not outer and idx.contains(outer, lp)]
    return loops


def relaxed_region(ctx: Ctx, blk: Block, region: BufferRegion, loops: list[For]):
    """The region ``blk`` accesses over all iterations of ``loops``, per dimension
    ``(min_expr, extent_expr)`` in the variables of the loops outside them; a dimension
    that cannot be bounded covers the whole buffer."""
    realize = ctx.index.realize[id(blk)]
    vmap = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    rr = {}
    bad = False
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is None or ext is None or ext < 1:
            bad = True
            break
        rr[lp.loop_var] = (lo, lo + ext - 1)
    an = Analyzer()
    out = []
    for d, rg in enumerate(region.region):
        full = (E.const(0, "int32"), region.buffer.shape[d])
        if bad:
            out.append(full)
            continue
        lo_e = substitute(rg.min, vmap)
        hi_e = substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1), vmap)
        a, b = relax(lo_e, rr), relax(hi_e, rr)
        if a is None or b is None:
            out.append(full)
            continue
        lo, hi = a[0], b[1]
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


def outer_analyzer(ctx: Ctx, node: Any) -> Analyzer:
    """An analyzer knowing the ranges of the loops around (and including) ``node``."""
    loops = [a for a in ctx.index.ancestors(node) if isinstance(a, For)]
    if isinstance(node, For):
        loops.append(node)
    ranges = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            ranges[lp.loop_var] = (lo, lo + ext - 1)
    return Analyzer(ranges)


def copy_stage(name: str, src: Buffer, dst: Buffer, region: list, an: Analyzer):
    """The loop nest ``for ax0, ax1, ... : dst[v] = src[v]`` over ``region`` (TVM's
    MakeCacheStage): one loop per dimension, block axes ``v0, v1, ...`` spanning the whole
    buffer, bound to ``min + ax``. A guard keeps the axes inside the buffer when the region
    may stick out (e.g. the tail of a non-divisible split). Returns (nest, block)."""
    shape = src.shape
    loop_vars, values, ivs, preds = [], [], [], []
    for d, (mn, ext) in enumerate(region):
        dt = "int32"
        ax = E.Var(f"ax{d}", dt)
        loop_vars.append((ax, ext))
        val = an.simplify(mn + ax) if not E.is_const_int(mn, 0) else ax
        values.append(val)
        ivs.append(IterVar(E.Var(f"v{d}", dt), Range(0, shape[d]), IterType.SPATIAL))
        e = E.as_const_int(ext)
        lo_b = an.bound(mn)
        hi_b = an.bound(an.simplify(mn + (ext - 1))) if e is not None else None
        size = E.as_const_int(shape[d])
        if not (lo_b and lo_b[0] is not None and lo_b[0] >= 0):
            preds.append(E.binary(E.LE, E.const(0, dt), val))
        if not (hi_b and hi_b[1] is not None and size is not None and hi_b[1] < size):
            preds.append(E.binary(E.LT, val, shape[d]))
    idx = tuple(iv.var for iv in ivs)
    point = tuple(Range(v, 1) for v in idx)
    block = Block(tuple(ivs), (BufferRegion(src, point),), (BufferRegion(dst, point),), name,
                  BufferStore(dst, E.BufferLoad(src, idx), idx))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for p in preds:
        pred = conj(pred, p)
    nest: Any = BlockRealize(tuple(values), pred, block)
    for ax, ext in reversed(loop_vars):
        nest = For(ax, E.const(0, "int32"), ext, ForKind.SERIAL, nest)
    return nest, block


def _insert_at(node, pos: int, stage):
    children = flatten_seq(node.body)
    return node.replace(body=seq(*(children[:pos] + [stage] + children[pos:])))


def _add_alloc(buf: Buffer):
    return lambda b: b.replace(alloc_buffers=b.alloc_buffers + (buf,))


def _consumer_blocks(ctx: Ctx, items: Any, scope_blk: Block, buf: Buffer, what: str) -> list:
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        raise ctx.error("", "consumer_blocks must be a list of block handles", "")
    out = []
    for c in items:
        c = expect_block(ctx, c, "consumer_blocks")
        if ctx.index.scope_block(ctx.index.realize[id(c)]) is not scope_blk:
            raise ctx.error(f"block {c.name_hint}", f"block {c.name_hint} is in another block "
                            "scope", "list only blocks of the same scope",
                            highlight=[c.name_hint])
        if not reads_buf(c, buf):
            raise ctx.error(f"block {c.name_hint}", f"block {c.name_hint} does not read "
                            f"{buf.name}, so it cannot {what}",
                            f"list only blocks that read {buf.name}", highlight=[c.name_hint])
        out.append(c)
    return out


def _cache_python_args(inputs, attrs, dialect, arg):
    consumers = list(inputs[1]) if len(inputs) > 1 and inputs[1] else []
    if dialect == "engine":
        args = [fmt(inputs[0]), fmt(attrs[0]), quote(attrs[1])]
        if consumers:
            args.append(f"consumer_blocks={fmt(consumers)}")
        return args
    args = [f"block={fmt(inputs[0])}", f"{arg}={fmt(attrs[0])}",
            f"storage_scope={quote(attrs[1])}"]
    if consumers:
        args.append(f"consumer_blocks={fmt(consumers)}")
    return args


def _attrs(ctx: Ctx, attrs: list, n: int, what: str) -> list:
    if len(attrs) < n:
        raise ctx.error("", f"{what} needs {n} attributes, got {len(attrs)}", "")
    return attrs


def _run_cache(prim, sch, block, buffer_index, direction: str, storage_scope: str,
               consumer_blocks, example: str):
    """The common ``call`` of cache_read / cache_write: resolve the buffer index (a number
    or a name), check ``consumer_blocks`` is a list and run the instruction."""
    method = f"cache_{direction}"
    index = buffer_index_of(sch, block, buffer_index, direction, method,
                            f"{direction}_buffer_index")
    consumers = [] if consumer_blocks is None else consumer_blocks
    if not isinstance(consumers, (list, tuple)):
        raise ScheduleError(method, repr(consumer_blocks), "consumer_blocks must be a list "
                            "of block handles", f"e.g. [sch.get_block(\"{example}\")]")
    return sch._run(prim, [block, list(consumers)], [index, storage_scope])[0]


def _cache_subject(ctx: Ctx, inputs, attrs, direction: str) -> tuple:
    """The common start of cache_read / cache_write ``apply``: the block, the checked
    storage scope, the cached buffer, the block's scope block and that scope's blocks."""
    blk = expect_block(ctx, inputs[0])
    index, scope = _attrs(ctx, attrs, 2, f"cache_{direction}")[:2]
    check_scope(ctx, f"block {blk.name_hint}", scope)
    buf = nth_buffer(ctx, blk, index, direction, f"{direction}_buffer_index")
    scope_blk = ctx.index.scope_block(ctx.index.realize[id(blk)])
    return blk, scope, buf, scope_blk, scope_children(ctx, scope_blk)


def _new_cache(ctx: Ctx, buf: Buffer, scope: str) -> tuple:
    """The cache buffer ``<buf>_<scope>`` (a fresh name) and a fresh name for its stage."""
    cache = Buffer(fresh_name(f"{buf.name}_{scope}", buffer_names(ctx.func)), buf.shape,
                   buf.dtype, scope, (), 0, buf.align)
    return cache, fresh_name(cache.name, set(ctx.index.blocks))


def _place_cache(ctx: Ctx, scope_blk: Block, node, pos: int, nest, stage: Block, buf: Buffer,
                 cache: Buffer, readers: list, writer: Block | None = None) -> Result:
    """The common end of cache_read / cache_write: insert the copy stage ``nest`` at
    position ``pos`` among ``node``'s children, make ``writer`` (if any) write ``cache``
    instead of ``buf`` and ``readers`` read it, and allocate ``cache`` in the scope block."""
    edits: dict = {}
    compose(edits, id(node), lambda s, p=pos, n=nest: _insert_at(s, p, n))
    if writer is not None:
        compose(edits, id(writer), BufferSwap(buf, cache).visit)
    swap = BufferSwap(buf, cache, loads=True, stores=False, reads=True, writes=False)
    for c in readers:
        compose(edits, id(c), swap.visit)
    compose(edits, id(scope_blk), _add_alloc(cache))
    return Result(rewrite_stmts(ctx.func, edits), [stage])


# ---------------------------------------------------------------------------
# cache_read
# ---------------------------------------------------------------------------
@register
class CacheRead(Primitive):
    kind = "CacheRead"
    method = "cache_read"
    returns = "one"
    list_inputs = (1,)

    def call(self, sch, block, read_buffer_index, storage_scope: str, consumer_blocks=None):
        """Create a block that reads a buffer into a new cache buffer (``<buffer>_<scope>``)
        and make the consumers read the cache instead.

        ``read_buffer_index`` is the index of the buffer in the block's ``T.reads`` (or
        the buffer's name, as newer TVM allows). The copy block, named like the cache
        buffer, copies the whole region its producer writes; it is placed at the outermost
        level right before the first consumer (at the start of the function for an input
        buffer), so you then move it with ``compute_at`` to copy only what one tile needs.

        It requires: 1) ``read_buffer_index`` names a buffer the block reads; 2) at most one
        block writes that buffer in the scope, and it writes it before the consumers read
        it; 3) ``storage_scope`` is "global", "local" or "shared"; 4) each block in
        ``consumer_blocks`` (default: every block that reads the buffer) reads it and is in
        the same scope. Returns the cache block.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            block_C = sch.get_block("C")
            A_local = sch.cache_read(block_C, 0, "local")

        After::

            A_local = T.alloc_buffer((128, 128), scope="local")
            for ax0, ax1 in T.grid(128, 128):
                with T.block("A_local"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(A[v0, v1])
                    T.writes(A_local[v0, v1])
                    A_local[v0, v1] = A[v0, v1]
            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A_local[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A_local[vi, vk] * B[vk, vj]
        """
        return _run_cache(self, sch, block, read_buffer_index, "read", storage_scope,
                          consumer_blocks, "C")

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk, scope, buf, scope_blk, kids = _cache_subject(ctx, inputs, attrs, "read")
        bname = blk.name_hint
        idx = ctx.index
        writers = [b for b in kids if writes_buf(b, buf)]
        if len(writers) > 1:
            names = ", ".join(b.name_hint for b in writers)
            raise ctx.error(f"block {bname}", f"buffer {buf.name} is written by several blocks "
                            f"({names}); cache_read needs at most one writer",
                            "cache the buffer before splitting its computation (e.g. before "
                            "decompose_reduction)", highlight=[bname] + [b.name_hint
                                                                          for b in writers])
        writer = writers[0] if writers else None
        listed = _consumer_blocks(ctx, inputs[1] if len(inputs) > 1 else None, scope_blk, buf,
                                  "read the cache")
        if listed:
            consumers = listed
        else:
            consumers = [b for b in kids if reads_buf(b, buf) and b is not writer]
        for c in consumers:
            if c is writer or writes_buf(c, buf):
                raise ctx.error(f"block {c.name_hint}", f"block {c.name_hint} both reads and "
                                f"writes {buf.name}, so a read cache would go stale",
                                f"use cache_write on block {c.name_hint} instead",
                                highlight=[c.name_hint])
        if not consumers:
            raise ctx.error(f"block {bname}", f"no block reads {buf.name}", "",
                            highlight=[bname])
        cache, stage_name = _new_cache(ctx, buf, scope)
        if writer is None:
            node, pos = scope_blk, 0
            region = [(E.const(0, "int32"), s) for s in buf.shape]
            an = Analyzer()
        else:
            first = min(consumers, key=lambda b: idx.order[id(b)])
            if idx.order[id(first)] < idx.order[id(writer)]:
                raise ctx.error(f"block {first.name_hint}", f"block {first.name_hint} reads "
                                f"{buf.name} before block {writer.name_hint} writes it",
                                "", highlight=[first.name_hint, writer.name_hint])
            node, _children, pos_w, pos = common_location(ctx, writer, first, scope_blk)
            if pos_w >= pos:  # pragma: no cover - guaranteed by the order check
                raise ctx.error(f"block {bname}", "cannot find where to place the cache", "")
            wreg = next(w for w in writer.writes if w.buffer is buf)
            region = relaxed_region(ctx, writer, wreg, loops_between(ctx, writer, node))
            an = outer_analyzer(ctx, node)
        nest, stage = copy_stage(stage_name, buf, cache, region, an)
        return _place_cache(ctx, scope_blk, node, pos, nest, stage, buf, cache, consumers)

    def python_args(self, inputs, attrs, dialect):
        return _cache_python_args(inputs, attrs, dialect, "read_buffer_index")


# ---------------------------------------------------------------------------
# cache_write
# ---------------------------------------------------------------------------
@register
class CacheWrite(Primitive):
    kind = "CacheWrite"
    method = "cache_write"
    returns = "one"
    list_inputs = (1,)

    def call(self, sch, block, write_buffer_index, storage_scope: str, consumer_blocks=None):
        """Make a block write into a new cache buffer (``<buffer>_<scope>``) and add a block
        that copies the cache back to the original buffer.

        ``write_buffer_index`` is the index of the buffer in the block's ``T.writes`` (or
        its name). The write-back block is placed at the outermost level right before the
        first block that reads the buffer (at the end of the function when nothing does);
        move it next to the computation with ``reverse_compute_at`` — with a "local" cache
        this is the register-blocked micro-kernel of a fast matmul. Blocks listed in
        ``consumer_blocks`` read the cache directly.

        It requires: 1) ``write_buffer_index`` names a buffer the block writes; 2) the block
        is the only block writing that buffer in its scope (cache before
        decompose_reduction); 3) if the block reads the buffer it has a ``T.init()``
        (otherwise the cache would start without the buffer's old contents); 4)
        ``storage_scope`` is "global", "local" or "shared"; 5) each block in
        ``consumer_blocks`` reads the buffer and is in the same scope. Returns the
        write-back block.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            block_C = sch.get_block("C")
            C_local = sch.cache_write(block_C, 0, "local")

        After::

            C_local = T.alloc_buffer((128, 128), scope="local")
            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C_local[vi, vj])
                    with T.init():
                        C_local[vi, vj] = T.float32(0)
                    C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0, ax1 in T.grid(128, 128):
                with T.block("C_local"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(C_local[v0, v1])
                    T.writes(C[v0, v1])
                    C[v0, v1] = C_local[v0, v1]
        """
        return _run_cache(self, sch, block, write_buffer_index, "write", storage_scope,
                          consumer_blocks, "D")

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk, scope, buf, scope_blk, kids = _cache_subject(ctx, inputs, attrs, "write")
        bname = blk.name_hint
        idx = ctx.index
        others = [b for b in kids if writes_buf(b, buf) and b is not blk]
        if others:
            names = ", ".join(b.name_hint for b in others)
            raise ctx.error(f"block {bname}", f"buffer {buf.name} is also written by block "
                            f"{names}; cache_write needs the block to be its only writer",
                            "apply cache_write before decompose_reduction or rfactor",
                            highlight=[bname] + [b.name_hint for b in others])
        if blk.init is None and (reads_buf(blk, buf) or loads_buf(blk.body, buf)):
            raise ctx.error(f"block {bname}", f"block {bname} reads the old contents of "
                            f"{buf.name} (it updates it without a T.init), which the new "
                            "cache would not hold", "cache a block that initialises what "
                            "it accumulates", highlight=[bname])
        listed = _consumer_blocks(ctx, inputs[1] if len(inputs) > 1 else None, scope_blk, buf,
                                  "read the cache")
        me = idx.order[id(blk)]
        related = [b for b in kids if b is not blk and reads_buf(b, buf)
                   and not any(b is c for c in listed) and idx.order[id(b)] > me]
        for c in listed:
            if idx.order[id(c)] < me:
                raise ctx.error(f"block {c.name_hint}", f"block {c.name_hint} runs before "
                                f"block {bname}, so it cannot read its cache",
                                "", highlight=[c.name_hint, bname])
        cache, stage_name = _new_cache(ctx, buf, scope)
        if related:
            first = min(related, key=lambda b: idx.order[id(b)])
            node, _children, _pa, pos = common_location(ctx, blk, first, scope_blk)
        else:
            node, pos = scope_blk, len(flatten_seq(scope_blk.body))
        wreg = next(w for w in blk.writes if w.buffer is buf)
        region = relaxed_region(ctx, blk, wreg, loops_between(ctx, blk, node))
        nest, stage = copy_stage(stage_name, cache, buf, region, outer_analyzer(ctx, node))
        return _place_cache(ctx, scope_blk, node, pos, nest, stage, buf, cache, listed,
                            writer=blk)

    def python_args(self, inputs, attrs, dialect):
        return _cache_python_args(inputs, attrs, dialect, "write_buffer_index")


# ---------------------------------------------------------------------------
# set_scope
# ---------------------------------------------------------------------------
def _allocated_write_buffer(ctx: Ctx, blk: Block, index: Any, prim: str) -> tuple:
    buf = nth_buffer(ctx, blk, index, "write", "buffer_index")
    site = alloc_site(ctx.func, ctx.index, buf)
    if site is None:
        raise ctx.error(f"block {blk.name_hint}", f"{buf.name} is a parameter of the function "
                        f"(its input or output), and {prim} only applies to intermediate "
                        "buffers the function allocates",
                        f"first cache_write the block into a new buffer, then {prim} that "
                        "buffer", highlight=[blk.name_hint])
    return buf, site


@register
class SetScope(Primitive):
    kind = "SetScope"
    method = "set_scope"

    def call(self, sch, block, buffer_index, storage_scope: str):
        """Set the storage scope of a buffer the block writes.

        On a CPU, "local" asks the backend to keep the buffer on the stack (in registers
        when it is small and indexed by constants after unrolling); "global" is ordinary
        memory ("shared" is treated as "global").

        It requires: 1) ``buffer_index`` names a buffer the block writes (an index into
        ``T.writes``, or the buffer's name); 2) the buffer is allocated by the function
        (not a parameter); 3) ``storage_scope`` is "global", "local" or "shared".

        Before::

            Y = T.alloc_buffer((128, 128))
            ...
                with T.block("Y"): ...

        Call::

            sch.set_scope(sch.get_block("Y"), 0, "local")

        After::

            Y = T.alloc_buffer((128, 128), scope="local")
            ...
        """
        index = buffer_index_of(sch, block, buffer_index, "write", "set_scope", "buffer_index")
        sch._run(self, [block], [index, storage_scope])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        index, scope = _attrs(ctx, attrs, 2, "set_scope")[:2]
        check_scope(ctx, f"block {blk.name_hint}", scope)
        buf, _site = _allocated_write_buffer(ctx, blk, index, "set_scope")
        new = buf.replace(scope=scope)
        body = ReplaceBuffer(buf, new).visit(ctx.func.body)
        return Result(ctx.func.replace(body=body), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), fmt(attrs[0]), quote(attrs[1])]
        return [f"block={fmt(inputs[0])}", f"buffer_index={fmt(attrs[0])}",
                f"storage_scope={quote(attrs[1])}"]


# ---------------------------------------------------------------------------
# storage_align
# ---------------------------------------------------------------------------
ALIGN_KEY = "buffer_dim_align"


def aligned_strides(shape: tuple, aligns: list) -> list[int]:
    """Strides (in elements) of a row-major buffer whose dimension ``axis`` must have a
    stride with ``stride % factor == offset`` for each ``(axis, factor, offset)`` in
    ``aligns`` (TVM's storage_align; the innermost dimension keeps stride 1 unless aligned).
    This is what the lowering uses to lay out a buffer with a ``buffer_dim_align``
    annotation; e.g. shape (16, 16) with (0, 16, 1) gives strides [17, 1]."""
    by_axis = {a: (f, o) for a, f, o in aligns}
    strides = [0] * len(shape)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        if d in by_axis:
            f, o = by_axis[d]
            stride = stride + (f + o - stride % f) % f
        strides[d] = stride
        stride *= shape[d]
    return strides


@register
class StorageAlign(Primitive):
    kind = "StorageAlign"
    method = "storage_align"

    def call(self, sch, block, buffer_index, axis: int, factor: int, offset: int):
        """Pad the stride of one dimension of a buffer so that
        ``stride[axis] % factor == offset`` (TVM's storage_align), e.g. to keep the rows of
        a tile from mapping to the same cache sets.

        The requirement is recorded on the block as TVM's ``buffer_dim_align`` annotation
        (``[[buffer_index, axis, factor, offset], ...]``); the backend lays the buffer out
        with the padded strides.

        It requires: 1) ``buffer_index`` names a buffer the block writes (an index into
        ``T.writes``, or its name); 2) that buffer is allocated by the function (not a
        parameter); 3) ``axis`` is a dimension of it (negative counts from the end);
        4) ``factor`` is a positive integer and ``0 <= offset < factor``.

        Before::

            B_global = T.alloc_buffer((16, 16))
            for ax0, ax1 in T.grid(16, 16):
                with T.block("B_global"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(B[v0, v1])
                    T.writes(B_global[v0, v1])
                    B_global[v0, v1] = B[v0, v1]

        Call::

            B_global = sch.cache_read(sch.get_block("C"), 1, "global")
            sch.storage_align(B_global, 0, axis=0, factor=16, offset=1)

        After (rows of B_global are 17 elements apart)::

            B_global = T.alloc_buffer((16, 16))
            for ax0, ax1 in T.grid(16, 16):
                with T.block("B_global"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(B[v0, v1])
                    T.writes(B_global[v0, v1])
                    T.block_attr({"buffer_dim_align": [[0, 0, 16, 1]]})
                    B_global[v0, v1] = B[v0, v1]
        """
        index = buffer_index_of(sch, block, buffer_index, "write", "storage_align",
                                "buffer_index")
        sch._run(self, [block], [index, axis, factor, offset])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        index, axis, factor, offset = _attrs(ctx, attrs, 4, "storage_align")[:4]
        bname = blk.name_hint
        buf, _site = _allocated_write_buffer(ctx, blk, index, "storage_align")
        nd = buf.ndim
        if not is_int(axis) or not -nd <= axis < nd:
            raise ctx.error(f"block {bname}", f"axis={axis!r} is not a dimension of {buf.name}, "
                            f"which has {nd}", f"use an axis from 0 to {nd - 1}",
                            highlight=[bname])
        axis = axis % nd
        if not is_int(factor) or factor < 1:
            raise ctx.error(f"block {bname}", f"factor must be a positive integer, got "
                            f"{factor!r}", "e.g. factor=16 (elements)", highlight=[bname])
        if not is_int(offset) or not 0 <= offset < factor:
            raise ctx.error(f"block {bname}", f"offset must be an integer with 0 <= offset < "
                            f"factor ({factor}), got {offset!r}", "e.g. offset=1 to shift "
                            "each row by one element", highlight=[bname])
        entry = (index, axis, factor, offset)
        old = dict(blk.annotations).get(ALIGN_KEY, ())
        try:
            kept = tuple(tuple(e) for e in old if not (e[0] == index and e[1] == axis))
        except (TypeError, IndexError):
            kept = ()
        value = kept + (entry,)
        anns = tuple((k, v) for k, v in blk.annotations if k != ALIGN_KEY) + ((ALIGN_KEY, value),)
        edits = {id(blk): lambda b: b.replace(annotations=anns)}
        return Result(rewrite_stmts(ctx.func, edits), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), fmt(attrs[0]), f"axis={fmt(attrs[1])}",
                    f"factor={fmt(attrs[2])}", f"offset={fmt(attrs[3])}"]
        return [f"block={fmt(inputs[0])}", f"buffer_index={fmt(attrs[0])}",
                f"axis={fmt(attrs[1])}", f"factor={fmt(attrs[2])}", f"offset={fmt(attrs[3])}"]
