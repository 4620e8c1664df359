"""The wire protocol between the web app and the measurement workers: plain data only.

A :class:`Job` says what to measure (a pickled IRModule the server made itself, TVMScript
text, a trace, or a preset workload) and which *actions* to run on it; a :class:`JobResult`
is what came back (``ok``, or why not: error, timeout, crashed, out-of-memory, ...).
:func:`step_job` / :func:`step_dict` are the explorer step's job and the step dict the
panes show; :func:`loop_index` / :func:`loop_at` name a loop across processes.

Messages over a worker's pipe (``multiprocessing`` connection, small tuples)::

    pool -> worker   ("job", job_dict)        run one job; for a job whose first action
                                              takes a core slot at once
                                              (:data:`SLOT_AT_START`), ``job_dict["granted"]``
                                              may name the slot the pool took for it
                                              beforehand (its first ``need_timing`` for that
                                              many cores is then answered in advance)
                     ("go", [cores])          the timing slot asked for is granted
                     ("stop",)                exit cleanly
    worker -> pool   ("ready", pid, {...})    after start-up (sandbox set up: see
                                              ``app.service.worker``; ``{"network": None}``
                                              or why the worker still has network access)
                     ("action", name)         an action starts (so a crash can be placed)
                     ("data", {...})          partial results, as soon as each action ends
                     ("need_timing", ncores)  ask for a timing slot (waits for "go")
                     ("timing_done",)         the slot is free again
                     ("result", {...})        the job's final status

The server made what it sends, so that direction is pickled. What comes back was made by a
process that ran untrusted code: each reply is one JSON document (:func:`encode_reply`),
bounded in size, and the server accepts only the shapes above (:func:`decode_reply`);
anything else is a :class:`BadReply` — the job failed and the worker is replaced.

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
import json
import pickle
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..kept import MiB, KeptByIdentity, ir_bytes

__all__ = ["Job", "JobResult", "QueueFull", "ClientQueueFull", "PoolClosed", "PoolUnavailable",
           "BadReply", "STEP_ACTIONS", "ENGINE_ACTIONS", "SLOT_AT_START", "WORKER_STATUSES",
           "step_job",
           "step_dict", "empty_step", "encode_reply", "decode_reply", "loop_index", "loop_at"]

STEP_ACTIONS = ("compile", "check", "time", "source")
ENGINE_ACTIONS = {"step", "compile", "run", "check", "time", "source", "cache", "pattern",
                   "roofline", "model", "model_import", "tune", "export"}
#: actions that ask for one core slot as soon as they start (an explorer step: from its
#: compile to its last timed run; a cache simulation; the pool tests' timed job). A job that
#: begins with one is sent with a free slot already taken for it, when one is free and no
#: other request waits: asking from the worker is a round trip through a server thread,
#: which waited for the interpreter's lock behind the click's rendering (3-7 ms on the way
#: to the runtime point).
SLOT_AT_START = frozenset({"step", "cache", "debug:timed"})


class QueueFull(RuntimeError):
    """The pool's queue is at its bound; ``str(e)`` is the sentence to show."""

    def __init__(self, waiting: int):
        super().__init__(f"the server is busy, {waiting} steps are waiting; "
                         f"try again in a moment")
        self.waiting = waiting


class ClientQueueFull(QueueFull):
    """One client already has its share of the queue waiting; ``str(e)`` is the sentence."""

    def __init__(self, waiting: int):
        RuntimeError.__init__(self, f"you have {waiting} steps waiting; they are measured "
                                    f"in turn with everyone else's — try again when they "
                                    f"are done")
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
    tune: dict[str, Any] | None = None  # "tune": space, trials, strategy, seed, database
    client: str | None = None           # who asked (the queue is fair between clients:
                                        # their addresses); stays in the server
    owner: str | None = None            # the learner who asked (their signed cookie): who
                                        # may stop it; stays in the server too
    background: bool = False            # waits while a step compiles (app.service.queue);
                                        # stays in the server too
    program_hash: str | None = None     # ``module``'s structural hash, when the server has
                                        # it (the worker then does not hash it again)
    target: str | None = None           # a GPU target string ("cuda -model=h100-sxm"): the
                                        # step, compile and source actions build for it
                                        # (engine.gpu.build_gpu); None: this machine's CPU

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
        wire = dataclasses.asdict(self)
        del wire["client"], wire["owner"], wire["background"]
        return wire


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


# --------------------------------------------------------------------------- worker replies
#: the statuses a worker may report for a job (the pool adds timeout, crashed, ...)
WORKER_STATUSES = ("ok", "error", "out-of-memory")


class BadReply(ValueError):
    """What a worker sent is not one of the replies the protocol allows."""


