"""Measurements of one program state: compile, check against numpy, time.

:func:`measure_step`, :func:`cache_step`, :func:`prefetch`, :func:`machine_peaks` (and the code
pane's source text) are the seam between the web app and measurement. In the real server (``python -m app``)
they are answered by a :class:`app.workers.StepMeasurer`: worker processes compile, check and
time, results are kept in the SQLite store, and the server process never compiles or runs
generated code. The measurer is the Flask app's ``app.extensions["measurer"]`` (see
:func:`active`), or the module global :data:`MEASURER` outside a request.

Without a measurer (inside a worker process, and in the Flask test-client unit tests, which
ask for it with ``MEASURE_IN_PROCESS``) the functions below do the work here and cache
results in memory keyed by the program's structural hash.

The result is a plain dict (JSON-friendly)::

    {"hash": str, "ok": bool, "stage": "compile"|"check"|"time"|"done", "error": str|None,
     "compile_ms": float, "compile_ours_ms": float, "compile_llvm_ms": float (the split
     of the first compile of this program: ours vs llvmlite's),
     "time_ms": float, "gflops": float|None, "numpy_ms": float|None,
     "correct": True|False|None, "max_abs_err": float|None, "detail": str}
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from . import bridge
from .limits import SLOW_RUN_S

_CACHE: "OrderedDict[tuple, dict]" = OrderedDict()
_BUILDS: "OrderedDict[str, Any]" = OrderedDict()
_NUMPY: dict[tuple, float] = {}
_CACHE_SIM: "OrderedDict[str, dict]" = OrderedDict()
_LOCK = threading.Lock()
_KEY_LOCKS: dict[tuple, threading.Lock] = {}
# One timing run at a time in this process: two kernels timed at once on a small machine
# would each measure the other's interference.
_TIMING = threading.Lock()
MAX_ENTRIES = 512
MAX_BUILDS = 16
# Timing budget: enough repeats for a stable median without blocking a click for long.
TARGET_SECONDS = 0.15
#: The StepMeasurer used outside a Flask app context (set by ``create_app`` for a pooled app);
#: None means "measure in this process" (worker processes, unit tests).
MEASURER = None
_NO_APP = object()


def active():
    """The :class:`app.workers.StepMeasurer` answering measurements here, or None.

    In a request, the current app's ``extensions["measurer"]`` (None for an app that
    measures in-process); elsewhere the module global :data:`MEASURER`.
    """
    try:
        from flask import current_app, has_app_context
    except ImportError:  # pragma: no cover - Flask ships with the app
        return MEASURER
    if has_app_context():
        m = current_app.extensions.get("measurer", _NO_APP)
        if m is not _NO_APP:
            return m
    return MEASURER


def _key_lock(key: tuple) -> threading.Lock:
    with _LOCK:
        lk = _KEY_LOCKS.get(key)
        if lk is None:
            lk = _KEY_LOCKS[key] = threading.Lock()
        return lk


def program_hash(mod) -> str:
    from engine.ir import structural_hash
    return structural_hash(mod)


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
        _BUILDS.clear()
        _NUMPY.clear()
        _CACHE_SIM.clear()


def cpu_heavy():
    """Context manager: hold the timing lock (CPU-heavy work never overlaps a timing run)."""
    return _TIMING


def cache_step(mod, func_name: str | None = None) -> dict:
    """Simulated cache behaviour of ``mod`` (``engine.cache.simulate(...).to_dict()``),
    cached by program hash. Never raises: ``{"error": sentence}`` when it cannot be
    simulated, ``{"unavailable": sentence}`` when the cache part has not landed."""
    m = active()
    if m is not None:
        return m.cache(mod, func_name)
    return _local_cache_step(mod, func_name)


def _local_cache_step(mod, func_name: str | None = None) -> dict:
    h = program_hash(mod)
    fname = func_name or mod.names()[0]
    key = f"{h}:{fname}"
    with _LOCK:
        if key in _CACHE_SIM:
            _CACHE_SIM.move_to_end(key)
            return _CACHE_SIM[key]
    try:
        simulate = bridge.attr("cache", "simulate")
    except bridge.NotAvailable as e:
        return {"unavailable": str(e)}
    with _key_lock(("cache", key)):
        with _LOCK:
            if key in _CACHE_SIM:
                return _CACHE_SIM[key]
        try:
            with _TIMING:   # CPU-heavy: never alongside a timing run
                res = simulate(mod, fname).to_dict()
        except Exception as e:  # noqa: BLE001 - shown on the step, not raised
            res = {"error": f"cache simulation failed: {e}"}
        with _LOCK:
            _CACHE_SIM[key] = res
            while len(_CACHE_SIM) > MAX_ENTRIES:
                _CACHE_SIM.popitem(last=False)
        return res


def machine_peaks() -> dict:
    """The machine's roofs for the roofline view: ``engine.roofline.machine_peaks()``
    (``peak_gflops``, ``bandwidth_gbs``, ``ridge_intensity``, ``threads``, ``cpu``, ...).

    Measured by kernels the engine compiles and runs, so with a measurer a worker does it
    (once per machine: the result is stored). Never raises: ``{"error": sentence}`` when the
    peaks cannot be measured, ``{"unavailable": sentence}`` when ``engine.roofline`` is
    missing."""
    m = active()
    if m is not None:
        return m.roofline()
    return _local_machine_peaks()


def _local_machine_peaks() -> dict:
    try:
        roofline = bridge.part("roofline")
    except bridge.NotAvailable as e:
        return {"unavailable": str(e)}
    try:
        with _TIMING:      # the peak kernels use every core: never alongside a timing run
            return dict(roofline.machine_peaks())    # (the engine caches it per process)
    except Exception as e:  # noqa: BLE001 - shown in the roofline tab, not raised
        return {"error": f"the machine's peaks could not be measured: {e}"}


def build(mod, h: str | None = None):
    """``engine.build(mod)`` with a small in-memory cache (shared with the code pane)."""
    h = h or program_hash(mod)
    with _LOCK:
        if h in _BUILDS:
            _BUILDS.move_to_end(h)
            return _BUILDS[h], 0.0
    build_fn = bridge.attr("runtime", "build")
    t0 = time.perf_counter()
    rt = build_fn(mod, target="llvm")
    dt = time.perf_counter() - t0
    with _LOCK:
        _BUILDS[h] = rt
        while len(_BUILDS) > MAX_BUILDS:
            _BUILDS.popitem(last=False)
    return rt, dt


def source(mod, kind: str = "ll-opt") -> tuple[str | None, str | None]:
    """The code pane's text: ``(LLVM IR or assembly, None)`` or ``(None, sentence)``.

    Compiled by a worker when a measurer is active; here otherwise. Raises
    :class:`app.bridge.NotAvailable` only when the backend is missing (in-process).
    """
    m = active()
    if m is not None:
        return m.source(mod, kind)
    try:
        rt, _ = build(mod)
    except bridge.NotAvailable:
        raise
    except Exception as e:  # noqa: BLE001 - shown in the pane
        return None, f"compile failed: {e}"
    try:
        return rt.get_source(kind), None
    except Exception as e:  # noqa: BLE001
        return None, f"no {kind} text: {e}"


def loop_index(func, loop) -> int | None:
    """The position of ``loop`` among ``func``'s ``For`` nodes in post-order (the same in a
    worker's unpickled copy, so a loop can be named across processes)."""
    from engine.ir import For, post_order_visit
    found: list = []
    post_order_visit(func, lambda n: found.append(n) if isinstance(n, For) else None)
    for i, n in enumerate(found):
        if n is loop:
            return i
    return None


