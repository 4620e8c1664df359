"""Which values each axis of a moved block takes at its new place (TVM's
``CalculateBlockVarDomain`` and ``MakeNewLoop``, for compute_at and reverse_compute_at).

The block *provides* regions of some buffers per instance (compute_at: what it writes;
reverse_compute_at: what it reads) and the blocks under the loop *require* regions of them
in one iteration (their reads, resp. writes, relaxed over their loops inside the loop).
Per buffer the axes are solved from the two:

* **affine** (:func:`_solve_affine`): every provided index is one point, ``c + s * G`` with
  ``G`` a group of mixed-radix digits of a fused sum of axes (``v``, ``9 - v``,
  ``(v1 * 8 + v4) // 16``, ``(v1 * 8 + v4) % 16``), and the indices together use every digit
  of every axis once (a bijection). Each group's interval gives the fused sum's interval,
  each axis its digit of it (``X // stride % extent`` relaxed over the sum's interval — an
  exact hull, also where the ends' digits would not be: TVM takes the axis' values at the
  two corners only);
* **dimension by dimension** otherwise (:func:`_solve_dim`), TVM's patterns of the
  provided index: ``v * e`` (a region ``v * 16 : v * 16 + 16``) gives ``v`` in
  ``[lo // e, hi // e]``, ``v`` in ``[lo, hi]``, ``x // f`` in ``[lo * f, hi * f + f - 1]`` for
  ``x`` (solved again when ``x`` is no axis), ``v % f`` nothing. An index of no pattern
  constrains nothing (TVM stops with an error there; every value of its axes stays).

An axis' values are the union of what each buffer and dimension asks (:class:`AxisDomain`
``dom``); what the buffer's shape and the axis' domain allow is its ``bound``. Where
``dom`` is not provably inside ``bound`` the new loop keeps the axis inside with a
``T.where`` (:func:`new_nest`), unless the intersection is constant (then the loop covers
just that).
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer, relax
from engine.arith.symbolic import SymbolicBounds
from engine.ir import expr as E
from engine.ir.functor import collect_vars, substitute
from engine.ir.stmt import Block, BlockRealize, For, ForKind

Interval = tuple  # (lo, hi): inclusive ends, expressions


class AxisDomain:
    """TVM's BlockVarDomainInfo: ``dom`` the values the axis must take (None: nothing
    asked yet), ``bound`` the values it may take (None: no limit beyond ``dom``)."""

    __slots__ = ("dom", "bound")

    def __init__(self, dom: Interval | None = None, bound: Interval | None = None):
        self.dom, self.bound = dom, bound

    def union(self, other: "AxisDomain", an: "Simplifier") -> None:
        self.dom = an.hull(self.dom, other.dom)
        self.bound = an.hull(self.bound, other.bound)

    def __repr__(self) -> str:
        return f"AxisDomain(dom={self.dom}, bound={self.bound})"


class Simplifier:
    """The analyzer of the new place: integer ranges of the loops around (a loop of one
    iteration is its value, as TVM's analyzer binds it), and symbolic ranges for proofs
    about loops of symbolic extent."""

    def __init__(self, loops: list[For]):
        self.an = Analyzer()
        self.unit: dict = {}
        self.sym: dict = {}
        self.positive: set = set()
        for lp in loops:
            self.add_loop(lp.loop_var, lp.min, lp.extent)

    def add_loop(self, var: E.Var, lo: E.PrimExpr, ext: E.PrimExpr) -> None:
        lo_c, ext_c = E.as_const_int(lo), E.as_const_int(ext)
        if lo_c is not None and ext_c is not None and ext_c > 0:
            self.an.bind(var, lo_c, lo_c + ext_c - 1)
            if ext_c == 1:
                self.unit[var] = E.const(lo_c, var.dtype)
        self.sym[var] = (lo, self.an.simplify(lo + ext - E.const(1, ext.dtype)))
        # a loop of extent k * n runs at all only when the size n is at least 1
        terms, const = self.an.linear(ext) if ext.dtype.startswith("int") else ({}, 0)
        if const == 0 and len(terms) == 1:
            (atom, coef), = terms.values()
            if isinstance(atom, E.Var) and coef > 0:
                self.positive.add(atom)

    def simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        if self.unit and any(v in self.unit for v in collect_vars(e)):
            e = substitute(e, self.unit)
        return self.an.simplify(e)

    def equal(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        return E.is_const_int(self.simplify(a - b), 0)

    def prove_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        d = self.an.bound(self.simplify(b - a))
        if d is not None and d[0] is not None and d[0] >= 0:
            return True
        return SymbolicBounds(self.sym, self.positive, self.an).prove_le(
            self.simplify(a), self.simplify(b))

    def hull(self, a: Interval | None, b: Interval | None) -> Interval | None:
        if a is None:
            return b
        if b is None:
            return a
        return (self.simplify(E.Min(*_same_dtype(a[0], b[0]))),
                self.simplify(E.Max(*_same_dtype(a[1], b[1]))))

    def meet(self, a: Interval, b: Interval) -> Interval:
        return (self.simplify(E.Max(*_same_dtype(a[0], b[0]))),
                self.simplify(E.Min(*_same_dtype(a[1], b[1]))))


def as_dtype(e: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """``e`` in ``dtype``: a constant retyped, anything else cast."""
    if e.dtype == dtype:
        return e
    if isinstance(e, E.IntImm):
        return E.const(e.value, dtype)
    return E.Cast(dtype, e)


def _same_dtype(a: E.PrimExpr, b: E.PrimExpr) -> tuple:
    """``a`` and ``b`` in one dtype (a constant takes the other's, else the wider)."""
    if a.dtype == b.dtype:
        return a, b
    if isinstance(a, E.IntImm):
        return as_dtype(a, b.dtype), b
    if isinstance(b, E.IntImm):
        return a, as_dtype(b, a.dtype)
    dt = a.dtype if a.dtype == "int64" else b.dtype
    return as_dtype(a, dt), as_dtype(b, dt)


def region_intervals(region) -> list[Interval]:
    """``(min, min + extent - 1)`` per dimension of a BufferRegion."""
    return [(rg.min, rg.min + rg.extent - E.const(1, rg.extent.dtype)) for rg in region.region]


def dim_max(buffer, d: int, an: Simplifier, dtype: str | None = None) -> E.PrimExpr:
    """The last index of dimension ``d`` (a size 0 has none: never accessed), in
    ``dtype`` (the index's) when given."""
    last = an.simplify(buffer.shape[d] - E.const(1, buffer.shape[d].dtype))
    return last if dtype is None else as_dtype(last, dtype)


# ---------------------------------------------------------------------------- solving
def solve(blk: Block, provided: dict, required: dict, an: Simplifier) -> list[AxisDomain]:
    """The domain of each axis of ``blk``: ``provided`` maps a buffer id to ``(buffer,
    [per-dimension intervals of each access])``, ``required`` a buffer id to the needed
    interval per dimension (None: the whole dimension). Reduction axes are solved as any
    other (the caller decides whether a reduction may be split)."""
    doms = {id(iv.var): AxisDomain() for iv in blk.iter_vars}
    for bid, (buf, accesses) in provided.items():
        req = required.get(bid)
        if req is None:
            continue
        prov = accesses[0]
        for acc in accesses[1:]:
            prov = [an.hull(a, b) for a, b in zip(prov, acc)]
        prov = [(an.simplify(lo), an.simplify(hi)) for lo, hi in prov]
        dts = [p[0].dtype for p in prov]
        req = [(as_dtype(r[0], dt), as_dtype(r[1], dt)) if r is not None else
               (E.const(0, dt), dim_max(buf, d, an, dt))
               for d, (r, dt) in enumerate(zip(req, dts))]
        found = _solve_affine(blk, buf, prov, req, an)
        if found is None:
            found = {}
            for d, (p, r) in enumerate(zip(prov, req)):
                if E.as_const_int(p[0]) is not None and an.equal(p[0], p[1]):
                    continue        # a constant index: nothing to solve
                for var, dom in _solve_dim(p, r, dim_max(buf, d, an, dts[d]), an):
                    if id(var) in doms:
                        found.setdefault(id(var), AxisDomain()).union(dom, an)
        for vid, dom in found.items():
            if vid in doms:
                doms[vid].union(dom, an)
    out = []
    for iv in blk.iter_vars:
        info, dt = doms[id(iv.var)], iv.var.dtype
        full = (as_dtype(iv.dom.min, dt),
                an.simplify(as_dtype(iv.dom.min + iv.dom.extent - E.const(1, iv.dom.extent.dtype), dt)))
        if info.dom is not None:
            info.dom = (as_dtype(info.dom[0], dt), as_dtype(info.dom[1], dt))
        info.bound = full if info.bound is None else an.meet(
            (as_dtype(info.bound[0], dt), as_dtype(info.bound[1], dt)), full)
        _tighten(info, an)
        out.append(info)
    return out


def _tighten(info: AxisDomain, an: Simplifier) -> None:
    """TVM's BlockVarDomainInfo::Simplify: drop the bound when ``dom`` lies inside it, take
    the bound when it lies inside ``dom``, or their intersection when that is constant."""
    if info.dom is None:
        info.dom, info.bound = (an.simplify(info.bound[0]), an.simplify(info.bound[1])), None
        return
    info.dom = (an.simplify(info.dom[0]), an.simplify(info.dom[1]))
    info.bound = (an.simplify(info.bound[0]), an.simplify(info.bound[1]))
    inter = an.meet(info.dom, info.bound)
    if an.prove_le(info.bound[0], info.dom[0]) and an.prove_le(info.dom[1], info.bound[1]):
        info.bound = None
    elif an.prove_le(info.dom[0], info.bound[0]) and an.prove_le(info.bound[1], info.dom[1]):
        info.dom, info.bound = info.bound, None
    elif E.as_const_int(inter[0]) is not None and E.as_const_int(inter[1]) is not None:
        info.dom, info.bound = inter, None


def _solve_dim(provided: Interval, required: Interval, last: E.PrimExpr,
               an: Simplifier) -> list:
    """TVM's SolveBlockVarDomain for one dimension: ``[(axis var, AxisDomain)]``."""
    p_lo, p_hi = provided
    r_lo, r_hi = required
    dt = r_lo.dtype
    one = E.const(1, dt)
    if isinstance(p_lo, E.Mul):
        for v, e in ((p_lo.a, p_lo.b), (p_lo.b, p_lo.a)):
            c = E.as_const_int(e)
            if isinstance(v, E.Var) and c is not None and c > 0:
                return [(v, AxisDomain(
                    (an.simplify(E.FloorDiv(r_lo, e)), an.simplify(E.FloorDiv(r_hi, e))),
                    (E.const(0, dt), an.simplify(E.FloorDiv(last, e)))))]
        return []
    if not an.equal(p_lo, p_hi):
        return []
    x, lo, hi, top = p_lo, r_lo, r_hi, last
    while True:
        if isinstance(x, E.Var):
            return [(x, AxisDomain((lo, hi), (E.const(0, dt), top)))]
        if isinstance(x, E.FloorDiv):
            f = E.as_const_int(x.b)
            if f is None or f < 1:
                return []
            fe = E.const(f, dt)
            x, lo, hi, top = (x.a, an.simplify(lo * fe), an.simplify(hi * fe + fe - one),
                              an.simplify(top * fe + fe - one))
            continue
        return []           # v % f: no constraint; any other index: none either


# ---------------------------------------------------------------------------- affine
def _source(e: E.PrimExpr, exts: dict):
    """``e`` as a fused sum of axes ``sum(stride * v)``, strides a mixed radix from 1:
    ``(key, [(var, stride, extent)], total extent)``, or None."""
    terms, const = Analyzer().linear(e)
    if const != 0 or not terms:
        return None
    parts = []
    for atom, coef in terms.values():
        if not isinstance(atom, E.Var) or id(atom) not in exts or coef <= 0:
            return None
        parts.append((coef, atom))
    parts.sort(key=lambda p: p[0])
    stride, out = 1, []
    for coef, v in parts:
        if coef != stride:
            return None
        out.append((v, stride, exts[id(v)]))
        stride *= exts[id(v)]
    return tuple((id(v), s) for v, s, _x in out), out, stride


def _digit(e: E.PrimExpr, exts: dict, sources: dict):
    """``e`` as ``X // lower % extent`` of a fused sum ``X``: ``(key, lower, extent)``."""
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        c = E.as_const_int(e.b)
        inner = _digit(e.a, exts, sources) if c is not None and c > 0 else None
        if inner is None:
            return None
        key, lower, ext = inner
        if ext % c:
            return None
        return (key, lower * c, ext // c) if isinstance(e, E.FloorDiv) else (key, lower, c)
    src = _source(e, exts)
    if src is None:
        return None
    sources[src[0]] = src
    return src[0], 1, src[2]


def _group(index: E.PrimExpr, exts: dict, sources: dict):
    """``index`` as ``c + s * (X // lower % extent)``: ``(c, s, key, lower, extent)``; ``()``
    for a constant index; None when it is neither."""
    terms, const = Analyzer().linear(index)
    if not terms:
        return ()
    signs = {coef > 0 for _a, coef in terms.values()}
    if len(signs) != 1:
        return None
    s = 1 if signs == {True} else -1
    if all(isinstance(a, E.Var) for a, _c in terms.values()):
        fused: E.PrimExpr | None = None
        for a, coef in terms.values():
            t = a if abs(coef) == 1 else a * E.const(abs(coef), a.dtype)
            fused = t if fused is None else fused + t
        d = _digit(fused, exts, sources)
        return None if d is None else (const, s, *d)
    digits = []
    for a, coef in terms.values():
        d = _digit(a, exts, sources)
        if d is None:
            return None
        digits.append((abs(coef), d))
    digits.sort(key=lambda x: x[0])
    key, lower, total = digits[0][1]
    if digits[0][0] != 1:
        return None
    unit = total
    for coef, (k, lw, ext) in digits[1:]:
        if k != key or coef != unit or lw != lower * total:
            return None
        total *= ext
        unit *= ext
    return const, s, key, lower, total


def _solve_affine(blk: Block, buf, provided: list, required: list, an: Simplifier):
    """The axes of ``blk`` from a bijective map of its axes onto the provided point, or
    None (see the module's docstring)."""
    if not all(an.equal(lo, hi) for lo, hi in provided):
        return None
    exts = {}
    for iv in blk.iter_vars:
        ext = E.as_const_int(iv.dom.extent)
        if E.is_const_int(iv.dom.min, 0) and ext is not None and ext > 0:
            exts[id(iv.var)] = ext
    sources: dict = {}
    groups = []
    for d, (lo, _hi) in enumerate(provided):
        g = _group(lo, exts, sources)
        if g is None:
            return None
        if g:
            groups.append((d, g))
    # every digit of every axis used once: per fused sum, the groups tile its radix
    owner: dict = {}
    per_source: dict = {}
    for d, (_c, _s, key, lower, ext) in groups:
        per_source.setdefault(key, []).append((lower, ext, d))
    for key, gs in per_source.items():
        for vid, _stride in key:
            if owner.setdefault(vid, key) != key:
                return None
        gs.sort()
        expected = 1
        for lower, ext, _d in gs:
            if lower != expected:
                return None
            expected = lower * ext
        if expected != sources[key][2]:
            return None
    if {v for v, ext in exts.items() if ext > 1} - set(owner):
        return None             # an axis of several values unused: not a bijection
    by_dim = dict(groups)
    found: dict = {}
    for want in (required, None):
        for key, gs in per_source.items():
            x_lo: E.PrimExpr | None = None
            x_hi: E.PrimExpr | None = None
            for lower, _ext, d in gs:
                c, s = by_dim[d][:2]
                if want is None:
                    r_lo = E.const(0, provided[d][0].dtype)
                    r_hi = dim_max(buf, d, an, r_lo.dtype)
                else:
                    r_lo, r_hi = want[d]
                dt = r_lo.dtype
                ce = E.const(c, dt)
                g_lo, g_hi = (r_lo - ce, r_hi - ce) if s > 0 else (ce - r_hi, ce - r_lo)
                lw = E.const(lower, dt)
                x_lo = g_lo * lw if x_lo is None else x_lo + g_lo * lw
                x_hi = g_hi * lw if x_hi is None else x_hi + g_hi * lw
            x_lo, x_hi = an.simplify(x_lo), an.simplify(x_hi)
            _key, parts, _total = sources[key]
            for n, (v, stride, ext) in enumerate(parts):
                xv = E.Var("fused", x_lo.dtype)
                e = E.FloorDiv(xv, E.const(stride, xv.dtype)) if stride > 1 else xv
                if n + 1 < len(parts):
                    e = E.FloorMod(e, E.const(ext, xv.dtype))
                r = relax(e, {xv: (x_lo, x_hi)})
                if r is None:
                    rng = (E.const(0, xv.dtype), E.const(ext - 1, xv.dtype))
                else:
                    rng = (an.simplify(r[0]), an.simplify(r[1]))
                info = found.setdefault(id(v), AxisDomain())
                if want is None:
                    info.bound = an.hull(info.bound, rng)
                else:
                    info.dom = an.hull(info.dom, rng)
    return found


# ---------------------------------------------------------------------------- the nest
class EmptyDomain(Exception):
    """An axis would take no value at all at the new place."""

    def __init__(self, iv):
        super().__init__(iv.var.name)
        self.iv = iv


def new_nest(blk: Block, domains: list[AxisDomain], an: Simplifier,
             preserve_unit_loops: bool, scope_vars: set):
    """TVM's MakeNewLoop: loops ``ax0, ax1, ...`` over each axis' domain (a loop of one
    iteration dropped unless ``preserve_unit_loops``), the binding ``lo + axN``, and a
    ``T.where`` for each bound the values are not proven to stay in. A domain whose
    extent is not a constant and depends on the loops around (``scope_vars``: ids) is
    widened to the axis' whole domain. Returns the nest (For or BlockRealize); raises
    :class:`EmptyDomain` for an axis whose domain is empty."""
    bindings, loops, preds = [], [], []
    for iv, info in zip(blk.iter_vars, domains):
        dt = iv.var.dtype
        lo, hi = info.dom
        ext = an.simplify(hi - lo + E.const(1, hi.dtype))
        if E.as_const_int(ext) is None and any(id(v) in scope_vars
                                                for v in collect_vars(ext)):
            lo, ext = iv.dom.min, iv.dom.extent
        if E.as_const_int(ext) is not None and E.as_const_int(ext) < 1:
            raise EmptyDomain(iv)
        if isinstance(ext, E.IntImm):
            ext = E.const(ext.value, dt)
        elif ext.dtype != dt:
            ext = E.Cast(dt, ext)
        if E.is_const_int(ext, 1) and not preserve_unit_loops:
            val = lo
        else:
            var = E.Var(f"ax{len(loops)}", dt)
            loops.append((var, ext))
            an.add_loop(var, E.const(0, dt), ext)
            val = var if E.is_const_int(lo, 0) else E.binary(E.Add, lo, var)
        bindings.append(val)
        if info.bound is not None:
            b_lo, b_hi = info.bound
            if not an.prove_le(b_lo, val):
                preds.append(_at_least(val, b_lo, an))
            if not an.prove_le(val, b_hi):
                preds.append(_below(val, an.simplify(b_hi + E.const(1, b_hi.dtype)), an))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for p in preds:
        pred = p if E.is_const_int(pred, 1) else E.And(pred, p)
    body: Any = BlockRealize(tuple(bindings), pred, blk)
    for var, ext_e in reversed(loops):
        body = For(var, E.const(0, var.dtype), ext_e, ForKind.SERIAL, body)
    return body


def _split_const(e: E.PrimExpr, an: Simplifier):
    """``e`` as (the part without its constant, the constant)."""
    terms, const = an.an.linear(an.simplify(e))
    return an.an.rebuild((terms, 0), e.dtype), const, bool(terms)


def _at_least(val: E.PrimExpr, lo: E.PrimExpr, an: Simplifier) -> E.PrimExpr:
    """``lo <= val`` in TVM's form: the constants on the left (``1 <= i * 8 + ax0``)."""
    lo_c = E.as_const_int(lo)
    part, const, ok = _split_const(val, an)
    if lo_c is None or not ok:
        return E.LE(lo, an.simplify(val))
    return E.LE(E.const(lo_c - const, part.dtype), part)


def _below(val: E.PrimExpr, hi: E.PrimExpr, an: Simplifier) -> E.PrimExpr:
    """``val < hi`` in TVM's form: the constants on the right (``i * 8 + ax0 < 225``)."""
    hi_c = E.as_const_int(hi)
    part, const, ok = _split_const(val, an)
    if hi_c is None or not ok:
        return E.LT(an.simplify(val), hi)
    return E.LT(part, E.const(hi_c - const, part.dtype))
