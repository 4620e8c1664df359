"""Wide vectors: the presets sized from the target's ISA against numpy, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_wide_vectors.py
    ... --sizes 512 1024 2048 --rounds 7
    ... --tune 64          (also the tuner's mm_relu 1024: auto space, 64 trials)

Prints the machine's vector ISA (``engine.codegen.isa.isa_of``: lanes, registers, caches)
and the BLAS numpy runs (OpenBLAS's core kernel, threads); then, for each size, the
presets whose tiles and register blocks come from that ISA — ``matmul-best``,
``mm_relu-best``, ``matmul-tiled``, ``mm_relu-tiled`` — each checked against numpy, then
timed in ``--rounds`` rounds, each round numpy / ours / numpy (the faster numpy of the two
counts), each timing after a rest of 0.2 s and one untimed call (OpenBLAS's threads spin
on the cores for a while after a call: timed right after numpy, our kernel shared its
cores with them and ran at half speed). Reported: the medians of our GFLOP/s and numpy's, and the
median of the per-round ratios (numpy time / ours: above 1.0 we are faster), with the
spread. The machine may be shared by other work: the ratio of a round is measured within
a few hundred milliseconds, which is what makes it comparable.

With ``--tune N``: ``engine.tune.tune`` on mm_relu 1024 (``auto`` space, evolutionary, N
trials, seed 0), its best trace re-timed in the same rounds as the presets.

With ``--cpu-time``: one thread on both sides (the engine's pool and OpenBLAS set to 1
thread) and the process's CPU time instead of the wall clock: per-core GFLOP/s that a
machine loaded by other work changes little (a busy machine takes cores away from both
sides unevenly, wall-clock rounds then swing by 2x; CPU seconds do not count the time a
thread waits for a core). Both sides scale about alike to 2 threads (1.9x each).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import blas_info, one_thread_cpu_clock  # noqa: E402

import engine  # noqa: E402
from engine import presets  # noqa: E402
from engine.codegen.isa import isa_of  # noqa: E402
from engine.runtime import as_aligned  # noqa: E402
from engine.runtime.timing import time_until_stable  # noqa: E402

PRESETS = ("matmul-best", "mm_relu-best", "matmul-tiled", "mm_relu-tiled")


CLOCK = time.perf_counter


#: seconds of rest before each timing: OpenBLAS's threads keep spinning on the cores for
#: tens of milliseconds after a call (and would be timed as part of ours), as the
#: engine's pool briefly does after its own
REST = 0.2


def per_call(fn, calls: int) -> float:
    """Best seconds per call after a rest, by the engine's one timing function (repeats
    until the best three agree; ``calls`` is kept for the report's header). With the CPU
    clock (``--cpu-time``: one thread each) a batch of calls is timed as before."""
    time.sleep(REST)
    fn()
    if CLOCK is not time.perf_counter:
        t0 = CLOCK()
        for _ in range(calls):
            fn()
        return (CLOCK() - t0) / calls
    return time_until_stable(fn, budget=1.0)


def tuned_schedule(n: int, trials: int):
    """The tuner's best schedule of mm_relu n (auto space, evolutionary, seed 0)."""
    from engine.schedule.recorded_trace import Trace
    from engine.tune import tune
    res = tune(("mm_relu", {"n": n}), space="auto", trials=trials, seed=0)
    if res.best is None:
        return None
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n))
    Trace.from_json(res.best.trace).apply_to_schedule(sch)
    return sch


def bench(n: int, rounds: int, tune_trials: int) -> None:
    rng = np.random.default_rng(0)
    a = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    b = as_aligned(rng.random((n, n), dtype=np.float32) - 0.5)
    c = as_aligned(np.zeros((n, n), np.float32))
    out = as_aligned(np.zeros((n, n), np.float32))
    want = a @ b
    cases = []
    for name in PRESETS:
        cases.append((name, presets.get(name, n=n)))
    if tune_trials and n == 1024:
        sch = tuned_schedule(n, tune_trials)
        if sch is not None:
            cases.append((f"tuned mm_relu ({tune_trials} trials)", sch))
    runs = []
    for label, sch in cases:
        func = "mm_relu" if "mm_relu" in label else "matmul"
        rt = engine.build(sch.mod)
        f = rt[func]
        c[...] = 0
        f(a, b, c)
        ref = np.maximum(want, 0) if func == "mm_relu" else want
        if not np.allclose(c, ref, rtol=1e-3, atol=1e-3 * n ** 0.5):
            print(f"  {label}: WRONG RESULT (max abs err {np.abs(c - ref).max():.3g}) — "
                  "not timed")
            continue
        if func == "mm_relu":
            def np_fn():
                np.maximum(np.matmul(a, b, out=out), 0, out=out)
        else:
            def np_fn():
                np.matmul(a, b, out=out)
        runs.append((label, lambda f=f: f(a, b, c), np_fn))
    calls = max(1, int(4e8 / n ** 3))
    flops = 2.0 * n ** 3
    print(f"n={n}  ({calls} calls per timing, {rounds} rounds)")
    print(f"  {'schedule':<30} {'GFLOP/s':>8} {'numpy':>8} {'ratio':>7}  spread")
    for label, ours, np_fn in runs:
        ours()
        np_fn()
        g, ng, ratios = [], [], []
        for _ in range(rounds):
            t1 = per_call(np_fn, calls)
            t = per_call(ours, calls)
            t2 = per_call(np_fn, calls)
            tn = min(t1, t2)
            g.append(flops / t / 1e9)
            ng.append(flops / tn / 1e9)
            ratios.append(tn / t)
        print(f"  {label:<30} {np.median(g):>8.1f} {np.median(ng):>8.1f} "
              f"{np.median(ratios):>6.2f}x  {min(ratios):.2f}..{max(ratios):.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tune", type=int, default=0, metavar="TRIALS")
    ap.add_argument("--cpu-time", action="store_true",
                    help="one thread each, timed by the process's CPU time")
    args = ap.parse_args()
    import os
    global CLOCK
    if args.cpu_time:
        CLOCK = one_thread_cpu_clock()
    print(f"target: {isa_of().describe()}")
    print(f"numpy {np.__version__}, BLAS: {blas_info()}; load average "
          f"{os.getloadavg()[0]:.2f}")
    for n in args.sizes:
        bench(n, args.rounds, args.tune)


if __name__ == "__main__":
    main()