def loop_at(func, index: int):
    """The ``For`` node at ``index`` in post-order (see :func:`loop_index`), or None."""
    from engine.ir import For, post_order_visit
    found: list = []
    post_order_visit(func, lambda n: found.append(n) if isinstance(n, For) else None)
    return found[index] if 0 <= index < len(found) else None


def access_pattern(mod, func_name: str, loop, iteration: int) -> dict:
    """``engine.cache.access_pattern(...).to_dict()`` (it builds and runs instrumented
    code: a worker does it when a measurer is active). Raises ``ValueError`` with the
    engine's sentence when there is no pattern for this loop."""
    m = active()
    if m is not None:
        idx = loop_index(mod[func_name], loop)
        if idx is None:
            raise ValueError("the loop is not part of this program")
        return m.pattern(mod, func_name, idx, iteration)
    ap = bridge.attr("cache", "access_pattern")
    with _TIMING:
        return ap(mod, func_name, loop, iteration).to_dict()


def cached(mod, workload: str | None, params: dict, func_name: str | None = None
           ) -> dict | None:
    """The stored result of :func:`measure_step` for this program, or None (never measures)."""
    m = active()
    if m is not None:
        return m.cached(mod, workload, params, func_name)
    key = (program_hash(mod), workload, tuple(sorted(params.items())))
    with _LOCK:
        return _CACHE.get(key)


