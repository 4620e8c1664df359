"""pad_einsum: pad the iteration domain of an Einsum block to multiples of given factors.

An *Einsum* block accesses each of its buffers at one point whose every index is one of the
block's axes or a constant (``C[vi, vj] += A[vi, vk] * B[vk, vj]``), as TVM defines it. Its
axes are rounded up (127 -> 128 with a factor of 32), the loops bound to them grow with
them, and every buffer indexed by a grown axis is replaced by a padded copy ``<name>_pad``:
an input is copied in first, with zeros where it has no element; an output is copied back
afterwards, only the part the original buffer has. The padded program then splits evenly.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import bits_of
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, BufferStore, IterType, seq
from engine.ir.structural import structural_equal

from ..error import ScheduleError, TraceError
from ..literals import short
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import conj, expect_block, fresh_name, is_int
from .buffers import BufferSwap, buffer_names, compose, rewrite_stmts
from .stages import grid_stage


def _check_padding(padding: Any) -> list[int]:
    """The padding list, or TraceError when it is not a list of positive integers."""
    if not isinstance(padding, (list, tuple)) or not all(is_int(p) and p > 0
                                                         for p in padding):
        raise TraceError(f"PadEinsum's padding must be a list of positive integers, got "
                         f"{short(padding)}")
    return list(padding)


def _einsum_indices(ctx: Ctx, blk: Block) -> dict:
    """Buffer -> its access indices, refused unless the block is an Einsum: each buffer is
    read or written once, at one point, indexed by block axes or constants (TVM's rule)."""
    axes = {iv.var for iv in blk.iter_vars}
    seen: dict = {}
    for region in (*blk.reads, *blk.writes):
        buf = region.buffer
        why = ""
        if buf in seen:
            why = f"it accesses {buf.name} both as an input and as an output"
        elif not all(E.is_const_int(r.extent, 1) for r in region.region):
            why = f"it accesses a region of {buf.name}, not one element"
        elif not all(isinstance(r.min, E.IntImm) or r.min in axes for r in region.region):
            why = (f"an index of {buf.name} is an expression, not one of the block's axes or "
                   "a constant")
        if why:
            raise ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint} is not an Einsum: "
                            f"{why} (requirement 2)", "apply it to blocks such as "
                            "C[i, j] += A[i, k] * B[k, j] (pad before decompose_reduction)",
                            highlight=[blk.name_hint])
        seen[buf] = tuple(r.min for r in region.region)
    return seen


def _zero_when_padded(e: E.PrimExpr, zeroed: set) -> bool:
    """Whether ``e`` is 0 whenever the loads of buffers in ``zeroed`` are 0."""
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value == 0
    if isinstance(e, E.BufferLoad):
        return e.buffer in zeroed
    if isinstance(e, E.Mul):
        return _zero_when_padded(e.a, zeroed) or _zero_when_padded(e.b, zeroed)
    if isinstance(e, (E.Add, E.Sub)):
        return _zero_when_padded(e.a, zeroed) and _zero_when_padded(e.b, zeroed)
    if isinstance(e, E.Cast):
        return _zero_when_padded(e.value, zeroed)
    return False


def _check_reduction_adds_zero(ctx: Ctx, blk: Block, zeroed: set) -> None:
    """A padded reduction axis runs extra iterations on zeros: the update must then add 0."""
    body = blk.body
    ok = blk.init is not None and isinstance(body, BufferStore) and isinstance(body.value, E.Add)
    if ok:
        v = body.value
        own = [x for x in (v.a, v.b) if isinstance(x, E.BufferLoad) and x.buffer is body.buffer]
        ok = bool(own) and _zero_when_padded(v.b if own[0] is v.a else v.a, zeroed)
    if not ok:
        raise ctx.error(f"block {blk.name_hint}", f"padding a reduction axis of block "
                        f"{blk.name_hint} would add the update of zero inputs, which is not 0 "
                        "here (requirement 4)", "pad only the spatial axes (factor 1 for the "
                        "reduction axes), or pad a sum of products", highlight=[blk.name_hint])


