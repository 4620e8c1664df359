"""Reading an ONNX model (``onnx.ModelProto`` or its bytes) into a :class:`~.graph.Graph`.

A model file is hostile input.  Before anything else its size is bounded; then the number
of nodes, every tensor's rank and element count, and the total of weights; tensors stored
outside the file (ONNX "external data", which would make the reader open other files) are
refused, and so is any operator outside the supported set, by name::

    Gemm, MatMul, Add, Relu, Conv, Softmax, Reshape, Flatten   (and Constant, Identity,
    Transpose, which only move data)

Every attribute is read by kind (an integer in a range, a number, a list of integers of a
given length, a permutation, one of some strings: :class:`_NodeAttrs`) and a wrong one is a
sentence naming the node, the attribute, what was given and what is allowed.  Every call
is counted from shapes before it is evaluated or kept (:class:`~.graph.WorkBudget`): the
elements of its output and of numpy's scratch arrays (a convolution's padded input), the
FLOPs of the calls folded at import and of the whole forward pass, the elements of all
intermediate values (:class:`~.graph.OnnxLimits`).

Each ONNX node becomes Relax's high-level operators: ``Gemm`` is ``matmul`` (with
``permute_dims`` for ``transA``/``transB``) then ``add``; a constant ``B`` or ``C`` is
transposed and scaled by ``alpha``/``beta`` here, once.  ``Conv`` with a bias is
``nn.conv2d`` then ``add`` of the bias as ``(1, C, 1, 1)``; ``Flatten`` is ``reshape``;
``Softmax`` before opset 13 (which flattens to 2-D around ``axis``) is reshape, softmax on
the last axis, reshape back (so is a softmax of a vector).  A call whose inputs are all
constants is evaluated in numpy at import time.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .graph import (COMPUTED_DTYPE, MAX_NAME_CHARS, OPS, Call, Graph, ImportError_,
                    OnnxLimits, WorkBudget, check_tensor_shape, output_shape)

__all__ = ["OnnxLimits", "SUPPORTED_OPS", "read_onnx"]

SUPPORTED_OPS = ("Gemm", "MatMul", "Add", "Relu", "Conv", "Softmax", "Reshape", "Flatten",
                 "Constant", "Identity", "Transpose")

#: the largest stride, dilation or padding of a convolution read (each also bounded by the
#: elements of the padded input, :attr:`OnnxLimits.max_tensor_elements`)
MAX_CONV_WINDOW = 1 << 16
#: the most weights (initializers) a model may hold per node it may have (a node reads at
#: most 3), and the most inputs, outputs or attributes one node may have
MAX_WEIGHTS_PER_NODE = 4
MAX_NODE_PARTS = 64


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


def _q(name: str, width: int = 60) -> str:
    """A name quoted for a message, cut short if long."""
    return repr(name if len(name) <= width else name[:width - 3] + "...")


def _value_name(name: str, what: str) -> str:
    """A value's name, refused when empty or longer than :data:`~.graph.MAX_NAME_CHARS`."""
    if not 0 < len(name) <= MAX_NAME_CHARS:
        raise ImportError_(f"{what} has a name of {len(name)} characters; names of 1 to "
                           f"{MAX_NAME_CHARS} characters are read")
    return name


def _to_array(tensor, limits: OnnxLimits, what: str) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    if tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data):
        raise ImportError_(f"{what} keeps its data in another file (ONNX external data); "
                           "only self-contained models are read — save with "
                           "onnx.save(model, path, save_as_external_data=False)")
    dims = tuple(int(d) for d in tensor.dims)
    check_tensor_shape(dims, limits, what)
    if tensor.data_type not in _DTYPES:
        raise ImportError_(f"{what} has ONNX data type {tensor.data_type}; only float32 "
                           "weights (and int64 shapes) are supported")
    try:
        arr = numpy_helper.to_array(tensor)
    except Exception as e:  # noqa: BLE001
        raise ImportError_(f"{what} could not be read ({str(e)[:200]})") from None
    if arr.shape != dims:
        raise ImportError_(f"{what} declares shape {dims} but holds {arr.size} values")
    if arr.dtype == np.float64:
        arr = arr.astype("float32")
    return arr


