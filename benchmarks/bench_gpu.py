"""The course's GPU chapter, per program and GPU: modeled time (every machine), measured time
(where a CUDA GPU exists), and cuBLAS through CuPy for the GEMMs (when CuPy is installed and
a GPU exists).

    python benchmarks/bench_gpu.py                      # n = 1024, the four named GPUs
    python benchmarks/bench_gpu.py --n 2048 --gpus a100 h100-sxm
    python benchmarks/bench_gpu.py --tune 32            # also the tuner's best GEMM (modeled
                                                        # or measured), 32 trials per GPU

Each program is scheduled as the course does (``engine.presets.gpu_chapter``) and built with
``engine.build(mod, target="cuda -model=<gpu>")``; its result is checked against numpy (on
the GPU, or in the emulator), then timed. Without a GPU the script says so and prints the
model's figures only; it exits 0 either way (1 only when a result is wrong). No threshold:
the figures are printed, ratios against the chapter's naive GEMM in the same run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine.gpu.driver import cuda_available  # noqa: E402
from engine.gpu_check import chapter_inputs  # noqa: E402
from engine.presets import gpu_chapter as G  # noqa: E402
from engine.schedule import Schedule  # noqa: E402

GPUS = ("h100-sxm", "a100", "rtx-4090", "tesla-p100")


def gemm_naive(n: int, tile: int = 16) -> Schedule:
    """A GEMM with only its output loops bound (16×16 threads per block), no caches: the
    chapter's starting point for the two blockings."""
    sch = Schedule(G.matmul_program(n))
    i, j, _k = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch


PROGRAMS = {
    "vector_add": (G.vector_add, lambda n: n),
    "window_sum": (G.window_sum, lambda n: 2 * n),
    "gemm_naive": (gemm_naive, lambda n: 2 * n ** 3),
    "gemm_local": (G.gemm_local, lambda n: 2 * n ** 3),
    "gemm_shared": (G.gemm_shared, lambda n: 2 * n ** 3),
}


def cublas_seconds(n: int) -> float | None:
    """cuBLAS sgemm through CuPy (events), or None without CuPy or a GPU."""
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        return None
    a = cupy.random.random((n, n), dtype=cupy.float32)
    b = cupy.random.random((n, n), dtype=cupy.float32)
    a @ b
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(10):
        a @ b
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 10 / 1e3


def one(name: str, n: int, gpu: str, on_device: bool) -> tuple[bool, str]:
    make, flops = PROGRAMS[name]
    sch = make(n)
    rt = engine.build(sch.mod, target=f"cuda -model={gpu}")
    arrays, reference = chapter_inputs("gemm" if name.startswith("gemm") else name, n,
                                np.random.default_rng(0))
    rt["main"](*arrays)
    want = reference()
    ok = bool(np.allclose(arrays[-1], want, rtol=1e-4, atol=1e-3 * n))
    m = rt.model("main")
    res = rt.resources()[0]
    parts = [f"{name:12s} {'ok ' if ok else 'WRONG'}",
             f"modeled {m.time_s * 1e6:9.1f} µs {flops(n) / m.time_s / 1e9:9.1f} GFLOP/s "
             f"({m.bottleneck if hasattr(m, 'bottleneck') else ''})",
             f"regs {res['registers']}, shared {res['shared_bytes']} B, "
             f"occupancy {res['occupancy']:.0%}"]
    if on_device:
        t = rt.time_evaluator("main", engine.cuda(0), number=10, repeat=3)(*arrays).mean
        parts.insert(1, f"measured {t * 1e6:9.1f} µs {flops(n) / t / 1e9:9.1f} GFLOP/s")
    return ok, " | ".join(parts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--gpus", nargs="+", default=list(GPUS))
    p.add_argument("--programs", nargs="+", default=list(PROGRAMS))
    p.add_argument("--tune", type=int, default=0, help="trials of the GPU tuner per GPU")
    args = p.parse_args(argv)
    on_device, why = cuda_available()
    print(f"GPU: {why}" if on_device else f"{why}\nmodeled figures only (results checked "
          "in the emulator)")
    wrong = 0
    for gpu in args.gpus:
        print(f"\n== {gpu}, n = {args.n}")
        for name in args.programs:
            ok, line = one(name, args.n, gpu, on_device)
            wrong += not ok
            print(line, flush=True)
        if args.tune:
            from engine.tune import tune  # noqa: PLC0415
            res = tune(G.matmul_program(args.n), space="auto", target=f"cuda -model={gpu}",
                       trials=args.tune, seed=0)
            best = res.best_seconds if hasattr(res, "best_seconds") else None
            print(f"{'gemm_tuned':12s} {res.timing}: "
                  + (f"{best * 1e6:9.1f} µs {2 * args.n ** 3 / best / 1e9:9.1f} GFLOP/s"
                     if best else str(res)))
        if on_device and any(x.startswith("gemm") for x in args.programs):
            t = cublas_seconds(args.n)
            print(f"{'cuBLAS':12s} " + (f"measured {t * 1e6:9.1f} µs "
                                        f"{2 * args.n ** 3 / t / 1e9:9.1f} GFLOP/s"
                                        if t else "(CuPy not installed)"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
