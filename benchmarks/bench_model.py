"""The course's MLP end to end: the engine (Relax VM + compiled TensorIR) vs the same
numpy code in float32, at batch 1 and 64, for each stage.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_model.py
    python benchmarks/bench_model.py --batch 1 --number 50
    python benchmarks/bench_model.py --tune 16        (also "Tune every function", 16 trials)

Stages (``engine.models.pipeline``): ``unscheduled`` (the course's linear0/relu0/linear1
as written; the constant weights stored transposed once, ``engine.models.layouts``),
``scheduled`` (each function by the default recipe, sized from this machine's vector ISA:
``engine.codegen.isa.isa_of``), ``fused`` (FuseOps + FuseTIR: linear0 and relu0 one
function), ``fused+scheduled``; with ``--tune N``, ``fused+tuned``: every function of the
fused stage searched as the model page's "Tune every function" does (the default recipe
timed first, then the ``auto`` space, evolutionary, N trials, seed 0, in this process; the
faster of the two applied).

For each: end-to-end time of ``vm["main"](x)`` and numpy's ``relu(x @ w0.T + b0) @ w1.T
+ b1`` on the same float32 arrays, timed alternately in ``--rounds`` rounds (each the median
of ``--repeat`` repeats of ``--number`` calls); the medians, the median of the per-round
ratios, and the virtual machine's overhead per ``call_tir`` (the end to end time minus the
functions' own times, timed alone, divided by the calls). The engine's results are checked
against numpy first. The machine may be shared: the ratios are measured in the same run,
round by round.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import relax  # noqa: E402
from engine.codegen.isa import isa_of  # noqa: E402
from engine.ir.function import IRModule, PrimFunc  # noqa: E402
from engine.models import mlp  # noqa: E402
from engine.models.course import mlp_module  # noqa: E402
from engine.models.pipeline import STAGES, _best_of, profile, stage_module  # noqa: E402


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
        infos = [f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads, "
                 f"kernel {i.get('architecture')})" for i in threadpool_info()
                 if i.get("user_api") == "blas"]
        if infos:
            return "; ".join(infos)
    except ImportError:
        pass
    return "unknown BLAS (install threadpoolctl for details)"


def tuned(mod: IRModule, trials: int, seed: int = 0) -> IRModule:
    """Every TensorIR function of ``mod`` as the model page's "Tune every function" leaves
    it: the default recipe timed first, then a search (auto space, evolutionary,
    ``trials``) whose best trace replaces the recipe only when faster."""
    from engine.models.schedules import default_schedule
    from engine.schedule import Schedule
    from engine.schedule.recorded_trace import Trace
    from engine.tune import InlineRunner, tune
    from engine.tune.measure import TaskContext
    from engine.tune.task import task_of

    funcs = dict(mod.items())
    runner = InlineRunner()
    for name, f in mod.items():
        if not isinstance(f, PrimFunc):
            continue
        one = IRModule(((name, f),))
        recipe = default_schedule(one, name)
        ctx = TaskContext(task_of(one, name, "start"))
        first = ctx.time(ctx.build(recipe.trace.as_json()))
        res = tune(one, space="auto", trials=trials, strategy="evolutionary", seed=seed,
                   func_name=name, runner=runner)
        best = res.best
        if best is None or (first.ok and first.seconds <= best.seconds):
            funcs[name] = recipe.mod[name]
            print(f"    {name}: recipe {first.seconds * 1e6:.1f} µs kept (search best "
                  f"{best.seconds * 1e6 if best else float('nan'):.1f} µs)", flush=True)
            continue
        sch = Schedule(one)
        Trace.from_json(best.trace).apply_to_schedule(sch)
        funcs[name] = sch.mod[name]
        print(f"    {name}: search best {best.seconds * 1e6:.1f} µs replaces the recipe "
              f"{first.seconds * 1e6:.1f} µs", flush=True)
    return IRModule(tuple(funcs.items()))


def measure(mod: IRModule, x: np.ndarray, numpy_fn, label: str, batch: int,
            args: argparse.Namespace) -> None:
    main = relax.VirtualMachine(relax.build(mod))["main"]
    ours, theirs, ratios = [], [], []
    for _ in range(args.rounds):
        t = _best_of(lambda: main(x), args.number, args.repeat)
        n = _best_of(numpy_fn, args.number, args.repeat)
        ours.append(t)
        theirs.append(n)
        ratios.append(n / t)
    prof = profile(mod, [x], label, args.number, args.repeat)
    t, n = float(np.median(ours)), float(np.median(theirs))
    over = max(0.0, t - prof.op_seconds) / max(1, prof.n_calls)
    print(f"{batch:>5}  {label:<16} {t * 1e6:>10.1f} {n * 1e6:>9.1f} "
          f"{float(np.median(ratios)):>12.2f} {prof.n_calls:>5} {over * 1e6:>10.1f}  "
          + ", ".join(f"{o.name} {o.seconds * 1e6:.1f}" for o in prof.ops), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 1, 64)")
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stage", action="append", help="stages (default: all)")
    ap.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                    help="also tune every function of the fused stage (the model page's "
                         "default budget is 16)")
    args = ap.parse_args()
    trained = mlp.trained_mlp()
    params = trained.params
    print(f"MLP 784-128-10, test accuracy (numpy float32) {trained.test_accuracy:.2%}")
    print(f"numpy BLAS: {blas_info()}")
    print(f"target: {isa_of().describe()}")
    print(f"{'batch':>5}  {'stage':<16} {'engine µs':>10} {'numpy µs':>9} {'numpy/engine':>12}"
          f" {'calls':>5} {'VM µs/call':>10}  per function µs")
    for batch in args.batch or [1, 64]:
        x = np.ascontiguousarray(
            np.resize(trained.data.test_images.reshape(-1, 784), (batch, 784)), "float32")
        want = mlp.forward(params, x)

        def numpy_fn(x=x):
            return mlp.forward(params, x)

        for stage in args.stage or STAGES:
            mod, _ = stage_module(mlp_module(batch, params), stage)
            got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            measure(mod, x, numpy_fn, stage, batch, args)
        if args.tune:
            mod = tuned(stage_module(mlp_module(batch, params), "fused")[0], args.tune)
            got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            measure(mod, x, numpy_fn, f"fused+tuned{args.tune}", batch, args)


if __name__ == "__main__":
    main()