# ----------------------------------------------------------------------------- attributes
_UNDEFINED, _FLOAT, _INT, _STRING, _TENSOR, _FLOATS, _INTS, _STRINGS = 0, 1, 2, 3, 4, 6, 7, 8
_READABLE = {_FLOAT, _INT, _STRING, _TENSOR, _FLOATS, _INTS, _STRINGS}
_UNREADABLE = {5: "a graph", 9: "a list of tensors", 10: "a list of graphs",
               11: "a sparse tensor", 12: "a list of sparse tensors", 13: "a type",
               14: "a list of types"}


def _short_list(values, fmt=str, most: int = 8) -> str:
    shown = ", ".join(fmt(v) for v in values[:most])
    return f"[{shown}, ... ({len(values)} values)]" if len(values) > most else f"[{shown}]"


def _describe(a) -> str:
    """What an attribute holds, in words: ``a list [1.0, 2.0]``, ``an integer 3``."""
    if a.type == _INT:
        return f"an integer {a.i}"
    if a.type == _FLOAT:
        return f"a number {np.float32(a.f)}"
    if a.type == _STRING:
        return f"a string {_q(a.s[:60].decode('utf-8', 'replace'), 40)}"
    if a.type == _TENSOR:
        return f"a tensor of shape {tuple(a.t.dims[:8])}"
    if a.type == _INTS:
        return f"a list {_short_list(a.ints)}"
    if a.type == _FLOATS:
        return f"a list {_short_list(a.floats, lambda v: str(np.float32(v)))}"
    return "a list of strings " + _short_list(
        a.strings, lambda s: _q(s[:30].decode("utf-8", "replace"), 20))


class _NodeAttrs:
    """A node's attributes, each read by kind by one small method (a sentence naming the
    node, the attribute, what was given and what is allowed when it is wrong).  Attributes
    the reader does not use are ignored, but every one must be of a type it can decode."""

    def __init__(self, node, src: str):
        self.src = src
        self.protos: dict[str, Any] = {}
        for a in node.attribute:
            if a.name in self.protos:
                raise ImportError_(f"{src}: the attribute {_q(a.name)} is given twice")
            if a.ref_attr_name:
                raise ImportError_(f"{src}: the attribute {_q(a.name)} refers to a function's "
                                   "attribute; only plain values are read")
            if a.type == _UNDEFINED:
                raise ImportError_(f"{src}: attribute {_q(a.name)} has no type (ONNX's "
                                   "UNDEFINED); re-export the model")
            if a.type not in _READABLE:
                kind = _UNREADABLE.get(a.type, f"of ONNX type {a.type}")
                raise ImportError_(f"{src}: attribute {_q(a.name)} is {kind}, which this "
                                   "reader cannot decode (it reads numbers, strings, tensors "
                                   "and lists of numbers or strings); export the model "
                                   "without subgraphs or sparse tensors")
            self.protos[a.name] = a

    def __contains__(self, name: str) -> bool:
        return name in self.protos

    def _wrong(self, name: str, allowed: str) -> ImportError_:
        return ImportError_(f"{self.src}: {name} must be {allowed}, got "
                            f"{_describe(self.protos[name])}")

    def int_(self, name: str, default: int, lo: int | None = None,
             hi: int | None = None) -> int:
        """An integer, in ``lo..hi`` when they are given."""
        if name not in self.protos:
            return default
        a = self.protos[name]
        ranged = f" from {lo} to {hi}" if lo is not None else ""
        if a.type != _INT or (lo is not None and not lo <= a.i <= hi):
            raise self._wrong(name, "an integer" + ranged)
        return int(a.i)

    def flag(self, name: str) -> bool:
        """0 or 1 (0 when absent)."""
        return bool(self.int_(name, 0, 0, 1))

    def number(self, name: str, default: float) -> float:
        """A finite number (an ONNX float, or an integer)."""
        if name not in self.protos:
            return default
        a = self.protos[name]
        if a.type not in (_FLOAT, _INT) or not math.isfinite(a.f if a.type == _FLOAT else 0):
            raise self._wrong(name, "a number")
        return float(a.f) if a.type == _FLOAT else float(a.i)

    def ints(self, name: str, default: tuple | None, length: int, lo: int,
             hi: int) -> tuple | None:
        """Exactly ``length`` integers, each in ``lo..hi``."""
        if name not in self.protos:
            return default
        a = self.protos[name]
        if a.type != _INTS or len(a.ints) != length or not all(lo <= v <= hi for v in a.ints):
            raise self._wrong(name, f"{length} integers from {lo} to {hi}")
        return tuple(int(v) for v in a.ints)

    def permutation(self, name: str, rank: int) -> tuple:
        """A permutation of ``0..rank-1`` (the dimensions reversed when absent)."""
        if name not in self.protos:
            return tuple(reversed(range(rank)))
        a = self.protos[name]
        if a.type != _INTS or len(a.ints) != rank or sorted(a.ints) != list(range(rank)):
            raise self._wrong(name, f"a permutation of 0..{rank - 1} ({rank} integers)")
        return tuple(int(v) for v in a.ints)

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        """One of the strings ``choices``."""
        if name not in self.protos:
            return default
        a = self.protos[name]
        short = a.type == _STRING and len(a.s) <= max(len(c) for c in choices)
        value = a.s.decode("utf-8", "replace") if short else None
        if value not in choices:
            raise self._wrong(name, "one of " + ", ".join(repr(c) for c in choices))
        return value

    def tensor(self, name: str):
        """A tensor (``None`` when absent)."""
        if name not in self.protos:
            return None
        if self.protos[name].type != _TENSOR:
            raise self._wrong(name, "a tensor")
        return self.protos[name].t


