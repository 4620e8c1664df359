"""The web app as ``create_app`` wires it for the real server: measurements, cache simulation,
code text and access patterns come from worker processes (app.service), never from the web
process. A crashing or endless generated kernel is reported on its step while the app keeps
serving, a pending step shows "queued (position k)" and polls, results come back from the
store after a restart, and sizes over the budgets are refused or "simulate only"."""
from __future__ import annotations

import os
import re
import time

import pytest

import app as app_pkg

CRASH = '''@T.prim_func
def oob(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "oob", "tir.noalias": True})
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi * 100000000]
'''

ENDLESS = '''@T.prim_func
def slow(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "slow", "tir.noalias": True})
    for i, j, k in T.grid(100000, 100000, 100000):
        with T.block("B"):
            vi = T.axis.spatial(4, i % 4)
            vj = T.axis.reduce(100000, j)
            vk = T.axis.reduce(100000, k)
            B[vi] = B[vi] + A[vi]
'''

HX = {"HX-Request": "true"}
STEP_LIMIT_S = 6


def _no_compiling_here(mp):
    """Make any compilation in this (the web) process fail loudly."""
    import llvmlite.binding as llvm

    import engine.runtime

    def refuse(*a, **k):
        raise AssertionError("the web process compiled a program")
    mp.setattr(engine.runtime, "build", refuse)
    mp.setattr(llvm, "parse_assembly", refuse)


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    return str(tmp_path_factory.mktemp("instance"))


@pytest.fixture(scope="module")
def wired(instance):
    mp = pytest.MonkeyPatch()
    app = app_pkg.create_app({
        "TESTING": True,
        "EXPLORER_INSTANCE": instance,
        # short enough for the endless kernel's test, long enough for a real n=16 step
        # (compile + check + cache simulation) on a loaded 2-core machine
        "EXPLORER_LIMITS": {"step_time_limit_s": STEP_LIMIT_S},
        "EXPLORER_POOL": {"workers": 2, "allow_debug": True},
    })
    m = app.extensions["measurer"]
    _no_compiling_here(mp)
    try:
        yield app.test_client(), m
    finally:
        if m.started:
            m.pool.close(5)
        mp.undo()


def text_of(r) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.get_data(as_text=True)))


def custom_url(client, program: str) -> str:
    r = client.post("/explore/custom", data={"program": program})
    assert r.status_code == 303, text_of(r)[:300]
    return r.headers["Location"]


def settled(client, url: str, polls: int = 400):
    """GET a pane until it stops polling (no ``-pending`` element); returns the response."""
    for _ in range(polls):
        r = client.get(url, headers=HX)
        assert r.status_code == 200, text_of(r)[:300]
        if "-pending" not in r.get_data(as_text=True):
            return r
        time.sleep(0.25)
    raise AssertionError(f"{url} still pending: {text_of(r)[:300]}")


def test_the_real_server_configuration_measures_in_workers(wired):
    client, m = wired
    from app.service import MeasurePool, StepMeasurer
    assert isinstance(m, StepMeasurer) and isinstance(m.pool, MeasurePool)
    assert all(pid != os.getpid() for pid in m.pool.worker_pids())
    # python -m app builds the same app (no TESTING): its measurer starts worker processes
    # on first use, and nothing else in the app measures
    plain = app_pkg.create_app({"EXPLORER_STORE": False})
    assert isinstance(plain.extensions["measurer"], StepMeasurer)
    assert not plain.extensions["measurer"].started


def test_out_of_bounds_kernel_is_refused_and_the_app_keeps_serving(wired):
    """A pasted kernel that reads far past its input used to crash its worker; it is now
    refused at build time (the bounds proof), in the worker, and no worker dies. (A crashing
    kernel taking down only its worker: tests/test_reliability_pool_engine.py.)"""
    client, m = wired
    url = custom_url(client, CRASH)
    crashes = m.pool.stats().get("crashes", 0)
    r = settled(client, url.replace("/explore/custom?", "/explore/custom/measure?"))
    assert "A[i * 100000000] may read past the end of A" in text_of(r)
    assert "matches numpy" not in text_of(r)
    assert m.pool.stats().get("crashes", 0) == crashes
    ok = settled(client, "/explore/mm_relu/measure?n=16")
    assert "matches numpy" in text_of(ok)
    code = client.get("/explore/mm_relu/code?n=16&kind=ll-opt", headers=HX)
    assert code.status_code == 200 and "define" in code.get_data(as_text=True)


def test_endless_kernel_is_cut_at_the_time_limit(wired):
    client, m = wired
    url = custom_url(client, ENDLESS)
    r = settled(client, url.replace("/explore/custom?", "/explore/custom/measure?"))
    assert (f"this step took longer than {STEP_LIMIT_S} s — measurement skipped, the trace is kept"
            in text_of(r))
    assert m.pool.stats()["timeouts"] >= 1
    assert "matches numpy" in text_of(settled(client, "/explore/relu/measure?m=8&n=8"))


