"""The course's MLP as an IRModule: three TensorIR functions and the Relax ``main``
that calls them (chapter "end-to-end model execution")::

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"), w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")
            out = R.call_tir(linear1, (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out

``linear0``/``linear1`` are :func:`engine.topi.linear` (``Y = X @ W.T``, ``Z = Y + B``),
``relu0`` the course's ``Y = max(X, 0)``; all made with :mod:`engine.te`, for any batch.
"""
from __future__ import annotations

from engine import te, topi
from engine.ir.function import IRModule, PrimFunc
from engine.relax.expr import (Constant, DataflowBlock, DataflowVar, Function, GlobalVar,
                               SeqExpr, Var, VarBinding, call_tir)
from engine.relax.struct_info import TensorStructInfo

from .mlp import SHAPES

__all__ = ["mlp_module", "linear_func", "relu_func", "mlp_graph"]


def linear_func(name: str, batch: int, n_in: int, n_out: int) -> PrimFunc:
    x = te.placeholder((batch, n_in), "float32", name="X")
    w = te.placeholder((n_out, n_in), "float32", name="W")
    b = te.placeholder((n_out,), "float32", name="B")
    return te.create_prim_func([x, w, b, topi.linear(x, w, b)], name=name)


def relu_func(name: str, batch: int, n: int) -> PrimFunc:
    x = te.placeholder((batch, n), "float32", name="X")
    y = te.compute((batch, n), lambda i, j: te.max(x[i, j], te.const(0, "float32")), name="Y")
    return te.create_prim_func([x, y], name=name)


def mlp_module(batch: int = 1, params: dict | None = None) -> IRModule:
    """The course's MLP module for a batch of ``batch`` images.  Without ``params`` the
    weights are parameters of ``main`` (as in the course's listing); with them (the dict of
    :func:`engine.models.mlp.trained_mlp`) they are constants and ``main`` takes ``x``
    only (what ``BindParams("main", params)`` makes)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 4096:
        raise ValueError(f"the batch must be an integer from 1 to 4096, got {batch!r}")
    hidden, n_in = SHAPES["w0"]
    n_out = SHAPES["w1"][0]

    def t(*shape):
        return TensorStructInfo(shape, "float32")

    x = Var("x", t(batch, n_in))
    names = ("w0", "b0", "w1", "b1")
    if params is None:
        weights = [Var(n, t(*SHAPES[n])) for n in names]
        args = [x] + weights
    else:
        for n in names:
            if tuple(params[n].shape) != SHAPES[n]:
                raise ValueError(f"weight {n} has shape {params[n].shape}, expected {SHAPES[n]}")
        weights = [Constant.of(params[n], "float32") for n in names]
        args = [x]
    w0, b0, w1, b1 = weights
    lv0 = DataflowVar("lv0", t(batch, hidden))
    lv1 = DataflowVar("lv1", t(batch, hidden))
    out = Var("out", t(batch, n_out))
    bindings = (
        VarBinding(lv0, call_tir(GlobalVar("linear0"), (x, w0, b0), lv0.struct_info)),
        VarBinding(lv1, call_tir(GlobalVar("relu0"), (lv0,), lv1.struct_info)),
        VarBinding(out, call_tir(GlobalVar("linear1"), (lv1, w1, b1), out.struct_info)),
    )
    main = Function("main", tuple(args), SeqExpr((DataflowBlock(bindings),), out),
                    out.struct_info, (("global_symbol", "main"),))
    return IRModule((
        ("linear0", linear_func("linear0", batch, n_in, hidden)),
        ("relu0", relu_func("relu0", batch, hidden)),
        ("linear1", linear_func("linear1", batch, hidden, n_out)),
        ("main", main),
    ))



def mlp_graph(batch: int = 1, params: dict | None = None) -> IRModule:
    """The MLP as the graph-optimisation chapter builds it (high-level operators):
    :func:`engine.relax.course_graphs.mlp_graph`."""
    from engine.relax.course_graphs import mlp_graph as graph
    return graph(batch, params)