# ----------------------------------------------------------------------------- inputs
def _input_shape(value_info, shape_dict: dict, limits: OnnxLimits) -> tuple[tuple, str]:
    name = value_info.name
    ttype = value_info.type.tensor_type
    if ttype.elem_type != 1:
        raise ImportError_(f"input {_q(name)} has ONNX element type {ttype.elem_type}; only "
                           "float32 inputs are supported")
    if name in shape_dict:
        dims = tuple(int(d) for d in shape_dict[name])
    else:
        if not ttype.HasField("shape"):
            raise ImportError_(f"input {_q(name)} declares no shape; export the model with "
                               "its input shapes")
        if len(ttype.shape.dim) > limits.max_rank:
            raise ImportError_(f"input {_q(name)} has {len(ttype.shape.dim)} dimensions; the "
                               f"limit is {limits.max_rank}")
        dims = []
        for d in ttype.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            else:
                sym = d.dim_param or "?"
                raise ImportError_(f"input {_q(name)} has a dimension without a size "
                                   f"({sym[:40]!r}); give it one: from_onnx(model, shape_dict="
                                   f"{{{name[:40]!r}: (1, ...)}})")
        dims = tuple(dims)
    if any(d < 1 for d in dims):
        raise ImportError_(f"input {_q(name)}: every dimension must be at least 1, got {dims}")
    check_tensor_shape(dims, limits, f"input {_q(name)}")
    return dims, COMPUTED_DTYPE


def _check_counts(graph, limits: OnnxLimits) -> None:
    """Bound the number of every part of the model before any is looked at: nodes, inputs,
    outputs, weights; each node's inputs, outputs and attributes; each input's dimensions
    (a model of millions of tiny parts would take minutes to walk)."""
    counts = [("nodes", len(graph.node), limits.max_nodes),
              ("inputs", len(graph.input), limits.max_nodes),
              ("outputs", len(graph.output), limits.max_nodes),
              ("weights", len(graph.initializer), MAX_WEIGHTS_PER_NODE * limits.max_nodes)]
    for what, n, most in counts:
        if n > most:
            raise ImportError_(f"the model has {n} {what}; the limit is {most} — export a "
                               "smaller model")
    for vi in list(graph.input) + list(graph.output):
        if len(vi.type.tensor_type.shape.dim) > limits.max_rank:
            raise ImportError_(f"the value {_q(str(vi.name))} has "
                               f"{len(vi.type.tensor_type.shape.dim)} dimensions; the limit "
                               f"is {limits.max_rank}")
    for k, node in enumerate(graph.node):
        for what, n, most in [("inputs", len(node.input), MAX_NODE_PARTS),
                              ("outputs", len(node.output), MAX_NODE_PARTS),
                              ("attributes", len(node.attribute), MAX_NODE_PARTS)]:
            if n > most:
                raise ImportError_(f"node {k} ({_q(str(node.op_type), 40)}) has {n} {what}; "
                                   f"at most {most} are read")


