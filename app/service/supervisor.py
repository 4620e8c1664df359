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
* **out of memory** (the worker's ``RLIMIT_AS``) and any other failure are reported by the
  worker itself, which is then replaced: a worker whose job failed is never used again;
* a **malformed reply** (anything but the protocol's JSON, or larger than
  ``reply_max_bytes``: :func:`~app.service.protocol.decode_reply`) fails the job and
  replaces the worker — what a worker sends is never unpickled;
* after ``max_jobs_per_worker`` jobs the worker is recycled (generated code and compile
  caches accumulate in a long-lived process);
* when the pool closes, the worker is killed, even in the middle of a job (its ticket ends
  "shutdown"); when the server dies without closing it, the worker dies too: it is told
  the server's pid and how it was started, and guards itself
  (:func:`app.service.worker.die_with_parent`, :func:`~app.service.worker.watch_parent_pipe`).
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from typing import Any

from .protocol import SLOT_AT_START, BadReply, JobResult, PoolClosed, decode_reply
from .tickets import Ticket

log = logging.getLogger(__name__)


#: how often a waiting supervisor looks whether its job was asked to stop
STOP_POLL_S = 0.5


def _worker_main(conn: Any, config: dict[str, Any]) -> None:
    """The worker process's entry point. The worker's code (and with it numpy, llvmlite and
    the engine) is imported here, in the worker — the forkserver has preloaded it — never
    in the web server's process. The worker's first act is to make sure it dies with the
    server (:func:`app.service.worker.die_with_parent`)."""
    from .worker import worker_loop
    worker_loop(conn, config)


def _running(proc: Any) -> bool:
    """Whether ``proc`` (a worker process, or None) is running; a process the closing pool
    has killed and closed meanwhile is not, nor one that has exited (a zombie, or gone)
    before its parent has told: under the forkserver ``is_alive()`` learns of an exit only
    when the forkserver reports it, and a job sent in between went to a dead worker."""
    try:
        return proc is not None and proc.is_alive() and not _exited(proc.pid)
    except ValueError:                       # "process object is closed"
        return False


def _exited(pid: int | None) -> bool:
    """True when the kernel says process ``pid`` has exited (state Z, or no such process);
    False when it runs or cannot be told (no /proc)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return os.path.isdir("/proc/self")   # gone, where /proc exists at all
    except OSError:
        return False
    # the state follows the command name in parentheses, which may itself hold ") "
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"Z"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _fmt_s(x: float) -> str:
    return f"{x:g}"


def cpu_budget_s(time_limit_s: float) -> int:
    """The CPU time a job may use (``RLIMIT_CPU``, a backstop behind the wall-clock limit):
    every core busy for twice the time limit, plus ten seconds."""
    return int(2 * float(time_limit_s) * (os.cpu_count() or 1)) + 10


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
        pcfg = self.pool.config
        cfg = {"memory_bytes": pcfg.memory_bytes, "file_size_bytes": pcfg.file_size_bytes,
               "reply_max_bytes": pcfg.reply_max_bytes,
               "nice": pcfg.nice,
               # how the worker knows it still has a server (worker.die_with_parent)
               "server_pid": os.getpid(),
               "via_forkserver": ctx.get_start_method() == "forkserver"}
        proc = ctx.Process(target=_worker_main, args=(child, cfg),
                           name=f"measure-worker-{self.index}", daemon=True)
        proc.start()
        child.close()
        self.proc, self.conn, self.ready, self.pid = proc, parent, False, proc.pid

    def wait_ready(self) -> bool:
        deadline = time.monotonic() + self.pool.config.startup_timeout_s
        while not self.ready:
            left = deadline - time.monotonic()
            conn = self.conn                 # the closing pool may kill the worker meanwhile
            if left <= 0 or self.pool.closing.is_set() or conn is None:
                return False
            try:
                if conn.poll(min(left, 0.5)):
                    msg = self.receive(conn)
                    if msg[0] == "ready":
                        self.ready = True
                        self.pool.worker_ready(self, msg[2])
            except (EOFError, OSError, BadReply) as e:
                if isinstance(e, BadReply):
                    log.warning("measurement worker %s: %s", self.index, e)
                return False
        return True

    def receive(self, conn: Any) -> tuple:
        """The worker's next message: JSON of a shape the protocol allows, at most
        ``reply_max_bytes`` (else :class:`BadReply`); never unpickled."""
        cap = self.pool.config.reply_max_bytes
        try:
            raw = conn.recv_bytes(cap)
        except OSError as e:
            if e.errno is None and "message length" in str(e):
                raise BadReply(f"a reply larger than {cap} bytes") from None
            raise
        return decode_reply(raw)

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
        self._ensure_process()       # ready (and its sandbox reported) before the first job
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
            if not _running(self.proc):
                self.kill()
                if self.pool.closing.is_set():
                    return False
                self.start_process()
            if self.wait_ready():
                return True
            if self.pool.closing.is_set():
                return False
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
        wire["cpu_limit_s"] = cpu_budget_s(limit)
        data: dict[str, Any] = {}
        # the slot the job's first action asks for, taken now when one is free (see
        # protocol.SLOT_AT_START): released when the worker says "timing_done" or at the end
        held: list[int] | None = None
        if job.actions and job.actions[0] in SLOT_AT_START:
            held = pool.slots.try_acquire(1)
            if held is not None:
                wire["granted"] = list(held)
        remaining = float(limit)
        t_start = time.monotonic()
        busy = 0.0
        action: str | None = None
        try:
            for attempt in range(2):
                conn, proc, pid = self.conn, self.proc, self.pid   # close() may kill elsewhere
                try:
                    conn.send(("job", wire))
                    break
                except (OSError, ValueError, AttributeError):
                    # The worker died while idle (killed from outside?): start another, retry
                    # once.
                    self.replace()
                    if attempt == 1 or not self._ensure_process():
                        return JobResult("error", "no measurement worker could be started — "
                                                  "the step is kept but not measured")
            while True:
                t0 = time.monotonic()
                try:
                    # in slices, so a stop asked for meanwhile (a tuning job) is seen
                    has = conn.poll(max(min(remaining, STOP_POLL_S), 0.0))
                except (EOFError, OSError):
                    has = True       # recv below reports the broken pipe
                # a stop is honoured even while the job keeps reporting (a fast tuning job
                # sends a trial record every few milliseconds, so `has` is rarely False)
                if ticket.stop_requested:
                    busy += time.monotonic() - t0
                    self.replace()
                    return JobResult("cancelled", "stopped: what was found so far is kept",
                                     data, busy, worker_pid=pid, failed_action=action)
                if not has and remaining - (time.monotonic() - t0) > 0:
                    dt = time.monotonic() - t0
                    remaining -= dt
                    busy += dt
                    continue
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
                    msg = self.receive(conn)
                except BadReply as e:
                    return self._bad_reply(e, data, time.monotonic() - t_start, pid, action)
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
                    ticket.note(msg[1])
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
                    if r.get("retire") or r["status"] != "ok":
                        self.replace()          # a failed job may have left it corrupted
                    if r["status"] == "out-of-memory":
                        pool.count("oom")
                    return JobResult(r["status"], r.get("message"), data, busy,
                                     worker_pid=pid, failed_action=r.get("failed_action"),
                                     detail=r.get("detail"))
        finally:
            if held is not None:
                pool.slots.release(held)

    def _bad_reply(self, e: BadReply, data: dict[str, Any], elapsed: float,
                   pid: int | None, action: str | None) -> JobResult:
        """The worker sent something the protocol does not allow: it is replaced."""
        log.warning("measurement worker %s sent a malformed reply: %s", pid, e)
        closing = self.pool.closing.is_set()
        self.replace()
        if closing:
            return JobResult("shutdown", str(PoolClosed()), data, elapsed, worker_pid=pid)
        self.pool.count("bad_replies")
        return JobResult("crashed", f"the measurement worker sent a malformed reply ({e}) — "
                                    f"the step is kept but not measured",
                         data, elapsed, worker_pid=pid, failed_action=action)

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
            if sig == "SIGXCPU":
                msg = ("this step used more CPU time than a worker may — measurement "
                       "skipped, the trace is kept")
            elif sig == "SIGKILL":
                msg = ("the measurement worker was killed (SIGKILL, perhaps for using too much "
                       "memory) — the step is kept but not measured")
            else:
                msg = f"the compiled program crashed (signal {sig}) — the step is kept but not measured"
        else:
            msg = (f"the measurement worker exited unexpectedly (exit code {code}) — "
                   f"the step is kept but not measured")
        return JobResult("crashed", msg, data, elapsed, worker_pid=pid)
