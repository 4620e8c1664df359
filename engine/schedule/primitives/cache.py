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

from engine.ir.buffer import Buffer
from engine.ir.stmt import Block

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import expect_block
from .buffers import (buffer_index_of, check_scope, loads_buf, need_attrs, nth_buffer, reads_buf,
                      writes_buf)
from .cache_stage import add_cache_stage, common_location, scope_children


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
        if writer is None:
            node, pos = scope_blk, 0
        else:
            first = min(consumers, key=lambda b: idx.order[id(b)])
            if idx.order[id(first)] < idx.order[id(writer)]:
                raise ctx.error(f"block {first.name_hint}", f"block {first.name_hint} reads "
                                f"{buf.name} before block {writer.name_hint} writes it",
                                "", highlight=[first.name_hint, writer.name_hint])
            node, _children, pos_w, pos = common_location(ctx, writer, first, scope_blk)
            if pos_w >= pos:  # pragma: no cover - guaranteed by the order check
                raise ctx.error(f"block {bname}", "cannot find where to place the cache", "")
        return add_cache_stage(ctx, "read", buf, scope, scope_blk, node, pos, writer, consumers)

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
        if related:
            first = min(related, key=lambda b: idx.order[id(b)])
            node, _children, _pa, pos = common_location(ctx, blk, first, scope_blk)
        else:
            node, pos = scope_blk, len(flatten_seq(scope_blk.body))
        return add_cache_stage(ctx, "write", buf, scope, scope_blk, node, pos, blk, listed)

    def python_args(self, inputs, attrs, dialect):
        return _cache_python_args(self, inputs, attrs, dialect, "write_buffer_index")
