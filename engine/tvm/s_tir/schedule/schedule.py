"""``tvm.s_tir.schedule.schedule``: ``Schedule`` with TVM's constructor over the engine's.

TVM's ``Schedule(mod, *, seed=None, debug_mask="none", error_render_level="detail",
enable_check=True)``: ``debug_mask`` (TVM's extra internal verification passes) and
``enable_check`` are accepted and ignored — the engine checks every primitive fully. A
PrimFunc given alone becomes the function ``main`` of a new module, as in TVM (it keeps its
own name, as TVM's keeps its ``global_symbol``).

``error_render_level`` is how a refusal's message is written, as TVM's: ``"detail"`` (the
default) the engine's sentence — the rule and what to do — followed by TVM's detailed
sentence where the engine knows it; ``"fast"`` TVM's short sentence where the engine knows
it (else the engine's); ``"none"`` only ``(not rendered)``. The error's parts (``rule``,
``hint``, ``highlight``) are there whatever the level. TVM's sentences known: a block name
that is not in the function (``Cannot find a block with the name: ...``).

``sch.state`` is TVM's ``ScheduleState`` as far as the engine has one: its ``mod``, the
module the schedule is at (the engine keeps no sref tree: a schedule's state is its
immutable module and its table of handles)."""
from __future__ import annotations

from typing import Any

from engine.ir.function import IRModule, PrimFunc
from engine.schedule import BlockRV, ExprRV, LoopRV, ScheduleError
from engine.schedule import Schedule as _EngineSchedule

SBlockRV = BlockRV

__all__ = ["Schedule", "ScheduleError", "ScheduleState", "SBlockRV", "BlockRV", "LoopRV",
           "ExprRV"]


class ScheduleState:
    """``sch.state``: the module the schedule is at (``mod``), read when asked."""

    def __init__(self, sch: "_EngineSchedule") -> None:
        self._sch = sch

    @property
    def mod(self) -> IRModule:
        return self._sch.mod


#: TVM's error_render_level values
RENDER_LEVELS = ("detail", "fast", "none")


class Schedule(_EngineSchedule):
    """:class:`engine.schedule.Schedule` constructed the way TVM's is (see module doc)."""

    def __init__(self, mod: Any, *, seed: int | None = None, debug_mask: Any = "none",
                 error_render_level: str = "detail", enable_check: bool = True) -> None:
        del debug_mask, enable_check  # see the module docstring
        if error_render_level not in RENDER_LEVELS:
            raise ValueError(f"error_render_level must be one of {', '.join(RENDER_LEVELS)}, "
                             f"got {error_render_level!r}")
        if isinstance(mod, PrimFunc):
            mod = IRModule((("main", mod),))
        super().__init__(mod, seed=seed)
        self.error_render_level = error_render_level

    def _render(self, err: ScheduleError, fast: str = "", detail: str = "") -> None:
        """Write ``err``'s message at this schedule's ``error_render_level`` (see the module
        docstring), from its parts: the engine's sentence is rebuilt, never lost."""
        level = getattr(self, "error_render_level", "detail")
        own = err._message()
        if level == "none":
            err.args = ("ScheduleError: (not rendered)",)
        elif level == "fast":
            err.args = (f"ScheduleError: {fast}" if fast else own,)
        else:
            err.args = (f"{own}\n{detail}" if detail else own,)

    def _run(self, prim, inputs: list, attrs: list, decision: Any = None) -> list:
        try:
            return super()._run(prim, inputs, attrs, decision)
        except ScheduleError as err:
            self._render(err)
            raise

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        try:
            return super().get_block(name, func_name)
        except ScheduleError as err:
            missing = isinstance(name, str) and err.primitive == "get_block" and \
                err.subject == f"block {name}"
            self._render(err, "Cannot find a block with the specified name" if missing else "",
                         f"Cannot find a block with the name: {name}" if missing else "")
            raise

    get_sblock = get_block

    @property
    def state(self) -> ScheduleState:
        """TVM's ``ScheduleState`` of this schedule: its ``mod``."""
        return ScheduleState(self)
