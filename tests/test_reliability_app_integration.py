"""The web app with its measurement seams routed through the worker pool (the wiring the
report asks app/measure.py to adopt, done here with monkeypatch): a crashing or endless
generated kernel is reported on the page while the server keeps serving, results come back
from the store, and the server process itself never compiles."""
from __future__ import annotations

import re

import pytest

app_pkg = pytest.importorskip("app")

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


class _RemoteSource:
    def __init__(self, measurer, mod):
        self.measurer, self.mod = measurer, mod

    def get_source(self, kind="ll-opt"):
        text, err = self.measurer.source(self.mod, kind)
        if text is None:
            raise RuntimeError(err)
        return text


@pytest.fixture(scope="module")
def wired(tmp_path_factory):
    from app import measure
    from app.workers import install
    mp = pytest.MonkeyPatch()
    app = app_pkg.create_app({
        "TESTING": True,
        "EXPLORER_LIMITS": {"step_time_limit_s": 1.0},
        "EXPLORER_POOL": {"workers": 2},
    })
    app.instance_path = str(tmp_path_factory.mktemp("instance"))
    m = install(app)
    mp.setattr(measure, "measure_step",
               lambda mod, workload, params, *, func_name=None, baseline=None:
               m.measure(mod, workload, params, func_name=func_name, baseline=baseline))
    mp.setattr(measure, "cache_step", lambda mod, func_name=None: m.cache(mod, func_name))
    mp.setattr(measure, "build", lambda mod, h=None: (_RemoteSource(m, mod), 0.0))

    # The server process must never compile: make any build here fail loudly.
    import engine.runtime

    def no_build(*a, **k):
        raise AssertionError("the server process compiled a program")
    mp.setattr(engine.runtime, "build", no_build)
    try:
        yield app.test_client(), m
    finally:
        if not callable(m._pool):
            m.pool.close(5)
        mp.undo()


def text_of(r) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.get_data(as_text=True)))


def custom_url(client, program: str) -> str:
    r = client.post("/explore/custom", data={"program": program})
    assert r.status_code == 303, text_of(r)[:300]
    return r.headers["Location"]


def test_crashing_kernel_is_reported_and_the_server_keeps_serving(wired):
    client, m = wired
    url = custom_url(client, CRASH)
    r = client.get(url.replace("/explore/custom?", "/explore/custom/measure?"),
                   headers={"HX-Request": "true"})
    assert r.status_code == 200
    assert ("the compiled program crashed (signal SIGSEGV) — the step is kept but not measured"
            in text_of(r))
    assert m.pool.stats()["crashes"] >= 1
    ok = client.get("/explore/mm_relu/measure?n=16", headers={"HX-Request": "true"})
    assert ok.status_code == 200 and "matches numpy" in text_of(ok)
    code = client.get("/explore/mm_relu/code?n=16&kind=ll-opt", headers={"HX-Request": "true"})
    assert code.status_code == 200 and "define" in code.get_data(as_text=True)


def test_endless_kernel_is_cut_at_the_time_limit(wired):
    client, m = wired
    url = custom_url(client, ENDLESS)
    r = client.get(url.replace("/explore/custom?", "/explore/custom/measure?"),
                   headers={"HX-Request": "true"})
    assert r.status_code == 200
    assert ("this step took longer than 1 s — measurement skipped, the trace is kept"
            in text_of(r))
    assert client.get("/explore/relu/measure", headers={"HX-Request": "true"}).status_code == 200


def test_results_come_back_from_the_store(wired):
    client, m = wired
    first = client.get("/explore/transpose/measure", headers={"HX-Request": "true"})
    assert first.status_code == 200
    before = m.pool.stats()["submitted"]
    import time
    end = time.monotonic() + 30
    while m._inflight and time.monotonic() < end:     # the store write follows the result
        time.sleep(0.01)
    again = client.get("/explore/transpose/measure", headers={"HX-Request": "true"})
    assert again.status_code == 200
    assert m.pool.stats()["submitted"] == before      # nothing measured twice
    assert m.store.count_results() >= 1
