"""Read/write region inference for blocks (what ``T.reads`` / ``T.writes`` print).

For each buffer a block touches, one :class:`~engine.ir.Range` per dimension, written in
terms of the block's iter vars — the way TVM prints them:

* every access of the dimension uses the same index ``e``      -> ``Range(e, 1)``
  (printed as the point ``A[vi, vk]``, also for ``A[vi + vk]``);
* the indices differ only by constants, ``e + c``               -> ``Range(e + cmin, cmax - cmin + 1)``
  (window sum: ``A[vi]``, ``A[vi + 1]``, ``A[vi + 2]`` -> ``A[vi:vi + 3]``);
* otherwise the indices are bounded over the iter vars' domains (and the ranges of loops
  inside the block) -> a constant ``Range(lo, hi - lo + 1)``; if no bound can be found the
  whole dimension is used.

A reduction block (one with ``init``) does not list the buffers it writes among its reads,
as in TVM (``T.reads(A[vi, vk], B[vk, vj])`` for ``Y = Y + A * B``).
"""
from __future__ import annotations

from typing import Any, Iterable

from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import children, collect_vars, field_names
from engine.ir.node import Node
from engine.ir.stmt import BufferStore, For, IterVar

__all__ = ["infer_block_regions", "access_region", "same_expr", "const_bound"]


def same_expr(a: Any, b: Any) -> bool:
    """Structural equality where variables and buffers must be the *same objects*."""
    if a is b:
        return True
    if isinstance(a, (E.Var, Buffer)) or isinstance(b, (E.Var, Buffer)):
        return False
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b))
    if isinstance(a, Node) and isinstance(b, Node):
        if type(a) is not type(b):
            return False
        return all(same_expr(getattr(a, f), getattr(b, f)) for f in field_names(type(a)))
    if isinstance(a, Node) or isinstance(b, Node):
        return False
    return type(a) is type(b) and a == b


def _split_const(e: E.PrimExpr) -> tuple[E.PrimExpr | None, int]:
    """``e`` as ``base + c`` with an integer constant ``c`` (base None: pure constant)."""
    if isinstance(e, E.IntImm):
        return None, e.value
    if isinstance(e, E.Add):
        if isinstance(e.b, E.IntImm):
            base, c = _split_const(e.a)
            return base, c + e.b.value
        if isinstance(e.a, E.IntImm):
            base, c = _split_const(e.b)
            return base, c + e.a.value
    if isinstance(e, E.Sub) and isinstance(e.b, E.IntImm):
        base, c = _split_const(e.a)
        return base, c - e.b.value
    return e, 0


def _offset(base: E.PrimExpr | None, c: int, dtype: str) -> E.PrimExpr:
    if base is None:
        return E.IntImm(dtype, c)
    if c == 0:
        return base
    if c > 0:
        return E.Add(base, E.IntImm(base.dtype, c))
    return E.Sub(base, E.IntImm(base.dtype, -c))