def encode_reply(msg: tuple) -> bytes:
    """One worker -> pool message as JSON (values JSON cannot hold are sent as text)."""
    return json.dumps(list(msg), default=str, separators=(",", ":")).encode()


def _optional(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def _result_ok(r: Any) -> bool:
    return (isinstance(r, dict) and r.get("status") in WORKER_STATUSES
            and _optional(r.get("message"), str) and _optional(r.get("detail"), str)
            and _optional(r.get("failed_action"), str)
            and isinstance(r.get("retire", False), bool))


_REPLY_SHAPES = {
    "ready": lambda m: len(m) == 3 and isinstance(m[1], int) and isinstance(m[2], dict)
    and _optional(m[2].get("network"), str),
    "action": lambda m: len(m) == 2 and isinstance(m[1], str),
    "data": lambda m: len(m) == 2 and isinstance(m[1], dict),
    "need_timing": lambda m: len(m) == 2 and type(m[1]) is int and m[1] >= 1,
    "timing_done": lambda m: len(m) == 1,
    "result": lambda m: len(m) == 2 and _result_ok(m[1]),
}


def decode_reply(raw: bytes) -> tuple:
    """A worker's message from its bytes; :class:`BadReply` unless it is JSON of one of the
    shapes in the module docstring (never unpickled, never evaluated)."""
    try:
        msg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadReply(f"not JSON ({type(e).__name__})") from None
    if not (isinstance(msg, list) and msg and isinstance(msg[0], str)):
        raise BadReply("not a message")
    check = _REPLY_SHAPES.get(msg[0])
    if check is None or not check(msg):
        raise BadReply(f"a {msg[0][:40]!r} message of the wrong shape")
    return tuple(msg)


# --------------------------------------------------------------------------- explorer steps
#: the last modules pickled, by identity (the IR is immutable): a click sends its program
#: twice, in its step job and in its cache simulation's job
_PICKLED: "KeptByIdentity[bytes]" = KeptByIdentity(
    8 * MiB, lambda mod, data: ir_bytes(mod) + len(data))


def module_bytes(mod: Any) -> bytes:
    """``mod`` pickled for a job's ``module`` (once per module object, see
    :class:`app.kept.KeptByIdentity`)."""
    return _PICKLED.get(mod, lambda: pickle.dumps(mod, pickle.HIGHEST_PROTOCOL))


def step_job(mod: Any, workload: str | None, params: dict[str, Any], *,
             func_name: str | None = None, baseline: Any = None,
             time_limit_s: float | None = None, program_hash: str | None = None,
             target: str | None = None) -> Job:
    """The job for one explorer step: :func:`app.service.timing.measure_step` run in a
    worker (its ``step`` action), or for a GPU ``target``
    :func:`app.service.timing.measure_gpu_step`. ``program_hash``: ``mod``'s structural
    hash, when the caller has it."""
    return Job(actions=("step",), module=module_bytes(mod),
               baseline=(module_bytes(baseline) if baseline is not None else None),
               workload=workload, params=dict(params), func_name=func_name,
               time_limit_s=time_limit_s, program_hash=program_hash, target=target)


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


# --------------------------------------------------------------------------- arrays in replies
def array_doc(arr: Any) -> dict[str, Any]:
    """A float32 array as JSON-able data (shape, base64 of its little-endian bytes)."""
    import base64

    import numpy as np

    a = np.ascontiguousarray(arr, dtype="<f4")
    return {"shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode("ascii")}


def array_of(doc: Any, max_elements: int) -> Any:
    """The float32 array of :func:`array_doc`, checked as data from a worker: a shape of at
    most 8 non-negative sizes, at most ``max_elements`` values, and exactly the bytes they
    need (a :class:`BadReply` otherwise)."""
    import base64
    import binascii
    import math

    import numpy as np

    if not isinstance(doc, dict) or not isinstance(doc.get("shape"), list) or \
            not isinstance(doc.get("data"), str):
        raise BadReply("an array is {shape, data}")
    shape = doc["shape"]
    if len(shape) > 8 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                 for d in shape):
        raise BadReply(f"an array's shape is at most 8 sizes, got {str(shape)[:80]}")
    n = math.prod(shape)
    if n > max_elements or len(doc["data"]) > 4 * (4 * n + 2) // 3 + 4:
        raise BadReply(f"an array of {n} values, over the {max_elements} allowed")
    try:
        raw = base64.b64decode(doc["data"], validate=True)
    except (binascii.Error, ValueError):
        raise BadReply("an array's data is not base64") from None
    if len(raw) != 4 * n:
        raise BadReply(f"an array of shape {shape} holds {len(raw)} bytes, not {4 * n}")
    return np.frombuffer(raw, dtype="<f4").reshape(shape).astype("float32")
