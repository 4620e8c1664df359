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

**A worker dies with the server**, however the server ends (a clean stop closes the pool,
which kills its workers; a SIGKILL or a crash of the server cleans nothing up), even in the
middle of a job that would run for minutes. Two guards, set up before anything else:

* :func:`die_with_parent`: under the ``forkserver`` start method (the pool's default) the
  worker's parent is the forkserver process, forked from by that process's main thread, its
  only thread that forks, which ends only when the forkserver exits; and the forkserver
  exits when the server does (its "alive" pipe from the server closes). So the worker asks
  the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux), then
  checks its parent is still the server's forkserver (it may have died before the
  ``prctl``) and exits if not. Under ``spawn`` the parent is the server itself, and the
  thread that forked is one of the server's threads (the pool's supervisor threads start
  replacement workers): ``PR_SET_PDEATHSIG`` fires when that *thread* ends, which may be
  long before the server does, so it is not used there; the parent is only checked;
* :func:`watch_parent_pipe` (any start method, any POSIX system): a thread of the worker
  waits for its pipe to the server to hang up (the server's end closes when the server
  dies, or when the pool drops the worker) and ends the process with ``os._exit`` at once,
  whatever its main thread is running. It only polls the descriptor for a hang-up; it never
  reads from the pipe.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import resource
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable

from .actions import ENGINE, warm_up
from .protocol import encode_reply
from .timing import pinned_to

# Exceptions whose message is meant for the learner (the engine's error classes).
USER_ERRORS = {"ScriptError", "ScheduleError", "BuildError", "ArgumentError", "TraceError",
               "WorkloadError", "InputError", "LimitError", "DTypeError", "CheckError",
               "AccessPatternError", "CacheSimError", "InstrumentError", "ReplayError",
               "IndexMapError", "OutOfBoundsError", "TuneError", "ImportError_"}


class _Exit(Exception):
    """The pool asked this worker to stop while it waited for a timing slot."""


class JobContext:
    """What an action may use: partial-result emission and the timing slot."""

    def __init__(self, conn, job: dict[str, Any]):
        self.conn = conn
        self.job = job
        self.data: dict[str, Any] = {}
        self.state: dict[str, Any] = {}      # shared between actions (module, arrays, ...)
        # the slot the pool took for this job before sending it (protocol.SLOT_AT_START)
        self._granted: list[int] | None = job.get("granted")
        self.slot_came_with_job = False       # the slot used came with the job (no round trip)

    def emit(self, **values: Any) -> None:
        """Record results and send them to the pool now, so a later crash keeps them."""
        self.data.update(values)
        self.conn.send(("data", values))

    @contextlib.contextmanager
    def timing_slot(self, ncores: int = 1, pin: bool = True):
        """Hold a timing slot: no other worker times anything on these cores meanwhile.

        With ``pin`` the calling thread is pinned to the granted cores while the slot is
        held; without, the caller pins what needs it (``app.service.timing.pinned_to``:
        a step pins its timed runs, not its compile).
        """
        granted, self._granted = self._granted, None
        if granted and len(granted) == int(ncores):
            cores = list(granted)             # taken by the pool with the job: no round trip
            self.slot_came_with_job = True
        else:
            if granted:                       # not what is needed: give it back, then ask
                self.conn.send(("timing_done",))
            self.conn.send(("need_timing", int(ncores)))
            while True:
                msg = self.conn.recv()
                if msg[0] == "go":
                    cores = list(msg[1])
                    break
                if msg[0] == "stop":
                    raise _Exit()
        try:
            with pinned_to(cores if pin else None):
                yield cores
        finally:
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
            ctx.emit(timing_window=[t0, t1], cores=cores, pid=os.getpid(), affinity=affinity,
                     slot_came_with_job=ctx.slot_came_with_job)
        else:
            raise ValueError(f"unknown debug action {kind!r}")
    return run


def _open_fds() -> dict[int, str]:
    """This process's open file descriptors and what they point to (``/proc/self/fd``)."""
    fds: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return fds


