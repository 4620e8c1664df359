"""``tvm.s_tir.schedule.schedule``: ``Schedule`` with TVM's constructor over the engine's.

TVM's ``Schedule(mod, *, seed=None, debug_mask="none", error_render_level="detail",
enable_check=True)``: ``debug_mask`` (TVM's extra internal verification passes),
``error_render_level`` and ``enable_check`` are accepted and ignored — the engine checks
every primitive fully and always explains its refusals. A PrimFunc given alone becomes the
function ``main`` of a new module, as in TVM (it keeps its own name, as TVM's keeps its
``global_symbol``)."""
from __future__ import annotations

from typing import Any

from engine.ir.function import IRModule, PrimFunc
from engine.schedule import BlockRV, ExprRV, LoopRV, ScheduleError
from engine.schedule import Schedule as _EngineSchedule

SBlockRV = BlockRV

__all__ = ["Schedule", "ScheduleError", "SBlockRV", "BlockRV", "LoopRV", "ExprRV"]


class Schedule(_EngineSchedule):
    """:class:`engine.schedule.Schedule` constructed the way TVM's is (see module doc)."""

    def __init__(self, mod: Any, *, seed: int | None = None, debug_mask: Any = "none",
                 error_render_level: str = "detail", enable_check: bool = True) -> None:
        del debug_mask, error_render_level, enable_check  # see the module docstring
        if isinstance(mod, PrimFunc):
            mod = IRModule((("main", mod),))
        super().__init__(mod, seed=seed)
