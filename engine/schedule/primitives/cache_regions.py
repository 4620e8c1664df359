"""What a cache must hold: a block's accesses to one buffer, followed down to the loops.

cache_read and cache_write (:mod:`.cache`) send the accesses of some blocks to a cache that
holds one box of the buffer (:mod:`.cache_stage`). To know that the program still computes
the same thing they look at every load and store of the buffer inside a block, with the
nested blocks' bindings and ``T.where`` predicates composed on the way (:func:`access_sites`:
one :class:`Site` per access, its indices in the loops inside the block and the variables
bound outside it; a load in a branch of ``T.if_then_else`` under its condition), and at
the boxes those accesses touch:

* :func:`relaxed_box` — every element an access may touch over some loops, as a box
  ``(lo, hi)`` per dimension; a ``T.where`` conjunct that bounds one loop, or a whole
  index (``i * 8 + j < 120``), narrows it (TVM's region relaxation under the predicate);
* :func:`dense_box` — the box an unconditional store *certainly* writes, every element of
  it (the store's indices an affine map of the loops onto a box, TVM's surjective
  iterator maps: :func:`._common.affine_bindings`; else, for a few thousand iterations,
  counted: every point of the box stored); None when that cannot be shown;
* :func:`box_within` — is one box inside another, for every value of the outer
  variables (an analyzer that knows their ranges decides).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.arith import Analyzer, relax
from engine.ir import expr as E
from engine.ir.functor import children, collect_vars, substitute
from engine.ir.stmt import (Block, BlockRealize, BufferStore, Evaluate, For, IfThenElse, LetStmt,
                            SeqStmt)

from ..tree import flatten_seq
from ._common import affine_bindings, conjuncts, is_true


class Opaque(Exception):
    """A statement or expression the access analysis does not follow."""


@dataclass
class Site:
    """One load or store of the buffer inside a block.

    ``indices`` and ``conds`` (the conjuncts of the ``T.where`` predicates and ``if``
    conditions on the way) use the loops of ``loops`` (inside the block, outermost first)
    and variables bound outside the block; ``certain`` is False under an ``if``; ``top``
    is the position, in the block's body, of the statement holding the access; ``inits``
    the nested blocks with a ``T.init`` on the way (the block itself included), and
    ``in_init`` the block whose init holds the access (False: none). A ``T.match_buffer``
    view of a region of the buffer is a site of that whole region: ``last`` holds the
    last index per dimension (``indices`` the first); it is never ``certain``."""

    indices: tuple
    loops: list
    conds: list
    certain: bool
    top: int
    inits: tuple = ()
    in_init: Any = False
    last: tuple | None = None

    def ranges(self) -> list:
        """The first and last index per dimension."""
        return list(zip(self.indices, self.last if self.last is not None else self.indices))


def access_sites(blk: Block, buf: Any, vmap: dict, conds: list | None = None
                 ) -> tuple[list[Site], list[Site]]:
    """The loads and the stores of ``buf`` in ``blk`` (its init and body, nested blocks
    included), their indices rewritten by ``vmap`` (the block's own axes -> the values
    to read them as: its bindings, or nothing to keep them), under ``conds`` (the
    block's own ``T.where``, in the same variables). Raises :class:`Opaque` on a
    statement the analysis does not know."""
    loads: list[Site] = []
    stores: list[Site] = []
    conds = list(conds or [])
    inits = (blk,) if blk.init is not None else ()
    _views(blk, buf, vmap, ([], conds, False, 0, inits, False), loads, stores)
    if blk.init is not None:
        _walk(blk.init, buf, dict(vmap), [], conds, True, 0, inits, blk, loads, stores)
    for top, s in enumerate(flatten_seq(blk.body)):
        _walk(s, buf, dict(vmap), [], conds, True, top, inits, False, loads, stores)
    return loads, stores


def _expr_loads(e: Any, buf, vmap, site_args, loads: list) -> None:
    """The loads of ``buf`` in the expression ``e``; one in a branch of
    ``T.if_then_else(c, a, b)`` happens only where ``c`` holds (or fails)."""
    if e is None:
        return
    if isinstance(e, E.Let):
        raise Opaque("a let expression")
    if isinstance(e, E.BufferLoad):
        for i in e.indices:
            _expr_loads(i, buf, vmap, site_args, loads)
        if e.buffer is buf:
            loads.append(Site(tuple(substitute(i, vmap) for i in e.indices), *site_args))
        return
    if isinstance(e, E.Call) and e.op == "if_then_else" and len(e.args) == 3:
        cond, a, b = e.args
        _expr_loads(cond, buf, vmap, site_args, loads)
        loops, conds, _certain, *rest = site_args
        c = substitute(cond, vmap)
        _expr_loads(a, buf, vmap, (loops, conds + conjuncts(c), False, *rest), loads)
        _expr_loads(b, buf, vmap, (loops, conds + [E.Not(c)], False, *rest), loads)
        return
    for k in children(e):
        _expr_loads(k, buf, vmap, site_args, loads)


def _views(blk: Block, buf, vmap: dict, site_args: tuple, loads: list, stores: list) -> None:
    """The ``T.match_buffer`` views ``blk`` declares of a region of ``buf``: a load and a
    store of the whole region each (what goes through a view is not followed)."""
    for m in getattr(blk, "match_buffers", ()):
        if m.source.buffer is not buf:
            continue
        first = tuple(substitute(rg.min, vmap) for rg in m.source.region)
        last = tuple(substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1), vmap)
                     for rg in m.source.region)
        loads.append(Site(first, *site_args, last=last))
        stores.append(Site(first, *site_args, last=last))


def _walk(s, buf, vmap, loops, conds, certain, top, inits, in_init, loads, stores) -> None:
    def args():
        return (list(loops), list(conds), certain, top, inits, in_init)

    if s is None:
        return
    if isinstance(s, SeqStmt):
        for c in s.seq:
            _walk(c, buf, vmap, loops, conds, certain, top, inits, in_init, loads, stores)
    elif isinstance(s, For):
        _expr_loads(s.min, buf, vmap, args(), loads)
        _expr_loads(s.extent, buf, vmap, args(), loads)
        _walk(s.body, buf, vmap, loops + [s], conds, certain, top, inits, in_init, loads,
              stores)
    elif isinstance(s, BlockRealize):
        for v in s.iter_values:
            _expr_loads(v, buf, vmap, args(), loads)
        _expr_loads(s.predicate, buf, vmap, args(), loads)
        inner = dict(vmap)
        for iv, v in zip(s.block.iter_vars, s.iter_values):
            inner[iv.var] = substitute(v, vmap)
        pred = substitute(s.predicate, vmap)
        more = [c for c in conjuncts(pred) if not is_true(c)]
        blk = s.block
        sub_inits = inits + ((blk,) if blk.init is not None else ())
        _views(blk, buf, inner, (list(loops), conds + more, False, top, sub_inits, in_init),
               loads, stores)
        if blk.init is not None:
            _walk(blk.init, buf, inner, loops, conds + more, certain, top, sub_inits, blk,
                  loads, stores)
        _walk(blk.body, buf, inner, loops, conds + more, certain, top, sub_inits, in_init,
              loads, stores)
    elif isinstance(s, BufferStore):
        _expr_loads(s.value, buf, vmap, args(), loads)
        for i in s.indices:
            _expr_loads(i, buf, vmap, args(), loads)
        if s.buffer is buf:
            stores.append(Site(tuple(substitute(i, vmap) for i in s.indices), *args()))
    elif isinstance(s, IfThenElse):
        _expr_loads(s.condition, buf, vmap, args(), loads)
        cond = substitute(s.condition, vmap)
        _walk(s.then_case, buf, vmap, loops, conds + conjuncts(cond), False, top, inits,
              in_init, loads, stores)
        _walk(s.else_case, buf, vmap, loops, conds + [E.Not(cond)], False, top, inits,
              in_init, loads, stores)
    elif isinstance(s, Evaluate):
        _expr_loads(s.value, buf, vmap, args(), loads)
    elif isinstance(s, LetStmt):
        _expr_loads(s.value, buf, vmap, args(), loads)
        inner = dict(vmap)
        inner[s.var] = substitute(s.value, vmap)
        _walk(s.body, buf, inner, loops, conds, certain, top, inits, in_init, loads, stores)
    else:
        raise Opaque(type(s).__name__)


# ---------------------------------------------------------------------------
# boxes
# ---------------------------------------------------------------------------
def _loop_range(lp: For) -> tuple | None:
    lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
    if lo is None or ext is None:
        return None
    return lo, lo + ext - 1


def _cmp_bounds(an: Analyzer, c: E.PrimExpr):
    """A conjunct ``a < b`` (``<=``, ``>``, ``>=``, ``==``) as the linear form ``t`` of
    ``a - b`` and the inclusive range it is in; None for anything else."""
    facts = {E.LT: (None, -1), E.LE: (None, 0), E.GT: (1, None), E.GE: (0, None),
             E.EQ: (0, 0)}
    if type(c) not in facts or c.a.dtype == "bool" or not c.a.dtype.startswith(("int", "uint")):
        return None
    from engine.arith.simplify import _lin_add
    return _lin_add(an.linear(c.a), an.linear(c.b), -1), facts[type(c)]


def relaxed_box(ranges, conds, loops: list, an: Analyzer | None = None) -> list | None:
    """Per dimension ``(lo, hi)`` (inclusive, in the variables outside ``loops``) of the
    elements in ``ranges`` (per dimension the expressions of its first and last element)
    over every iteration of ``loops`` under ``conds``; a dimension that cannot be bounded
    is None; None when a loop has no constant range or the conditions leave none."""
    an = an or Analyzer()
    rr: dict = {}
    for lp in loops:
        r = _loop_range(lp)
        if r is None:       # a symbolic range: its first and last values as expressions
            r = (lp.min, an.simplify(lp.min + lp.extent - 1))
        rr[lp.loop_var] = r
    keys = {("v", id(v)): v for v, r in rr.items() if isinstance(r[0], int)
            and isinstance(r[1], int)}
    cuts = []                   # (terms, const, lo, hi): lo <= terms + const <= hi
    for c in conds:
        got = _cmp_bounds(an, c)
        if got is None:
            continue
        (terms, const), (lo, hi) = got
        relaxed = [k for k in terms if k in keys]
        if len(relaxed) == 1 and len(terms) == 1:         # k * v + const in [lo, hi]
            v = keys[relaxed[0]]
            k = terms[relaxed[0]][1]
            vlo, vhi = rr[v]
            blo = None if lo is None else lo - const
            bhi = None if hi is None else hi - const
            if k < 0:
                k, blo, bhi = -k, (None if bhi is None else -bhi), (None if blo is None
                                                                      else -blo)
            if blo is not None:
                vlo = max(vlo, -(-blo // k))
            if bhi is not None:
                vhi = min(vhi, bhi // k)
            rr[v] = (vlo, vhi)
        else:
            cuts.append((terms, const, lo, hi))
    if any(isinstance(lo, int) and isinstance(hi, int) and lo > hi for lo, hi in rr.values()):
        return None                                        # no iteration at all
    out: list = []
    for lo_x, hi_x in ranges:
        a, b = relax(lo_x, rr), relax(hi_x, rr)
        if a is None or b is None:
            out.append(None)
            continue
        out.append((_cut(an, a[0], lo_x, cuts, 0), _cut(an, b[1], hi_x, cuts, 1)))
    return out


def _cut(an: Analyzer, bound: E.PrimExpr, x: E.PrimExpr, cuts: list, side: int):
    """``bound`` (the least, side 0, or the greatest, side 1, value of ``x``) narrowed by
    the conditions that bound ``x`` itself up to a constant (``x + c <= hi``)."""
    b = E.as_const_int(bound)
    if b is None:
        return bound
    terms, const = an.linear(x)
    for ct, cc, clo, chi in cuts:           # x + (cc - const) in [clo, chi]
        if set(ct) != set(terms) or any(ct[k][1] != terms[k][1] for k in ct):
            continue
        if side == 1 and chi is not None:
            b = min(b, chi - (cc - const))
        if side == 0 and clo is not None:
            b = max(b, clo - (cc - const))
    return E.const(b, x.dtype)


def dense_box(site: Site, loops: list, init: bool = False) -> list | None:
    """Per dimension ``(lo, extent)`` of a box every element of which the store ``site``
    writes over the iterations of ``loops`` (the loops outside the block, then the site's
    own), ``lo`` in the variables outside them; None when that cannot be shown (an
    ``if``, a stride, a ``T.where`` that is not a bound of one index, ...). A store in a
    ``T.init`` counts only with ``init`` (it runs in the first reduction step only)."""
    if not site.certain or (site.in_init and not init) or site.last is not None:
        return None
    all_loops = list(loops) + list(site.loops)
    loop_ids = {id(lp.loop_var) for lp in all_loops}
    an = Analyzer()
    parts, rests = [], []
    for idx in site.indices:
        terms, const = an.linear(idx)
        inside: dict = {}
        outside: dict = {}
        for key, (atom, coef) in terms.items():
            uses = any(id(v) in loop_ids for v in collect_vars(atom))
            (inside if uses else outside)[key] = (atom, coef)
        parts.append(an.rebuild((inside, 0), idx.dtype))
        rests.append(an.rebuild((outside, const), idx.dtype))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for c in site.conds:
        if any(id(v) not in loop_ids for v in collect_vars(c)) and \
                any(id(v) in loop_ids for v in collect_vars(c)):
            return None                      # a bound that moves with outer variables
        if not any(id(v) in loop_ids for v in collect_vars(c)):
            return None                      # a condition on the outer variables alone
        pred = c if is_true(pred) else E.And(pred, c)
    got = affine_bindings(parts, all_loops, pred)
    if got.ok and all(r is not None for r in got.ranges):
        return [(an.simplify(rest + E.const(lo, rest.dtype)), E.const(ext, rest.dtype))
                for rest, (lo, ext) in zip(rests, got.ranges)]
    counted = _counted_box(parts, all_loops, site.conds)
    if counted is not None:
        return [(an.simplify(rest + E.const(lo, rest.dtype)), E.const(ext, rest.dtype))
                for rest, (lo, ext) in zip(rests, counted)]
    # loops of symbolic extent: each index one loop of its own, plainly (``C[vi, vj]``
    # under ``for i in range(m)``), and no predicate
    if not is_true(pred):
        return None
    loop_of = {id(lp.loop_var): lp for lp in all_loops}
    used: set = set()
    out = []
    for part, rest in zip(parts, rests):
        if E.is_const_int(part, 0):
            out.append((rest, E.const(1, rest.dtype)))
            continue
        lp = loop_of.get(id(part)) if isinstance(part, E.Var) else None
        if lp is None or id(part) in used:
            return None
        used.add(id(part))
        out.append((an.simplify(rest + lp.min), lp.extent))
    return out


def box_within(inner: list | None, outer: list | None, an: Analyzer) -> bool:
    """Every ``(lo, hi)`` of ``inner`` lies in the ``(lo, hi)`` of ``outer`` (inclusive
    bounds), for every value of the variables ``an`` knows the ranges of."""
    if inner is None or outer is None:
        return False
    for a, b in zip(inner, outer):
        if a is None or b is None:
            return False
        d1 = an.bound(an.simplify(a[0] - b[0]))
        d2 = an.bound(an.simplify(b[1] - a[1]))
        if d1 is None or d1[0] is None or d1[0] < 0 or d2 is None or d2[0] is None or \
                d2[0] < 0:
            return False
    return True


def union_box(boxes: list, an: Analyzer) -> list | None:
    """The smallest box holding every box of ``boxes`` (per dimension ``(lo, hi)``, None
    where the bounds cannot be ordered); None for no boxes."""
    if not boxes or any(b is None for b in boxes):
        return None
    out = []
    for d in range(len(boxes[0])):
        items = [b[d] for b in boxes]
        if any(x is None for x in items):
            out.append(None)
            continue
        lo, hi = items[0]
        for l2, h2 in items[1:]:
            dl = an.bound(an.simplify(l2 - lo))
            dh = an.bound(an.simplify(h2 - hi))
            if dl is None or dh is None:
                lo = hi = None
                break
            if dl[1] is not None and dl[1] <= 0:
                lo = l2
            elif not (dl[0] is not None and dl[0] >= 0):
                lo = hi = None
                break
            if dh[0] is not None and dh[0] >= 0:
                hi = h2
            elif not (dh[1] is not None and dh[1] <= 0):
                lo = hi = None
                break
        out.append(None if lo is None else (lo, hi))
    return out


#: at most this many iterations are enumerated to show that stores fill a box
COUNT_LIMIT = 1 << 15


def _counted_box(parts: list, loops: list, conds: list) -> list | None:
    """``(lo, extent)`` per dimension when the indices ``parts`` (of the loops alone) take,
    over the iterations of ``loops`` where ``conds`` hold, every point of a box, found by
    enumerating them all (constant ranges, at most :data:`COUNT_LIMIT` iterations); None
    otherwise."""
    shape = []
    for lp in loops:
        r = _loop_range(lp)
        if r is None or r[0] > r[1]:
            return None
        shape.append(r[1] - r[0] + 1)
    if int(np.prod(shape, dtype=np.int64)) > COUNT_LIMIT:
        return None
    env = {}
    for d, lp in enumerate(loops):
        view = [1] * len(loops)
        view[d] = shape[d]
        env[id(lp.loop_var)] = (np.arange(shape[d], dtype=np.int64)
                                + E.as_const_int(lp.min)).reshape(view)
    full = tuple(shape)
    mask = np.ones(full, dtype=bool)
    for c in conds:
        m = _eval(c, env)
        if m is None:
            return None
        mask &= np.broadcast_to(m, full).astype(bool)
    cols = []
    for p in parts:
        v = _eval(p, env)
        if v is None:
            return None
        cols.append(np.broadcast_to(v, full)[mask])
    if not cols or not len(cols[0]):
        return None
    pts = np.stack(cols, axis=1)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    if len(np.unique(pts, axis=0)) != int(np.prod(hi - lo + 1)):
        return None                               # a hole in the box
    return [(int(a), int(b - a + 1)) for a, b in zip(lo, hi)]


_NP_BIN = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b,
           E.Mul: lambda a, b: a * b, E.FloorDiv: lambda a, b: a // b,
           E.FloorMod: lambda a, b: a % b, E.Min: lambda a, b: np.minimum(a, b),
           E.Max: lambda a, b: np.maximum(a, b), E.LT: lambda a, b: a < b,
           E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
           E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b,
           E.And: lambda a, b: a & b, E.Or: lambda a, b: a | b}


def _eval(e: E.PrimExpr, env: dict):
    """``e`` over numpy arrays of the loops' values (``env``: loop variable id -> array);
    None for anything but integer arithmetic, comparisons and logic of the loops."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env.get(id(e))
    if isinstance(e, E.Not):
        a = _eval(e.a, env)
        return None if a is None else ~np.asarray(a, dtype=bool)
    fn = _NP_BIN.get(type(e))
    if fn is None:
        return None
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and not (E.as_const_int(e.b) or 0) > 0:
        return None
    a, b = _eval(e.a, env), _eval(e.b, env)
    if a is None or b is None:
        return None
    return fn(a, b)
