"""The exported MLP: its size (code + weights), load time and time per call, against numpy and
the engine's own virtual machine, measured in the same run.

::

    .venv/bin/python benchmarks/bench_export.py [--batch 1] [--stage unscheduled]

For each model (the course's MLP with its trained weights, as written and in the model page's
``fused+scheduled`` stage):

* export: seconds of ``ex.export_library`` (plan, kernels, entry points, link);
* size: the file, its code (``.text``), its weights (``.rodata`` holds them), NEEDED;
* load: a fresh Python process (numpy imported first, not counted) times
  ``NativeLibrary(path)`` — ``dlopen`` and the metadata read — and the first call;
* per call (best of adaptive repeats, :func:`engine.runtime.timing.time_until_stable`):
  the library through ``NativeLibrary`` (checks + ctypes), the bare C entry point through
  ctypes on fixed pointers, the engine's ``vm["main"]``, and numpy's ``forward``; ratios
  against numpy.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine  # noqa: E402
from engine import relax  # noqa: E402
from engine.deploy import NativeLibrary  # noqa: E402
from engine.deploy import loader as loader_module  # noqa: E402
from engine.models.course import mlp_module  # noqa: E402
from engine.models.mlp import forward, trained_mlp  # noqa: E402
from engine.models.pipeline import stage_module  # noqa: E402
from engine.runtime.timing import time_until_stable  # noqa: E402

LOAD_SCRIPT = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from loader import NativeLibrary
x = np.load(sys.argv[3])
t0 = time.perf_counter()
lib = NativeLibrary(sys.argv[1])
t1 = time.perf_counter()
lib["main"](x)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "first_call_s": t2 - t1}))
"""


def section_sizes(path: Path) -> dict:
    """Bytes of the library's sections by name (readelf -S)."""
    out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("["):
            continue
        parts = line.split("]", 1)[1].split()
        if len(parts) >= 5 and parts[0].startswith("."):
            sizes[parts[0]] = int(parts[4], 16)
    return sizes


def needed(path: Path) -> list:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [ln.split("[", 1)[1].split("]")[0] for ln in out.splitlines() if "(NEEDED)" in ln]


def load_times(path: Path, x: np.ndarray, runs: int) -> dict:
    """Best of ``runs`` fresh processes: NativeLibrary(path) and the first call."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "load.py"
        script.write_text(LOAD_SCRIPT)
        xs = Path(tmp) / "x.npy"
        np.save(xs, x)
        best = None
        for _ in range(runs):
            proc = subprocess.run([sys.executable, str(script), str(path),
                                   str(Path(loader_module.__file__).parent), str(xs)],
                                  capture_output=True, text=True, check=True,
                                  cwd=tmp)
            got = json.loads(proc.stdout)
            if best is None or got["load_s"] < best["load_s"]:
                best = got
    return best


def bare_call(lib: NativeLibrary, x: np.ndarray, out: np.ndarray):
    """The C entry point on fixed pointers (what a C caller pays, plus one ctypes call)."""
    fn = getattr(lib._dll, lib.metadata["functions"]["main"]["symbol"])
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    px, po = x.ctypes.data, out.ctypes.data
    return lambda: fn(px, po)


def bench(label: str, mod, mlp, batch: int, workdir: Path, load_runs: int) -> None:
    ex = relax.build(mod, target="llvm")
    path = workdir / f"{label.replace('+', '_')}.so"
    t0 = time.perf_counter()
    record = ex.export_library(path, prefix="mlp")
    export_s = time.perf_counter() - t0
    secs = section_sizes(path)
    weights = record.constants_bytes
    x = np.ascontiguousarray(mlp.data.test_images[:batch].reshape(batch, 784), "float32")
    lib = NativeLibrary(path)
    vm = relax.VirtualMachine(ex, engine.cpu())
    want = forward(mlp.params, x)
    err = float(np.abs(lib["main"](x) - want).max())
    out = np.empty((batch, 10), "float32")
    loads = load_times(path, x, load_runs)
    per = {
        "numpy": time_until_stable(lambda: forward(mlp.params, x), min_repeats=5),
        "library (NativeLibrary)": time_until_stable(lambda: lib["main"](x), min_repeats=5),
        "library (bare C call)": time_until_stable(bare_call(lib, x, out), min_repeats=5),
        "engine VM": time_until_stable(lambda: vm["main"](x), min_repeats=5),
    }
    print(f"\n== {label}, batch {batch} ==")
    print(f"export_library: {export_s * 1e3:.0f} ms  (plan {record.seconds['plan'] * 1e3:.0f}, "
          f"kernels {record.seconds['kernels'] * 1e3:.0f}, entry points "
          f"{record.seconds['entry_points'] * 1e3:.0f}, link+header "
          f"{record.seconds['link'] * 1e3:.0f} ms)")
    print(f"file: {record.file_bytes / 1024:.1f} KiB = code (.text) "
          f"{secs.get('.text', 0) / 1024:.1f} KiB + weights {weights / 1024:.1f} KiB "
          f"(.rodata {secs.get('.rodata', 0) / 1024:.1f} KiB) + ELF tables; "
          f"NEEDED {needed(path) or 'nothing'}")
    print(f"load (fresh process, best of {load_runs}): NativeLibrary(path) "
          f"{loads['load_s'] * 1e3:.2f} ms, first call {loads['first_call_s'] * 1e3:.3f} ms")
    print(f"max |library - numpy| = {err:.2e}")
    ref = per["numpy"]
    for name, s in per.items():
        print(f"  {name:26s} {s * 1e6:9.1f} us/call   {ref / s:5.2f}x numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--load-runs", type=int, default=5)
    args = ap.parse_args()
    mlp = trained_mlp()
    from engine.deploy.metadata import engine_version
    print(f"engine {engine_version()}; threads: ENGINE_NUM_THREADS="
          f"{os.environ.get('ENGINE_NUM_THREADS', 'unset')}, cpus {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = mlp_module(args.batch, mlp.params)
        bench("course MLP (as written)", base, mlp, args.batch, work, args.load_runs)
        fused, _ = stage_module(base, "fused+scheduled")
        bench("fused+scheduled", fused, mlp, args.batch, work, args.load_runs)


if __name__ == "__main__":
    main()
