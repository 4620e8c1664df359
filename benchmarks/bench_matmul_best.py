"""The "matmul-best" preset against numpy (OpenBLAS) at n = 1024, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_matmul_best.py
    ... --quick        (fewer repetitions, no per-step compile table)

Prints
* which BLAS numpy uses, its core type and thread count (read from the loaded OpenBLAS);
* our GFLOP/s for ``engine.presets.get("matmul-best")`` (checked against numpy first),
  numpy's GFLOP/s for ``A @ B`` measured interleaved in the same run, and the ratio
  (target of issue 9: >= 70%), also for the other matmul presets;
* where both sit on the machine's roofline (:mod:`engine.roofline`);
* scaling 1 -> 2 threads of our best matmul (and of numpy's, via OpenBLAS' own setter);
* the launch cost of an empty parallel loop (benchmarks/bench_parallel.py's kernels);
* compile latency of every step of the best trace at n = 1024: our lowering + codegen vs
  llvmlite's optimisation + machine code (``Module.compile_stats``; a parallel loop body is
  a module of its own, the modules compile side by side), and LLVM's time one module
  after the other (what one core would take).

Both sides use all cores of the machine. The machine may be shared: numpy is timed before
and after every kernel of ours and its best time is used; figures are best-of-repeats.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.runtime.timing import time_until_stable  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine  # noqa: E402
from engine import presets, roofline  # noqa: E402
from engine.runtime import as_aligned, runtime_info, set_num_threads  # noqa: E402


# ---------------------------------------------------------------------------- numpy's BLAS
class Blas:
    """numpy's OpenBLAS, found in this process' memory map (for its name, core, threads)."""

    def __init__(self) -> None:
        self.lib = None
        self.prefix = ""
        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({ln.split()[-1] for ln in maps
                                if "openblas" in ln.lower() and ".so" in ln.split()[-1]})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"),
                                   ("openblas", ""), ("scipy_openblas", "")):
                if hasattr(lib, f"{prefix}_get_num_threads{suffix}"):
                    self.lib, self.prefix, self.suffix = lib, prefix, suffix
                    break
            if self.lib is not None:
                break

    def _fn(self, name):
        return getattr(self.lib, f"{self.prefix}_{name}{self.suffix}")

    def describe(self) -> str:
        try:
            cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            name = f"{cfg.get('name')} {cfg.get('version')}"
        except Exception:  # noqa: BLE001
            name = "unknown BLAS"
        if self.lib is None:
            return f"{name} (thread count unknown)"
        core = self._fn("get_corename")
        core.restype = ctypes.c_char_p
        return (f"{name}, core kernel {core().decode()}, "
                f"{self.num_threads()} threads")

    def num_threads(self) -> int | None:
        return None if self.lib is None else int(self._fn("get_num_threads")())

    def set_num_threads(self, n: int) -> bool:
        if self.lib is None:
            return False
        self._fn("set_num_threads")(ctypes.c_int(n))
        return True


# ---------------------------------------------------------------------------- timing
def time_fn(fn, min_seconds: float, repeat: int = 5) -> float:
    """Best seconds per call by the engine's one timing function (at least ``repeat``
    repeats, at most ``min_seconds`` of them unless the best three agree sooner)."""
    return time_until_stable(fn, warmups=1, min_repeats=max(3, repeat), budget=min_seconds)


def gf(flops: float, seconds: float) -> float:
    return flops / seconds / 1e9


def bench_presets(n: int, names: list[str], budget: float) -> dict:
    rng = np.random.default_rng(0)
    a = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    b = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    c = as_aligned(np.zeros((n, n), np.float32))
    out = as_aligned(np.zeros((n, n), np.float32))
    flops = 2.0 * n ** 3
    expected = a @ b

    def np_fn():
        np.matmul(a, b, out=out)

    np_times = [time_fn(np_fn, budget)]
    rows = {}
    for name in names:
        sch = presets.get(name, n=n)
        rt = engine.build(sch.mod)
        c[...] = 0
        rt["matmul"](a, b, c)
        err = float(np.abs(c - expected).max())
        if not np.allclose(c, expected, rtol=1e-3, atol=1e-3 * n ** 0.5):
            print(f"  {name}: WRONG RESULT (max abs err {err:.3g}) — not timed")
            continue
        fn = rt["matmul"]
        rows[name] = (time_fn(lambda: fn(a, b, c), budget), rt)
        np_times.append(time_fn(np_fn, budget))
    t_np = min(np_times)
    print(f"matmul n={n}: numpy best {t_np * 1e3:.3f} ms = {gf(flops, t_np):.1f} GFLOP/s "
          f"(best of {len(np_times)} interleaved measurements)")
    print(f"  {'preset':<16} {'ms':>9} {'GFLOP/s':>9} {'numpy':>9} {'ratio':>7}")
    for name, (t, _) in rows.items():
        print(f"  {name:<16} {t * 1e3:9.3f} {gf(flops, t):9.1f} {gf(flops, t_np):9.1f} "
              f"{t_np / t:7.3f}")
    return {"rows": rows, "numpy": t_np, "args": (a, b, c), "np_fn": np_fn, "flops": flops}


def bench_scaling(res: dict, blas: Blas, budget: float) -> None:
    a, b, c = res["args"]
    flops = res["flops"]
    _, rt = res["rows"]["matmul-best"]
    fn = rt["matmul"]
    pool = runtime_info()["pool_size"]
    np_threads = blas.num_threads()
    ours, theirs = {}, {}
    for nt in sorted({1, min(2, pool)}):
        set_num_threads(nt)
        ours[nt] = time_fn(lambda: fn(a, b, c), budget)
        if blas.set_num_threads(nt):
            theirs[nt] = time_fn(res["np_fn"], budget)
    set_num_threads(pool)
    if np_threads:
        blas.set_num_threads(np_threads)
    print("thread scaling (matmul n=1024)")
    for nt in ours:
        extra = f", numpy {gf(flops, theirs[nt]):7.1f}" if nt in theirs else ""
        print(f"  {nt} thread(s): ours {gf(flops, ours[nt]):7.1f} GFLOP/s{extra}")
    if 1 in ours and 2 in ours:
        extra = f", numpy {theirs[1] / theirs[2]:.2f}x" if 2 in theirs else ""
        print(f"  1 -> 2 threads: ours {ours[1] / ours[2]:.2f}x{extra}")


def bench_launch() -> None:
    """Empty parallel loop launch cost, with benchmarks/bench_parallel.py's kernels."""
    from bench_parallel import best_of, launch_kernel
    from engine.ir import ForKind
    from engine.runtime import native
    native.load()
    count = 20000
    t = best_of(lambda: native.bench_empty_launches(count))
    outer = 20000
    par = engine.build(launch_kernel(outer, ForKind.PARALLEL), lowered=True)["launch"]
    ser = engine.build(launch_kernel(outer, ForKind.SERIAL), lowered=True)["launch"]
    o = np.zeros(2, np.int32)
    tp, ts = best_of(lambda: par(o)), best_of(lambda: ser(o))
    print("parallel launch cost (empty body, 2 iterations, pool of "
          f"{runtime_info()['pool_size']} threads)")
    print(f"  native launch loop:        {t / count * 1e6:7.2f} us per launch")
    print(f"  from compiled code:        {(tp - ts) / outer * 1e6:7.2f} us per launch")


