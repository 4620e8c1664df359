"""Parallel runtime: launch overhead and scaling.

    python benchmarks/bench_parallel.py

Prints
* the cost of one empty parallel launch, measured three ways: back-to-back launches inside
  the native runtime, launches from JIT-compiled code (a serial loop around an empty
  ``parallel`` loop, minus the same program with a serial inner loop), and the cost of
  calling a compiled kernel from Python (argument checks + ctypes);
* the scaling 1 -> 2 threads of the tiled+vectorized+parallel 1024 matmul (target 1.7x).
The machine is shared: figures are only meaningful when it is otherwise idle.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.runtime.timing import time_until_stable  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine  # noqa: E402
from engine.ir import Buffer, BufferStore, For, ForKind, PrimFunc, Var, const  # noqa: E402
from engine.runtime import native, runtime_info, set_num_threads  # noqa: E402


def launch_kernel(outer: int, kind: ForKind) -> PrimFunc:
    """for r in serial(outer): for t in <kind>(2): Out[t] = r   (a lowered program)."""
    out = Buffer("Out", (2,), "int32")
    r, t = Var("r"), Var("t")
    body = For(r, const(0), const(outer), ForKind.SERIAL,
               For(t, const(0), const(2), kind, BufferStore(out, r, (t,))))
    return PrimFunc("launch", (out,), body, (("lowered", True),))


def work_kernel(outer: int, work: int, kind: ForKind) -> PrimFunc:
    """for r in serial(outer): for t in <kind>(2): for w in serial(work): Out[t] = tid()
    (each chunk calls the runtime `work` times, ~2 ns each, so both threads take part)."""
    from engine.ir import Call, StringImm
    out = Buffer("Out", (2,), "int32")
    r, t, w = Var("r"), Var("t"), Var("w")
    tid = Call("int32", "call_extern", (StringImm("engine_runtime_thread_index"),))
    body = For(r, const(0), const(outer), ForKind.SERIAL,
               For(t, const(0), const(2), kind,
                   For(w, const(0), const(work), ForKind.SERIAL, BufferStore(out, tid, (t,)))))
    return PrimFunc("work", (out,), body, (("lowered", True),))


def best_of(fn, repeat=5) -> float:
    """Best seconds per call by the engine's one timing function."""
    return time_until_stable(fn, min_repeats=max(3, repeat))


def main() -> None:
    native.load()
    info = runtime_info()
    print(f"parallel runtime: native={info['native']}, pool of {info['pool_size']} threads, "
          f"load average {os.getloadavg()[0]:.2f}")
    count = 20000
    t = best_of(lambda: native.bench_empty_launches(count))
    print(f"empty launch, native loop:        {t / count * 1e6:8.2f} us per launch")

    outer = 20000
    par = engine.build(launch_kernel(outer, ForKind.PARALLEL), lowered=True)["launch"]
    ser = engine.build(launch_kernel(outer, ForKind.SERIAL), lowered=True)["launch"]
    out = np.zeros(2, np.int32)
    tp = best_of(lambda: par(out))
    ts = best_of(lambda: ser(out))
    print(f"empty launch, from compiled code: {(tp - ts) / outer * 1e6:8.2f} us per launch")

    # a launch in which both threads really work: 2 chunks of ~10 us each
    outer, work = 2000, 5000
    wp = engine.build(work_kernel(outer, work, ForKind.PARALLEL), lowered=True)["work"]
    ws = engine.build(work_kernel(outer, work, ForKind.SERIAL), lowered=True)["work"]
    t_par = best_of(lambda: wp(out), 3)
    t_ser = best_of(lambda: ws(out), 3)
    print(f"launch with 2 x {t_ser / outer / 2 * 1e6:.1f} us chunks: {t_par / outer * 1e6:.2f} us "
          f"(serial {t_ser / outer * 1e6:.2f} us) -> overhead "
          f"{(t_par - t_ser / 2) / outer * 1e6:.2f} us per launch, speed-up {t_ser / t_par:.2f}x")

    calls = 20000
    empty = engine.build(launch_kernel(0, ForKind.SERIAL), lowered=True)["launch"]
    tc = best_of(lambda: [empty(out) for _ in range(calls)])
    print(f"Python -> kernel call (checks):   {tc / calls * 1e6:8.2f} us per call")

    from bench_kernels import tiled_schedule
    n = 1024
    rt = engine.build(tiled_schedule(n))
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    times = {}
    for nt in sorted({1, min(2, info["pool_size"])}):
        set_num_threads(nt)
        times[nt] = rt.time_evaluator("mm_relu", number=5, repeat=3)(a, b, c).min
        print(f"tiled 1024 matmul, {nt} thread(s): {2 * n ** 3 / times[nt] / 1e9:8.1f} GFLOP/s")
    set_num_threads(info["pool_size"])
    if 2 in times:
        print(f"scaling 1 -> 2 threads: {times[1] / times[2]:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