def _debug_limits(ctx: JobContext) -> None:
    """Report what confines this worker: its resource limits and its open descriptors."""
    raw = getattr(ctx.conn, "raw", ctx.conn)
    ctx.emit(rlimits={name: list(resource.getrlimit(getattr(resource, f"RLIMIT_{name}")))
                      for name in ("AS", "CPU", "FSIZE", "CORE")},
             fds={str(fd): target for fd, target in _open_fds().items()},
             pipe=raw.fileno(), pid=os.getpid(), nice=os.getpriority(os.PRIO_PROCESS, 0))


def _debug_connect(ctx: JobContext) -> None:
    """Try to open a TCP connection to 127.0.0.1 on the job's port (``debug_arg``)."""
    try:
        with socket.create_connection(("127.0.0.1", int(ctx.job.get("debug_arg"))), timeout=5):
            ctx.emit(connected=True, error=None)
    except OSError as e:
        ctx.emit(connected=False, error=f"{type(e).__name__}: {e}")


def _debug_write(ctx: JobContext) -> None:
    """Write ``debug_arg`` bytes to a new temporary file (removed afterwards)."""
    fd, path = tempfile.mkstemp(prefix="worker-write-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"\0" * int(ctx.job.get("debug_arg") or 0))
        ctx.emit(written=os.path.getsize(path), error=None)
    except OSError as e:
        ctx.emit(written=None, error=f"{type(e).__name__}: {e}")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _CreatesFileWhenUnpickled:
    """Unpickling this creates the file ``path`` (how a test sees who unpickled it)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _debug_reply(ctx: JobContext) -> None:
    """Send the pool a reply that is not what the protocol allows, on the raw pipe:
    ``debug_arg`` is ``["pickle", path]`` (a pickle that creates ``path`` when loaded),
    ``["garbage"]``, ``["shape"]`` (JSON of the wrong shape) or ``["huge", nbytes]``;
    then carry on as if nothing happened."""
    kind, *rest = ctx.job.get("debug_arg") or ["garbage"]
    raw = getattr(ctx.conn, "raw", ctx.conn)
    if kind == "pickle":
        payload = pickle.dumps(("result", _CreatesFileWhenUnpickled(rest[0])))
    elif kind == "shape":
        payload = json.dumps(["result", {"status": "fine", "retire": "no"}]).encode()
    elif kind == "huge":
        payload = json.dumps(["data", {"blob": "x" * int(rest[0])}]).encode()
    else:
        payload = b"\x80\x05 neither a pickle nor JSON \xff"
    raw.send_bytes(payload)
    ctx.emit(sent=len(payload))


ACTIONS: dict[str, Callable[[JobContext], None]] = dict(ENGINE)
DEBUG_ACTIONS = ("segfault", "abort", "exit", "sleep", "spin", "alloc", "raise", "echo", "timed")
for _k in DEBUG_ACTIONS:
    ACTIONS[f"debug:{_k}"] = _debug(_k)
ACTIONS.update({"debug:limits": _debug_limits, "debug:connect": _debug_connect,
                "debug:write": _debug_write, "debug:reply": _debug_reply})


# --------------------------------------------------------------------------- the sandbox
CLONE_NEWNET = getattr(os, "CLONE_NEWNET", 0x40000000)
CLONE_NEWUSER = getattr(os, "CLONE_NEWUSER", 0x10000000)


def _unshare(flags: int) -> None:
    """``unshare(2)``: ``os.unshare`` from Python 3.12, the C library's before."""
    if hasattr(os, "unshare"):
        os.unshare(flags)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _why(e: Exception) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def _keep_own_ids(uid: int, gid: int) -> None:
    """In a new user namespace: stay the same user and group (not "nobody")."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with contextlib.suppress(OSError), open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def isolate_network() -> str | None:
    """Move this process into a new network namespace: no interface but a loopback that is
    down, so every connection fails ("network is unreachable").

    Tried directly (it needs privileges), then inside a new user namespace (which many
    kernels allow without them; this needs a single-threaded process: call it first).
    Returns None once isolated, else the sentence saying why not."""
    refused = []
    try:
        _unshare(CLONE_NEWNET)
        return None
    except (OSError, AttributeError) as e:
        refused.append(f"new network namespaces ({_why(e)})")
    uid, gid = os.getuid(), os.getgid()
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except (OSError, AttributeError) as e:
        refused.append(f"user namespaces ({_why(e)})")
        return "this kernel does not allow " + " nor ".join(refused)
    _keep_own_ids(uid, gid)
    return None


def close_inherited_fds(keep: int) -> None:
    """Close every file descriptor but stdin (made ``/dev/null``), stdout, stderr and
    ``keep`` (the pipe to the pool)."""
    null = os.open(os.devnull, os.O_RDONLY)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    with contextlib.suppress(Exception):
        if sys.stdin is not None and sys.stdin.fileno() != 0:
            sys.stdin.close()
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 stays open for the process
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    for fd in fds:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    # multiprocessing's resource tracker must not write to a descriptor closed here.
    with contextlib.suppress(Exception):
        from multiprocessing import resource_tracker
        resource_tracker._resource_tracker._fd = None


def _set_limit(which: int, soft: int, hard: int | None = None) -> None:
    """Set a resource limit's soft value (and, given ``hard``, lower its hard one), never
    above the hard limit the process already has."""
    inf = resource.RLIM_INFINITY
    with contextlib.suppress(ValueError, OSError):
        _, new_hard = resource.getrlimit(which)
        if hard is not None:
            new_hard = hard if new_hard == inf else min(hard, new_hard)
        if new_hard != inf:
            soft = min(soft, new_hard)
        resource.setrlimit(which, (soft, new_hard))


def apply_limits(config: dict[str, Any]) -> None:
    """The worker's lasting limits: address space (``memory_bytes``), the size of any file
    it writes (``file_size_bytes``: beyond it a write fails "File too large"), no core
    files, and a lower scheduling priority than the server's (``nice`` added to the
    niceness it inherits). The CPU time is limited per job (:func:`limit_cpu_time`)."""
    if config.get("memory_bytes"):
        _set_limit(resource.RLIMIT_AS, int(config["memory_bytes"]))
    if config.get("file_size_bytes"):
        size = int(config["file_size_bytes"])
        _set_limit(resource.RLIMIT_FSIZE, size, size)
    # No core files from deliberately (or accidentally) crashing generated code.
    _set_limit(resource.RLIMIT_CORE, 0, 0)
    if config.get("nice"):
        with contextlib.suppress(OSError):
            os.nice(int(config["nice"]))


def limit_cpu_time(seconds: float | None) -> None:
    """Allow the next job ``seconds`` of CPU time (all threads together) from now; past it
    the kernel stops the worker (SIGXCPU). A backstop: the pool's wall-clock limit on the
    job comes first."""
    if seconds:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = usage.ru_utime + usage.ru_stime
        _set_limit(resource.RLIMIT_CPU, int(used + float(seconds)) + 1)


class ReplyChannel:
    """The worker's end of its pipe: what it sends is JSON
    (:func:`app.service.protocol.encode_reply`, at most ``max_bytes`` a message); what it
    receives was made by the pool."""

    def __init__(self, raw: Any, max_bytes: int | None = None):
        self.raw = raw
        self.max_bytes = max_bytes

    def send(self, msg: tuple) -> None:
        data = encode_reply(msg)
        if self.max_bytes and len(data) > self.max_bytes:
            raise ValueError(f"this step's results are too large to send "
                             f"({_fmt_gib(len(data))}; at most {_fmt_gib(self.max_bytes)})")
        self.raw.send_bytes(data)

    def recv(self) -> Any:
        return self.raw.recv()

    def close(self) -> None:
        self.raw.close()


# --------------------------------------------------------------------------- dying with the server
#: ``prctl`` option: the signal this process gets when its parent (the thread that forked it) dies
PR_SET_PDEATHSIG = 1
#: the exit status of a worker that found its server gone (see :func:`watch_parent_pipe`)
PARENT_GONE_EXIT = 75


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when the thread that forked it ends
    (``prctl(PR_SET_PDEATHSIG, sig)``). Linux only: False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(int(sig)),
                          ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def parent_of(pid: int) -> int | None:
    """The parent process of ``pid`` (from ``/proc/<pid>/stat``), or None if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def started_by_server(server_pid: int, via_forkserver: bool, parent: int,
                      grandparent: int | None) -> bool:
    """Whether a worker whose parent is ``parent`` (and its parent ``grandparent``) is still
    attached to the server that started it: its parent is the server itself (``spawn``), or
    the server's forkserver (``via_forkserver``). An orphan's parent is init (1) or a
    subreaper, whose parent is not the server."""
    if via_forkserver:
        if parent in (1, server_pid):     # orphaned: adopted by init (or by the server)
            return False
        return grandparent in (server_pid, None)   # None: no /proc; the pipe guard decides
    return parent == server_pid


