"""``tvm.tirx.buffer``: ``Buffer`` and ``decl_buffer`` (TVM's argument order over the
engine's ``Buffer(name, shape, dtype, scope)``)."""
from __future__ import annotations

from typing import Any

from engine.ir.buffer import Buffer, BufferRegion

__all__ = ["Buffer", "BufferRegion", "decl_buffer", "is_buffer_var"]


def is_buffer_var(x: Any) -> bool:
    """Whether a function parameter is a buffer (TVM 0.27's parameters are buffer variables
    or scalar variables)."""
    return isinstance(x, Buffer)


def decl_buffer(shape: Any, dtype: str = "float32", name: str = "buffer",
                scope: str = "global") -> Buffer:
    """A new buffer (``tvm.tirx.decl_buffer(shape, dtype, name)``); TVM's other options
    (data, strides, elem_offset, ...) have no counterpart here."""
    if isinstance(shape, (int,)) or not isinstance(shape, (list, tuple)):
        shape = (shape,)
    return Buffer(name, tuple(shape), dtype, scope)
