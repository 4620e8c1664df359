"""Block-level layout: reorder_block_iter_var (the order of a block's axes)."""
from __future__ import annotations

from ..error import ScheduleError
from ..literals import py_literal
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import expect_block, is_int


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
