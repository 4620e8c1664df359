"""Speed of the cache simulator: simulated accesses per second, vs valgrind's cachegrind.

Measures, in one run on this machine:

* engine.cache.simulate on mm_relu (naive and course schedule) at n=512 with the host's
  three-level geometry, every access simulated (no sampling): accesses / run time of the
  instrumented kernel (compile time printed separately);
* the compiled simulator on a recorded stream (StreamSimulator), for reference;
* valgrind --tool=cachegrind --cache-sim=yes on the same naive loop nest in C (same D1/LL
  geometry): data references of the kernel / wall time of the whole valgrind run.

Target: at least 250 M accesses/s for engine.cache.simulate.

Rates are given per wall-clock second and per CPU second of the process doing the work (the
instrumented kernel's thread; valgrind's user+system time): on a machine shared with other
jobs, the CPU-time rate is the one that does not depend on how busy the machine is. The
ratio to cachegrind is computed both ways.

Usage: python benchmarks/cache/bench_speed.py [--n 512] [--repeat 3] [--no-cachegrind]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from common import c_program, have_cachegrind, programs, run_cachegrind  # noqa: E402

from engine.cache import StreamSimulator, host_geometry, simulate  # noqa: E402
from engine.lower import lower  # noqa: E402

TARGET = 250e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cachegrind", action="store_true")
    a = ap.parse_args()
    g = host_geometry()
    print(f"geometry ({g.source}): " + "; ".join(lv.describe() for lv in g.levels))
    progs, source = programs(a.n)
    print(f"programs from: {source}")
    best_rate, best_cpu = {}, {}
    for name, mod in progs.items():
        rates, cpus, compiles = [], [], []
        for _ in range(a.repeat):
            r = simulate(mod, "mm_relu", max_accesses=2**62, hardware=False)
            rates.append(r.accesses_per_second)
            cpus.append(r.accesses_per_cpu_second)
            compiles.append(r.compile_seconds)
        best_rate[name], best_cpu[name] = max(rates), max(cpus)
        print(f"simulate mm_relu {name:<7} n={a.n}: {r.simulated_accesses:,} accesses; "
              f"wall: best {max(rates) / 1e6:.0f} M/s, median {np.median(rates) / 1e6:.0f} M/s; "
              f"CPU time: best {max(cpus) / 1e6:.0f} M/s (instrumented build "
              f"{np.median(compiles):.2f} s); L1 misses {r.levels[0].misses:,}", flush=True)

    # sampling: the default access budget vs every access simulated (same arrays)
    from engine.cache.simulate import DEFAULT_MAX_ACCESSES, default_args
    args = default_args(progs["naive"]["mm_relu"])
    for name, mod in progs.items():
        ex = simulate(mod, "mm_relu", args=args, max_accesses=2**62, hardware=False)
        es = simulate(mod, "mm_relu", args=args, hardware=False)
        errs = ", ".join(f"{a.name} {a.misses:,} vs {b.misses:,} ({(a.misses - b.misses) / max(b.misses, 1):+.2%})"
                         for a, b in zip(es.levels, ex.levels))
        print(f"sampled (max_accesses={DEFAULT_MAX_ACCESSES:,}) {name}: {es.sampling_note}; "
              f"{es.simulated_accesses:,} simulated in {es.sim_seconds:.2f} s vs "
              f"{ex.sim_seconds:.2f} s; misses estimated vs exact: {errs}", flush=True)

    # the simulator on a recorded stream (a matrix column walk mixed with a row walk)
    sim = StreamSimulator(None)
    n = 20_000_000
    i = np.arange(n, dtype=np.int64)
    addr = (1 << 30) + np.where(i % 2 == 0, (i * 4) % (1 << 22), ((i * 2048) % (1 << 24)))
    sim.run(addr[:1000])
    t0 = time.perf_counter()
    sim.run(addr, 4, 0)
    st = time.perf_counter() - t0
    print(f"StreamSimulator (addresses read from memory): {n / st / 1e6:.0f} M/s")

    ours, ours_cpu = min(best_rate.values()), min(best_cpu.values())
    if not a.no_cachegrind and have_cachegrind():
        naive = progs["naive"]
        d1, ll = g.levels[0], g.levels[-1]
        cg = run_cachegrind(c_program(lower(naive["mm_relu"]), {}),
                            (d1.size, d1.ways, d1.line), (ll.size, ll.ways, ll.line))
        k, tot = cg["kernel"], cg["total"]
        drefs = k["Dr"] + k["Dw"]
        allrefs = tot["Ir"] + tot["Dr"] + tot["Dw"]
        cg_rate, cg_cpu = drefs / cg["wall"], drefs / cg["cpu"]
        print(f"cachegrind on the same naive nest in C, n={a.n}: {drefs:,} data refs "
              f"({allrefs:,} incl. instruction fetches); wall {cg['wall']:.1f} s = "
              f"{cg_rate / 1e6:.0f} M data refs/s; CPU {cg['cpu']:.1f} s = "
              f"{cg_cpu / 1e6:.0f} M data refs/s ({allrefs / cg['cpu'] / 1e6:.0f} M refs/s "
              "incl. instruction fetches)")
        print(f"ratio engine.cache / cachegrind on the naive nest: "
              f"{best_rate['naive'] / cg_rate:.1f}x (wall), "
              f"{best_cpu['naive'] / cg_cpu:.1f}x (CPU time)")
    print(f"engine.cache.simulate, slower of the two programs: {ours / 1e6:.0f} M accesses/s "
          f"(wall), {ours_cpu / 1e6:.0f} M accesses/s (CPU time) -> "
          f"{'meets' if ours_cpu >= TARGET else 'BELOW'} the {TARGET / 1e6:.0f} M/s target "
          f"per CPU second; {'meets' if ours >= TARGET else 'below'} it per wall second "
          f"at this machine's load (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