def die_with_parent(config: dict[str, Any]) -> None:
    """The worker's first guard (see the module docstring): under the forkserver, SIGKILL
    when the forkserver dies; then exit now if the server (or its forkserver) is already
    gone. ``config["server_pid"]``: the server that started this worker (absent: no check);
    ``config["via_forkserver"]``: whether it was forked by the server's forkserver."""
    server_pid = config.get("server_pid")
    if not server_pid:
        return
    via_forkserver = bool(config.get("via_forkserver"))
    if via_forkserver:
        set_parent_death_signal(signal.SIGKILL)
    parent = os.getppid()                  # after the prctl: a parent gone before it shows
    grandparent = parent_of(parent) if via_forkserver else None
    if not started_by_server(int(server_pid), via_forkserver, parent, grandparent):
        os._exit(PARENT_GONE_EXIT)


def _hung_up(fd: int) -> bool:
    """Wait until the pipe ``fd`` hangs up (its other end closed) or is closed here: True
    for a hang-up or an error, False when this process closed ``fd`` itself. Takes nothing
    from the pipe (it asks for no event: hang-ups and errors are always reported)."""
    import select
    poller = select.poll()
    poller.register(fd, 0)
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        for _, ev in events:
            if ev & select.POLLNVAL:
                return False
            if ev & (select.POLLHUP | select.POLLERR):
                return True


