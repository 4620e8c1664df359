"""Buffers of a block and rewriting their accesses: shared by the storage, cache,
reduction and layout primitives.

* look-ups: every buffer of a function, where one is allocated, the ``n``-th buffer a
  block reads or writes (and a buffer name turned into that index), checked scopes;
* which blocks read, write or load a buffer;
* rewriting: :func:`rewrite_stmts` (post-order edits by statement identity, composed with
  :func:`compose`), :class:`BufferSwap` (one buffer for another in chosen accesses) and
  :class:`ReplaceBuffer` (everywhere, allocations and the ``T.match_buffer`` views of it
  — :func:`with_views` — included).
"""
from __future__ import annotations

from typing import Any, Callable

from engine.ir import expr as E
from engine.ir.buffer import SCOPES, Buffer, BufferRegion, is_storage_scope
from engine.ir.functor import Mutator, post_order_visit
from engine.ir.stmt import Block, BufferStore

from ..error import ScheduleError
from ..registry import Ctx
from ..tree import map_children
from ._common import is_int, subject_of


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
    if not is_storage_scope(scope):
        raise ctx.error(subject, f"unknown storage scope {scope!r}",
                        f"use one of {', '.join(repr(s) for s in SCOPES)} ('local' keeps a "
                        "small buffer in registers/on the stack; 'shared' is treated as "
                        "'global' on a CPU; a tag such as 'global.A_reg' names the same "
                        "memory for a tensor intrinsic)", highlight=[subject.split(" ", 1)[-1]])
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


def need_attrs(ctx: Ctx, attrs: list, n: int, what: str) -> list:
    """``attrs``, refused when a (replayed) instruction has fewer than ``n`` of them."""
    if len(attrs) < n:
        raise ctx.error("", f"{what} needs {n} attributes, got {len(attrs)}", "")
    return attrs


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
    """Replace a buffer object everywhere (loads, stores, regions, alloc_buffers), and
    with it the ``T.match_buffer`` views of it (``views``: old view id -> new view, see
    :func:`with_views`)."""

    def __init__(self, old: Buffer, new: Buffer, views: dict | None = None):
        self.old, self.new = old, new
        self.views = views or {}

    def visit_buffer(self, buf):
        if buf is self.old:
            return self.new
        return self.views.get(id(buf), buf)


def with_views(node: Any, old: Buffer, **changes) -> dict:
    """The views of ``old`` under ``node`` (``T.match_buffer`` of a region of it, and views
    of those) made anew with ``changes`` (a new dtype, a new scope: a view has its source's):
    old view id -> new view. TVM's set_scope and unsafe_set_dtype change them so."""
    from engine.ir.stmt import MatchBufferRegion
    from engine.ir.functor import collect
    sources = {id(old)}
    out: dict = {}
    for m in collect(node, MatchBufferRegion, into_expressions=False):
        if id(m.source.buffer) in sources:
            out[id(m.buffer)] = m.buffer.replace(**changes)
            sources.add(id(m.buffer))
    return out


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