def _padded_loops(ctx: Ctx, blk: Block, grown: dict) -> dict:
    """Loop -> new extent, for each grown axis bound to a loop variable (the loop grows)."""
    idx = ctx.index
    realize = idx.realize[id(blk)]
    out: dict = {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.var not in grown or not isinstance(value, E.Var) or value not in idx.loops:
            continue
        loop = idx.loops[value]
        uses = sum(1 for v in realize.iter_values if value in _vars_of(v))
        others = [b.name_hint for b in idx.blocks_under(loop) if b is not blk]
        spans = E.is_const_int(loop.min, 0) and _same_extent(loop.extent, iv.dom.extent)
        if others or uses > 1 or not spans:
            why = (f"loop {value.name} also runs block {others[0]}" if others else
                   f"loop {value.name} is bound to several axes" if uses > 1 else
                   f"loop {value.name} does not span axis {iv.var.name}")
            raise ctx.error(f"block {blk.name_hint}", f"{why}, so it cannot grow with the "
                            "padded axis (requirement 3)", "pad the block before compute_at "
                            "or fuse", highlight=[blk.name_hint, value.name])
        out[loop] = grown[iv.var]
    return out


def _same_extent(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """Are two extents the same number (equal constants, or the same expression of the
    function's sizes)?"""
    ia, ib = E.as_const_int(a), E.as_const_int(b)
    if ia is not None or ib is not None:
        return ia == ib
    return structural_equal(a, b)


def _rounded_up(ext: E.PrimExpr, p: int) -> E.PrimExpr | None:
    """``ext`` rounded up to a multiple of ``p`` (TVM's ``(n + 31) // 32 * 32`` for a
    symbolic extent), or None when it needs no padding (``p`` is 1, or divides it)."""
    n = E.as_const_int(ext)
    if n is not None:
        new = -(-n // p) * p
        return None if new == n else E.const(new, ext.dtype)
    if p == 1:
        return None
    c = lambda v: E.const(v, ext.dtype)  # noqa: E731
    return E.Mul(E.FloorDiv(E.Add(ext, c(p - 1)), c(p)), c(p))


def _runs_whole_axis(ctx: Ctx, realize: Any, value: E.PrimExpr, extent: E.PrimExpr) -> bool:
    """Do the block's instances take every value of an axis: bound to a loop of its extent
    from 0, used by no other binding, and no ``T.where`` skipping instances?"""
    loop = ctx.index.loops.get(value) if isinstance(value, E.Var) else None
    return (loop is not None and E.is_const_int(loop.min, 0) and
            _same_extent(loop.extent, extent) and
            isinstance(realize.predicate, E.IntImm) and realize.predicate.value == 1 and
            sum(1 for v in realize.iter_values if value in _vars_of(v)) == 1)


def _vars_of(e: E.PrimExpr) -> set:
    found: set = set()
    post_order_visit(e, lambda x: found.add(x) if isinstance(x, E.Var) else None)
    return found


def _copy_in(name: str, buf: Buffer, padded: Buffer):
    """``padded[v] = if_then_else(v < shape, buf[v], 0)`` over the padded shape."""
    def build(vs):
        cond: E.PrimExpr = E.IntImm("bool", 1)
        for v, s, ps in zip(vs, buf.shape, padded.shape):
            if not _same_extent(s, ps):
                cond = conj(cond, E.binary(E.LT, v, s))
        load = E.BufferLoad(buf, tuple(vs))
        value = load if isinstance(cond, E.IntImm) else \
            E.Call(buf.dtype, "if_then_else", (cond, load, E.const(0, buf.dtype)))
        point = tuple(Range(v, E.const(1, v.dtype)) for v in vs)
        return ([BufferRegion(buf, point)], [BufferRegion(padded, point)],
                BufferStore(padded, value, tuple(vs)))
    return grid_stage(name, list(padded.shape), build, loop_prefix="i")


def _copy_out(name: str, padded: Buffer, buf: Buffer):
    """``buf[v] = padded[v]`` over the original shape."""
    def build(vs):
        point = tuple(Range(v, E.const(1, v.dtype)) for v in vs)
        return ([BufferRegion(padded, point)], [BufferRegion(buf, point)],
                BufferStore(buf, E.BufferLoad(padded, tuple(vs)), tuple(vs)))
    return grid_stage(name, list(buf.shape), build, loop_prefix="i")


@register
class PadEinsum(Primitive):
    kind = "PadEinsum"
    method = "pad_einsum"
    attr_kinds = (("padding", "literal"),)

    def call(self, sch, block, padding):
        """Pad the computation of an Einsum block: each block axis grows to a multiple of
        its padding factor (127 -> 128 with 32), so that later splits are even.

        Each buffer indexed by a grown axis is replaced by a padded buffer ``<name>_pad``:
        an input is copied into it first (zeros outside the original buffer), an output is
        copied back afterwards (only the original part). The loops bound to grown axes
        grow too.

        It requires: 1) ``padding`` has one positive integer per block axis; 2) the block
        is an Einsum: each buffer is read or written once, at one element, every index
        being a block axis or a constant (``C[vi, vj] += A[vi, vk] * B[vk, vj]``, before
        decompose_reduction); 3) a grown axis is bound to a loop that runs only this block
        and spans the axis (or to an expression of loops, which then do not grow); 4) when a
        reduction axis grows, the update adds a product of the padded inputs
        (``C = C + A * B``), so the extra zero iterations add nothing; 5) a padded output is
        written whole by the block (every index an axis spanning its dimension, bound to a
        loop that runs over all of it, and no ``T.where``); 6) no other
        block in the same loop nest writes a padded input or accesses a padded output.

        Before::

            for i, j, k in T.grid(127, 127, 127):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            sch.pad_einsum(sch.get_block("C"), [32, 32, 32])

        After::

            A_pad = T.alloc_buffer((128, 128))
            B_pad = T.alloc_buffer((128, 128))
            C_pad = T.alloc_buffer((128, 128))
            for i0, i1 in T.grid(128, 128):
                with T.block("A_pad"):
                    v0, v1 = T.axis.remap("SS", [i0, i1])
                    A_pad[v0, v1] = T.if_then_else(v0 < 127 and v1 < 127, A[v0, v1],
                                                   T.float32(0))
            for i0, i1 in T.grid(128, 128):
                with T.block("B_pad"):
                    ...
            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C_pad[vi, vj] = T.float32(0)
                    C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B_pad[vk, vj]
            for i0, i1 in T.grid(127, 127):
                with T.block("C_pad"):
                    v0, v1 = T.axis.remap("SS", [i0, i1])
                    C[v0, v1] = C_pad[v0, v1]
        """
        try:
            padding = _check_padding(padding)
        except TraceError as e:
            raise ScheduleError(self.method, "padding", str(e), "e.g. [32, 32, 32]: one "
                                "factor per block axis") from None
        sch._run(self, [block], [padding])

    def check_attrs(self, attrs) -> None:
        super().check_attrs(attrs)
        _check_padding(attrs[0])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        bname = blk.name_hint
        padding = attrs[0] if attrs else None
        n = len(blk.iter_vars)
        if not isinstance(padding, (list, tuple)) or len(padding) != n or \
                not all(is_int(p) and p > 0 for p in padding):
            raise ctx.error(f"block {bname}", f"the padding must be {n} positive integer(s), "
                            f"one per axis of block {bname}, got {short(padding)} "
                            "(requirement 1)", f"e.g. [{', '.join(['16'] * n)}]",
                            highlight=[bname])
        indices = _einsum_indices(ctx, blk)
        grown: dict = {}
        for iv, p in zip(blk.iter_vars, padding):
            if not E.is_const_int(iv.dom.min, 0):
                raise ctx.error(f"block {bname}", f"axis {iv.var.name} does not start at 0",
                                "", highlight=[bname])
            new = _rounded_up(iv.dom.extent, p)
            if E.as_const_int(new) is not None and \
                    E.as_const_int(new) >= 2 ** (bits_of(iv.var.dtype) - 1):
                raise ctx.error(f"block {bname}", f"padding axis {iv.var.name} to "
                                f"{E.as_const_int(new)} would not fit a "
                                f"{bits_of(iv.var.dtype)}-bit index (requirement 1)",
                                "use a smaller factor", highlight=[bname])
            if new is not None:
                grown[iv.var] = new
        if not grown:
            raise ctx.error(f"block {bname}", "every axis is already a multiple of its "
                            "padding factor, so there is nothing to pad",
                            "choose factors that do not divide the extents",
                            highlight=[bname])
        loops = _padded_loops(ctx, blk, grown)
        dom = {iv.var: iv.dom for iv in blk.iter_vars}
        inputs_p = [r.buffer for r in blk.reads if any(i in grown for i in indices[r.buffer])]
        outputs_p = [w.buffer for w in blk.writes if any(i in grown for i in indices[w.buffer])]
        realize = ctx.index.realize[id(blk)]
        binding = dict(zip([iv.var for iv in blk.iter_vars], realize.iter_values))
        for buf in outputs_p:
            for d, i in enumerate(indices[buf]):
                full = isinstance(i, E.Var) and E.is_const_int(dom[i].min, 0) and \
                    _same_extent(dom[i].extent, buf.shape[d]) and \
                    _runs_whole_axis(ctx, realize, binding[i], dom[i].extent)
                if not full:
                    raise ctx.error(f"block {bname}", f"block {bname} does not write all of "
                                    f"{buf.name} (index {d}), so the padded copy would write "
                                    "back elements it never computed (requirement 5)", "",
                                    highlight=[bname])
        reduce_grown = {iv.var for iv in blk.iter_vars
                        if iv.var in grown and iv.iter_type is IterType.REDUCE}
        if reduce_grown:
            zeroed = {b for b in inputs_p if any(i in reduce_grown for i in indices[b])}
            _check_reduction_adds_zero(ctx, blk, zeroed)
        idx = ctx.index
        realize = idx.realize[id(blk)]
        scope_blk = idx.scope_block(realize)
        children = flatten_seq(scope_blk.body)
        pos = next(i for i, c in enumerate(children) if idx.contains(c, realize))
        for other in idx.blocks_under(children[pos]):
            if other is blk:
                continue
            bad = [b for b in inputs_p if any(w.buffer is b for w in other.writes)] + \
                [b for b in outputs_p if any(r.buffer is b for r in (*other.reads,
                                                                      *other.writes))]
            if bad:
                raise ctx.error(f"block {bname}", f"block {other.name_hint} in the same loop "
                                f"nest also accesses {bad[0].name}, which pad_einsum copies "
                                "before or after the whole nest (requirement 6)",
                                "pad the block before compute_at", highlight=[bname,
                                                                              other.name_hint])
        names = buffer_names(ctx.func)
        blocks = set(idx.blocks)
        edits: dict = {}
        swaps, before, after, allocs, stages = [], [], [], [], []
        for buf, is_input in [(b, True) for b in inputs_p] + [(b, False) for b in outputs_p]:
            shape = tuple(grown.get(i, s) if isinstance(i, E.Var) else s
                          for i, s in zip(indices[buf], buf.shape))
            padded = Buffer(fresh_name(f"{buf.name}_pad", names), shape, buf.dtype, buf.scope,
                            (), 0, buf.align)
            names.add(padded.name)
            stage_name = fresh_name(padded.name, blocks)
            blocks.add(stage_name)
            if is_input:
                nest, stage = _copy_in(stage_name, buf, padded)
            else:
                nest, stage = _copy_out(stage_name, padded, buf)
            (before if is_input else after).append(nest)
            stages.append(stage)
            allocs.append(padded)
            swaps.append(BufferSwap(buf, padded))

        def rewrite_block(b):
            for s in swaps:
                b = s.visit(b)
            ivs = tuple(iv.replace(dom=Range(iv.dom.min, grown[iv.var])) if iv.var in grown
                        else iv for iv in b.iter_vars)
            return b.replace(iter_vars=ivs)

        compose(edits, id(blk), rewrite_block)
        for loop, ext in loops.items():
            compose(edits, id(loop), lambda s, e=ext: s.replace(
                extent=E.const(E.as_const_int(e), s.loop_var.dtype)
                if E.as_const_int(e) is not None else e))

        def rewrite_scope(s):
            kids = flatten_seq(s.body)
            body = seq(*(kids[:pos] + before + [kids[pos]] + after + kids[pos + 1:]))
            return s.replace(body=body, alloc_buffers=s.alloc_buffers + tuple(allocs))

        compose(edits, id(scope_blk), rewrite_scope)
        return Result(rewrite_stmts(ctx.func, edits), [])

    def python_args(self, inputs, attrs, dialect):
        pad = self.attr(attrs, 0)
        _check_padding(attrs[0])
        if dialect == "engine":
            return [fmt(inputs[0]), pad]
        return [f"block={fmt(inputs[0])}", f"padding={pad}"]
