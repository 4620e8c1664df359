"""Buffers (multi-dimensional arrays), ranges and buffer regions."""
from __future__ import annotations

import re
from typing import Any

from .dtype import TypeInfo, bytes_of, check_dtype
from .expr import PrimExpr, as_const_int, convert
from .node import Node, node

SCOPES = ("global", "local", "shared")
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def is_storage_scope(scope: Any) -> bool:
    """A storage scope: one of SCOPES, or one with a tag (``"global.A_reg"``, TVM's tagged
    scopes: the same memory, a name a tensor intrinsic can ask for)."""
    if not isinstance(scope, str):
        return False
    head, dot, tag = scope.partition(".")
    return head in SCOPES and (not dot or _TAG.fullmatch(tag) is not None)


def base_scope(scope: str) -> str:
    """The scope without its tag (``"global.A_reg"`` -> ``"global"``)."""
    return scope.partition(".")[0]


@node
class Buffer(Node):
    """A named multi-dimensional array: ``T.Buffer((128, 128), "float32")``.

    Identity matters: two buffers with the same name are different buffers.
    ``scope`` is "global" (heap/argument) or "local" (kept by the backend on the stack
    / in registers). ``axis_separators`` and ``strides`` follow TVM; strides are
    computed (row-major) when empty.
    """

    name: str
    shape: tuple
    dtype: str = "float32"
    scope: str = "global"
    strides: tuple = ()
    elem_offset: int = 0
    align: int = 64

    def __post_init__(self):
        check_dtype(self.dtype)
        object.__setattr__(self, "shape", tuple(convert(s) for s in self.shape))
        object.__setattr__(self, "strides", tuple(convert(s) for s in self.strides))
        if not is_storage_scope(self.scope):
            raise ValueError(f"unknown storage scope {self.scope!r}; use one of {SCOPES}, "
                             "optionally with a tag such as \"global.A_reg\"")

    __hash__ = object.__hash__

    @property
    def ty(self) -> "TypeInfo":
        """TVM 0.27's type of a buffer variable: its ``dtype`` and ``shape``."""
        return TypeInfo(self.dtype, self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def const_shape(self) -> tuple[int, ...]:
        """Shape as Python ints (raises ValueError for symbolic shapes)."""
        out = []
        for s in self.shape:
            v = as_const_int(s)
            if v is None:
                raise ValueError(f"buffer {self.name} has a symbolic shape")
            out.append(v)
        return tuple(out)

    def nbytes(self) -> int:
        n = 1
        for s in self.const_shape():
            n *= s
        return n * bytes_of(self.dtype)

    def __getitem__(self, indices: Any):
        """``A[i, j]`` builds a BufferLoad (handy in the te frontend and tests)."""
        from .expr import BufferLoad
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))


@node
class Range(Node):
    """Half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    def __post_init__(self):
        object.__setattr__(self, "min", convert(self.min))
        object.__setattr__(self, "extent", convert(self.extent))

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        return Range(convert(min_value), convert(extent))


@node
class BufferRegion(Node):
    """``A[vi, 0:128]``: a rectangular region of a buffer (one Range per dimension)."""

    buffer: Buffer
    region: tuple

    def __post_init__(self):
        object.__setattr__(self, "region", tuple(self.region))

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple(Range(0, s) for s in buffer.shape))
