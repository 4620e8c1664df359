"""The inverse of a bijective index map over a box (TVM's ``IndexMap.Inverse`` for the maps
its iterator analysis accepts: axes split with ``//`` ``%``, fused as ``a * n + b``,
permuted).

Each new index is read as a *mixed-radix number* whose digits are pieces of the old
indices: a digit ``(x, lower, extent)`` is ``(x // lower) % extent``. ``x // c`` and
``x % c`` cut digits off or split one; ``a * c + b`` puts ``a``'s digits above ``b``'s when
``b`` spans exactly ``c``. The map is bijective when the digits of every old index tile it
exactly (lowers 1, e0, e0*e1, ... up to its extent); the inverse then rebuilds each old
index from its digits, each digit read off the new index that holds it.
"""
from __future__ import annotations

import math

from engine.arith import simplify
from engine.ir import expr as E

from .index_map_check import IndexMapError


class NotBijective(IndexMapError):
    """The map is not a bijection this analysis can invert."""


def _digits(e: E.PrimExpr, extents: dict) -> list[tuple]:
    """``e`` as digits (var, lower, extent), most significant first (extent-1 digits
    dropped); NotBijective when it is not such a number."""
    if isinstance(e, E.Var):
        n = extents[e]
        return [(e, 1, n)] if n > 1 else []
    if isinstance(e, E.IntImm):
        if e.value != 0:
            raise NotBijective(f"the constant offset {e.value} moves the indices off 0")
        return []
    if isinstance(e, E.FloorDiv) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return _div(_digits(e.a, extents), e.b.value)
    if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return _mod(_digits(e.a, extents), e.b.value)
    if isinstance(e, E.Mul):
        a, b = (e.a, e.b) if isinstance(e.b, E.IntImm) else (e.b, e.a)
        if isinstance(b, E.IntImm) and b.value > 0:
            return _add([(_digits(a, extents), b.value)])
    if isinstance(e, E.Add):
        return _add(_terms(e, extents))
    raise NotBijective(f"the index {_show(e)} is not a split, fuse or permutation of the axes")


def _terms(e: E.PrimExpr, extents: dict) -> list[tuple]:
    """A sum as (digits, scale) terms."""
    if isinstance(e, E.Add):
        return _terms(e.a, extents) + _terms(e.b, extents)
    if isinstance(e, E.Mul):
        a, b = (e.a, e.b) if isinstance(e.b, E.IntImm) else (e.b, e.a)
        if isinstance(b, E.IntImm) and b.value > 0:
            inner = _digits(a, extents)
            return [(inner, b.value)]
    return [(_digits(e, extents), 1)]


def _span(ds: list) -> int:
    return math.prod(d[2] for d in ds)


def _add(terms: list) -> list:
    terms = [(ds, s) for ds, s in terms if ds]
    terms.sort(key=lambda t: -t[1])
    out: list = []
    below = 1
    for ds, s in reversed(terms):
        if s != below:
            raise NotBijective("the terms of a sum do not fit together as digits (a * n + b "
                               "needs b to range over exactly 0 .. n - 1)")
        out = ds + out
        below = s * _span(ds)
    return out


def _div(ds: list, c: int) -> list:
    ds = list(ds)
    while c > 1 and ds:
        x, lo, n = ds[-1]
        if c % n == 0:
            ds.pop()
            c //= n
        elif n % c == 0:
            ds[-1] = (x, lo * c, n // c)
            c = 1
        else:
            raise NotBijective(f"{c} does not divide the range of {x.name} it cuts "
                               f"({n} values)")
    return [d for d in ds if d[2] > 1]


def _mod(ds: list, c: int) -> list:
    out: list = []
    ds = list(ds)
    while c > 1 and ds:
        x, lo, n = ds.pop()
        if c % n == 0:
            out.insert(0, (x, lo, n))
            c //= n
        elif n % c == 0:
            out.insert(0, (x, lo, c))
            c = 1
        else:
            raise NotBijective(f"{c} does not divide the range of {x.name} it cuts "
                               f"({n} values)")
    return [d for d in out if d[2] > 1]


def _show(e) -> str:
    from .layout import expr_text
    try:
        return expr_text(e)
    except IndexMapError:
        return type(e).__name__


def invert(params: list, exprs: list, extents: list) -> tuple[list[int], list]:
    """(new extents, the old indices as expressions of new variables ``new_vars`` given
    later): returns the new shape and a function building the inverse."""
    dom = dict(zip(params, extents))
    per_output = [_digits(e, dom) for e in exprs]
    pieces: dict = {p: [] for p in params}
    for k, ds in enumerate(per_output):
        for pos, (x, lo, n) in enumerate(ds):
            pieces[x].append((lo, n, k, pos))
    for p, n in zip(params, extents):
        cover = 1
        for lo, ext, _k, _pos in sorted(pieces[p]):
            if lo != cover:
                raise NotBijective(f"the map {'repeats' if lo < cover else 'skips'} part of "
                                   f"axis {p.name}")
            cover *= ext
        if cover != max(n, 1) and not (n <= 1 and not pieces[p]):
            raise NotBijective(f"the map covers {cover} of the {n} values of axis {p.name}")
    shape = [max(_span(ds), 1) for ds in per_output]

    def build(new_vars: list) -> list:
        olds = []
        for p in params:
            total: E.PrimExpr = E.const(0, p.dtype)
            for lo, ext, k, pos in pieces[p]:
                after = _span(per_output[k][pos + 1:])
                v: E.PrimExpr = new_vars[k]
                if after > 1:
                    v = E.FloorDiv(v, E.const(after, v.dtype))
                if pos > 0:
                    v = E.FloorMod(v, E.const(ext, v.dtype))
                total = total + v * E.const(lo, v.dtype) if lo != 1 else total + v
            olds.append(simplify(total, {v: (0, n - 1) for v, n in zip(new_vars, shape)}))
        return olds

    return shape, build
