"""Seconds per emulated kernel: the course's GPU chapter programs run by the CPU emulator.

    python benchmarks/bench_gpu_emulator.py                 # n = 1024, every program
    python benchmarks/bench_gpu_emulator.py --n 512 --programs gemm_local gemm_shared
    python benchmarks/bench_gpu_emulator.py --races --n 256 # with race checking

Each program is scheduled as the course does (``engine.presets.gpu_chapter``), lowered for
the GPU (``engine.gpu.lower.lower_gpu``) and compiled once for the CPU by
``engine.gpu.emulator.Emulator`` (MCUDA: grid loop parallel over the CPU's cores, thread
loops between barriers). The result is checked against numpy, then each kernel is timed
(best of ``--repeat`` calls). No threshold: the figures are printed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.gpu.emulator import Emulator  # noqa: E402
from engine.gpu.lower import lower_gpu  # noqa: E402
from engine.presets import gpu_chapter as G  # noqa: E402


def schedule(name: str, n: int):
    return G.PROGRAMS[name][0](n)


def arrays(name: str, n: int, rng):
    f32 = np.float32
    if name == "vector_add":
        a, b = rng.random(n, f32), rng.random(n, f32)
        return (a, b, np.zeros(n, f32)), (lambda args: args[2]), a + b
    if name == "window_sum":
        a = rng.random(n + 2, f32)
        return (a, np.zeros(n, f32)), (lambda args: args[1]), a[:-2] + a[1:-1] + a[2:]
    a, b = rng.random((n, n), f32), rng.random((n, n), f32)
    return (a, b, np.zeros((n, n), f32)), (lambda args: args[2]), a @ b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--programs", nargs="*", default=list(G.PROGRAMS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--races", action="store_true", help="with race checking")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for name in args.programs:
        print(f"{name} (n = {args.n}{', race checking' if args.races else ''}):")
        t0 = time.perf_counter()
        gm = lower_gpu(schedule(name, args.n).mod, "cuda")
        fn = gm.functions[0]
        t1 = time.perf_counter()
        emu = Emulator(fn, check_races=args.races)
        t2 = time.perf_counter()
        call_args, result, want = arrays(name, args.n, rng)
        emu(*call_args)
        ok = np.allclose(result(call_args), want, rtol=1e-4, atol=1e-4)
        best = None
        for _ in range(args.repeat):
            emu(*call_args)
            secs = emu.kernel_seconds
            best = secs if best is None else [min(a, b) for a, b in zip(best, secs)]
        print(f"  lower_gpu {t1 - t0:.2f} s, emulator compile {t2 - t1:.2f} s, "
              f"result {'matches numpy' if ok else 'DIFFERS from numpy'}")
        for k, s in zip(fn.kernels, best):
            print(f"  kernel {k.name}: grid {k.grid}, block {k.block}, "
                  f"shared {k.shared_bytes} B: {s:.4f} s per emulated launch")


if __name__ == "__main__":
    main()
