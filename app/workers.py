"""Isolated compile-and-measure workers: a bounded queue in front of a pool of processes.

The web server never compiles or runs generated code itself.  It describes the work as a
:class:`Job` and hands it to a :class:`MeasurePool`; a worker process (see
:mod:`app.worker_main`) parses/replays, builds with the LLVM backend, checks against numpy,
times, and answers with plain data (a :class:`JobResult`).  What can go wrong in a worker
stays in the worker:

* **time limit** per job (default 5 s, not counting the wait for a timing slot): on expiry the
  worker is killed and replaced, and the result says
  "this step took longer than 5 s — measurement skipped, the trace is kept";
* **memory limit** per worker (``RLIMIT_AS``, default 2 GiB): an allocation over it fails
  inside the worker, which reports "out-of-memory" and is replaced;
* **crashes** (a segfault or abort in generated code): the pipe closes, the pool reports
  "the compiled program crashed (signal SIGSEGV) — the step is kept but not measured" and
  starts a fresh worker; the pool keeps serving;
* **timing** is serialised per core: a worker asks the pool for a slot (a core) before each
  CPU-heavy phase — the compile, the checked and timed runs of a step, a cache simulation —
  and is pinned to that core while it holds it, so a timing never shares a core with
  anything else the pool runs; the runs of a program with parallel loops take every slot;
* the **queue is bounded**: when it is full, :meth:`MeasurePool.submit` raises
  :class:`QueueFull` ("the server is busy, N steps are waiting; try again in a moment");
  a queued job's :meth:`Ticket.position` is what the page shows as "queued (position k)".

Typical use from the web app::

    pool = MeasurePool(PoolConfig.from_limits(limits))       # once, in create_app
    ticket = pool.submit(Job.for_trace("mm_relu", {"n": 128}, trace_json,
                                       actions=("compile", "check", "time", "source")))
    ticket.position()        # 3 (queued), 0 (running), None (done)
    result = ticket.result(timeout=30)    # JobResult(status="ok", data={"times": ..., ...})
    pool.close()

Workers start from a ``forkserver`` (or ``spawn``) context — never ``fork`` from the threaded
server — and the forkserver preloads numpy, llvmlite and the engine once.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import json
import logging
import multiprocessing
import os
import pickle
import secrets
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

__all__ = ["Job", "JobResult", "Ticket", "MeasurePool", "PoolConfig", "QueueFull",
           "PoolClosed", "PoolUnavailable", "StepMeasurer", "install", "step_job", "step_dict", "TimingSlots", "STEP_ACTIONS"]

#: The actions of a normal explorer step.
STEP_ACTIONS = ("compile", "check", "time", "source")
_ENGINE_ACTIONS = {"step", "compile", "run", "check", "time", "source", "cache", "pattern",
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
    :mod:`app.worker_main`).  ``time_limit_s`` overrides the pool's limit for this job.
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


_ids = itertools.count(1)


class Ticket:
    """A submitted job: ask its queue position, wait for its result, or cancel it."""

    def __init__(self, pool: "MeasurePool", job: Job):
        self.id = secrets.token_urlsafe(12)
        self.seq = next(_ids)
        self.job = job
        self.submitted = time.monotonic()
        self.started: float | None = None
        self._pool = pool
        self._done = threading.Event()
        self._result: JobResult | None = None
        self._callbacks: list[Callable[[JobResult], None]] = []
        self._lock = threading.Lock()

    def position(self) -> int | None:
        """1-based place in the queue while waiting, 0 while running, None when finished."""
        if self._done.is_set():
            return None
        return self._pool._position(self)

    @property
    def state(self) -> str:
        """``queued``, ``running`` or ``done``."""
        pos = self.position()
        return "done" if pos is None else ("running" if pos == 0 else "queued")

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> JobResult:
        """Wait for the result; raises :class:`TimeoutError` if it is not there in time."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the step is still {self.state}")
        assert self._result is not None
        return self._result

    def cancel(self) -> bool:
        """Withdraw a queued job (True), or False if it already started or finished."""
        return self._pool._cancel(self)

    def add_done_callback(self, fn: Callable[[JobResult], None]) -> None:
        """Call ``fn(result)`` when the job ends (at once if it already has; in a pool thread)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self._result)  # type: ignore[arg-type]

    def _finish(self, result: JobResult) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._result = result
            # The program's bytes are not needed any more (finished tickets are kept a while).
            self.job = dataclasses.replace(self.job, module=None, baseline=None, program=None,
                                           trace=None, token=None)
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(result)
            except Exception:  # noqa: BLE001
                log.exception("a measurement callback failed")

    def __repr__(self) -> str:
        return f"<Ticket {self.seq} {self.state}>"


# --------------------------------------------------------------------------- timing slots
class TimingSlots:
    """One slot per core; a timing holds one slot (or all, for parallel code), FIFO-fair."""

    def __init__(self, cores: Iterable[int]):
        self.cores = sorted(set(cores)) or [0]
        self._free = list(self.cores)
        self._cond = threading.Condition()
        self._waiting: collections.deque = collections.deque()
        self._closed = False

    def acquire(self, n: int = 1, cancel: threading.Event | None = None) -> list[int] | None:
        """Block until ``n`` slots are free and this request is first in line; None if closed."""
        n = max(1, min(int(n), len(self.cores)))
        me = object()
        with self._cond:
            self._waiting.append(me)
            try:
                while True:
                    if self._closed or (cancel is not None and cancel.is_set()):
                        return None
                    if self._waiting[0] is me and len(self._free) >= n:
                        got, self._free = self._free[:n], self._free[n:]
                        return got
                    self._cond.wait(0.5)
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()

    def release(self, cores: list[int]) -> None:
        with self._cond:
            self._free.extend(c for c in cores if c not in self._free)
            self._free.sort()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def free(self) -> int:
        with self._cond:
            return len(self._free)


def _default_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


@dataclass
class PoolConfig:
    """Pool settings.  ``from_limits`` takes them from :class:`app.limits.Limits`."""

    workers: int = 0                       # 0: one per core available to this process
    queue_length: int = 32                 # jobs waiting (not counting running ones)
    time_limit_s: float = 5.0
    memory_bytes: int | None = 2 * 2**30   # RLIMIT_AS per worker; None: unlimited
    timing_cores: list[int] | None = None  # None: every core available to this process
    start_method: str = "forkserver"       # or "spawn" (never "fork": the server is threaded)
    startup_timeout_s: float = 120.0
    allow_debug: bool = False              # accept debug:* jobs (tests only)
    source_max_chars: int = 400_000
    keep_tickets: int = 64                 # finished tickets kept for look-up by id
    max_jobs_per_worker: int = 500         # then the worker is recycled (bounds JIT memory)

    @classmethod
    def from_limits(cls, limits: Any, **kw: Any) -> "PoolConfig":
        base: dict[str, Any] = dict(queue_length=limits.queue_length,
                                    time_limit_s=limits.step_time_limit_s,
                                    memory_bytes=limits.worker_memory_bytes)
        base.update(kw)
        return cls(**base)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _fmt_s(x: float) -> str:
    return f"{x:g}"


# --------------------------------------------------------------------------- the pool
class _Worker:
    """One worker process and the pool thread that drives it."""

    def __init__(self, pool: "MeasurePool", index: int):
        self.pool = pool
        self.index = index
        self.proc = None
        self.conn = None
        self.ready = False
        self.pid: int | None = None
        self.current: Ticket | None = None
        self.restarts = 0
        self.jobs_done = 0
        self.thread = threading.Thread(target=self._serve, name=f"measure-worker-{index}",
                                       daemon=True)

    # process management -------------------------------------------------------------
    def start_process(self) -> None:
        from . import worker_main
        self.jobs_done = 0
        ctx = self.pool._ctx
        parent, child = ctx.Pipe(duplex=True)
        cfg = {"memory_bytes": self.pool.config.memory_bytes}
        proc = ctx.Process(target=worker_main.worker_loop, args=(child, cfg),
                           name=f"measure-worker-{self.index}", daemon=True)
        proc.start()
        child.close()
        self.proc, self.conn, self.ready, self.pid = proc, parent, False, proc.pid

    def wait_ready(self) -> bool:
        deadline = time.monotonic() + self.pool.config.startup_timeout_s
        while not self.ready:
            left = deadline - time.monotonic()
            if left <= 0 or self.pool._closing.is_set():
                return False
            try:
                if self.conn.poll(min(left, 0.5)):
                    msg = self.conn.recv()
                    if msg[0] == "ready":
                        self.ready, self.pid = True, msg[1]
            except (EOFError, OSError):
                return False
        return True

    def kill(self) -> None:
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        self.ready = False
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        if proc is not None:
            with contextlib.suppress(Exception):
                if proc.is_alive():
                    proc.kill()
                proc.join(5)
            with contextlib.suppress(Exception):
                proc.close()

    def replace(self) -> None:
        self.kill()
        self.restarts += 1
        self.pool._count("replaced")
        if not self.pool._closing.is_set():
            self.start_process()

    def stop(self, timeout: float) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.send(("stop",))
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.join(timeout)
        self.kill()

    # the serving loop -----------------------------------------------------------------
    def _serve(self) -> None:
        pool = self.pool
        while True:
            ticket = pool._next_job(self)
            if ticket is None:
                return
            try:
                result = self._run(ticket)
            except Exception as e:  # noqa: BLE001 - the pool must keep serving
                log.exception("measurement worker %s failed unexpectedly", self.index)
                result = JobResult("error", f"the measurement worker failed ({e})")
                with contextlib.suppress(Exception):
                    self.replace()
            result.queued_s = (ticket.started or time.monotonic()) - ticket.submitted
            self.jobs_done += 1
            recycle = (pool.config.max_jobs_per_worker
                       and self.jobs_done >= pool.config.max_jobs_per_worker
                       and self.proc is not None and result.worker_pid == self.pid)
            pool._job_done(self, ticket, result)
            if recycle:
                # Generated code and compile caches accumulate in a long-lived worker.
                pool._count("recycled")
                with contextlib.suppress(Exception):
                    self.stop(2.0)
                    if not pool._closing.is_set():
                        self.start_process()

    def _ensure_process(self) -> bool:
        for attempt in range(3):
            if self.proc is None or not self.proc.is_alive():
                self.kill()
                if self.pool._closing.is_set():
                    return False
                self.start_process()
            if self.wait_ready():
                return True
            log.warning("measurement worker %s did not start (attempt %d)", self.index,
                        attempt + 1)
            self.kill()
            time.sleep(0.2 * (attempt + 1))
        return False

    def _run(self, ticket: Ticket) -> JobResult:
        pool = self.pool
        job = ticket.job
        if not self._ensure_process():
            if pool._closing.is_set():
                return JobResult("shutdown", str(PoolClosed()))
            return JobResult("error", "no measurement worker could be started — "
                                      "the step is kept but not measured")
        limit = job.time_limit_s if job.time_limit_s is not None else pool.config.time_limit_s
        wire = job.to_wire()
        wire["source_max_chars"] = pool.config.source_max_chars
        data: dict[str, Any] = {}
        held: list[int] | None = None
        remaining = float(limit)
        t_start = time.monotonic()
        busy = 0.0
        action: str | None = None
        for attempt in range(2):
            conn, proc, pid = self.conn, self.proc, self.pid   # close() may kill from elsewhere
            try:
                conn.send(("job", wire))
                break
            except (OSError, ValueError, AttributeError):
                # The worker died while idle (killed from outside?): start another, retry once.
                self.replace()
                if attempt == 1 or not self._ensure_process():
                    return JobResult("error", "no measurement worker could be started — "
                                              "the step is kept but not measured")
        try:
            while True:
                t0 = time.monotonic()
                try:
                    has = conn.poll(max(remaining, 0.0))
                except (EOFError, OSError):
                    has = True       # recv below reports the broken pipe
                if not has:
                    busy += time.monotonic() - t0
                    self.replace()
                    pool._count("timeouts")
                    return JobResult(
                        "timeout",
                        f"this step took longer than {_fmt_s(limit)} s — measurement "
                        f"skipped, the trace is kept",
                        data, busy, worker_pid=pid, failed_action=action)
                try:
                    msg = conn.recv()
                except (EOFError, OSError, TypeError):
                    res = self._crashed(proc, data, time.monotonic() - t_start, pid)
                    res.failed_action = action
                    return res
                dt = time.monotonic() - t0
                remaining -= dt
                busy += dt
                kind = msg[0]
                if kind == "data":
                    data.update(msg[1])
                elif kind == "action":
                    action = msg[1]
                elif kind == "need_timing":
                    held = pool._slots.acquire(msg[1], pool._closing)
                    if held is None:
                        self.replace()
                        return JobResult("shutdown", str(PoolClosed()), data, busy,
                                         worker_pid=pid)
                    try:
                        conn.send(("go", held))
                    except (OSError, ValueError):
                        return self._crashed(proc, data, time.monotonic() - t_start, pid)
                elif kind == "timing_done":
                    if held is not None:
                        pool._slots.release(held)
                        held = None
                elif kind == "result":
                    r = msg[1]
                    if r.get("detail"):
                        log.warning("measurement job failed in worker %s:\n%s", pid,
                                    r["detail"])
                    if r.get("retire"):
                        self.replace()
                    if r["status"] == "out-of-memory":
                        pool._count("oom")
                    return JobResult(r["status"], r.get("message"), data, busy,
                                     worker_pid=pid, failed_action=r.get("failed_action"),
                                     detail=r.get("detail"))
        finally:
            if held is not None:
                pool._slots.release(held)

    def _crashed(self, proc: Any, data: dict[str, Any], elapsed: float,
                 pid: int | None) -> JobResult:
        code = None
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.join(5)
                code = proc.exitcode
        closing = self.pool._closing.is_set()
        self.replace()
        if closing:
            return JobResult("shutdown", str(PoolClosed()), data, elapsed, worker_pid=pid)
        self.pool._count("crashes")
        if code is not None and code < 0:
            sig = _signal_name(-code)
            if sig == "SIGKILL":
                msg = ("the measurement worker was killed (SIGKILL, perhaps for using too much "
                       "memory) — the step is kept but not measured")
            else:
                msg = f"the compiled program crashed (signal {sig}) — the step is kept but not measured"
        else:
            msg = (f"the measurement worker exited unexpectedly (exit code {code}) — "
                   f"the step is kept but not measured")
        return JobResult("crashed", msg, data, elapsed, worker_pid=pid)


class MeasurePool:
    """A fixed set of worker processes behind a bounded FIFO queue.

    Thread-safe: call :meth:`submit` from any server thread.  Use as a context manager or
    call :meth:`close` at shutdown.
    """

    def __init__(self, config: PoolConfig | None = None, **overrides: Any):
        cfg = dataclasses.replace(config or PoolConfig(), **overrides)
        if cfg.start_method == "fork":
            raise ValueError("the measurement pool must not fork the threaded server; "
                             "use start_method='forkserver' or 'spawn'")
        self.config = cfg
        method = cfg.start_method
        if method not in multiprocessing.get_all_start_methods():
            method = "spawn"
        self._ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            self._ctx.set_forkserver_preload(["app.worker_main"])
        cores = cfg.timing_cores or _default_cores()
        self._slots = TimingSlots(cores)
        nworkers = cfg.workers or len(_default_cores())
        self._cond = threading.Condition()
        self._pending: collections.deque[Ticket] = collections.deque()
        self._running: set[Ticket] = set()
        self._tickets: collections.OrderedDict[str, Ticket] = collections.OrderedDict()
        self._closing = threading.Event()
        self._stats = collections.Counter()
        self._workers = [_Worker(self, i) for i in range(nworkers)]
        for w in self._workers:
            w.start_process()
        for w in self._workers:
            w.thread.start()
        self._finalizer = weakref.finalize(self, MeasurePool._final_close, self._workers,
                                           self._closing, self._slots)

    # public API --------------------------------------------------------------------------
    def submit(self, job: Job, on_done: Callable[[JobResult], None] | None = None, *,
               urgent: bool = False) -> Ticket:
        """Queue a job; raises :class:`QueueFull` or :class:`PoolClosed` instead of queuing.

        ``urgent`` jobs (short, interactive ones: the code pane's compile, an access pattern)
        go ahead of the measurements waiting in the queue, behind earlier urgent jobs."""
        if not isinstance(job, Job):
            raise TypeError("submit() takes an app.workers.Job")
        bad = [a for a in job.actions
               if a not in _ENGINE_ACTIONS and not (self.config.allow_debug
                                                    and a.startswith("debug:"))]
        if bad or not job.actions:
            raise ValueError(f"unknown or disallowed action(s) {bad or '(none)'}; "
                             f"known actions: {sorted(_ENGINE_ACTIONS)}")
        ticket = Ticket(self, job)
        if on_done is not None:
            ticket.add_done_callback(on_done)
        with self._cond:
            if self._closing.is_set():
                raise PoolClosed()
            if len(self._pending) >= self.config.queue_length:
                self._stats["refused"] += 1
                raise QueueFull(len(self._pending))
            if urgent:
                ticket.urgent = True  # type: ignore[attr-defined]
                at = 0
                while at < len(self._pending) and getattr(self._pending[at], "urgent", False):
                    at += 1
                self._pending.insert(at, ticket)
            else:
                self._pending.append(ticket)
            self._remember(ticket)
            self._stats["submitted"] += 1
            self._cond.notify()
        return ticket

    def run(self, job: Job, timeout: float | None = None) -> JobResult:
        """Submit and wait (for scripts and tests)."""
        return self.submit(job).result(timeout)

    def ticket(self, ticket_id: str) -> Ticket | None:
        """A recent ticket by its id (for polling endpoints), or None."""
        with self._cond:
            return self._tickets.get(ticket_id)

    def queue_length(self) -> int:
        with self._cond:
            return len(self._pending)

    def stats(self) -> dict[str, Any]:
        """Counters (submitted, completed, crashes, timeouts, oom, replaced, refused, ...)."""
        with self._cond:
            s = dict(self._stats)
            s.update(queued=len(self._pending), running=len(self._running),
                     workers=len(self._workers),
                     worker_pids=[w.pid for w in self._workers], free_timing_slots=self._slots.free)
            return s

    def worker_pids(self) -> list[int | None]:
        return [w.pid for w in self._workers]

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, cancel queued ones, let running ones finish (up to ``timeout``
        seconds), then stop every worker.  Idempotent."""
        with self._cond:
            if self._closing.is_set() and not any(w.thread.is_alive() for w in self._workers):
                return
            self._closing.set()
            pending = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        for t in pending:
            t._finish(JobResult("shutdown", str(PoolClosed())))
        deadline = time.monotonic() + timeout
        for w in self._workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        self._slots.close()
        for w in self._workers:
            if w.thread.is_alive():          # still running a job past the deadline
                w.kill()
                w.thread.join(5)
            w.stop(max(0.5, deadline - time.monotonic()))
        self._finalizer.detach()

    def __enter__(self) -> "MeasurePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # internals ---------------------------------------------------------------------------
    @staticmethod
    def _final_close(workers, closing, slots) -> None:  # at interpreter exit / GC
        closing.set()
        slots.close()
        for w in workers:
            with contextlib.suppress(Exception):
                w.kill()

    def _count(self, key: str) -> None:
        with self._cond:
            self._stats[key] += 1

    def _remember(self, ticket: Ticket) -> None:
        self._tickets[ticket.id] = ticket
        while len(self._tickets) > self.config.keep_tickets + self.config.queue_length:
            oldest_id, oldest = next(iter(self._tickets.items()))
            if not oldest.done():
                break
            del self._tickets[oldest_id]

    def _position(self, ticket: Ticket) -> int | None:
        with self._cond:
            if ticket in self._running:
                return 0
            for i, t in enumerate(self._pending):
                if t is ticket:
                    return i + 1
        return None if ticket.done() else 0

    def _cancel(self, ticket: Ticket) -> bool:
        with self._cond:
            try:
                self._pending.remove(ticket)
            except ValueError:
                return False
        ticket._finish(JobResult("cancelled", "this step was withdrawn before it was measured"))
        return True

    def _next_job(self, worker: _Worker) -> Ticket | None:
        with self._cond:
            while not self._pending:
                if self._closing.is_set():
                    return None
                self._cond.wait(1.0)
            ticket = self._pending.popleft()
            ticket.started = time.monotonic()
            self._running.add(ticket)
            worker.current = ticket
            return ticket

    def _job_done(self, worker: _Worker, ticket: Ticket, result: JobResult) -> None:
        with self._cond:
            self._running.discard(ticket)
            worker.current = None
            self._stats["completed"] += 1
            self._stats[f"status:{result.status}"] += 1
        ticket._finish(result)


# --------------------------------------------------------------------------- the web app's seam
def step_job(mod: Any, workload: str | None, params: dict[str, Any], *,
             func_name: str | None = None, baseline: Any = None,
             time_limit_s: float | None = None) -> Job:
    """The job for one explorer step: ``app.measure.measure_step`` run in a worker."""
    return Job(actions=("step",), module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL),
               baseline=(pickle.dumps(baseline, pickle.HIGHEST_PROTOCOL)
                         if baseline is not None else None),
               workload=workload, params=dict(params), func_name=func_name,
               time_limit_s=time_limit_s)


