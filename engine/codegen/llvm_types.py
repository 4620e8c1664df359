"""LLVM types of the IR's dtypes, and LLVM-safe names.

``float32`` -> ``float``, ``float32x8`` -> ``<8 x float>``, ``bool`` -> ``i1`` in registers
and ``i8`` in memory, ``handle`` -> an opaque pointer.
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir.dtype import bits_of, element_of, is_bool, split_lanes
from engine.lower.errors import BuildError

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()


def scalar_type(dtype: str) -> ir.Type:
    base = element_of(dtype)
    if base == "float32":
        return ir.FloatType()
    if base == "float64":
        return ir.DoubleType()
    if base == "float16":
        return ir.HalfType()
    if base == "bool":
        return I1
    if base == "handle":
        return PTR
    return ir.IntType(bits_of(base))


def llvm_type(dtype: str) -> ir.Type:
    """LLVM register type of an IR dtype (``float32x8`` -> ``<8 x float>``, bool -> i1)."""
    base, lanes = split_lanes(dtype)
    t = scalar_type(base)
    return t if lanes == 1 else ir.VectorType(t, lanes)


def mem_type(dtype: str) -> ir.Type:
    """LLVM in-memory element type (bool is stored as a byte)."""
    return I8 if is_bool(dtype) else scalar_type(dtype)


def sanitize(name: str) -> str:
    """``name`` with every character other than a letter, digit or ``_`` made ``_``."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def type_suffix(t: ir.Type) -> str:
    """The suffix LLVM gives an intrinsic overloaded on ``t`` (``f32``, ``i64``, ``v8f32``)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise BuildError(f"no LLVM intrinsic suffix for type {t}")
