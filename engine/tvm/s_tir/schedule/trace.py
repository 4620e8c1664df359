"""``tvm.s_tir.schedule.trace``: the engine's ``Trace`` and ``Instruction``."""
from engine.schedule import Instruction, Trace, TraceError

__all__ = ["Trace", "Instruction", "TraceError"]
