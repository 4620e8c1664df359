"""Loop footprints: how many bytes one iteration of each loop's body touches.

For every ``For`` of a (scheduled, not yet lowered) PrimFunc, the accesses below it — the
``BufferLoad``/``BufferStore`` of the blocks it contains, with block axes replaced by their
bindings — are bounded with interval arithmetic: the loop's own variable and all outer
loop variables are fixed (the first iteration is taken as representative), the loops inside
range over their whole domains. Per buffer the bounding box of all its accesses is the
*region* (TVM's region analysis); its size in bytes and in cache lines (whole lines touched,
the measure that matters against a cache's capacity) is compared with each cache level:
the "does the tile fit in L1?" view.

The box over-approximates a sparse access pattern (e.g. a strided one), so ``fits`` errs on
the side of "does not fit"; it is exact for the dense rectangular tiles schedules produce.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import bytes_of, element_of
from engine.ir.function import PrimFunc
from engine.ir.functor import children, substitute


def _const(e: Any) -> int | None:
    return E.as_const_int(e)


def bound(e: Any, env: dict) -> tuple[int, int] | None:
    """Integer interval of ``e`` given ``env`` (var id -> (lo, hi)); None when unknown."""
    if isinstance(e, E.IntImm):
        return (e.value, e.value)
    if isinstance(e, E.Var):
        return env.get(id(e))
    if isinstance(e, E.Cast):
        return bound(e.value, env)
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        a, b = bound(e.a, env), bound(e.b, env)
        if a is None or b is None:
            return None
        if isinstance(e, E.Add):
            return (a[0] + b[0], a[1] + b[1])
        if isinstance(e, E.Sub):
            return (a[0] - b[1], a[1] - b[0])
        if isinstance(e, E.Mul):
            ps = [x * y for x in a for y in b]
            return (min(ps), max(ps))
        if isinstance(e, E.Min):
            return (min(a[0], b[0]), min(a[1], b[1]))
        return (max(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)):
        a, c = bound(e.a, env), _const(e.b)
        if c is None or c <= 0:
            return None
        if isinstance(e, (E.FloorMod, E.Mod)):
            if a is not None and a[0] >= 0 and a[1] - a[0] < c and a[0] % c <= a[1] % c:
                return (a[0] % c, a[1] % c)
            return (0, c - 1)
        if a is None:
            return None
        return (a[0] // c, a[1] // c)
    if isinstance(e, E.Select):
        a, b = bound(e.true_value, env), bound(e.false_value, env)
        if a is None or b is None:
            return None
        return (min(a[0], b[0]), max(a[1], b[1]))
    return None


@dataclasses.dataclass
class _Access:
    buffer: Buffer
    indices: tuple
    loops: tuple  # enclosing For nodes, outermost first


@dataclasses.dataclass
class BufferFootprint:
    buffer: str
    box: list  # [[lo, hi], ...] per dimension (inclusive)
    bytes: int
    lines: int

    def to_dict(self) -> dict:
        return {"buffer": self.buffer, "box": [list(b) for b in self.box], "bytes": self.bytes,
                "lines": self.lines}


@dataclasses.dataclass
class LoopFootprint:
    """Footprint of one iteration of a loop's body, against every cache level."""

    loop: S.For
    index: int  # pre-order position among the function's loops
    name: str
    path: str  # loop variable names from the outermost loop, "i/j_0"
    depth: int
    extent: int | None
    kind: str
    buffers: list
    bytes: int
    line_bytes: int
    fits: dict  # level name -> bool
    fits_in: str  # smallest level that holds the footprint, or "memory"
    blocks: list

    def to_dict(self) -> dict:
        return {"index": self.index, "loop": self.name, "path": self.path, "depth": self.depth,
                "extent": self.extent, "kind": self.kind, "bytes": self.bytes,
                "line_bytes": self.line_bytes, "fits": dict(self.fits), "fits_in": self.fits_in,
                "blocks": list(self.blocks), "buffers": [b.to_dict() for b in self.buffers]}


