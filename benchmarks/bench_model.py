"""The course's MLP end to end: the engine (Relax VM + compiled TensorIR) vs the same
numpy code in float32, at batch 1 and 64, for each stage.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_model.py
    python benchmarks/bench_model.py --batch 1 --number 50
    python benchmarks/bench_model.py --tune 16        (also "Tune every function", 16 trials)
    python benchmarks/bench_model.py --onnx           (also ONNX models as uploaded)

Stages (``engine.models.pipeline``): ``unscheduled`` (the course's linear0/relu0/linear1
as written, weights read as ``W[j, k]``), ``scheduled`` (each function by the default
recipe, sized from this machine's vector ISA: ``engine.codegen.isa.isa_of``; its first
step stores the constant weights transposed once, ``engine.models.layouts``), ``fused``
(FuseOps + FuseTIR: linear0 and relu0 one function), ``fused+scheduled``; with ``--tune
N``, ``fused+tuned``: every function of the fused stage searched as the model page's
"Tune every function" does (the default recipe timed first, then the ``auto`` space,
evolutionary, N trials, seed 0, in this process; the faster of the two applied).

For each: end-to-end time of ``vm["main"](x)`` and numpy's ``relu(x @ w0.T + b0) @ w1.T
+ b1`` on the same float32 arrays, timed alternately in ``--rounds`` rounds (each the median
of ``--repeat`` repeats of ``--number`` calls); the medians, the median of the per-round
ratios, and the virtual machine's overhead per ``call_tir`` (the end to end time minus the
functions' own times, timed alone, divided by the calls). The engine's results are checked
against numpy first. The machine may be shared: the ratios are measured in the same run,
round by round. With ``--cpu-time`` both sides run on one thread and are timed by the
process's CPU time (a proxy for an idle machine that other work changes little; the
per-function column stays wall-clock).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import blas_info, one_thread_cpu_clock  # noqa: E402

from engine import relax  # noqa: E402
from engine.codegen.isa import isa_of  # noqa: E402
from engine.ir.function import IRModule, PrimFunc  # noqa: E402
from engine.models import mlp  # noqa: E402
from engine.models.course import mlp_module  # noqa: E402
from engine.models.pipeline import STAGES, profile, stage_module  # noqa: E402

CLOCK = time.perf_counter


def _best_of(fn, number: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of ``number`` calls (by ``CLOCK``)."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = CLOCK()
        for _ in range(number):
            fn()
        runs.append((CLOCK() - t0) / number)
    return float(np.median(runs))


def tuned(mod: IRModule, trials: int, seed: int = 0) -> IRModule:
    """Every TensorIR function of ``mod`` as the model page's "Tune every function" leaves
    it: the default recipe timed first, then a search (auto space, evolutionary,
    ``trials``) whose best trace replaces the recipe only when faster."""
    from engine.models.layouts import constant_params, with_schedules
    from engine.models.schedules import default_schedule
    from engine.schedule import Schedule
    from engine.schedule.recorded_trace import Trace
    from engine.tune import InlineRunner, tune
    from engine.tune.measure import TaskContext
    from engine.tune.task import task_of

    funcs, traces = {}, {}
    runner = InlineRunner()
    for name, f in mod.items():
        if not isinstance(f, PrimFunc):
            continue
        one = IRModule(((name, f),))
        recipe = default_schedule(one, name, weights=constant_params(mod, name))
        ctx = TaskContext(task_of(one, name, "start"))
        first = ctx.time(ctx.build(recipe.trace.as_json()))
        res = tune(one, space="auto", trials=trials, strategy="evolutionary", seed=seed,
                   func_name=name, runner=runner)
        best = res.best
        if best is None or (first.ok and first.seconds <= best.seconds):
            funcs[name], traces[name] = recipe.mod[name], recipe.trace
            print(f"    {name}: recipe {first.seconds * 1e6:.1f} µs kept (search best "
                  f"{best.seconds * 1e6 if best else float('nan'):.1f} µs)", flush=True)
            continue
        sch = Schedule(one)
        Trace.from_json(best.trace).apply_to_schedule(sch)
        funcs[name], traces[name] = sch.mod[name], sch.trace
        print(f"    {name}: search best {best.seconds * 1e6:.1f} µs replaces the recipe "
              f"{first.seconds * 1e6:.1f} µs", flush=True)
    return with_schedules(mod, funcs, traces)   # weights a trace transposes, stored so


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


def onnx_models(params: dict, batches: list[int]) -> list:
    """ONNX models as a learner uploads them (built with ``onnx.helper``, no files): the
    trained MLP as PyTorch exports it (``Gemm(transB=1)``, the weights transposed once at
    import) at each batch, and a small CNN on the digits' 28x28 images (Conv 1->8 3x3 + bias,
    Relu, Flatten, Gemm 6272->10, Softmax) at batch 1; (label, Model) each."""
    from onnx import TensorProto, helper, numpy_helper

    from engine.models.zoo import from_onnx_bytes

    def model_bytes(nodes, x_shape, y_shape, inits) -> bytes:
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
            [numpy_helper.from_array(np.ascontiguousarray(a), n) for n, a in inits])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    out = []
    for batch in batches:
        inits = [("w0", params["w0"]), ("b0", params["b0"]), ("w1", params["w1"]),
                 ("b1", params["b1"])]
        nodes = [helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], transB=1),
                 helper.make_node("Relu", ["h"], ["r"]),
                 helper.make_node("Gemm", ["r", "w1", "b1"], ["y"], transB=1)]
        out.append((f"onnx-mlp b{batch}", from_onnx_bytes(
            model_bytes(nodes, [batch, 784], [batch, 10], inits))))
    rng = np.random.default_rng(0)
    inits = [("cw", rng.standard_normal((8, 1, 3, 3)).astype("float32")),
             ("cb", rng.standard_normal(8).astype("float32")),
             ("fw", (rng.standard_normal((8 * 28 * 28, 10)) * 0.01).astype("float32")),
             ("fb", rng.standard_normal(10).astype("float32"))]
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["g"]),
             helper.make_node("Softmax", ["g"], ["y"], axis=1)]
    out.append(("onnx-cnn b1", from_onnx_bytes(model_bytes(nodes, [1, 1, 28, 28], [1, 10],
                                                           inits))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 1, 64)")
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stage", action="append", help="stages (default: all)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="one thread each (engine and OpenBLAS), timed by the process's CPU "
                         "time: per-core figures a machine loaded by other work changes little")
    ap.add_argument("--onnx", action="store_true",
                    help="also ONNX models as uploaded: the MLP as Gemm(transB=1), a CNN")
    ap.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                    help="also tune every function of the fused stage (the model page's "
                         "default budget is 16)")
    args = ap.parse_args()
    global CLOCK
    if args.cpu_time:
        CLOCK = one_thread_cpu_clock()
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
    if args.onnx:
        for label, model in onnx_models(params, args.batch or [1, 64]):
            x = model.test_inputs(model.batch_fixed or 1)
            want = model.numpy_fn(x)
            print(f"{label}: {model.description}")
            for stage in args.stage or STAGES:
                mod, _ = stage_module(model.build(model.batch_fixed), stage)
                got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                measure(mod, x, lambda x=x, m=model: m.numpy_fn(x), stage, x.shape[0], args)
            if args.tune:
                mod = tuned(stage_module(model.build(model.batch_fixed), "fused")[0],
                            args.tune)
                got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                measure(mod, x, lambda x=x, m=model: m.numpy_fn(x),
                        f"fused+tuned{args.tune}", x.shape[0], args)


if __name__ == "__main__":
    main()
