"""Kernel speed and compile time of the LLVM backend, against numpy in the same run.

Run it with OpenBLAS' tuning variables unset (they may be set in this environment and make
numpy slower than it really is, which would flatter our ratios)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_kernels.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_kernels.py --sizes 128 512

For mm_relu (Y = A @ B, C = max(Y, 0)) at n = 128, 512, 1024 and for a conv2d it prints,
per schedule — the unscheduled program ("naive"), the course's schedule ("course": split j
by 4, reorder j0, k, j1, reverse_compute_at C under j0, decompose_reduction), the
mm_relu-tiled preset (tiles and register block sized from the machine's ISA — 64 columns
and 4 rows unrolled on AVX-512, the reduction in panels — inner columns vectorized, outer
loop parallel: "tiled")
and the mm_relu-best preset — our GFLOP/s, numpy's GFLOP/s for the same computation
measured in the same run, the ratio, and the compile time split into ours (lower +
codegen) and llvmlite's (O3 optimisation + JIT). Every kernel is checked against numpy
before it is timed. Then the parallel scaling of the tiled 1024 matmul (1 -> 2 threads).

Targets (issue 3): a 128 mm_relu course step compiles in < 40 ms; tiled 1024 >= 30% of
numpy's GFLOP/s; parallel >= 1.7x on 2 cores. The machine is shared: run it when idle.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import blas_info  # noqa: E402

from engine.runtime.timing import time_until_stable  # noqa: E402

import engine  # noqa: E402
from engine.runtime import as_aligned, runtime_info, set_num_threads  # noqa: E402


# ---------------------------------------------------------------------------- schedules
def course_schedule(n: int):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n))
    y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
    sch.decompose_reduction(y, k)
    return sch.mod


def tiled_schedule(n: int):
    """The mm_relu-tiled preset: tiles and register block sized from the machine's ISA
    (``engine.presets.library``: on AVX-512, 256-row x 64-column tiles, the reduction in
    256-long panels, 4 rows x 4 vectors of 16 accumulated per k, rows in parallel)."""
    return engine.presets.get("mm_relu-tiled", n=n).mod


CONV = dict(batch=1, in_channels=64, out_channels=64, size=56, kernel=3, pad=1, stride=1)


def conv_tiled_schedule(p=CONV):
    """conv: fuse (n, co) -> parallel; reduction ci, kh, kw outside the vectorized ow."""
    sch = engine.Schedule(engine.workloads.get("conv2d", **p))
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    sch.reorder(n, co, oh, ci, kh, kw, ow)
    sch.decompose_reduction(conv, ci)
    sch.vectorize(ow)
    f = sch.fuse(n, co)
    sch.parallel(f)
    pad = sch.get_block("pad", func_name="conv2d")
    pn, pc, ph, pw = sch.get_loops(pad)
    sch.parallel(sch.fuse(pn, pc))
    return sch.mod


# ---------------------------------------------------------------------------- timing
def time_numpy(fn, min_seconds: float = 0.2, repeat: int = 3) -> float:
    """Best seconds per call by the engine's one timing function, at most ``min_seconds``
    of repeats (it stops sooner once the best three agree)."""
    return time_until_stable(fn, warmups=1, min_repeats=max(3, repeat), budget=min_seconds)


def time_ours(rt, name, args, min_seconds: float = 0.2) -> float:
    """The kernel's best seconds per call (arguments checked once), timed as numpy is."""
    f = rt[name]
    ptrs = f.pointers(tuple(args))        # ``args`` stay alive while timed
    return time_until_stable(lambda: f.call_pointers(ptrs), warmups=1, budget=min_seconds)


def compile_split(mod, times: int = 3) -> tuple:
    """Build ``times`` times (no cache); the fastest of each part in ms: ours, llvmlite's."""
    ours, llvm = [], []
    for _ in range(times):
        rt = engine.build(mod, cache=False)
        s = rt.compile_stats
        ours.append((s["lower"] + s["codegen"]) * 1e3)
        llvm.append((s["llvm_opt"] + s["llvm_jit"]) * 1e3)
    return rt, min(ours), min(llvm)


def row(label, gflops, np_gflops, ours_ms, llvm_ms):
    print(f"  {label:<22} {gflops:9.2f} {np_gflops:9.2f} {gflops / np_gflops:8.3f} "
          f"{ours_ms:9.1f} {llvm_ms:9.1f} {ours_ms + llvm_ms:9.1f}")


def header():
    print(f"  {'schedule':<22} {'GFLOP/s':>9} {'numpy':>9} {'ratio':>8} "
          f"{'ours ms':>9} {'llvm ms':>9} {'total ms':>9}")


