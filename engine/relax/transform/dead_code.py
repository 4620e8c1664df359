"""``DeadCodeElimination()``: drop what no result depends on (TVM's pass of that name).

* inside dataflow blocks, a binding whose variable is never read is removed (dataflow
  bindings have no side effects), repeatedly, so chains of dead values go too;
* functions no entry reaches are removed: the entries are ``entry_functions`` (default:
  every Relax function not marked ``Primitive``, e.g. ``main``), and a function is reached
  when an entry calls it (``R.call_tir(linear0, ...)``, ``fused_...(...)``).

Before (``lv9`` is never used, ``unused_func`` never called)::

    lv0 = R.call_tir(linear0, (x, w0, b0), ...)
    lv9 = R.call_tir(relu0, (lv0,), ...)
    out = R.call_tir(linear1, (lv0, w1, b1), ...)

After: ``lv9``, ``relu0`` and ``unused_func`` are gone.
"""
from __future__ import annotations

from typing import Iterable

from engine.ir.function import IRModule

from ..expr import Call, DataflowBlock, Function, GlobalVar, Tuple
from .rewrite import ModulePass, relax_functions, uses, with_blocks

__all__ = ["DeadCodeElimination", "remove_unused_functions", "remove_unused_bindings"]


def remove_unused_bindings(func: Function) -> Function:
    """``func`` without the dataflow bindings nothing reads (to a fixed point)."""
    while True:
        count = uses(func)
        blocks, removed = [], False
        for block in func.body.blocks:
            if isinstance(block, DataflowBlock):
                kept = tuple(b for b in block.bindings if count.get(id(b.var), 0) > 0)
                removed |= len(kept) != len(block.bindings)
                blocks.append(DataflowBlock(kept))
            else:
                blocks.append(block)
        if not removed:
            return func
        func = with_blocks(func, blocks)


def _callees(expr) -> Iterable[str]:
    if isinstance(expr, GlobalVar):
        yield expr.name_hint
    elif isinstance(expr, Call):
        yield from _callees(expr.op)
        for a in expr.args:
            yield from _callees(a)
    elif isinstance(expr, Tuple):
        for f in expr.fields:
            yield from _callees(f)


def remove_unused_functions(mod: IRModule, entries: Iterable[str] | None = None) -> IRModule:
    """``mod`` without the functions its entries do not reach."""
    funcs = dict(mod.items())
    if entries is None:
        entries = [n for n, f in funcs.items()
                   if isinstance(f, Function) and not f.attr("Primitive")]
    entries = [e for e in entries if e in funcs]
    if not entries:  # a module of TensorIR functions only: nothing calls anything
        return mod
    reached, todo = set(), list(entries)
    while todo:
        name = todo.pop()
        if name in reached or name not in funcs:
            continue
        reached.add(name)
        f = funcs[name]
        if isinstance(f, Function):
            for block in f.body.blocks:
                for b in block.bindings:
                    todo.extend(_callees(b.value))
    return IRModule(tuple((n, f) for n, f in funcs.items() if n in reached))


class DeadCodeElimination(ModulePass):
    """Remove unused dataflow bindings and unreachable functions (module docstring)."""

    name = "DeadCodeElimination"
    opt_level = 1

    def __init__(self, entry_functions: Iterable[str] | None = None):
        self.entry_functions = list(entry_functions) if entry_functions is not None else None

    def transform_module(self, mod: IRModule) -> IRModule:
        funcs = dict(mod.items())
        for name, f in relax_functions(mod):
            funcs[name] = remove_unused_bindings(f)
        return remove_unused_functions(IRModule(tuple(funcs.items())), self.entry_functions)


