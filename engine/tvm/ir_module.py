"""``tvm.ir.module`` (``from tvm.ir.module import IRModule``): the engine's ``IRModule``.
Registered under that name by :mod:`engine.tvm.ir` (``tvm.ir`` is a module here, not a
package)."""
from __future__ import annotations

from engine.ir.function import IRModule

__all__ = ["IRModule"]
