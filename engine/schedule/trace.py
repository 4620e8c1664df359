"""Traces: the recorded list of schedule instructions, their JSON/URL forms, Python
exports (this engine, TVM 0.27, the 2022 course) and replay.

An instruction has TVM's shape ``[kind, inputs, attrs, outputs]``::

    ["GetBlock", [], ["Y", "mm_relu"], ["b0"]]
    ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]
    ["Split", ["l2", null, 4], [true, false], ["l4", "l5"]]

``inputs`` hold handle names (``"b0"``, ``"l2"``), numbers, ``null`` and string literals
written with their quotes (``"\\"pragma\\""``, TVM's convention). Our document is
``{"format": "schedule-explorer/trace", "version": 1, "workload": {...}, "insts": [...]}``;
:meth:`Trace.from_json` also reads TVM's ``trace.as_json()`` list ``[[insts], [decisions]]``.

Where things live: :mod:`.instruction` (the Instruction record, reading and checking
instruction lists, one Python line per instruction, TVM's InstructionKind),
:mod:`.recorded_trace` (the Trace class), :mod:`.tvm_trace` (TVM's Instruction/Trace API
holding handles: TVMInstruction, TVMTrace); this module adds :func:`replay`, which builds a
workload's Schedule, so it sits above :mod:`.state` (imports go instruction <- recorded_trace
<- state <- tvm_trace <- trace).
"""
from __future__ import annotations

from typing import Any

from .error import TraceError
from .instruction import Instruction, InstructionKind
from .recorded_trace import FORMAT, VERSION, Trace
from .state import Schedule
from .tvm_trace import TVMInstruction, TVMTrace

__all__ = ["FORMAT", "VERSION", "Instruction", "InstructionKind", "Trace", "TVMInstruction",
           "TVMTrace", "replay", "schedule_from_trace"]


def replay(workload_name: str, params: dict | None, trace: Any):
    """Build ``workload_name`` with ``params`` and replay ``trace`` (Trace, JSON document
    or URL token) on it; returns the Schedule."""
    import engine.workloads as workloads  # on first use: importing the schedule stays cheap
    params = dict(params or {})
    if isinstance(trace, str) and not trace.lstrip().startswith(("{", "[")):
        trace = Trace.decode(trace)
    elif not isinstance(trace, Trace):
        trace = Trace.from_json(trace)
    mod = workloads.get(workload_name, **params)
    sch = Schedule(mod, workload=(workload_name, params))
    trace.apply_to_schedule(sch)
    return sch


def schedule_from_trace(mod: Any, trace: Trace, *, workload: Any = None, seed: int | None = None,
                        func_name: str | None = None) -> Schedule:
    """A new Schedule of ``mod`` with ``trace`` replayed on it, its decisions applied (a
    sampling instruction without one samples from the generator seeded with ``seed``).

    This is how a search tries another choice: ``schedule_from_trace(mod,
    trace.with_decision(inst, d))`` is either the schedule of that choice or a
    :class:`ScheduleError` saying why the choice does not fit the program (a tiling that
    does not multiply to the loop's extent, a split the later steps cannot use, an
    illegal compute location...): never a program built from a repaired decision.
    A malformed trace raises :class:`TraceError`.
    """
    sch = Schedule(mod, workload=workload, seed=seed, func_name=func_name)
    try:
        trace.apply_to_schedule(sch)
    except TraceError as e:
        if e.schedule_error is not None:
            raise e.schedule_error from None
        raise
    return sch
