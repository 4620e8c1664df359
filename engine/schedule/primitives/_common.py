"""Helpers shared by the primitive modules: argument checks and small IR utilities."""
from __future__ import annotations

import re
from typing import Any

from engine.ir import expr as E
from engine.ir.stmt import Block, BlockRealize, For, IterType

from ..registry import Ctx


def loop_name(loop: For) -> str:
    return loop.loop_var.name


#: a generated loop name longer than this is shortened (see :func:`split_names`)
MAX_GENERATED_NAME = 48
_GENERATED_SUFFIX = re.compile(r"_(?:[0-9]+|fused|o|i|init)(?=_|$)")


def name_stem(name: str) -> str:
    """The name a generated loop name grew from: the text before its first generated
    suffix (``_0``, ``_fused``, ...), at most 24 characters (``i_0_j_0_fused`` -> ``i``)."""
    m = _GENERATED_SUFFIX.search(name)
    stem = name[:m.start()] if m and m.start() > 0 else name
    return stem[:24]


def split_names(base: str, n: int) -> list[str]:
    """The names of the ``n`` loops a split of loop ``base`` makes: TVM's ``base_0``,
    ``base_1``, ... — on the stem of ``base`` when those would be longer than
    :data:`MAX_GENERATED_NAME` (a link of many splits must not grow names without end)."""
    if len(base) + 1 + len(str(n - 1)) > MAX_GENERATED_NAME:
        base = name_stem(base)
    return [f"{base}_{i}" for i in range(n)]


def fused_name(names: list[str]) -> str:
    """The name of the loop a fuse makes: TVM's ``i_j_fused`` — or ``<stem of the first
    loop>_fused`` when that would be longer than :data:`MAX_GENERATED_NAME` (TVM's scheme
    doubles the names with every round of fuse and split)."""
    joined = "_".join(names) + "_fused"
    return joined if len(joined) <= MAX_GENERATED_NAME else name_stem(names[0]) + "_fused"


def subject_of(node: Any) -> str:
    if isinstance(node, For):
        return f"loop {node.loop_var.name}"
    if isinstance(node, Block):
        return f"block {node.name_hint}"
    return repr(node)


def name_of(node: Any) -> str:
    if isinstance(node, For):
        return node.loop_var.name
    if isinstance(node, Block):
        return node.name_hint
    return ""


def expect_loop(ctx: Ctx, node: Any, what: str = "loop") -> For:
    if not isinstance(node, For):
        raise ctx.error(subject_of(node), f"the {what} argument must be a loop handle, "
                        f"got {subject_of(node)}", "get loops with sch.get_loops(block)",
                        highlight=[name_of(node)])
    return node


def expect_block(ctx: Ctx, node: Any, what: str = "block") -> Block:
    if not isinstance(node, Block):
        raise ctx.error(subject_of(node), f"the {what} argument must be a block handle, "
                        f"got {subject_of(node)}", "get blocks with sch.get_block(name)",
                        highlight=[name_of(node)])
    if node is ctx.index.root_block:
        raise ctx.error("block root", "the root block cannot be scheduled", "")
    return node


def as_bool(ctx: Ctx, v: Any, name: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise ctx.error("", f"{name} must be True or False, got {v!r}", "")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def realize_of(ctx: Ctx, block: Block) -> BlockRealize:
    return ctx.index.realize[id(block)]


def binding_map(realize: BlockRealize) -> dict:
    """Block iter var -> bound expression."""
    return {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}


def is_reduction_block(block: Block) -> bool:
    return any(iv.iter_type is IterType.REDUCE for iv in block.iter_vars)


def true_const() -> E.PrimExpr:
    return E.IntImm("bool", 1)


def is_true(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def conj(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    if is_true(a):
        return b
    if is_true(b):
        return a
    return E.And(a, b)


def buffers_read(block: Block) -> list:
    return [r.buffer for r in block.reads]


def buffers_written(block: Block) -> list:
    return [r.buffer for r in block.writes]


def fresh_name(name: str, used: set) -> str:
    """``name``, or ``name_1``, ``name_2``, ... — the first not in ``used``."""
    if name not in used:
        return name
    n = 1
    while f"{name}_{n}" in used:
        n += 1
    return f"{name}_{n}"


def conjuncts(e: E.PrimExpr) -> list:
    """The terms of a conjunction ``a and b and ...`` (``[e]`` when ``e`` is no ``and``)."""
    if isinstance(e, E.And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]
