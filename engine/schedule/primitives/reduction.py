"""rfactor: factor a reduction over one loop into a partial-result block and a write-back.

``rfactor(loop, factor_axis)`` follows TVM: the rfactor block ``<name>_rf`` computes
partial results into a new buffer ``<buffer>_rf`` that has one extra dimension (indexed by
the rfactor loop, inserted at ``factor_axis``); the original block becomes the write-back
block, which combines the partial results over the rfactor loop. The partial results are
independent across the rfactor loop, so that loop of the rfactor block may then be
parallelized or vectorized — the point of the primitive.

What is accepted is what TVM accepts (its ``CheckReductionBlock``, the stage-pipeline
scope, the loop properties and the reducer match), checked so that an accepted rfactor
computes what the original program computes — under the init rule of TVM's lowering (a
block's ``T.init()`` runs when every reduction axis is at its domain's minimum):

* every reduction axis is bound one-to-one to the loops (:func:`_reduction_digits`): the
  bindings are splits, fusions and reorders of the loops (TVM's quasi-affine bindings),
  together a bijection from the reduction loops onto the reduction axes' domains, so
  every reduction instance runs once and the first one initialises;
* the block has no ``T.where`` predicate (TVM refuses it too: a partial result whose
  instances are all masked off would never be initialised);
* beyond TVM, when a spatial loop runs inside a reduction loop, different iterations of
  the spatial loops must write different elements (:func:`_check_interleaved_outputs`):
  otherwise two partial reductions of one element interleave, and the rfactor'd program
  would add them up differently.
"""
from __future__ import annotations

import math
from typing import Any

from engine.arith import is_quasi_affine, simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import collect_stmts, collect_vars, substitute, uses_var
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar,
                             LetStmt, seq)

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import expect_loop, fresh_name, is_int, is_true
from .buffers import buffer_names, compose, rewrite_stmts, writes_buf
from .index_map_inverse import NotBijective, _digits
from .reducers import ReductionMatch, match_reduction
from .region_inference import access_bounds


def _points(indices) -> tuple:
    """The one-element region at ``indices`` (each extent 1 of its index's dtype: an int64
    index with an int32 extent prints as ``C[i:i + 1]``)."""
    return tuple(Range(i, E.const(1, i.dtype)) for i in indices)


def _update(m: ReductionMatch, bufs: list, idx: tuple, xs: list, ys: list) -> Any:
    """The update of a new block: ``bufs[i][idx] = combine(xs, ys)[i]``; over several
    buffers, as TVM writes it: every combined value bound first (``v_<buffer>``), then
    stored, so that each is computed from the old values."""
    values = m.reducer.combine(xs, ys)
    if len(bufs) == 1:
        return BufferStore(bufs[0], values[0], idx)
    lets = [E.Var("v_" + b.name, v.dtype) for b, v in zip(bufs, values)]
    body: Any = seq(*[BufferStore(b, v, idx) for b, v in zip(bufs, lets)])
    for var, v in reversed(list(zip(lets, values))):
        body = LetStmt(var, v, body)
    return body


def _write_order(blk: Block, stores: list) -> list:
    """The reduced buffers in the order the block declares its writes (TVM's regions)."""
    mine = {id(st.buffer): st.buffer for st in stores}
    out = [w.buffer for w in blk.writes if id(w.buffer) in mine]
    out = list({id(b): b for b in out}.values())
    return out + [b for b in mine.values() if all(b is not o for o in out)]


def _check_order_kept(ctx: Ctx, blk: Block, m: ReductionMatch, loop: For, loops: list,
                      rd_vars: set, hl: list) -> None:
    """An argmax or argmin whose ties keep the pair met first gives the index of the first
    best element in the order of the reduction. Factored over ``loop``, the elements are
    met partial result by partial result: the order of the loops with ``loop`` outermost.
    That is the original order only when no reduction loop of more than one iteration runs
    outside ``loop``."""
    for lp in loops:
        if lp is loop:
            return
        if id(lp.loop_var) in rd_vars and not E.is_const_int(lp.extent, 1):
            bname, lname = blk.name_hint, loop.loop_var.name
            raise ctx.error(
                f"block {bname}", f"block {bname} is an {m.reducer.name}: when values tie, "
                "the result depends on the order the elements are met in, and factoring "
                f"over loop {lname}, inside the reduction loop {lp.loop_var.name}, would meet "
                f"them partial result by partial result — a tie could give another index",
                f"rfactor the outermost reduction loop ({lp.loop_var.name}), or break ties by "
                "the smaller index as topi.argmax does (T.Select(acc > v or (acc == v and "
                "acc_index < index), ...))", highlight=hl + [lp.loop_var.name])


