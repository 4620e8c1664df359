"""The views of ``T.match_buffer`` made plain: :func:`inline_views` rewrites every access
through a block's view onto the buffer it views, as TVM's ``LowerMatchBuffer`` does.

A view ``Bb = T.match_buffer(B[r0, r1:r1 + 4], (4,))`` is the region of ``B`` seen as a
buffer of its own: the view's dimensions line up with the region's *trailing* ones, the
leading ones (of extent 1) stay at their start, and its storage and strides are ``B``'s.
So, with ``off = ndim(region) - ndim(view)``::

    Bb[k]            ->  B[r0, r1 + k]
    Bb[a:b] (region) ->  B[r0, r1 + a : r1 + b]
    Bb.elem_offset   ->  B's offset of B[r0, r1] (strides of B, B.elem_offset included)
    Bb.data          ->  B.data

A view of a view is a view of the first one's source. ``B.elem_offset`` of a buffer that
is no view becomes its constant. The blocks lose their ``match_buffers``; nothing else
changes. The lowering (before anything else) and the interpreter run the rewritten
function: what a view means is decided here, once. Accesses are bounds-checked against
the source buffer (the view's own shape is what the parser checked the region against).
"""
from __future__ import annotations

from typing import Any

from . import expr as E
from .buffer import Buffer, BufferRegion, Range
from .dtype import element_of, lanes_of
from .functor import Mutator, collect_stmts
from .stmt import Block, BufferStore

__all__ = ["inline_views", "has_views", "offset_index"]


def has_views(node: Any) -> bool:
    """Does any block under ``node`` declare a ``T.match_buffer`` view?"""
    return any(b.match_buffers for b in collect_stmts(node, Block))


def offset_index(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """``a + b`` (``a`` the region's start, ``b`` an index into the view) with zeros and
    constants folded; a vector index stays a vector."""
    if lanes_of(b.dtype) > 1:
        if type(b) is E.Ramp:
            return E.Ramp(offset_index(a, b.base), b.stride, b.lanes)
        return E.binary(E.Add, b, E.Broadcast(a if a.dtype == element_of(b.dtype) else
                                              E.Cast(element_of(b.dtype), a), b.lanes))
    if E.is_const_int(b, 0):
        return a
    if E.is_const_int(a, 0):
        return b
    if type(a) is E.IntImm and type(b) is E.IntImm:
        return E.IntImm(a.dtype, a.value + b.value)
    return E.binary(E.Add, a, b)


class _Views(Mutator):
    def __init__(self) -> None:
        self.views: dict[int, tuple[Buffer, tuple]] = {}  # id(view) -> (source, starts)
        self.keep: list = []                               # the views, alive while keyed

    def visit_Block(self, b: Block) -> Block:
        if b.match_buffers:
            for m in b.match_buffers:
                src = self.visit_BufferRegion(m.source)   # a view of a view: its source's
                self.views[id(m.buffer)] = (src.buffer, tuple(rg.min for rg in src.region))
                self.keep.append(m.buffer)
            b = b.replace(match_buffers=())
        return self.generic_visit(b)

    def _point(self, view: Buffer, indices: tuple) -> tuple[Buffer, tuple]:
        src, starts = self.views[id(view)]
        off = len(starts) - len(indices)
        return src, tuple(starts[:off]) + tuple(offset_index(s, i) for s, i in
                                                 zip(starts[off:], indices))

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        e = self.generic_visit(e)
        if id(e.buffer) in self.views:
            return E.BufferLoad(*self._point(e.buffer, e.indices))
        return e

    def visit_BufferStore(self, s: BufferStore) -> BufferStore:
        s = self.generic_visit(s)
        if id(s.buffer) in self.views:
            src, idx = self._point(s.buffer, s.indices)
            return BufferStore(src, s.value, idx)
        return s

    def visit_BufferRegion(self, r: BufferRegion) -> BufferRegion:
        r = self.generic_visit(r)
        if id(r.buffer) not in self.views:
            return r
        src, starts = self.views[id(r.buffer)]
        off = len(starts) - len(r.region)
        return BufferRegion(src, tuple(Range(s, E.IntImm(s.dtype, 1)) for s in starts[:off])
                            + tuple(Range(offset_index(s, rg.min), rg.extent)
                                    for s, rg in zip(starts[off:], r.region)))

    def visit_BufferField(self, e: E.BufferField) -> E.PrimExpr:
        buf = e.buffer
        if id(buf) not in self.views:
            if e.field == "elem_offset":
                return E.IntImm(e.dtype, int(buf.elem_offset))
            return e
        src, starts = self.views[id(buf)]
        if e.field == "data":
            return E.BufferField(src, "data")
        return _flat_offset(src, starts, e.dtype)


def _flat_offset(src: Buffer, starts: tuple, dtype: str) -> E.PrimExpr:
    """The offset of ``src[starts]`` in ``src``'s storage (its strides, or row-major)."""
    strides = list(src.strides)
    if not strides:
        acc: E.PrimExpr = E.IntImm(dtype, 1)
        for n in reversed(src.shape):
            strides.append(acc)
            acc = acc * n if not (type(acc) is E.IntImm and type(n) is E.IntImm) else \
                E.IntImm(dtype, acc.value * n.value)
        strides.reverse()
    out: E.PrimExpr = E.IntImm(dtype, int(src.elem_offset))
    for s, st in zip(starts, strides):
        term = s if E.is_const_int(st, 1) else E.binary(E.Mul, s, st)
        out = offset_index(out, term if term.dtype == dtype else E.Cast(dtype, term))
    return out


def inline_views(func: Any) -> Any:
    """``func`` (a PrimFunc, or any statement) with every ``T.match_buffer`` view and
    ``B.elem_offset`` made plain (see the module); the same object when it has none."""
    from .function import PrimFunc
    m = _Views()
    if isinstance(func, PrimFunc):
        body = m.visit(func.body)
        return func if body is func.body else func.replace(body=body)
    return m.visit(func)
