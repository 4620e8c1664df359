"""The inverse of a bijective index map over a box (TVM's ``IndexMap.Inverse`` for the maps
its iterator analysis accepts: axes split with ``//`` ``%``, fused as ``a * n + b``,
permuted).

Each new index is read as a *mixed-radix number* whose digits are pieces of the old
indices: a digit ``(x, lower, extent)`` is ``(x // lower) % extent``. ``x // c`` and
``x % c`` cut digits off or split one; ``a * c + b`` puts ``a``'s digits above ``b``'s when
``b`` spans exactly ``c``. The map is bijective when the digits of every old index tile it
exactly (lowers 1, e0, e0*e1, ... up to its extent); the inverse then rebuilds each old
index from its digits, each digit read off the new index that holds it.

:func:`invert_padded` is the same for a one-to-one map whose new shape has *padding*
(``i -> (i // 4, i % 4)`` over 14 values onto (4, 4)): the old axes padded until the map
is a bijection onto the new shape, so a new index is padding exactly when an old index
rebuilt from it lies past its axis (transform_layout fills the padding there).

Extents may be *symbolic* (a size ``n`` of the function): ``x * 32 * n + y * n + w`` over
``(1, 32, n)`` is the number with digits ``y`` (extent 32) above ``w`` (extent ``n``), of
extent ``n * 32``, inverted as ``y = v // n``, ``w = v % n``. Digits are then matched by
the structural equality of their simplified sizes; a symbolic size is taken to be at least
2 (a size of 1 makes its digit constant: the inverse still holds), and cuts ``//``, ``%`` of
a number with a symbolic digit are not inverted.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.functor import collect_vars

from .index_map_check import IndexMapError, expr_text


class NotBijective(IndexMapError):
    """The map is not a bijection this analysis can invert."""


# sizes: a Python int, or an expression of the function's sizes (symbolic)
def _sym(v) -> bool:
    return not isinstance(v, int)


def _as_expr(v, dtype: str) -> E.PrimExpr:
    return E.const(v, dtype) if isinstance(v, int) else v


def _dtype_of(*vs) -> str:
    return next((v.dtype for v in vs if _sym(v)), "int32")


def _times(a, b):
    """``a * b`` of two sizes."""
    if not _sym(a) and not _sym(b):
        return a * b
    if a == 1 if not _sym(a) else False:
        return b
    if b == 1 if not _sym(b) else False:
        return a
    dt = _dtype_of(a, b)
    return simplify(E.binary(E.Mul, _as_expr(a, dt), _as_expr(b, dt)))


def _same(a, b) -> bool:
    """Are two sizes equal (the same number, or provably the same expression)?"""
    if not _sym(a) and not _sym(b):
        return a == b
    dt = _dtype_of(a, b)
    return E.is_const_int(simplify(E.binary(E.Sub, _as_expr(a, dt), _as_expr(b, dt))), 0)


def _is_one(v) -> bool:
    return not _sym(v) and v == 1


def _more_than_one(v) -> bool:
    """A digit's extent counts unless it is 1 (a symbolic one is taken to be larger)."""
    return _sym(v) or v > 1


def _digits(e: E.PrimExpr, extents: dict) -> list[tuple]:
    """``e`` as digits (var, lower, extent), most significant first (extent-1 digits
    dropped); NotBijective when it is not such a number."""
    if isinstance(e, E.Var):
        if e not in extents:
            raise NotBijective(f"{e.name} is a size, not an index")
        n = extents[e]
        return [(e, 1, n)] if _more_than_one(n) else []
    if isinstance(e, E.IntImm):
        if e.value != 0:
            raise NotBijective(f"the constant offset {e.value} moves the indices off 0")
        return []
    if isinstance(e, E.FloorDiv) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return _div(_digits(e.a, extents), e.b.value)
    if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return _mod(_digits(e.a, extents), e.b.value)
    if isinstance(e, E.Add) or (isinstance(e, E.Mul) and _scale_of(e, extents) is not None):
        return _add(_terms(e, extents))
    raise NotBijective(f"the index {_show(e)} is not a split, fuse or permutation of the axes")


def _terms(e: E.PrimExpr, extents: dict) -> list[tuple]:
    """A sum as (digits, scale) terms; constant factors multiply through nested products
    and sums (``rh * 7 * 3`` is the digits of ``rh`` at scale 21, ``(a * 4 + b) * 2`` two
    terms at scales 8 and 2)."""
    if isinstance(e, E.Add):
        return _terms(e.a, extents) + _terms(e.b, extents)
    scaled = _scale_of(e, extents) if isinstance(e, E.Mul) else None
    if scaled is not None:
        a, c = scaled
        return [(ds, _times(s, c)) for ds, s in _terms(a, extents)]
    return [(_digits(e, extents), 1)]


