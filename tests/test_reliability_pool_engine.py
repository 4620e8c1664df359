"""The measurement pool with the real engine: steps are built, checked and timed in workers;
a generated kernel that crashes takes down only its worker; engine errors come back as
sentences."""
from __future__ import annotations

import os

import pytest

import engine
from app.workers import Job, MeasurePool, PoolConfig, step_dict, step_job

N = 32


@pytest.fixture(scope="module")
def pool():
    p = MeasurePool(PoolConfig(workers=2, time_limit_s=30, memory_bytes=2 << 30))
    yield p
    p.close()


def scheduled_mm_relu(n=N):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n))
    b = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return sch


def out_of_bounds_kernel():
    """A program whose kernel reads ~6 GB past its input: the generated code segfaults."""
    from engine import te
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i * 100000000], name="B")
    f = te.create_prim_func([a, b])
    return f if hasattr(f, "names") else engine.IRModule.from_funcs(f)


def test_a_workload_is_built_checked_timed_and_shown(pool):
    r = pool.run(Job(workload="mm_relu", params={"n": N},
                     actions=("compile", "check", "time", "source", "cache")), timeout=120)
    assert r.status == "ok", r
    d = r.data
    assert d["correct"] is True and d["check"]["ok"] is True
    assert d["times"]["median"] > 0 and d["gflops"] > 0 and d["numpy_s"] > 0
    assert d["flops"] == pytest.approx(engine.workloads.info("mm_relu").flops(n=N))
    assert d["cores"] == [d["cores"][0]] and d["parallel"] is False
    assert "define" in d["source"]["ll-opt"] and d["source"]["asm"]
    assert [lv["name"] for lv in d["cache"]["levels"]][:1] == ["L1"]
    assert r.worker_pid != os.getpid()


def test_a_trace_is_replayed_in_the_worker(pool):
    sch = scheduled_mm_relu()
    r = pool.run(Job.for_trace("mm_relu", {"n": N}, sch.trace.as_json(),
                               actions=("compile", "check")), timeout=120)
    assert r.status == "ok" and r.data["correct"] is True


def test_a_bad_trace_is_a_sentence_not_a_crash(pool):
    bad = {"format": "schedule-explorer/trace", "version": 1, "workload": None,
           "insts": [["Split", ["zz", None, 4], [True, False], ["a", "b"]]]}
    r = pool.run(Job.for_trace("mm_relu", {"n": N}, bad), timeout=120)
    assert r.status == "error"
    assert "zz" in r.message and "Traceback" not in r.message
    assert r.detail is None                               # a user error, not an internal one


def test_the_explorer_step_runs_in_a_worker(pool):
    from app.measure import program_hash
    sch = scheduled_mm_relu()
    r = pool.run(step_job(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu"), timeout=120)
    assert r.status == "ok", r
    d = step_dict(r, program_hash(sch.mod))
    assert d["ok"] is True and d["correct"] is True and d["stage"] == "done"
    assert d["hash"] == program_hash(sch.mod) and d["time_ms"] > 0


def test_a_crashing_generated_kernel_leaves_the_pool_serving(pool):
    r = pool.run(Job.for_module(out_of_bounds_kernel(), actions=("compile", "run")), timeout=120)
    assert r.status == "crashed"
    assert "SIGSEGV" in r.message and "the step is kept but not measured" in r.message
    assert r.failed_action == "run"
    assert r.data["compile_s"] > 0                       # the compile before the crash is kept
    ok = pool.run(Job(workload="mm_relu", params={"n": 16}, actions=("compile", "run")),
                  timeout=120)
    assert ok.status == "ok" and ok.data["ran_s"] >= 0


def test_the_crashing_step_through_the_step_seam(pool):
    r = pool.run(step_job(out_of_bounds_kernel(), None, {}, func_name="main"), timeout=120)
    d = step_dict(r, "h")
    # Either the worker dies (SIGSEGV) or measure_step reports the failure: never the server.
    assert d["ok"] is False and d["error"]
    assert pool.run(Job(workload="relu", params={}, actions=("compile",)), timeout=120).ok


@pytest.mark.skipif(not hasattr(__import__("engine.script").script, "parse"),
                    reason="engine.parse not available yet")
def test_program_text_is_parsed_in_the_worker(pool):
    sch = scheduled_mm_relu()
    r = pool.run(Job.for_program(sch.mod.script(), actions=("compile", "source")), timeout=120)
    assert r.status == "ok" and "define" in r.data["source"]["ll-opt"]
    bad = pool.run(Job.for_program("def broken(:\n", actions=("compile",)), timeout=120)
    assert bad.status == "error" and bad.detail is None
