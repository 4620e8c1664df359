"""compute_at and reverse_compute_at.

Moving a block under a loop takes three parts: the legality checks (same scope, no
vectorized loop around, the dependences with the blocks under the loop and with those the
block would move past: :func:`_conflicts`), the region the blocks under the loop need in
one iteration (:mod:`.region_inference`: their accesses relaxed over their loops inside
it — for compute_at of a buffer the threads of a GPU block share, also over the loops at
and above it bound to those threads, as TVM), and the rewrite: the values each axis of the
block takes there and the new loops ``ax0, ax1, ...`` over them (:mod:`.var_domain`, TVM's
algorithm), inserted before the first consumer (compute_at) or after the last producer
(reverse_compute_at, at the end of the loop's body) — or at the ``index`` asked — the
block's old loops removed. Last, what the new nest runs is checked: compute_at covers what
its consumers read (:func:`_verify_covers`) and runs no new instance when the block has a
T.where or shares its buffer with another writer (:func:`_check_only_own_elements`, boxes
of axis values from :func:`._common.affine_bindings`); reverse_compute_at reads only what
its producers have written (``verify_reads``) and runs exactly the same instances
(:func:`_check_same_instances`); an in-place update, or a reduction split across the
iterations, runs each instance once (:func:`_check_split_reduction`).
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer, relax
from engine.ir import expr as E
from engine.ir.functor import collect_vars, substitute, uses_var
from engine.ir.stmt import Block, For, ForKind, IterType, seq

from ..registry import ROOT_MARK, Ctx, LocationMark, Primitive, Result, fmt, register
from ..tree import flatten_seq, replace_stmts
from ._common import as_bool, expect_block, expect_loop, is_true
from .inline import ComputeInline, ReverseComputeInline
from .region_inference import (_nest_loops, access_bounds, check_dense, executes_once,
                               inner_loops, shared_thread_loops, verify_reads)
from .var_domain import EmptyDomain, Simplifier, dim_max, new_nest, region_intervals, solve


def _bufs(regions) -> set:
    return {id(r.buffer) for r in regions}


def _common_checks(ctx: Ctx, blk: Block, loop: For, name: str):
    idx = ctx.index
    realize = idx.realize[id(blk)]
    bname, lname = blk.name_hint, loop.loop_var.name
    hl = [bname, lname]
    if idx.contains(loop, realize):
        raise ctx.error(f"block {bname}", f"block {bname} is already inside loop {lname} "
                        f"(the loop is an ancestor of block {bname})",
                        f"choose a loop of another loop nest (e.g. one of its "
                        f"{'consumer' if name == 'compute_at' else 'producer'}'s loops)",
                        highlight=hl)
    if idx.scope_block(realize) is not idx.scope_block(loop):
        raise ctx.error(f"block {bname}", f"block {bname} and loop {lname} are not under the "
                        "same block scope", "choose a loop in the same scope", highlight=hl)
    for a in idx.ancestors(loop):
        if isinstance(a, For) and a.kind is ForKind.VECTORIZED:
            raise ctx.error(f"block {bname}", f"loop {lname} is inside the vectorized loop "
                            f"{a.loop_var.name}", "move blocks before vectorizing",
                            highlight=hl + [a.loop_var.name])
    return realize, hl


def _position(ctx: Ctx, loop: For, reverse: bool, partners: list[Block], index: int,
              hl: list) -> tuple[list, int]:
    """The children of ``loop``'s body and where the block goes among them (TVM's
    FindInsertionPoint): after the last producer and at or before the first consumer —
    ``index=-1`` the last such place (before the first consumer; the end when no consumer
    is under the loop), ``-2`` the first (after the last producer), else that position."""
    children = flatten_seq(loop.body)
    hits = [i for i, c in enumerate(children)
            if any(ctx.index.contains(c, ctx.index.realize[id(p)]) for p in partners)]
    # the engine refuses producers under the loop for compute_at and consumers under it
    # for reverse_compute_at (_conflicts), so the partners alone bound the places
    last_producer, first_consumer = (hits[-1], len(children)) if reverse else (-1, hits[0])
    if index == -1:
        return children, first_consumer
    if index == -2:
        return children, last_producer + 1
    if index < 0 or not last_producer + 1 <= index <= first_consumer:
        blk_name = hl[0]
        raise ctx.error(f"block {blk_name}", f"position {index} in loop {loop.loop_var.name} "
                        f"would run block {blk_name} on the wrong side of its "
                        f"{'consumers' if not reverse else 'producers'} (the positions "
                        f"allowed are {last_producer + 1} to {first_consumer})",
                        "use index=-1 (the last place allowed) or -2 (the first)",
                        highlight=hl)
    return children, index


def _conflicts(ctx: Ctx, blk: Block, loop: For, reverse: bool, hl: list):
    """Classify the other blocks of the scope and refuse moves that break a dependence.

    Returns the partner blocks under ``loop`` (consumers for compute_at, producers for
    reverse_compute_at)."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    bname, lname = blk.name_hint, loop.loop_var.name
    scope = idx.scope_block(realize)
    r_b, w_b = _bufs(blk.reads), _bufs(blk.writes)
    old = idx.order[id(realize)]
    lo_pos, hi_pos = idx.order[id(loop)], idx.end[id(loop)]
    partners = []
    other_writers = []
    for x in idx.child_blocks(scope):
        if x is blk:
            continue
        xr = idx.realize[id(x)]
        r_x, w_x = _bufs(x.reads), _bufs(x.writes)
        under = idx.contains(loop, xr)
        pos = idx.order[id(xr)]
        target = hi_pos if reverse else lo_pos
        crossed = not under and (min(old, target) < pos < max(old, target))
        raw = w_b & r_x      # x reads what blk writes
        war = w_x & r_b      # x writes what blk reads
        waw = w_x & w_b
        def names(ids):
            return ", ".join(sorted({r.buffer.name for r in (*x.reads, *x.writes,
                                                             *blk.reads, *blk.writes)
                                     if id(r.buffer) in ids}))
        if waw and not under and not crossed:
            other_writers.append((x, names(waw)))
        if under:
            if not reverse:
                if war:
                    raise ctx.error(f"block {bname}", f"block {x.name_hint} under loop {lname} "
                                    f"writes {names(war)}, which block {bname} reads",
                                    "compute the block at a loop that does not also run its "
                                    "producers", highlight=hl + [x.name_hint])
                if raw:
                    partners.append(x)
            else:
                if raw:
                    raise ctx.error(f"block {bname}", f"block {x.name_hint} under loop {lname} "
                                    f"reads {names(raw)}, which block {bname} writes",
                                    "choose a loop that contains only its producers",
                                    highlight=hl + [x.name_hint])
                if war:
                    partners.append(x)
            if waw:
                raise ctx.error(f"block {bname}", f"block {x.name_hint} under loop {lname} "
                                f"also writes {names(waw)}", "", highlight=hl + [x.name_hint])
        elif crossed and waw:
            raise ctx.error(f"block {bname}", f"block {bname} is not a complete block: block "
                            f"{x.name_hint}, between block {bname} and loop {lname}, also "
                            f"writes {names(waw)}, so moving {bname} past it would change "
                            "the result", "move the blocks in between first",
                            highlight=hl + [x.name_hint])
        elif crossed and (raw or war):
            rel = "reads" if raw else "writes"
            raise ctx.error(f"block {bname}", f"block {x.name_hint}, between block {bname} and "
                            f"loop {lname}, {rel} {names(raw or war or waw)}, so moving "
                            f"{bname} past it would change the result",
                            "move the blocks in between first", highlight=hl + [x.name_hint])
        elif not reverse and raw and not under:
            raise ctx.error(f"block {bname}", f"compute_at requires all the consumers of "
                            f"block {bname} under the loop, and block {x.name_hint} also "
                            f"reads {names(raw)} but is not under loop {lname}, so it would "
                            f"read elements block {bname} no longer computes",
                            f"compute {bname} at a loop that contains all its consumers",
                            highlight=hl + [x.name_hint])
        elif reverse and war and pos < old:
            # TVM's rule (NotAllRequiredBlocksAreVisitedError): every producer of the
            # block is under the loop
            raise ctx.error(f"block {bname}", f"reverse_compute_at requires all the producers "
                            f"of block {bname} under the loop, and block {x.name_hint} writes "
                            f"{names(war)}, which block {bname} reads, but is not under loop "
                            f"{lname}", f"choose a loop that contains all its producers "
                            f"(compute_at {x.name_hint} under it first)",
                            highlight=hl + [x.name_hint])
    if not partners:
        what = "reads what it writes" if not reverse else "writes what it reads"
        raise ctx.error(f"block {bname}", f"no block under loop {lname} {what}",
                        f"choose a loop of a {'consumer' if not reverse else 'producer'} "
                        f"of {bname}", highlight=hl)
    return partners, other_writers


