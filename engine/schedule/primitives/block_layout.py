"""Block-level layout: reorder_block_iter_var (the order of a block's axes) and
transform_block_layout (its iteration space remapped, its loops rebuilt)."""
from __future__ import annotations

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import Range
from engine.ir.functor import Mutator, collect_vars, substitute
from engine.ir.stmt import BufferStore, For, ForKind, IterType, IterVar
from engine.ir.structural import structural_equal

from ..error import ScheduleError, TraceError
from ..literals import py_literal
from ..registry import Ctx, Primitive, Result, fmt, py_str, register
from ..tree import replace_stmts
from ._common import expect_block, is_int, is_true
from .index_map_check import IndexMapError
from .index_map_inverse import invert
from .layout import (_bind_sampled, expr_text, function_sizes, map_text, normalize_index_map,
                     parse_index_map)


@register
class ReorderBlockIterVar(Primitive):
    kind = "ReorderBlockIterVar"
    attr_kinds = ()
    method = "reorder_block_iter_var"
    int_list_inputs = (1,)

    def call(self, sch, block, new_order):
        """Reorder the axes (iter vars) of a block; its bindings follow, so the program
        computes the same thing.

        It requires: 1) ``block`` is a valid block handle; 2) ``new_order`` is a
        permutation of ``0 .. number of axes - 1`` (axis ``new_order[p]`` moves to
        position ``p``).

        Before::

            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])

        Call::

            sch.reorder_block_iter_var(sch.get_block("C"), [2, 0, 1])

        After::

            with T.block("C"):
                vk, vi, vj = T.axis.remap("RSS", [k, i, j])
        """
        if not isinstance(new_order, (list, tuple)) or \
                not all(is_int(x) for x in new_order):
            raise ScheduleError(self.method, "new_order", "new_order must be a list of axis "
                                f"positions such as [2, 0, 1], got {new_order!r}"[:200],
                                "list every axis position once")
        sch._run(self, [block, list(new_order)], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        order = list(inputs[1]) if len(inputs) > 1 and \
            isinstance(inputs[1], (list, tuple)) else None
        n = len(blk.iter_vars)
        if order is None or sorted(order) != list(range(n)) or \
                not all(is_int(x) for x in order):
            raise ctx.error(f"block {blk.name_hint}", f"new_order {order!r} is not a "
                            f"permutation of 0 .. {n - 1} (the block has {n} axes)",
                            f"list every position 0 .. {n - 1} once, e.g. "
                            f"{list(range(n))[::-1]}", highlight=[blk.name_hint])
        realize = ctx.index.realize[id(blk)]
        new_blk = blk.replace(iter_vars=tuple(blk.iter_vars[p] for p in order))
        new = realize.replace(iter_values=tuple(realize.iter_values[p] for p in order),
                              block=new_blk)
        return Result(replace_stmts(ctx.func, {realize: new}), [])

    def python_args(self, inputs, attrs, dialect):
        order = py_literal(list(inputs[1]), "new_order") if len(inputs) > 1 else "[]"
        if dialect == "engine":
            return [fmt(inputs[0]), order]
        return [f"block={fmt(inputs[0])}", f"new_order={order}"]


class _Simplify(Mutator):
    """Buffer indices and regions simplified under the new axes' ranges."""

    def __init__(self, ranges: dict):
        self.ranges = ranges

    def index(self, i):
        return _fold_divmod(simplify(self.visit(i), self.ranges))

    def visit_BufferLoad(self, e):
        return E.BufferLoad(e.buffer, tuple(self.index(i) for i in e.indices))

    def visit_BufferStore(self, s):
        return BufferStore(s.buffer, self.visit(s.value),
                           tuple(self.index(i) for i in s.indices))

    def visit_Range(self, r):
        return Range(self.index(r.min), simplify(r.extent, self.ranges))


def _fold_divmod(e: E.PrimExpr) -> E.PrimExpr:
    """``x // d * d + x % d`` is ``x`` for a symbolic ``d`` too (floor division's identity;
    the simplifier folds it for constants): the fused index an inverse rebuilds."""
    if isinstance(e, E.Add):
        a, b = _fold_divmod(e.a), _fold_divmod(e.b)
        for q, r in ((a, b), (b, a)):
            if isinstance(q, E.Mul) and isinstance(r, E.FloorMod):
                for div, d in ((q.a, q.b), (q.b, q.a)):
                    if isinstance(div, E.FloorDiv) and structural_equal(div.b, d) and \
                            structural_equal(r.b, d) and structural_equal(div.a, r.a):
                        return r.a
        return e if a is e.a and b is e.b else E.Add(a, b)
    return e


@register
class TransformBlockLayout(Primitive):
    kind = "TransformBlockLayout"
    attr_kinds = (("index_map", "str"),)
    method = "transform_block_layout"

    def call(self, sch, block, index_map):
        """Change the iteration space of a block: its axes ``(v0, v1, ...)`` become
        ``index_map(v0, v1, ...)``, and a new loop nest ``ax0, ax1, ...`` walks the new
        space; the body reads its old axes back through the map's inverse, so the block
        computes the same elements (in another order).

        It requires: 1) ``block`` is a valid block handle; 2) the loops above it start at 0
        and hold only this block; 3) its bindings are those loops themselves, in order
        (``T.axis.remap``); 4) ``index_map`` (a lambda or lambda string) takes one
        parameter per axis and is a bijection made of splits (``//``, ``%``), fuses
        (``a * n + b``) and permutations — over symbolic extents too, where it may name
        the function's sizes (``lambda i, j: (i * n + j,)`` over ``(3, n)``); 5) each new
        axis mixes only spatial or only reduction axes.

        Before::

            for i, j in T.grid(10, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

        Call::

            sch.transform_block_layout(sch.get_block("B"), "lambda i, j: (j, i)")

        After::

            for ax0, ax1 in T.grid(8, 10):
                with T.block("B"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    B[v1, v0] = A[v1, v0] * T.float32(2)
        """
        ivs = getattr(_block_of(sch, block), "iter_vars", ())
        try:
            text = normalize_index_map(_bind_sampled(index_map, sch), len(ivs) or None,
                                       ivs[0].var.dtype if ivs else "int32")
        except IndexMapError as e:
            raise ScheduleError(self.method, "index_map", str(e), "") from None
        sch._run(self, [block], [text])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        subj, hl = f"block {blk.name_hint}", [blk.name_hint]
        text = attrs[0] if attrs else None
        dtype = blk.iter_vars[0].var.dtype if blk.iter_vars else "int32"
        try:
            params, exprs = parse_index_map(normalize_index_map(text),
                                            free=function_sizes(ctx.func), dtype=dtype)
        except IndexMapError as e:
            raise ctx.error(subj, str(e), "") from None
        realize = ctx.index.realize[id(blk)]
        loops = ctx.index.loops_above(blk)
        for lp in loops:
            if not E.is_const_int(lp.min, 0):
                raise ctx.error(subj, f"loop {lp.loop_var.name} does not start at 0", "",
                                highlight=hl + [lp.loop_var.name])
        if loops and ctx.index.blocks_under(loops[0]) != [blk]:
            raise ctx.error(subj, f"loop {loops[0].loop_var.name} holds other blocks too: the "
                            "loops above the block must hold only it", "", highlight=hl)
        for outer, inner in zip(loops, loops[1:]):
            if outer.body is not inner:
                raise ctx.error(subj, f"loop {inner.loop_var.name} is not the only child of "
                                f"loop {outer.loop_var.name}", "", highlight=hl)
        if loops and loops[-1].body is not realize:
            raise ctx.error(subj, "the block is not the only child of its loop", "",
                            highlight=hl)
        if not (len(loops) == len(blk.iter_vars) and
                all(v is lp.loop_var for v, lp in zip(realize.iter_values, loops)) and
                is_true(realize.predicate)):
            raise ctx.error(subj, "its bindings are not the loops above it, one each in "
                            "order (the block must be bound as by T.axis.remap, without "
                            "T.where)", "transform the layout before splitting or fusing its "
                            "loops", highlight=hl)
        if len(params) != len(blk.iter_vars):
            raise ctx.error(subj, f"the index map takes {len(params)} index(es) but the block "
                            f"has {len(blk.iter_vars)} axes", "give the lambda one parameter "
                            "per axis", highlight=hl)
        extents = []
        for iv in blk.iter_vars:
            if not E.is_const_int(iv.dom.min, 0):
                raise ctx.error(subj, f"axis {iv.var.name} does not start at 0", "",
                                highlight=hl)
            n = E.as_const_int(iv.dom.extent)
            extents.append(iv.dom.extent if n is None else n)   # a size (symbolic) too
        try:
            shape, build = invert(params, exprs, extents)
        except IndexMapError as e:
            raise ctx.error(subj, f"the index map is not bijective affine: {e}", "use splits "
                            "(i // 4, i % 4), fuses (i * 8 + j) and permutations",
                            highlight=hl) from None
        types = {p: iv.iter_type for p, iv in zip(params, blk.iter_vars)}
        new_ivs, new_vars = [], []
        for k, (x, n) in enumerate(zip(exprs, shape)):
            used = {types[v] for v in collect_vars(x) if v in types}
            if isinstance(n, int) and n == 1:
                kind = IterType.SPATIAL
            elif len(used) == 1:
                kind = used.pop()
            else:
                raise ctx.error(subj, f"new axis {k} ({expr_text(x)}) mixes spatial and "
                                "reduction axes", "keep spatial and reduction axes apart",
                                highlight=hl)
            var = E.Var(f"v{k}", blk.iter_vars[0].var.dtype if blk.iter_vars else "int32")
            new_vars.append(var)
            new_ivs.append(IterVar(var, Range(E.const(0, var.dtype), _size(n, var.dtype)),
                                   kind))
        olds = build(new_vars)
        body_map = {iv.var: o for iv, o in zip(blk.iter_vars, olds)}
        ranges = {v: (0, n - 1) for v, n in zip(new_vars, shape) if isinstance(n, int)}
        new_blk = _Simplify(ranges).visit(substitute(blk, body_map)).replace(
            iter_vars=tuple(new_ivs))
        loop_vars = [E.Var(f"ax{k}", v.dtype) for k, v in enumerate(new_vars)]
        body = realize.replace(iter_values=tuple(loop_vars), block=new_blk)
        for v, n in reversed(list(zip(loop_vars, shape))):
            body = For(v, E.const(0, v.dtype), _size(n, v.dtype), ForKind.SERIAL, body)
        target = loops[0] if loops else realize
        return Result(replace_stmts(ctx.func, {target: body}), [])

    def check_attrs(self, attrs) -> None:
        super().check_attrs(attrs)
        _map_text(attrs[0])

    def python_args(self, inputs, attrs, dialect):
        text = _map_text(attrs[0] if attrs else None)
        if dialect == "engine":
            return [fmt(inputs[0]), py_str(text)]
        return [f"block={fmt(inputs[0])}", f"index_map={text}"]


def _size(n, dtype: str) -> E.PrimExpr:
    """An extent (an int, or an expression of the function's sizes) as an expression."""
    return E.const(n, dtype) if isinstance(n, int) else n


def _block_of(sch, block):
    """The block a handle stands for (None when it cannot be found here: ``apply`` says
    why)."""
    try:
        return sch._lookup(block, "transform_block_layout")[1]
    except ScheduleError:
        return None


def _map_text(raw) -> str:
    try:
        return map_text(*parse_index_map(normalize_index_map(raw), free="any"))
    except IndexMapError as e:
        raise TraceError(f"TransformBlockLayout's index_map: {e}") from None
    except RecursionError:
        raise TraceError("TransformBlockLayout's index_map is nested too deeply") from None
