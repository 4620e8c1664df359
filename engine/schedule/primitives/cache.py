"""cache_read and cache_write: a copy stage between a buffer and a new cache buffer.

``cache_read``/``cache_write`` add a *copy stage*: a new buffer (``A_global``, ``C_local``)
and a new block of the same name that copies between it and the original buffer, placed
as TVM places it — at the outermost level, right before the first consumer (or, for an
input buffer, at the start of the scope; for an output with no consumer, at the end). The
learner then moves the stage with ``compute_at`` / ``reverse_compute_at``, which shrinks
the copied region to what one iteration needs.

This module holds what differs between the two (their checks, which blocks read the cache
and where the stage goes); the stage itself — its region, its loop nest, its insertion and
the rewritten accesses — is built by :func:`.cache_stage.add_cache_stage` for both.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.functor import collect_vars
from engine.ir.stmt import Block, For
from engine.ir.structural import structural_equal

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import conjuncts, expect_block, is_true
from .buffers import buffer_index_of, check_scope, need_attrs, nth_buffer, reads_buf, writes_buf
from .cache_regions import (Opaque, access_sites, box_within, dense_box, relaxed_box,
                            union_box)
from .cache_stage import (add_cache_stage, box_region, common_location, location_analyzer,
                          loops_between, nested_alternatives, region_box, scope_children,
                          stage_region)


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


def _cache_python_args(prim, inputs, attrs, dialect, arg):
    consumers = list(inputs[1]) if len(inputs) > 1 and inputs[1] else []
    if dialect == "engine":
        args = [fmt(inputs[0]), prim.attr(attrs, 0), prim.attr(attrs, 1)]
        if consumers:
            args.append(f"consumer_blocks={fmt(consumers)}")
        return args
    args = [f"block={fmt(inputs[0])}", f"{arg}={prim.attr(attrs, 0)}",
            f"storage_scope={prim.attr(attrs, 1)}"]
    if consumers:
        args.append(f"consumer_blocks={fmt(consumers)}")
    return args


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
    index, scope = need_attrs(ctx, attrs, 2, f"cache_{direction}")[:2]
    check_scope(ctx, f"block {blk.name_hint}", scope)
    buf = nth_buffer(ctx, blk, index, direction, f"{direction}_buffer_index")
    scope_blk = ctx.index.scope_block(ctx.index.realize[id(blk)])
    return blk, scope, buf, scope_blk, scope_children(ctx, scope_blk)


# ---------------------------------------------------------------------------
# what the cache must hold (see .cache_regions)
# ---------------------------------------------------------------------------
def _sites(ctx: Ctx, blk: Block, buf: Buffer, keep_axes: bool = False):
    """The loads and stores of ``buf`` in ``blk`` (:func:`.cache_regions.access_sites`),
    in the variables outside ``blk`` (its bindings and ``T.where``), or with ``keep_axes``
    in ``blk``'s own axes; a statement the analysis does not follow is refused."""
    r = ctx.index.realize[id(blk)]
    try:
        if keep_axes:
            return access_sites(blk, buf, {})
        vmap = {iv.var: v for iv, v in zip(blk.iter_vars, r.iter_values)}
        conds = [c for c in conjuncts(r.predicate) if not is_true(c)]
        return access_sites(blk, buf, vmap, conds)
    except Opaque as e:
        raise ctx.error(f"block {blk.name_hint}", f"cannot follow the accesses of block "
                        f"{blk.name_hint} to {buf.name} (it holds {e})",
                        "cache a block made of loops, blocks and stores",
                        highlight=[blk.name_hint]) from None


def _box(sites: list, loops: list, an, buf: Buffer) -> list | None:
    """The union of the boxes of ``sites`` over ``loops`` (and each site's own), met with
    the buffer's bounds where they are constant (an access outside the buffer is not the
    original program's: it does not build)."""
    boxes = [relaxed_box(s.ranges(), s.conds, loops + s.loops, an) for s in sites]
    box = union_box(boxes, an) if boxes else []
    if not box:
        return box
    out = []
    for d, size in zip(box, buf.shape):
        n, lo, hi = E.as_const_int(size), None, None
        if d is not None:
            lo, hi = E.as_const_int(d[0]), E.as_const_int(d[1])
        if n is None or lo is None or hi is None:
            out.append(d)
        else:
            dt = d[0].dtype
            out.append((E.const(max(lo, 0), dt), E.const(min(hi, n - 1), dt)))
    return out


def _level(ctx: Ctx, blk: Block, node, scope_blk: Block):
    """Where ``blk`` meets the stage: ``node`` when it is inside it, else the scope."""
    return node if ctx.index.contains(node, ctx.index.realize[id(blk)]) else scope_blk