def _insert(ctx: Ctx, blk: Block, loop: For, nest, pos: int, children: list) -> Any:
    realize = ctx.index.realize[id(blk)]
    new_children = children[:pos] + [nest] + children[pos:]
    new_loop = loop.replace(body=seq(*new_children))
    root = ctx.index.removal_root(realize)
    return replace_stmts(ctx.func, {root: None, loop: new_loop})


def _compute_at(ctx: Ctx, inputs, attrs, reverse: bool) -> Result:
    name = "reverse_compute_at" if reverse else "compute_at"
    blk = expect_block(ctx, inputs[0])
    loop = expect_loop(ctx, inputs[1])
    preserve = as_bool(ctx, attrs[0], "preserve_unit_loops") if attrs else False
    index = attrs[1] if len(attrs) > 1 else -1
    if not isinstance(index, int) or isinstance(index, bool):
        raise ctx.error(f"block {blk.name_hint}", f"index must be an integer, got {index!r}", "")
    realize, hl = _common_checks(ctx, blk, loop, name)
    bname, lname = blk.name_hint, loop.loop_var.name
    rmw = sorted({r.buffer.name for r in blk.reads} & {w.buffer.name for w in blk.writes})
    in_place = bool(rmw) and blk.init is None

    def check_once(nest):
        if in_place and not executes_once(ctx, loop, nest, blk):
            raise ctx.error(f"block {bname}", f"block {bname} updates {rmw[0]} in place (it "
                            "reads what it writes, without an init part), and at loop "
                            f"{lname} some of its elements would be computed more than once, "
                            "accumulating twice", "choose a loop whose iterations need "
                            f"disjoint parts of {rmw[0]}, or move the block before "
                            "decompose_reduction", highlight=hl)
    if not reverse:
        params = {id(p) for p in ctx.func.params}
        outs = [w.buffer.name for w in blk.writes if id(w.buffer) in params]
        if outs:
            raise ctx.error(f"block {bname}", f"block {bname} is an output block (it writes "
                            f"the function's output {outs[0]}), and compute_at would compute "
                            "only the parts its consumers read", f"to move {bname} under a loop of its producer, "
                            f"use reverse_compute_at({bname}, {lname})", highlight=hl)
    partners, other_writers = _conflicts(ctx, blk, loop, reverse, hl)
    children, pos = _position(ctx, loop, reverse, partners, index, hl)
    outer_loops = [a for a in ctx.index.ancestors(loop) if isinstance(a, For)][::-1] + [loop]
    sim = Simplifier(outer_loops)
    if reverse:
        _check_producers_finished(ctx, blk, loop, partners, outer_loops, hl)
    # what one instance of the block provides (compute_at: writes; reverse: reads) and what
    # the partners under the loop require in one iteration (their reads; their writes)
    own = blk.reads if reverse else blk.writes
    provided: dict = {}
    for r in own:
        provided.setdefault(id(r.buffer), (r.buffer, []))[1].append(region_intervals(r))
    required: dict = {}
    for x in partners:
        inner = inner_loops(ctx, loop, ctx.index.realize[id(x)])
        for r in (x.writes if reverse else x.reads):
            if id(r.buffer) not in provided:
                continue
            if reverse:
                check_dense(ctx, x, r, inner, blk, loop, hl)
                relax_loops = inner
            else:
                # TVM relaxes by storage scope for compute_at only: a shared buffer is
                # computed for all the threads of the block that share it
                relax_loops = inner + shared_thread_loops(ctx, loop, r.buffer)
            b = access_bounds(ctx, x, r, relax_loops) or [None] * len(r.region)
            prev = required.get(id(r.buffer))
            required[id(r.buffer)] = b if prev is None else [
                None if p is None or q is None else sim.hull(p, q) for p, q in zip(prev, b)]
    domains = solve(blk, provided, required, sim)
    scope_vars = {id(lp.loop_var) for lp in outer_loops}
    try:
        nest = new_nest(blk, domains, sim, preserve, scope_vars)
    except EmptyDomain as e:
        raise ctx.error(f"block {bname}", f"under loop {lname} axis {e.iv.var.name} of block "
                        f"{bname} would take no value: what its "
                        f"{'producers write' if reverse else 'consumers read'} there lies "
                        "outside what it computes", "choose a loop whose iterations use what "
                        "the block computes", highlight=hl) from None
    check_once(nest)
    _check_split_reduction(ctx, blk, loop, nest, domains, sim, hl)
    if not reverse:
        _verify_covers(ctx, blk, loop, nest, required, sim, hl)
        _check_only_own_elements(ctx, blk, loop, nest, other_writers, hl)
    else:
        verify_reads(ctx, blk, nest, required, loop, sim.an, hl)
        _check_same_instances(ctx, blk, loop, nest, hl)
    return Result(_insert(ctx, blk, loop, nest, pos, children), [])


