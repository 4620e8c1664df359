"""``tvm.s_tir.schedule``: ``Schedule`` (a thin adapter of :class:`engine.schedule.Schedule`
to TVM's constructor), ``ScheduleError``, ``Trace``/``Instruction``/``InstructionKind`` (TVM's
API: the engine's ``TVMTrace``/``TVMInstruction``), the handles (``SBlockRV`` is the engine's
``BlockRV``), and ``testing`` (``verify_trace_roundtrip``, ...)."""
from . import instruction, schedule, testing, trace
from .schedule import BlockRV, ExprRV, LoopRV, SBlockRV, Schedule, ScheduleError
from .trace import Instruction, InstructionKind, Trace, TraceError

__all__ = ["Schedule", "ScheduleError", "Trace", "TraceError", "Instruction", "InstructionKind",
           "SBlockRV", "BlockRV", "LoopRV", "ExprRV", "instruction", "schedule", "testing",
           "trace"]
