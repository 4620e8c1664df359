"""A model read from outside, before it becomes Relax: high-level operator calls in order.

The ONNX reader (:mod:`.onnx_reader`) produces a :class:`Graph`; :mod:`.onnx` turns it
into a Relax function; :mod:`.graph_doc` writes it as plain data and reads it back.  Every
operator here is one of Relax's high-level operators, described once in :data:`OPS`: its
attributes, its shape rule (from :mod:`engine.topi`, refusing what the compiler would
refuse), its numpy meaning (used to fold calls whose inputs are all constants, e.g. a
``Reshape`` of a weight, at import time, and as the reference forward pass), the FLOPs of
that numpy meaning and the largest scratch array it allocates besides its output.

A model is hostile input, so the work is bounded from shapes before anything is allocated:
:class:`OnnxLimits` says how much, :class:`WorkBudget` counts a graph's calls against it as
they are read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from engine import topi

__all__ = ["OPS", "OpInfo", "Call", "Graph", "ImportError_", "OnnxLimits", "WorkBudget",
           "output_shape", "check_attrs", "check_tensor_shape", "call_flops", "graph_flops",
           "evaluate", "COMPUTED_DTYPE", "MAX_NAME_CHARS"]

#: the one element type the graph computes in (inputs, outputs, every call's operands)
COMPUTED_DTYPE = "float32"
#: the longest value name a graph holds (an ONNX model's names are refused beyond it)
MAX_NAME_CHARS = 4096


class ImportError_(ValueError):
    """A model that cannot be imported; ``str(e)`` says what and what to do."""


@dataclass(frozen=True)
class OnnxLimits:
    """Bounds on a model read from outside (the app passes its own, from ``app.limits``).

    Elements are counted per tensor (any weight, input, output or scratch array, a
    convolution's padded input included) and in all (the weights; the activations of one
    forward pass); FLOPs of the calls folded at import and of the whole forward pass."""

    max_bytes: int = 64 * 1024 * 1024
    max_nodes: int = 200
    max_rank: int = 6
    max_tensor_elements: int = 16 * 1024 * 1024
    max_total_elements: int = 32 * 1024 * 1024        # all weights (folded constants too)
    max_activation_elements: int = 32 * 1024 * 1024   # all call outputs of one forward pass
    max_fold_flops: float = 2e8                        # all calls evaluated at import
    max_model_flops: float = 4e9                       # one forward pass (numpy reference)


# ----------------------------------------------------------------------------- calls, graphs
@dataclass(frozen=True)
class Call:
    """``output = op(*inputs, **attrs)``; inputs and output are value names."""

    op: str
    inputs: tuple[str, ...]
    output: str
    attrs: tuple = ()
    source: str = ""   # the model's own node (e.g. "Gemm 'fc1'"), for messages

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)


@dataclass
class Graph:
    """Inputs (name -> (shape, dtype)) in order, constants (name -> array), calls in order,
    the output names."""

    inputs: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name]


# ----------------------------------------------------------------------------- numpy meanings
def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _conv2d(x: np.ndarray, w: np.ndarray, strides=(1, 1), padding=(0, 0, 0, 0),
            dilation=(1, 1)) -> np.ndarray:
    """NCHW/OIHW convolution in numpy; its Python loop runs over the kernel's positions or
    the output's, whichever are fewer (so its time follows its FLOPs)."""
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, padding, dilation
    n, o, oh, ow = topi.conv2d_shape(x.shape, w.shape, strides, padding, dilation)
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    dtype = np.result_type(x, w)
    if kh * kw <= oh * ow:
        out = np.zeros((n, o, oh, ow), dtype=dtype)
        for ry in range(kh):
            for rx in range(kw):
                patch = xp[:, :, ry * dh: ry * dh + sh * (oh - 1) + 1: sh,
                           rx * dw: rx * dw + sw * (ow - 1) + 1: sw]
                out += np.einsum("nchw,oc->nohw", patch, w[:, :, ry, rx])
        return out
    out = np.zeros((n, o, oh, ow), dtype=dtype)
    for y in range(oh):
        for x_ in range(ow):
            window = xp[:, :, y * sh: y * sh + dh * (kh - 1) + 1: dh,
                        x_ * sw: x_ * sw + dw * (kw - 1) + 1: dw]
            out[:, :, y, x_] = np.tensordot(window, w, axes=([1, 2, 3], [1, 2, 3]))
    return out


# ----------------------------------------------------------------------------- shape rules
def _matmul_shape(a: tuple, b: tuple) -> tuple:
    out = topi.matmul_shape(a, b)
    if not out:
        raise topi.TopiError("matmul: the product of two vectors is a scalar, which is not "
                             "supported; make one operand a matrix, e.g. (1, n)")
    return out


