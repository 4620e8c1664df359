"""``tvm.s_tir.schedule.instruction``: ``Instruction`` and ``InstructionKind``."""
from .trace import Instruction, InstructionKind

__all__ = ["Instruction", "InstructionKind"]