def _check_producers_finished(ctx: Ctx, blk: Block, loop: For, partners: list,
                              outer_loops: list, hl: list) -> None:
    """reverse_compute_at: no loop at or around ``loop`` is a reduction loop of a producer
    under it (after one iteration the producer would hold partial results)."""
    bname, lname = blk.name_hint, loop.loop_var.name
    for x in partners:
        xr = ctx.index.realize[id(x)]
        for iv, val in zip(x.iter_vars, xr.iter_values):
            if iv.iter_type is not IterType.REDUCE:
                continue
            for lp in outer_loops:
                if uses_var(val, lp.loop_var):
                    where = (f"loop {lname} is" if lp is loop else
                             f"loop {lp.loop_var.name}, around loop {lname}, is")
                    raise ctx.error(f"block {bname}", f"{where} a reduction loop of block "
                                    f"{x.name_hint}: after one iteration {x.name_hint} "
                                    f"holds partial results, which {bname} would read",
                                    "choose a loop outside the reduction loops of "
                                    f"{x.name_hint}", highlight=hl + [lp.loop_var.name])


def _check_split_reduction(ctx: Ctx, blk: Block, loop: For, nest, domains: list,
                           sim: Simplifier, hl: list) -> None:
    """A reduction axis the new nest runs over part of its domain per iteration splits
    each sum across the iterations of the loop: every instance must then run exactly
    once, in order (else a part is added twice, or the init resets a partial sum)."""
    split = []
    for iv, info in zip(blk.iter_vars, domains):
        if iv.iter_type is not IterType.REDUCE:
            continue
        full_hi = iv.dom.min + iv.dom.extent - E.const(1, iv.dom.extent.dtype)
        if info.bound is not None or not (sim.equal(info.dom[0], iv.dom.min)
                                          and sim.equal(info.dom[1], full_hi)):
            split.append(iv.var.name)
    if not split or executes_once(ctx, loop, nest, blk) or _same_loops(ctx, blk, loop, nest):
        return
    bname, lname = blk.name_hint, loop.loop_var.name
    raise ctx.error(f"block {bname}", f"under loop {lname} block {bname} would run its "
                    f"reduction axis {split[0]} over part of its domain per iteration, and "
                    "the iterations cannot be shown to run each step of the reduction "
                    "exactly once", "choose a loop whose iterations split the reduction "
                    "without overlap, or a loop outside it", highlight=hl)


