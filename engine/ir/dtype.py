"""Data types: plain strings such as ``"float32"``, ``"int32"``, ``"bool"``,
and vector types ``"float32x8"`` (lanes appended) used after vectorization."""
from __future__ import annotations

from typing import NamedTuple

SCALAR_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64",
                 "uint8", "uint16", "uint32", "uint64", "bool", "handle")


class DTypeError(ValueError):
    """An unknown or malformed dtype string."""


#: the dtypes split so far (every pass asks for the same few, tens of thousands of times)
_SPLIT: dict[str, tuple[str, int]] = {}
_SPLIT_KEPT = 256


def split_lanes(dtype: str) -> tuple[str, int]:
    """``"float32x8" -> ("float32", 8)``; ``"float32" -> ("float32", 1)``."""
    got = _SPLIT.get(dtype) if type(dtype) is str else None
    if got is not None:
        return got
    got = _split_lanes(dtype)
    if len(_SPLIT) < _SPLIT_KEPT:
        _SPLIT[dtype] = got
    return got


def _split_lanes(dtype: str) -> tuple[str, int]:
    if not isinstance(dtype, str):
        raise DTypeError(f"dtype must be a string such as 'float32', got {dtype!r}")
    base, sep, lanes = dtype.partition("x")
    if sep:
        if base not in SCALAR_DTYPES or not lanes.isdigit() or int(lanes) < 1:
            raise DTypeError(f"unknown dtype {dtype!r}")
        return base, int(lanes)
    if dtype not in SCALAR_DTYPES:
        raise DTypeError(
            f"unknown dtype {dtype!r}; use one of float32, float64, int32, int64, bool, ...")
    return dtype, 1


def check_dtype(dtype: str) -> str:
    split_lanes(dtype)
    return dtype


def element_of(dtype: str) -> str:
    return split_lanes(dtype)[0]


def lanes_of(dtype: str) -> int:
    return split_lanes(dtype)[1]


def with_lanes(dtype: str, lanes: int) -> str:
    base = element_of(dtype)
    return base if lanes == 1 else f"{base}x{lanes}"


def is_float(dtype: str) -> bool:
    return element_of(dtype).startswith("float")


def is_int(dtype: str) -> bool:
    return element_of(dtype).startswith(("int", "uint"))


def zero_filled(dtype: str) -> bool:
    """Is a buffer of this dtype zero-filled when a function allocates it (scalar integers:
    int8..int64, uint8..uint64)? The interpreter and the generated code both fill such
    buffers with zeros, and the bounds proof relies on it (an element of one is 0 or a
    value stored into it)."""
    return is_int(dtype) and lanes_of(dtype) == 1


def is_uint(dtype: str) -> bool:
    return element_of(dtype).startswith("uint")


def is_bool(dtype: str) -> bool:
    return element_of(dtype) == "bool"


def bits_of(dtype: str) -> int:
    base = element_of(dtype)
    if base == "bool":
        return 1
    if base == "handle":
        return 64
    return int(base.lstrip("floatuint"))


def bytes_of(dtype: str) -> int:
    """Storage size of one element in bytes (bool is stored as one byte)."""
    base = element_of(dtype)
    if base == "bool":
        return 1
    return max(1, bits_of(base) // 8) * lanes_of(dtype)


class TypeInfo(NamedTuple):
    """What TVM 0.27's ``.ty`` of a variable or a buffer gives: a dtype (and a shape, for a
    buffer)."""

    dtype: str
    shape: tuple = ()