def _row_major(shape: tuple) -> list:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return list(reversed(strides))


def box_lines(buf: Buffer, box: list, line: int) -> int:
    """Cache lines touched by a box of ``buf`` (base assumed line-aligned)."""
    shape = buf.const_shape()
    elem = bytes_of(element_of(buf.dtype))
    strides = [_const(s) for s in buf.strides] if buf.strides else _row_major(shape)
    ext = [hi - lo + 1 for lo, hi in box]
    if not shape:
        return 1
    # merge trailing dimensions the box covers completely into one contiguous run
    p = len(shape) - 1
    while p > 0 and ext[p] == shape[p] and strides[p - 1] == shape[p] * strides[p]:
        p -= 1
    run = ext[p] * strides[p] if p < len(shape) - 1 else ext[p]
    if strides[-1] != 1:
        run = 1  # non-contiguous innermost dimension: count elements separately
    runs = 1
    for e in ext[:p]:
        runs *= e
    if strides[-1] != 1:
        runs *= max(1, ext[p] if p == len(shape) - 1 else 1)
    first = sum(lo * st for (lo, _), st in zip(box, strides)) + buf.elem_offset
    last = sum(hi * st for (_, hi), st in zip(box, strides)) + buf.elem_offset
    span_lines = (last * elem + elem - 1) // line - (first * elem) // line + 1
    pitch = strides[p - 1] * elem if p > 0 else 0
    run_bytes = run * elem
    off = (first * elem) % line
    if p == 0 or pitch % line == 0:
        per_run = (off + run_bytes - 1) // line + 1
    else:
        per_run = -(-run_bytes // line) + 1
    return max(1, min(runs * per_run, span_lines))


class _Collector:
    def __init__(self) -> None:
        self.accesses: list[_Access] = []
        self.loops: list[tuple] = []  # (For, parents tuple, blocks set)
        self.block_names: dict[int, set] = {}

    def expr(self, e: Any, vmap: dict, loops: tuple) -> None:
        def walk(x: Any) -> None:
            if isinstance(x, E.BufferLoad):
                self.accesses.append(_Access(x.buffer, tuple(substitute(i, vmap) for i in x.indices),
                                             loops))
            if isinstance(x, E.PrimExpr):
                for v in children(x):
                    if isinstance(v, E.PrimExpr):
                        walk(v)
        walk(e)

    def stmt(self, s: Any, vmap: dict, loops: tuple) -> None:
        if s is None:
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, vmap, loops)
        elif isinstance(s, S.For):
            self.loops.append((s, loops))
            self.stmt(s.body, vmap, loops + (s,))
        elif isinstance(s, S.BlockRealize):
            inner = dict(vmap)
            for iv, v in zip(s.block.iter_vars, s.iter_values):
                inner[iv.var] = substitute(v, vmap)
            for f in loops:
                self.block_names.setdefault(id(f), set()).add(s.block.name_hint)
            b = s.block
            self.stmt(b.init, inner, loops)
            self.stmt(b.body, inner, loops)
        elif isinstance(s, S.Block):
            self.stmt(s.init, vmap, loops)
            self.stmt(s.body, vmap, loops)
        elif isinstance(s, S.BufferStore):
            for i in s.indices:
                self.expr(i, vmap, loops)
            self.expr(s.value, vmap, loops)
            self.accesses.append(_Access(s.buffer, tuple(substitute(i, vmap) for i in s.indices),
                                         loops))
        elif isinstance(s, S.IfThenElse):
            self.expr(s.condition, vmap, loops)
            self.stmt(s.then_case, vmap, loops)
            self.stmt(s.else_case, vmap, loops)
        elif isinstance(s, (S.LetStmt,)):
            self.expr(s.value, vmap, loops)
            self.stmt(s.body, {**vmap, s.var: substitute(s.value, vmap)}, loops)
        elif isinstance(s, S.Allocate):
            self.stmt(s.body, vmap, loops)
        elif isinstance(s, S.Evaluate):
            self.expr(s.value, vmap, loops)


