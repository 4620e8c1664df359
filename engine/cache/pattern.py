"""Access patterns: which elements of each buffer one loop iteration touches, and when.

:func:`access_pattern` runs *one* iteration of a chosen loop (its enclosing loops at their
first iteration; everything outside that iteration is skipped) as an instrumented build
that records every access, and returns per buffer the *first-touch time* of each element
(the index of the access that first touched it, ``-1`` if untouched) and the number of
touches — the data behind a heatmap or an animation of the iteration order ("during one
iteration of ``i``, B is read column by column").
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import bytes_of, element_of
from engine.ir.function import PrimFunc
from engine.ir.functor import collect

from .footprint import _Collector
from .instrument import instrument, mark_blocks
from .simcore import RecorderState, build_recorder_module

DEFAULT_MAX_EVENTS = 2_000_000
_uid = itertools.count()


class AccessPatternError(ValueError):
    """A loop that cannot be selected (unknown, or removed by unrolling/vectorization)."""


@dataclasses.dataclass
class BufferPattern:
    name: str
    shape: tuple
    first_touch: np.ndarray  # int64, shape ``shape``; -1 = not touched
    touches: np.ndarray      # int32, shape ``shape``

    def to_dict(self, max_cells: int = 65536) -> dict:
        """Plain data; buffers with more than ``max_cells`` elements are reduced to tiles of
        ``tile`` elements per dimension (first touch = earliest in the tile, touches summed)."""
        first, touches, tile = _reduce(self.first_touch, self.touches, max_cells)
        return {"name": self.name, "shape": list(self.shape), "tile": tile,
                "first_touch": first.tolist(), "touches": touches.tolist(),
                "touched": int((self.first_touch >= 0).sum())}


@dataclasses.dataclass
class AccessPattern:
    """Result of :func:`access_pattern`."""

    func_name: str
    loop: str          # path of the loop, e.g. "i/j_0"
    iteration: int
    events: int        # accesses in the iteration
    truncated: bool    # True when more than max_events accesses occurred
    buffers: dict      # name -> BufferPattern

    def to_dict(self, max_cells: int = 65536) -> dict:
        return {"func": self.func_name, "loop": self.loop, "iteration": self.iteration,
                "events": self.events, "truncated": self.truncated,
                "buffers": {k: v.to_dict(max_cells) for k, v in self.buffers.items()}}


def _reduce(first: np.ndarray, touches: np.ndarray, max_cells: int):
    """Tile-reduce arrays above ``max_cells`` elements (same factor on every dimension)."""
    f = 1
    while first.size and np.prod([-(-n // f) for n in first.shape]) > max(1, max_cells):
        f *= 2
    if f == 1:
        return first, touches, [1] * first.ndim
    pads = [(0, -(-n // f) * f - n) for n in first.shape]
    big = np.iinfo(np.int64).max
    fp = np.pad(np.where(first < 0, big, first), pads, constant_values=big)
    tp = np.pad(touches, pads)
    shape = []
    for n in fp.shape:
        shape += [n // f, f]
    axes = tuple(range(1, 2 * first.ndim, 2))
    fr = fp.reshape(shape).min(axis=axes)
    tr = tp.reshape(shape).sum(axis=axes)
    return np.where(fr == big, -1, fr), tr, [f] * first.ndim


def _choose_loop(func: PrimFunc, loop: Any):
    col = _Collector()
    col.stmt(func.body, {}, ())
    loops = col.loops
    if not loops:
        raise AccessPatternError(f"{func.name} has no loops")
    if loop is None:
        return loops[0]
    if isinstance(loop, int) and not isinstance(loop, bool):
        if 0 <= loop < len(loops):
            return loops[loop]
        raise AccessPatternError(f"loop index {loop} is out of range: {func.name} has "
                                 f"{len(loops)} loops (0..{len(loops) - 1})")
    for f, parents in loops:
        if f is loop:
            return f, parents
    if isinstance(loop, str):
        for key in ("path", "name"):
            for f, parents in loops:
                path = "/".join([g.loop_var.name for g in parents] + [f.loop_var.name])
                if (path if key == "path" else f.loop_var.name) == loop:
                    return f, parents
    names = ", ".join("/".join([g.loop_var.name for g in p] + [f.loop_var.name])
                      for f, p in loops)
    raise AccessPatternError(f"no loop {loop!r} in {func.name}; its loops are: {names}")


def _restrict(s: Any, var: E.Var, iteration: int) -> Any:
    """The part of lowered ``s`` that runs iteration ``iteration`` of the loop over ``var``
    (enclosing loops bound to their first value), or None if the loop is not under ``s``."""
    if isinstance(s, S.For):
        if s.loop_var is var:
            return S.LetStmt(var, s.min + E.IntImm(var.dtype, iteration) if iteration else s.min,
                             s.body)
        inner = _restrict(s.body, var, iteration)
        return None if inner is None else S.LetStmt(s.loop_var, s.min, inner)
    if isinstance(s, S.SeqStmt):
        for x in s.seq:
            r = _restrict(x, var, iteration)
            if r is not None:
                return r
        return None
    if isinstance(s, S.Allocate):
        r = _restrict(s.body, var, iteration)
        return None if r is None else S.Allocate(s.buffer, r)
    if isinstance(s, S.LetStmt):
        r = _restrict(s.body, var, iteration)
        return None if r is None else S.LetStmt(s.var, s.value, r)
    if isinstance(s, S.IfThenElse):
        r = _restrict(s.then_case, var, iteration)
        if r is not None:
            return S.IfThenElse(s.condition, r, None)
        r = _restrict(s.else_case, var, iteration) if s.else_case is not None else None
        return None if r is None else S.IfThenElse(E.Not(s.condition), r, None)
    return None


def access_pattern(mod: Any, func_name: str | None = None, loop: Any = None,
                   iteration: int = 0, args=None,
                   max_events: int = DEFAULT_MAX_EVENTS) -> AccessPattern:
    """Record the accesses of one iteration of ``loop`` (see the module docstring).

    ``loop``: a ``For`` node of the function, its pre-order index, or its path/name
    (``"i"``, ``"i/j_0"``); default: the first loop. ``iteration``: which iteration (the
    enclosing loops are at their first one). At most ``max_events`` accesses are recorded
    (``truncated`` says when there were more).
    """
    from engine.lower import lower

    from .simulate import _build, _pick_func, default_args, instrumented_opt_level
    func = _pick_func(mod, func_name)
    f, parents = _choose_loop(func, loop)
    path = "/".join([g.loop_var.name for g in parents] + [f.loop_var.name])
    ext = E.as_const_int(f.extent)
    if not isinstance(iteration, int) or iteration < 0 or (ext is not None and iteration >= ext):
        raise AccessPatternError(f"iteration must be in 0..{(ext or 1) - 1} for loop {path}, "
                                 f"got {iteration!r}")
    if not isinstance(max_events, int) or max_events < 1:
        raise AccessPatternError(f"max_events must be a positive integer, got {max_events!r}")
    marked, names = mark_blocks(func)
    low = lower(marked)
    body = _restrict(low.body, f.loop_var, iteration)
    if body is None:
        raise AccessPatternError(
            f"loop {path} does not survive lowering (it was unrolled, vectorized or has "
            "extent 1); choose an enclosing loop")
    low = low.with_body(body)
    uid = next(_uid)
    acc, base = f"__cacherec_access_{uid}", f"__cacherec_base_{uid}"
    ins = instrument(low, len(names), None, 64, acc, base)
    rec = RecorderState(len(ins.buffers), max_events)
    rt, _ = _build(ins.func, build_recorder_module(rec, access_symbol=acc, base_symbol=base),
                   instrumented_opt_level(max_events, ins.static_accesses))
    kernel = rt[func.name]
    if args is None:
        args = default_args(func)
    kernel(*args)
    n = int(rec.count[0])
    m = min(n, rec.capacity)
    # original (multi-dimensional) shapes by name
    shapes = {p.name: p for p in func.params}
    for blk in collect(func.body, S.Block):
        for b in blk.alloc_buffers:
            shapes.setdefault(b.name, b)
    out: dict = {}
    addrs, sizes, bufs = rec.addresses[:m], rec.nbytes[:m], rec.buffers[:m]
    for bid, fb in enumerate(ins.buffers):
        sel = np.nonzero(bufs == bid)[0]
        orig = shapes.get(fb.name, fb)
        try:
            shape = orig.const_shape()
        except ValueError:
            continue
        total = int(np.prod(shape)) if shape else 1
        first = np.full(total, -1, dtype=np.int64)
        touches = np.zeros(total, dtype=np.int32)
        if sel.size and rec.bases[bid] != -1:
            elem = bytes_of(element_of(fb.dtype))
            start = (addrs[sel] - rec.bases[bid]) // elem
            count = np.maximum(sizes[sel] // elem, 1)
            idx = np.repeat(start, count) + (np.arange(count.sum()) -
                                             np.repeat(np.cumsum(count) - count, count))
            when = np.repeat(sel, count)
            ok = (idx >= 0) & (idx < total)
            idx, when = idx[ok], when[ok]
            np.add.at(touches, idx, 1)
            uniq, pos = np.unique(idx, return_index=True)
            first[uniq] = when[pos]
        if orig.strides:
            shape = (total,)
        out[fb.name] = BufferPattern(fb.name, tuple(shape), first.reshape(shape),
                                     touches.reshape(shape))
    return AccessPattern(func.name, path, iteration, n, n > rec.capacity, out)
