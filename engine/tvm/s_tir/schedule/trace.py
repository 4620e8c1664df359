"""``tvm.s_tir.schedule.trace``: TVM's ``Trace`` and ``Instruction`` (the engine's ``TVMTrace``
and ``TVMInstruction``: instructions holding the handles themselves), ``InstructionKind``."""
from engine.schedule import InstructionKind, TraceError
from engine.schedule import TVMInstruction as Instruction
from engine.schedule import TVMTrace as Trace

__all__ = ["Trace", "Instruction", "InstructionKind", "TraceError"]
