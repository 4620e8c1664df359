"""What the Relax passes share: the pass object (:class:`.base.Pass`), walking and rebuilding a function's
bindings, the uses of each variable, fresh function names."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from engine.ir.function import IRModule

from ..expr import Call, Expr, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from .base import Pass as ModulePass

__all__ = ["ModulePass", "relax_functions", "map_bindings", "fresh_name", "uses",
           "vars_in", "with_blocks"]


def relax_functions(mod: IRModule) -> Iterator[tuple[str, Function]]:
    for name, f in mod.items():
        if isinstance(f, Function):
            yield name, f


def with_blocks(func: Function, blocks: list, body: Expr | None = None) -> Function:
    seq = SeqExpr(tuple(blocks), func.body.body if body is None else body)
    return Function(func.name, func.params, seq, func.ret_struct_info, func.attrs)


def map_bindings(func: Function, fn: Callable[[VarBinding], Any]) -> Function:
    """``func`` with each binding replaced by ``fn(binding)`` (a binding, a list of
    bindings, or None to drop it)."""
    blocks, changed = [], False
    for block in func.body.blocks:
        out = []
        for b in block.bindings:
            new = fn(b)
            if new is None:
                changed = True
                continue
            if isinstance(new, list):
                changed = True
                out.extend(new)
            else:
                changed |= new is not b
                out.append(new)
        blocks.append(type(block)(tuple(out)))
    return with_blocks(func, blocks) if changed else func


def vars_in(expr: Any) -> Iterator[Var]:
    """The Relax variables an expression reads (through calls, tuples, items)."""
    if isinstance(expr, Var):
        yield expr
    elif isinstance(expr, Call):
        for a in expr.args:
            yield from vars_in(a)
    elif isinstance(expr, Tuple):
        for f in expr.fields:
            yield from vars_in(f)
    elif isinstance(expr, TupleGetItem):
        yield from vars_in(expr.tuple_value)
    elif isinstance(expr, SeqExpr):
        for block in expr.blocks:
            for b in block.bindings:
                yield from vars_in(b.value)
        yield from vars_in(expr.body)


def uses(func: Function) -> dict[int, int]:
    """id(var) -> how many times the function reads it (the returned value counts)."""
    count: dict[int, int] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            for v in vars_in(b.value):
                count[id(v)] = count.get(id(v), 0) + 1
    for v in vars_in(func.body.body):
        count[id(v)] = count.get(id(v), 0) + 1
    return count


def fresh_name(base: str, taken: Any) -> str:
    """``base``, else ``base1``, ``base2``, ... (TVM's names for repeated functions)."""
    if base not in taken:
        return base
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


