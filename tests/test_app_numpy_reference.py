"""numpy's reference runs on as many threads as the kernel it is compared with."""
from __future__ import annotations

import json

import engine
from app.service import timing
from app.web import plots
from engine.runtime import runtime_info


def _course(n=16):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n))
    blk = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(blk)
    return sch, i


def test_serial_kernel_gets_one_blas_thread_and_parallel_kernel_the_pool():
    sch, i = _course()
    serial = timing.measure_step(sch.mod, "mm_relu", {"n": 16})
    assert serial["correct"] and serial["numpy_threads"] == 1
    sch.parallel(i)
    par = timing.measure_step(sch.mod, "mm_relu", {"n": 16})
    pool = runtime_info()["pool_size"]
    assert par["correct"] and par["numpy_threads"] == pool
    if timing._blas_local_setter() is not None:
        assert par["numpy_note"] == f"{pool} BLAS thread{'s' if pool != 1 else ''}"
        assert serial["numpy_note"] == "1 BLAS thread"


def test_runtime_plot_draws_one_numpy_line_per_thread_count():
    rows = [{"step": 0, "time_ms": 5.0, "gflops": 1.0, "numpy_ms": 2.0, "numpy_threads": 1,
             "correct": True},
            {"step": 1, "time_ms": 1.0, "gflops": 5.0, "numpy_ms": 1.2, "numpy_threads": 2,
             "correct": True}]
    fig = json.loads(plots.runtime_figure(rows, current=1))
    names = [d["name"] for d in fig["data"] if d["name"].startswith("numpy")]
    assert names == ["numpy, 1 thread: 2 ms", "numpy, 2 threads: 1.2 ms"]
    one = json.loads(plots.runtime_figure(rows[:1], current=0))
    assert [d["name"] for d in one["data"] if d["name"].startswith("numpy")] == \
        ["numpy 2.000 ms"]
