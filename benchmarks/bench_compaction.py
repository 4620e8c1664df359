"""Effect of buffer compaction (engine/lower/compact.py) on a register-blocked matmul.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_compaction.py
    ... --sizes 512 --rows 4 --cols 16     (default: 512 and 1024, an 8x32 micro-tile)

The schedule (toolbar primitives only): ``cache_write(C, 0, "local")``; split i by
``rows`` and j by ``cols``; ``reorder(i0, j0, k, i1, j1)``; ``reverse_compute_at`` of the
write-back to ``j0``; ``vectorize(j1)``, ``unroll(i1)``, ``parallel(i0)``.

Built twice from the same schedule: lowered with compaction (the local accumulator becomes
a rows x cols tile allocated inside ``j0`` — a constant-size alloca that LLVM keeps in
registers) and with ``engine.lower.lower(..., compact=False)`` (the accumulator is the whole
n x n local buffer, allocated once at the top). Prints GFLOP/s of both and numpy's ``A @ B``
(timed in the same run, best of repeats), and the ratios. Both results are checked
against numpy first.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.runtime.timing import time_until_stable  # noqa: E402

import engine  # noqa: E402
from engine.lower import lower  # noqa: E402


def schedule(n: int, rows: int, cols: int):
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(cl, j0)
    sch.vectorize(j1)
    sch.unroll(i1)
    sch.parallel(i0)
    return sch


def best_time(fn, repeat: int, min_seconds: float = 0.2) -> float:
    """Best seconds per call by the engine's one timing function."""
    return time_until_stable(fn, warmups=1, min_repeats=max(3, repeat),
                             budget=min_seconds * repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"register-blocked matmul, micro-tile {args.rows}x{args.cols}; best of "
          f"{args.repeat}; GFLOP/s (2 n^3 / t)")
    print(f"{'n':>6} {'numpy':>9} {'compacted':>10} {'full buf':>9} {'compact/full':>13} "
          f"{'compact/numpy':>14} {'full/numpy':>11}")
    for n in args.sizes:
        sch = schedule(n, args.rows, args.cols)
        f = sch.mod["matmul"]
        mods = {"compacted": engine.build(lower(f, compact=True), lowered=True),
                "full": engine.build(lower(f, compact=False), lowered=True)}
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32) - 0.5
        b = rng.random((n, n), dtype=np.float32) - 0.5
        want = a @ b
        for name, m in mods.items():
            c = np.zeros((n, n), np.float32)
            m["matmul"](a, b, c)
            np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3,
                                       err_msg=f"{name} build is wrong")
        c = np.zeros((n, n), np.float32)
        flops = 2.0 * n ** 3
        times = {"numpy": [], "compacted": [], "full": []}
        for _ in range(2):  # interleaved, so a busy machine hurts everyone alike
            times["numpy"].append(best_time(lambda: a @ b, args.repeat))
            for name, m in mods.items():
                fn = m["matmul"]
                times[name].append(best_time(lambda: fn(a, b, c), args.repeat))
        g = {k: flops / min(v) / 1e9 for k, v in times.items()}
        print(f"{n:>6} {g['numpy']:>9.1f} {g['compacted']:>10.1f} {g['full']:>9.1f} "
              f"{g['compacted'] / g['full']:>12.2f}x {g['compacted'] / g['numpy']:>13.0%} "
              f"{g['full'] / g['numpy']:>10.0%}")


if __name__ == "__main__":
    main()