def _verify_covers(ctx: Ctx, blk: Block, loop: For, nest, required: dict, sim: Simplifier,
                   hl: list) -> None:
    """compute_at: in one iteration of ``loop`` the new nest writes (over its loops, the
    T.where aside: it only skips values outside the axes' domains or the buffer) every
    element its consumers read there that lies inside the buffer."""
    loops, realize = _nest_loops(nest)
    rr = {lp.loop_var: (lp.min, sim.simplify(lp.min + lp.extent - E.const(1, lp.extent.dtype)))
          for lp in loops}
    vmap = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    for w in blk.writes:
        need = required.get(id(w.buffer))
        if need is None:
            continue
        for d, (rg, want) in enumerate(zip(w.region, need)):
            last = dim_max(w.buffer, d, sim)
            zero = E.const(0, last.dtype)
            w_lo, w_hi = want if want is not None else (zero, last)
            lo_e = substitute(rg.min, vmap)
            hi_e = substitute(rg.min + rg.extent - E.const(1, rg.extent.dtype), vmap)
            a, b = relax(lo_e, rr), relax(hi_e, rr)
            ok = a is not None and b is not None and \
                (sim.prove_le(a[0], w_lo) or sim.prove_le(a[0], zero)) and \
                (sim.prove_le(w_hi, b[1]) or sim.prove_le(last, b[1]))
            if not ok:
                bname = blk.name_hint
                raise ctx.error(f"block {bname}", f"cannot prove that block {bname} computes "
                                f"every element of {w.buffer.name} its consumers read in an "
                                f"iteration of loop {loop.loop_var.name}", "choose a loop "
                                "whose consumers read a box the block's axes map onto",
                                highlight=hl)


