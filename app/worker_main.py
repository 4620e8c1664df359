"""The measurement worker process: parse, build, check and time one job at a time.

This module runs *inside* the worker processes started by :class:`app.workers.MeasurePool`
(never in the web server's process).  It talks to its pool over one
``multiprocessing`` pipe with small tuples:

    pool -> worker   ("job", job_dict)        run one job
                     ("go", [cores])          the timing slot asked for is granted
                     ("stop",)                exit cleanly
    worker -> pool   ("ready", pid)           after start-up (limits applied)
                     ("action", name)         an action starts (so a crash can be placed)
                     ("data", {...})          partial results, as soon as each action ends
                     ("need_timing", ncores)  ask for a timing slot (waits for "go")
                     ("timing_done",)         the slot is free again
                     ("result", {...})        the job's final status

A worker applies its memory limit (``RLIMIT_AS``) to itself before announcing "ready".
Generated code that crashes takes the worker down with it; the pool notices (the pipe
closes), reports the signal, and starts a fresh worker.

Actions (a job lists several, in order):

* ``compile`` — build the module with the LLVM backend (compile time reported);
* ``check``   — run it on random inputs and compare with numpy (``engine.runtime.check_correctness``);
* ``time``    — ``time_evaluator`` inside a timing slot, plus numpy's time for the same
  computation as a reference;
* ``source``  — the optimised LLVM IR and the assembly text;
* ``cache``   — the cache simulation (``engine.cache.simulate``), holding one slot;
* ``pattern`` — the access pattern of one loop iteration (``engine.cache.access_pattern``);
* ``roofline`` — the machine's peak GFLOP/s and memory bandwidth
  (``engine.roofline.machine_peaks``: an FMA-throughput loop and a streaming copy compiled by
  the engine), measured once per worker process while holding every timing slot;
* ``debug:*`` — test hooks that crash, abort, hang, hog memory... (only when the pool was
  created with ``allow_debug=True``).
"""
from __future__ import annotations

import contextlib
import ctypes
import inspect
import os
import pickle
import resource
import signal
import sys
import time
import traceback
from typing import Any, Callable

# Heavy imports happen here so that the forkserver (which preloads this module) pays for them
# once and every worker forked from it starts in milliseconds.  A broken engine must not stop
# the worker from starting (the debug actions and error reporting still work).
try:  # pragma: no cover - exercised implicitly
    import numpy as np
except Exception:  # noqa: BLE001
    np = None  # type: ignore[assignment]
try:  # pragma: no cover
    import llvmlite.binding  # noqa: F401
except Exception:  # noqa: BLE001
    pass
try:  # pragma: no cover
    import engine  # noqa: F401
    import importlib
    for _m in ("engine.script", "engine.schedule", "engine.workloads", "engine.runtime",
               "engine.cache", "engine.roofline"):
        with contextlib.suppress(Exception):
            importlib.import_module(_m)
except Exception:  # noqa: BLE001
    pass

# Exceptions whose message is meant for the learner (the engine's error classes).
USER_ERRORS = {"ScriptError", "ScheduleError", "BuildError", "ArgumentError", "TraceError",
               "WorkloadError", "InputError", "LimitError", "DTypeError", "CheckError",
               "AccessPatternError", "CacheSimError", "InstrumentError", "ReplayError",
               "IndexMapError", "OutOfBoundsError"}

SOURCE_KINDS = ("ll-opt", "asm")


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


# --------------------------------------------------------------------------- engine actions
def _load(ctx: JobContext):
    """The job's module and function name (parsed text, replayed trace, or a preset)."""
    if "mod" in ctx.state:
        return ctx.state["mod"], ctx.state["func_name"]
    import engine
    job = ctx.job
    params = dict(job.get("params") or {})
    workload = job.get("workload")
    if job.get("module") is not None:
        # Pickled by the server itself from its own IRModule (never user bytes).
        mod = pickle.loads(job["module"])
    elif job.get("program"):
        mod = engine.parse(job["program"])
    elif job.get("trace") is not None or job.get("token"):
        trace = (engine.Trace.decode(job["token"]) if job.get("token")
                 else engine.Trace.from_json(job["trace"]))
        if workload is None:
            wl = getattr(trace, "workload", None)
            if isinstance(wl, dict):
                workload, params = wl.get("name"), dict(wl.get("params") or params)
            elif wl is not None:
                workload = getattr(wl, "name", None)
                params = dict(getattr(wl, "params", None) or params)
        base = engine.workloads.get(workload, **params)
        sch = engine.Schedule(base)
        trace.apply_to_schedule(sch)
        mod = sch.mod
    elif workload:
        mod = engine.workloads.get(workload, **params)
    else:
        raise ValueError("the job names no program, trace or workload")
    func_name = job.get("func_name")
    if func_name is None and workload:
        func_name = getattr(engine.workloads.info(workload), "func_name", None)
    if func_name is None:
        names = list(mod.names()) if hasattr(mod, "names") else list(mod)
        func_name = names[0]
    ctx.state.update(mod=mod, func_name=func_name, workload=workload, params=params)
    return mod, func_name