def _tiled_union(ctx: Ctx, region: list, node, scope_blk: Block, an) -> list | None:
    """The box every iteration of the loops from ``node`` up to ``scope_blk`` copies
    together, when the boxes they copy (``region`` in those loops' variables) tile it
    without a gap: each dimension moved by at most one loop, by at most its extent. None
    when that is not shown."""
    chain = [node]
    for a in ctx.index.ancestors(node):
        if a is scope_blk:
            break
        chain.append(a)
    loops = {lp.loop_var: lp for lp in chain if isinstance(lp, For)}
    used: set = set()
    out = []
    for mn, ext in region:
        terms, const = an.linear(mn)
        moving = [(a, k) for a, k in terms.values()
                  if any(v in loops for v in collect_vars(a))]
        if not moving:
            out.append((mn, an.simplify(mn + ext - 1)))
            continue
        e = E.as_const_int(ext)
        if len(moving) != 1 or e is None:
            return None
        atom, k = moving[0]
        lp = loops.get(atom) if isinstance(atom, E.Var) else None
        lo, n = (E.as_const_int(lp.min), E.as_const_int(lp.extent)) if lp else (None, None)
        if lp is None or atom in used or lo is None or n is None or n < 1 or not 0 < k <= e:
            return None
        used.add(atom)
        rest = an.simplify(mn - atom * k)
        out.append((an.simplify(rest + lo * k), an.simplify(rest + (lo + n - 1) * k + e - 1)))
    return out


def _check_reads_covered(ctx: Ctx, readers: list, buf: Buffer, writer: Block, region: list,
                         node, scope_blk: Block, what: str) -> None:
    """Every element a block of ``readers`` loads from the cache is one the stage put
    there: inside ``region`` (what the stage copies in each iteration of ``node``) for
    the readers inside ``node``, inside what all its iterations copy for the others."""
    union = None
    for c in readers:
        level = _level(ctx, c, node, scope_blk)
        if level is node:
            have = region_box(region)
        else:
            if union is None:
                union = _tiled_union(ctx, region, node, scope_blk,
                                     location_analyzer(ctx, scope_blk))
            have = union
        loads, _stores = _sites(ctx, c, buf)
        an = location_analyzer(ctx, level)
        need = _box(loads, loops_between(ctx, c, level), an, buf)
        if need == [] or box_within(need, have, an):
            continue
        raise ctx.error(f"block {c.name_hint}", f"block {c.name_hint} may read elements of "
                        f"{buf.name} that {what}, so its cache would not hold them",
                        f"read the cache only in blocks that read what block "
                        f"{writer.name_hint} writes (consumer_blocks)",
                        highlight=[c.name_hint, writer.name_hint])


def _input_region(ctx: Ctx, blk: Block, buf: Buffer, scope_blk: Block, readers: list,
                  writer: Block | None = None) -> list:
    """The region cache_read copies, at the start of the scope, of a buffer no block of
    the scope writes before the readers (TVM's: what ``blk`` reads under its nested
    blocks' predicates, else what the scope block reads, else the whole buffer; with a
    ``writer`` after the readers, what it writes) — the whole buffer when some reader may
    load outside it."""
    full = box_region(None, buf, location_analyzer(ctx, scope_blk))
    alts = nested_alternatives(blk, buf, "read")
    rreg = next((r for r in blk.reads if r.buffer is buf), None)
    sreg = next((r for r in scope_blk.reads if r.buffer is buf), None)
    if writer is not None:
        wreg = next(w for w in writer.writes if w.buffer is buf)
        region = stage_region(ctx, writer, wreg, scope_blk)
    elif rreg is not None and alts != [[]]:
        region = stage_region(ctx, blk, rreg, scope_blk, alts)
    elif sreg is not None:
        region = box_region([(rg.min, rg.min + rg.extent - 1) for rg in sreg.region], buf,
                            location_analyzer(ctx, scope_blk))
    else:
        return full
    an = location_analyzer(ctx, scope_blk)
    for c in readers:
        try:
            loads, _stores = access_sites(c, buf, {iv.var: v for iv, v in zip(
                c.iter_vars, ctx.index.realize[id(c)].iter_values)},
                [x for x in conjuncts(ctx.index.realize[id(c)].predicate) if not is_true(x)])
        except Opaque:
            return full
        need = _box(loads, loops_between(ctx, c, scope_blk), an, buf)
        if need != [] and not box_within(need, region_box(region), an):
            return full
    return region


def _before(ctx: Ctx, blk: Block, writer: Block, scope_blk: Block) -> bool:
    """``blk`` runs entirely before ``writer``: they are in different statements of the
    scope, ``blk``'s first (not in one loop, where it would see earlier iterations)."""
    node, _children, pos_w, pos_b = common_location(ctx, writer, blk, scope_blk)
    return node is scope_blk and pos_b < pos_w