def _same_loops(ctx: Ctx, blk: Block, loop: For, nest) -> bool:
    """The new nest runs the block's instances as its old loops did, each exactly once and
    in the same order: with no T.where, its bindings are the old ones with each old loop
    (other than those of one iteration) renamed to a different loop of the new place — one
    of ``loop``, the loops around it or the new ones — of the same range and at the same
    place in the nesting order, and every loop of the new place (of more than one
    iteration) is used."""
    from engine.ir.structural import structural_equal
    idx = ctx.index
    old_r = idx.realize[id(blk)]
    new_loops, new_r = _nest_loops(nest)
    if not (is_true(old_r.predicate) and is_true(new_r.predicate)):
        return False
    place = [a for a in idx.ancestors(loop) if isinstance(a, For)] + [loop] + new_loops

    def units(loops):
        return {lp.loop_var: lp.min for lp in loops if E.is_const_int(lp.extent, 1)}

    old_loops = idx.loops_above(old_r)
    old_vals = [substitute(v, units(old_loops)) for v in old_r.iter_values]
    new_vals = [substitute(v, units(place)) for v in new_r.iter_values]
    old_multi = [lp for lp in old_loops if not E.is_const_int(lp.extent, 1)]
    new_multi = [lp for lp in place if not E.is_const_int(lp.extent, 1)]
    if len(old_multi) != len(new_multi):
        return False
    # pair the loops by where they first appear in the bindings
    def order(loops, vals):
        seen = []
        for v in vals:
            for var in collect_vars(v):
                lp = next((lp for lp in loops if lp.loop_var is var), None)
                if lp is not None and lp not in seen:
                    seen.append(lp)
        return seen
    old_seen, new_seen = order(old_multi, old_vals), order(new_multi, new_vals)
    if len(old_seen) != len(old_multi) or len(new_seen) != len(new_multi):
        return False
    rename = {}
    for o, n in zip(old_seen, new_seen):
        if not (structural_equal(o.min, n.min) and structural_equal(o.extent, n.extent)):
            return False
        rename[o.loop_var] = n.loop_var
    # in the same nesting order: the instances run in the same order too
    by_old = sorted(zip(old_seen, new_seen), key=lambda p: old_multi.index(p[0]))
    if [new_multi.index(n) for _o, n in by_old] != sorted(new_multi.index(n) for n in new_seen):
        return False
    an = Analyzer()
    return all(structural_equal(an.simplify(substitute(o, rename)), an.simplify(n))
               for o, n in zip(old_vals, new_vals))


