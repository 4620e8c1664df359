"""``EwiseFMA``: the course's graph-optimisation chapter's first rewrite, ``add(multiply(a,
b), c)`` made one ``R.ewise_fma(a, b, c)``, written — as the chapter writes it — with
:class:`~engine.relax.expr_functor.PyExprMutator`.

Before (the chapter's ``MyModule``)::

    lv0 = R.multiply(x, y)
    gv0 = R.add(lv0, y)

After ``EwiseFMA()(mod)`` (the rewriter, then the chapter's ``remove_all_unused``)::

    gv0 = R.ewise_fma(x, y, y)

:class:`EwiseFMARewriter` is the chapter's class unchanged; :class:`EwiseFMA` runs it on
every Relax function of a module (a pass the model page offers by name).
"""
from __future__ import annotations

from engine.ir.function import IRModule

from .. import expr as relax
from ..expr_functor import PyExprMutator, mutator
from .base import Pass
from .dead_code import remove_unused_bindings as remove_all_unused

__all__ = ["EwiseFMARewriter", "EwiseFMA"]


@mutator
class EwiseFMARewriter(PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        add_op = relax.Op.get("relax.add")
        multiply_op = relax.Op.get("relax.multiply")
        ewise_fma_op = relax.Op.get("relax.ewise_fma")

        if call.op != add_op:
            return call

        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != multiply_op:
            return call

        fma_call = relax.Call(
            ewise_fma_op, [value.args[0], value.args[1], call.args[1]], None, None
        )
        return fma_call


class EwiseFMA(Pass):
    """:class:`EwiseFMARewriter` on each Relax function of the module, then the bindings
    left unused removed (``remove_all_unused``)."""

    name = "EwiseFMA"
    opt_level = 0

    def transform_module(self, mod: IRModule) -> IRModule:
        funcs = []
        for name, func in mod.functions:
            if isinstance(func, relax.Function):
                updated = EwiseFMARewriter().visit_expr(func)
                if updated is not func:
                    func = remove_all_unused(updated)
            funcs.append((name, func))
        return IRModule(tuple(funcs))
