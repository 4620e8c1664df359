"""``tvm.s_tir`` (TVM 0.27's schedulable TensorIR): ``Schedule``, ``ScheduleError``,
``Trace``, ``Instruction``, ``InstructionKind``, the handle classes, and the ``schedule``
package (``schedule.testing``)."""
from . import schedule
from .schedule import (Instruction, InstructionKind, LoopRV, SBlockRV, Schedule, ScheduleError,
                       Trace, TraceError)

__all__ = ["schedule", "Schedule", "ScheduleError", "Trace", "TraceError", "Instruction",
           "InstructionKind", "SBlockRV", "LoopRV"]
