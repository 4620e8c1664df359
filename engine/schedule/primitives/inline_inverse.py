"""A consumer's read map inverted in the shape TVM's ``reverse_compute_inline`` writes it.

TVM reads the consumer's load indices as an iterator map (``arith::DetectIterMap``: each
index a *split* ``(x // lower) % extent`` of a *mark* — an axis, or a fused sum of axes
``vi * 2048 + vj * 64 + vk * 8 + vl`` shared by the indices that cut it) and inverts it
by back-propagating the producer's store indices through that map
(``arith::InverseAffineIterMap``), without simplifying afterwards. So a consumer reading
``B[f // 128, f % 128]`` of ``f = ((vi * 32 + vj) * 8 + vk) * 8 + vl`` stands, in a producer
storing ``B[pi, pj]``, for ``vi = (pj + pi * 128) // 2048``, ``vj = (pj + pi * 128) // 64 % 32``,
..., and a consumer reading ``B[ci // 16, cj // 16, ci % 16, cj % 16]`` of a producer storing
``B[pi, pj, pm, pn]`` for ``ci = pm + pi * 16``.

:func:`tvm_inverse` gives those expressions for the index forms it reads (an axis, a fused
sum of axes whose coefficients are a mixed radix, either cut with ``//`` and ``%`` by
constants dividing its range, a constant 0), or None for any other form. It only shapes
the expressions: whether the map is one-to-one is decided by the caller (the engine's own
inverse, :mod:`index_map_inverse`), and the two agree wherever both apply.
"""
from __future__ import annotations

import math

from engine.arith.affine import affine_terms
from engine.ir import expr as E


class _Unsupported(Exception):
    pass


class _Split:
    """``(mark // lower) % extent * scale``: ``mark`` a Var or a fused :class:`_Sum`."""

    def __init__(self, mark, lower: int, extent: int, scale: int = 1):
        self.mark, self.lower, self.extent, self.scale = mark, lower, extent, scale


class _Sum:
    """``sum(args)``, the splits from the largest scale down (base 0)."""

    def __init__(self, args: list):
        self.args = args


# -------------------------------------------------------------- folding as TVM's operators
def _int(e) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def _add(a, b):
    """``a + b`` with ``a`` None standing for TVM's accumulator's initial 0."""
    if a is None or _int(a) == 0:
        return b
    if _int(b) == 0:
        return a
    if _int(a) is not None and _int(b) is not None:
        return E.const(_int(a) + _int(b), a.dtype)
    return E.Add(a, b)


def _mul(a, c: int):
    if c == 1:
        return a
    if _int(a) is not None:
        return E.const(_int(a) * c, a.dtype)
    return E.Mul(a, E.const(c, a.dtype))


def _floordiv(a, c: int):
    if c == 1:
        return a
    if _int(a) is not None:
        return E.const(_int(a) // c, a.dtype)
    return E.FloorDiv(a, E.const(c, a.dtype))


def _floormod(a, c: int):
    if _int(a) is not None or c == 1:
        return E.const(0 if c == 1 else _int(a) % c, a.dtype)
    return E.FloorMod(a, E.const(c, a.dtype))


# -------------------------------------------------------------- the iterator map
class _Reader:
    """Reads index expressions as iterator sums over axes of known extents."""

    def __init__(self, extents: dict):
        self.extents = extents          # Var -> int
        self.fused: dict = {}           # key -> _Sum, one mark per fused sum
        self.owner: dict = {}           # id(var) -> the key of the mark it belongs to

    def index(self, e) -> _Sum:
        if isinstance(e, E.IntImm):
            if e.value != 0:
                raise _Unsupported
            return _Sum([])
        return _Sum([self.split(e)])

    def _claim(self, v, key) -> None:
        if self.owner.setdefault(id(v), key) != key:
            raise _Unsupported          # an axis in two different marks

    def split(self, e) -> _Split:
        if isinstance(e, E.Var):
            n = self.extents.get(e)
            if n is None or n <= 1:
                raise _Unsupported
            self._claim(e, ("var", id(e)))
            return _Split(e, 1, n)
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            c = _int(e.b)
            if c is None or c <= 0:
                raise _Unsupported
            s = self.split(e.a)
            if s.extent % c or (isinstance(e, E.FloorDiv) and s.extent == c):
                raise _Unsupported          # a cut leaving a digit of one value
            if isinstance(e, E.FloorDiv):
                return _Split(s.mark, s.lower * c, s.extent // c)
            return _Split(s.mark, s.lower, c)
        if isinstance(e, (E.Add, E.Mul)):
            mark = self.fuse(e)
            return _Split(mark, 1, math.prod(a.extent for a in mark.args))
        raise _Unsupported

    def fuse(self, e) -> _Sum:
        got = affine_terms(e)
        if got is None:
            raise _Unsupported
        terms, const = got
        if const != 0 or len(terms) < 2:
            raise _Unsupported
        parts = sorted(terms.items(), key=lambda t: -t[1])
        below = 1
        for v, c in reversed(parts):        # a mixed radix from scale 1 up
            n = self.extents.get(v)
            if c != below or n is None or n <= 1:
                raise _Unsupported
            below *= n
        key = tuple((id(v), c) for v, c in parts)
        for v, _c in parts:
            self._claim(v, key)
        if key not in self.fused:
            self.fused[key] = _Sum([_Split(v, 1, self.extents[v], c) for v, c in parts])
        return self.fused[key]


def _post_order(sums: list) -> list:
    out, seen = [], set()

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, _Sum):
            for s in node.args:
                visit(s)
        elif isinstance(node.mark, _Sum):
            visit(node.mark)
        out.append(node)

    for s in sums:
        visit(s)
    return out


def tvm_inverse(axes: list, extents: list, indices: list, outputs: list) -> dict | None:
    """``{axis: expression of outputs}``: the axes of a consumer reading a buffer at
    ``indices`` (over ``axes`` of ``extents``, from 0) written as the producer's store
    indices ``outputs``, in TVM's form (see the module); None when an index is of a form not
    read here. Axes no index uses are left out."""
    reader = _Reader(dict(zip(axes, extents)))
    try:
        sums = [reader.index(e) for e in indices]
    except _Unsupported:
        return None
    back: dict = {}
    for s, out in zip(sums, outputs):
        back[id(s)] = out
    inverse: dict = {}
    for node in reversed(_post_order(sums)):
        value = back.get(id(node))
        if value is None:
            continue
        if isinstance(node, _Sum):
            if len(node.args) == 1:
                src = node.args[0]
                back[id(src)] = _mul(_add(back.get(id(src)), value), src.scale)
                continue
            for k in range(len(node.args) - 1, -1, -1):
                split = node.args[k]
                part = _floordiv(value, split.scale)
                if k > 0:
                    part = _floormod(part, split.extent)
                back[id(split)] = _add(back.get(id(split)), part)
            continue
        value = _mul(value, node.lower)
        if isinstance(node.mark, _Sum):
            back[id(node.mark)] = _add(back.get(id(node.mark)), value)
        else:
            inverse[node.mark] = _add(inverse.get(node.mark), value)
    return inverse