def _built(ctx: JobContext):
    if "rt" not in ctx.state:
        import engine
        mod, _ = _load(ctx)
        t0 = time.perf_counter()
        ctx.state["rt"] = engine.build(mod)
        ctx.emit(compile_s=time.perf_counter() - t0)
    return ctx.state["rt"]


def _args(ctx: JobContext):
    """Fresh random inputs (and zeroed outputs) for the workload, same seed every time."""
    import engine
    _load(ctx)
    workload = ctx.state["workload"]
    if not workload:
        raise ValueError("correctness checks and timing need a named workload "
                         "(custom programs are compiled and shown, not run)")
    return engine.workloads.random_args(workload, int(ctx.job.get("seed", 0)),
                                        **ctx.state["params"])


def _plain(x: Any) -> Any:
    """Convert engine results (dataclasses, numpy scalars, objects) to JSON-able data."""
    import dataclasses
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else None
    if np is not None and isinstance(x, np.generic):
        return _plain(x.item())
    if np is not None and isinstance(x, np.ndarray):
        return _plain(x.tolist()) if x.size <= 64 else f"<array {x.shape} {x.dtype}>"
    if callable(getattr(x, "to_dict", None)) and not isinstance(x, type):
        return _plain(x.to_dict())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "_asdict"):
        return _plain(x._asdict())
    if hasattr(x, "__dict__"):
        return {k: _plain(v) for k, v in vars(x).items() if not k.startswith("_")}
    return str(x)


def _is_parallel(mod) -> bool:
    try:
        from engine.ir import For, ForKind, post_order_visit
    except Exception:  # noqa: BLE001
        return False
    found = []

    def visit(n):
        if isinstance(n, For) and n.kind == ForKind.PARALLEL:
            found.append(n)
    for name in (mod.names() if hasattr(mod, "names") else []):
        post_order_visit(mod[name], visit)
    return bool(found)


def act_compile(ctx: JobContext) -> None:
    _built(ctx)


def act_check(ctx: JobContext) -> None:
    import engine
    from engine import runtime
    rt = _built(ctx)
    mod, func_name = _load(ctx)
    args = _args(ctx)
    info = engine.workloads.info(ctx.state["workload"])
    ref = engine.workloads.reference(ctx.state["workload"], **ctx.state["params"])
    n_in = getattr(info, "num_inputs", None) or max(1, len(args) - 1)
    # The kernel gets every array; the workload's reference takes its inputs only and
    # returns the expected output(s).
    res = runtime.check_correctness(rt, func_name, lambda *a: ref(*a[:n_in]), args)
    plain = _plain(res)
    if isinstance(res, bool):
        correct = res
    elif isinstance(plain, dict):
        correct = bool(plain.get("ok", plain.get("correct", plain.get("passed"))))
    else:
        correct = bool(res)
    ctx.emit(correct=correct, check=plain)