def cached_cache_step(mod, func_name: str | None = None) -> dict | None:
    """The stored result of :func:`cache_step`, or None (never simulates)."""
    m = active()
    if m is not None:
        return m.cached_cache(mod, func_name)
    key = f"{program_hash(mod)}:{func_name or mod.names()[0]}"
    with _LOCK:
        return _CACHE_SIM.get(key)


def measure_step(mod, workload: str | None, params: dict, *, func_name: str | None = None,
                 baseline=None, timing_slot=None, compile_slot=None) -> dict:
    """Compile ``mod``, check its result, time it. Never raises for a bad program: failures
    are reported in the dict (``ok`` False, ``stage`` where it failed, ``error`` sentence).

    ``workload`` names a preset (its numpy reference and random inputs are used); for a
    custom program pass ``None`` and ``baseline`` (the unscheduled module): its output on the
    same random inputs is the expected result.

    With a measurer (the real server) the work is done by a worker process and this call
    waits for it. ``timing_slot`` (used inside a worker) is a context-manager factory held
    around the checked and timed runs, so that no other worker runs anything on the same
    cores meanwhile; ``compile_slot`` is held around the compile (one core, or all of them
    for a program with parallel loops, whose LLVM modules compile side by side), so a
    compile never shares a core with another worker's timing.
    """
    m = active()
    if m is not None:
        return m.measure(mod, workload, params, func_name=func_name, baseline=baseline)
    return _local_measure_step(mod, workload, params, func_name=func_name, baseline=baseline,
                               timing_slot=timing_slot, compile_slot=compile_slot)


def _local_measure_step(mod, workload, params, *, func_name=None, baseline=None,
                        timing_slot=None, compile_slot=None) -> dict:
    h = program_hash(mod)
    key = (h, workload, tuple(sorted(params.items())))
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    with _key_lock(key):
        with _LOCK:
            if key in _CACHE:
                return _CACHE[key]
        res = _measure(mod, h, workload, params, func_name, baseline, timing_slot,
                       compile_slot)
        if res.get("stage") != "unavailable":
            with _LOCK:
                _CACHE[key] = res
                while len(_CACHE) > MAX_ENTRIES:
                    _CACHE.popitem(last=False)
        return res


_PREFETCH = None


