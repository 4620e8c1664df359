"""cache_inplace: a read cache and a write cache around one block that updates a buffer in
place (``A[i] = A[i] * 2``), sharing one cache buffer.

The two copy stages are cache_read's and cache_write's (:func:`.cache_stage.copy_stage`):
placed right before and right after the block, inside its innermost loop (as TVM places
them), they copy the region the block accesses in one instance, so the block works on the
cache only.
"""
from __future__ import annotations

from engine.ir.buffer import Buffer
from engine.ir.stmt import Block, For, seq

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import expect_block, fresh_name
from .buffers import (BufferSwap, buffer_index_of, buffer_names, check_scope, compose,
                      need_attrs, nth_buffer, rewrite_stmts)
from .cache_stage import copy_stage, relaxed_region
from .region_inference import outer_analyzer


def _enclosing(ctx: Ctx, blk: Block):
    """The innermost loop (or block) around ``blk`` and the position in its body of the
    statement that holds ``blk``."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    node = next(a for a in idx.ancestors(realize) if isinstance(a, (For, Block)))
    pos = next(i for i, c in enumerate(flatten_seq(node.body)) if idx.contains(c, realize))
    return node, pos


@register
class CacheInplace(Primitive):
    kind = "CacheInplace"
    method = "cache_inplace"
    returns = "list"
    attr_kinds = (("read_buffer_index", "int"), ("storage_scope", "str"))

    def call(self, sch, block, read_buffer_index, storage_scope: str):
        """Cache a buffer that the block reads and writes in place: a copy into a new cache
        buffer (``<buffer>_<scope>``) right before the block, the block working on the
        cache, and a copy back right after it. Returns the two copy blocks (read cache
        first); the second is named with a ``_1`` suffix, block names being unique here.

        ``read_buffer_index`` is the index of the buffer in the block's ``T.reads`` (or its
        name). The copies sit inside the block's innermost loop and copy what one instance
        of the block accesses.

        It requires: 1) ``read_buffer_index`` names a buffer the block reads; 2) the block
        also writes that buffer; 3) ``storage_scope`` is "global", "local" or "shared".

        Before::

            for i in range(8):
                with T.block("A"):
                    vi = T.axis.spatial(8, i)
                    A[vi] = A[vi] * T.float32(2)

        Call::

            sch.cache_inplace(sch.get_block("A"), 0, "local")

        After::

            A_local = T.alloc_buffer((8,), scope="local")
            for i in range(8):
                for ax0 in range(1):
                    with T.block("A_local"):
                        v0 = T.axis.spatial(8, i + ax0)
                        A_local[v0] = A[v0]
                with T.block("A"):
                    vi = T.axis.spatial(8, i)
                    A_local[vi] = A_local[vi] * T.float32(2)
                for ax0 in range(1):
                    with T.block("A_local_1"):
                        v0 = T.axis.spatial(8, i + ax0)
                        A[v0] = A_local[v0]
        """
        index = buffer_index_of(sch, block, read_buffer_index, "read", self.method,
                                "read_buffer_index")
        return sch._run(self, [block], [index, storage_scope])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        index, scope = need_attrs(ctx, attrs, 2, self.method)[:2]
        name = blk.name_hint
        check_scope(ctx, f"block {name}", scope)
        buf = nth_buffer(ctx, blk, index, "read", "read_buffer_index")
        wreg = next((w for w in blk.writes if w.buffer is buf), None)
        if wreg is None:
            raise ctx.error(f"block {name}", f"block {name} reads {buf.name} but does not "
                            "write it (requirement 2)", "use cache_read for a buffer the "
                            "block only reads", highlight=[name])
        rreg = next(r for r in blk.reads if r.buffer is buf)
        cache = Buffer(fresh_name(f"{buf.name}_{scope}", buffer_names(ctx.func)), buf.shape,
                       buf.dtype, scope, (), 0, buf.align)
        node, pos = _enclosing(ctx, blk)
        an = outer_analyzer(ctx, node)
        blocks = set(ctx.index.blocks)
        read_name = fresh_name(cache.name, blocks)
        write_name = fresh_name(cache.name, blocks | {read_name})
        read_nest, read_stage = copy_stage(read_name, buf, cache,
                                           relaxed_region(ctx, blk, rreg, []), an)
        write_nest, write_stage = copy_stage(write_name, cache, buf,
                                             relaxed_region(ctx, blk, wreg, []), an)
        idx = ctx.index
        scope_blk = idx.scope_block(idx.realize[id(blk)])
        edits: dict = {}
        compose(edits, id(blk), BufferSwap(buf, cache).visit)

        def insert(s):
            kids = flatten_seq(s.body)
            new = kids[:pos] + [read_nest, kids[pos], write_nest] + kids[pos + 1:]
            return s.replace(body=seq(*new))
        compose(edits, id(node), insert)
        compose(edits, id(scope_blk), lambda b: b.replace(alloc_buffers=b.alloc_buffers +
                                                          (cache,)))
        return Result(rewrite_stmts(ctx.func, edits), [read_stage, write_stage])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0), self.attr(attrs, 1)]
        return [f"block={fmt(inputs[0])}", f"read_buffer_index={self.attr(attrs, 0)}",
                f"storage_scope={self.attr(attrs, 1)}"]
