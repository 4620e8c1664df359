"""The course's graphs as written, with high-level operators (the graph-optimisation
chapter's): what pass sequences start from (:mod:`.transform.steps`) when no model names
one — the graph lessons' starting points.

* ``mlp``: the chapter's ``create_model`` (``R.permute_dims``, ``R.matmul``, ``R.add``,
  ``R.nn.relu``), its weights parameters of ``main`` after ``x`` (BindParams binds them);
* ``ewise``: the chapter's first example ``MyModule``, ``main(x, y) = x * y + y``.

The weights are seeded random arrays (the course downloads trained ones; the shapes are
what matter to a pass).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from engine.ir.function import IRModule

from . import op
from .block_builder import BlockBuilder
from .expr import Var, const
from .struct_info import TensorStructInfo

__all__ = ["MLP_SHAPES", "mlp_graph", "ewise_graph", "random_mlp_weights", "GRAPHS"]

#: the MLP's weights: w0 (128, 784), b0 (128,), w1 (10, 128), b1 (10,)
MLP_SHAPES = {"w0": (128, 784), "b0": (128,), "w1": (10, 128), "b1": (10,)}


def mlp_graph(batch: int = 1, params: dict | None = None) -> IRModule:
    """The MLP as the chapter builds it with ``relax.BlockBuilder``: high-level operators,
    no TensorIR yet.  Without ``params`` the weights are parameters of ``main`` after ``x``
    (``BindParams("main", params)`` makes them constants); with them, constants (the
    chapter's ``create_model``)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 4096:
        raise ValueError(f"the batch must be an integer from 1 to 4096, got {batch!r}")
    names = ("w0", "b0", "w1", "b1")
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((batch, MLP_SHAPES["w0"][1]), "float32"))
    if params is None:
        w0, b0, w1, b1 = (Var(n, TensorStructInfo(MLP_SHAPES[n], "float32")) for n in names)
        args = [x, w0, b0, w1, b1]
    else:
        w0, b0, w1, b1 = (const(params[n], "float32") for n in names)
        args = [x]
    with bb.function("main", args):
        with bb.dataflow():
            lv0 = bb.emit(op.matmul(x, op.permute_dims(w0)))
            lv1 = bb.emit(op.add(lv0, b0))
            lv2 = bb.emit(op.nn.relu(lv1))
            lv3 = bb.emit(op.matmul(lv2, op.permute_dims(w1)))
            lv4 = bb.emit(op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)
    return bb.get()


def random_mlp_weights(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(s) * 0.1).astype("float32") for n, s in MLP_SHAPES.items()}


def ewise_graph() -> IRModule:
    """The chapter's first example, ``MyModule``: ``main(x, y) = x * y + y`` on (3, 4)."""
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((3, 4), "float32"))
    y = Var("y", TensorStructInfo((3, 4), "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            lv0 = bb.emit(op.multiply(x, y))
            gv0 = bb.emit_output(op.add(lv0, y))
        bb.emit_func_output(gv0)
    return bb.get()


#: name -> batch -> (the graph, the weights BindParams binds)
GRAPHS: dict[str, Callable[[int], tuple[IRModule, dict]]] = {
    "mlp": lambda batch: (mlp_graph(batch), random_mlp_weights()),
    "ewise": lambda batch: (ewise_graph(),
                            {"y": np.arange(12, dtype="float32").reshape(3, 4) / 8}),
}