def prefetch(mod, workload: str | None, params: dict, *, func_name: str | None = None,
             baseline=None, cache: bool = True) -> None:
    """Start measuring (and cache-simulating) ``mod`` in the background.

    Called right after a step is applied, so the work is under way while the browser swaps
    the panes and asks for the measurement pane; that request then waits on the same per-key
    lock instead of starting over (with a measurer: the same job). Never raises.
    """
    global _PREFETCH
    m = active()
    if m is not None:
        m.prefetch(mod, workload, params, func_name=func_name, baseline=baseline, cache=cache)
        return
    from concurrent.futures import ThreadPoolExecutor
    with _LOCK:
        if _PREFETCH is None:
            _PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="measure-prefetch")
        pool = _PREFETCH

    def run():
        try:
            _local_measure_step(mod, workload, params, func_name=func_name, baseline=baseline)
            if cache:
                _local_cache_step(mod, func_name)
        except Exception:  # noqa: BLE001 - the pane's own request will report any failure
            pass
    pool.submit(run)


def drain_prefetch(timeout: float = 120.0) -> None:
    """Wait until the background measurements queued so far are done (tests, shutdown)."""
    with _LOCK:
        pool = _PREFETCH
    if pool is not None:
        pool.submit(lambda: None).result(timeout=timeout)


def compile_split(rt) -> dict:
    """Where a build's time went: ours (lowering + LLVM IR generation) vs llvmlite's
    (the O3 pipeline + machine code), in ms, from ``Module.compile_stats``."""
    st = getattr(rt, "compile_stats", None) or {}
    if "lower" not in st:
        return {}
    return {"compile_ours_ms": (st.get("lower", 0.0) + st.get("codegen", 0.0)) * 1e3,
            "compile_llvm_ms": (st.get("llvm_opt", 0.0) + st.get("llvm_jit", 0.0)) * 1e3}


def _result(h: str, **kw) -> dict:
    base = {"hash": h, "ok": False, "stage": "compile", "error": None, "compile_ms": None,
            "time_ms": None, "gflops": None, "numpy_ms": None, "correct": None,
            "max_abs_err": None, "detail": ""}
    base.update(kw)
    return base


def _measure(mod, h, workload, params, func_name, baseline, timing_slot=None,
             compile_slot=None) -> dict:
    import contextlib

    import numpy as np
    fname = func_name or mod.names()[0]
    try:
        with (compile_slot() if compile_slot is not None else contextlib.nullcontext()):
            rt, compile_s = build(mod, h)
    except bridge.NotAvailable as e:
        return _result(h, stage="unavailable", error=str(e))
    except Exception as e:  # noqa: BLE001 - a compile failure is shown on the step
        return _result(h, stage="compile", error=f"compile failed: {e}")
    split = compile_split(rt)
    # the program's own compile time, also when the build came from a cache
    compile_ms = split["compile_ours_ms"] + split["compile_llvm_ms"] if split else compile_s * 1e3
    out = _result(h, stage="check", compile_ms=compile_ms, **split)
    try:
        args, expected, ref_fn, ref_args = _inputs_and_expected(mod, workload, params, fname, baseline)
    except bridge.NotAvailable as e:
        out.update(error=str(e), stage="unavailable")
        return out
    except Exception as e:  # noqa: BLE001
        out.update(error=f"could not prepare inputs: {e}")
        return out
    # The checked run and the timed runs hold the timing slot (cores of their own in a
    # worker; all of them for parallel code): the checked run of a slow step is its time,
    # and a multi-second run on a shared core would halve a parallel kernel's speed.
    with (timing_slot() if timing_slot is not None else _TIMING):
        done = _check_and_time(rt, fname, out, args, expected, ref_fn, ref_args,
                               workload, params)
    if not done:
        return out
    out["stage"] = "done"
    out["ok"] = out["correct"] is not False
    del np
    return out


