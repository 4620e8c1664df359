"""Measuring ahead: the toolbar form a learner is filling in is sent to
``POST /explore/<w>/intent`` (the same fields as ``/apply``), and the workers measure the
program it would make while the learner finishes — only when they are idle. The click that
applies it then finds every result stored: its answer carries the runtime and cache-miss
charts with the new point, and it submits no job of its own.

The intent never changes anything the page shows (always an empty 204), never starts the
worker pool, never queues behind or ahead of a real step, and a refused or malformed form
measures nothing."""
from __future__ import annotations

import json
import pickle

import pytest

from engine import Schedule, workloads
from engine.ir import structural_equal
from inline_service import drain, make_test_app
from toolbar_forms import primitive_fields

HX = {"HX-Request": "true"}
N = 64


@pytest.fixture()
def app():
    return make_test_app()


def started_pool(app):
    """The app's (inline) pool, started, with the first page's jobs done: step 0 measured
    and simulated, the machine's peaks measured."""
    client = app.test_client()
    client.get(f"/explore/mm_relu/measure?n={N}", headers=HX)
    client.get(f"/explore/mm_relu/cache?n={N}", headers=HX)
    drain(app)
    return app.extensions["measurer"].pool


def split_form(client, factors: str) -> dict:
    """The explorer's toolbar form for ``split`` on loop j of Y, with ``factors``."""
    page = client.get(f"/explore/mm_relu/toolbar?n={N}&sel=L/mm_relu/1/Y").get_data(as_text=True)
    fields = primitive_fields(page, "split")
    fields["factors"] = factors
    return fields


def split_program(factor: int):
    sch = Schedule(workloads.get("mm_relu", n=N))
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, factor])
    return sch.mod


def step_programs(pool) -> list:
    return [pickle.loads(j.module) for j in pool.jobs
            if j.module is not None and j.actions == ("step",)]


def step_event(resp) -> dict:
    return json.loads(resp.headers["HX-Trigger"])["explorer:step"]


def test_a_filled_form_is_measured_ahead_and_its_click_finds_it_measured(app):
    pool = started_pool(app)
    client = app.test_client()
    form = split_form(client, "None, 8")
    before = len(pool.jobs)
    r = client.post("/explore/mm_relu/intent", data=form)
    assert r.status_code == 204 and r.get_data() == b""
    new = pool.jobs[before:]
    assert sorted(j.actions for j in new) == [("cache",), ("step",)]
    assert structural_equal(step_programs(pool)[-1], split_program(8))
    drain(app)
    # the click: every result is stored, the answer carries both charts, no job is submitted
    before = len(pool.jobs)
    r = client.post("/explore/mm_relu/apply", data=form, headers=HX)
    assert r.status_code == 200
    ev = step_event(r)
    assert ev["measure_inline"] and ev["cache_inline"]
    assert len(pool.jobs) == before
    html = r.get_data(as_text=True)
    assert 'id="runtime-plot"' in html and 'id="cache-plot"' in html


def test_an_intent_changes_nothing_the_page_shows(app):
    started_pool(app)
    client = app.test_client()
    r = client.post("/explore/mm_relu/intent", data=split_form(client, "None, 4"), headers=HX)
    assert r.status_code == 204
    assert r.get_data() == b""
    assert "HX-Trigger" not in r.headers and "HX-Push-Url" not in r.headers


@pytest.mark.parametrize("change", [
    {"factors": "None, 0"},                 # refused by split
    {"factors": "eight"},                   # not a factor list
    {"primitive": "no_such_primitive"},
    {"sel": "L/mm_relu/9/Y"},               # no such loop
    {"t": "%%"},                            # a broken trace token
    {"n": "x"},                             # a broken size
])
def test_a_refused_or_malformed_form_is_answered_204_and_measures_nothing(app, change):
    pool = started_pool(app)
    client = app.test_client()
    form = {**split_form(client, "None, 4"), **change}
    before = len(pool.jobs)
    r = client.post("/explore/mm_relu/intent", data=form)
    assert r.status_code == 204
    assert len(pool.jobs) == before


def test_an_unknown_workload_or_a_get_measures_nothing(app):
    pool = started_pool(app)
    client = app.test_client()
    before = len(pool.jobs)
    assert client.post("/explore/no_such_workload/intent",
                       data=split_form(client, "None, 4")).status_code == 204
    assert client.get("/explore/mm_relu/intent").status_code == 405
    assert len(pool.jobs) == before


def test_a_guess_never_waits_in_the_queue(app):
    pool = started_pool(app)
    client = app.test_client()
    with pool.held():
        # the first guess finds the worker idle: its step job runs (held), its cache job waits
        assert client.post("/explore/mm_relu/intent",
                           data=split_form(client, "None, 4")).status_code == 204
        before = len(pool.jobs)
        assert before > 0
        # the second finds the worker busy and a job waiting: it is not measured
        assert client.post("/explore/mm_relu/intent",
                           data=split_form(client, "None, 16")).status_code == 204
        assert len(pool.jobs) == before
    drain(app)
    assert not any(structural_equal(m, split_program(16)) for m in step_programs(pool))


def test_a_guess_never_starts_the_worker_pool():
    app = make_test_app()
    client = app.test_client()
    assert client.post("/explore/mm_relu/intent",
                       data=split_form(client, "None, 4")).status_code == 204
    assert not app.extensions["measurer"].started


@pytest.mark.parametrize("config", [{"MEASURE_AHEAD": False}, {"PREFETCH_MEASUREMENTS": False}])
def test_measuring_ahead_can_be_turned_off(config):
    app = make_test_app(config)
    pool = started_pool(app)
    client = app.test_client()
    before = len(pool.jobs)
    assert client.post("/explore/mm_relu/intent",
                       data=split_form(client, "None, 4")).status_code == 204
    assert len(pool.jobs) == before
