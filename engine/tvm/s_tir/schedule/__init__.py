"""``tvm.s_tir.schedule``: ``Schedule`` (a thin adapter of :class:`engine.schedule.Schedule`
to TVM's constructor), ``ScheduleError``, ``Trace``/``Instruction``, the handles (``SBlockRV``
is the engine's ``BlockRV``), and ``testing`` (``verify_trace_roundtrip``, ...)."""
from . import schedule, testing, trace
from .schedule import BlockRV, ExprRV, LoopRV, SBlockRV, Schedule, ScheduleError
from .trace import Instruction, Trace, TraceError

__all__ = ["Schedule", "ScheduleError", "Trace", "TraceError", "Instruction", "SBlockRV",
           "BlockRV", "LoopRV", "ExprRV", "schedule", "testing", "trace"]
