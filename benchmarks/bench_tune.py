"""Tuning figures, side by side with numpy (and the hand-made presets) measured in the same run.

    python benchmarks/bench_tune.py [--part course|auto|model|all] [--seeds 0,1,2]
                                    [--auto-trials 256] [--workers N]

* ``course`` — the course-style stochastic mm_relu (engine.tune.examples.stochastic_mm_relu:
  tiles of i, j, k sampled, ReLU fused, vectorized, parallel) at n=512, 64 trials,
  evolutionary: the best found against numpy's float32 time, and the whole search's wall
  time (the issue's reference: TVM 0.27 needs about 15 s on a 2-core machine for the same 64
  samples compiled and timed by hand; TVM is not installed here, so that figure is quoted,
  not measured). The course's own space (only j's two factors) is run too, for comparison.
* ``auto`` — the ``auto`` space, evolutionary, ``--auto-trials`` trials: matmul 1024 against
  the ``matmul-best`` preset; conv2d 1x64x56x56 3x3 against numpy's im2col + sgemm; softmax
  and layernorm (1024x1024) against numpy.
* ``model`` — does the cost model pay for itself: for each seed, random search's best after
  256 trials, and how many evolutionary trials reach it (target: at most 96), on matmul 512
  with the ``auto`` space.

Every timing uses the tuner's own measuring code (compile, check against numpy, best of 5
repeats) so the figures compare like for like. The machine may be shared: the ratios
matter, not the absolute numbers.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import presets  # noqa: E402
from engine.tune import LocalRunner, TuneTask, tune  # noqa: E402
from engine.tune.examples import stochastic_mm_relu, stochastic_schedule_mm  # noqa: E402

TVM_64_SAMPLES_S = 15.0  # the figure for TVM 0.27 on this 2-core machine


def _fmt(x, unit="", digits=2):
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def course(runner: LocalRunner) -> None:
    print("== course: stochastic mm_relu, n=512, 64 trials, evolutionary")
    for name, space in (("course space (j only)", stochastic_schedule_mm),
                        ("course-style tiles of i, j, k", stochastic_mm_relu)):
        t0 = time.perf_counter()
        res = tune(("mm_relu", {"n": 512}), space=space, trials=64, runner=runner, seed=0)
        wall = time.perf_counter() - t0
        ratio = res.numpy_seconds / res.best_seconds if res.best_seconds else None
        print(f"  {name:32s} trials {len(res.records):3d}  best {_fmt(res.best_gflops)} "
              f"GFLOP/s  {_fmt(res.best_seconds and res.best_seconds * 1e3)} ms  numpy "
              f"{res.numpy_seconds * 1e3:.3f} ms  speed vs numpy {_fmt(ratio, 'x')} "
              f"(target >= 0.80x)  wall {wall:.1f} s (TVM 0.27: ~{TVM_64_SAMPLES_S:.0f} s)")


def _measure_preset(runner: LocalRunner, name: str, **params) -> float | None:
    p = presets.info(name)
    pp = p.resolved_params(**params)
    task = TuneTask(func_name=presets.get(name, **params).func_name, workload=p.workload,
                    params=pp)
    res = runner.measure(task, [p.trace_json(**params)])[0]
    return res.seconds if res.ok else None


def auto(runner: LocalRunner, trials: int) -> None:
    print(f"== auto space, evolutionary, {trials} trials")
    conv = dict(batch=1, in_channels=64, out_channels=64, size=56, kernel=3, pad=1, stride=1)
    cases = [("matmul", {"n": 1024}, "matmul-best"), ("conv2d", conv, None),
             ("softmax", {"m": 1024, "n": 1024}, None),
             ("layernorm", {"m": 1024, "n": 1024}, None)]
    for wl, params, preset in cases:
        t0 = time.perf_counter()
        res = tune((wl, params), space="auto", trials=trials, runner=runner, seed=0)
        wall = time.perf_counter() - t0
        line = (f"  {wl:10s} best {_fmt(res.best_gflops)} GFLOP/s "
                f"{_fmt(res.best_seconds and res.best_seconds * 1e3, ' ms', 3)}  numpy "
                f"{res.numpy_seconds * 1e3:.3f} ms ({_fmt(res.numpy_seconds / res.best_seconds if res.best_seconds else None, 'x')})")
        if preset:
            ps = _measure_preset(runner, preset)
            line += (f"  {preset} {_fmt(ps and ps * 1e3, ' ms', 3)} "
                     f"({_fmt(ps / res.best_seconds if ps and res.best_seconds else None, 'x')})")
        print(line + f"  [{len(res.records)} trials, {wall:.0f} s]", flush=True)


def model(runner: LocalRunner, seeds: list[int], trials: int = 256, n: int = 512) -> None:
    target_trials = trials * 3 // 8
    print(f"== cost model: trials for evolutionary to reach random search's {trials}-trial "
          f"best (matmul {n}, auto; target <= {target_trials})")
    for seed in seeds:
        rnd = tune(("matmul", {"n": n}), space="auto", trials=trials, strategy="random",
                   runner=runner, seed=seed)
        target = rnd.best_gflops
        evo = tune(("matmul", {"n": n}), space="auto", trials=trials,
                   strategy="evolutionary", runner=runner, seed=seed)
        reached = next((i + 1 for i, g in enumerate(evo.best_so_far())
                        if g is not None and target is not None and g >= target), None)
        print(f"  seed {seed}: random best {_fmt(target)} GFLOP/s; evolutionary reaches it "
              f"after {reached if reached else f'more than {trials}'} trials; "
              f"evolutionary best {_fmt(evo.best_gflops)} GFLOP/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("course", "auto", "model", "all"), default="all")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--auto-trials", type=int, default=256)
    ap.add_argument("--model-trials", type=int, default=256)
    ap.add_argument("--model-n", type=int, default=512)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    with LocalRunner(workers=args.workers) as runner:
        if args.part in ("course", "all"):
            course(runner)
        if args.part in ("auto", "all"):
            auto(runner, args.auto_trials)
        if args.part in ("model", "all"):
            model(runner, [int(s) for s in args.seeds.split(",")], args.model_trials,
                  args.model_n)


if __name__ == "__main__":
    main()
