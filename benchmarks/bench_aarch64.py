"""The ARM board target: the course's MLP and two kernels exported for aarch64 and run on this
machine under qemu-aarch64, against numpy and against the same code exported for this
machine, measured in the same run.

::

    .venv/bin/python benchmarks/bench_aarch64.py [--images 32] [--repeat 50]

For the course's MLP (trained weights; as written and in the model page's
``fused+scheduled`` stage sized for the board, NEON's 4 lanes):

* export: seconds of ``ex.export_library(..., target="raspberry-pi-5")``; the file's size,
  its code (``.text``) and weights (``.rodata``), NEEDED (readelf);
* accuracy under qemu on the first ``--images`` test images: the largest difference from
  numpy's ``forward`` and how many predictions agree with numpy's;
* time per inference under the emulator (``--repeat`` calls in one qemu run, after a warm
  call) and natively (the same model exported for this machine, through ctypes): the ratio
  is the emulator's cost, not an ARM board's speed.

Then mm_relu (n=128, j split by 4 and vectorized, i parallel) and the conv2d-tiled preset:
the emulated time against the native one, and their largest difference from numpy.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine  # noqa: E402
from engine import presets, relax, workloads  # noqa: E402
from engine.deploy import NativeLibrary  # noqa: E402
from engine.deploy.qemu import measure_under_qemu, run_under_qemu  # noqa: E402
from engine.models.course import mlp_module  # noqa: E402
from engine.models.mlp import forward, trained_mlp  # noqa: E402
from engine.models.pipeline import stage_module  # noqa: E402
from engine.runtime.timing import time_until_stable  # noqa: E402
from engine.schedule import Schedule  # noqa: E402

BOARD = "raspberry-pi-5"


def sections(path: Path) -> dict:
    """Bytes of .text and .rodata (readelf -S -W)."""
    out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        for name in (".text", ".rodata"):
            if name in parts:
                i = parts.index(name)
                sizes[name] = int(parts[i + 4], 16)
    return sizes


def needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "NEEDED" in line]


def bench_mlp(stage: str, mlp, images: np.ndarray, repeat: int, work: Path) -> None:
    mod, _ = stage_module(mlp_module(1, mlp.params), stage, BOARD)
    ex = relax.build(mod, target="llvm")
    t0 = time.perf_counter()
    lib = ex.export_library(work / f"mlp-{stage}-arm.so", target=BOARD)
    export_s = time.perf_counter() - t0
    host = ex.export_library(work / f"mlp-{stage}-host.so")
    sec = sections(lib.path)
    print(f"\nMLP, {stage} (sized for {BOARD})")
    print(f"  export for {BOARD}: {export_s:.2f} s; file {lib.path.stat().st_size / 1024:.0f} "
          f"KiB (.text {sec.get('.text', 0) / 1024:.1f} KiB, .rodata "
          f"{sec.get('.rodata', 0) / 1024:.0f} KiB; weights {lib.constants_bytes / 1024:.0f} "
          f"KiB); NEEDED {', '.join(needed(lib.path))}")
    worst, agree = 0.0, 0
    t0 = time.perf_counter()
    for x in images:
        x = x.reshape(1, -1).astype(np.float32)
        out, = run_under_qemu(lib.path, "main", [x])
        want = forward(mlp.params, x)
        worst = max(worst, float(np.abs(out - want).max()))
        agree += int(out.argmax() == want.argmax())
    per_image_s = (time.perf_counter() - t0) / len(images)
    print(f"  under qemu on {len(images)} test images: max |difference| from numpy "
          f"{worst:.2e}, {agree}/{len(images)} predictions as numpy's "
          f"({per_image_s * 1e3:.0f} ms wall per image: qemu start, load, one call)")
    x = images[0].reshape(1, -1).astype(np.float32)
    emulated = measure_under_qemu(lib.path, "main", [x], repeat=repeat).seconds_per_call
    native_lib = NativeLibrary(host.path)
    native = time_until_stable(lambda: native_lib["main"](x))
    print(f"  per inference: emulated {emulated * 1e3:.3f} ms, native (this machine) "
          f"{native * 1e3:.4f} ms; emulated / native = {emulated / native:.0f}x")


def mm_relu(n: int):
    sch = Schedule(workloads.get("mm_relu", n=n))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    return sch.mod


def bench_kernel(title: str, workload: str, mod, params: dict, repeat: int,
                 work: Path) -> None:
    fname = workloads.info(workload).func_name
    n_in = workloads.info(workload).num_inputs
    args = [np.array(a) for a in workloads.random_args(workload, 0, **params)]
    want = workloads.reference(workload, **params)(*args[:n_in])
    lib = engine.build(mod, target=BOARD).export_library(work / f"{workload}-arm.so")
    run = measure_under_qemu(lib.path, fname, args[:n_in], repeat=repeat)
    err = float(np.abs(run.outputs[0] - want).max())
    rt = engine.build(mod)
    out = [a.copy() for a in args]
    native = time_until_stable(lambda: rt[fname](*out))
    print(f"\n{title}: under qemu max |difference| from numpy {err:.2e}; per call emulated "
          f"{run.seconds_per_call * 1e3:.3f} ms, native {native * 1e3:.4f} ms "
          f"(emulated / native = {run.seconds_per_call / native:.0f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    mlp = trained_mlp()
    images = mlp.data.test_images[:args.images]
    with tempfile.TemporaryDirectory(prefix="bench-aarch64-") as tmp:
        work = Path(tmp)
        for stage in ("unscheduled", "fused+scheduled"):
            bench_mlp(stage, mlp, images, args.repeat, work)
        bench_kernel("mm_relu n=128 (j by 4 vectorized, i parallel)", "mm_relu",
                     mm_relu(128), {"n": 128}, args.repeat, work)
        conv = dict(batch=1, in_channels=16, out_channels=16, size=32, kernel=3, pad=1,
                    stride=1)
        bench_kernel("conv2d-tiled preset (16x16 channels, 32x32)", "conv2d",
                     presets.get("conv2d-tiled", **conv).mod, conv, args.repeat, work)


if __name__ == "__main__":
    main()
