"""engine.schedule — TensorIR-style scheduling: ``Schedule``, primitives, ``Trace``.

Usage (the course walk-through)::

    sch = engine.Schedule(mod, workload=("mm_relu", {"n": 128}))
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(block_Y, k)
    print(sch.trace.as_python())

Design
------
* :mod:`.state` — the Schedule holds an immutable IRModule that each primitive replaces
  wholesale; handles (BlockRV/LoopRV) map to stable keys (loop variable / block name) in
  a symbol table, so they stay valid across later primitives; stale handles explain
  which step removed them.
* :mod:`.registry` — every primitive is a :class:`~.registry.Primitive` subclass
  registered under TVM's instruction kind. The Schedule method, trace replay and all
  exports go through it, so they cannot disagree.
* :mod:`.tree` — parent links/look-ups (FuncIndex) and copy-on-write replacement.
* :mod:`.instruction` — the Instruction record (TVM's ``[kind, inputs, attrs, outputs]``),
  reading/checking instruction lists, one Python line per instruction.
* :mod:`.recorded_trace` — Trace: JSON document, URL token, Python/TVM/course exports,
  replay onto a schedule (below :mod:`.state`, which records into it).
* :mod:`.tvm_trace` — TVM's Instruction/Trace API (``TVMInstruction``, ``TVMTrace``:
  instructions holding the handles themselves, built by hand as TVM's tests do;
  ``InstructionKind`` is in :mod:`.instruction`), turned into the engine's Trace to replay
  and write.
* :mod:`.trace` — the public face of traces (Trace, Instruction, the TVM classes) plus
  :func:`replay`, which builds a workload's Schedule (so it sits above :mod:`.state`).
* sampling (:mod:`.primitives.sampling`) — ``sample_perfect_tile``,
  ``sample_categorical``, ``sample_compute_location`` draw from the schedule's generator
  (``Schedule(mod, seed=...)``) and return random variables (ExprRV integers, a LoopRV);
  the trace records their decisions and replays them (:func:`.trace.schedule_from_trace`).
* :mod:`.error` — ScheduleError (primitive, subject, rule, hint, highlight), TraceError.
* :mod:`.work_budget` — a bound on the CPU time and program size of a replay, installed by
  whoever replays traces it did not write (the web app).

How to add a primitive
----------------------
Create (or extend) a module under ``engine/schedule/primitives/`` and register a class::

    from ..registry import Primitive, Result, register, fmt
    from ._common import expect_loop, subject_of

    @register
    class Parallel(Primitive):
        kind = "Parallel"            # TVM's instruction kind (used in traces)
        method = "parallel"          # becomes Schedule.parallel

        def call(self, sch, loop):
            '''TVM-style docstring: "It requires: 1) ... 2) ...", program before,
            the call, program after.'''
            sch._run(self, [loop], [])           # inputs (handles/literals), attrs

        def apply(self, ctx, inputs, attrs):
            loop = expect_loop(ctx, inputs[0])   # handles arrive as current For/Block
            if <illegal>:
                raise ctx.error(subject_of(loop), "<the rule, one plain sentence>",
                                "<what would work>", highlight=[loop.loop_var.name])
            new_func = <pure rewrite of ctx.func, e.g. tree.replace_stmts(...)>
            return Result(new_func, outputs=[...new For/Block nodes...])

        def python_args(self, inputs, attrs, dialect):   # optional
            return [fmt(x) for x in inputs]

Rules: ``apply`` must not mutate anything (the IR is immutable anyway) and must do all
validation itself (replayed traces call it directly, without ``call``); keep each moved
loop's ``Var`` so handles follow it; report block renames in ``Result.renames``; set
``returns`` ("none"/"one"/"list") and, for queries, ``mutates = False``. Add the module
name to the list in ``primitives/__init__.py`` if it is a new family.
"""
from .error import ScheduleError, TraceError
from .state import BlockRV, ExprRV, LoopRV, Schedule
from .trace import (Instruction, InstructionKind, Trace, TVMInstruction, TVMTrace, replay,
                    schedule_from_trace)
from .work_budget import WorkBudget, WorkBudgetError, work_budget

__all__ = ["Schedule", "ScheduleError", "TraceError", "Trace", "Instruction", "BlockRV",
           "LoopRV", "ExprRV", "replay", "schedule_from_trace", "WorkBudget",
           "WorkBudgetError", "work_budget", "InstructionKind", "TVMInstruction", "TVMTrace"]
