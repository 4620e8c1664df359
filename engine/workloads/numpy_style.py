"""Each workload written the way a numpy user writes it, in float32: the speed reference.

:func:`engine.workloads.reference` computes in float64 where rounding matters (``a @ b`` of
float32 inputs accumulated in double), because it is the *correctness* reference. That is
the wrong thing to *time*: a float64 matmul runs at half the speed of the float32 one, so a
learner's float32 kernel would look twice as good against numpy as it is. These functions
take the same inputs and compute the same outputs in the workload's own dtype, with the
numpy call a user would make (``a @ b`` goes to BLAS sgemm; a convolution is im2col + one
sgemm, as deep-learning frameworks do on CPU). Their results agree with the reference to
float32 rounding (tests/test_workloads_numpy_style.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .library import _conv_windows, _out_size
from .registry import resolve_params

F32 = np.float32


def _windows(data: np.ndarray, p: dict) -> np.ndarray:
    """im2col: ``(N, C, K*K, O, O)`` float32 windows of the zero-padded input."""
    return np.stack([w for _, _, w in _conv_windows(data, p, F32)], axis=2)


def _conv(p: dict, relu: bool) -> Callable:
    O = _out_size(p)

    def f(data, weight):
        cols = _windows(data, p)                                 # N, C, K*K, O, O
        n, c, kk = cols.shape[:3]
        cols = cols.reshape(n, c * kk, O * O)
        w = weight.reshape(weight.shape[0], c * kk)              # O_c, C*K*K
        out = np.matmul(w, cols).reshape(n, weight.shape[0], O, O)   # one sgemm per image
        return np.maximum(out, F32(0)) if relu else out
    return f


def _depthwise(p: dict) -> Callable:
    def f(data, weight):
        cols = _windows(data, p)                                 # N, C, K*K, O, O
        w = weight.reshape(weight.shape[0], -1)[None, :, :, None, None]
        return (cols * w).sum(axis=2, dtype=F32)
    return f


def _softmax(p: dict) -> Callable:
    def f(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return f


def _layernorm(p: dict) -> Callable:
    def f(a, gamma, beta):
        mean = a.mean(axis=1, keepdims=True)
        var = a.var(axis=1, keepdims=True)
        return (a - mean) / np.sqrt(var + F32(1e-5)) * gamma + beta
    return f


def _mlp(p: dict) -> Callable:
    def f(x, w0, b0, w1, b1):
        return np.maximum(x @ w0.T + b0, F32(0)) @ w1.T + b1
    return f


NUMPY_STYLE: dict[str, Callable[[dict], Callable]] = {
    "mm_relu": lambda p: lambda a, b: np.maximum(a @ b, F32(0)),
    "matmul": lambda p: lambda a, b: a @ b,
    "batch_matmul": lambda p: lambda a, b: np.matmul(a, b),
    "conv2d": lambda p: _conv(p, relu=False),
    "conv2d_relu": lambda p: _conv(p, relu=True),
    "depthwise_conv2d": _depthwise,
    "window_sum": lambda p: lambda a: a[:-2] + a[1:-1] + a[2:],
    "vector_add": lambda p: lambda a, b: a + b,
    "softmax": _softmax,
    "layernorm": _layernorm,
    "transpose": lambda p: lambda a: np.ascontiguousarray(a.T),
    "add": lambda p: lambda a, b: a + b,
    "relu": lambda p: lambda a: np.maximum(a, F32(0)),
    "mlp": _mlp,
    "sum": lambda p: lambda a: a.sum(axis=1),
}


def numpy_style(name: str, **params) -> Callable:
    """``f(*inputs) -> output``: the workload as a numpy user writes it, in float32.

    Falls back to :func:`engine.workloads.reference` for a workload without one.
    """
    from .registry import reference
    p = resolve_params(name, **params)
    make = NUMPY_STYLE.get(name)
    return make(p) if make is not None else reference(name, **params)
