"""compute_at and reverse_compute_at.

Moving a block under a loop takes three parts: the legality checks (same scope, no
vectorized loop around, the dependences with the blocks under the loop and with those the
block would move past: :func:`_conflicts`), the region the block must cover in one
iteration of the loop (:mod:`.region_inference`), and the rewrite: a new nest of loops
``ax0, ax1, ...`` over that region (:func:`_new_nest`), inserted before the first consumer
(compute_at) or after the last producer (reverse_compute_at) in the loop's body, the block's
old loops removed. Last, the instances the new nest runs are compared with those the block
ran (boxes of axis values from :func:`._common.affine_bindings`): reverse_compute_at must
run exactly the same ones (:func:`_check_same_instances`), compute_at no new one when the
block has a T.where or shares its buffer with another writer
(:func:`_check_only_own_elements`).
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer
from engine.ir import expr as E
from engine.ir.functor import uses_var
from engine.ir.stmt import Block, BlockRealize, For, ForKind, IterType, seq

from ..registry import ROOT_MARK, Ctx, LocationMark, Primitive, Result, fmt, register
from ..tree import flatten_seq, replace_stmts
from ._common import as_bool, conj, expect_block, expect_loop
from .inline import ComputeInline, ReverseComputeInline
from .region_inference import (access_bounds, axis_ranges, check_dense, digit_ranges,
                               executes_once, inner_loops, outer_analyzer, read_dims, union,
                               verify_reads, write_dims)


def _bufs(regions) -> set:
    return {id(r.buffer) for r in regions}


def _new_nest(ctx: Ctx, blk: Block, var_ranges: dict, outer_an: Analyzer,
              preserve_unit_loops: bool):
    """Loops ``axN`` and a BlockRealize for ``blk`` over the given per-axis ranges.

    ``var_ranges`` maps block iter var -> (lo_expr, hi_expr) or None (full domain).
    """
    bindings, loops, preds = [], [], []
    n = 0
    for iv in blk.iter_vars:
        dom_lo = iv.dom.min
        dom_ext = iv.dom.extent
        rng = var_ranges.get(iv.var)
        dt = iv.var.dtype
        full = True
        if rng is not None:
            lo, hi = rng
            ext = E.as_const_int(outer_an.simplify(hi - lo + 1))
            de = E.as_const_int(dom_ext)
            if ext is not None and ext > 0 and (de is None or ext <= de):
                full = False
        if full:
            lo = dom_lo
            ext_e = dom_ext
        else:
            ext_e = E.const(ext, dt)
        if E.is_const_int(ext_e, 1) and not preserve_unit_loops:
            val = outer_an.simplify(lo)
        else:
            var = E.Var(f"ax{n}", dt)
            n += 1
            loops.append((var, ext_e))
            val = outer_an.simplify(lo + var) if not E.is_const_int(lo, 0) else var
        bindings.append(val)
        if not full:
            # keep the axis inside its domain (the interval may stick out at the edges)
            lo_b = outer_an.bound(lo)
            hi_b = outer_an.bound(lo + (ext - 1))
            dlo = E.as_const_int(dom_lo)
            dhi = None if dlo is None or E.as_const_int(dom_ext) is None \
                else dlo + E.as_const_int(dom_ext) - 1
            if not (lo_b and lo_b[0] is not None and dlo is not None and lo_b[0] >= dlo):
                preds.append(E.binary(E.LE, dom_lo, val))
            if not (hi_b and hi_b[1] is not None and dhi is not None and hi_b[1] <= dhi):
                preds.append(E.binary(E.LT, val, E.binary(E.Add, dom_lo, dom_ext)))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for p in preds:
        pred = conj(pred, p)
    body: Any = BlockRealize(tuple(bindings), pred, blk)
    for var, ext_e in reversed(loops):
        body = For(var, E.const(0, var.dtype), ext_e, ForKind.SERIAL, body)
    return body


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


def _position(ctx: Ctx, loop: For, reverse: bool, blk: Block, partners: list[Block]):
    """Insertion index in loop's body: before the first consumer child (compute_at) /
    after the last producer child (reverse_compute_at)."""
    children = flatten_seq(loop.body)
    hits = [i for i, c in enumerate(children)
            if any(ctx.index.contains(c, ctx.index.realize[id(p)]) for p in partners)]
    if reverse:
        return children, hits[-1] + 1
    return children, hits[0]


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
    an = outer_analyzer(ctx, loop)
    children, pos = _position(ctx, loop, reverse, blk, partners)
    if index >= 0:
        if (not reverse and index > pos) or (reverse and index < pos) or index > len(children):
            raise ctx.error(f"block {bname}", f"position {index} in loop {lname} would run "
                            f"block {bname} on the wrong side of its "
                            f"{'consumers' if not reverse else 'producers'}",
                            "use index=-1 (automatic)", highlight=hl)
        pos = index
    if not reverse:
        wbufs = _bufs(blk.writes)
        per_buf: dict[int, list] = {}
        for x in partners:
            inner = inner_loops(ctx, loop, ctx.index.realize[id(x)])
            for r in x.reads:
                if id(r.buffer) in wbufs:
                    b = access_bounds(ctx, x, r, inner)
                    if b is not None:
                        per_buf.setdefault(id(r.buffer), []).append(b)
                    else:
                        per_buf.setdefault(id(r.buffer), []).append([None] * len(r.region))
        regions = {k: union(an, v) for k, v in per_buf.items()}
        var_ranges = axis_ranges(blk, write_dims(blk), regions)
        nest = _new_nest(ctx, blk, var_ranges, an, preserve)
        check_once(nest)
        _check_only_own_elements(ctx, blk, loop, nest, other_writers, hl)
        return Result(_insert(ctx, blk, loop, nest, pos, children), [])

    # ---- reverse_compute_at: what the producers under the loop finish per iteration
    outer_loops = [a for a in ctx.index.ancestors(loop) if isinstance(a, For)] + [loop]
    rbufs = _bufs(blk.reads)
    per_buf = {}
    for x in partners:
        xr = ctx.index.realize[id(x)]
        for iv, val in zip(x.iter_vars, xr.iter_values):
            if iv.iter_type is IterType.REDUCE:
                for lp in outer_loops:
                    if uses_var(val, lp.loop_var):
                        where = (f"loop {lname} is" if lp is loop else
                                 f"loop {lp.loop_var.name}, around loop {lname}, is")
                        raise ctx.error(f"block {bname}", f"{where} a reduction loop of block "
                                        f"{x.name_hint}: after one iteration {x.name_hint} "
                                        f"holds partial results, which {bname} would read",
                                        "choose a loop outside the reduction loops of "
                                        f"{x.name_hint}", highlight=hl + [lp.loop_var.name])
        inner = inner_loops(ctx, loop, xr)
        for w in x.writes:
            if id(w.buffer) in rbufs:
                check_dense(ctx, x, w, inner, blk, loop, hl)
                b = access_bounds(ctx, x, w, inner)
                per_buf.setdefault(id(w.buffer), []).append(
                    b if b is not None else [None] * len(w.region))
    regions = {k: union(an, v) for k, v in per_buf.items()}
    var_ranges = axis_ranges(blk, read_dims(blk, set(regions)), regions)
    var_ranges.update(digit_ranges(blk, regions, an, var_ranges))
    nest = _new_nest(ctx, blk, var_ranges, an, preserve)
    check_once(nest)
    verify_reads(ctx, blk, nest, regions, loop, an, hl)
    _check_same_instances(ctx, blk, loop, nest, hl)
    return Result(_insert(ctx, blk, loop, nest, pos, children), [])


def _instance_boxes(ctx: Ctx, blk: Block, loop: For, nest):
    """The instances of ``blk`` now and in the new nest under ``loop`` (over all the
    iterations of the loops around), each a box of axis values ``[(lo, extent)]`` — or
    None where it cannot be told (bindings or T.where not an affine map of the loops)."""
    from ._common import affine_bindings
    from .region_inference import _nest_loops
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
        region that the consumer reads in one iteration of that loop.

        It requires: 1) the block and the loop are in the same scope and the loop is not
        already around the block; 2) the block is not an output block (it does not
        write a function parameter); 3) every consumer of the block is under the loop,
        and no block it would move past writes what it reads or reads what it writes;
        4) no block under the loop writes the buffers the block reads or writes; 5) the
        new loops run no instance the block did not run before when that matters: when
        it has a ``T.where`` (the instances it skips stay skipped) or another block
        writes its buffer too (TVM refuses such a block, not a complete block; an update
        block after decompose_reduction moves where it computes no new element).
        New loops ``ax0, ax1, ...`` cover the inferred region (unit loops are dropped
        unless ``preserve_unit_loops``).

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
        inside it (its axes are found from its read indices: ``v``, or ``v // c`` and
        ``v % c``); 5) no block under the loop reads or writes what the block writes,
        and no block it would move past conflicts with it; 6) the new loops run exactly
        the instances the block ran (every value of its axes the producers finish, none
        its ``T.where`` skips). New loops ``ax0, ...`` cover the region
        (unit loops are dropped unless ``preserve_unit_loops``).

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