def watch_parent_pipe(fd: int, on_gone: Callable[[], None] | None = None) -> threading.Thread:
    """The worker's second guard: a daemon thread that waits for the pipe to the server
    (``fd``) to hang up, then ends this process at once (``os._exit(PARENT_GONE_EXIT)``,
    whatever its main thread is running), or calls ``on_gone`` instead (tests). Returns the
    thread (started)."""
    def watch() -> None:
        if _hung_up(fd):
            if on_gone is not None:
                on_gone()
            else:
                os._exit(PARENT_GONE_EXIT)

    thread = threading.Thread(target=watch, name="parent-pipe-watch", daemon=True)
    thread.start()
    return thread


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
        # Whatever failed may have left the process in a bad state (generated code that
        # wrote out of bounds, say): a worker whose job failed is not used again.
        status, retire = "error", True
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
    """Entry point of a worker process (``multiprocessing`` target): set up the sandbox
    (no network where the kernel allows it, no inherited descriptors, resource limits),
    say "ready", then run jobs until told to stop. It dies with the server (see the module
    docstring: :func:`die_with_parent`, :func:`watch_parent_pipe`)."""
    die_with_parent(config)                # first: the server may be gone already
    # Ctrl-C in the terminal goes to the whole process group: let the server decide.
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    network = isolate_network()            # before any thread: a user namespace needs one
    close_inherited_fds(conn.fileno())
    watch_parent_pipe(conn.fileno())       # from now on, whatever a job is doing
    apply_limits(config)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    channel = ReplyChannel(conn, config.get("reply_max_bytes"))
    warm_up()                              # LLVM initialised, target machine built
    channel.send(("ready", os.getpid(), {"network": network}))
    while True:
        try:
            msg = channel.recv()
        except (EOFError, OSError):
            break                      # the pool went away
        if not msg or msg[0] == "stop":
            break
        if msg[0] == "job":
            limit_cpu_time(msg[1].get("cpu_limit_s"))
            try:
                run_job(channel, msg[1], config)
            except _Exit:
                break
            except (EOFError, OSError, BrokenPipeError):
                break
    with contextlib.suppress(Exception):
        channel.close()