def _closed(box: list) -> list:
    """``(lo, extent)`` per dimension as inclusive ``(lo, hi)``."""
    return [(lo, lo + ext - 1) for lo, ext in box]


def _check_write_back(ctx: Ctx, blk: Block, buf: Buffer, region: list, node) -> None:
    """cache_write copies ``region`` of the cache back to ``buf`` in each iteration of
    ``node``: ``blk`` must store only inside it, and every element of it (a store whose
    indices are an affine map of the loops onto a box holding the region)."""
    bname = blk.name_hint
    loops = loops_between(ctx, blk, node)
    an = location_analyzer(ctx, node)
    _loads, stores = _sites(ctx, blk, buf)
    have = region_box(region)
    for s in stores:
        if not box_within(_box([s], loops, an, buf), have, an):
            raise ctx.error(f"block {bname}", f"block {bname} may store to {buf.name} "
                            "outside the region its T.writes gives, which the cache would "
                            "not hold", "give the block's T.writes the region it writes",
                            highlight=[bname])
    for s in stores:
        box = dense_box(s, loops)
        if box is not None and box_within(have, _closed(box), an):
            return
    raise ctx.error(f"block {bname}", f"cannot prove that block {bname} writes every element "
                    f"of the region of {buf.name} the cache copies back (the copy would "
                    "overwrite the elements it does not write with the cache's)",
                    "cache a block whose stores cover a box: one store, its indices an affine "
                    "map of the loops, a T.where only bounding them", highlight=[bname])


def _initialised_by(st, ld) -> bool:
    """The load ``ld`` reads the element the T.init store ``st`` of its own reduction
    block writes (a reduction reading its running value)."""
    return (ld.inits and st.in_init and st.inits and st.inits[-1] is ld.inits[-1] and
            ld.last is None and st.last is None and
            all(structural_equal(a, b) for a, b in zip(st.indices, ld.indices)))


def _check_reads_after_writes(ctx: Ctx, blk: Block, buf: Buffer) -> None:
    """Each load of ``buf`` in ``blk`` reads an element ``blk`` has written before (the
    cache starts without the buffer's contents): a reduction's own element after its
    T.init, or an element an earlier statement of the block stores every element of."""
    bname = blk.name_hint
    loads, stores = _sites(ctx, blk, buf, keep_axes=True)
    an = location_analyzer(ctx, blk)
    inits = [_closed(b) for b in (dense_box(st, [], init=True) for st in stores
                                  if st.in_init is blk) if b is not None]
    for ld in loads:
        if any(_initialised_by(st, ld) for st in stores):
            continue
        need = relaxed_box(ld.ranges(), ld.conds, ld.loops)
        # the block's own T.init ran first (in the first reduction step of this element)
        ok = not ld.in_init and any(box_within(need, b, an) for b in inits)
        for st in stores:
            if ok or st.top >= ld.top:
                continue
            box = dense_box(st, [])
            ok = box is not None and box_within(need, _closed(box), an)
        if not ok:
            raise ctx.error(f"block {bname}", f"block {bname} reads the old contents of "
                            f"{buf.name} (it updates it without a T.init), which the new "
                            "cache would not hold", "cache a block that initialises what "
                            "it accumulates", highlight=[bname])