def test_a_waiting_step_shows_its_queue_position_and_polls(wired, monkeypatch):
    client, m = wired
    from app.service import Job
    from app.web import measuring
    monkeypatch.setattr(measuring, "STEP_BUDGET_S", 0.0)     # answer at once, do not wait
    pool = m.pool
    # occupy both workers, then one more job ahead in the queue
    busy = [pool.submit(Job.debug("sleep", 2.0)) for _ in range(3)]
    submitted = pool.stats()["submitted"]
    url = "/explore/transpose/measure?m=24&n=40"
    page = client.get(url, headers=HX).get_data(as_text=True)
    assert re.search(r"Step 0: queued \(position [1-9]\)", page), page[:500]
    assert 'hx-trigger="load delay:1s"' in page and 'id="measure-pending"' in page
    assert pool.stats()["submitted"] == submitted + 1
    # the repeat call (what the page's poll does) shares the job
    client.get(url, headers=HX)
    assert pool.stats()["submitted"] == submitted + 1
    for t in busy:
        t.result(60)
    assert "Step 0:" in text_of(settled(client, url))
    assert pool.stats()["submitted"] == submitted + 1


def test_cache_code_and_pattern_panes_come_from_workers(wired):
    client, _ = wired
    page = text_of(settled(client, "/explore/mm_relu/cache?n=16"))
    assert "Step 0, simulated:" in page and "L1" in page
    asm = client.get("/explore/mm_relu/code?n=16&kind=asm", headers=HX)
    assert "x86 assembly of step 0" in text_of(asm)
    r = client.get("/explore/mm_relu/pattern?n=16&sel=L/mm_relu/1/Y&iteration=3")
    assert re.findall(r"<figcaption><strong>(\w+)</strong>", r.get_data(as_text=True)) == \
        ["A", "B", "Y"]
    r = client.get("/explore/mm_relu/pattern?n=16&sel=L/mm_relu/1/Y&iteration=99")
    assert "from 0 to 15" in text_of(r)


def test_results_come_back_from_the_store_after_a_restart(wired, instance):
    client, m = wired
    first = settled(client, "/explore/add/measure?m=8&n=8")
    assert "matches numpy" in text_of(first)
    end = time.monotonic() + 30
    while m._inflight and time.monotonic() < end:     # the store write follows the result
        time.sleep(0.01)
    assert m.store.count_results() >= 1
    restarted = app_pkg.create_app({"TESTING": True, "EXPLORER_INSTANCE": instance,
                                    "EXPLORER_POOL": {"workers": 1}})
    again = restarted.test_client().get("/explore/add/measure?m=8&n=8", headers=HX)
    assert "matches numpy" in text_of(again)
    assert not restarted.extensions["measurer"].started   # from the store: no worker started


def test_sizes_over_the_budgets(wired):
    client, m = wired
    submitted = m.pool.stats().get("submitted", 0)
    r = client.get("/explore/mm_relu/measure?n=2048", headers=HX)
    assert r.status_code == 200
    assert "Simulate only" in text_of(r) and "max_flops_measured" in text_of(r)
    r = client.get("/explore/mm_relu/cache?n=2048", headers=HX)
    assert "Not simulated at these sizes" in text_of(r)
    assert m.pool.stats().get("submitted", 0) == submitted      # nothing compiled, run or timed
    page = client.get("/explore/mm_relu?n=2048")
    assert page.status_code == 200                       # the program is still explored
    r = client.get("/explore/conv2d?in_channels=512&out_channels=512&size=512")
    assert r.status_code == 400 and "max_flops" in text_of(r)


def test_input_limits_name_the_limit():
    app = app_pkg.create_app({"TESTING": True, "EXPLORER_LIMITS": {
        "max_script_chars": 300, "max_upload_bytes": 4096}})
    assert app.config["MAX_CONTENT_LENGTH"] == 4096
    c = app.test_client()
    r = c.post("/explore/custom", data={"program": CRASH + "#" * 400})
    assert r.status_code == 413 and "max_script_chars" in text_of(r)
    r = c.post("/import", data={"text": "x" * 10_000})
    assert r.status_code == 413 and "max_upload_bytes" in text_of(r)


def test_the_code_pane_polls_while_queued_and_jumps_the_measurements(wired, monkeypatch):
    client, m = wired
    from app.service import Job
    from app.web.panes import code
    monkeypatch.setattr(code, "CODE_BUDGET_S", 0.0)
    pool = m.pool
    busy = [pool.submit(Job.debug("sleep", 2.0)) for _ in range(4)]
    url = "/explore/relu/code?m=24&n=24&kind=asm"
    page = client.get(url, headers=HX).get_data(as_text=True)
    pos = re.search(r"compiling step 0: queued \(position (\d)\)", page)
    assert pos and 'hx-trigger="load delay:1s"' in page and 'hx-swap="outerHTML"' in page
    assert int(pos.group(1)) == 1          # ahead of the waiting measurements (urgent)
    for t in busy:
        t.result(60)
    for _ in range(200):
        page = client.get(url, headers=HX).get_data(as_text=True)
        if "x86 assembly of step 0" in page:
            break
        time.sleep(0.1)
    assert "x86 assembly of step 0" in page