def _scale_of(e: E.Mul, extents: dict | None = None) -> tuple | None:
    """``(x, c)`` for ``x * c`` or ``c * x`` with a positive constant ``c`` — or, given the
    map's ``extents``, a size ``c`` using none of the map's indices (symbolic: ``y * n``) —,
    else None."""
    for a, b in ((e.a, e.b), (e.b, e.a)):
        if isinstance(b, E.IntImm) and b.value > 0:
            return a, b.value
    if extents is not None:
        for a, b in ((e.a, e.b), (e.b, e.a)):
            if not isinstance(b, E.IntImm) and collect_vars(b) and \
                    not any(v in extents for v in collect_vars(b)) and \
                    any(v in extents for v in collect_vars(a)):
                return a, b
    return None


def _span(ds: list):
    out = 1
    for d in ds:
        out = _times(out, d[2])
    return out


def _add(terms: list) -> list:
    """The digits of a sum: the terms chained from scale 1 up, each term's scale the span
    of the digits below it."""
    left = [(ds, s) for ds, s in terms if ds]
    out: list = []
    below = 1
    while left:
        k = next((k for k, (_ds, s) in enumerate(left) if _same(s, below)), None)
        if k is None:
            raise NotBijective("the terms of a sum do not fit together as digits (a * n + b "
                               "needs b to range over exactly 0 .. n - 1)")
        ds, s = left.pop(k)
        out = ds + out
        below = _times(s, _span(ds))
    return out


def _div(ds: list, c: int) -> list:
    if any(_sym(d[2]) for d in ds):
        raise NotBijective("a number with a symbolic digit is cut by //")
    if c >= _span(ds):      # the number is below c: x // c is 0
        return []
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
    if any(_sym(d[2]) for d in ds):
        raise NotBijective("a number with a symbolic digit is cut by %")
    if c >= _span(ds):      # the number is below c: x % c is x
        return list(ds)
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
        left = list(pieces[p])
        while left:
            k = next((k for k, piece in enumerate(left) if _same(piece[0], cover)), None)
            if k is None:
                if not any(_sym(x[0]) for x in left) and not _sym(cover):
                    lo = min(x[0] for x in left)
                    raise NotBijective(f"the map {'repeats' if lo < cover else 'skips'} "
                                       f"part of axis {p.name}")
                raise NotBijective(f"the map repeats or skips part of axis {p.name}")
            cover = _times(cover, left.pop(k)[1])
        if _sym(n) or _sym(cover):
            if not _same(cover, n):
                raise NotBijective(f"the map does not cover the {n} values of axis {p.name} "
                                   "exactly")
        elif cover != max(n, 1) and not (n <= 1 and not pieces[p]):
            raise NotBijective(f"the map covers {cover} of the {n} values of axis {p.name}")
    shape = [_span(ds) if ds else 1 for ds in per_output]

    def build(new_vars: list) -> list:
        ranges = {v: (0, n - 1) for v, n in zip(new_vars, shape) if not _sym(n)}
        olds = []
        for p in params:
            direct = [k for k, x in enumerate(exprs) if x is p]
            if direct:       # an axis kept as a new axis (extent 1 too): that axis itself
                olds.append(new_vars[direct[0]])
                continue
            total = None
            for lo, ext, k, pos in pieces[p]:
                after = _span(per_output[k][pos + 1:])
                v: E.PrimExpr = new_vars[k]
                if pos > 0:      # TVM's order: the digit's span kept, then cut below
                    v = E.FloorMod(v, _as_expr(_times(ext, after), v.dtype))
                if not _is_one(after):
                    v = E.FloorDiv(v, _as_expr(after, v.dtype))
                if not _is_one(lo):
                    v = v * _as_expr(lo, v.dtype)
                total = v if total is None else total + v
            olds.append(E.const(0, p.dtype) if total is None else simplify(total, ranges))
        return olds

    return shape, build


def _cut_by(p: E.Var, e, out: set) -> None:
    """The constants ``c`` of every ``x // c`` and ``x % c`` in ``e`` whose ``x`` uses
    ``p``."""
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) and \
            e.b.value > 1 and any(v is p for v in _vars(e.a)):
        out.add(e.b.value)
    for child in (getattr(e, "a", None), getattr(e, "b", None)):
        if isinstance(child, E.PrimExpr):
            _cut_by(p, child, out)


def _vars(e) -> list:
    if isinstance(e, E.Var):
        return [e]
    return [v for c in (getattr(e, "a", None), getattr(e, "b", None))
            if isinstance(c, E.PrimExpr) for v in _vars(c)]


_MAX_PADDINGS = 256


