"""``tvm.tirx.analysis``: ``expr_deep_equal`` (the engine's structural equality of two
expressions, variables by identity)."""
from __future__ import annotations

from typing import Any

from engine.ir.structural import structural_equal

__all__ = ["expr_deep_equal"]


def expr_deep_equal(lhs: Any, rhs: Any) -> bool:
    """True when ``lhs`` and ``rhs`` are the same expression tree over the same variables."""
    return structural_equal(lhs, rhs)
