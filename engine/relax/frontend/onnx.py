"""``engine.relax.from_onnx(model)``: an ONNX model as a Relax IRModule (TVM's
``tvm.relax.frontend.onnx.from_onnx``), how PyTorch users bring a model::

    torch.onnx.export(net, torch.zeros(1, 784), "mlp.onnx")
    mod = engine.relax.from_onnx(onnx.load("mlp.onnx"))

The graph's inputs become the parameters of ``main``; its weights become constants
(``meta[relay.Constant][i]``); each node becomes high-level operators in one dataflow
block (:mod:`.onnx_reader` says which).  ``LegalizeOps`` then makes them TensorIR::

    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        with R.dataflow():
            lv = R.matmul(x, metadata["relax.expr.Constant"][0])
            lv1 = R.add(lv, metadata["relax.expr.Constant"][1])
            lv2 = R.nn.relu(lv1)
            ...
"""
from __future__ import annotations

import re
from typing import Any

from engine.ir.function import IRModule

from ..expr import (Call, Constant, DataflowBlock, DataflowVar, Function, Op, SeqExpr,
                    ShapeExpr, Tuple, Var, VarBinding)
from ..op import OpError, get_op, normalize_attrs
from ..struct_info import TensorStructInfo
from .graph import Graph, ImportError_
from .onnx_reader import OnnxLimits, read_onnx

__all__ = ["from_onnx", "graph_to_relax", "ImportError_", "OnnxLimits"]


def _name(raw: str, taken: set[str], fallback: str) -> str:
    """A Python identifier from an ONNX value name (``onnx::Gemm_0`` -> ``onnx_Gemm_0``)."""
    s = re.sub(r"\W", "_", raw or "")[:40] or fallback
    if s[0].isdigit():
        s = "v" + s
    out, k = s, 0
    while out in taken:
        k += 1
        out = f"{s}_{k}"
    taken.add(out)
    return out


def graph_to_relax(g: Graph, func_name: str = "main") -> IRModule:
    """The Relax module of a :class:`~.graph.Graph`."""
    taken: set[str] = set()
    env: dict[str, Any] = {}
    params = []
    for name, (shape, dtype) in g.inputs.items():
        v = Var(_name(name, taken, "x"), TensorStructInfo(shape, dtype))
        env[name] = v
        params.append(v)
    for name, arr in g.constants.items():
        env[name] = Constant.of(arr)
    bindings = []
    outputs = set(g.outputs)
    for k, call in enumerate(g.calls):
        op = get_op("relax." + call.op)
        attrs = dict(call.attrs)
        args = [env[i] for i in call.inputs]
        if call.op == "reshape":
            args.append(ShapeExpr(tuple(attrs.pop("shape"))))
        try:
            norm = normalize_attrs(op, attrs)
            sinfo = op.infer([a.struct_info for a in args], dict(norm))
        except OpError as e:
            raise ImportError_(f"{call.source}: {e}") from None
        var_cls = Var if call.output in outputs else DataflowVar
        var = var_cls(_name("gv" if call.output in outputs else "lv", taken, "lv"), sinfo)
        bindings.append(VarBinding(var, Call(Op(op.name), tuple(args), norm, (), sinfo)))
        env[call.output] = var
    outs = [env[o] for o in g.outputs]
    result = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    body = SeqExpr((DataflowBlock(tuple(bindings)),), result)
    func = Function(func_name, tuple(params), body, result.struct_info,
                    (("global_symbol", func_name),))
    return IRModule(((func_name, func),))


def from_onnx(model: Any, shape_dict: dict | None = None,
              limits: OnnxLimits | None = None) -> IRModule:
    """The Relax IRModule of an ONNX model (an ``onnx.ModelProto`` or the bytes of an
    .onnx file).  ``shape_dict`` gives sizes to inputs declared without them (a dynamic
    batch); ``limits`` bounds what is read (:class:`OnnxLimits`).  Raises
    :class:`ImportError_` (a ``ValueError``) naming what is not supported."""
    return graph_to_relax(read_onnx(model, shape_dict, limits))