def const_bound(e: Any, doms: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """Inclusive integer bounds ``(lo, hi)`` of ``e`` when every variable ``v`` in it has
    ``doms[id(v)] = (lo, hi)``; ``None`` when no bound can be derived."""
    if isinstance(e, E.IntImm):
        return e.value, e.value
    if isinstance(e, E.Var):
        return doms.get(id(e))
    if isinstance(e, E.Cast):
        return const_bound(e.value, doms) if E.is_int(e.dtype) else None
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        a, b = const_bound(e.a, doms), const_bound(e.b, doms)
        if a is None or b is None:
            return None
        if isinstance(e, E.Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(e, E.Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(e, E.Min):
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, E.Max):
            return max(a[0], b[0]), max(a[1], b[1])
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if isinstance(e, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)) and isinstance(e.b, E.IntImm):
        c = e.b.value
        a = const_bound(e.a, doms)
        if a is None or c <= 0:
            return None
        if isinstance(e, (E.Div, E.Mod)) and a[0] < 0:
            return None  # truncating ops on negative values: keep it simple
        if isinstance(e, (E.FloorDiv, E.Div)):
            return a[0] // c, a[1] // c
        if a[1] - a[0] + 1 >= c or a[0] // c != a[1] // c:
            return 0, c - 1
        return a[0] % c, a[1] % c
    if isinstance(e, E.Select):
        a, b = const_bound(e.true_value, doms), const_bound(e.false_value, doms)
        if a is None or b is None:
            return None
        return min(a[0], b[0]), max(a[1], b[1])
    return None


def _uses_only(e: Any, allowed: set[int]) -> bool:
    """True if every variable ``e`` uses is one of ``allowed`` (by id)."""
    return all(id(v) in allowed for v in collect_vars(e))


def access_region(buffer: Buffer, accesses: list[tuple], iter_vars: Iterable[IterVar],
                  relaxed: dict[int, tuple[int, int]] | None = None) -> BufferRegion:
    """The region of ``buffer`` covered by index tuples ``accesses`` (see module doc).

    ``iter_vars`` are kept symbolic; variables in ``relaxed`` (id -> inclusive (lo, hi)),
    e.g. loops inside the block, are replaced by their range.
    """
    iter_vars = tuple(iter_vars)
    symbolic = {id(iv.var) for iv in iter_vars}
    doms: dict[int, tuple[int, int]] = {}
    for iv in iter_vars:
        lo, ext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        if lo is not None and ext is not None:
            doms[id(iv.var)] = (lo, lo + ext - 1)
    doms.update(relaxed or {})
    ranges = []
    for d in range(len(buffer.shape)):
        idxs = [acc[d] for acc in accesses]
        ranges.append(_dim_range(idxs, symbolic, doms, buffer.shape[d]))
    return BufferRegion(buffer, tuple(ranges))


def _dim_range(idxs: list, symbolic: set[int], doms: dict, extent: E.PrimExpr) -> Range:
    first = idxs[0]
    dtype = first.dtype if E.is_int(first.dtype) else "int32"
    if all(_uses_only(e, symbolic) for e in idxs):
        if all(same_expr(e, first) for e in idxs[1:]):
            return Range(first, E.IntImm(dtype, 1))
        parts = [_split_const(e) for e in idxs]
        base0 = parts[0][0]
        if all((b is None and base0 is None) or (b is not None and base0 is not None
                                                 and same_expr(b, base0)) for b, _ in parts):
            cs = [c for _, c in parts]
            return Range(_offset(base0, min(cs), dtype), E.IntImm(dtype, max(cs) - min(cs) + 1))
    lo = hi = None
    for e in idxs:
        b = const_bound(e, doms)
        if b is None:
            return Range(E.IntImm(dtype, 0), extent)
        lo = b[0] if lo is None else min(lo, b[0])
        hi = b[1] if hi is None else max(hi, b[1])
    return Range(E.IntImm(dtype, lo), E.IntImm(dtype, hi - lo + 1))


def _collect_accesses(stmt: Any, loads: dict, stores: dict, relaxed: dict) -> None:
    """Walk ``stmt`` in evaluation order, recording BufferLoad/BufferStore indices."""

    def walk(n):
        if isinstance(n, E.BufferLoad):
            for i in n.indices:
                walk(i)
            loads.setdefault(n.buffer, []).append(n.indices)
            return
        if isinstance(n, BufferStore):
            walk(n.value)
            for i in n.indices:
                walk(i)
            stores.setdefault(n.buffer, []).append(n.indices)
            return
        if isinstance(n, For):
            lo, ext = E.as_const_int(n.min), E.as_const_int(n.extent)
            if lo is not None and ext is not None and ext > 0:
                relaxed[id(n.loop_var)] = (lo, lo + ext - 1)
        for child in children(n):
            walk(child)

    walk(stmt)


def infer_block_regions(body: Any, iter_vars: Iterable[IterVar], init: Any = None,
                        ) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """``(reads, writes)`` of a block with this ``body``, ``iter_vars`` and ``init``.

    Buffers appear in first-access order (body first, then init).  When ``init`` is given
    (a reduction block), buffers the block writes are left out of its reads.
    """
    iter_vars = tuple(iter_vars)
    loads: dict[Buffer, list] = {}
    stores: dict[Buffer, list] = {}
    relaxed: dict[int, tuple[int, int]] = {}
    _collect_accesses(body, loads, stores, relaxed)
    if init is not None:
        _collect_accesses(init, loads, stores, relaxed)
    writes = tuple(access_region(b, accs, iter_vars, relaxed) for b, accs in stores.items())
    reads = tuple(access_region(b, accs, iter_vars, relaxed) for b, accs in loads.items()
                  if init is None or b not in stores)
    return reads, writes