def act_time(ctx: JobContext) -> None:
    import engine
    rt = _built(ctx)
    mod, func_name = _load(ctx)
    args = _args(ctx)
    job = ctx.job
    number = int(job.get("number", 3))
    repeat = int(job.get("repeat", 3))
    min_repeat_ms = float(job.get("min_repeat_ms", 0))
    ncores = (os.cpu_count() or 1) if _is_parallel(mod) else 1
    flops = None
    with contextlib.suppress(Exception):
        flops = float(engine.workloads.info(ctx.state["workload"]).flops(**ctx.state["params"]))
    info = engine.workloads.info(ctx.state["workload"])
    ref = engine.workloads.reference(ctx.state["workload"], **ctx.state["params"])
    n_in = getattr(info, "num_inputs", None) or max(1, len(args) - 1)
    with ctx.timing_slot(ncores) as cores:
        timer = rt.time_evaluator(func_name, number=number, repeat=repeat,
                                  min_repeat_ms=min_repeat_ms)
        res = timer(*args)
        # numpy's time for the same computation, measured in the same slot.
        np_times = []
        inputs = [a.copy() for a in args[:n_in]]
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            for _ in range(max(1, number)):
                ref(*inputs)
            np_times.append((time.perf_counter() - t0) / max(1, number))
    times = _plain(res)
    median = getattr(res, "median", None)
    if median is None and isinstance(times, dict):
        median = times.get("median", times.get("mean"))
    np_median = sorted(np_times)[len(np_times) // 2]
    ctx.emit(times=times, cores=cores, parallel=ncores > 1,
             gflops=(flops / median / 1e9) if flops and median else None,
             numpy_s=np_median,
             numpy_gflops=(flops / np_median / 1e9) if flops and np_median else None,
             flops=flops)


def act_run(ctx: JobContext) -> None:
    """Call the compiled function once on random arrays (any program, named workload or not).

    Used to try a custom program's kernel (and by tests: a kernel that reads far out of
    bounds must crash this worker, not the server)."""
    from engine import runtime
    rt = _built(ctx)
    _, func_name = _load(ctx)
    fn = rt.get_function(func_name) if hasattr(rt, "get_function") else rt[func_name]
    arrays = runtime.random_arrays(fn.specs, int(ctx.job.get("seed", 0)))
    t0 = time.perf_counter()
    fn(*arrays)
    ctx.emit(ran_s=time.perf_counter() - t0)


def act_source(ctx: JobContext) -> None:
    rt = _built(ctx)
    cap = int(ctx.job.get("source_max_chars", 400_000))
    out = {}
    for kind in SOURCE_KINDS:
        try:
            text = rt.get_source(kind)
        except Exception as e:  # noqa: BLE001
            text = f"; {kind} is not available: {e}"
        if len(text) > cap:
            text = text[:cap] + f"\n; ... cut at {cap} characters ({len(text)} in all)\n"
        out[kind] = text
    ctx.emit(source=out)


def act_cache(ctx: JobContext) -> None:
    import engine
    mod, func_name = _load(ctx)
    # one core of its own: the simulation is CPU-bound for seconds and must not share a
    # core with another worker's timing
    with ctx.timing_slot(1):
        res = engine.cache.simulate(mod, func_name)
    ctx.emit(cache=_plain(res))


def act_pattern(ctx: JobContext) -> None:
    """Which elements one iteration of a loop touches (``engine.cache.access_pattern``);
    the loop is named by its post-order index among the function's ``For`` nodes."""
    import engine
    from app.measure import loop_at
    mod, func_name = _load(ctx)
    idx = ctx.job.get("loop_index")
    loop = loop_at(mod[func_name], int(idx)) if idx is not None else None
    if loop is None:
        raise ValueError(f"this program has no loop number {idx}")
    res = engine.cache.access_pattern(mod, func_name, loop, int(ctx.job.get("iteration") or 0))
    ctx.emit(pattern=_plain(res))


def act_roofline(ctx: JobContext) -> None:
    """The machine's roofs for the roofline view: ``engine.roofline.machine_peaks()``.

    Both kernels (an FMA-throughput loop and a streaming copy, written as engine TVMScript
    and compiled by the engine) run on every core, so the whole measurement holds every
    timing slot: no step is timed while the peaks are measured, and the peaks are not
    lowered by another worker's timing run. The engine caches the result for the process,
    so a worker measures the peaks at most once; the web app stores them under a fixed key
    (see :meth:`app.workers.StepMeasurer.submit_roofline`) so they survive restarts.
    """
    from engine import roofline
    with ctx.timing_slot(os.cpu_count() or 1):
        peaks = roofline.machine_peaks()
    ctx.emit(roofline=_plain(peaks))


def act_step(ctx: JobContext) -> None:
    """One explorer step exactly as the web app measures it (``app.measure.measure_step``),
    run here instead of in the server; its timing runs inside a timing slot."""
    from app import measure
    mod, func_name = _load(ctx)
    job = ctx.job
    baseline = pickle.loads(job["baseline"]) if job.get("baseline") is not None else None
    kwargs: dict[str, Any] = {"func_name": func_name, "baseline": baseline}
    ncores = (os.cpu_count() or 1) if _is_parallel(mod) else 1
    params = dict(job.get("params") or {})
    accepts = inspect.signature(measure.measure_step).parameters
    if "compile_slot" in accepts:
        # a program with parallel loops compiles as several LLVM modules side by side
        # (engine.codegen.units): it gets the cores its timing gets
        kwargs["compile_slot"] = lambda: ctx.timing_slot(ncores)
    if "timing_slot" in accepts:
        res = measure.measure_step(mod, job.get("workload"), params,
                                   timing_slot=lambda: ctx.timing_slot(ncores), **kwargs)
    else:   # older measure_step: hold the slot for the whole step (correct, less overlap)
        with ctx.timing_slot(ncores):
            res = measure.measure_step(mod, job.get("workload"), params, **kwargs)
    ctx.emit(step=_plain(res))


ACTIONS: dict[str, Callable[[JobContext], None]] = {
    "step": act_step,
    "compile": act_compile, "run": act_run, "check": act_check, "time": act_time,
    "source": act_source, "cache": act_cache, "pattern": act_pattern,
    "roofline": act_roofline,
}
DEBUG_ACTIONS = ("segfault", "abort", "exit", "sleep", "spin", "alloc", "raise", "echo", "timed")
for _k in DEBUG_ACTIONS:
    ACTIONS[f"debug:{_k}"] = _debug(_k)


# --------------------------------------------------------------------------- main loop
def _fmt_gib(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


def _run_job(conn, job: dict[str, Any], config: dict[str, Any]) -> None:
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
                _run_job(conn, msg[1], config)
            except _Exit:
                break
            except (EOFError, OSError, BrokenPipeError):
                break
    with contextlib.suppress(Exception):
        conn.close()
