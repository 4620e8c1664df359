"""decompose_padding: split a padding block into a block that fills the pad value everywhere
and a block that writes the in-bound values only, without the ``T.if_then_else``.

A *padding block* stores ``T.if_then_else(<bounds on its axes>, <value>, <constant>)``, e.g.
conv2d's ``pad[vn, vc, vh, vw] = T.if_then_else(1 <= vh and vh < 7 and ..., data[...], 0)``.
The fill block (``<name>_pad_const``) runs the block's loops up to the given loop and is
placed right before that loop; the block itself then iterates over the in-bound box only:
its axes start at the box's corner, and the loops bound to them (in the block's own chain of
loops) shrink to the box. ``can_decompose_padding`` asks the same question without changing
anything (TVM's ``CanDecomposePadding``, which is no instruction of a trace).
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer
from engine.ir import expr as E
from engine.ir.buffer import BufferRegion, Range
from engine.ir.functor import collect_vars, substitute
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, IterType, IterVar, seq

from ..registry import Ctx, Primitive, Result, fmt, register
from ._common import conj, conjuncts, expect_block, expect_loop, fresh_name, is_true
from .buffers import compose, rewrite_stmts

_FLIP = {E.GE: E.LE, E.GT: E.LT, E.LE: E.GE, E.LT: E.GT}


def _pattern_error(ctx: Ctx, blk: Block, why: str):
    return ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint} is not a padding block: "
                     f"{why} (requirement 3)", "decompose_padding applies to a block storing "
                     "T.if_then_else(<bounds on its axes>, <value>, <constant>)",
                     highlight=[blk.name_hint])


def _in_bound_box(ctx: Ctx, blk: Block, cond: E.PrimExpr) -> dict:
    """Axis -> (lo, hi) inclusive where the condition holds; each conjunct must compare one
    axis with a constant (TVM's 'independent block iters')."""
    box = {}
    for iv in blk.iter_vars:
        lo, ext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        if lo is None or ext is None:
            raise _pattern_error(ctx, blk, f"axis {iv.var.name} has no constant domain")
        box[iv.var] = [lo, lo + ext - 1]
    for c in conjuncts(cond):
        if isinstance(c, E.Call) and c.op == "likely":
            c = c.args[0]
        t = type(c)
        if t not in _FLIP:
            raise _pattern_error(ctx, blk, "the condition is not a conjunction of bounds")
        a, b = c.a, c.b
        if isinstance(a, E.IntImm) and isinstance(b, E.Var):
            a, b, t = b, a, _FLIP[t]
        if not (isinstance(a, E.Var) and a in box and isinstance(b, E.IntImm)):
            raise _pattern_error(ctx, blk, "each bound must compare one axis with a constant")
        v = b.value
        lo, hi = box[a]
        if t is E.GE:
            lo = max(lo, v)
        elif t is E.GT:
            lo = max(lo, v + 1)
        elif t is E.LE:
            hi = min(hi, v)
        else:
            hi = min(hi, v - 1)
        box[a] = [lo, hi]
    if any(lo > hi for lo, hi in box.values()):
        raise _pattern_error(ctx, blk, "no element is in bounds")
    return box


def _positions(ctx: Ctx, blk: Block, loop: For):
    """The block's loops from ``loop`` inwards, and the outermost loop of its own chain
    (loops above the block, from the innermost outwards, each with a single child: a loop
    or the block itself) not above ``loop``; ``len(below)`` when even the innermost loop
    holds other statements beside the block (TVM's in-bound filling position)."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    loops = idx.loops_above(realize)
    if not any(lp is loop for lp in loops):
        raise ctx.error(f"loop {loop.loop_var.name}", f"loop {loop.loop_var.name} is not "
                        f"above block {blk.name_hint} (requirement 2)",
                        "choose one of the block's loops", highlight=[loop.loop_var.name,
                                                                      blk.name_hint])
    below = loops[[i for i, lp in enumerate(loops) if lp is loop][0]:]
    chain_top = len(below)
    while chain_top > 0 and isinstance(below[chain_top - 1].body, (For, BlockRealize)):
        chain_top -= 1
    return below, chain_top


def _check_nothing_before(ctx: Ctx, blk: Block, loop: For) -> None:
    """The fill runs before ``loop`` for all its iterations at once: a block under ``loop``
    that touches the buffer before the padding block (in an iteration) would see the pad
    value where it saw the element an earlier iteration wrote, or have its own store
    replaced by it. Refused (requirement 2)."""
    buf = blk.writes[0].buffer if len(blk.writes) == 1 else None
    if buf is None:
        return
    for other in ctx.index.blocks_under(loop):
        if other is blk:
            return
        if any(r.buffer is buf for r in (*other.reads, *other.writes)):
            raise ctx.error(f"block {blk.name_hint}", f"block {other.name_hint} under loop "
                            f"{loop.loop_var.name} accesses {buf.name} before block "
                            f"{blk.name_hint} writes it; the fill before the loop would "
                            "change what it sees (requirement 2)", "decompose at a loop "
                            f"inside which {blk.name_hint} comes first",
                            highlight=[blk.name_hint, other.name_hint, loop.loop_var.name])


def _unit_loops(loops, extents: dict) -> dict:
    """Loop variable -> its only value, for the loops of extent 1 (TVM's analyzer binds such
    a loop to its minimum, so bindings and predicates it simplifies read the constant)."""
    return {lp.loop_var: lp.min for lp in loops
            if E.as_const_int(extents.get(lp.loop_var, lp.extent)) == 1}


def _strip_likely(c: E.PrimExpr) -> E.PrimExpr:
    if isinstance(c, E.Call) and c.op == "likely":
        return c.args[0]
    return c


def decompose(ctx: Ctx, blk: Block, loop: For) -> Result:
    """The rewrite (with every check): the fill block's nest before ``loop``, the block
    narrowed to the in-bound box. Returns the new function and the fill block."""
    name = blk.name_hint
    if any(iv.iter_type is not IterType.SPATIAL for iv in blk.iter_vars) or \
            blk.init is not None:
        raise ctx.error(f"block {name}", f"block {name} is a reduction; decompose_padding "
                        "needs a complete block (requirement 1)", "", highlight=[name])
    below, chain_top = _positions(ctx, blk, loop)
    _check_nothing_before(ctx, blk, loop)
    body = blk.body
    if not isinstance(body, BufferStore) or len(blk.writes) != 1:
        raise _pattern_error(ctx, blk, "its body is not one store")
    value = body.value
    if not (isinstance(value, E.Call) and value.op == "if_then_else"):
        raise _pattern_error(ctx, blk, "the stored value is not a T.if_then_else")
    cond, in_value, pad_value = value.args
    if not isinstance(pad_value, (E.IntImm, E.FloatImm)):
        raise _pattern_error(ctx, blk, "the pad value is not a constant")
    realize = ctx.index.realize[id(blk)]
    box = _in_bound_box(ctx, blk, cond)
    if all([E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.min) +
            E.as_const_int(iv.dom.extent) - 1] == box[iv.var] for iv in blk.iter_vars):
        raise _pattern_error(ctx, blk, "every element is in bounds (the condition is trivial)")
    loops = ctx.index.loops_above(realize)

    def const_ranges(extents):
        out = {}
        for lp in loops:
            lo = E.as_const_int(lp.min)
            ext = E.as_const_int(extents.get(lp.loop_var, lp.extent))
            if lo is not None and ext is not None:
                out[lp.loop_var] = (lo, lo + ext - 1) if lp.loop_var not in extents \
                    else (0, ext - 1)
        return out
    an = Analyzer(const_ranges({}))
    # the fill block: the loops from `loop` inwards, copied, around a store of the constant;
    # it keeps the block's T.where (it fills exactly the elements the block wrote)
    lmap = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in below}
    fill_subst = {**_unit_loops([lp for lp in loops if lp.loop_var not in lmap], {}), **lmap}
    fill_ivs = tuple(IterVar(E.Var(iv.var.name, iv.var.dtype), iv.dom, IterType.SPATIAL)
                     for iv in blk.iter_vars)
    fmap = {iv.var: n.var for iv, n in zip(blk.iter_vars, fill_ivs)}
    w = blk.writes[0]
    fill = Block(fill_ivs, (), (BufferRegion(w.buffer, tuple(
        Range(substitute(r.min, fmap), r.extent) for r in w.region)),),
        fresh_name(f"{name}_pad_const", set(ctx.index.blocks)),
        BufferStore(body.buffer, pad_value, tuple(substitute(i, fmap) for i in body.indices)))
    fill_pred = realize.predicate if is_true(realize.predicate) else \
        an.simplify(substitute(realize.predicate, fill_subst))
    fill_nest: Any = BlockRealize(tuple(an.simplify(substitute(v, fill_subst))
                                        for v in realize.iter_values), fill_pred, fill)
    for lp in reversed(below):
        fill_nest = For(lmap[lp.loop_var], lp.min, lp.extent, lp.kind, fill_nest,
                        thread_tag=lp.thread_tag)
    # the in-bound block: axes over the box, shifted to start at 0; a loop of the block's
    # own chain bound directly (and only) to an axis shrinks to the box, other axes are
    # guarded by the condition in the block's T.where
    shiftable = {lp.loop_var: lp for lp in below[chain_top:]}
    new_ivs, axis_map, loop_shift, loop_ext = [], {}, {}, {}
    iter_of = dict(zip([iv.var for iv in blk.iter_vars], realize.iter_values))
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        lo, hi = box[iv.var]
        dt = iv.var.dtype
        nv = IterVar(E.Var(iv.var.name, dt), Range(E.const(0, dt), E.const(hi - lo + 1, dt)),
                     IterType.SPATIAL)
        new_ivs.append(nv)
        axis_map[iv.var] = nv.var + lo if lo else nv.var
        direct = isinstance(val, E.Var) and val in shiftable and val not in loop_shift and \
            sum(1 for v in realize.iter_values if val in collect_vars(v)) == 1 and \
            E.is_const_int(shiftable[val].min, 0)
        if direct:
            loop_shift[val] = val + lo if lo else val
            loop_ext[val] = hi - lo + 1
    an = Analyzer(const_ranges(loop_ext))
    moved_subst = {**_unit_loops([lp for lp in loops if lp.loop_var not in loop_shift], {}),
                   **{v: (substitute(e, {v: E.const(0, v.dtype)}) if loop_ext[v] == 1 else e)
                      for v, e in loop_shift.items()}}

    def moved(e):
        return an.simplify(substitute(e, moved_subst))
    bindings = []
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        lo = box[iv.var][0]
        if isinstance(val, E.Var) and val in loop_shift:
            bindings.append(val)
        else:
            bindings.append(moved(val - lo if lo else val))
    pred: E.PrimExpr = E.IntImm("bool", 1)
    for c in conjuncts(substitute(cond, iter_of)) + conjuncts(realize.predicate):
        g = moved(_strip_likely(c))
        if not is_true(g):
            pred = conj(pred, g)

    def remap(e):
        return an.simplify(substitute(e, axis_map))
    inner = blk.replace(
        iter_vars=tuple(new_ivs), body=BufferStore(body.buffer, remap(in_value),
                                                   tuple(remap(i) for i in body.indices)),
        reads=tuple(BufferRegion(r.buffer, tuple(Range(remap(x.min), x.extent)
                                                 for x in r.region)) for r in blk.reads),
        writes=tuple(BufferRegion(r.buffer, tuple(Range(remap(x.min), x.extent)
                                                  for x in r.region)) for r in blk.writes))
    edits: dict = {}
    compose(edits, id(realize), lambda r: BlockRealize(tuple(bindings), pred, inner))
    for lp in below[chain_top:]:
        if lp.loop_var in loop_ext:
            compose(edits, id(lp), lambda s, e=loop_ext[lp.loop_var]:
                    s.replace(extent=E.const(e, s.loop_var.dtype)))
    compose(edits, id(loop), lambda s: _Before(fill_nest, s))
    return Result(rewrite_stmts(ctx.func, edits), [fill])


def _Before(first, stmt):
    return seq(first, stmt)


@register
class DecomposePadding(Primitive):
    kind = "DecomposePadding"
    method = "decompose_padding"
    returns = "one"
    attr_kinds = ()

    def call(self, sch, block, loop):
        """Split a padding block into a block filling the pad value (``<name>_pad_const``,
        inserted right before ``loop``) and the block itself writing only the in-bound
        values, without the ``T.if_then_else``. Returns the fill block.

        The block's axes then cover just the in-bound box (starting at 0, shifted in its
        indices); the loops bound to them in the block's own chain of loops (each loop's
        only child is the next loop or the block) shrink to the box, the other bounds of
        the condition become the block's ``T.where``. A block's own ``T.where`` (a tile
        that overhangs the buffer) stays on both blocks: the fill writes exactly the
        elements the block wrote. Loops of extent 1 above ``loop`` read as their value.

        It requires: 1) the block is a complete block (no reduction axis, no init); 2)
        ``loop`` is one of the block's loops, and no other block under it touches the
        buffer before this one (the fill, before the loop, would change what it sees);
        3) the block stores ``T.if_then_else(cond, value, pad)`` where ``pad`` is a
        constant and ``cond`` a conjunction of bounds of single axes by constants that
        excludes some elements.

        Before::

            for i in range(140):
                with T.block("block"):
                    vi = T.axis.remap("S", [i])
                    y[vi] = T.if_then_else(vi >= 6 and vi < 134, x[vi - 6], 0)

        Call::

            block = sch.get_block("block")
            sch.decompose_padding(block, sch.get_loops(block)[0])

        After::

            for i in range(140):
                with T.block("block_pad_const"):
                    vi = T.axis.spatial(140, i)
                    y[vi] = 0
            for i in range(128):
                with T.block("block"):
                    vi = T.axis.spatial(128, i)
                    y[vi + 6] = x[vi]
        """
        return sch._run(self, [block, loop], [])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        loop = expect_loop(ctx, inputs[1] if len(inputs) > 1 else None)
        return decompose(ctx, blk, loop)

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), fmt(inputs[1])]
        return [f"block={fmt(inputs[0])}", f"loop={fmt(inputs[1])}"]
