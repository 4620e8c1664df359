"""The model page's "tune every function" (inline service): one search per function shape
runs as a tuning job, its progress shows per function, and when it ends the link carries
every function's trace, which replays and computes what numpy computes."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

import engine
from engine import IRModule, relax
from engine.schedule import Trace
from inline_service import drain, make_test_app

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client():
    app = make_test_app()
    with app.app_context():
        yield app, app.test_client()


def _html(r):
    return r.get_data(as_text=True)


def _ticket_id(html: str) -> str:
    marker = "/model/mlp/tune/"
    start = html.index(marker) + len(marker)
    return html[start:html.index("?", start)]


def test_tune_every_function_puts_a_working_trace_on_every_function(client):
    app, c = client
    page = _html(c.get("/model/mlp?batch=1&fused=1"))
    assert "not available yet" not in page and 'id="model-tune-start"' in page
    r = c.post("/model/mlp/tune?batch=1&fused=1", data={"trials": "2"}, headers=HX)
    assert r.status_code == 200, _html(r)
    tid = _ticket_id(_html(r))
    url = f"/model/mlp/tune/{tid}?batch=1&fused=1"
    drain(app)
    r = c.get(url, headers=HX)
    pane = _html(r)
    assert "2 / 2" in pane and 'id="model-tune-fused_linear0_relu0"' in pane
    assert 'id="model-tune-linear1"' in pane and "GFLOP/s" in pane
    tuned = r.headers.get("HX-Redirect")
    assert tuned, pane
    q = parse_qs(urlparse(tuned).query)
    assert q["tuned"] == [tid]
    base = app.extensions["measurer"].tune_ticket(tid).partial()
    rows = [base[k] for k in sorted(base) if k[:1] == "f" and k[1:].isdigit()]
    assert {r["name"] for r in rows} == {"fused_linear0_relu0", "linear1"}
    for row in rows:   # each function searched from the default recipe: the faster of
        assert row["done"] == 2 and row["error"] is None and row["start_gflops"] > 0
        assert row["best_gflops"] > 0 and q[f"t.{row['name']}"] == [row["token"]]
        if row.get("kept_recipe"):   # the recipe and the search's best is applied
            assert row["start_gflops"] >= row["best_gflops"]
            # its first step stores the constant weight transposed
            assert [i.kind for i in Trace.decode(row["token"]).insts[:2]] == \
                ["GetBlock", "TransformLayout"]
    # the tuned link's page: it shows the finished job and no redirect loop
    assert c.get(tuned).status_code == 200
    r = c.get(url.split("?")[0] + "?" + tuned.split("?", 1)[1], headers=HX)
    assert "HX-Redirect" not in r.headers and ("trace applied to the model" in _html(r) or
                                               "the default recipe was as fast" in _html(r))

    # the traces replay on their functions (the course's program as written; a kept
    # recipe first stores the constant weight transposed, which the module then passes
    # transposed: models.layouts.with_schedules) and the whole model still matches numpy
    from engine.models.layouts import with_schedules
    from engine.models.mlp import forward
    from app.web.model import get_model, model_stage

    mod = model_stage("mlp", 1, "fused")
    assert tuple(mod["linear1"].buffer_params[1].shape) == (10, 128)
    funcs, traces = {}, {}
    for name in ("fused_linear0_relu0", "linear1"):
        sch = engine.Schedule(IRModule(((name, mod[name]),)))
        traces[name] = Trace.decode(q[f"t.{name}"][0])
        traces[name].apply_to_schedule(sch)
        funcs[name] = sch.mod[name]
    model = get_model("mlp")
    x = model.test_inputs(1)
    got = relax.VirtualMachine(relax.build(with_schedules(mod, funcs, traces),
                                           target="llvm"))["main"](x)
    np.testing.assert_allclose(np.asarray(got), forward(model.extra, x), rtol=1e-4, atol=1e-4)
    # and the page's own measurement of the tuned link agrees (five stages match numpy)
    murl = tuned.replace("/model/mlp?", "/model/mlp/measure?")
    c.get(murl)
    drain(app)
    assert _html(c.get(murl)).count("<td>yes</td>") == 5


@pytest.mark.parametrize("trials", ["0", "abc", "100000"])
def test_a_bad_budget_is_refused_with_the_reason(client, trials):
    _, c = client
    r = c.post("/model/mlp/tune?batch=1&fused=1", data={"trials": trials}, headers=HX)
    assert r.status_code == 400 and "trials per function" in _html(r)


def test_an_unknown_tuning_job_is_a_404(client):
    _, c = client
    assert c.get("/model/mlp/tune/nope?batch=1", headers=HX).status_code == 404
    assert c.post("/model/mlp/tune/nope/stop?batch=1", headers=HX).status_code == 404


class _EndedTicket:
    """A tuning job whose worker failed after the first function (what the pool reports)."""

    id = "abc"
    stop_requested = False
    state = "done"

    def __init__(self, data, result):
        self._data, self._result = data, result

    def partial(self):
        return dict(self._data)

    def done(self):
        return True

    def result(self, timeout=None):
        return self._result

    def position(self):
        return None


def test_a_worker_failure_is_shown_per_function_and_the_found_traces_survive():
    from app.service.protocol import JobResult
    from app.web.model import ModelState
    from app.web.panes.model_tune import progress_context

    data = {"f0": {"name": "fused_linear0_relu0", "members": ["fused_linear0_relu0"],
                   "done": 4, "total": 4, "state": "done", "start_gflops": 1.0,
                   "best_gflops": 3.0, "token": "NEW", "error": None},
            "f1": {"name": "linear1", "members": ["linear1"], "done": 1, "total": 4,
                   "state": "tuning", "start_gflops": 1.0, "best_gflops": None,
                   "token": None, "error": None}}
    ticket = _EndedTicket(data, JobResult("crashed", "the worker crashed (signal 11)"))
    state = ModelState("mlp", 1, True, {"linear1": "OLD"})
    ctx = progress_context(ticket, state)
    rows = {r["name"]: r for r in ctx["rows"]}
    assert rows["fused_linear0_relu0"]["error"] is None
    assert rows["fused_linear0_relu0"]["speedup"] == 3.0
    assert "not finished" in rows["linear1"]["error"] and "crashed" in rows["linear1"]["error"]
    assert "crashed" in ctx["status"]
    q = parse_qs(urlparse(ctx["tuned_url"]).query)
    assert q["t.fused_linear0_relu0"] == ["NEW"] and q["t.linear1"] == ["OLD"]