_STAGE_OF_ACTION = {"compile": "compile", "check": "check", "time": "time", "step": "time"}


def step_dict(result: JobResult, program_hash: str) -> dict[str, Any]:
    """A :class:`JobResult` of :func:`step_job` as ``measure_step``'s dict.

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
    out = {"hash": program_hash, "ok": False, "stage": "compile", "error": None,
           "compile_ms": None, "time_ms": None, "gflops": None, "numpy_ms": None,
           "correct": None, "max_abs_err": None, "detail": ""}
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


# --------------------------------------------------------------------------- pool + store
class StepMeasurer:
    """The web app's measurement service: stored results first, then one job per program.

    * a step measured before — by anyone, before a restart — comes from the store at once;
    * concurrent requests for the same step share one job (a class clicking the course's
      steps in the same order measures each program once);
    * finished results are stored, except transient failures (timeout, crash, out-of-memory,
      shutdown, cancelled), which are retried the next time the step is asked for.

    Four services, each a drop-in for a function of ``app.measure``:

    ========================================  ==============================================
    ``measure(mod, workload, params, ...)``   ``measure_step``: compile + check + time dict
    ``cache(mod, func_name)``                 ``cache_step``: ``CacheReport.to_dict()`` or
                                              ``{"error": sentence}``
    ``source(mod, kind)``                     the code pane: ``(text, None)`` or
                                              ``(None, sentence)``
    ``roofline()``                            ``machine_peaks``: the machine's measured
                                              roofs (one stored value per machine)
    ========================================  ==============================================

    Non-blocking use (the page shows "queued (position k)" and polls)::

        d, ticket = measurer.submit(mod, "mm_relu", {"n": 128})
        if d is None: position = ticket.position()       # later: measurer.result_of(ticket)

    ``submit`` raises :class:`QueueFull` when the queue is full (``measure`` turns that into
    an ``ok: False`` dict carrying the sentence).
    """

    _TRANSIENT = {"timeout", "crashed", "out-of-memory", "shutdown", "cancelled", "busy",
                  "pending", "unavailable"}
    _REMEMBER = {"timeout", "crashed", "out-of-memory"}
    #: How long a crash or out-of-memory result is answered from memory before the step is
    #: tried again; a timeout (which a busy machine can cause) is retried sooner.
    failure_ttl_s = 600.0
    timeout_ttl_s = 120.0

    def __init__(self, pool: "MeasurePool | Callable[[], MeasurePool]", store: Any = None,
                 fingerprint: str | None = None, kind: str = "step",
                 wait_s: float | None = 120.0):
        self._pool = pool
        self.store = store
        self._fp = fingerprint
        self.kind = kind
        self.wait_s = wait_s
        self._lock = threading.RLock()
        self._inflight: dict[tuple, Ticket] = {}
        self._failed: "collections.OrderedDict[tuple, tuple[float, Any]]" = \
            collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def pool(self) -> "MeasurePool":
        """The pool, started on first use; :class:`PoolUnavailable` if it cannot start
        (tried again on the next call).

        A pool started here begins with measuring the machine's peaks for the roofline view
        (:meth:`submit_roofline`) unless the store already has them: the first job, so the
        roofline is ready by the time a learner looks at it, and it never competes with a
        page's own request for the peaks."""
        started = False
        if not isinstance(self._pool, MeasurePool):
            with self._lock:
                if not isinstance(self._pool, MeasurePool):
                    try:
                        self._pool = self._pool()
                    except Exception as e:  # noqa: BLE001
                        log.exception("the measurement workers could not be started")
                        raise PoolUnavailable(
                            f"the measurement workers could not be started ({e}) — the "
                            f"step is kept but not measured") from e
                    started = True
        if started:
            try:
                self.submit_roofline()
            except Exception:  # noqa: BLE001 - the roofline pane asks again and reports it
                log.exception("could not queue the measurement of the machine's peaks")
        return self._pool  # type: ignore[return-value]

    @property
    def fingerprint(self) -> str:
        if self._fp is None:
            from .store import machine_fingerprint
            self._fp = machine_fingerprint()
        return self._fp

    @staticmethod
    def program_hash(mod: Any) -> str:
        from engine.ir import structural_hash
        return structural_hash(mod)

    def _kind(self, workload: str | None, params: dict[str, Any], func_name: str | None) -> str:
        return (f"{self.kind}:{workload or '-'}:{func_name or '-'}:"
                f"{json.dumps(params, sort_keys=True, default=str)}")

    # generic: stored value, or one shared job ------------------------------------------------
    def _lookup_or_submit(self, h: str, kind: str, make_job: Callable[[], Job],
                          to_value: Callable[[JobResult], Any], urgent: bool = False
                          ) -> tuple[Any, Ticket | None]:
        if self.store is not None:
            got = self.store.get_result(h, self.fingerprint, kind)
            if got is not None:
                with self._lock:
                    self.hits += 1
                return got, None
        key = (h, kind)
        with self._lock:
            failed = self._failed.get(key)
            if failed is not None:
                until, value = failed
                if time.monotonic() < until:
                    self.hits += 1
                    return value, None
                del self._failed[key]
        pool = self.pool                      # (starts the pool on first use)
        with self._lock:
            t = self._inflight.get(key)
            if t is not None and (not t.done() or t.result(0).status not in self._TRANSIENT):
                self.hits += 1                 # running, or finished and being stored
                return None, t
            self.misses += 1
            ticket = pool.submit(make_job(), urgent=urgent)
            ticket.program_hash = h  # type: ignore[attr-defined]
            self._inflight[key] = ticket
        ticket.add_done_callback(
            lambda r, key=key: self._done(key, to_value, r))
        return None, ticket

    def _done(self, key: tuple, to_value: Callable[[JobResult], Any], result: JobResult) -> None:
        try:
            if result.status in self._REMEMBER:
                # A crash, a timeout or running out of memory would happen again: remember
                # the sentence for a while (in memory only — a restart tries again) instead
                # of re-running the program every time its page asks.
                ttl = (self.timeout_ttl_s if result.status == "timeout"
                       else self.failure_ttl_s)
                with self._lock:
                    self._failed[key] = (time.monotonic() + ttl, to_value(result))
                    while len(self._failed) > 1000:
                        self._failed.popitem(last=False)
                return
            if self.store is None or result.status in self._TRANSIENT:
                return
            value = to_value(result)
            if isinstance(value, dict) and value.get("stage") == "unavailable":
                return
            h, kind = key
            self.store.put_result(h, self.fingerprint, kind, value)
        finally:
            # Only now: until the store has it, requests for this key use the ticket.
            with self._lock:
                self._inflight.pop(key, None)

    def _wait(self, ticket: Ticket, timeout: float | None) -> JobResult:
        try:
            return ticket.result(self.wait_s if timeout is None else timeout)
        except TimeoutError:
            pos = ticket.position()
            where = f"queued (position {pos})" if pos else "still running"
            return JobResult("pending", f"the measurement is {where}; reload to see it")

    # measure_step -----------------------------------------------------------------------------
    def submit(self, mod: Any, workload: str | None, params: dict[str, Any], *,
               func_name: str | None = None, baseline: Any = None,
               time_limit_s: float | None = None
               ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored result, None) or (None, ticket of the job measuring it)."""
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, self._kind(workload, params, func_name),
            lambda: step_job(mod, workload, params, func_name=func_name, baseline=baseline,
                             time_limit_s=time_limit_s),
            lambda r: step_dict(r, h))

    def cached(self, mod: Any, workload: str | None, params: dict[str, Any],
               func_name: str | None = None, program_hash: str | None = None
               ) -> dict[str, Any] | None:
        """The stored (or remembered failed) step dict, or None; never submits."""
        h = program_hash or self.program_hash(mod)
        kind = self._kind(workload, params, func_name)
        with self._lock:
            failed = self._failed.get((h, kind))
        if failed is not None and time.monotonic() < failed[0]:
            return failed[1]
        if self.store is None:
            return None
        return self.store.get_result(h, self.fingerprint, kind)

    def result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        """The step dict of a finished (or, with ``timeout``, awaited) ticket."""
        return step_dict(ticket.result(timeout), getattr(ticket, "program_hash", ""))

    def measure(self, mod: Any, workload: str | None, params: dict[str, Any], *,
                func_name: str | None = None, baseline: Any = None,
                timeout: float | None = None) -> dict[str, Any]:
        """Blocking: the step dict, from the store or from a worker.  Never raises for a
        bad program or a busy server: those come back as ``ok: False`` with the sentence."""
        try:
            got, ticket = self.submit(mod, workload, params, func_name=func_name,
                                      baseline=baseline)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            status = {QueueFull: "busy", PoolClosed: "shutdown"}.get(type(e), "unavailable")
            return step_dict(JobResult(status, str(e)), self.program_hash(mod))
        if got is not None:
            return got
        assert ticket is not None
        return step_dict(self._wait(ticket, timeout), ticket.program_hash)  # type: ignore[attr-defined]

    def prefetch(self, mod: Any, workload: str | None, params: dict[str, Any], *,
                 func_name: str | None = None, baseline: Any = None,
                 cache: bool = True) -> None:
        """Start measuring (and cache-simulating) a step without waiting; never raises.

        Called right after a step is applied: the pane's own request then finds the job
        running (it shares the ticket) or the result stored."""
        try:
            self.submit(mod, workload, params, func_name=func_name, baseline=baseline)
            if cache:
                self._submit_cache(mod, func_name)
        except (QueueFull, PoolClosed, PoolUnavailable):
            pass
        except Exception:  # noqa: BLE001 - the pane's request will report any failure
            log.exception("prefetching a measurement failed")

    # cache_step -------------------------------------------------------------------------------
    @staticmethod
    def _cache_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("cache"), dict):
            return r.data["cache"]
        return {"error": f"cache simulation failed: {r.message or r.status}"}

    def _submit_cache(self, mod: Any, func_name: str | None):
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, f"cache:{func_name or '-'}",
            lambda: Job(actions=("cache",), module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL),
                        func_name=func_name), self._cache_value)

    def submit_cache(self, mod: Any, func_name: str | None = None
                     ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored cache report, None) or (None, ticket); :meth:`cache_result_of` reads a
        finished ticket.  Raises :class:`QueueFull` when the queue is full."""
        return self._submit_cache(mod, func_name)

    def cache_result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        return self._cache_value(ticket.result(timeout))

    def cached_cache(self, mod: Any, func_name: str | None = None) -> dict[str, Any] | None:
        """The stored (or remembered failed) cache report, or None; never submits."""
        h = self.program_hash(mod)
        key = (h, f"cache:{func_name or '-'}")
        with self._lock:
            failed = self._failed.get(key)
        if failed is not None and time.monotonic() < failed[0]:
            return failed[1]
        if self.store is None:
            return None
        return self.store.get_result(h, self.fingerprint, key[1])

    def pattern(self, mod: Any, func_name: str, loop_index: int, iteration: int,
                timeout: float | None = None) -> dict[str, Any]:
        """``engine.cache.access_pattern(...).to_dict()`` computed by a worker (it builds
        and runs instrumented code).  Raises ``ValueError`` with a sentence when the worker
        could not compute it (the engine's refusal, a crash, a timeout, a busy queue)."""
        job = Job(actions=("pattern",), module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL),
                  func_name=func_name, loop_index=int(loop_index), iteration=int(iteration))
        try:
            r = self._wait(self.pool.submit(job, urgent=True), timeout)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            raise ValueError(str(e)) from None
        if r.ok and isinstance(r.data.get("pattern"), dict):
            return r.data["pattern"]
        raise ValueError(r.message or f"the access pattern could not be computed ({r.status})")

    def cache(self, mod: Any, func_name: str | None = None,
              timeout: float | None = None) -> dict[str, Any]:
        """``engine.cache.simulate(mod, func_name).to_dict()`` from a worker (or the store);
        ``{"error": sentence}`` when it cannot be simulated."""
        try:
            got, ticket = self._submit_cache(mod, func_name)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return {"error": str(e)}
        if got is not None:
            return got
        return self._cache_value(self._wait(ticket, timeout))  # type: ignore[arg-type]

    # roofline ---------------------------------------------------------------------------------
    #: The store key of the machine's peaks: one value per machine fingerprint (the
    #: fingerprint already names the CPU, the core count and the compiler's code).
    ROOFLINE_KEY = ("machine", "roofline")
    #: The peak kernels take about a second on an idle machine; a loaded one may need more
    #: than a step's time limit.
    roofline_time_limit_s = 60.0

    @staticmethod
    def _roofline_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("roofline"), dict):
            return r.data["roofline"]
        return {"error": f"the machine's peaks could not be measured: "
                         f"{r.message or r.status}"}

    def submit_roofline(self) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored peaks, None) or (None, ticket of the job measuring them).

        The value is ``engine.roofline.machine_peaks()`` as measured in a worker (see
        :func:`app.worker_main.act_roofline`), or ``{"error": sentence}``; it is stored under
        :data:`ROOFLINE_KEY` for this machine's fingerprint, so the peaks are measured once
        per machine and compiler, not once per server start. Concurrent requests share one
        job. Raises :class:`QueueFull` when the queue is full."""
        h, kind = self.ROOFLINE_KEY
        return self._lookup_or_submit(
            h, kind, lambda: Job(actions=("roofline",), time_limit_s=self.roofline_time_limit_s),
            self._roofline_value)

    def roofline_result_of(self, ticket: Ticket, timeout: float | None = None
                           ) -> dict[str, Any]:
        """The peaks (or ``{"error": sentence}``) of a finished roofline ticket."""
        return self._roofline_value(ticket.result(timeout))

    def cached_roofline(self) -> dict[str, Any] | None:
        """The stored (or remembered failed) peaks, or None; never submits."""
        key = self.ROOFLINE_KEY
        with self._lock:
            failed = self._failed.get(key)
        if failed is not None and time.monotonic() < failed[0]:
            return failed[1]
        if self.store is None:
            return None
        return self.store.get_result(key[0], self.fingerprint, key[1])

    def roofline(self, timeout: float | None = None) -> dict[str, Any]:
        """Blocking: the machine's peaks from the store or from a worker, or
        ``{"error": sentence}`` (a busy queue, a timeout, a failed kernel)."""
        try:
            got, ticket = self.submit_roofline()
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return {"error": str(e)}
        if got is not None:
            return got
        return self._roofline_value(self._wait(ticket, timeout))  # type: ignore[arg-type]

    # code pane --------------------------------------------------------------------------------
    @staticmethod
    def _source_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("source"), dict):
            return {"source": r.data["source"]}
        return {"error": f"compile failed: {r.message or r.status}"}

    @staticmethod
    def source_text(d: dict[str, Any], kind: str) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, sentence)`` from a stored/finished source value."""
        if "source" in d:
            text = d["source"].get(kind)
            return (text, None) if text is not None else (None, f"no {kind} text")
        return None, d.get("error") or "no code"

    def submit_source(self, mod: Any) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored source value, None) or (None, ticket) — an urgent job (it only
        compiles); read with :meth:`source_text` (``source_result_of`` for a ticket)."""
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, "source", lambda: Job(actions=("compile", "source"),
                                     module=pickle.dumps(mod, pickle.HIGHEST_PROTOCOL)),
            self._source_value, urgent=True)

    def source_result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        return self._source_value(ticket.result(timeout))

    def source(self, mod: Any, kind: str = "ll-opt",
               timeout: float | None = None) -> tuple[str | None, str | None]:
        """(LLVM IR or assembly text, None) or (None, the sentence saying why not)."""
        try:
            got, ticket = self.submit_source(mod)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return None, str(e)
        d = got if got is not None else self._source_value(self._wait(ticket, timeout))  # type: ignore[arg-type]
        return self.source_text(d, kind)


def install(app: Any) -> StepMeasurer | None:
    """Wire the reliability parts into a Flask app; returns the :class:`StepMeasurer`.

    * ``app.extensions["limits"]``   — :class:`app.limits.Limits` from ``EXPLORER_LIMITS``;
    * ``app.extensions["store"]``    — :class:`app.store.Store` in the instance folder
      (``EXPLORER_INSTANCE`` names another folder; ``EXPLORER_STORE=False`` disables it);
    * ``app.extensions["measurer"]`` — a :class:`StepMeasurer` whose pool starts on first
      use (so an app that never measures starts no process); ``EXPLORER_POOL`` (a dict of
      :class:`PoolConfig` fields) overrides the pool settings.  With
      ``MEASURE_IN_PROCESS`` (Flask test-client unit tests only) it is None: ``app.measure``
      then compiles and times in the calling process, and None is returned.
    The pool is closed at interpreter exit.
    """
    import atexit

    from .limits import Limits
    from .store import Store
    limits = Limits.from_config(app.config)
    store = None
    if app.config.get("EXPLORER_STORE", True):
        folder = app.config.get("EXPLORER_INSTANCE") or app.instance_path
        store = Store(os.path.join(folder, "explorer.sqlite3"))
    app.extensions["limits"] = limits
    app.extensions["store"] = store
    if app.config.get("MEASURE_IN_PROCESS"):
        app.extensions["measurer"] = None
        return None
    overrides = dict(app.config.get("EXPLORER_POOL") or {})
    created: list[MeasurePool] = []

    def make_pool() -> MeasurePool:
        pool = MeasurePool(PoolConfig.from_limits(limits, **overrides))
        created.append(pool)
        atexit.register(pool.close, 5.0)
        return pool

    measurer = StepMeasurer(make_pool, store)
    app.extensions["limits"] = limits
    app.extensions["store"] = store
    app.extensions["measurer"] = measurer
    return measurer