def _instance_boxes(ctx: Ctx, blk: Block, loop: For, nest):
    """The instances of ``blk`` now and in the new nest under ``loop`` (over all the
    iterations of the loops around), each a box of axis values ``[(lo, extent)]`` — or
    None where it cannot be told (bindings or T.where not an affine map of the loops)."""
    from ._common import affine_bindings
    idx = ctx.index
    old_r = idx.realize[id(blk)]
    old = affine_bindings(old_r.iter_values, idx.loops_above(old_r), old_r.predicate)
    new_loops, new_r = _nest_loops(nest)
    new = affine_bindings(new_r.iter_values, idx.loops_above(loop) + [loop] + new_loops,
                          new_r.predicate)
    boxes = []
    for res in (old, new):
        boxes.append(res.ranges if res.ok and all(r is not None for r in res.ranges)
                     else None)
    return boxes


def _check_only_own_elements(ctx: Ctx, blk: Block, loop: For, nest, others: list,
                             hl: list) -> None:
    """compute_at: the new nest may run an instance of the block several times, but none
    the block did not run before. The region comes from what the consumers read, so it can
    reach instances the block skipped: those its ``T.where`` leaves out (the consumers read
    uninitialised elements there, and the instance may read outside its inputs), or those
    another writer of the buffer computes (TVM refuses a block that is not the only writer
    of its output: not a complete block; the update block of a decompose_reduction, whose
    init block is the other writer, still moves where it computes no new element). Both
    are boxes of axis values (:func:`_instance_boxes`), compared."""
    old, new = _instance_boxes(ctx, blk, loop, nest)
    pred = ctx.index.realize[id(blk)].predicate
    guarded = not (isinstance(pred, E.IntImm) and pred.value == 1)
    if (old is None or new is None) and not others and not guarded:
        return          # no T.where, no other writer: nothing to overwrite or skip
    if old is not None and new is not None and all(
            n[1] == 0 or (o[0] <= n[0] and n[0] + n[1] <= o[0] + o[1])
            for o, n in zip(old, new)):
        return
    bname, lname = blk.name_hint, loop.loop_var.name
    if others:
        x, bufs = others[0]
        raise ctx.error(f"block {bname}", f"block {bname} is not a complete block: block "
                        f"{x.name_hint} also writes {bufs}, and under loop {lname} block "
                        f"{bname} could compute elements it did not compute before, "
                        f"overwriting what {x.name_hint} stores", "compute_at moves a block "
                        "that alone writes its output (or that computes no new elements "
                        "there)", highlight=hl + [x.name_hint])
    what = "its T.where skips" if guarded else "its loops do not run"
    raise ctx.error(f"block {bname}", f"under loop {lname} block {bname} could run instances "
                    f"that {what} now (its consumers there read elements it never "
                    "computed)", "compute_at moves a block that computes everything its "
                    "consumers read", highlight=hl)


