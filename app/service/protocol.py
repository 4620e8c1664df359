"""The wire protocol between the web app and the measurement workers: plain data only.

A :class:`Job` says what to measure (a pickled IRModule the server made itself, TVMScript
text, a trace, or a preset workload) and which *actions* to run on it; a :class:`JobResult`
is what came back (``ok``, or why not: error, timeout, crashed, out-of-memory, ...).
:func:`step_job` / :func:`step_dict` are the explorer step's job and the step dict the
panes show; :func:`loop_index` / :func:`loop_at` name a loop across processes.

Messages over a worker's pipe (``multiprocessing`` connection, small tuples)::

    pool -> worker   ("job", job_dict)        run one job
                     ("go", [cores])          the timing slot asked for is granted
                     ("stop",)                exit cleanly
    worker -> pool   ("ready", pid)           after start-up (limits applied)
                     ("action", name)         an action starts (so a crash can be placed)
                     ("data", {...})          partial results, as soon as each action ends
                     ("need_timing", ncores)  ask for a timing slot (waits for "go")
                     ("timing_done",)         the slot is free again
                     ("result", {...})        the job's final status

The step dict (one explorer step, measured; JSON-friendly, stored by :mod:`app.store`)::

    {"hash": str, "ok": bool, "stage": "compile"|"check"|"time"|"done"|"measure"|"unavailable",
     "error": str|None, "status": pool status when it failed,
     "compile_ms": float, "compile_ours_ms": float, "compile_llvm_ms": float (the split
     of the first compile of this program: ours vs llvmlite's),
     "time_ms": float, "timed_runs": 1 (only for a slow step timed by its checked run),
     "gflops": float|None, "numpy_ms": float|None, "numpy_threads": int, "numpy_note": str,
     "correct": True|False|None, "max_abs_err": float|None, "detail": str}
"""
from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["Job", "JobResult", "QueueFull", "PoolClosed", "PoolUnavailable", "STEP_ACTIONS",
           "ENGINE_ACTIONS", "step_job", "step_dict", "empty_step", "loop_index", "loop_at"]

STEP_ACTIONS = ("compile", "check", "time", "source")
ENGINE_ACTIONS = {"step", "compile", "run", "check", "time", "source", "cache", "pattern",
                   "roofline"}


class QueueFull(RuntimeError):
    """The pool's queue is at its bound; ``str(e)`` is the sentence to show."""

    def __init__(self, waiting: int):
        super().__init__(f"the server is busy, {waiting} steps are waiting; "
                         f"try again in a moment")
        self.waiting = waiting


class PoolUnavailable(RuntimeError):
    """The worker processes could not be started (``str(e)`` says why, for the page)."""


class PoolClosed(RuntimeError):
    """The pool is shutting down and accepts no more jobs."""

    def __init__(self):
        super().__init__("the server is shutting down; this step was not measured")


