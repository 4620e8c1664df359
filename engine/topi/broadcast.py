"""Element-wise binary operators with numpy's broadcasting rules."""
from __future__ import annotations

import inspect
from typing import Callable, Sequence

from engine import te
from engine.te import TeError

__all__ = ["TopiError", "broadcast_shape", "add", "subtract", "multiply", "divide", "binary",
           "compute_nd"]


class TopiError(TeError):
    """Operands whose shapes or attributes an operator cannot take; says which and why."""


def broadcast_shape(a: Sequence[int], b: Sequence[int], op: str = "add") -> tuple[int, ...]:
    """numpy's broadcast of two shapes: ``(1, 128)`` and ``(128,)`` give ``(1, 128)``."""
    out = []
    for d in range(1, max(len(a), len(b)) + 1):
        x = a[-d] if d <= len(a) else 1
        y = b[-d] if d <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise TopiError(f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast "
                            f"together (dimension -{d} is {x} in one and {y} in the other; "
                            "each must be equal or 1)")
        out.append(max(x, y))
    return tuple(reversed(out))


def add(a: te.Tensor, b: te.Tensor, name: str = "T_add") -> te.Tensor:
    """``a + b`` with broadcasting (see :func:`binary`)."""
    return binary(a, b, "add", name)


def subtract(a: te.Tensor, b: te.Tensor, name: str = "T_subtract") -> te.Tensor:
    """``a - b`` with broadcasting."""
    return binary(a, b, "subtract", name)


def multiply(a: te.Tensor, b: te.Tensor, name: str = "T_multiply") -> te.Tensor:
    """``a * b`` with broadcasting."""
    return binary(a, b, "multiply", name)


def divide(a: te.Tensor, b: te.Tensor, name: str = "T_divide") -> te.Tensor:
    """``a / b`` with broadcasting (floor division for integers, as numpy's ``//``)."""
    return binary(a, b, "divide", name)


_BINARY = {"add": lambda x, y: x + y, "subtract": lambda x, y: x - y,
           "multiply": lambda x, y: x * y, "divide": lambda x, y: x / y}


def binary(a: te.Tensor, b: te.Tensor, op: str, name: str) -> te.Tensor:
    """``a <op> b`` with broadcasting, e.g. ``(1, 128) + (128,)`` (a bias)::

        for ax0, ax1 in T.grid(1, 128):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_add[v_ax0, v_ax1] = A[v_ax0, v_ax1] + B[v_ax1]
    """
    if a.dtype != b.dtype:
        raise TopiError(f"{op}: operands have dtypes {a.dtype} and {b.dtype}; they must match")
    shape = broadcast_shape(a.shape, b.shape, op)
    fn = _BINARY[op]
    if op == "divide" and not a.dtype.startswith("float"):
        fn = lambda x, y: x // y  # noqa: E731 - numpy's floor division on integers
    n = len(shape)

    def read(t: te.Tensor, idx: tuple):
        lead = n - t.ndim
        return t[tuple(0 if t.shape[d] == 1 and shape[lead + d] != 1 else idx[lead + d]
                       for d in range(t.ndim))]

    def fcompute(*idx):
        return fn(read(a, idx), read(b, idx))

    return compute_nd(shape, fcompute, name)


def compute_nd(shape: tuple, fcompute: Callable, name: str, prefix: str = "ax") -> te.Tensor:
    """``te.compute`` with loops named ``ax0, ax1, ...`` (TVM's names for topi outputs)."""
    params = [inspect.Parameter(f"{prefix}{d}", inspect.Parameter.POSITIONAL_ONLY)
              for d in range(len(shape))]

    def named(*idx):
        return fcompute(*idx)

    named.__signature__ = inspect.Signature(params)  # te names the loops after these
    return te.compute(shape, named, name=name)