def _softmax_shape(a: tuple, axis: int = -1) -> tuple:
    if len(a) < 2:
        raise topi.TopiError(f"softmax: the operand needs at least 2 dimensions, got shape "
                             f"{tuple(a)}")
    if not -len(a) <= axis < len(a):
        raise topi.TopiError(f"softmax: axis {axis} is out of range for shape {tuple(a)}")
    return tuple(a)


def _permute_shape(a: tuple, axes: tuple) -> tuple:
    if sorted(axes) != list(range(len(a))):
        raise topi.TopiError(f"permute_dims: axes {tuple(axes)} are not a permutation of "
                             f"0..{len(a) - 1}")
    return tuple(a[i] for i in axes)


def _reshape_shape(a: tuple, shape: tuple) -> tuple:
    if not shape:
        raise topi.TopiError("reshape to a scalar is not supported (give the target shape "
                             "at least one dimension, e.g. [1])")
    return topi.reshape_shape(a, shape)


# ----------------------------------------------------------------------------- work
def _count(shape: tuple) -> int:
    return math.prod(shape)


def _matmul_flops(shapes: list, out: tuple, attrs: dict) -> int:
    return 2 * _count(out) * shapes[0][-1]


def _conv2d_flops(shapes: list, out: tuple, attrs: dict) -> int:
    _, c, kh, kw = shapes[1]
    return 2 * _count(out) * c * kh * kw


def _conv2d_padded_elements(shapes: list, out: tuple, attrs: dict) -> int:
    """The elements of the zero-bordered copy of the input numpy makes (``np.pad``)."""
    n, c, h, w = shapes[0]
    pt, pl, pb, pr = attrs["padding"]
    return n * c * (h + pt + pb) * (w + pl + pr)


#: what an attribute value is: an integer, or a tuple of integers (of a given length)
INT, INTS, INTS2, INTS4 = "an integer", "a list of integers", "2 integers", "4 integers"


@dataclass(frozen=True)
class OpInfo:
    """One high-level operator: how many operands it takes, its attributes (name -> kind,
    all required), its output shape from its operands' (a ``TopiError`` when they do not
    fit), its numpy meaning, its FLOPs and the elements of the largest scratch array its
    numpy meaning allocates besides the output."""

    arity: int
    attrs: dict[str, str]
    shape: Callable[..., tuple]
    numpy: Callable[..., np.ndarray]
    work: Callable[[list, tuple, dict], int]              # (shapes, out, attrs) -> FLOPs
    scratch: Callable[[list, tuple, dict], int] = lambda shapes, out, attrs: 0

    def flops(self, shapes: list, attrs: dict) -> int:
        """The FLOPs of one call on operands of ``shapes``."""
        return self.work(shapes, tuple(self.shape(*shapes, **attrs)), attrs)


