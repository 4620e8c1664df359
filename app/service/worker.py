"""The measurement worker process: its main loop, one job at a time.

This module runs *inside* the worker processes started by
:class:`app.service.pool.MeasurePool` (never in the web server's process); it talks to its
pool over one ``multiprocessing`` pipe with the small tuples of
:mod:`app.service.protocol`. The forkserver preloads it (and with it numpy, llvmlite and
the engine, imported by :mod:`app.service.actions`), so every worker forked from it starts
in milliseconds.

A worker applies its memory limit (``RLIMIT_AS``) to itself before announcing "ready".
Generated code that crashes takes the worker down with it; the pool notices (the pipe
closes), reports the signal, and starts a fresh worker. :func:`run_job` runs one job's
actions in order (:data:`ACTIONS`: the engine's, from :mod:`app.service.actions`, and the
``debug:*`` test hooks that crash, abort, hang, hog memory..., accepted only by a pool
created with ``allow_debug=True``) and reports its status.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any, Callable

from .actions import ENGINE

# Exceptions whose message is meant for the learner (the engine's error classes).
USER_ERRORS = {"ScriptError", "ScheduleError", "BuildError", "ArgumentError", "TraceError",
               "WorkloadError", "InputError", "LimitError", "DTypeError", "CheckError",
               "AccessPatternError", "CacheSimError", "InstrumentError", "ReplayError",
               "IndexMapError", "OutOfBoundsError"}


class _Exit(Exception):
    """The pool asked this worker to stop while it waited for a timing slot."""


class JobContext:
    """What an action may use: partial-result emission and the timing slot."""

    def __init__(self, conn, job: dict[str, Any]):
        self.conn = conn
        self.job = job
        self.data: dict[str, Any] = {}
        self.state: dict[str, Any] = {}      # shared between actions (module, arrays, ...)

    def emit(self, **values: Any) -> None:
        """Record results and send them to the pool now, so a later crash keeps them."""
        self.data.update(values)
        self.conn.send(("data", values))

    @contextlib.contextmanager
    def timing_slot(self, ncores: int = 1):
        """Hold a timing slot: no other worker times anything on these cores meanwhile.

        The calling thread is pinned to the granted cores while the slot is held.
        """
        self.conn.send(("need_timing", int(ncores)))
        while True:
            msg = self.conn.recv()
            if msg[0] == "go":
                cores = list(msg[1])
                break
            if msg[0] == "stop":
                raise _Exit()
        old = None
        try:
            if cores and hasattr(os, "sched_setaffinity"):
                with contextlib.suppress(OSError):
                    old = os.sched_getaffinity(0)
                    os.sched_setaffinity(0, cores)
            yield cores
        finally:
            if old is not None:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, old)
            self.conn.send(("timing_done",))


# --------------------------------------------------------------------------- debug actions
def _debug(kind: str) -> Callable[[JobContext], None]:
    def run(ctx: JobContext) -> None:
        arg = ctx.job.get("debug_arg")
        if kind == "segfault":
            ctypes.string_at(0)                       # reads address 0: SIGSEGV
        elif kind == "abort":
            os.abort()                                # SIGABRT
        elif kind == "exit":
            os._exit(int(arg or 3))
        elif kind == "sleep":
            time.sleep(float(arg or 0))
            ctx.emit(slept=float(arg or 0))
        elif kind == "spin":
            end = time.monotonic() + float(arg or 0)
            x = 0
            while time.monotonic() < end:
                x += 1
            ctx.emit(spins=x)
        elif kind == "alloc":
            block = bytearray(int(arg or 0))          # MemoryError under RLIMIT_AS
            block[::4096] = b"\x01" * len(block[::4096])
            ctx.emit(allocated=len(block))
        elif kind == "raise":
            raise RuntimeError(str(arg or "deliberate failure"))
        elif kind == "echo":
            ctx.emit(echo=arg, pid=os.getpid())
        elif kind == "timed":
            with ctx.timing_slot(int(ctx.job.get("debug_cores") or 1)) as cores:
                t0 = time.monotonic()
                time.sleep(float(arg or 0))
                t1 = time.monotonic()
                affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
            ctx.emit(timing_window=[t0, t1], cores=cores, pid=os.getpid(), affinity=affinity)
        else:
            raise ValueError(f"unknown debug action {kind!r}")
    return run


ACTIONS: dict[str, Callable[[JobContext], None]] = dict(ENGINE)
DEBUG_ACTIONS = ("segfault", "abort", "exit", "sleep", "spin", "alloc", "raise", "echo", "timed")
for _k in DEBUG_ACTIONS:
    ACTIONS[f"debug:{_k}"] = _debug(_k)


# --------------------------------------------------------------------------- main loop
def _fmt_gib(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


def run_job(conn, job: dict[str, Any], config: dict[str, Any]) -> None:
    """Run one job's actions, sending partial data as each ends, then its final status."""
    ctx = JobContext(conn, job)
    status, message, detail, retire = "ok", None, None, False
    try:
        for action in job.get("actions") or ():
            ctx.state["action"] = action
            conn.send(("action", action))
            fn = ACTIONS.get(action)
            if fn is None:
                raise ValueError(f"unknown action {action!r}")
            fn(ctx)
    except _Exit:
        raise
    except MemoryError:
        status, retire = "out-of-memory", True
        limit = config.get("memory_bytes")
        message = ("this step needed more memory than a worker may use"
                   + (f" ({_fmt_gib(limit)})" if limit else "")
                   + " — measurement skipped, the trace is kept")
    except RecursionError:
        status, retire = "error", True
        message = "this program is nested too deeply to compile — measurement skipped, the trace is kept"
    except Exception as e:  # noqa: BLE001
        names = {c.__name__ for c in type(e).__mro__}
        status = "error"
        if names & USER_ERRORS:
            message = str(e)
        else:
            message = (f"the {ctx.state.get('action', 'step')} step failed inside the "
                       f"measurement worker ({type(e).__name__}: {e})")
            detail = traceback.format_exc(limit=20)
    conn.send(("result", {"status": status, "message": message, "detail": detail,
                          "retire": retire, "failed_action": ctx.state.get("action")
                          if status != "ok" else None}))


def worker_loop(conn, config: dict[str, Any]) -> None:
    """Entry point of a worker process (``multiprocessing`` target)."""
    # Ctrl-C in the terminal goes to the whole process group: let the server decide.
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit = config.get("memory_bytes")
    if limit:
        soft = int(limit)
        with contextlib.suppress(ValueError, OSError):
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    # No core files from deliberately (or accidentally) crashing generated code.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break                      # the pool went away
        if not msg or msg[0] == "stop":
            break
        if msg[0] == "job":
            try:
                run_job(conn, msg[1], config)
            except _Exit:
                break
            except (EOFError, OSError, BrokenPipeError):
                break
    with contextlib.suppress(Exception):
        conn.close()