def _texts(model):
    """Every string of the model the reader uses (names, operators, domains)."""
    yield from (imp.domain for imp in model.opset_import)
    graph = model.graph
    for vi in list(graph.input) + list(graph.output):
        yield vi.name
        yield from (d.dim_param for d in vi.type.tensor_type.shape.dim)
    yield from (init.name for init in graph.initializer)
    for node in graph.node:
        yield from (node.op_type, node.name, node.domain)
        yield from node.input
        yield from node.output
        for a in node.attribute:
            yield from (a.name, a.ref_attr_name)


def _check_texts(model) -> None:
    """Refuse a model whose strings are not UTF-8 text (protobuf hands those over as bytes)."""
    for text in _texts(model):
        if not isinstance(text, str):
            raise ImportError_(f"the model holds a name that is not UTF-8 text "
                               f"({bytes(text[:40])!r}); re-export the model")


def _model_names(graph) -> set[str]:
    """Every value name the model mentions (fresh names are made outside this set)."""
    names = {i.name for i in graph.initializer} | {i.name for i in graph.input}
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
    return names


# ----------------------------------------------------------------------------- the reader
class _Reader:
    """One pass over the nodes, in order (ONNX requires topological order)."""

    def __init__(self, limits: OnnxLimits, opset: int, taken: set[str]):
        self.limits = limits
        self.opset = opset
        self.g = Graph()
        self.budget = WorkBudget(limits)
        self.total = 0
        self.fresh = 0
        self.taken = taken
        self.alias: dict[str, str] = {}   # Identity's output -> its input

    # values -------------------------------------------------------------------------
    def add_constant(self, name: str, arr: np.ndarray) -> str:
        self.total += arr.size
        if self.total > self.limits.max_total_elements:
            raise ImportError_(f"the model's weights hold more than "
                               f"{self.limits.max_total_elements} values in all (the limit, "
                               "max_total_elements) — export a smaller model")
        self.g.constants[name] = arr
        self.g.shapes[name] = tuple(arr.shape)
        return name

    def temp(self, base: str) -> str:
        """A value name the model does not use."""
        while True:
            self.fresh += 1
            name = f"{base[:40]}__{self.fresh}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def const(self, name: str) -> np.ndarray | None:
        return self.g.constants.get(name)

    def defined(self, name: str) -> bool:
        return name in self.g.shapes or name in self.alias

    def need(self, name: str, where: str) -> str:
        if name not in self.g.shapes:
            raise ImportError_(f"{where} reads {_q(name)}, which no earlier node or input "
                               "produces (the graph must be in topological order)")
        return name

    def operands(self, src: str, ins: list[str], required: int,
                 optional: int = 0) -> list[str | None]:
        """The node's ``required`` inputs then its ``optional`` ones (``None`` when absent),
        each produced before; a sentence when there are too many or one is missing."""
        if len(ins) > required + optional or not all(ins[:required]) or len(ins) < required:
            given = sum(1 for i in ins if i)
            takes = f"{required}" + (f" to {required + optional}" if optional else "")
            raise ImportError_(f"{src} has {given} inputs; it takes {takes}")
        names = [i or None for i in ins] + [None] * (required + optional - len(ins))
        return [self.need(n, src) if n else None for n in names]

    def check_operands(self, call: Call) -> None:
        for i in call.inputs:
            arr = self.g.constants.get(i)
            if arr is not None and str(arr.dtype) != COMPUTED_DTYPE:
                raise ImportError_(f"{call.source}: the operand {_q(i)} is {arr.dtype}; only "
                                   f"{COMPUTED_DTYPE} tensors are computed (integers only as "
                                   "Reshape's target shape)")

    def emit(self, op: str, inputs: list[str], output: str, source: str, **attrs) -> str:
        call = Call(op, tuple(inputs), output, tuple(sorted(attrs.items())), source)
        self.check_operands(call)
        shapes = [self.g.shapes[i] for i in inputs]
        shape = output_shape(call, shapes)
        folded = all(i in self.g.constants for i in inputs)
        self.budget.charge(call, shapes, shape, folded)   # before anything is allocated
        if folded:  # evaluate now, in numpy
            vals = [self.g.constants[i] for i in inputs]
            return self.add_constant(output, np.ascontiguousarray(
                OPS[op].numpy(*vals, **attrs), dtype=COMPUTED_DTYPE))
        self.g.calls.append(call)
        self.g.shapes[output] = shape
        return output

    def scaled(self, name: str, factor: float, base: str, src: str) -> str:
        """The constant ``name`` times ``factor``, as a new constant (Gemm's alpha, beta)."""
        arr = self.g.constants[name]
        self.budget.charge_fold(arr.size, src)
        return self.add_constant(self.temp(base),
                                 (arr * np.float32(factor)).astype(COMPUTED_DTYPE))

    # nodes ------------------------------------------------------------------------
    def node(self, node) -> None:
        src = f"{node.op_type[:40]} {_q(node.name)}" if node.name else node.op_type[:40]
        if node.domain not in ("", "ai.onnx"):
            raise ImportError_(f"{src}: operators of domain {_q(node.domain)} are not "
                               "supported")
        if node.op_type not in SUPPORTED_OPS:
            raise ImportError_(f"the model uses the ONNX operator {_q(node.op_type)}"
                               f"{' (node ' + _q(node.name) + ')' if node.name else ''}, "
                               f"which is not supported; supported: {', '.join(SUPPORTED_OPS)}")
        attrs = _NodeAttrs(node, src)
        if len(node.output) != 1 or not node.output[0]:
            raise ImportError_(f"{src} has {len(node.output)} outputs; it makes 1 (named)")
        out = _value_name(node.output[0], f"the output of {src}")
        if self.defined(out):
            raise ImportError_(f"{src} writes {_q(out)}, which is already defined (each value "
                               "must be produced once)")
        ins = [self.alias.get(i, i) for i in node.input]
        getattr(self, "op_" + node.op_type)(src, ins, out, attrs)

    def op_Constant(self, src, ins, out, attrs):
        self.operands(src, ins, 0)
        tensor = attrs.tensor("value")
        if tensor is None:
            raise ImportError_(f"{src}: only Constant nodes with a 'value' tensor are supported")
        self.add_constant(out, _to_array(tensor, self.limits, src))

    def op_Identity(self, src, ins, out, attrs):
        (x,) = self.operands(src, ins, 1)
        self.alias[out] = x

    def op_Relu(self, src, ins, out, attrs):
        self.emit("nn.relu", self.operands(src, ins, 1), out, src)

    def op_Add(self, src, ins, out, attrs):
        self.emit("add", self.operands(src, ins, 2), out, src)

    def op_MatMul(self, src, ins, out, attrs):
        self.emit("matmul", self.operands(src, ins, 2), out, src)

    def op_Transpose(self, src, ins, out, attrs):
        (x,) = self.operands(src, ins, 1)
        perm = attrs.permutation("perm", len(self.g.shapes[x]))
        self.emit("permute_dims", [x], out, src, axes=perm)

    def op_Gemm(self, src, ins, out, attrs):
        a, b, c = self.operands(src, ins, 2, 1)
        alpha, beta = attrs.number("alpha", 1.0), attrs.number("beta", 1.0)
        trans_a, trans_b = attrs.flag("transA"), attrs.flag("transB")
        for name in (a, b):
            if len(self.g.shapes[name]) != 2:
                raise ImportError_(f"{src}: Gemm's A and B must be matrices, {_q(name)} has "
                                   f"shape {self.g.shapes[name]}")
        if trans_a:
            a = self.emit("permute_dims", [a], self.temp(out + "_At"), src, axes=(1, 0))
        if trans_b:
            b = self.emit("permute_dims", [b], self.temp(out + "_Bt"), src, axes=(1, 0))
        if alpha != 1.0:
            if b not in self.g.constants:
                raise ImportError_(f"{src}: alpha={alpha} with a computed B is not supported "
                                   "(only with B a weight, which is scaled once at import)")
            b = self.scaled(b, alpha, out + "_Bscaled", src)
        if c is None or beta == 0.0:
            self.emit("matmul", [a, b], out, src)
            return
        mn = (self.g.shapes[a][0], self.g.shapes[b][1])
        cs = self.g.shapes[c]
        if len(cs) > 2 or any(d not in (1, m) for d, m in zip(reversed(cs), reversed(mn))):
            raise ImportError_(f"{src}: C has shape {cs}, which does not broadcast to the "
                               f"product's {mn}")
        if beta != 1.0:
            if c not in self.g.constants:
                raise ImportError_(f"{src}: beta={beta} with a computed C is not supported "
                                   "(only with C a weight, which is scaled once at import)")
            c = self.scaled(c, beta, out + "_Cscaled", src)
        mm = self.emit("matmul", [a, b], self.temp(out + "_mm"), src)
        self.emit("add", [mm, c], out, src)

    def op_Conv(self, src, ins, out, attrs):
        x, w, bias = self.operands(src, ins, 2, 1)
        xs, ws = self.g.shapes[x], self.g.shapes[w]
        if len(xs) != 4 or len(ws) != 4:
            raise ImportError_(f"{src}: only 2-D convolutions (NCHW input, OIHW weight) are "
                               f"supported, got shapes {xs} and {ws}")
        group = attrs.int_("group", 1)
        if group != 1:
            raise ImportError_(f"{src}: grouped convolutions (group={group}) are not "
                               "supported; only group=1")
        kernel = attrs.ints("kernel_shape", None, 2, 1, MAX_CONV_WINDOW)
        if kernel is not None and kernel != ws[2:]:
            raise ImportError_(f"{src}: kernel_shape {kernel} does not match the weight's "
                               f"{ws[2:]}")
        strides = attrs.ints("strides", (1, 1), 2, 1, MAX_CONV_WINDOW)
        dilation = attrs.ints("dilations", (1, 1), 2, 1, MAX_CONV_WINDOW)
        pads = attrs.ints("pads", (0, 0, 0, 0), 4, 0, MAX_CONV_WINDOW)
        auto_pad = attrs.choice("auto_pad", "NOTSET",
                                ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            pads = _same_pads(xs[2:], ws[2:], strides, dilation, auto_pad == "SAME_UPPER")
        elif auto_pad == "VALID":
            pads = (0, 0, 0, 0)
        # ONNX's pads are (h_begin, w_begin, h_end, w_end): Relax's (top, left, bottom, right)
        y_name = self.temp(out + "_conv") if bias else out
        y = self.emit("nn.conv2d", [x, w], y_name, src, strides=strides, padding=pads,
                      dilation=dilation)
        if bias:
            if self.g.shapes[bias] != (ws[0],):
                raise ImportError_(f"{src}: the bias has shape {self.g.shapes[bias]}, "
                                   f"expected ({ws[0]},)")
            b4 = self.emit("reshape", [bias], self.temp(out + "_bias"), src,
                           shape=(1, ws[0], 1, 1))
            self.emit("add", [y, b4], out, src)

    def op_Softmax(self, src, ins, out, attrs):
        (x,) = self.operands(src, ins, 1)
        shape = self.g.shapes[x]
        nd = len(shape)
        if nd == 0:
            raise ImportError_(f"{src}: a softmax of a scalar is not supported (the input "
                               "needs at least one dimension)")
        axis = attrs.int_("axis", -1 if self.opset >= 13 else 1, -nd, nd - 1) % nd
        if nd >= 2 and (self.opset >= 13 or axis == nd - 1 == 1):
            self.emit("nn.softmax", [x], out, src, axis=axis)
            return
        # before opset 13 (and for a vector): softmax of the input flattened to 2-D around
        # axis, on the last axis, reshaped back
        flat = (math.prod(shape[:axis]), math.prod(shape[axis:]))
        r = self.emit("reshape", [x], self.temp(out + "_2d"), src, shape=flat)
        s = self.emit("nn.softmax", [r], self.temp(out + "_sm"), src, axis=1)
        self.emit("reshape", [s], out, src, shape=shape)

    def op_Reshape(self, src, ins, out, attrs):
        x, target = self.operands(src, ins, 2)
        allow_zero = attrs.flag("allowzero")
        arr = self.const(target)
        if arr is None:
            raise ImportError_(f"{src}: the target shape must be a constant of the model "
                               "(an initializer or a Constant node)")
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ImportError_(f"{src}: the target shape must be a 1-D int64 tensor, got "
                               f"{arr.dtype} of shape {arr.shape}")
        if arr.size > self.limits.max_rank:
            raise ImportError_(f"{src}: the target shape has {arr.size} dimensions; the limit "
                               f"is {self.limits.max_rank}")
        shape = self.g.shapes[x]
        new = [int(s) for s in arr]
        for d, s in enumerate(new):
            if s != 0:
                continue
            if allow_zero:
                raise ImportError_(f"{src}: the target shape {tuple(new)} has a 0, which with "
                                   "allowzero=1 makes an empty tensor; those are not supported")
            if d >= len(shape):
                raise ImportError_(f"{src}: the target shape {tuple(new)} has a 0 at position "
                                   f"{d}, which copies a dimension the input (shape {shape}) "
                                   "does not have")
            new[d] = shape[d]
        self.emit("reshape", [x], out, src, shape=tuple(new))

    def op_Flatten(self, src, ins, out, attrs):
        (x,) = self.operands(src, ins, 1)
        shape = self.g.shapes[x]
        axis = attrs.int_("axis", 1, -len(shape), len(shape))
        axis = axis + len(shape) if axis < 0 else axis
        self.emit("reshape", [x], out, src,
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


def _unused_constants_dropped(g: Graph) -> None:
    """Drop the constants no call reads (a Reshape's target shape, folded-away weights)."""
    used = {i for c in g.calls for i in c.inputs}
    for name in [n for n in g.constants if n not in used]:
        del g.constants[name]
        del g.shapes[name]


def read_onnx(model: Any, shape_dict: dict | None = None,
              limits: OnnxLimits | None = None) -> Graph:
    """The :class:`Graph` of an ONNX model (a ``ModelProto`` or the bytes of an .onnx
    file), or an :class:`ImportError_` saying what could not be read."""
    limits = limits or OnnxLimits()
    model = _parse(model, limits)
    graph = model.graph
    _check_counts(graph, limits)
    _check_texts(model)
    reader = _Reader(limits, _opset(model), _model_names(graph))
    g = reader.g
    for init in graph.initializer:
        _value_name(init.name, "a weight")
        if init.name in g.constants:
            raise ImportError_(f"the weight {_q(init.name)} is given twice")
        reader.add_constant(init.name, _to_array(init, limits, f"weight {_q(init.name)}"))
    shape_dict = dict(shape_dict or {})
    for vi in graph.input:
        if vi.name in g.constants:
            continue  # older exporters list the initializers among the inputs too
        _value_name(vi.name, "an input")
        if vi.name in g.inputs:
            raise ImportError_(f"the input {_q(vi.name)} is declared twice")
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
            raise ImportError_(f"the output {_q(out.name)} is not produced by any node")
        if name in g.constants or name in g.inputs:
            raise ImportError_(f"the output {_q(out.name)} is computed by no operator; "
                               "nothing to compute")
        g.outputs.append(name)
    _unused_constants_dropped(g)
    return g