def _check_same_instances(ctx: Ctx, blk: Block, loop: For, nest, hl: list) -> None:
    """reverse_compute_at: over all the iterations of ``loop`` and the loops around it, the
    new nest runs exactly the instances of ``blk`` the old one ran (the region each
    iteration needs comes from the producers, which may cover less than the block, or
    more than its ``T.where`` lets it run): both are boxes of axis values, compared."""
    if _same_loops(ctx, blk, loop, nest):
        return
    old, new = _instance_boxes(ctx, blk, loop, nest)
    bname, lname = blk.name_hint, loop.loop_var.name
    if old is None:
        raise ctx.error(f"block {bname}", f"cannot tell which instances block {bname} runs "
                        "now (its bindings or its T.where are not an affine map of its "
                        "loops), so the move could not be checked to keep them",
                        "move the block before transforming its loops", highlight=hl)
    for iv, o, n in zip(blk.iter_vars, old, new or [None] * len(old)):
        if o[1] == 0 or (n is not None and n == o):
            continue
        if n is None:
            why = "cannot be shown to run every instance of it exactly"
        elif n[0] > o[0] or n[0] + n[1] < o[0] + o[1]:
            why = (f"would run axis {iv.var.name} over [{n[0]}, {n[0] + n[1]}) only, not "
                   f"over all of [{o[0]}, {o[0] + o[1]}) as now (the producers under the "
                   "loop write less than the block reads)")
        else:
            why = (f"would run axis {iv.var.name} over [{n[0]}, {n[0] + n[1]}), more than "
                   f"the [{o[0]}, {o[0] + o[1]}) its T.where lets it run now")
        raise ctx.error(f"block {bname}", f"under loop {lname} block {bname} {why}",
                        "choose a loop whose producers compute everything the block reads",
                        highlight=hl)


class _ComputeAtBase(Primitive):
    reverse = False

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        if len(inputs) == 2 and isinstance(inputs[1], LocationMark):
            # a LoopRV sampled by sample_compute_location: TVM's special locations
            expect_block(ctx, inputs[0])
            if inputs[1] is ROOT_MARK:
                return Result(None, [])  # stay at the root: nothing to do
            inline = ReverseComputeInline() if self.reverse else ComputeInline()
            return inline.apply(ctx, inputs[:1], [])
        return _compute_at(ctx, inputs, attrs, self.reverse)

    def python_args(self, inputs, attrs, dialect):
        preserve = self.attr(attrs, 0, default=False)
        index = self.attr(attrs, 1, default=-1)
        if dialect == "engine":
            args = [fmt(inputs[0]), fmt(inputs[1])]
            if preserve == "True":
                args.append("preserve_unit_loops=True")
            if index != "-1":
                args.append(f"index={index}")
            return args
        args = [f"block={fmt(inputs[0])}", f"loop={fmt(inputs[1])}",
                f"preserve_unit_loops={preserve}"]
        if dialect == "tvm":
            args.append(f"index={index}")
        return args


