"""A new stage as TVM's primitives build one: a loop nest ``for ax0, ax1, ...`` around one
block whose spatial axes ``v0, v1, ...`` are bound to those loops.

Used by the stages pad_einsum, reindex, reindex_cache_read/write and cache_index add (the
copy stage of cache_read/cache_write, which may start anywhere in the buffer, is
:func:`.cache_stage.copy_stage`).
"""
from __future__ import annotations

from typing import Any, Callable

from engine.ir import expr as E
from engine.ir.buffer import Range
from engine.ir.stmt import Block, BlockRealize, For, ForKind, IterType, IterVar


def grid_stage(name: str, extents: list, build: Callable, loop_prefix: str = "ax",
               iter_names: list | None = None, predicate: Any = None) -> tuple[Any, Block]:
    """The nest ``for <loop_prefix>0 in range(e0): ...`` over ``extents`` around a block
    ``name`` with one spatial axis per loop (``v0, v1, ...`` or ``iter_names``), bound to
    it. ``build(axes)`` gives the block's ``(reads, writes, body)`` from its axis
    variables. Returns ``(nest, block)``."""
    dts = ["int64" if isinstance(e, E.PrimExpr) and e.dtype == "int64" else "int32"
           for e in extents]                 # an int64 extent gets int64 loops, as TVM
    loops = [E.Var(f"{loop_prefix}{d}", dt) for d, dt in enumerate(dts)]
    names = iter_names or [f"v{d}" for d in range(len(extents))]
    ivs = tuple(IterVar(E.Var(n, dt), Range(E.const(0, dt), ext), IterType.SPATIAL)
                for n, ext, dt in zip(names, extents, dts))
    reads, writes, body = build([iv.var for iv in ivs])
    block = Block(ivs, tuple(reads), tuple(writes), name, body)
    pred = predicate if predicate is not None else E.IntImm("bool", 1)
    nest: Any = BlockRealize(tuple(loops), pred, block)
    for lv, ext in reversed(list(zip(loops, extents))):
        nest = For(lv, E.const(0, lv.dtype), ext, ForKind.SERIAL, nest)
    return nest, block