def bench_compile(n: int, quick: bool) -> None:
    """Compile every prefix of the best trace (uncached) and split the time."""
    from engine.codegen.units import unlocked_available, usable_cores
    p = presets.info("matmul-best")
    trace = p.trace(n=n)
    insts = list(trace)
    steps = range(len(insts) + 1) if not quick else [len(insts)]
    rows = []
    for k in steps:
        sch = engine.Schedule(engine.workloads.get("matmul", n=n))
        trace.truncate(k).apply_to_schedule(sch)
        best = None
        for _ in range(3):
            s = engine.build(sch.mod, cache=False).compile_stats
            row = (s["lower"] + s["codegen"], s["llvm_opt"] + s["llvm_jit"], s["llvm_cpu"],
                   s["llvm_modules"], s["llvm_threads"])
            if best is None or row[0] + row[1] < best[0] + best[1]:
                best = row
        label = "unscheduled" if k == 0 else insts[k - 1].kind
        rows.append((k, label, *best))
    print(f"compile latency, matmul-best at n={n} (best of 3 uncached builds per step; "
          f"LLVM modules compiled side by side on {usable_cores()} cores"
          f"{'' if unlocked_available() else ' -- NOT available with this llvmlite'})")
    print(f"  {'step':>4} {'after':<20} {'ours ms':>8} {'llvm ms':>8} {'total ms':>9} "
          f"{'modules':>7} {'llvm 1-core ms':>14}")
    for k, label, o, ll, cpu, mods, _ in rows:
        print(f"  {k:>4} {label:<20} {o * 1e3:8.1f} {ll * 1e3:8.1f} {(o + ll) * 1e3:9.1f} "
              f"{mods:>7} {cpu * 1e3:14.1f}")
    worst = max(rows, key=lambda r: r[2] + r[3])
    last = rows[-1]
    print(f"  final step: {(last[2] + last[3]) * 1e3:.1f} ms (ours {last[2] * 1e3:.1f}, "
          f"llvmlite {last[3] * 1e3:.1f} on {last[6]} thread(s); one module after the other "
          f"{(last[2] + last[4]) * 1e3:.1f}); slowest step {worst[0]}: "
          f"{(worst[2] + worst[3]) * 1e3:.1f} ms; target: well under 100 ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(f"WARNING: {var}={os.environ[var]} is set, so OpenBLAS may not use its best "
                  "kernel. Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python "
                  "benchmarks/bench_matmul_best.py")
    blas = Blas()
    from engine.codegen import host_cpu
    print(f"numpy {np.__version__}, BLAS: {blas.describe()}")
    print(f"CPU {host_cpu()[0]}, {os.cpu_count()} cores; engine parallel runtime: "
          f"{runtime_info()['pool_size']} threads; load average {os.getloadavg()[0]:.2f}")
    print()
    budget = 0.3 if args.quick else 1.0
    names = [x for x in ("matmul-tiled", "matmul-best") if x in presets.names()]
    res = bench_presets(args.n, names, budget)
    print()
    pk = roofline.machine_peaks()
    print(f"roofline: peak {pk['peak_gflops']:.1f} GFLOP/s (FMA kernel, {pk['threads']} "
          f"threads), bandwidth {pk['bandwidth_gbs']:.1f} GB/s (stream copy), ridge at "
          f"{pk['ridge_intensity']:.1f} flop/byte")
    for label, t in [("numpy", res["numpy"])] + [(k, v[0]) for k, v in res["rows"].items()]:
        pt = roofline.point("matmul", {"n": args.n}, t, peaks=pk)
        print(f"  {label:<16} intensity {pt['intensity']:.1f} flop/byte, {pt['gflops']:.1f} "
              f"GFLOP/s = {pt['fraction_of_roof'] * 100:.0f}% of the {pt['bound']} roof "
              f"({pt['attainable_gflops']:.0f})")
    print()
    if "matmul-best" in res["rows"]:
        t = res["rows"]["matmul-best"][0]
        print(f"TARGET matmul-best: {res['numpy'] / t * 100:.1f}% of numpy's GFLOP/s "
              "(target >= 70%)")
        print()
        bench_scaling(res, blas, budget / 2)
        print()
    bench_launch()
    print()
    bench_compile(args.n, args.quick)


if __name__ == "__main__":
    main()