def bench_mm_relu(n: int, results: dict) -> None:
    rng = np.random.default_rng(0)
    # 64-byte aligned arrays (engine.runtime.as_aligned) for both us and numpy
    a = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    b = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    c = as_aligned(np.zeros((n, n), np.float32))
    flops = 2.0 * n ** 3 + n * n
    out = np.empty((n, n), np.float32)
    def np_fn():
        return np.maximum(np.matmul(a, b, out=out), 0, out=out)
    # numpy is timed before every schedule and its best time is used (the machine is
    # shared: the best of several measurements is the least disturbed one)
    np_times = [time_numpy(np_fn)]
    expected = np.maximum(a @ b, 0)
    rows = []
    schedules = [("naive", lambda: engine.workloads.get("mm_relu", n=n)),
                 ("course", lambda: course_schedule(n)),
                 ("tiled+vec+parallel", lambda: tiled_schedule(n)),
                 ("mm_relu-best preset", lambda: engine.presets.get("mm_relu-best", n=n).mod)]
    for label, make in schedules:
        mod = make()
        rt, ours_ms, llvm_ms = compile_split(mod)
        c[...] = 0
        rt["mm_relu"](a, b, c)
        if not np.allclose(c, expected, rtol=1e-3, atol=1e-3 * n ** 0.5):
            rows.append((label, None, np.abs(c - expected).max(), 0, 0, rt))
            continue
        budget = 0.05 if label == "naive" and n >= 1024 else 0.3
        t = time_ours(rt, "mm_relu", (a, b, c), min_seconds=budget)
        rows.append((label, flops / t / 1e9, 0.0, ours_ms, llvm_ms, rt))
        np_times.append(time_numpy(np_fn))
    np_t = min(np_times)
    np_g = flops / np_t / 1e9
    print(f"mm_relu n={n}  (numpy: best {np_t * 1e3:.3f} ms of {len(np_times)} measurements)")
    header()
    for label, g, err, ours_ms, llvm_ms, rt in rows:
        if g is None:
            print(f"  {label}: WRONG RESULT (max err {err:.3g})")
            continue
        row(label, g, np_g, ours_ms, llvm_ms)
        results[(n, label)] = (g, np_g, ours_ms, llvm_ms, rt)


def bench_conv(results: dict) -> None:
    p = CONV
    name = "conv2d"
    args = [as_aligned(x) for x in engine.workloads.random_args(name, **p)]
    data, weight, out = args
    ref = engine.workloads.reference(name, **p)
    expected = ref(data, weight)
    info = engine.workloads.info(name)
    flops = info.flops(**p) if callable(info.flops) else 2.0 * 64 * 64 * 56 * 56 * 9
    K, pad = p["kernel"], p["pad"]

    def np_conv():  # im2col + BLAS, float32
        x = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        win = np.lib.stride_tricks.sliding_window_view(x, (K, K), axis=(2, 3))
        return np.tensordot(win, weight, axes=([1, 4, 5], [1, 2, 3]))
    np_times = [time_numpy(np_conv)]
    rows = []
    for label, make in [("naive", lambda: engine.workloads.get(name, **p)),
                        ("tiled+vec+parallel", lambda: conv_tiled_schedule(p))]:
        rt, ours_ms, llvm_ms = compile_split(make())
        out[...] = 0
        rt[name](data, weight, out)
        if not np.allclose(out, expected, rtol=1e-3, atol=1e-3):
            rows.append((label, None, np.abs(out - expected).max(), 0, 0))
            continue
        t = time_ours(rt, name, (data, weight, out))
        rows.append((label, flops / t / 1e9, 0.0, ours_ms, llvm_ms))
        np_times.append(time_numpy(np_conv))
    np_t = min(np_times)
    np_g = flops / np_t / 1e9
    print(f"conv2d {p}  (numpy im2col+BLAS: best {np_t * 1e3:.3f} ms)")
    header()
    for label, g, err, ours_ms, llvm_ms in rows:
        if g is None:
            print(f"  {label}: WRONG RESULT (max err {err:.3g})")
            continue
        row(label, g, np_g, ours_ms, llvm_ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 512, 1024])
    ap.add_argument("--no-conv", action="store_true")
    args = ap.parse_args()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(f"WARNING: {var}={os.environ[var]} is set; numpy may be slower than usual. "
                  "Run with: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python "
                  "benchmarks/bench_kernels.py")
    from engine.codegen import host_cpu
    print(f"numpy {np.__version__}, BLAS: {blas_info()}")
    from engine.codegen.isa import isa_of
    print(f"CPU {host_cpu()[0]}, parallel runtime: {runtime_info()['pool_size']} threads, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"target: {isa_of().describe()}")
    print()
    engine.build(engine.workloads.get("mm_relu", n=16), cache=False)  # warm-up (imports, runtime)
    results: dict = {}
    for n in args.sizes:
        bench_mm_relu(n, results)
        print()
    if not args.no_conv:
        bench_conv(results)
        print()

    print("targets")
    if (128, "course") in results:
        _, _, o, l, _ = results[(128, "course")]
        print(f"  compile of the 128 mm_relu course step: {o + l:.1f} ms "
              f"(ours {o:.1f} + llvmlite {l:.1f}); target < 40 ms")
    big = max(args.sizes) if args.sizes else None
    if big is not None and (big, "tiled+vec+parallel") in results:
        g, npg, _, _, rt = results[(big, "tiled+vec+parallel")]
        print(f"  tiled+vec+parallel n={big}: {g / npg * 100:.1f}% of numpy's GFLOP/s; "
              "target >= 30%")
        rng = np.random.default_rng(1)
        a = as_aligned(rng.random((big, big), dtype=np.float32))
        b = as_aligned(rng.random((big, big), dtype=np.float32))
        c = as_aligned(np.zeros((big, big), np.float32))
        pool = runtime_info()["pool_size"]
        times = {}
        for nt in sorted({1, min(2, pool)}):
            set_num_threads(nt)
            times[nt] = time_ours(rt, "mm_relu", (a, b, c))
        set_num_threads(pool)
        if 2 in times:
            print(f"  parallel scaling n={big}: 1 thread {2 * big ** 3 / times[1] / 1e9:.1f} "
                  f"GFLOP/s, 2 threads {2 * big ** 3 / times[2] / 1e9:.1f} GFLOP/s -> "
                  f"{times[1] / times[2]:.2f}x; target >= 1.7x")


if __name__ == "__main__":
    main()