def invert_padded(params: list, exprs: list, extents: list, new_shape: list
                  ) -> tuple[list[int], Callable]:
    """The inverse of a map that is one-to-one but leaves *padding* in its new shape (TVM's
    ``NonSurjectiveInverse``), e.g. ``i -> (i // 4, i % 4)`` over 14 values onto (4, 4).

    Each old axis is padded up to a multiple of the constants that cut it (14 to 16 for
    ``// 4``, ``% 4``), so that the map is a bijection of the padded box onto exactly
    ``new_shape``: then a new index is padding exactly when some old index rebuilt from it
    is at or past the axis's real extent. Returns (the padded extents, ``build`` as
    :func:`invert`'s); NotBijective when no padding of the axes makes the map such a
    bijection (an offset ``i + 1``, holes ``2 * i``, a fused number cut unevenly)."""
    choices, by_lcm = [], []
    for p, n in zip(params, extents):
        cuts: set = set()
        for x in exprs:
            _cut_by(p, x, cuts)
        sizes = {n} | {-(-n // c) * c for c in cuts}
        both = math.lcm(*cuts) if cuts else 1
        by_lcm.append(-(-n // both) * both)
        sizes.add(by_lcm[-1])
        choices.append(sorted(sizes))
    # the usual answer first (every axis padded to the constants that cut it), then the
    # other combinations, a bounded number of them
    combos = itertools.chain([tuple(by_lcm)], itertools.product(*choices))
    for tried, padded in enumerate(combos):
        if tried >= _MAX_PADDINGS:
            break
        try:
            shape, build = invert(params, exprs, list(padded))
        except NotBijective:
            continue
        if list(shape) == list(new_shape):
            return list(padded), build
    raise NotBijective("no padding of the old axes makes the map a split, fuse or "
                       "permutation onto the new shape")


def _offsets(params: list, exprs: list) -> dict | None:
    """``{p: c}`` for each parameter that the map reads only as ``p + c`` (one positive
    constant ``c`` for all its uses: ``(i + 1) // 8``, ``(i + 1) % 8``); None when a
    parameter is read both with and without an offset, or with two offsets."""
    seen: dict = {}
    plain: set = set()

    def walk(e) -> None:
        if isinstance(e, E.Add):
            for a, b in ((e.a, e.b), (e.b, e.a)):
                if isinstance(a, E.Var) and isinstance(b, E.IntImm) and b.value > 0 and \
                        any(a is p for p in params):
                    seen.setdefault(a, set()).add(b.value)
                    return
        if isinstance(e, E.Var):
            plain.add(e)
            return
        for child in (getattr(e, "a", None), getattr(e, "b", None)):
            if isinstance(child, E.PrimExpr):
                walk(child)
    for x in exprs:
        walk(x)
    if any(len(cs) > 1 or p in plain for p, cs in seen.items()):
        return None
    return {p: next(iter(cs)) for p, cs in seen.items()}


class _Shift:
    """``p + c`` read as one variable ``p'`` (in ``[c, n + c)``)."""

    def __init__(self, offsets: dict):
        self.offsets = offsets
        self.fresh = {p: E.Var(p.name, p.dtype) for p in offsets}

    def expr(self, e):
        if isinstance(e, E.Add):
            for a, b in ((e.a, e.b), (e.b, e.a)):
                if isinstance(a, E.Var) and a in self.fresh and isinstance(b, E.IntImm):
                    return self.fresh[a]
        if isinstance(e, E.BinaryOp):
            return type(e)(self.expr(e.a), self.expr(e.b))
        return e


def invert_padded_with_offsets(params: list, exprs: list, extents: list, new_shape: list
                               ) -> tuple[Callable, list[bool], list[bool]]:
    """:func:`invert_padded` for maps that also shift an axis by a constant (``i -> ((i +
    1) // 8, (i + 1) % 8)``: the new shape has room below the first element too). Returns
    (``build(new_vars)``: the old indices rebuilt from new ones, which lie outside
    ``[0, n)`` exactly at the padding; per axis, whether the padding reaches below 0 and
    whether past ``n``)."""
    offsets = _offsets(params, exprs)
    if not offsets:
        padded, build = invert_padded(params, exprs, extents, new_shape)
        return build, [False] * len(params), [m > n for m, n in zip(padded, extents)]
    shift = _Shift(offsets)
    shifted = [shift.fresh.get(p, p) for p in params]
    ext = [n + offsets.get(p, 0) for p, n in zip(params, extents)]
    padded, build0 = invert_padded(shifted, [shift.expr(x) for x in exprs], ext, new_shape)

    def build(new_vars: list) -> list:
        return [simplify(o - offsets[p]) if p in offsets else o
                for p, o in zip(params, build0(new_vars))]
    return (build, [p in offsets for p in params],
            [m > n + offsets.get(p, 0) for p, m, n in zip(params, padded, extents)])
