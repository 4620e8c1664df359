"""What several benchmarks print or set the same way: the BLAS numpy runs, and the
``--cpu-time`` mode (one thread on each side, the process's CPU time as the clock)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np


def blas_info() -> str:
    """The BLAS numpy calls: library, version, threads and core kernel (threadpoolctl),
    else what numpy was built with."""
    try:
        from threadpoolctl import threadpool_info
        infos = sorted({f"{i.get('internal_api')} {i.get('version')} "
                        f"({i.get('num_threads')} threads, kernel {i.get('architecture')})"
                        for i in threadpool_info() if i.get("user_api") == "blas"})
        if infos:
            return "; ".join(infos)
    except ImportError:
        pass
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name')} {blas.get('version')} (from numpy.show_config)"
    except Exception:  # noqa: BLE001
        return "unknown BLAS (install threadpoolctl for details)"


def one_thread_cpu_clock() -> Callable[[], float]:
    """Set the engine's thread pool and OpenBLAS to one thread each, say so, and return the
    process's CPU clock: per-core figures that a machine loaded by other work changes
    little (CPU seconds do not count the time a thread waits for a core)."""
    from threadpoolctl import threadpool_limits

    from engine.runtime import set_num_threads
    set_num_threads(1)
    threadpool_limits(1)
    print("one thread each (engine and OpenBLAS), CPU time of the process")
    return time.process_time
