"""The machine's roofline, measured by engine-compiled kernels, and where the presets sit.

    python benchmarks/bench_roofline.py

Prints
* the FMA-throughput peak (GFLOP/s) and streaming-copy bandwidth (GB/s) measured by
  :mod:`engine.roofline` (kernels written as engine TVMScript, compiled by engine.build,
  parallel over all pool threads), each beside a reference measured in the same run with
  numpy: ``np.copyto`` on the same arrays for the bandwidth, and ``A @ B`` (OpenBLAS,
  n=2048) as a lower bound of the reachable GFLOP/s;
* the single-thread peak, and the 1 -> N thread ratio of both roofs;
* for every preset: arithmetic intensity, achieved GFLOP/s, the roof at that intensity and
  the fraction reached (the data the web app plots).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.runtime.timing import time_until_stable  # noqa: E402

import engine  # noqa: E402
from engine import presets, roofline  # noqa: E402
from engine.runtime import as_aligned, runtime_info, set_num_threads  # noqa: E402


def best(fn, repeat: int = 7) -> float:
    """Best seconds per call by the engine's one timing function."""
    return time_until_stable(fn, warmups=1, min_repeats=max(3, repeat))


def main() -> None:
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(f"note: {var}={os.environ[var]} is set (numpy's reference may be slower)")
    pool = int(runtime_info()["pool_size"])
    print(f"engine pool {pool} threads; load average {os.getloadavg()[0]:.2f}")
    pk = roofline.machine_peaks()
    print(f"peak (FMA kernel):        {pk['peak_gflops']:8.1f} GFLOP/s  ({pk['threads']} threads)")
    print(f"bandwidth (stream copy):  {pk['bandwidth_gbs']:8.1f} GB/s     "
          f"(64 MiB -> 64 MiB, read + write counted)")
    print(f"ridge point:              {pk['ridge_intensity']:8.1f} flop/byte")

    # numpy references in the same run
    floats = 64 * (1 << 20) // 4
    a = as_aligned(np.ones(floats, np.float32))
    b = as_aligned(np.zeros(floats, np.float32))
    t = best(lambda: np.copyto(b, a))
    print(f"numpy np.copyto, same size: {2 * a.nbytes / t / 1e9:6.1f} GB/s  "
          f"(ours / numpy = {pk['bandwidth_gbs'] / (2 * a.nbytes / t / 1e9):.2f})")
    n = 2048
    x = np.random.default_rng(0).random((n, n), dtype=np.float32)
    t = best(lambda: x @ x, 3)
    g = 2 * n ** 3 / t / 1e9
    print(f"numpy A @ A, n={n}:       {g:8.1f} GFLOP/s  (peak / numpy = "
          f"{pk['peak_gflops'] / g:.2f}; a measured peak must be >= what BLAS reaches)")

    if pool >= 2:
        set_num_threads(1)
        one = roofline.measure_peak_gflops(threads=1)
        bw1 = roofline.measure_bandwidth_gbs()
        set_num_threads(pool)
        print(f"1 thread: peak {one['gflops']:.1f} GFLOP/s, bandwidth {bw1['gbs']:.1f} GB/s -> "
              f"{pool} threads: x{pk['peak_gflops'] / one['gflops']:.2f} peak, "
              f"x{pk['bandwidth_gbs'] / bw1['gbs']:.2f} bandwidth")
    print()
    print(f"  {'preset':<16} {'flop/B':>8} {'GFLOP/s':>9} {'roof':>8} {'bound':>8} {'of roof':>8}")
    for p in presets.all_presets():
        params = p.resolved_params()
        sch = p.schedule()
        rt = engine.build(sch.mod)
        args = [as_aligned(z) for z in engine.workloads.random_args(p.workload, **params)]
        fn = rt[engine.workloads.info(p.workload).func_name]
        t = best(lambda: fn(*args), 5)
        pt = roofline.point(p.workload, params, t, peaks=pk)
        print(f"  {p.name:<16} {pt['intensity']:8.1f} {pt['gflops']:9.1f} "
              f"{pt['attainable_gflops']:8.1f} {pt['bound']:>8} {pt['fraction_of_roof']:8.0%}")


if __name__ == "__main__":
    main()
