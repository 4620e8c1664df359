"""Reading an ONNX model (``onnx.ModelProto`` or its bytes) into a :class:`~.graph.Graph`.

A model file is hostile input.  Before anything else its size is bounded; then the number
of nodes, every tensor's rank and element count, and the total of weights; tensors stored
outside the file (ONNX "external data", which would make the reader open other files) are
refused, and so is any operator outside the supported set, by name::

    Gemm, MatMul, Add, Relu, Conv, Softmax, Reshape, Flatten   (and Constant, Identity,
    Transpose, which only move data)

Each ONNX node becomes Relax's high-level operators: ``Gemm`` is ``matmul`` (with
``permute_dims`` for ``transA``/``transB``) then ``add``; a constant ``B`` or ``C`` is
transposed and scaled by ``alpha``/``beta`` here, once.  ``Conv`` with a bias is
``nn.conv2d`` then ``add`` of the bias as ``(1, C, 1, 1)``; ``Flatten`` is ``reshape``;
``Softmax`` before opset 13 (which flattens to 2-D around ``axis``) is reshape, softmax on
the last axis, reshape back.  A call whose inputs are all constants is evaluated in numpy
at import time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .graph import OPS, Call, Graph, ImportError_, output_shape

__all__ = ["OnnxLimits", "SUPPORTED_OPS", "read_onnx"]

SUPPORTED_OPS = ("Gemm", "MatMul", "Add", "Relu", "Conv", "Softmax", "Reshape", "Flatten",
                 "Constant", "Identity", "Transpose")


@dataclass(frozen=True)
class OnnxLimits:
    """Bounds on a model read from outside (the app passes its own, from ``app.limits``)."""

    max_bytes: int = 64 * 1024 * 1024
    max_nodes: int = 200
    max_rank: int = 6
    max_tensor_elements: int = 16 * 1024 * 1024
    max_total_elements: int = 32 * 1024 * 1024


def _parse(model: Any, limits: OnnxLimits):
    import onnx

    if isinstance(model, (bytes, bytearray, memoryview)):
        if len(model) > limits.max_bytes:
            raise ImportError_(f"the ONNX file is {len(model)} bytes; the limit is "
                               f"{limits.max_bytes} bytes — export a smaller model")
        try:
            model = onnx.load_from_string(bytes(model))
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise ImportError_("this is not an ONNX model (the file could not be decoded); "
                               "save it with torch.onnx.export or onnx.save") from None
    if not isinstance(model, onnx.ModelProto):
        raise ImportError_(f"from_onnx needs an onnx.ModelProto (onnx.load(...)) or the "
                           f"bytes of an .onnx file, got {type(model).__name__}")
    if model.ByteSize() > limits.max_bytes:
        raise ImportError_(f"the ONNX model is {model.ByteSize()} bytes; the limit is "
                           f"{limits.max_bytes} bytes")
    return model


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 13


_DTYPES = {1: "float32", 7: "int64", 6: "int32", 11: "float64"}


def _to_array(tensor, limits: OnnxLimits, what: str) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    if tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data):
        raise ImportError_(f"{what} keeps its data in another file (ONNX external data); "
                           "only self-contained models are read — save with "
                           "onnx.save(model, path, save_as_external_data=False)")
    dims = tuple(int(d) for d in tensor.dims)
    _check_shape(dims, limits, what)
    if tensor.data_type not in _DTYPES:
        raise ImportError_(f"{what} has ONNX data type {tensor.data_type}; only float32 "
                           "weights (and int64 shapes) are supported")
    try:
        arr = numpy_helper.to_array(tensor)
    except Exception as e:  # noqa: BLE001
        raise ImportError_(f"{what} could not be read ({e})") from None
    if arr.shape != dims:
        raise ImportError_(f"{what} declares shape {dims} but holds {arr.size} values")
    if arr.dtype == np.float64:
        arr = arr.astype("float32")
    return arr


def _check_shape(dims: tuple, limits: OnnxLimits, what: str) -> None:
    if len(dims) > limits.max_rank:
        raise ImportError_(f"{what} has {len(dims)} dimensions; the limit is {limits.max_rank}")
    if any(d < 0 for d in dims):
        raise ImportError_(f"{what} has a negative dimension in {dims}")
    n = math.prod(dims)
    if n > limits.max_tensor_elements:
        raise ImportError_(f"{what} has {n} elements; the limit is "
                           f"{limits.max_tensor_elements} per tensor")


def _attrs(node) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        out[a.name] = v
    return out


def _input_shape(value_info, shape_dict: dict, limits: OnnxLimits) -> tuple[tuple, str]:
    name = value_info.name
    ttype = value_info.type.tensor_type
    if ttype.elem_type != 1:
        raise ImportError_(f"input {name!r} has ONNX element type {ttype.elem_type}; only "
                           "float32 inputs are supported")
    if name in shape_dict:
        dims = tuple(int(d) for d in shape_dict[name])
    else:
        dims = []
        for d in ttype.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            else:
                sym = d.dim_param or "?"
                raise ImportError_(f"input {name!r} has a dimension without a size ({sym!r}); "
                                   f"give it one: from_onnx(model, shape_dict={{{name!r}: "
                                   "(1, ...)}})")
        dims = tuple(dims)
    if any(d < 1 for d in dims):
        raise ImportError_(f"input {name!r}: every dimension must be at least 1, got {dims}")
    _check_shape(dims, limits, f"input {name!r}")
    return dims, "float32"


class _Reader:
    """One pass over the nodes, in order (ONNX requires topological order)."""

    def __init__(self, limits: OnnxLimits, opset: int):
        self.limits = limits
        self.opset = opset
        self.g = Graph()
        self.total = 0
        self.fresh = 0
        self.alias: dict[str, str] = {}   # Identity's output -> its input

    # values -------------------------------------------------------------------------
    def add_constant(self, name: str, arr: np.ndarray) -> str:
        self.total += arr.size
        if self.total > self.limits.max_total_elements:
            raise ImportError_(f"the model's weights hold more than "
                               f"{self.limits.max_total_elements} values in all (the limit)")
        self.g.constants[name] = arr
        self.g.shapes[name] = tuple(arr.shape)
        return name

    def temp(self, base: str) -> str:
        self.fresh += 1
        return f"{base}__{self.fresh}"

    def const(self, name: str) -> np.ndarray | None:
        return self.g.constants.get(name)

    def need(self, name: str, where: str) -> str:
        if name not in self.g.shapes:
            raise ImportError_(f"{where} reads {name!r}, which no earlier node or input "
                               "produces (the graph must be in topological order)")
        return name

    def emit(self, op: str, inputs: list[str], output: str, source: str, **attrs) -> str:
        call = Call(op, tuple(inputs), output, tuple(sorted(attrs.items())), source)
        shape = output_shape(call, [self.g.shapes[i] for i in inputs])
        _check_shape(shape, self.limits, f"{source}'s output")
        if all(i in self.g.constants for i in inputs):  # fold: evaluate now, in numpy
            vals = [self.g.constants[i] for i in inputs]
            return self.add_constant(output, np.asarray(OPS[op].numpy(*vals, **attrs),
                                                        dtype=vals[0].dtype))
        self.g.calls.append(call)
        self.g.shapes[output] = shape
        return output

    # nodes ------------------------------------------------------------------------
    def node(self, node) -> None:
        src = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        if node.domain not in ("", "ai.onnx"):
            raise ImportError_(f"{src}: operators of domain {node.domain!r} are not supported")
        if node.op_type not in SUPPORTED_OPS:
            raise ImportError_(f"the model uses the ONNX operator {node.op_type!r}"
                               f"{' (node ' + repr(node.name) + ')' if node.name else ''}, "
                               f"which is not supported; supported: {', '.join(SUPPORTED_OPS)}")
        ins = [self.alias.get(i, i) for i in node.input]
        outs = [o for o in node.output]
        attrs = _attrs(node)
        if node.op_type != "Constant":
            for i in ins:
                if i:
                    self.need(i, src)
        getattr(self, "op_" + node.op_type)(src, ins, outs, attrs)

    def _arity(self, src, ins, lo, hi=None):
        present = [i for i in ins if i]
        if not lo <= len(present) <= (hi or lo):
            raise ImportError_(f"{src} has {len(present)} inputs; it takes "
                               f"{lo if hi is None else f'{lo} to {hi}'}")

    def op_Constant(self, src, ins, outs, attrs):
        if "value" not in attrs:
            raise ImportError_(f"{src}: only Constant nodes with a 'value' tensor are supported")
        self.add_constant(outs[0], _to_array(attrs["value"], self.limits, src))

    def op_Identity(self, src, ins, outs, attrs):
        self._arity(src, ins, 1)
        self.alias[outs[0]] = ins[0]

    def op_Relu(self, src, ins, outs, attrs):
        self._arity(src, ins, 1)
        self.emit("nn.relu", ins, outs[0], src)

    def op_Add(self, src, ins, outs, attrs):
        self._arity(src, ins, 2)
        self.emit("add", ins, outs[0], src)

    def op_MatMul(self, src, ins, outs, attrs):
        self._arity(src, ins, 2)
        self.emit("matmul", ins, outs[0], src)

    def op_Transpose(self, src, ins, outs, attrs):
        self._arity(src, ins, 1)
        perm = attrs.get("perm")
        self.emit("permute_dims", ins, outs[0], src,
                  axes=tuple(int(p) for p in perm) if perm is not None else None)

    def op_Gemm(self, src, ins, outs, attrs):
        self._arity(src, ins, 2, 3)
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        a, b = ins[0], ins[1]
        c = ins[2] if len(ins) > 2 and ins[2] else None
        for name in (a, b):
            if len(self.g.shapes[name]) != 2:
                raise ImportError_(f"{src}: Gemm's A and B must be matrices, {name!r} has "
                                   f"shape {self.g.shapes[name]}")
        if attrs.get("transA", 0):
            a = self.emit("permute_dims", [a], self.temp(outs[0] + "_At"), src, axes=(1, 0))
        if attrs.get("transB", 0):
            b = self.emit("permute_dims", [b], self.temp(outs[0] + "_Bt"), src, axes=(1, 0))
        if alpha != 1.0:
            if b not in self.g.constants:
                raise ImportError_(f"{src}: alpha={alpha} with a computed B is not supported "
                                   "(only with B a weight, which is scaled once at import)")
            b = self.add_constant(self.temp(outs[0] + "_Bscaled"),
                                  (self.g.constants[b] * np.float32(alpha)).astype("float32"))
        if c is None or beta == 0.0:
            self.emit("matmul", [a, b], outs[0], src)
            return
        if beta != 1.0:
            if c not in self.g.constants:
                raise ImportError_(f"{src}: beta={beta} with a computed C is not supported "
                                   "(only with C a weight, which is scaled once at import)")
            c = self.add_constant(self.temp(outs[0] + "_Cscaled"),
                                  (self.g.constants[c] * np.float32(beta)).astype("float32"))
        mm = self.emit("matmul", [a, b], self.temp(outs[0] + "_mm"), src)
        self.emit("add", [mm, c], outs[0], src)

    def op_Conv(self, src, ins, outs, attrs):
        self._arity(src, ins, 2, 3)
        x, w = ins[0], ins[1]
        xs, ws = self.g.shapes[x], self.g.shapes[w]
        if len(xs) != 4 or len(ws) != 4:
            raise ImportError_(f"{src}: only 2-D convolutions (NCHW input, OIHW weight) are "
                               f"supported, got shapes {xs} and {ws}")
        if int(attrs.get("group", 1)) != 1:
            raise ImportError_(f"{src}: grouped convolutions (group={attrs['group']}) are not "
                               "supported")
        if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != ws[2:]:
            raise ImportError_(f"{src}: kernel_shape {tuple(attrs['kernel_shape'])} does not "
                               f"match the weight's {ws[2:]}")
        strides = tuple(int(s) for s in attrs.get("strides", (1, 1)))
        dilation = tuple(int(d) for d in attrs.get("dilations", (1, 1)))
        pads = tuple(int(p) for p in attrs.get("pads", (0, 0, 0, 0)))
        auto_pad = attrs.get("auto_pad", "NOTSET")
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            pads = _same_pads(xs[2:], ws[2:], strides, dilation, auto_pad == "SAME_UPPER")
        elif auto_pad == "VALID":
            pads = (0, 0, 0, 0)
        elif auto_pad != "NOTSET":
            raise ImportError_(f"{src}: auto_pad={auto_pad!r} is not an ONNX value")
        if len(strides) != 2 or len(dilation) != 2 or len(pads) != 4:
            raise ImportError_(f"{src}: strides, dilations and pads must be 2, 2 and 4 integers")
        padding = (pads[0], pads[1], pads[2], pads[3])  # ONNX: h_begin, w_begin, h_end, w_end
        has_bias = len(ins) > 2 and ins[2]
        out = self.temp(outs[0] + "_conv") if has_bias else outs[0]
        y = self.emit("nn.conv2d", [x, w], out, src, strides=strides, padding=padding,
                      dilation=dilation)
        if has_bias:
            bias = ins[2]
            if self.g.shapes[bias] != (ws[0],):
                raise ImportError_(f"{src}: the bias has shape {self.g.shapes[bias]}, "
                                   f"expected ({ws[0]},)")
            b4 = self.emit("reshape", [bias], self.temp(outs[0] + "_bias"), src,
                           shape=(1, ws[0], 1, 1))
            self.emit("add", [y, b4], outs[0], src)

    def op_Softmax(self, src, ins, outs, attrs):
        self._arity(src, ins, 1)
        shape = self.g.shapes[ins[0]]
        nd = len(shape)
        axis = int(attrs.get("axis", -1 if self.opset >= 13 else 1))
        if not -nd <= axis < nd:
            raise ImportError_(f"{src}: axis {axis} is out of range for shape {shape}")
        axis %= nd
        if self.opset >= 13 or axis == nd - 1 and nd == 2:
            self.emit("nn.softmax", ins, outs[0], src, axis=axis)
            return
        # before opset 13: softmax of the input flattened to 2-D around axis
        flat = (math.prod(shape[:axis]), math.prod(shape[axis:]))
        r = self.emit("reshape", ins, self.temp(outs[0] + "_2d"), src, shape=flat)
        s = self.emit("nn.softmax", [r], self.temp(outs[0] + "_sm"), src, axis=1)
        self.emit("reshape", [s], outs[0], src, shape=shape)

    def op_Reshape(self, src, ins, outs, attrs):
        self._arity(src, ins, 2)
        target = self.const(ins[1])
        if target is None:
            raise ImportError_(f"{src}: the target shape must be a constant of the model "
                               "(an initializer or a Constant node)")
        shape = self.g.shapes[ins[0]]
        new = [int(s) for s in np.asarray(target).reshape(-1)]
        if not attrs.get("allowzero", 0):
            new = [shape[d] if s == 0 and d < len(shape) else s for d, s in enumerate(new)]
        self.emit("reshape", [ins[0]], outs[0], src, shape=tuple(new))

    def op_Flatten(self, src, ins, outs, attrs):
        self._arity(src, ins, 1)
        shape = self.g.shapes[ins[0]]
        axis = int(attrs.get("axis", 1))
        if not -len(shape) <= axis <= len(shape):
            raise ImportError_(f"{src}: axis {axis} is out of range for shape {shape}")
        if axis < 0:
            axis += len(shape)
        self.emit("reshape", ins, outs[0], src,
                  shape=(math.prod(shape[:axis]), math.prod(shape[axis:])))


def _same_pads(spatial, kernel, strides, dilation, upper: bool) -> tuple[int, int, int, int]:
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilation):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if upper else big)
        end.append(big if upper else small)
    return (begin[0], begin[1], end[0], end[1])


def read_onnx(model: Any, shape_dict: dict | None = None,
              limits: OnnxLimits | None = None) -> Graph:
    """The :class:`Graph` of an ONNX model (a ``ModelProto`` or the bytes of an .onnx
    file), or an :class:`ImportError_` saying what could not be read."""
    limits = limits or OnnxLimits()
    model = _parse(model, limits)
    graph = model.graph
    if len(graph.node) > limits.max_nodes:
        raise ImportError_(f"the model has {len(graph.node)} nodes; the limit is "
                           f"{limits.max_nodes}")
    reader = _Reader(limits, _opset(model))
    g = reader.g
    for init in graph.initializer:
        reader.add_constant(init.name, _to_array(init, limits, f"weight {init.name!r}"))
    shape_dict = dict(shape_dict or {})
    for vi in graph.input:
        if vi.name in g.constants:
            continue  # older exporters list the initializers among the inputs too
        g.inputs[vi.name] = _input_shape(vi, shape_dict, limits)
        g.shapes[vi.name] = g.inputs[vi.name][0]
    if not g.inputs:
        raise ImportError_("the model has no inputs besides its weights")
    for node in graph.node:
        reader.node(node)
    if not graph.output:
        raise ImportError_("the model declares no outputs")
    for out in graph.output:
        name = reader.alias.get(out.name, out.name)
        if name not in g.shapes:
            raise ImportError_(f"the output {out.name!r} is not produced by any node")
        if name in g.constants or name in g.inputs:
            raise ImportError_(f"the output {out.name!r} is computed by no operator; "
                               "nothing to compute")
        g.outputs.append(name)
    return g