def _loop_range(f: S.For, env: dict) -> tuple[int, int] | None:
    mn, ext = bound(f.min, env), bound(f.extent, env)
    if mn is None or ext is None:
        return None
    return (mn[0], mn[1] + max(ext[1], 1) - 1)


def _access_box(acc: _Access, local: dict) -> list | None:
    """Bounding box (inclusive, clamped to the shape) of one access given loop-var ranges."""
    try:
        shape = acc.buffer.const_shape()
    except ValueError:
        return None
    env = {k: v for k, v in local.items() if v is not None}
    box = []
    for d, idx in enumerate(acc.indices):
        bnd = bound(idx, env)
        full = (0, shape[d] - 1) if d < len(shape) else (0, 0)
        if bnd is None:
            bnd = full
        lo, hi = max(bnd[0], full[0]), min(bnd[1], full[1])
        if lo > hi:
            lo, hi = full
        box.append([lo, hi])
    return box


def _merge(boxes: dict, buf: Buffer, box: list) -> None:
    cur = boxes.get(id(buf))
    if cur is None:
        boxes[id(buf)] = (buf, box)
    else:
        cur[1][:] = [[min(a[0], b[0]), max(a[1], b[1])] for a, b in zip(cur[1], box)]


def function_lines(func: PrimFunc, line: int) -> dict:
    """Per buffer name, the cache lines in the bounding box of all its accesses in ``func``
    (an upper bound of the distinct lines the whole program touches)."""
    col = _Collector()
    col.stmt(func.body, {}, ())
    boxes: dict = {}
    for acc in col.accesses:
        local: dict = {}
        for g in acc.loops:
            local[id(g.loop_var)] = _loop_range(g, {k: v for k, v in local.items()
                                                    if v is not None})
        box = _access_box(acc, local)
        if box is not None:
            _merge(boxes, acc.buffer, box)
    return {buf.name: box_lines(buf, box, line) for buf, box in boxes.values()}


def loop_footprints(func: PrimFunc, levels: tuple) -> list[LoopFootprint]:
    """Footprint of every loop of ``func`` (pre-order) against ``levels`` (CacheLevel list)."""
    col = _Collector()
    col.stmt(func.body, {}, ())
    line = levels[0].line if levels else 64
    out: list[LoopFootprint] = []
    for index, (f, parents) in enumerate(col.loops):
        # fix the loop's own and the outer variables at their first value
        env: dict = {}
        for g in parents + (f,):
            r = _loop_range(g, env)
            if r is None:
                env[id(g.loop_var)] = (0, 0)
            else:
                env[id(g.loop_var)] = (r[0], r[0])
        boxes: dict[int, tuple[Buffer, list]] = {}
        for acc in col.accesses:
            if f not in acc.loops:
                continue
            local = dict(env)
            pos = acc.loops.index(f)
            for g in acc.loops[pos + 1:]:
                r = _loop_range(g, local)
                local[id(g.loop_var)] = r if r is not None else None
            box = _access_box(acc, local)
            if box is not None:
                _merge(boxes, acc.buffer, box)
        bufs = []
        for buf, box in boxes.values():
            elem = bytes_of(element_of(buf.dtype))
            n = 1
            for lo, hi in box:
                n *= hi - lo + 1
            bufs.append(BufferFootprint(buf.name, box, n * elem, box_lines(buf, box, line)))
        total = sum(b.bytes for b in bufs)
        line_bytes = sum(b.lines for b in bufs) * line
        fits = {lv.name: line_bytes <= lv.size for lv in levels}
        fits_in = next((lv.name for lv in levels if line_bytes <= lv.size), "memory")
        path = "/".join([g.loop_var.name for g in parents] + [f.loop_var.name])
        out.append(LoopFootprint(f, index, f.loop_var.name, path, len(parents), _const(f.extent),
                                 f.kind.value, bufs, total, line_bytes, fits, fits_in,
                                 sorted(col.block_names.get(id(f), ()))))
    return out