OPS: dict[str, OpInfo] = {
    "add": OpInfo(2, {}, lambda a, b: topi.broadcast_shape(a, b), lambda a, b: a + b,
                  lambda s, out, k: _count(out)),
    "matmul": OpInfo(2, {}, _matmul_shape, lambda a, b: a @ b, _matmul_flops),
    "nn.relu": OpInfo(1, {}, lambda a: tuple(a), lambda a: np.maximum(a, 0),
                      lambda s, out, k: _count(out)),
    "nn.conv2d": OpInfo(2, {"strides": INTS2, "padding": INTS4, "dilation": INTS2},
                        lambda x, w, **k: topi.conv2d_shape(x, w, **k), _conv2d,
                        _conv2d_flops, _conv2d_padded_elements),
    "nn.softmax": OpInfo(1, {"axis": INT}, _softmax_shape, _softmax,
                         lambda s, out, k: 5 * _count(out)),   # max, sub+exp, sum, divide
    "permute_dims": OpInfo(1, {"axes": INTS}, _permute_shape,
                           lambda a, axes: np.transpose(a, axes), lambda s, out, k: 0),
    "reshape": OpInfo(1, {"shape": INTS}, _reshape_shape,
                      lambda a, shape: a.reshape(topi.reshape_shape(a.shape, shape)),
                      lambda s, out, k: 0),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_attrs(call: Call) -> dict[str, Any]:
    """``call``'s attributes as a dict, after checking they are exactly the ones its
    operator takes, each of its kind (an :class:`ImportError_` naming the call if not)."""
    where = call.source or call.op
    kinds = OPS[call.op].attrs
    if not isinstance(call.attrs, tuple) or not all(
            isinstance(kv, tuple) and len(kv) == 2 and isinstance(kv[0], str)
            for kv in call.attrs):
        raise ImportError_(f"{where}: the attributes must be (name, value) pairs")
    attrs = dict(call.attrs)
    if sorted(attrs) != sorted(kinds) or len(attrs) != len(call.attrs):
        raise ImportError_(f"{where}: {call.op} takes the attributes "
                           f"{sorted(kinds) or 'none'}, got {sorted(attrs) or 'none'}")
    for name, kind in kinds.items():
        v = attrs[name]
        ok = _is_int(v) if kind == INT else (
            isinstance(v, tuple) and all(_is_int(x) for x in v)
            and (kind == INTS or len(v) == {INTS2: 2, INTS4: 4}[kind]))
        if not ok:
            raise ImportError_(f"{where}: {call.op}'s {name} must be {kind}, got {v!r:.80}")
    return attrs


def output_shape(call: Call, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape ``call`` produces from inputs of ``shapes`` (a sentence naming the model's
    node when they do not fit)."""
    try:
        return tuple(OPS[call.op].shape(*shapes, **dict(call.attrs)))
    except topi.TopiError as e:
        raise ImportError_(f"{call.source or call.op}: {e}") from None


def call_flops(call: Call, shapes: list[tuple[int, ...]]) -> int:
    """The FLOPs of ``call`` on operands of ``shapes`` (its numpy meaning's work)."""
    return OPS[call.op].flops(shapes, dict(call.attrs))


def graph_flops(graph: Graph) -> int:
    """The FLOPs of one forward pass of ``graph`` (what its reference run in numpy costs)."""
    return sum(call_flops(c, [graph.shapes[i] for i in c.inputs]) for c in graph.calls)


# ----------------------------------------------------------------------------- bounds
def check_tensor_shape(dims: tuple, limits: OnnxLimits, what: str) -> None:
    """Refuse a shape of too many dimensions, a negative one, or too many elements."""
    if len(dims) > limits.max_rank:
        raise ImportError_(f"{what} has {len(dims)} dimensions; the limit is {limits.max_rank}")
    if any(d < 0 for d in dims):
        raise ImportError_(f"{what} has a negative dimension in {dims}")
    n = math.prod(dims)
    if n > limits.max_tensor_elements:
        raise ImportError_(f"{what} has {n} elements; the limit is "
                           f"{limits.max_tensor_elements} per tensor (max_tensor_elements) "
                           "— export a smaller model")


@dataclass
class WorkBudget:
    """What a graph's calls cost so far against ``limits``: each call is charged from
    shapes, before it is evaluated or kept (:meth:`charge`)."""

    limits: OnnxLimits
    model_flops: int = 0          # the calls of the forward pass
    fold_flops: int = 0           # the calls evaluated at import
    activation_elements: int = 0  # the outputs of the forward pass's calls

    def charge(self, call: Call, shapes: list[tuple[int, ...]], out: tuple[int, ...],
               folded: bool = False) -> None:
        """Count one call (operands of ``shapes``, output ``out``), or refuse it with a
        sentence naming the node, the count and the limit."""
        lim, where = self.limits, call.source or call.op
        check_tensor_shape(out, lim, f"the output of {where}")
        if any(d < 1 for s in list(shapes) + [out] for d in s):
            raise ImportError_(f"{where}: a tensor with a dimension of 0 (no elements) is "
                               "not supported")
        attrs = dict(call.attrs)
        scratch = OPS[call.op].scratch(shapes, out, attrs)
        if scratch > lim.max_tensor_elements:
            raise ImportError_(f"{where}: its padded input would hold {scratch} elements; "
                               f"the limit is {lim.max_tensor_elements} per tensor "
                               "(max_tensor_elements) — use smaller pads or export a "
                               "smaller model")
        flops = OPS[call.op].work(shapes, out, attrs)
        if folded:
            self.charge_fold(flops, where)
            return
        self.model_flops += flops
        if self.model_flops > lim.max_model_flops:
            raise ImportError_(f"{where}: the model's forward pass would take "
                               f"{self.model_flops:.3g} FLOPs up to this node; the limit "
                               f"is {lim.max_model_flops:.3g} (max_model_flops) — export a "
                               "smaller model")
        self.activation_elements += math.prod(out)
        if self.activation_elements > lim.max_activation_elements:
            raise ImportError_(f"{where}: the model's intermediate values would hold "
                               f"{self.activation_elements} elements up to this node; the "
                               f"limit is {lim.max_activation_elements} "
                               "(max_activation_elements) — export a smaller model")

    def charge_fold(self, flops: int, where: str) -> None:
        """Count ``flops`` of work done in numpy at import (a constant call folded, a weight
        scaled), or refuse it."""
        self.fold_flops += flops
        if self.fold_flops > self.limits.max_fold_flops:
            raise ImportError_(f"{where}: folding the model's constant computations would "
                               f"take {self.fold_flops:.3g} FLOPs at import; the limit is "
                               f"{self.limits.max_fold_flops:.3g} (max_fold_flops) — export "
                               "a smaller model, or fold the weights before exporting")


def evaluate(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run the graph in numpy (the reference for tests and for constant folding)."""
    env = dict(graph.constants)
    env.update(feeds)
    for c in graph.calls:
        env[c.output] = OPS[c.op].numpy(*[env[i] for i in c.inputs], **dict(c.attrs))
    return [env[o] for o in graph.outputs]
