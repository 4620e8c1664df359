"""The Relax virtual machine's own cost: per ``call_tir`` overhead and ``vm["main"](x)`` against
the sum of its kernels, measured in one run.

    python benchmarks/bench_vm.py                  (N = 1, 10, 50 trivial calls; the MLP at 1, 64)
    python benchmarks/bench_vm.py --calls 10 --batch 1

1. A Relax function of N ``R.call_tir`` of a trivial kernel (16 floats: y = x + 1) against
   N direct calls of the same compiled kernel — checked (``f(a, b)``, what a user's loop
   costs) and raw (``call_pointers``: the kernel and ctypes alone) — for the machine's
   compiled plan (one native call, :mod:`engine.relax.vm.plan`) and for its instruction
   loop (the same machine with ``ENGINE_VM_PLAN=0``: what every call did before the
   plan, the kernels' own compiled checks still on). Overhead per call is
   ``(main - N x direct) / N``.
2. The course MLP (weights bound, each stage of ``engine.models.pipeline``): ``vm["main"](x)``
   against the sum of its kernels' times, each kernel timed alone on arrays of its shapes
   (raw calls), and the ratio (goal: within 1.5x).

Every figure is the best per-call time by ``engine.runtime.timing.time_until_stable`` (the
engine's one timing function).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine import relax  # noqa: E402
from engine.relax.vm.plan import NativePlan  # noqa: E402
from engine.runtime import random_arrays  # noqa: E402
from engine.runtime.timing import time_until_stable  # noqa: E402

SIZE = 16


def chain_text(n: int) -> str:
    """A module whose ``main`` is ``n`` calls of a trivial kernel, one after the other."""
    calls = []
    prev = "x"
    for k in range(n):
        calls.append(f"            v{k} = R.call_tir(inc, ({prev},), ({SIZE},), "
                     "dtype=\"float32\")")
        prev = f"v{k}"
    return "\n".join([
        "@tvm.script.ir_module",
        "class Chain:",
        "    @T.prim_func",
        f"    def inc(X: T.Buffer(({SIZE},), \"float32\"), "
        f"Y: T.Buffer(({SIZE},), \"float32\")):",
        f"        for i in T.serial({SIZE}):",
        "            with T.block(\"Y\"):",
        "                vi = T.axis.remap(\"S\", [i])",
        "                Y[vi] = X[vi] + T.float32(1)",
        "",
        "    @R.function",
        f"    def main(x: Tensor(({SIZE},), \"float32\")):",
        "        with R.dataflow():",
        *calls,
        f"            R.output({prev})",
        f"        return {prev}",
    ]) + "\n"


def best(fn) -> float:
    return time_until_stable(fn, warmups=5, budget=1.0, min_repeats=5)


def machine(ex, plan: bool):
    """A virtual machine on ``ex`` with its compiled plan (``plan``) or its instruction
    loop only."""
    old = os.environ.get("ENGINE_VM_PLAN")
    if not plan:
        os.environ["ENGINE_VM_PLAN"] = "0"
    try:
        return relax.VirtualMachine(ex)
    finally:
        if old is None:
            os.environ.pop("ENGINE_VM_PLAN", None)
        else:
            os.environ["ENGINE_VM_PLAN"] = old


def overhead(counts: list[int]) -> None:
    print(f"Per call_tir overhead (a kernel of {SIZE} floats, y = x + 1)")
    print(f"{'N':>4} {'path':<18} {'main µs':>9} {'N direct µs':>12} {'N raw µs':>9} "
          f"{'overhead µs/call':>17} {'vs raw':>8}")
    for n in counts:
        ex = relax.build(engine.parse(chain_text(n)))
        x = np.arange(SIZE, dtype="float32")
        k = ex.kernels["inc"]
        a, b = np.zeros(SIZE, np.float32), np.zeros(SIZE, np.float32)
        for _ in range(5):
            k(a, b)                     # the kernel's compiled check is made
        ptrs = k.pointers((a, b))
        direct = best(lambda: k(a, b))
        raw = best(lambda: k.call_pointers(ptrs))
        for label, plan in (("compiled plan", True), ("instruction loop", False)):
            main = machine(ex, plan)["main"]
            np.testing.assert_array_equal(main(x), x + n)
            t = best(lambda: main(x))
            if plan:
                assert isinstance(ex.native_plan("main"), NativePlan)
                np.testing.assert_array_equal(main(x), x + n)
            print(f"{n:>4} {label:<18} {t * 1e6:>9.2f} {n * direct * 1e6:>12.2f} "
                  f"{n * raw * 1e6:>9.2f} {(t - n * direct) / n * 1e6:>17.3f} "
                  f"{(t - n * raw) / n * 1e6:>8.3f}")


def mlp(batches: list[int]) -> None:
    from engine.models import mlp as mlp_data
    from engine.models.course import mlp_module
    from engine.models.pipeline import STAGES, stage_module

    trained = mlp_data.trained_mlp()
    print("\nThe course MLP (784-128-10, weights bound): main(x) against the sum of its "
          "kernels, each timed alone")
    print(f"{'batch':>5} {'stage':<16} {'path':<17} {'main µs':>9} {'kernels µs':>11} "
          f"{'main/kernels':>13} {'calls':>5}")
    for batch in batches:
        x = np.ascontiguousarray(
            np.resize(trained.data.test_images.reshape(-1, 784), (batch, 784)), "float32")
        want = mlp_data.forward(trained.params, x)
        for stage in STAGES:
            mod, _ = stage_module(mlp_module(batch, trained.params), stage)
            ex = relax.build(mod)
            plan = ex.native_plan("main")
            if not isinstance(plan, NativePlan):
                print(f"{batch:>5} {stage:<16} not planned: {plan}")
                continue
            labels = [label for label, _ in plan.static.steps]
            kernels = 0.0
            for label in labels:
                f = ex.kernels[label]
                arrays = tuple(random_arrays(f.specs, 0))    # alive while timed
                ptrs = f.pointers(arrays)
                kernels += best(lambda: f.call_pointers(ptrs))
                del arrays
            for path, planned in (("compiled plan", True), ("instruction loop", False)):
                main = machine(ex, planned)["main"]
                np.testing.assert_allclose(main(x), want, rtol=1e-4, atol=1e-4)
                t = best(lambda: main(x))
                np.testing.assert_allclose(main(x), want, rtol=1e-4, atol=1e-4)
                print(f"{batch:>5} {stage:<16} {path:<17} {t * 1e6:>9.2f} "
                      f"{kernels * 1e6:>11.2f} {t / kernels:>13.2f} {len(labels):>5}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, action="append", help="N (default 1, 10, 50)")
    ap.add_argument("--batch", type=int, action="append", help="MLP batch (default 1, 64)")
    ap.add_argument("--no-mlp", action="store_true")
    args = ap.parse_args()
    overhead(args.calls or [1, 10, 50])
    if not args.no_mlp:
        mlp(args.batch or [1, 64])


if __name__ == "__main__":
    main()