def _check_and_time(rt, fname, out, args, expected, ref_fn, ref_args, workload,
                    params) -> bool:
    """Check ``rt`` against the reference and time it, filling ``out``; False on failure
    (``out["error"]`` says what failed)."""
    run_args = [a.copy() for a in args]
    try:
        if expected is None:
            raise bridge.NotAvailable("a reference")
        check = bridge.attr("runtime", "check_correctness")
        rep = check(rt, fname, reference_fn=expected, args=run_args)
        first_run_s = getattr(rep, "kernel_seconds", None)
        out["correct"] = bool(rep.ok)
        out["max_abs_err"] = float(rep.max_abs_err)
        if not rep.ok:
            out["detail"] = str(rep.message) or "result differs from the reference"
    except bridge.NotAvailable:
        first_run_s = None
    except Exception as e:  # noqa: BLE001
        out.update(error=f"checking the result failed: {e}")
        return False
    out["stage"] = "time"
    try:
        threads = kernel_threads(rt)
        nkey = (workload, tuple(sorted(params.items())), threads)
        with _LOCK:
            np_s = _NUMPY.get(nkey)
        if first_run_s is not None and first_run_s > SLOW_RUN_S:
            # a slow step: its checked run is its time (more runs would only risk the
            # step time limit, and a second-long run does not need repeats)
            sec = first_run_s
            out["timed_runs"] = 1
        else:
            sec = _time(rt, fname, run_args)
        if ref_fn is not None and np_s is None:
            with blas_threads(threads):
                np_s = _time_python(lambda: ref_fn(*ref_args))
            with _LOCK:
                _NUMPY[nkey] = np_s
        out["time_ms"] = sec * 1e3
        flops = _flops(workload, params)
        if flops:
            out["gflops"] = flops / sec / 1e9
        if ref_fn is not None:
            out["numpy_ms"] = np_s * 1e3
            out["numpy_threads"] = threads
            out["numpy_note"] = numpy_threads_note(threads)
    except Exception as e:  # noqa: BLE001
        out.update(error=f"timing failed: {e}")
        return False
    return True


def _inputs_and_expected(mod, workload, params, fname, baseline):
    """Random arguments (all parameters, outputs included), a reference function over all
    arguments (for ``check_correctness``), and numpy's own function + inputs (for timing)."""
    import numpy as np
    if workload is not None:
        wl = bridge.part("workloads")
        args = [np.asarray(a) for a in wl.random_args(workload, 0, **params)]
        ref = wl.reference(workload, **params)
        n_in = bridge.field(wl.info(workload), "num_inputs", len(args) - 1)
        inputs = args[:n_in]

        def reference_fn(*arrays):
            return ref(*arrays[:n_in])
        # numpy's *time* is that of the float32 code a numpy user writes (the correctness
        # reference computes in float64, twice as slow for a matmul)
        fast = getattr(wl, "numpy_style", None)
        timed = fast(workload, **params) if fast is not None else ref
        return args, reference_fn, timed, inputs
    # a pasted program: the unscheduled program, compiled, is the reference
    func = mod[fname]
    rng = np.random.default_rng(0)
    args = []
    for p in func.params:
        shape = p.const_shape()
        if p.dtype.startswith("float"):
            args.append(rng.uniform(-1, 1, size=shape).astype(p.dtype))
        else:
            args.append(rng.integers(-8, 8, size=shape).astype(p.dtype))
    if baseline is None:
        return args, None, None, None
    brt, _ = build(baseline)

    def run_baseline(*arrays):
        brt[fname](*arrays)
        return None
    return args, run_baseline, None, None


def _time(rt, fname, args) -> float:
    """Best per-call seconds over the repeats (the engine's time evaluator when present).

    The best repeat, like numpy's reference (:func:`_time_python`): on a small shared
    machine a repeat that overlaps another worker's compile runs up to 2x slower, and the
    median of a handful of repeats still picks that up, so the two figures would not
    compare like for like."""
    te = getattr(rt, "time_evaluator", None)
    if te is not None:
        t0 = time.perf_counter()
        rt[fname](*args)
        one = max(time.perf_counter() - t0, 1e-7)
        number = max(1, min(1000, int(0.02 / one)))
        repeat = max(3, min(7, int(TARGET_SECONDS / (one * number)) or 3)) if one < 0.5 else 1
        res = te(fname, number=number, repeat=repeat)(*args)
        for attr in ("min", "median", "mean"):
            v = getattr(res, attr, None)
            if v is not None:
                return float(v)
        if isinstance(res, dict):
            return float(res.get("min", res.get("median", res.get("mean"))))
        return float(res)
    return _time_python(lambda: rt[fname](*args))


