"""What the explorer's click-time GPU check costs (app.web.gpu_refusals): the shared memory
per block of every state's kernels read by ``engine.gpu.footprint.shared_footprints``,
against, in the same run, the step's own primitive (replayed on the state before it) and
the whole GPU lowering ``lower_gpu`` (what the check replaces in the web process).

Every state of the course's GPU chapter schedules (vector add, window sum, GEMM local and
shared blocking) at the chapter's size, each timed as the median of ``--repeat`` runs.

    python benchmarks/bench_gpu_click_check.py [--n 1024] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.gpu.footprint import shared_footprints  # noqa: E402
from engine.gpu.lower import lower_gpu  # noqa: E402
from engine.presets import gpu_chapter  # noqa: E402
from engine.schedule import Schedule, Trace  # noqa: E402

TARGET = "cuda -model=h100-sxm"


def median_ms(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def states(name: str, n: int):
    """(k, the step's primitive, the program before, the trace's first k steps)."""
    make, _ = gpu_chapter.PROGRAMS[name]
    full = make(n)
    insts = [i for i in full.trace.insts if i.kind not in ("GetBlock", "GetLoops")]
    prog = {"vector_add": gpu_chapter.vector_add_program,
            "window_sum": gpu_chapter.window_sum_program}.get(name, gpu_chapter.matmul_program)
    for k in range(1, len(full.trace.insts) + 1):
        inst = full.trace.insts[k - 1]
        if inst not in insts:
            continue
        yield k, inst.kind, prog(n), Trace(full.trace.insts[:k])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    print(f"the click-time GPU check (shared_footprints) per state of the chapter's schedules, "
          f"n={a.n}, {TARGET}; load average {os.getloadavg()[0]:.2f}")
    for name in gpu_chapter.PROGRAMS:
        rows = []
        for k, kind, mod0, trace in states(name, a.n):
            before = Schedule(mod0)
            Trace(trace.insts[:-1]).apply_to_schedule(before)

            def step():
                sch = Schedule(mod0)
                trace.apply_to_schedule(sch)
                return sch
            after = step().mod
            check = median_ms(lambda: shared_footprints(after, TARGET), a.repeat)
            replay = median_ms(step, max(3, a.repeat // 2))
            try:
                lower = median_ms(lambda: lower_gpu(after, TARGET), 3)
            except Exception:  # noqa: BLE001 - not a buildable kernel yet
                lower = None
            rows.append((k, kind, check, replay, lower))
        checks = [r[2] for r in rows]
        print(f"\n{name}: {len(rows)} steps; check p50 {statistics.median(checks):.2f} ms, "
              f"max {max(checks):.2f} ms")
        print(f"  {'step':>4} {'primitive':<22} {'check ms':>9} {'replay ms':>10} "
              f"{'lower_gpu ms':>13} {'check/lower':>12}")
        for k, kind, check, replay, lower in rows:
            ratio = f"{check / lower:.2f}" if lower else "–"
            low = f"{lower:.1f}" if lower else "not a kernel"
            print(f"  {k:>4} {kind:<22} {check:>9.2f} {replay:>10.1f} {low:>13} {ratio:>12}")


if __name__ == "__main__":
    main()
