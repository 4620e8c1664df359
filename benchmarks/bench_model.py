"""The course's MLP end to end: the engine (Relax VM + compiled TensorIR) vs the same
numpy code in float32, at batch 1 and 64, for each stage.

    python benchmarks/bench_model.py                 (batch 1 and 64, every stage)
    python benchmarks/bench_model.py --batch 1 --number 50

Stages (``engine.models.pipeline``): ``unscheduled`` (the course's linear0/relu0/linear1
as written), ``scheduled`` (each function tiled by the default recipe: split j and k by 8,
the bias and relu blocks moved under the tile, init decomposed, batch loop parallel),
``fused`` (FuseOps + FuseTIR: linear0 and relu0 one function), ``fused+scheduled``.

For each: end-to-end time of ``vm["main"](x)`` (median of repeats, weights bound as
constants), numpy's ``relu(x @ w0.T + b0) @ w1.T + b1`` on the same float32 arrays timed
in the same run, the ratio, and the virtual machine's overhead per ``call_tir`` (the end
to end time minus the functions' own times, timed alone, divided by the calls).  The
engine's results are checked against numpy first.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import relax  # noqa: E402
from engine.models import mlp  # noqa: E402
from engine.models.course import mlp_module  # noqa: E402
from engine.models.pipeline import STAGES, profile, stage_module  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 1, 64)")
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    trained = mlp.trained_mlp()
    params = trained.params
    print(f"MLP 784-128-10, test accuracy (numpy float32) {trained.test_accuracy:.2%}")
    print(f"{'batch':>5}  {'stage':<16} {'engine µs':>10} {'numpy µs':>9} {'numpy/engine':>12}"
          f" {'calls':>5} {'VM µs/call':>10}")
    for batch in args.batch or [1, 64]:
        x = np.ascontiguousarray(
            np.resize(trained.data.test_images.reshape(-1, 784), (batch, 784)), "float32")
        want = mlp.forward(params, x)
        for stage in STAGES:
            mod, _ = stage_module(mlp_module(batch, params), stage)
            got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            prof = profile(mod, [x], stage, args.number, args.repeat,
                           numpy_fn=lambda: mlp.forward(params, x))
            print(f"{batch:>5}  {stage:<16} {prof.e2e_seconds * 1e6:>10.1f} "
                  f"{prof.numpy_seconds * 1e6:>9.1f} "
                  f"{prof.numpy_seconds / prof.e2e_seconds:>12.2f} {prof.n_calls:>5} "
                  f"{prof.overhead_per_call * 1e6:>10.1f}")


if __name__ == "__main__":
    main()