_BLAS_LOCAL = None


def _blas_local_setter():
    """OpenBLAS's per-thread ``openblas_set_num_threads_local`` from numpy's bundled BLAS
    (None when numpy uses another BLAS or an older OpenBLAS)."""
    global _BLAS_LOCAL
    if _BLAS_LOCAL is None:
        _BLAS_LOCAL = False
        try:
            import ctypes
            import glob
            import os

            import numpy as np
            libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
            for path in glob.glob(os.path.join(libdir, "*openblas*")):
                lib = ctypes.CDLL(path)
                fn = getattr(lib, "openblas_set_num_threads_local", None)
                if fn is not None:
                    fn.restype = ctypes.c_int
                    fn.argtypes = [ctypes.c_int]
                    _BLAS_LOCAL = fn
                    break
        except OSError:
            _BLAS_LOCAL = False
    return _BLAS_LOCAL or None


class blas_threads:
    """``with blas_threads(1):`` numpy's BLAS uses one thread in this thread only.

    numpy's reference is timed with as many BLAS threads as the kernel it is compared with
    uses (:func:`kernel_threads`): one for a program without ``parallel`` loops, the
    runtime pool's size otherwise (that timing holds every timing slot, so no other step
    runs meanwhile). With numpy's default threads on a small, shared machine a BLAS call
    can wait for helper threads that are busy elsewhere (a 0.04 ms matmul then took
    20-40 ms), and a serial kernel would be compared with a parallel BLAS.
    """

    def __init__(self, n: int):
        self.n = n
        self.prev = None

    def __enter__(self):
        fn = _blas_local_setter()
        if fn is not None:
            self.prev = fn(self.n)
        return self

    def __exit__(self, *exc):
        fn = _blas_local_setter()
        if fn is not None and self.prev is not None:
            fn(self.prev)
        return False


def numpy_threads_note(threads: int = 1) -> str:
    if _blas_local_setter() is None:
        return "default BLAS threads"
    return f"{threads} BLAS thread{'s' if threads != 1 else ''}"


def kernel_threads(rt) -> int:
    """How many threads the compiled program runs on: the engine's pool size when it has
    parallel loops, else 1 — numpy's reference gets as many BLAS threads (like for like)."""
    st = getattr(rt, "compile_stats", None) or {}
    if not st.get("parallel_loops"):
        return 1
    try:
        info = bridge.attr("runtime", "runtime_info")()
        return max(1, int(info.get("pool_size") or 1))
    except Exception:  # noqa: BLE001 - no pool information: all cores
        import os
        return os.cpu_count() or 1


def _time_python(fn) -> float:
    """Best per-call seconds of a Python callable (numpy's reference), timeit-style.

    numpy's BLAS runs several threads; on a loaded machine a call waits for its helper
    threads to be scheduled and can take 300x its steady-state time, so the minimum over
    repeats (after a warm-up), not the median, is the stable figure for the reference line.
    """
    t_end = time.perf_counter() + 0.05
    calls = 0
    while time.perf_counter() < t_end or calls < 3:
        fn()
        calls += 1
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, min(1000, int(0.01 / one)))
    best = float("inf")
    for _ in range(max(5, min(15, int(TARGET_SECONDS / (one * number)) or 5))):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def _flops(workload, params) -> float | None:
    if workload is None:
        return None
    try:
        wl = bridge.part("workloads")
        info = wl.info(workload)
    except Exception:  # noqa: BLE001
        return None
    f = bridge.field(info, "flops")
    try:
        if callable(f):
            return float(f(**params))
        if f is not None:
            return float(f)
    except Exception:  # noqa: BLE001
        return None
    return None
