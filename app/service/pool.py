"""The measurement pool: a fixed set of worker processes behind a bounded FIFO queue.

The web server never compiles or runs generated code itself. It describes the work as a
:class:`~app.service.protocol.Job` and submits it here; a worker process (see
:mod:`app.service.worker`) runs it and answers with plain data. What can go wrong in a
worker stays in the worker (see :mod:`app.service.supervisor`: time limit, crashes,
memory), and:

* **timing** is serialised per core (:class:`~app.service.slots.TimingSlots`): every
  CPU-heavy phase holds a slot, so a timing never shares a core with anything else the pool
  runs; the runs of a program with parallel loops take every slot;
* the **queue is bounded and fair**: when it is full, :meth:`MeasurePool.submit` raises
  :class:`~app.service.protocol.QueueFull` ("the server is busy, N steps are waiting; try
  again in a moment"), and one client (``Job.client``) may hold at most
  ``client_queue_length`` waiting jobs (:class:`~app.service.protocol.ClientQueueFull`:
  "you have N steps waiting; ..."); clients take turns (:mod:`app.service.queue`); a
  queued job's ``Ticket.position()`` is what the page shows as "queued (position k)";
* the **workers are a sandbox** (:mod:`app.service.worker`): no network where the kernel
  allows a new network namespace (:meth:`MeasurePool.network_warning` says when it does
  not), CPU-time, memory and file-size limits, no inherited descriptors, replies checked
  as JSON; a worker whose job failed is replaced.

Typical use::

    pool = MeasurePool(PoolConfig.from_limits(limits))       # once, in create_app
    ticket = pool.submit(Job.for_trace("mm_relu", {"n": 128}, trace_json,
                                       actions=("compile", "check", "time", "source")))
    ticket.position()        # 3 (queued), 0 (running), None (done)
    result = ticket.result(timeout=30)    # JobResult(status="ok", data={"times": ..., ...})
    pool.close()

Workers start from a ``forkserver`` (or ``spawn``) context — never ``fork`` from the threaded
server — and the forkserver preloads numpy, llvmlite and the engine once. Under the
forkserver a worker is forked by the forkserver process's main thread (whichever server
thread asked: the one that made the pool, or a supervisor thread replacing a worker);
under ``spawn``, by the server thread that asked. Either way a worker dies with the server
(:mod:`app.service.worker`: a parent-death signal where the forking thread lives as long
as the forkserver, and a thread that ends the worker when its pipe to the server closes),
and :meth:`MeasurePool.close` kills the workers that are running a job.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import multiprocessing
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from .protocol import Job, JobResult, QueueFull
from .queue import JobQueue
from .slots import TimingSlots, default_cores
from .supervisor import Supervisor
from .tickets import Ticket

__all__ = ["MeasurePool", "PoolConfig"]

log = logging.getLogger(__name__)


@dataclass
class PoolConfig:
    """Pool settings.  ``from_limits`` takes them from :class:`app.limits.Limits`."""

    workers: int = 0                       # 0: one per core available to this process
    queue_length: int = 32                 # jobs waiting (not counting running ones)
    time_limit_s: float = 5.0
    memory_bytes: int | None = 2 * 2**30   # RLIMIT_AS per worker; None: unlimited
    # the workers' Unix niceness: below the server's priority, so that a click's answer comes
    # before the batch work it started; alone on the machine a worker runs as fast as at 0.
    # (Niceness ranks threads within one session's scheduling group: with Linux's autogroups
    # a browser started from the desktop is another group, and shares a busy core evenly
    # with this one whatever the niceness on either side.)
    nice: int = 5
    timing_cores: list[int] | None = None  # None: every core available to this process
    start_method: str = "forkserver"       # or "spawn" (never "fork": the server is threaded)
    startup_timeout_s: float = 120.0
    allow_debug: bool = False              # accept debug:* jobs (tests only)
    source_max_chars: int = 400_000
    keep_tickets: int = 64                 # finished tickets kept for look-up by id
    max_jobs_per_worker: int = 500         # then the worker is recycled (bounds JIT memory)
    client_queue_length: int | None = 8    # jobs one client may have waiting; None: no cap
    # RLIMIT_FSIZE per worker: the largest file it writes. A worker writes the tuning database
    # next to the store (a Tune tab search; 64 MiB holds ~20k trials, 1 MiB held a few
    # hundred) and, once per machine, the small native runtime library
    file_size_bytes: int = 64 * 2**20
    reply_max_bytes: int = 64 * 2**20      # the largest reply the server accepts from a worker

    @classmethod
    def from_limits(cls, limits: Any, **kw: Any) -> "PoolConfig":
        base: dict[str, Any] = dict(queue_length=limits.queue_length,
                                    time_limit_s=limits.step_time_limit_s,
                                    memory_bytes=limits.worker_memory_bytes)
        base.update(kw)
        return cls(**base)



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
        self.context = multiprocessing.get_context(method)
        if method == "forkserver":
            self.context.set_forkserver_preload(["app.service.worker"])
        cores = cfg.timing_cores or default_cores()
        self.slots = TimingSlots(cores)
        nworkers = cfg.workers or len(default_cores())
        self.queue = JobQueue(cfg.queue_length, per_client=cfg.client_queue_length)
        self._network: str | None = None       # the first worker's sandbox report
        self._reported = threading.Event()
        self._lock = threading.Lock()
        self._tickets: collections.OrderedDict[str, Ticket] = collections.OrderedDict()
        self.closing = threading.Event()
        self._stats = collections.Counter()
        self._workers = [Supervisor(self, i) for i in range(nworkers)]
        for w in self._workers:
            w.start_process()
        for w in self._workers:
            w.thread.start()
        self._finalizer = weakref.finalize(self, MeasurePool._final_close, self._workers,
                                           self.closing, self.slots)

    # public API --------------------------------------------------------------------------
    def submit(self, job: Job, on_done: Callable[[JobResult], None] | None = None, *,
               urgent: bool = False) -> Ticket:
        """Queue a job; raises :class:`QueueFull` or :class:`PoolClosed` instead of queuing.

        ``urgent`` jobs (short, interactive ones: the code pane's compile, an access pattern)
        go ahead of the measurements waiting in the queue, behind earlier urgent jobs."""
        if not isinstance(job, Job):
            raise TypeError("submit() takes an app.service.protocol.Job")
        job.check_actions(allow_debug=self.config.allow_debug)
        ticket = Ticket(self.queue, job)
        if on_done is not None:
            ticket.add_done_callback(on_done)
        try:
            self.queue.put(ticket, urgent)
        except QueueFull:
            self.count("refused")
            raise
        with self._lock:
            self._remember(ticket)
            self._stats["submitted"] += 1
        return ticket

    def run(self, job: Job, timeout: float | None = None) -> JobResult:
        """Submit and wait (for scripts and tests)."""
        return self.submit(job).result(timeout)

    def ticket(self, ticket_id: str) -> Ticket | None:
        """A recent ticket by its id (for polling endpoints), or None."""
        with self._lock:
            return self._tickets.get(ticket_id)

    def queue_length(self) -> int:
        return self.queue.waiting()

    def stats(self) -> dict[str, Any]:
        """Counters (submitted, completed, crashes, timeouts, oom, replaced, refused, ...)."""
        with self._lock:
            s = dict(self._stats)
        for key in ("submitted", "completed"):      # (0 before the first job)
            s.setdefault(key, 0)
        s.update(queued=self.queue.waiting(), running=self.queue.running(),
                 workers=len(self._workers), worker_pids=[w.pid for w in self._workers],
                 free_timing_slots=self.slots.free)
        return s

    def worker_pids(self) -> list[int | None]:
        return [w.pid for w in self._workers]

    def network_warning(self, timeout: float | None = None) -> str | None:
        """None when the workers have no network; else the sentence saying why they do
        ("measurement workers have network access: this kernel does not allow ...").
        Waits up to ``timeout`` seconds for the first worker to report (None if none has)."""
        self._reported.wait(timeout)
        return self._network

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, cancel queued ones, kill every worker at once — the ones running
        a job too: a closing pool has no use for results, and a job may run for minutes
        (its ticket ends "shutdown") — then wait up to ``timeout`` seconds for the
        supervisor threads to end.  Idempotent."""
        if self.closing.is_set() and not any(w.thread.is_alive() for w in self._workers):
            return
        self.closing.set()
        self.queue.close()
        self.slots.close()                   # a job waiting for a slot gives up
        self._kill_workers()
        deadline = time.monotonic() + timeout
        for w in self._workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        self._kill_workers()                 # one a supervisor started meanwhile, if any
        self._finalizer.detach()

    def __enter__(self) -> "MeasurePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # internals ---------------------------------------------------------------------------
    def _kill_workers(self) -> None:
        """SIGKILL every worker process (their supervisors see a closed pipe and, the pool
        closing, end their jobs "shutdown" and start no other)."""
        for w in self._workers:
            with contextlib.suppress(Exception):
                w.kill()

    @staticmethod
    def _final_close(workers, closing, slots) -> None:  # at interpreter exit / GC
        closing.set()
        slots.close()
        for w in workers:
            with contextlib.suppress(Exception):
                w.kill()

    def _remember(self, ticket: Ticket) -> None:
        self._tickets[ticket.id] = ticket
        while len(self._tickets) > self.config.keep_tickets + self.config.queue_length:
            oldest_id, oldest = next(iter(self._tickets.items()))
            if not oldest.done():
                break
            del self._tickets[oldest_id]

    # what the supervisors use ---------------------------------------------------------
    def worker_ready(self, worker: Supervisor, report: dict[str, Any]) -> None:
        """A worker has set up its sandbox: the first one that could not isolate its
        network says so in the log (once)."""
        reason = report.get("network")
        with self._lock:
            first = not self._reported.is_set()
            if reason and self._network is None:
                self._network = f"measurement workers have network access: {reason}"
                log.warning("%s", self._network)
            self._reported.set()
        if first and not reason:
            log.info("measurement workers run without network access")
    def count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def next_job(self, worker: Supervisor) -> Ticket | None:
        """The next job for ``worker`` (waits for one); None once the pool closes."""
        ticket = self.queue.take()
        worker.current = ticket
        return ticket

    def job_done(self, worker: Supervisor, ticket: Ticket, result: JobResult) -> None:
        worker.current = None
        with self._lock:
            self._stats["completed"] += 1
            self._stats[f"status:{result.status}"] += 1
        self.queue.done(ticket, result)
