"""The measurement pool with the real engine: steps are built, checked and timed in workers;
a generated kernel that crashes takes down only its worker; engine errors come back as
sentences."""
from __future__ import annotations

import os

import pytest

import engine
from app.service import Job, MeasurePool, PoolConfig, StepMeasurer, step_dict, step_job

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


def crashing_kernel():
    """A kernel whose generated code raises SIGSEGV when it runs (libc's ``raise(11)``
    through ``call_extern``, which only the server's own IR can name: an out-of-bounds
    program is refused at build time now, see tests/test_lower_bounds.py)."""
    from engine.ir import Buffer, Evaluate
    from engine.ir import expr as E
    a = Buffer("A", (E.IntImm("int32", 16),), "float32")
    call = E.Call("int32", "call_extern", (E.StringImm("raise"), E.IntImm("int32", 11)))
    f = engine.PrimFunc("main", (a,), Evaluate(call), (("global_symbol", "main"),))
    return engine.IRModule.from_funcs(f)


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
    program_hash = StepMeasurer.program_hash
    sch = scheduled_mm_relu()
    r = pool.run(step_job(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu"), timeout=120)
    assert r.status == "ok", r
    d = step_dict(r, program_hash(sch.mod))
    assert d["ok"] is True and d["correct"] is True and d["stage"] == "done"
    assert d["hash"] == program_hash(sch.mod) and d["time_ms"] > 0


def test_a_crashing_generated_kernel_leaves_the_pool_serving(pool):
    r = pool.run(Job.for_module(crashing_kernel(), actions=("compile", "run")), timeout=120)
    assert r.status == "crashed"
    assert "SIGSEGV" in r.message and "the step is kept but not measured" in r.message
    assert r.failed_action == "run"
    assert r.data["compile_s"] > 0                       # the compile before the crash is kept
    ok = pool.run(Job(workload="mm_relu", params={"n": 16}, actions=("compile", "run")),
                  timeout=120)
    assert ok.status == "ok" and ok.data["ran_s"] >= 0


def test_the_crashing_step_through_the_step_seam(pool):
    r = pool.run(step_job(crashing_kernel(), None, {}, func_name="main"), timeout=120)
    d = step_dict(r, "h")
    # Either the worker dies (SIGSEGV) or measure_step reports the failure: never the server.
    assert d["ok"] is False and d["error"]
    assert pool.run(Job(workload="relu", params={}, actions=("compile",)), timeout=120).ok


def test_program_text_is_parsed_in_the_worker(pool):
    sch = scheduled_mm_relu()
    r = pool.run(Job.for_program(sch.mod.script(), actions=("compile", "source")), timeout=120)
    assert r.status == "ok" and "define" in r.data["source"]["ll-opt"]
    bad = pool.run(Job.for_program("def broken(:\n", actions=("compile",)), timeout=120)
    assert bad.status == "error" and bad.detail is None


# --------------------------------------------------------------------------- pool + store
def test_measurer_stores_results_and_reuses_them(pool, tmp_path):
    from app.store import Store
    store = Store(str(tmp_path / "s.sqlite3"))
    m = StepMeasurer(pool, store, fingerprint="fp")
    sch = scheduled_mm_relu()
    before = pool.stats()["submitted"]
    d1 = m.measure(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu", timeout=120)
    assert d1["ok"] is True and d1["correct"] is True
    assert wait_for(lambda: store.count_results() == 1)
    d2 = m.measure(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu", timeout=120)
    assert d2 == d1 and (m.hits, m.misses) == (1, 1)
    assert pool.stats()["submitted"] == before + 1

    # After a "restart" (new measurer, same file), the step is answered without any worker.
    def no_pool():
        raise AssertionError("the pool should not be needed")
    m2 = StepMeasurer(no_pool, Store(str(tmp_path / "s.sqlite3")), fingerprint="fp")
    assert m2.measure(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu") == d1
    # Another machine (fingerprint) or other sizes are measured anew.
    assert m2.cached(sch.mod, "mm_relu", {"n": N}, func_name="mm_relu") == d1
    assert StepMeasurer(pool, store, fingerprint="other").cached(
        sch.mod, "mm_relu", {"n": N}, func_name="mm_relu") is None


def test_measurer_shares_one_job_between_concurrent_requests(pool):
    m = StepMeasurer(pool, None)
    mod = scheduled_mm_relu(48).mod
    _, t1 = m.submit(mod, "mm_relu", {"n": 48}, func_name="mm_relu")
    _, t2 = m.submit(mod, "mm_relu", {"n": 48}, func_name="mm_relu")
    assert t1 is t2 or t1.done()
    assert m.result_of(t1, 120)["ok"] is True


def test_transient_failures_are_not_stored(pool, tmp_path):
    from app.store import Store
    store = Store(str(tmp_path / "s.sqlite3"))
    m = StepMeasurer(pool, store, fingerprint="fp")
    d, t = m.submit(scheduled_mm_relu(44).mod, "mm_relu", {"n": 44}, func_name="mm_relu",
                    time_limit_s=0.0)
    res = m.result_of(t, 60)
    assert res["ok"] is False and res["status"] == "timeout"
    assert "longer than 0 s" in res["error"]
    assert store.count_results() == 0


def test_install_wires_limits_store_and_a_lazy_pool(tmp_path):
    from flask import Flask

    from app.limits import Limits
    from app.service import install
    app = Flask("t", instance_path=str(tmp_path / "inst"))
    app.config["EXPLORER_LIMITS"] = {"queue_length": 3}
    app.config["EXPLORER_POOL"] = {"workers": 1}
    m = install(app)
    assert isinstance(m, StepMeasurer) and app.extensions["measurer"] is m
    assert app.extensions["limits"] == Limits(queue_length=3)
    assert app.extensions["store"].path.startswith(str(tmp_path / "inst"))
    assert not m.started                                   # nothing started yet
    try:
        d = m.measure(engine.workloads.get("relu"), "relu", {}, timeout=120)
        assert d["ok"] is True
        assert m.pool.config.queue_length == 3 and len(m.pool.worker_pids()) == 1
    finally:
        m.pool.close()


def wait_for(pred, timeout=30.0):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_measurer_cache_and_source_services(pool, tmp_path):
    from app.store import Store
    store = Store(str(tmp_path / "s.sqlite3"))
    m = StepMeasurer(pool, store, fingerprint="fp")
    mod = scheduled_mm_relu().mod
    rep = m.cache(mod, "mm_relu", timeout=120)
    assert [lv["name"] for lv in rep["levels"]][:1] == ["L1"] and "error" not in rep
    text, err = m.source(mod, "asm", timeout=120)
    assert err is None and text
    ir, err = m.source(mod, "ll-opt", timeout=120)
    assert err is None and "define" in ir
    assert wait_for(lambda: store.count_results() == 2)
    assert m.source(mod, "ll-opt")[0] == ir                 # from the store now
    bad, err = m.source(crashing_kernel(), "nonsense-kind", timeout=120)
    assert bad is None and err


def test_measurer_without_workers_says_so_and_retries():
    calls = []

    def broken_pool():
        calls.append(1)
        raise OSError("cannot fork")
    m = StepMeasurer(broken_pool, None)
    d = m.measure(scheduled_mm_relu().mod, "mm_relu", {"n": N})
    assert d["ok"] is False and d["stage"] == "unavailable"
    assert "could not be started (cannot fork)" in d["error"]
    assert m.cache(scheduled_mm_relu().mod)["error"].startswith("the measurement workers")
    assert m.source(scheduled_mm_relu().mod)[1].startswith("the measurement workers")
    assert len(calls) == 3                                # tried again each time


def test_prefetch_starts_jobs_the_pane_then_shares(pool, tmp_path):
    from app.store import Store
    m = StepMeasurer(pool, Store(str(tmp_path / "s.sqlite3")), fingerprint="fp")
    mod = scheduled_mm_relu(40).mod
    before = pool.stats()["submitted"]
    m.prefetch(mod, "mm_relu", {"n": 40}, func_name="mm_relu")
    assert pool.stats()["submitted"] == before + 2          # the step and its cache simulation
    d = m.measure(mod, "mm_relu", {"n": 40}, func_name="mm_relu", timeout=120)
    c = m.cache(mod, "mm_relu", timeout=120)
    assert d["ok"] is True and "levels" in c
    assert pool.stats()["submitted"] == before + 2          # nothing measured twice
