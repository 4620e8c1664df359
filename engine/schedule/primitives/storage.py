"""Storage primitives: cache_read, cache_write, set_scope, storage_align.

cache_read and cache_write live in :mod:`.cache` (their copy stage in :mod:`.cache_stage`),
the buffer look-ups and access rewriting they share with :mod:`.reduction` and
:mod:`.layout` in :mod:`.buffers`; this module holds set_scope and storage_align (and the
strides storage_align asks for, which the lowering uses too) and re-exports the others'
names, so ``engine.schedule.primitives.storage`` still offers all of them.
"""
from __future__ import annotations

from typing import Any

from engine.ir.stmt import Block

from ..registry import Ctx, Primitive, Result, fmt, register
from ._common import expect_block, fresh_name, is_int
from .buffers import (BufferSwap, ReplaceBuffer, all_buffers, alloc_site, buffer_index_of,
                      buffer_names, check_scope, compose, loads_buf, need_attrs, nth_buffer,
                      reads_buf, rewrite_stmts, with_views, writes_buf)
from .cache import CacheRead, CacheWrite
from .cache_stage import (common_location, copy_stage, loops_between, relaxed_region,
                          scope_children)
from .region_inference import outer_analyzer

__all__ = ["CacheRead", "CacheWrite", "SetScope", "StorageAlign", "ALIGN_KEY",
           "aligned_strides", "all_buffers", "buffer_names", "alloc_site", "check_scope",
           "nth_buffer", "buffer_index_of", "rewrite_stmts", "compose", "BufferSwap",
           "ReplaceBuffer", "scope_children", "reads_buf", "writes_buf", "loads_buf",
           "common_location", "loops_between", "relaxed_region", "outer_analyzer",
           "copy_stage", "fresh_name"]


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
    attr_kinds = (("buffer_index", "int"), ("storage_scope", "str"))
    method = "set_scope"

    def call(self, sch, block, buffer_index, storage_scope: str):
        """Set the storage scope of a buffer the block writes.

        On a CPU, "local" asks the backend to keep the buffer on the stack (in registers
        when it is small and indexed by constants after unrolling); "global" is ordinary
        memory ("shared" is treated as "global").

        It requires: 1) ``buffer_index`` names a buffer the block writes (an index into
        ``T.writes``, or the buffer's name); 2) the buffer is allocated by the function
        (not a parameter); 3) ``storage_scope`` is "global", "local" or "shared", optionally
        with a tag ("global.A_reg": the same memory under a name a tensor intrinsic asks for).
        The ``T.match_buffer`` views of the buffer take the new scope too.

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
        index, scope = need_attrs(ctx, attrs, 2, "set_scope")[:2]
        check_scope(ctx, f"block {blk.name_hint}", scope)
        buf, _site = _allocated_write_buffer(ctx, blk, index, "set_scope")
        new = buf.replace(scope=scope)
        views = with_views(ctx.func.body, buf, scope=scope)   # a view has its source's scope
        body = ReplaceBuffer(buf, new, views).visit(ctx.func.body)
        return Result(ctx.func.replace(body=body), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0), self.attr(attrs, 1)]
        return [f"block={fmt(inputs[0])}", f"buffer_index={self.attr(attrs, 0)}",
                f"storage_scope={self.attr(attrs, 1)}"]


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
    attr_kinds = (("buffer_index", "int"), ("axis", "int"), ("factor", "int"),
                  ("offset", "int"))
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
        index, axis, factor, offset = need_attrs(ctx, attrs, 4, "storage_align")[:4]
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
            return [fmt(inputs[0]), self.attr(attrs, 0), f"axis={self.attr(attrs, 1)}",
                    f"factor={self.attr(attrs, 2)}", f"offset={self.attr(attrs, 3)}"]
        return [f"block={fmt(inputs[0])}", f"buffer_index={self.attr(attrs, 0)}",
                f"axis={self.attr(attrs, 1)}", f"factor={self.attr(attrs, 2)}",
                f"offset={self.attr(attrs, 3)}"]