# ---------------------------------------------------------------------------
# cache_read
# ---------------------------------------------------------------------------
@register
class CacheRead(Primitive):
    kind = "CacheRead"
    attr_kinds = (("read_buffer_index", "int"), ("storage_scope", "str"))
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
        buffer, or when every consumer runs before the producer), so you then move it with
        ``compute_at`` to copy only what one tile needs. For an input the region is what
        the block reads under its nested blocks' ``T.where`` (the union of siblings'), else
        what the scope block reads, else the whole buffer. As in TVM, a stage placed in
        the scope block (not in a loop) gets a cache of just that region — its shape the
        region's extents, the consumers' indices shifted by its start (inside a tile
        block: ``A_local[vi - i * 16, vj]``).

        It requires: 1) ``read_buffer_index`` names a buffer the block reads; 2) at most one
        block writes that buffer in the scope, and the consumers all read it after that
        block writes it, or all before; 3) the consumers read only elements the stage
        copies (what that block writes); 4) ``storage_scope`` is "global", "local" or
        "shared"; 5) each block in ``consumer_blocks`` (default: every block that reads the
        buffer) reads it and is in the same scope. Returns the cache block.

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
        if writer is None:
            node, pos = scope_blk, 0
            region = _input_region(ctx, blk, buf, scope_blk, consumers)
        elif all(_before(ctx, c, writer, scope_blk) for c in consumers):
            # the readers run before the writer: they read the buffer's old contents,
            # copied at the start of the scope (TVM places the stage there too)
            node, pos = scope_blk, 0
            region = _input_region(ctx, blk, buf, scope_blk, consumers, writer)
        else:
            first = min(consumers, key=lambda b: idx.order[id(b)])
            if idx.order[id(first)] < idx.order[id(writer)]:
                wname = writer.name_hint
                if not _before(ctx, first, writer, scope_blk):
                    raise ctx.error(f"block {first.name_hint}", f"block {first.name_hint} "
                                    f"reads {buf.name} in a loop it shares with block "
                                    f"{wname}, before it (what an earlier iteration wrote), "
                                    "so no single copy serves it", f"move block "
                                    f"{first.name_hint} out of the loop, or after block "
                                    f"{wname} in it", highlight=[first.name_hint, wname])
                raise ctx.error(f"block {first.name_hint}", f"block {first.name_hint} reads "
                                f"{buf.name} before block {wname} writes it, and other "
                                "readers after", "list in consumer_blocks only the blocks "
                                f"before {wname}, or only those after it",
                                highlight=[first.name_hint, wname])
            node, _children, pos_w, pos = common_location(ctx, writer, first, scope_blk)
            if pos_w >= pos:  # pragma: no cover - guaranteed by the order check
                raise ctx.error(f"block {bname}", "cannot find where to place the cache", "")
            wreg = next(w for w in writer.writes if w.buffer is buf)
            region = stage_region(ctx, writer, wreg, node)
            _check_reads_covered(ctx, consumers, buf, writer, region, node, scope_blk,
                                 f"block {writer.name_hint} does not write")
        return add_cache_stage(ctx, "read", buf, scope, scope_blk, node, pos, writer, consumers,
                               region)

    def python_args(self, inputs, attrs, dialect):
        return _cache_python_args(self, inputs, attrs, dialect, "read_buffer_index")

# ---------------------------------------------------------------------------
# cache_write
# ---------------------------------------------------------------------------
@register
class CacheWrite(Primitive):
    kind = "CacheWrite"
    attr_kinds = (("write_buffer_index", "int"), ("storage_scope", "str"))
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
        ``consumer_blocks`` read the cache directly. The region copied back is what the
        block writes, under its ``T.where`` and its nested blocks' (the union of
        siblings'); in the scope block the cache holds just that region, as in TVM (see
        ``cache_read``).

        It requires: 1) ``write_buffer_index`` names a buffer the block writes; 2) the block
        is the only block writing that buffer in its scope (cache before
        decompose_reduction); 3) the block writes every element of the region copied back
        (one store whose indices are an affine map of the loops onto it — a strided store,
        or siblings leaving a corner unwritten, would copy back what the cache holds
        there); 4) where the block reads the buffer it reads what it wrote first: its own
        element after its ``T.init()``, or what an earlier statement of the block wrote
        (the cache starts without the buffer's old contents); 5) ``storage_scope`` is
        "global", "local" or "shared"; 6) each block in ``consumer_blocks`` reads the
        buffer, only elements the block writes, and is in the same scope. Returns the
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
        _check_reads_after_writes(ctx, blk, buf)
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
        for b in kids:
            if b is not blk and reads_buf(b, buf) and idx.order[id(b)] < me and \
                    not _before(ctx, b, blk, scope_blk):
                raise ctx.error(f"block {b.name_hint}", f"block {b.name_hint} reads "
                                f"{buf.name} in a loop it shares with block {bname}, before "
                                f"it (what an earlier iteration wrote), but the cache is "
                                f"copied back to {buf.name} after that loop",
                                f"move block {b.name_hint} out of the loop, or after block "
                                f"{bname} in it", highlight=[b.name_hint, bname])
        if related:
            first = min(related, key=lambda b: idx.order[id(b)])
            node, _children, _pa, pos = common_location(ctx, blk, first, scope_blk)
        else:
            node, pos = scope_blk, len(flatten_seq(scope_blk.body))
        wreg = next(w for w in blk.writes if w.buffer is buf)
        region = stage_region(ctx, blk, wreg, node, nested_alternatives(blk, buf, "write"))
        _check_write_back(ctx, blk, buf, region, node)
        _check_reads_covered(ctx, listed, buf, blk, region, node, scope_blk,
                             f"block {bname} does not write")
        return add_cache_stage(ctx, "write", buf, scope, scope_blk, node, pos, blk, listed,
                               region)

    def python_args(self, inputs, attrs, dialect):
        return _cache_python_args(self, inputs, attrs, dialect, "write_buffer_index")
