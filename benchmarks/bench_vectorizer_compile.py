"""Compile time of the gallery's programs with and without LLVM's loop vectorizer on
the loops the schedule left unvectorized (the explorer recompiles on every click).

    python benchmarks/bench_vectorizer_compile.py            # every step of every CPU preset
    python benchmarks/bench_vectorizer_compile.py --quick    # each preset's first and last step

For every CPU preset of ``engine.presets`` at its own sizes, each step's program (the
unscheduled program, then the trace applied one instruction more at a time: what a learner
clicking through it compiles) is built uncached in three variants, interleaved so that
all see the same machine load:

* ``before``  — LLVM's loop vectorizer only on the loops the code generator asks for
  (``auto_vectorize=False``) and no loop marks (the debug locations that say which loop
  an instruction came from, :mod:`engine.codegen.loop_lines`): the engine before, but for
  the unroll limits of :mod:`engine.codegen.loops` (a short nest around a vectorizable row
  counts its vector iterations), which stay;
* ``+vec``    — the loop vectorizer on, without the marks;
* ``now``     — the loop vectorizer on, with the marks (``engine.build``'s default).

It prints each preset's total over its steps (best of ``--repeat`` builds per step and
variant) and the ratios to ``before``, then the sum over all presets; in wall time and in
CPU time (the process's, all threads: on a shared machine it moves less with the load).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine import presets  # noqa: E402
from engine.codegen import loop_lines  # noqa: E402
from engine.schedule import Schedule, Trace  # noqa: E402


@contextlib.contextmanager
def without_marks():
    """Builds meanwhile carry no loop marks (the debug locations are not made)."""
    original = loop_lines.LoopLines.location
    loop_lines.LoopLines.location = lambda self, fn, line: None
    try:
        yield
    finally:
        loop_lines.LoopLines.location = original


def step_modules(name: str, quick: bool) -> list:
    """The program of every step of preset ``name`` (step 0: unscheduled)."""
    p = presets.info(name)
    full = presets.get(name)
    insts = list(full.trace.insts)
    counts = [0, len(insts)] if quick else range(len(insts) + 1)
    mods = []
    for k in counts:
        sch = Schedule(engine.workloads.get(p.workload, **p.params), seed=0)
        Trace(insts[:k]).apply_to_schedule(sch)
        mods.append(sch.mod)
    return mods


def build_seconds(mod, variant: str) -> tuple[float, float]:
    if variant == "before":
        with without_marks():
            return _timed(mod, auto_vectorize=False)
    if variant == "+vec":
        with without_marks():
            return _timed(mod, auto_vectorize=True)
    return _timed(mod, auto_vectorize=True)


def _timed(mod, **options) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one uncached build."""
    t0, c0 = time.perf_counter(), time.process_time()
    engine.build(mod, cache=False, **options)
    return time.perf_counter() - t0, time.process_time() - c0


VARIANTS = ("before", "+vec", "now")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only each preset's first and last step")
    ap.add_argument("--repeat", type=int, default=3, help="builds per step and variant (best)")
    ap.add_argument("--only", default="", help="presets whose name contains this text")
    args = ap.parse_args()
    engine.build(engine.workloads.get("mm_relu", n=16), cache=False)   # warm LLVM up
    totals = {(v, c): 0.0 for v in VARIANTS for c in (0, 1)}
    print("wall ms | CPU ms")
    print(f"{'preset':<22} {'steps':>5} " + " ".join(f"{v + ' ms':>10}" for v in VARIANTS)
          + f" {'+vec/before':>11} {'now/before':>10} | "
          + " ".join(f"{v + ' ms':>10}" for v in VARIANTS) + f" {'+vec/before':>11} {'now/before':>10}")
    for name in presets.names():
        p = presets.info(name)
        if p.target or args.only not in name:
            continue
        mods = step_modules(name, args.quick)
        best = {(v, c): [float("inf")] * len(mods) for v in VARIANTS for c in (0, 1)}
        for r in range(args.repeat):
            for i, mod in enumerate(mods):
                order = VARIANTS if (r + i) % 2 == 0 else VARIANTS[::-1]
                for v in order:
                    for c, seconds in enumerate(build_seconds(mod, v)):
                        best[v, c][i] = min(best[v, c][i], seconds)
        sums = {key: sum(values) for key, values in best.items()}
        for key in sums:
            totals[key] += sums[key]
        print(f"{name:<22} {len(mods):>5} " + _row(sums), flush=True)
    print(f"{'all':<22} {'':>5} " + _row(totals))


def _row(sums: dict) -> str:
    return " | ".join(" ".join(f"{sums[v, c] * 1e3:10.1f}" for v in VARIANTS)
                      + f" {sums['+vec', c] / sums['before', c]:11.3f}"
                      f" {sums['now', c] / sums['before', c]:10.3f}" for c in (0, 1))


if __name__ == "__main__":
    main()
