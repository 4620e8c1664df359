"""``tvm.tir`` as the 2022 course knew it: everything of :mod:`.tirx` plus ``Schedule``,
``ScheduleError`` and ``Trace`` (which TVM 0.27 moved to ``tvm.s_tir``)."""
from engine.tvm.s_tir.schedule.schedule import Schedule, ScheduleError
from engine.tvm.s_tir.schedule.trace import Instruction, InstructionKind, Trace
from engine.tvm.tirx import *  # noqa: F403 - tvm.tir mirrors tvm.tirx
from engine.tvm.tirx import __all__ as _tirx_names
from engine.tvm.tirx import buffer, expr, function, stmt, stmt_functor  # noqa: F401

__all__ = ["Schedule", "ScheduleError", "Trace", "Instruction", "InstructionKind", *_tirx_names]