# ---------------------------------------------------------------------------------------
# legality: TVM's reduction block, its stage-pipeline scope, and the engine's guarantee
# ---------------------------------------------------------------------------------------
def _const_ranges(loops) -> dict:
    """Loop variable -> (min, extent) for the loops with a constant range."""
    out = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            out[lp.loop_var] = (lo, ext)
    return out


def _from_zero(e: E.PrimExpr, ranges: dict) -> tuple:
    """``(digits, first)``: ``first`` is the value of ``e`` at the first iteration of the
    loops, ``digits`` is ``e - first`` with every loop counted from 0 (``k`` -> ``k + min``
    for a loop starting at ``min``) — what a one-to-one binding's digits are read from."""
    shift = {v: v + mn for v, (mn, _) in ranges.items() if mn != 0 and uses_var(e, v)}
    e = simplify(substitute(e, shift)) if shift else e
    first = simplify(substitute(e, {v: E.const(0, v.dtype) for v in ranges
                                    if uses_var(e, v)}))
    return simplify(e - first), first


class _Digits:
    """The digits of one-to-one bindings of the loops (TVM's iterator maps, for what split,
    fuse and reorder build). :meth:`read` gives an expression (counted from 0, see
    :func:`_from_zero`) as a mixed-radix number of digits ``(x, lower, extent)`` — the
    value ``x // lower % extent`` — where ``x`` is a loop or a *fused source*: a sum of
    whole loops (``f_0 * 8 + f_1`` when a fused loop was split) cut by ``//`` or ``%`` with
    a constant that does not fall between its loops (``(f_0 * 8 + f_1) // 6``), read as
    one number, as TVM's iterator maps do. :meth:`problem` checks that the digits read so
    far tile every loop and source exactly once."""

    def __init__(self, extents: dict):
        self.extents = dict(extents)  # loop (and source) var -> extent
        self.names = {v: f"loop {v.name}" for v in extents}
        self.sources: dict = {}       # key -> source var
        self.members: dict = {}       # source var -> its loops
        self.pieces: dict = {}        # var -> [(lower, extent)]

    def read(self, e: E.PrimExpr) -> list:
        """The digits of ``e``, most significant first; NotBijective when ``e`` is no such
        number (KeyError when it uses a variable that is not one of the loops)."""
        ds = _digits(self._fuse(e), self.extents)
        for x, lo, n in ds:
            self.pieces.setdefault(x, []).append((lo, n))
        return ds

    def _fuse(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            a = self._fuse(e.a)
            c = E.as_const_int(e.b)
            if c is not None and c > 0 and not isinstance(a, E.Var):
                a = self._source(a)
            return e if a is e.a else type(e)(a, e.b)
        if isinstance(e, (E.Add, E.Mul)):
            a, b = self._fuse(e.a), self._fuse(e.b)
            return e if a is e.a and b is e.b else type(e)(a, b)
        return e

    def _source(self, x: E.PrimExpr) -> E.PrimExpr:
        """``x`` as one source variable when it is a sum of whole loops, else ``x``."""
        try:
            ds = _digits(x, self.extents)
        except (NotBijective, KeyError):
            return x
        if len(ds) < 2 or any(lo != 1 or n != self.extents[v] for v, lo, n in ds) or \
                len({id(v) for v, _, _ in ds}) != len(ds):
            return x
        key = tuple((id(v), n) for v, _, n in ds)
        src = self.sources.get(key)
        if src is None:
            src = E.Var("fused", x.dtype)
            self.sources[key] = src
            self.extents[src] = math.prod(n for _, _, n in ds)
            self.members[src] = [v for v, _, _ in ds]
            self.names[src] = f"the loops {', '.join(v.name for v, _, _ in ds)} as one number"
        return src

    def problem(self, required=()) -> tuple | None:
        """None when the digits read tile every loop and source they use exactly once and
        every loop of ``required`` is used; else ``(loop names, what is wrong)``."""
        owner: dict = {}
        for src, loops in self.members.items():
            for v in loops:
                if v in owner or v in self.pieces:
                    return [v.name], f"use loop {v.name} twice"
                owner[v] = src
        for v, ds in self.pieces.items():
            ext, name = self.extents[v], self.names[v]
            hl = [x.name for x in self.members.get(v, [v])]
            cover = 1
            for lo, n in sorted(ds):
                if lo != cover:
                    return hl, f"use {name} {'twice' if lo < cover else 'only in part'}"
                cover *= n
            if cover != ext:
                return hl, f"use only {cover} of the {ext} iterations of {name}"
        for v in required:
            if v not in self.pieces and v not in owner:
                return [v.name], f"do not use loop {v.name}"
        return None


def _check_bindings(ctx: Ctx, blk: Block, bind: list, hl: list) -> None:
    """TVM's rule 2 of a reduction block: its bindings are quasi-affine expressions of the
    loops (sums of loops and of their ``//`` and ``%`` by constants). The exact rule for
    the reduction axes comes later (:func:`_reduction_digits`)."""
    bname = blk.name_hint
    for iv, v in bind:
        if not is_quasi_affine(v):
            kind = "spatial" if iv.iter_type is IterType.SPATIAL else "reduction"
            raise ctx.error(f"block {bname}", f"block {bname} binds its {kind} axis "
                            f"{iv.var.name} to {v}, which is not a quasi-affine expression "
                            "of the loops, so it is not a reduction block rfactor can factor "
                            "(TVM's rule)", "bind the axes to loops, or to splits and "
                            "fusions of loops", highlight=hl)


def _reduction_digits(ctx: Ctx, blk: Block, bind: list, loops: list, hl: list) -> None:
    """The reduction axes are bound one-to-one to the loops: read as mixed-radix numbers
    whose digits are pieces of the loops (:func:`.index_map_inverse._digits`), each binding
    starts at its domain's minimum and takes exactly its domain's extent of values, and the
    digits of every loop they use tile that loop once. Then the reduction loops run over
    every reduction instance exactly once, the first iteration at every minimum — where
    the init runs, in the original block and in both new ones."""
    bname = blk.name_hint
    subject = f"block {bname}"
    ranges = _const_ranges(loops)
    loop_ids = {id(lp.loop_var) for lp in loops}
    reader = _Digits({v: ext for v, (_, ext) in ranges.items()})
    for iv, v in bind:
        if iv.iter_type is not IterType.REDUCE:
            continue
        name = iv.var.name
        for x in collect_vars(v):
            if id(x) not in loop_ids:
                raise ctx.error(subject, f"block {bname} binds its reduction axis {name} to "
                                f"{v}, which uses {x.name}, not a loop around the block",
                                "bind the reduction axes to the block's own loops",
                                highlight=hl)
            if x not in ranges:
                raise ctx.error(subject, f"loop {x.name}, bound to the reduction axis {name} "
                                f"of block {bname}, has no constant range, so rfactor cannot "
                                "check that the axis runs over its domain once",
                                "use loops of constant extent", highlight=hl + [x.name])
        dmin, dext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        if dmin is None or dext is None:
            raise ctx.error(subject, f"the reduction axis {name} of block {bname} has no "
                            "constant domain", "", highlight=hl)
        digits_of, at_first = _from_zero(v, ranges)
        if E.as_const_int(at_first) != dmin:
            raise ctx.error(subject, f"block {bname} binds its reduction axis {name} to {v}, "
                            f"which starts at {at_first}, not at the domain's minimum {dmin}, "
                            "so the T.init() would not run first",
                            "bind the reduction axes to splits, fusions and reorders of the "
                            "loops", highlight=hl)
        try:
            ds = reader.read(digits_of)
        except NotBijective as err:
            raise ctx.error(subject, f"block {bname} binds its reduction axis {name} to {v}, "
                            "which is not a one-to-one map of the loops onto its domain (a "
                            f"split, fusion or reorder of them: {err})", "rfactor, as TVM, "
                            "needs a reduction block whose axes are bound one-to-one to its "
                            "loops", highlight=hl) from None
        span = math.prod(n for _, _, n in ds)
        if span != dext:
            raise ctx.error(subject, f"block {bname} binds its reduction axis {name} to {v}, "
                            f"which takes {span} values, but the axis' domain has {dext}",
                            "bind each reduction axis to loops that run over exactly its "
                            "domain", highlight=hl)
    # every loop a reduction binding names must count (``(k_0 * 2 + k_1) // 2`` drops k_1)
    used = [x for iv, v in bind if iv.iter_type is IterType.REDUCE for x in collect_vars(v)
            if ranges[x][1] > 1]
    bad = reader.problem(used)
    if bad is not None:
        raise ctx.error(subject, f"the reduction axes of block {bname} {bad[1]}, so they are "
                        "not a one-to-one map of the loops onto their domains",
                        "rfactor needs the reduction axes bound to splits, fusions and "
                        "reorders of the loops", highlight=hl + bad[0])


def _check_dominant_and_output(ctx: Ctx, blk: Block, scope_blk: Block, hl: list) -> None:
    """TVM's rules 4 and 5 of a reduction block: it is the only writer of its output in
    its scope, and no reduction axis indexes the output."""
    bname = blk.name_hint
    subject = f"block {bname}"
    kids = ctx.index.child_blocks(scope_blk)
    for w in blk.writes:
        others = [b.name_hint for b in kids if b is not blk and writes_buf(b, w.buffer)]
        if others:
            raise ctx.error(subject, f"block {bname} is not the only block writing "
                            f"{w.buffer.name} (block {others[0]} writes it too), and a "
                            "reduction block must be its output's only writer",
                            "", highlight=hl + others[:1])
    red = {id(iv.var) for iv in blk.iter_vars if iv.iter_type is IterType.REDUCE}
    for st in collect_stmts((blk.body, blk.init), BufferStore):
        if any(id(x) in red for i in st.indices for x in collect_vars(i)):
            raise ctx.error(subject, f"the output index of block {bname} depends on a "
                            "reduction axis, so it is not a reduction", "", highlight=hl)
    for w in blk.writes:
        if any(id(x) in red for x in collect_vars(w.region)):
            raise ctx.error(subject, f"block {bname} declares a write of {w.buffer.name} "
                            "that depends on a reduction axis, so it is not a reduction", "",
                            highlight=hl)


def _box(ctx: Ctx, b: Block, region: BufferRegion):
    """Constant (lo, hi) per dimension of an access of block ``b`` over all its loops in
    the scope, cut to the buffer's shape; None where it is not a constant."""
    r = ctx.index.realize[id(b)]
    bounds = access_bounds(ctx, b, region, ctx.index.loops_above(r))
    if bounds is None:
        return None
    out = []
    for d, bd in enumerate(bounds):
        n = E.as_const_int(region.buffer.shape[d]) if d < len(region.buffer.shape) else None
        lo = hi = None
        if bd is not None:
            lo, hi = E.as_const_int(bd[0]), E.as_const_int(bd[1])
        if n is not None:
            lo = 0 if lo is None else max(lo, 0)
            hi = n - 1 if hi is None else min(hi, n - 1)
        out.append((lo, hi))
    return out


def _check_stage_pipeline(ctx: Ctx, blk: Block, scope_blk: Block, hl: list) -> None:
    """TVM's stage pipeline of the block's scope: no block writes a buffer that an earlier
    block of the scope reads, and what every block reads of a buffer the earlier blocks
    produce lies inside what they write (compared as bounding boxes)."""
    bname = blk.name_hint
    subject = f"block {bname}"
    kids = ctx.index.child_blocks(scope_blk)
    hint = "rfactor needs a scope where every buffer is written before it is read"
    for j, y in enumerate(kids):
        for w in y.writes:
            early = [x for x in kids[:j] if x is not y and
                     any(r.buffer is w.buffer for r in x.reads)]
            if early:
                raise ctx.error(subject, f"the scope of block {bname} is not a stage "
                                f"pipeline: block {early[0].name_hint} reads {w.buffer.name} "
                                f"before block {y.name_hint} writes it", hint,
                                highlight=hl + [early[0].name_hint, y.name_hint])
        for r in y.reads:
            prods = [x for x in kids[:j] if x is not y and writes_buf(x, r.buffer)]
            if not prods:
                continue
            need = _box(ctx, y, r)
            have = None
            for x in prods:
                for w in x.writes:
                    if w.buffer is not r.buffer:
                        continue
                    box = _box(ctx, x, w)
                    if box is None:
                        have = None
                        break
                    have = box if have is None else [
                        (None if a[0] is None or b[0] is None else min(a[0], b[0]),
                         None if a[1] is None or b[1] is None else max(a[1], b[1]))
                        for a, b in zip(have, box)]
                else:
                    continue
                break
            if need is None or have is None:
                continue
            for d, ((nlo, nhi), (hlo, hhi)) in enumerate(zip(need, have)):
                if None in (nlo, nhi, hlo, hhi) or nlo > nhi:
                    continue
                if nlo < hlo or nhi > hhi:
                    raise ctx.error(subject, f"the scope of block {bname} is not a stage "
                                    f"pipeline: block {y.name_hint} reads {r.buffer.name} "
                                    f"[{nlo}, {nhi}] in dimension {d}, but the blocks before "
                                    f"it write only [{hlo}, {hhi}] there", hint,
                                    highlight=hl + [y.name_hint])


def _check_interleaved_outputs(ctx: Ctx, blk: Block, bind: list, loops: list, store,
                               rd_vars: set, sp_vars: set, hl: list) -> None:
    """Beyond TVM: when a spatial loop runs inside a reduction loop, the reductions of
    different spatial iterations interleave; they must then write different elements
    (different iterations of the spatial loops give different output indices), else the
    write-back would add the partial results of one element in another order and count."""
    first = next(i for i, lp in enumerate(loops) if id(lp.loop_var) in rd_vars)
    inner = [lp for lp in loops[first + 1:] if id(lp.loop_var) in sp_vars
             and not E.is_const_int(lp.extent, 1)]
    if not inner:
        return
    bname = blk.name_hint
    subject = f"block {bname}"
    sp_loops = [lp for lp in loops if id(lp.loop_var) in sp_vars]
    ranges = _const_ranges(sp_loops)
    reader = _Digits({v: ext for v, (_, ext) in ranges.items()})
    smap = {iv.var: v for iv, v in bind if iv.iter_type is IterType.SPATIAL}
    names = hl + [lp.loop_var.name for lp in inner]
    why = (f"loop {inner[0].loop_var.name}, bound to a spatial axis, runs inside the "
           "reduction loops, and rfactor then needs every iteration of the spatial loops to "
           f"write its own element of {store.buffer.name}")
    for i in store.indices:
        e = simplify(substitute(i, smap))
        try:
            reader.read(_from_zero(e, ranges)[0])
        except (NotBijective, KeyError):
            raise ctx.error(subject, f"{why}, which cannot be shown for the index {e}",
                            "move the spatial loops outside the reduction loops (reorder) "
                            "first", highlight=names) from None
    bad = reader.problem([lp.loop_var for lp in sp_loops
                          if ranges.get(lp.loop_var, (0, 0))[1] > 1])
    if bad is not None:
        raise ctx.error(subject, f"{why}, but its output indices {bad[1]}",
                        "move the spatial loops outside the reduction loops (reorder) first",
                        highlight=names + bad[0])


@register
class RFactor(Primitive):
    kind = "RFactor"
    attr_kinds = (("factor_axis", "int"),)
    method = "rfactor"
    returns = "one"
    death_verb = "merged into the rfactor block"

    def call(self, sch, loop, factor_axis: int):
        """Factorize a reduction over ``loop``: a new rfactor block (``<name>_rf``) computes
        partial results into a new buffer (``<buffer>_rf``, with an extra dimension of the
        loop's extent at position ``factor_axis``), and the original block becomes the
        write-back block that combines them. Returns the rfactor block; the original
        block's handle now refers to the write-back block.

        It requires (TVM's rules): 1) the loop contains exactly one block, a reduction
        block with a ``T.init()`` (rfactor before decompose_reduction) and no ``T.where``
        predicate; 2) its bindings are quasi-affine, and its reduction axes are bound
        one-to-one to the loops (splits, fusions and reorders of them, starting at the
        domains' minimum); 3) it is the only block writing its output, which no reduction
        axis indexes; 4) its scope is a stage pipeline (no block writes a buffer an
        earlier block reads; what a block reads of an earlier block's output was written);
        5) the loop is serial and bound only to reduction axes of the block (or, of one
        iteration, to no axis: one partial result); no loop is
        bound to both spatial and reduction axes, none of more than one iteration inside
        the reduction loops is bound to no axis, the first reduction loop holds only this
        block, which is the first block under its outermost loop; 6) the update (a store,
        or TVM's ``v = ...; buf[idx] = v``) is a sum, max or min of the buffer's old value
        (at the indices it stores to, as the init) with a new term, and the init is that
        reducer's identity (0 for a sum); 7) ``factor_axis`` is in ``[-(ndim + 1), ndim]``
        for the written buffer's ``ndim``. Beyond TVM, 8) when a spatial loop runs inside
        the reduction loops, the iterations of the spatial loops write different elements.

        Before::

            for i, k_0, k_1 in T.grid(128, 32, 4):
                with T.block("B"):
                    vi = T.axis.spatial(128, i)
                    vk = T.axis.reduce(128, k_0 * 4 + k_1)
                    T.reads(A[vi, vk])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]

        Call::

            i, k_0, k_1 = sch.get_loops(sch.get_block("B"))
            B_rf = sch.rfactor(k_1, factor_axis=1)

        After::

            B_rf = T.alloc_buffer((128, 4))
            for i, k_0, k_1 in T.grid(128, 32, 4):
                with T.block("B_rf"):
                    vk_1, vi, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])
                    T.reads(A[vi, vk_0 * 4 + vk_1])
                    T.writes(B_rf[vi, vk_1])
                    with T.init():
                        B_rf[vi, vk_1] = T.float32(0)
                    B_rf[vi, vk_1] = B_rf[vi, vk_1] + A[vi, vk_0 * 4 + vk_1]
            for i, k_1 in T.grid(128, 4):
                with T.block("B"):
                    vk_1, vi = T.axis.remap("RS", [k_1, i])
                    T.reads(B_rf[vi, vk_1])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + B_rf[vi, vk_1]
        """
        return sch._run(self, [loop], [factor_axis])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        idx = ctx.index
        lname = loop.loop_var.name
        factor_axis = attrs[0] if attrs else None
        blocks = idx.blocks_under(loop)
        if len(blocks) != 1:
            what = "no block" if not blocks else \
                f"{len(blocks)} blocks ({', '.join(b.name_hint for b in blocks)})"
            raise ctx.error(f"loop {lname}", f"loop {lname} contains {what}; rfactor needs a "
                            "loop around exactly one reduction block",
                            "move the other blocks out of the loop first",
                            highlight=[lname] + [b.name_hint for b in blocks])
        blk = blocks[0]
        bname = blk.name_hint
        hl = [lname, bname]
        realize = idx.realize[id(blk)]
        if blk.init is None or not any(iv.iter_type is IterType.REDUCE for iv in blk.iter_vars):
            raise ctx.error(f"loop {lname}", f"block {bname} is not a reduction block with a "
                            "T.init()", "apply rfactor before decompose_reduction",
                            highlight=hl)
        if not is_true(realize.predicate):
            raise ctx.error(f"block {bname}", f"block {bname} has a non-trivial predicate "
                            f"(T.where({realize.predicate})), and rfactor needs a block "
                            "without one, as TVM: a partial result whose iterations are all "
                            "masked off would never be initialised",
                            "rfactor before the split that made the T.where, or split by "
                            "a factor that divides the loop's extent", highlight=hl)
        loops = idx.loops_above(realize)
        bind = list(zip(blk.iter_vars, realize.iter_values))
        scope_blk = idx.scope_block(realize)
        _check_bindings(ctx, blk, bind, hl)
        _check_dominant_and_output(ctx, blk, scope_blk, hl)
        _check_stage_pipeline(ctx, blk, scope_blk, hl)
        if loop.kind is not ForKind.SERIAL:
            raise ctx.error(f"loop {lname}", f"loop {lname} is {loop.kind.value}, and rfactor "
                            "needs a serial loop", "apply rfactor before parallel/vectorize/"
                            "unroll, then annotate the loops of the rfactor block",
                            highlight=hl)
        sp_vars, rd_vars = set(), set()
        for iv, v in bind:
            target = sp_vars if iv.iter_type is IterType.SPATIAL else rd_vars
            target.update(id(x) for x in collect_vars(v))
        lv = id(loop.loop_var)
        if lv in sp_vars:
            raise ctx.error(f"loop {lname}", f"loop {lname} is bound to a spatial axis of block "
                            f"{bname}; rfactor factors a reduction loop",
                            "choose a loop over a reduction axis (e.g. k)", highlight=hl)
        if lv not in rd_vars and not E.is_const_int(loop.extent, 1):
            # a loop of one iteration bound to no axis is factored as TVM does (one partial
            # result); of more, each partial result would be the whole reduction again
            raise ctx.error(f"loop {lname}", f"loop {lname} is not bound to any reduction axis "
                            f"of block {bname}, and it has more than one iteration: every "
                            "partial result would be the whole reduction, combined again",
                            "choose a loop over a reduction axis", highlight=hl)
        met_reduction = False
        for lp in loops:
            v = id(lp.loop_var)
            if v in sp_vars and v in rd_vars:
                raise ctx.error(f"loop {lname}", f"loop {lp.loop_var.name} is bound to both "
                                f"spatial and reduction axes of block {bname}",
                                "split or reorder before fusing such loops",
                                highlight=hl + [lp.loop_var.name])
            if v in rd_vars:
                met_reduction = True
            elif v not in sp_vars and met_reduction and not E.is_const_int(lp.extent, 1):
                raise ctx.error(f"loop {lname}", f"loop {lp.loop_var.name}, inside a reduction "
                                f"loop, is not bound to any axis of block {bname}, so the block "
                                "would run its update more than once per reduction step",
                                "", highlight=hl + [lp.loop_var.name])
        first_red = next(lp for lp in loops if id(lp.loop_var) in rd_vars)
        if len(idx.blocks_under(first_red)) != 1:
            others = [b.name_hint for b in idx.blocks_under(first_red) if b is not blk]
            raise ctx.error(f"loop {lname}", f"the reduction loop {first_red.loop_var.name} "
                            f"also contains block {others[0]}",
                            "move that block out of the reduction loops first",
                            highlight=hl + [first_red.loop_var.name, others[0]])
        outer = loops[0]
        firsts = idx.child_blocks(outer)
        if firsts and firsts[0] is not blk:
            raise ctx.error(f"loop {lname}", f"block {bname} is not the first block under its "
                            f"outermost loop {outer.loop_var.name}",
                            "move the blocks before it out of that loop first", highlight=hl)
        _reduction_digits(ctx, blk, bind, loops, hl)
        m = match_reduction(blk)
        if isinstance(m, str):
            raise ctx.error(f"block {bname}", f"block {bname} is not a reduction rfactor can "
                            f"factor: {m}", "only sums, maxima and minima, and TVM's "
                            "argmax, argmin and pair-of-sums reductions over two buffers, "
                            "each starting from its identity, can be factored", highlight=hl)
        stores = m.stores
        store = stores[0]
        buf = store.buffer
        nd = buf.ndim
        if not is_int(factor_axis) or not -(nd + 1) <= factor_axis <= nd:
            raise ctx.error(f"loop {lname}", f"factor_axis={factor_axis!r} is out of range for "
                            f"{buf.name}, which has {nd} dimension(s)",
                            f"use an integer from {-(nd + 1)} to {nd}", highlight=hl)
        fa = factor_axis + nd + 1 if factor_axis < 0 else factor_axis
        if m.reducer.order_sensitive:
            _check_order_kept(ctx, blk, m, loop, loops, rd_vars, hl)
        _check_interleaved_outputs(ctx, blk, bind, loops, store, rd_vars, sp_vars, hl)
        loop_var_ids = {id(lp.loop_var) for lp in loops}
        used = [x for x in collect_vars((blk.body, blk.init, blk.reads, blk.writes))
                if id(x) in loop_var_ids]
        if used:
            raise ctx.error(f"block {bname}", f"block {bname} uses loop {used[0].name} "
                            "directly instead of through its axes; rfactor copies the loops "
                            "and rebinds the axes", "bind a block axis to the loop and use the "
                            "axis", highlight=hl + [used[0].name])

        # --- the rfactor buffers (one per reduced buffer, in the reducer's order)
        taken = buffer_names(ctx.func)
        rf_bufs = []
        for st in stores:
            b = st.buffer
            rf_bufs.append(Buffer(fresh_name(f"{b.name}_rf", taken),
                                  b.shape[:fa] + (loop.extent,) + b.shape[fa:], b.dtype,
                                  b.scope, (), 0, b.align))
            taken = taken | {rf_bufs[-1].name}
        rf_of = {id(st.buffer): rb for st, rb in zip(stores, rf_bufs)}

        # --- the rfactor block (iterators as TVM builds them)
        rf_var = E.Var("v" + lname, loop.loop_var.dtype)
        rf_ivs = [IterVar(rf_var, Range(loop.min, loop.extent), IterType.SPATIAL)]
        rf_vals: list = [loop.loop_var]
        loop_to_iter = {loop.loop_var: rf_var}
        loop_by_var = {lp.loop_var: lp for lp in loops}
        var_map = {}
        for iv, v in bind:
            if iv.iter_type is IterType.SPATIAL or not uses_var(v, loop.loop_var):
                rf_ivs.append(iv)
                rf_vals.append(v)
                continue
            for x in collect_vars(v):
                lp = loop_by_var.get(x)
                if lp is None or x in loop_to_iter:
                    continue
                nv = E.Var("v" + x.name, x.dtype)
                loop_to_iter[x] = nv
                rf_ivs.append(IterVar(nv, Range(lp.min, lp.extent), IterType.REDUCE))
                rf_vals.append(x)
            var_map[iv.var] = simplify(substitute(v, loop_to_iter))
        # the extra dimension counts the rfactor loop's iterations from 0
        rf_pos = rf_var if E.is_const_int(loop.min, 0) else simplify(rf_var - loop.min)
        rf_idx = tuple(store.indices[:fa]) + (rf_pos,) + tuple(store.indices[fa:])
        rf_idx = tuple(substitute(i, var_map) for i in rf_idx)
        rf_rhs = [substitute(r, var_map) for r in m.rhs]
        if any(iv.iter_type is IterType.REDUCE for iv in rf_ivs):
            rf_loads = [E.BufferLoad(rb, rf_idx) for rb in rf_bufs]
            rf_body = _update(m, rf_bufs, rf_idx, rf_loads, rf_rhs)
            rf_init = seq(*[BufferStore(rb, v, rf_idx) for rb, v in zip(rf_bufs, m.inits)])
        else:  # nothing left to reduce: each partial result is a single term (as TVM)
            rf_body = seq(*[BufferStore(rb, r, rf_idx) for rb, r in zip(rf_bufs, rf_rhs)])
            rf_init = None
        point = _points(rf_idx)
        rf_reads = tuple(BufferRegion(r.buffer, tuple(substitute(rg, var_map) for rg in r.region))
                         for r in blk.reads if id(r.buffer) not in rf_of)
        rf_writes = tuple(BufferRegion(rf_of[id(b)], point) for b in _write_order(blk, stores))
        rf_name = fresh_name(bname + "_rf", set(idx.blocks))
        rf_block = Block(tuple(rf_ivs), rf_reads, rf_writes, rf_name,
                         rf_body, rf_init, (), blk.annotations)
        # copies of all the loops, with new variables of the same names
        new_loop_vars = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype)
                         for lp in loops}
        rf_realize = BlockRealize(tuple(substitute(v, new_loop_vars) for v in rf_vals),
                                  E.IntImm("bool", 1), rf_block)
        rf_nest: Any = rf_realize
        for lp in reversed(loops):
            rf_nest = lp.replace(loop_var=new_loop_vars[lp.loop_var], body=rf_nest)

        # --- the write-back block (keeps the name and the spatial loops)
        wb_rd = E.Var("v" + lname, loop.loop_var.dtype)
        wb_ivs = [IterVar(wb_rd, Range(loop.min, loop.extent), IterType.REDUCE)]
        wb_vals: list = [loop.loop_var]
        wb_map = {rf_var: wb_rd}
        for iv, v in bind:
            if iv.iter_type is IterType.SPATIAL:
                nv = E.Var(iv.var.name, iv.var.dtype)
                wb_map[iv.var] = nv
                wb_ivs.append(IterVar(nv, iv.dom, IterType.SPATIAL))
                wb_vals.append(v)
        wb_out_idx = tuple(substitute(i, wb_map) for i in store.indices)
        wb_rf_idx = tuple(substitute(i, wb_map) for i in rf_idx)
        outs = [st.buffer for st in stores]
        wb_body = _update(m, outs, wb_out_idx, [E.BufferLoad(b, wb_out_idx) for b in outs],
                          [E.BufferLoad(rb, wb_rf_idx) for rb in rf_bufs])
        wb_init = seq(*[BufferStore(b, v, wb_out_idx) for b, v in zip(outs, m.inits)])
        wb_block = Block(tuple(wb_ivs),
                         tuple(BufferRegion(rf_of[id(b)], _points(wb_rf_idx))
                               for b in _write_order(blk, stores)),
                         tuple(BufferRegion(b, _points(wb_out_idx))
                               for b in _write_order(blk, stores)), bname,
                         wb_body, wb_init, (), blk.annotations)
        wb_realize = BlockRealize(tuple(wb_vals), E.IntImm("bool", 1), wb_block)

        # --- rebuild: drop the reduction loops (except the rfactor loop) around the block
        def rebuild(s):
            if isinstance(s, BlockRealize):
                return wb_realize if s is realize else s
            if isinstance(s, For) and any(s is lp for lp in loops):
                body = seq(*[rebuild(c) for c in flatten_seq(s.body)])
                if s is loop or id(s.loop_var) not in rd_vars:
                    return s.replace(body=body)
                return body
            return s

        new_outer = rebuild(outer)
        edits: dict = {}
        compose(edits, id(outer), lambda s: seq(rf_nest, new_outer))
        compose(edits, id(scope_blk),
                lambda b: b.replace(alloc_buffers=b.alloc_buffers + tuple(rf_bufs)))
        return Result(rewrite_stmts(ctx.func, edits), [rf_block])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), f"factor_axis={self.attr(attrs, 0)}"]
        return [f"loop={fmt(inputs[0])}", f"factor_axis={self.attr(attrs, 0)}"]
