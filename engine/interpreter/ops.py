"""Tables of what the IR's operators compute: closure makers for the binary operators
(each makes ``f(env)`` from its operands' closures) and the numpy functions of the
float intrinsics."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from engine.ir.dtype import is_float

from .values import np_dtype

#: ``+ - *`` -> closure makers for (constant right operand, constant left operand, neither)
ARITH: dict[str, tuple[Callable, Callable, Callable]] = {
    "+": (lambda fa, cb: lambda env: fa(env) + cb,
          lambda ca, fb: lambda env: ca + fb(env),
          lambda fa, fb: lambda env: fa(env) + fb(env)),
    "-": (lambda fa, cb: lambda env: fa(env) - cb,
          lambda ca, fb: lambda env: ca - fb(env),
          lambda fa, fb: lambda env: fa(env) - fb(env)),
    "*": (lambda fa, cb: lambda env: fa(env) * cb,
          lambda ca, fb: lambda env: ca * fb(env),
          lambda fa, fb: lambda env: fa(env) * fb(env)),
}

#: comparison node -> closure maker (scalars and lanes alike: numpy compares lane-wise)
COMPARE: dict[str, Callable] = {
    "EQ": lambda fa, fb: lambda env: fa(env) == fb(env),
    "NE": lambda fa, fb: lambda env: fa(env) != fb(env),
    "LT": lambda fa, fb: lambda env: fa(env) < fb(env),
    "LE": lambda fa, fb: lambda env: fa(env) <= fb(env),
    "GT": lambda fa, fb: lambda env: fa(env) > fb(env),
    "GE": lambda fa, fb: lambda env: fa(env) >= fb(env),
}

#: And / Or -> (lane-wise numpy function, scalar closure maker: short-circuits like C)
LOGIC: dict[str, tuple[Callable, Callable]] = {
    "And": (np.logical_and, lambda fa, fb: lambda env: bool(fa(env)) and bool(fb(env))),
    "Or": (np.logical_or, lambda fa, fb: lambda env: bool(fa(env)) or bool(fb(env))),
}


def safe_unary(fn: Callable, dtype: str) -> Callable:
    """``fn`` whose scalar results are of the float ``dtype`` (numpy may widen them)."""
    t = np_dtype(dtype).type if is_float(dtype) else None

    def f(x):
        r = fn(x)
        if t is not None and not isinstance(r, np.ndarray):
            return t(r)
        return r
    return f


def _erf(x):
    if isinstance(x, np.ndarray):
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return type(x)(math.erf(float(x))) if isinstance(x, np.floating) else math.erf(x)


def _sigmoid(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / (one + np.exp(-x))


def _rsqrt(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / np.sqrt(x)


#: the float intrinsics of one argument (``T.exp`` ...)
UNARY: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": _rsqrt, "tanh": np.tanh, "sigmoid": _sigmoid, "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "sin": np.sin,
    "cos": np.cos, "erf": _erf,
}