# --------------------------------------------------------------------------- jobs and results
@dataclass(frozen=True)
class Job:
    """One unit of work for a worker, made of plain data only.

    The program is given by exactly one of: ``module`` (an IRModule pickled by the server
    itself — see :func:`step_job`; never bytes from a user), ``program`` (TVMScript text),
    ``trace`` (a trace
    JSON document, replayed on ``workload``/``params``), ``token`` (a URL trace token), or a
    bare ``workload`` (the preset program).  ``actions`` are run in order (see
    :mod:`app.service.actions`).  ``time_limit_s`` overrides the pool's limit for this job.
    """

    actions: tuple[str, ...] = STEP_ACTIONS
    program: str | None = None
    module: bytes | None = None
    baseline: bytes | None = None
    workload: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    trace: Any = None
    token: str | None = None
    func_name: str | None = None
    seed: int = 0
    number: int = 3
    repeat: int = 3
    min_repeat_ms: float = 0.0
    time_limit_s: float | None = None
    debug_arg: Any = None
    debug_cores: int | None = None
    loop_index: int | None = None       # "pattern": the loop (post-order index of its For)
    iteration: int = 0                  # "pattern": which iteration of that loop

    @classmethod
    def for_trace(cls, workload: str, params: dict[str, Any], trace: Any,
                  actions: Iterable[str] = STEP_ACTIONS, **kw: Any) -> "Job":
        return cls(actions=tuple(actions), workload=workload, params=dict(params),
                   trace=trace, **kw)

    @classmethod
    def for_program(cls, program: str, actions: Iterable[str] = ("compile", "source"),
                    workload: str | None = None, params: dict[str, Any] | None = None,
                    **kw: Any) -> "Job":
        return cls(actions=tuple(actions), program=program, workload=workload,
                   params=dict(params or {}), **kw)

    @classmethod
    def for_module(cls, mod: Any, actions: Iterable[str] = STEP_ACTIONS, **kw: Any) -> "Job":
        """A job on an IRModule the server holds (pickled; identity of vars is preserved)."""
        return cls(actions=tuple(actions), module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL),
                   **kw)

    @classmethod
    def debug(cls, what: str, arg: Any = None, **kw: Any) -> "Job":
        """A test job: ``what`` in segfault, abort, exit, sleep, spin, alloc, raise, echo, timed."""
        return cls(actions=(f"debug:{what}",), debug_arg=arg, **kw)

    def check_actions(self, allow_debug: bool = False) -> None:
        """Raise ``ValueError`` unless every action is an engine action (or, with
        ``allow_debug``, a ``debug:*`` test hook)."""
        bad = [a for a in self.actions
               if a not in ENGINE_ACTIONS and not (allow_debug and a.startswith("debug:"))]
        if bad or not self.actions:
            raise ValueError(f"unknown or disallowed action(s) {bad or '(none)'}; "
                             f"known actions: {sorted(ENGINE_ACTIONS)}")

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class JobResult:
    """The outcome of a job, as plain data (JSON-able; stored by :mod:`app.store`).

    ``status``: ``ok``, ``error`` (the program or trace was refused/failed — ``message`` is the
    engine's sentence), ``timeout``, ``crashed``, ``out-of-memory``, ``cancelled`` or
    ``shutdown``.  ``data`` holds what the actions produced before the end (even after a
    crash: e.g. ``compile_s`` and ``correct`` survive a crash while timing):
    ``compile_s``, ``correct``, ``check``, ``times`` ({mean, median, min, ...} in seconds),
    ``gflops``, ``numpy_s``, ``numpy_gflops``, ``flops``, ``cores``, ``parallel``,
    ``source`` ({"ll-opt": ..., "asm": ...}), ``cache``.
    """

    status: str
    message: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    queued_s: float = 0.0
    worker_pid: int | None = None
    failed_action: str | None = None
    detail: str | None = None      # traceback of an internal error (for the log, not the page)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def measured(self) -> bool:
        """True when the result carries a runtime."""
        return self.ok and "times" in self.data

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobResult":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# --------------------------------------------------------------------------- explorer steps
def step_job(mod: Any, workload: str | None, params: dict[str, Any], *,
             func_name: str | None = None, baseline: Any = None,
             time_limit_s: float | None = None) -> Job:
    """The job for one explorer step: :func:`app.service.timing.measure_step` run in a
    worker (its ``step`` action)."""
    return Job(actions=("step",), module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL),
               baseline=(pickle.dumps(baseline, pickle.HIGHEST_PROTOCOL)
                         if baseline is not None else None),
               workload=workload, params=dict(params), func_name=func_name,
               time_limit_s=time_limit_s)


_STAGE_OF_ACTION = {"compile": "compile", "check": "check", "time": "time", "step": "time"}


def empty_step(program_hash: str, **values: Any) -> dict[str, Any]:
    """A step dict with nothing measured yet (``values`` set some fields)."""
    out = {"hash": program_hash, "ok": False, "stage": "compile", "error": None,
           "compile_ms": None, "time_ms": None, "gflops": None, "numpy_ms": None,
           "correct": None, "max_abs_err": None, "detail": ""}
    out.update(values)
    return out


def step_dict(result: JobResult, program_hash: str) -> dict[str, Any]:
    """A :class:`JobResult` of :func:`step_job` as the step dict (module docstring).

    A successful job returns the worker's dict as is; a timeout, crash or out-of-memory
    becomes ``{"ok": False, "stage": ..., "error": <the pool's sentence>, ...}`` keeping
    whatever the worker reported before it stopped, plus ``"status"`` (the pool's status)
    so the page can tell "timed out" from "wrong result".
    """
    step = result.data.get("step")
    if result.ok and isinstance(step, dict):
        out = dict(step)
        out.setdefault("status", "ok")
        return out
    out = empty_step(program_hash)
    if isinstance(step, dict):
        out.update(step)
    if result.status == "error":
        stage = _STAGE_OF_ACTION.get(result.failed_action or "", out.get("stage") or "time")
    elif result.status == "unavailable":
        stage = "unavailable"          # the app shows "measurements are not available"
    else:
        stage = "measure"
    out.update(ok=False, error=result.message or f"the step failed ({result.status})",
               status=result.status, stage=stage)
    return out


# --------------------------------------------------------------------------- naming a loop
def _loops(func) -> list:
    from engine.ir import For, post_order_visit
    found: list = []
    post_order_visit(func, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def loop_index(func, loop) -> int | None:
    """The position of ``loop`` among ``func``'s ``For`` nodes in post-order (the same in a
    worker's unpickled copy, so a loop can be named across processes)."""
    return next((i for i, n in enumerate(_loops(func)) if n is loop), None)


def loop_at(func, index: int):
    """The ``For`` node at ``index`` in post-order (see :func:`loop_index`), or None."""
    found = _loops(func)
    return found[index] if 0 <= index < len(found) else None
