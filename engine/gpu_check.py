"""``python -m engine gpu-check``: the course's GPU chapter on this machine's GPU.

Each of the chapter's four programs (vector add, window sum, GEMM local blocking, GEMM
shared blocking; :mod:`engine.presets.gpu_chapter`) is built for CUDA, checked against
numpy and timed: on the GPU when one exists (the CUDA driver API), measured and modeled
side by side; without one the command says so plainly, runs the kernels in the emulator
(the same lowered kernels on the CPU, with the GPU's barrier semantics) to check them, and
prints the model's figures for the target GPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class CheckResult:
    program: str
    size: int
    ok: bool
    max_error: float
    where: str                 # "GPU <name>" or "emulator"
    measured_s: float | None
    modeled_s: float
    flops: int
    resources: list

    def gflops(self, seconds: float | None) -> float | None:
        return self.flops / seconds / 1e9 if seconds else None


def chapter_inputs(program: str, n: int, rng: np.random.Generator) -> tuple[list, Callable]:
    f32 = np.float32
    if program == "vector_add":
        a, b = rng.random(n, f32), rng.random(n, f32)
        return [a, b, np.zeros(n, f32)], lambda: a + b
    if program == "window_sum":
        a = rng.random(n + 2, f32)
        return [a, np.zeros(n, f32)], lambda: a[:-2] + a[1:-1] + a[2:]
    a, b = rng.random((n, n), f32), rng.random((n, n), f32)
    return [a, b, np.zeros((n, n), f32)], lambda: a.astype(np.float64) @ b.astype(np.float64)


def check_program(program: str, n: int, target: Any, seed: int = 0) -> CheckResult:
    """Build one chapter program at size ``n`` for ``target``, run it (GPU or emulator),
    compare with numpy and time it (measured on a GPU; modeled always)."""
    from engine.gpu.build import build_gpu
    from engine.presets.gpu_chapter import PROGRAMS
    make, flops = PROGRAMS[program]
    sch = make(n)
    rt = build_gpu(sch.mod, target)
    arrays, reference = chapter_inputs(program, n, np.random.default_rng(seed))
    rt["main"](*arrays)
    want = reference()
    err = float(np.max(np.abs(arrays[-1] - want))) if want.size else 0.0
    tol = 1e-3 * max(1.0, float(np.max(np.abs(want)))) if program.startswith("gemm") else 1e-5
    ok, why = rt.device_status()
    measured = None
    if ok:
        measured = rt.time_evaluator("main", number=10, repeat=3)(*arrays).mean
    modeled = rt.model("main").time_s
    return CheckResult(program, n, err <= tol, err, f"GPU {why}" if ok else "emulator",
                       measured, modeled, flops(n), rt.resources())


def _gpu_target(gpu: str | None) -> tuple[Any, str]:
    """The target: a named GPU, else the device's architecture when there is one, else the
    default GPU's; and the device sentence."""
    from engine.gpu.driver import cuda_available
    from engine.gpu.target import Target
    ok, why = cuda_available()
    if gpu:
        return Target(f"cuda -model={gpu}"), why
    if ok:
        from engine.gpu.driver import device_info
        info = device_info(0)
        major, minor = info.compute_capability
        return Target(f"cuda -arch=sm_{major}{minor}"), why
    return Target("cuda"), why


def run(size: int = 1024, gpu: str | None = None, programs: list | None = None,
        out: Any = None) -> int:
    """Check the chapter's programs and print one line each; 0 when every result matches
    numpy, 1 otherwise."""
    from engine.presets.gpu_chapter import PROGRAMS
    write = (out.write if out is not None else print)
    target, why = _gpu_target(gpu)
    ok_device = not why.startswith("no CUDA device")
    write(f"GPU: {why}\n" if ok_device else
          f"{why}\nThe kernels run in the emulator (on this CPU, with the GPU's barrier "
          f"semantics) and their times are modeled for {target.spec.display_name}.\n")
    write(f"target: {target}\n")
    failed = 0
    for name in programs or list(PROGRAMS):
        t0 = time.perf_counter()
        try:
            r = check_program(name, size, target)
        except Exception as e:  # noqa: BLE001 - one line per program, never a traceback
            write(f"{name:12s} n={size}: FAILED to build or run: {type(e).__name__}: {e}\n")
            failed += 1
            continue
        secs = time.perf_counter() - t0
        res = r.resources[0] if r.resources else {}
        parts = [f"{name:12s} n={size}: {'matches numpy' if r.ok else 'WRONG'} "
                 f"(max error {r.max_error:.2e}, {r.where}, {secs:.1f} s)"]
        if r.measured_s is not None:
            parts.append(f"measured {r.measured_s * 1e6:.1f} µs = "
                         f"{r.gflops(r.measured_s):.1f} GFLOP/s")
        parts.append(f"modeled {r.modeled_s * 1e6:.1f} µs = {r.gflops(r.modeled_s):.1f} "
                     f"GFLOP/s on {target.spec.display_name}")
        if res:
            parts.append(f"registers {res['registers']}, shared {res['shared_bytes']} B, "
                         f"occupancy {res['occupancy']:.0%}")
        write("; ".join(parts) + "\n")
        failed += not r.ok
    return 1 if failed else 0
