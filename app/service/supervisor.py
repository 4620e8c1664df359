"""One measurement worker process, seen from the pool: start it, feed it jobs, watch it.

A :class:`Supervisor` owns one worker process (started from the pool's ``forkserver`` or
``spawn`` context; the process runs :func:`app.service.worker.worker_loop`) and the pool
thread that drives it: it takes the next job from the pool's queue, sends it over the
pipe, relays the worker's requests for core slots, and turns what happens into a
:class:`~app.service.protocol.JobResult`:

* the job's **time limit** (not counting the wait for a slot): on expiry the worker is
  killed and replaced — "this step took longer than 5 s — measurement skipped, the trace is
  kept";
* a **crash** (the pipe closes: a segfault or abort in generated code) — "the compiled
  program crashed (signal SIGSEGV) — the step is kept but not measured"; a fresh worker is
  started;
* **out of memory** (the worker's ``RLIMIT_AS``) and internal errors are reported by the
  worker itself, which is then replaced;
* after ``max_jobs_per_worker`` jobs the worker is recycled (generated code and compile
  caches accumulate in a long-lived process).
"""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from typing import Any

from .protocol import JobResult, PoolClosed
from .tickets import Ticket

log = logging.getLogger(__name__)


def _worker_main(conn: Any, config: dict[str, Any]) -> None:
    """The worker process's entry point. The worker's code (and with it numpy, llvmlite and
    the engine) is imported here, in the worker — the forkserver has preloaded it — never
    in the web server's process."""
    from .worker import worker_loop
    worker_loop(conn, config)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _fmt_s(x: float) -> str:
    return f"{x:g}"


class Supervisor:
    """One worker process and the pool thread that drives it."""

    def __init__(self, pool: Any, index: int):
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
        self.jobs_done = 0
        ctx = self.pool.context
        parent, child = ctx.Pipe(duplex=True)
        cfg = {"memory_bytes": self.pool.config.memory_bytes}
        proc = ctx.Process(target=_worker_main, args=(child, cfg),
                           name=f"measure-worker-{self.index}", daemon=True)
        proc.start()
        child.close()
        self.proc, self.conn, self.ready, self.pid = proc, parent, False, proc.pid

    def wait_ready(self) -> bool:
        deadline = time.monotonic() + self.pool.config.startup_timeout_s
        while not self.ready:
            left = deadline - time.monotonic()
            if left <= 0 or self.pool.closing.is_set():
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
        self.pool.count("replaced")
        if not self.pool.closing.is_set():
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
            ticket = pool.next_job(self)
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
            pool.job_done(self, ticket, result)
            if recycle:
                # Generated code and compile caches accumulate in a long-lived worker.
                pool.count("recycled")
                with contextlib.suppress(Exception):
                    self.stop(2.0)
                    if not pool.closing.is_set():
                        self.start_process()

    def _ensure_process(self) -> bool:
        for attempt in range(3):
            if self.proc is None or not self.proc.is_alive():
                self.kill()
                if self.pool.closing.is_set():
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
            if pool.closing.is_set():
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
                    pool.count("timeouts")
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
                    held = pool.slots.acquire(msg[1], pool.closing)
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
                        pool.slots.release(held)
                        held = None
                elif kind == "result":
                    r = msg[1]
                    if r.get("detail"):
                        log.warning("measurement job failed in worker %s:\n%s", pid,
                                    r["detail"])
                    if r.get("retire"):
                        self.replace()
                    if r["status"] == "out-of-memory":
                        pool.count("oom")
                    return JobResult(r["status"], r.get("message"), data, busy,
                                     worker_pid=pid, failed_action=r.get("failed_action"),
                                     detail=r.get("detail"))
        finally:
            if held is not None:
                pool.slots.release(held)

    def _crashed(self, proc: Any, data: dict[str, Any], elapsed: float,
                 pid: int | None) -> JobResult:
        code = None
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.join(5)
                code = proc.exitcode
        closing = self.pool.closing.is_set()
        self.replace()
        if closing:
            return JobResult("shutdown", str(PoolClosed()), data, elapsed, worker_pid=pid)
        self.pool.count("crashes")
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
