"""A model read from outside, before it becomes Relax: high-level operator calls in order.

The ONNX reader (:mod:`.onnx_reader`) produces a :class:`Graph`; :mod:`.onnx` turns it
into a Relax function.  Every operator here is one of Relax's high-level operators, with
its shape rule (from :mod:`engine.topi`) and its numpy meaning (used to fold calls whose
inputs are all constants, e.g. a ``Reshape`` of a weight, at import time).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from engine import topi

__all__ = ["OPS", "Call", "Graph", "ImportError_", "output_shape", "evaluate"]


class ImportError_(ValueError):
    """A model that cannot be imported; ``str(e)`` says what and what to do."""


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


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _conv2d(x: np.ndarray, w: np.ndarray, strides=(1, 1), padding=(0, 0, 0, 0),
            dilation=(1, 1)) -> np.ndarray:
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, padding, dilation
    n, o, oh, ow = topi.conv2d_shape(x.shape, w.shape, strides, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w))
    for ry in range(w.shape[2]):
        for rx in range(w.shape[3]):
            patch = xp[:, :, ry * dh: ry * dh + sh * (oh - 1) + 1: sh,
                       rx * dw: rx * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ry, rx])
    return out


@dataclass(frozen=True)
class OpInfo:
    """How a high-level operator finds its output shape and computes in numpy."""

    shape: Callable[..., tuple]
    numpy: Callable[..., np.ndarray]


OPS: dict[str, OpInfo] = {
    "add": OpInfo(lambda a, b: topi.broadcast_shape(a, b), lambda a, b: a + b),
    "matmul": OpInfo(lambda a, b: topi.matmul_shape(a, b), lambda a, b: a @ b),
    "nn.relu": OpInfo(lambda a: tuple(a), lambda a: np.maximum(a, 0)),
    "nn.conv2d": OpInfo(lambda x, w, **k: topi.conv2d_shape(x, w, **k), _conv2d),
    "nn.softmax": OpInfo(lambda a, axis=-1: tuple(a), _softmax),
    "permute_dims": OpInfo(lambda a, axes=None: tuple(a[i] for i in axes) if axes is not None
                           else tuple(reversed(a)), lambda a, axes=None: np.transpose(a, axes)),
    "reshape": OpInfo(lambda a, shape: topi.reshape_shape(a, shape),
                      lambda a, shape: a.reshape(topi.reshape_shape(a.shape, shape))),
}


def output_shape(call: Call, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape ``call`` produces from inputs of ``shapes`` (a sentence naming the model's
    node when they do not fit)."""
    try:
        return tuple(OPS[call.op].shape(*shapes, **dict(call.attrs)))
    except topi.TopiError as e:
        raise ImportError_(f"{call.source or call.op}: {e}") from None


def evaluate(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run the graph in numpy (the reference for tests and for constant folding)."""
    env = dict(graph.constants)
    env.update(feeds)
    for c in graph.calls:
        env[c.output] = OPS[c.op].numpy(*[env[i] for i in c.inputs], **dict(c.attrs))
    return [env[o] for o in graph.outputs]