@register
class ComputeAt(_ComputeAtBase):
    kind = "ComputeAt"
    attr_kinds = (("preserve_unit_loops", "bool"), ("index", "int"))
    required_attrs = 0
    method = "compute_at"

    def call(self, sch, block, loop, preserve_unit_loops: bool = False, index: int = -1):
        """Move a producer block under a loop of its consumer, computing there only the
        region that the consumer reads in one iteration of that loop. For a buffer the
        threads of a GPU block share (scope ``"shared"``) that is what all of them read:
        the region is relaxed also over the loops at and above the loop bound to
        ``threadIdx.*`` and ``vthread.*`` (TVM's rule; "local" and "global" buffers are
        computed per thread), each iteration computing the whole tile.

        It requires: 1) the block and the loop are in the same scope and the loop is not
        already around the block; 2) the block is not an output block (it does not
        write a function parameter); 3) every consumer of the block is under the loop,
        and no block it would move past writes what it reads or reads what it writes;
        4) no block under the loop writes the buffers the block reads or writes; 5) the
        new loops run no instance the block did not run before when that matters: when
        it has a ``T.where`` (the instances it skips stay skipped) or another block
        writes its buffer too (TVM refuses such a block, not a complete block; an update
        block after decompose_reduction moves where it computes no new element); 6) they
        write everything the consumers read there (inside the buffer), and an in-place
        update or a reduction split across the iterations runs each instance once.
        The axes' values are solved as TVM solves them (``v``, ``v * e`` of a tile,
        ``x // f``, one-to-one maps such as ``9 - v`` or ``(v * 8 + w) // 16``; an axis
        no index pins keeps its domain); new loops ``ax0, ax1, ...`` run them from
        ``lo + axN``, a ``T.where`` keeps an axis inside its domain and the buffer where
        that is not proven (unit loops are dropped unless ``preserve_unit_loops``). The
        block goes before the first consumer (``index=-1``), first in the loop's body
        (``index=-2``), or at the position ``index``.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("Y"): ...
            for i, j in T.grid(128, 128):
                with T.block("C"): ...

        Call::

            i, j = sch.get_loops(sch.get_block("C"))
            sch.compute_at(sch.get_block("Y"), j)

        After::

            for i, j in T.grid(128, 128):
                for ax0 in range(128):
                    with T.block("Y"):
                        vi = T.axis.spatial(128, i)
                        vj = T.axis.spatial(128, j)
                        vk = T.axis.reduce(128, ax0)
                        ...
                with T.block("C"): ...
        """
        sch._run(self, [block, loop], [bool(preserve_unit_loops), index])


@register
class ReverseComputeAt(_ComputeAtBase):
    kind = "ReverseComputeAt"
    attr_kinds = (("preserve_unit_loops", "bool"), ("index", "int"))
    required_attrs = 0
    method = "reverse_compute_at"
    reverse = True

    def call(self, sch, block, loop, preserve_unit_loops: bool = False, index: int = -1):
        """Move a consumer block under a loop of its producer, computing there the
        region whose inputs that producer has just finished in one iteration.

        It requires: 1) the block and the loop are in the same scope and the loop is not
        already around the block; 2) every producer of the block (a block before it
        writing what it reads) is under the loop, as TVM requires; 3) every producer
        under the loop has finished its elements at the end of an iteration (the loop
        and the loops above it are not reduction loops of the producer); 4) the
        producers write a contiguous region per iteration and the block reads only
        inside it (its axes are solved from its read indices as TVM solves them: ``v``,
        ``v // c`` and ``v % c``, one-to-one maps such as ``(v * 8 + w) // 16`` with
        ``(v * 8 + w) % 16``); 5) no block under the loop reads or writes what the block
        writes, and no block it would move past conflicts with it; 6) the new loops run
        exactly the instances the block ran (every value of its axes the producers
        finish, none its ``T.where`` skips), a reduction split across the iterations
        each step once and in order. New loops ``ax0, ...`` cover the region from
        ``lo + axN``, a ``T.where`` keeping an axis inside its domain and the buffer
        where that is not proven (unit loops are dropped unless
        ``preserve_unit_loops``). The block goes last in the loop's body (``index=-1``),
        right after its last producer (``index=-2``), or at the position ``index``.

        Before::

            for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):
                with T.block("Y"): ...
            for i, j in T.grid(128, 128):
                with T.block("C"): ...

        Call::

            sch.reverse_compute_at(sch.get_block("C"), j0)

        After::

            for i, j_0 in T.grid(128, 32):
                for k, j_1 in T.grid(128, 4):
                    with T.block("Y"): ...
                for ax0 in T.serial(4):
                    with T.block("C"):
                        vi = T.axis.spatial(128, i)
                        vj = T.axis.spatial(128, j_0 * 4 + ax0)
                        ...
        """
        sch._run(self, [block, loop], [bool(preserve_unit_loops), index])
