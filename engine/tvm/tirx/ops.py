"""``tvm.tirx.floordiv`` / ``floormod`` over the engine's ``FloorDiv`` / ``FloorMod``."""
from __future__ import annotations

from typing import Any

from engine.ir.expr import FloorDiv, FloorMod, binary

__all__ = ["floordiv", "floormod"]


def floordiv(a: Any, b: Any) -> Any:
    """``a // b`` rounded towards minus infinity (the engine's ``FloorDiv``)."""
    return binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> Any:
    """The remainder of :func:`floordiv` (the engine's ``FloorMod``)."""
    return binary(FloorMod, a, b)
