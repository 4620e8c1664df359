"""Values and dtypes: which numpy dtype holds an IR dtype, C-like integer wrap-around,
casts of scalars and lane vectors, and the constants the compiler folds."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir.dtype import bits_of, element_of, is_bool, is_float, is_int, is_uint

from .errors import InterpretError

NC = object()  # "not a constant"
Fn = Callable[[list], Any]  # a compiled expression or statement: env -> value


def np_dtype(dtype: str) -> np.dtype:
    base = element_of(dtype)
    if base == "handle":
        raise InterpretError("buffers of dtype 'handle' cannot be interpreted")
    return np.dtype(np.bool_) if base == "bool" else np.dtype(base)


def int_limits(dtype: str) -> tuple[int, int, int, bool]:
    """``(lowest, highest, bits, signed)`` of an integer dtype."""
    base = element_of(dtype)
    bits = bits_of(base)
    signed = not is_uint(base)
    lo = -(1 << (bits - 1)) if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    return lo, hi, bits, signed


def wrapper(dtype: str) -> Callable[[int], int]:
    """Python int -> the value a C integer of ``dtype`` holds (two's-complement wrap)."""
    lo, hi, bits, signed = int_limits(dtype)
    mask = (1 << bits) - 1
    half = 1 << bits

    def wrap(v: int) -> int:
        if lo <= v <= hi:
            return v
        v &= mask
        if signed and v > hi:
            v -= half
        return v
    return wrap


def scalar_caster(dtype: str) -> Callable[[Any], Any]:
    """Python/numpy value -> the canonical scalar of ``dtype`` (numpy float, Python int/bool)."""
    base = element_of(dtype)
    if is_float(base):
        return np.dtype(base).type
    if is_bool(base):
        return bool
    if is_int(base):
        wrap = wrapper(base)

        def to_int(v: Any) -> int:
            if isinstance(v, (float, np.floating)) and not math.isfinite(v):
                raise InterpretError(f"cannot convert {v} to {base}")
            return wrap(int(v))  # int() truncates toward zero, as C does
        return to_int
    if base == "handle":
        return lambda v: v
    raise InterpretError(f"unsupported dtype {dtype!r}")


def vector_cast(v: Any, dtype: str, lanes: int) -> np.ndarray:
    """A value (lanes or one scalar for all ``lanes``) cast to an array of ``dtype``."""
    target = np_dtype(dtype)
    arr = np.asarray(v)
    if arr.ndim == 0:
        arr = np.full(lanes, arr)
    if is_bool(dtype):
        return arr != 0
    if is_int(dtype) and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InterpretError(f"cannot convert non-finite values to {dtype}")
        arr = np.trunc(arr).astype(np.int64)
    if is_int(dtype) and arr.dtype.kind in "iub":
        arr64 = arr.astype(np.int64) if arr.dtype != np.uint64 else arr
        return arr64.astype(target)  # two's-complement wrap
    return arr.astype(target)


def const_value(e: Any) -> Any:
    """The value of an immediate (IntImm, FloatImm, StringImm), else :data:`NC`."""
    if isinstance(e, E.IntImm):
        if is_bool(e.dtype):
            return bool(e.value)
        return wrapper(e.dtype)(e.value) if is_int(e.dtype) else e.value
    if isinstance(e, E.FloatImm):
        return np_dtype(e.dtype).type(e.value)
    if isinstance(e, E.StringImm):
        return e.value
    return NC
