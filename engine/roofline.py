"""Roofline model of this machine, measured with kernels this engine compiles.

The roofline (Williams, Waterman & Patterson, 2009) bounds a program's speed by
``min(peak GFLOP/s, bandwidth GB/s x arithmetic intensity)``, where the arithmetic
intensity is flops per byte of compulsory memory traffic. Both roofs are *measured* here,
once per process (cached), by two kernels written as engine TVMScript, parsed with
:func:`engine.parse` and compiled by :func:`engine.build`:

* ``fma_peak``: every thread keeps ``ROWS`` independent 16-lane accumulators in registers
  and updates each with ``y = y * x + x`` (one fused multiply-add, 2 flops per lane)
  ``iters`` times — enough independent chains to hide the FMA latency, so the loop runs at
  the core's FMA throughput. The outer loop is ``T.parallel`` over all pool threads.
* ``stream_copy``: ``B[i] = A[i]`` over two arrays much larger than the last-level cache,
  vectorized, parallel over chunks; bandwidth counts the bytes read plus the bytes written.

Public API (for the web app's measurement pane)::

    engine.roofline.machine_peaks()    # {"peak_gflops", "bandwidth_gbs", "ridge_intensity", ...}
    engine.roofline.point("matmul", {"n": 1024}, seconds)   # where one measured run sits
    engine.roofline.intensity("matmul", {"n": 1024})        # flops / minimum bytes

Only measurements of the running machine are used; nothing is hard-coded.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from engine import workloads
from engine.runtime import as_aligned, build, runtime_info
from engine.runtime.timing import time_until_stable
from engine.script import parse

__all__ = ["machine_peaks", "point", "intensity", "flops_bytes", "roof_curve",
           "measure_peak_gflops", "measure_bandwidth_gbs", "fma_kernel_text",
           "copy_kernel_text", "RooflineError"]

#: independent accumulator vectors per thread in the FMA kernel (x 16 lanes)
ROWS = 12
LANES = 16


class RooflineError(ValueError):
    """A bad argument to the roofline functions (the message says what to pass)."""


def fma_kernel_text(threads: int, iters: int, rows: int = ROWS, lanes: int = LANES) -> str:
    """TVMScript of the FMA-throughput kernel (``2 * threads * iters * rows * lanes`` flops)."""
    return f'''
@T.prim_func
def fma_peak(X: T.Buffer(({threads}, {rows}, {lanes}), "float32"),
             Y: T.Buffer(({threads}, {rows}, {lanes}), "float32")):
    T.func_attr({{"global_symbol": "fma_peak", "tir.noalias": True}})
    for p in T.parallel({threads}):
        for c in T.serial({iters}):
            for r in T.unroll({rows}):
                for l in T.vectorized({lanes}):
                    Y[p, r, l] = Y[p, r, l] * X[p, r, l] + X[p, r, l]
'''


def copy_kernel_text(chunks: int, chunk: int, lanes: int = LANES) -> str:
    """TVMScript of the streaming copy of ``chunks * chunk * lanes`` float32."""
    return f'''
@T.prim_func
def stream_copy(A: T.Buffer(({chunks}, {chunk}, {lanes}), "float32"),
                B: T.Buffer(({chunks}, {chunk}, {lanes}), "float32")):
    T.func_attr({{"global_symbol": "stream_copy", "tir.noalias": True}})
    for p in T.parallel({chunks}):
        for i in T.serial({chunk}):
            for l in T.vectorized({lanes}):
                B[p, i, l] = A[p, i, l]
'''


_lock = threading.Lock()
_cached: dict | None = None


def _best_time(fn, args, repeat: int) -> float:
    """Best seconds of ``fn(*args)`` by the engine's one timing function (a warm-up run —
    page faults, the thread pool —, then at least ``repeat`` repeats)."""
    return time_until_stable(lambda: fn(*args), min_repeats=max(3, repeat))


def measure_peak_gflops(threads: int | None = None, iters: int = 1_000_000,
                        repeat: int = 25) -> dict:
    """Run the FMA kernel; returns ``{"gflops", "seconds", "flops", "threads"}``."""
    threads = int(threads or runtime_info()["pool_size"])
    rt = build(parse(fma_kernel_text(threads, iters)))
    # x slightly below 1 and y near 0 keep y bounded (y -> x/(1-x)) and never denormal
    x = np.full((threads, ROWS, LANES), 0.5, np.float32)
    y = np.zeros((threads, ROWS, LANES), np.float32)
    t = _best_time(rt["fma_peak"], (x, y), repeat)
    if not np.all(np.isfinite(y)):
        raise RuntimeError("the FMA peak kernel produced non-finite values")
    flops = 2.0 * threads * iters * ROWS * LANES
    return {"gflops": flops / t / 1e9, "seconds": t, "flops": flops, "threads": threads}


def measure_bandwidth_gbs(megabytes: int = 64, repeat: int = 10) -> dict:
    """Run the streaming copy on two arrays of ``megabytes`` MiB each (far above the L3
    size); returns ``{"gbs", "seconds", "bytes"}`` with bytes = read + written."""
    floats = megabytes * (1 << 20) // 4
    chunks = max(16, 8 * int(runtime_info()["pool_size"]))
    chunk = max(1, floats // (chunks * LANES))
    rt = build(parse(copy_kernel_text(chunks, chunk)))
    a = as_aligned(np.ones((chunks, chunk, LANES), np.float32))
    b = as_aligned(np.zeros((chunks, chunk, LANES), np.float32))
    t = _best_time(rt["stream_copy"], (a, b), repeat)
    if not (b[0, 0, 0] == 1.0 and b[-1, -1, -1] == 1.0):
        raise RuntimeError("the streaming copy kernel did not copy")
    nbytes = 2.0 * a.nbytes
    return {"gbs": nbytes / t / 1e9, "seconds": t, "bytes": nbytes}


def machine_peaks(refresh: bool = False) -> dict:
    """The machine's measured roofs, cached for the process (``refresh=True`` re-measures).

    Each roof is the best of many short runs (a few ms each), so a busy moment on a shared
    machine does not lower it much; still, a later run can beat a roof measured under load
    (then :func:`point` reports ``fraction_of_roof`` > 1): ``refresh=True`` re-measures.

    Returns ``{"peak_gflops": float, "bandwidth_gbs": float, "ridge_intensity": float
    (flops/byte where the two roofs meet), "threads": int, "cpu": str, "measured_at": float
    (time.time()), "fma": {...}, "copy": {...}}``.
    """
    global _cached
    with _lock:
        if _cached is None or refresh:
            from engine.codegen import host_cpu
            fma = measure_peak_gflops()
            copy = measure_bandwidth_gbs()
            _cached = {
                "peak_gflops": fma["gflops"],
                "bandwidth_gbs": copy["gbs"],
                "ridge_intensity": fma["gflops"] / copy["gbs"],
                "threads": fma["threads"],
                "cpu": host_cpu()[0],
                "measured_at": time.time(),
                "fma": fma,
                "copy": copy,
            }
        return dict(_cached)


def flops_bytes(workload: str, params: dict | None = None) -> tuple[float, float, dict]:
    """``(flops, minimum bytes, full parameters)`` of a workload (defaults filled in)."""
    if not isinstance(workload, str):
        raise RooflineError(f"workload must be a workload name (one of "
                            f"{', '.join(workloads.names())}), got {workload!r}")
    if workload not in workloads.names():
        raise RooflineError(f"unknown workload {workload!r}; use one of "
                            f"{', '.join(workloads.names())}")
    if params is not None and not isinstance(params, dict):
        raise RooflineError(f"params must be a dict like {{'n': 1024}}, got {params!r}")
    info = workloads.info(workload)
    p = dict(info.defaults)
    p.update(params or {})
    for k, v in (info.follows or {}).items():  # e.g. matmul's m and k follow n
        if k not in (params or {}):
            p[k] = p[v]
    bad = sorted(set(params or {}) - set(info.defaults))
    if bad:
        raise RooflineError(f"workload {workload!r} has no parameter {', '.join(bad)}; its "
                            f"parameters are {', '.join(sorted(info.defaults))}")
    flops = float(info.flops(**p))
    nbytes = float(info.bytes(**p))
    if flops <= 0 or nbytes <= 0:
        raise RooflineError(f"workload {workload!r} reports no flops or no bytes for {p}")
    return flops, nbytes, p


def intensity(workload: str, params: dict | None = None) -> float:
    """Arithmetic intensity: flops / minimum bytes moved (inputs read once, outputs written
    once), from :func:`workloads.info`."""
    flops, nbytes, _ = flops_bytes(workload, params)
    return flops / nbytes


def point(workload: str, params: dict | None, seconds: float,
          peaks: dict | None = None) -> dict:
    """Where one run of ``workload`` (with ``params``) that took ``seconds`` sits.

    Returns ``{"workload", "params", "flops", "bytes", "intensity" (flop/byte), "gflops"
    (achieved), "attainable_gflops" (the roof at this intensity), "bound": "memory" |
    "compute", "fraction_of_roof" (achieved / attainable), "peak_gflops", "bandwidth_gbs"}``.
    ``peaks`` defaults to :func:`machine_peaks` (measured on first use).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
            not np.isfinite(seconds) or seconds <= 0:
        raise RooflineError(f"seconds must be a positive number (the measured run time), "
                            f"got {seconds!r}")
    flops, nbytes, p = flops_bytes(workload, params)
    pk = peaks if peaks is not None else machine_peaks()
    ai = flops / nbytes
    memory_roof = pk["bandwidth_gbs"] * ai
    attainable = min(pk["peak_gflops"], memory_roof)
    achieved = flops / seconds / 1e9
    return {
        "workload": workload, "params": p, "flops": flops, "bytes": nbytes,
        "intensity": ai, "gflops": achieved, "attainable_gflops": attainable,
        "bound": "memory" if memory_roof < pk["peak_gflops"] else "compute",
        "fraction_of_roof": achieved / attainable,
        "peak_gflops": pk["peak_gflops"], "bandwidth_gbs": pk["bandwidth_gbs"],
    }


def roof_curve(peaks: dict | None = None, lo: float = 1 / 16, hi: float = 1024,
               points: int = 64) -> dict[str, Any]:
    """Points of the roof for plotting on log axes: ``{"intensity": [...], "gflops": [...]}``."""
    pk = peaks if peaks is not None else machine_peaks()
    xs = np.geomspace(lo, hi, points)
    ys = np.minimum(pk["peak_gflops"], pk["bandwidth_gbs"] * xs)
    return {"intensity": xs.tolist(), "gflops": ys.tolist()}
