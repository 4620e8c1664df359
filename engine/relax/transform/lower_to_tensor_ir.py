"""``LowerToTensorIRPass``: the course's graph-optimisation chapter's lowering of the
high-level operators to ``R.call_tir`` of TensorIR functions made with ``call_te`` of
:mod:`engine.topi`, written — as the chapter writes it — with
:class:`~engine.relax.expr_functor.PyExprMutator` and an ``op_map`` from operator to a
function of the block builder and the call.

Before::

    lv = R.permute_dims(w0)
    lv1 = fused_matmul_add0(x, lv, b0)        # its body: R.matmul, R.add
    lv2 = R.nn.relu(lv1)

After (the fused function's body lowered too: the mutator visits every Relax function)::

    lv = R.call_tir(transpose, (w0,), out_sinfo=R.Tensor((784, 128), dtype="float32"))
    lv1 = fused_matmul_add0(x, lv, b0)        # its body: R.call_tir(matmul, ...), add
    lv2 = R.call_tir(relu, (lv1,), out_sinfo=R.Tensor((1, 128), dtype="float32"))

``FuseTIR`` then makes each ``Primitive`` function one TensorIR function.

The ``op_map`` is the chapter's (matmul, add, relu, permute_dims) and, so the chapter's
other rewrite can be lowered after it, ``multiply`` and ``ewise_fma``; an operator it does
not name is left for ``LegalizeOps``. As :mod:`.fuse_dense_add`, the mutator's builder
starts from the module, so its other functions are kept.
"""
from __future__ import annotations

from engine import topi
from engine.ir.function import IRModule
from engine.topi.broadcast import compute_nd

from .. import expr as relax
from ..expr_functor import PyExprMutator, mutator
from .base import module_pass

__all__ = ["LowerToTensorIR", "LowerToTensorIRPass", "op_map"]


@mutator
class LowerToTensorIR(PyExprMutator):
    def __init__(self, mod: IRModule, op_map) -> None:
        super().__init__(mod)
        self.mod_ = mod
        self.op_map = {
            relax.Op.get(k): v for k, v in op_map.items()
        }

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        if call.op in self.op_map:
            return self.op_map[call.op](self.builder_, call)
        return call

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            updated_func = self.visit_expr(func)
            self.builder_.update_func(global_var, updated_func)

        return self.builder_.get()


def map_matmul(bb, call):
    x, w = call.args
    return bb.call_te(topi.matmul, x, w)


def map_add(bb, call):
    a, b = call.args
    return bb.call_te(topi.add, a, b)


def map_relu(bb, call):
    return bb.call_te(topi.relu, call.args[0])


def map_transpose(bb, call):
    return bb.call_te(topi.transpose, call.args[0], )


def map_multiply(bb, call):
    a, b = call.args
    return bb.call_te(topi.multiply, a, b)


def _ewise_fma(a, b, c):
    return compute_nd(tuple(a.shape), lambda *i: a[i] * b[i] + c[i], "T_ewise_fma")


_ewise_fma.__name__ = "ewise_fma"


def map_ewise_fma(bb, call):
    a, b, c = call.args
    return bb.call_te(_ewise_fma, a, b, c)


op_map = {
    "relax.matmul": map_matmul,
    "relax.add": map_add,
    "relax.nn.relu": map_relu,
    "relax.permute_dims": map_transpose,
    "relax.multiply": map_multiply,
    "relax.ewise_fma": map_ewise_fma,
}


@module_pass(opt_level=0, name="LowerToTensorIR")
class LowerToTensorIRPass:
    """The wrapper for the LowerTensorIR pass."""

    def transform_module(self, mod, ctx):
        return LowerToTensorIR(mod, op_map).transform()
