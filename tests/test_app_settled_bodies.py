"""A state whose every step is measured renders its measurement and cache bodies once: the
bodies a pane's own request rendered are what a click back to that state carries, without
looking up and drawing each step again; a body with anything queued or failed is never
kept (app.web.measuring.SettledBodies)."""
from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.web import measuring
from app.web.panes import cache as cache_view
from app.web.panes import measurement
from app.web.session import Session

from inline_service import drain, make_test_app, settled

N = 16
HX = {"HX-Request": "true"}


@pytest.fixture()
def app():
    return make_test_app()


def split(client, factor: int):
    r = client.post("/explore/mm_relu/apply", headers=HX,
                    data={"n": str(N), "sel": "L/mm_relu/1/Y", "primitive": "split",
                          "factors": f"None, {factor}"})
    assert r.status_code == 200, r.data[:300]
    return r


def step_event(r) -> dict:
    return json.loads(r.headers["HX-Trigger"])["explorer:step"]


def test_a_settled_state_carries_the_bodies_its_panes_rendered(app, monkeypatch):
    client = app.test_client()
    step = step_event(split(client, 4))
    drain(app)
    measure_body = settled(client, step["measure"]).get_data(as_text=True)
    cache_body = settled(client, step["cache"], pending='id="cache-pending"').get_data(as_text=True)

    # back to that state: neither pane is looked up or drawn again ...
    def not_again(*a, **k):
        raise AssertionError("a settled body was rendered again")
    monkeypatch.setattr(measurement, "context", not_again)
    monkeypatch.setattr(cache_view, "context", not_again)
    r = client.get(step["url"], headers=HX)
    ev = step_event(r)
    assert ev["measure_inline"] and ev["cache_inline"]
    page = r.get_data(as_text=True)
    # ... and the answer carries exactly the bodies the panes answered
    assert measure_body.strip() in page and cache_body.strip() in page
    assert 'data-points="2"' in measure_body


def test_the_bodies_of_a_state_measured_later_are_drawn_once_then_kept(app, monkeypatch):
    client = app.test_client()
    step = step_event(split(client, 8))
    settled(client, step["measure"])
    settled(client, step["cache"], pending='id="cache-pending"')
    url = step["url"]
    app.extensions["settled_bodies"] = measuring.SettledBodies()     # (none kept yet)
    calls = {"measure": 0, "cache": 0}
    real_m, real_c = measurement.context, cache_view.context

    def counted_m(*a, **k):
        calls["measure"] += 1
        return real_m(*a, **k)

    def counted_c(*a, **k):
        calls["cache"] += 1
        return real_c(*a, **k)
    monkeypatch.setattr(measurement, "context", counted_m)
    monkeypatch.setattr(cache_view, "context", counted_c)
    first = client.get(url, headers=HX)
    second = client.get(url, headers=HX)
    assert calls == {"measure": 1, "cache": 1}
    for r in (first, second):
        ev = step_event(r)
        assert ev["measure_inline"] and ev["cache_inline"]
    # the same state, asked for by another link of it (a reload), shows the same bodies
    assert first.get_data(as_text=True) == second.get_data(as_text=True)


def test_a_body_still_measuring_is_not_kept(app):
    client = app.test_client()
    pool = app.extensions["measurer"].pool
    with pool.held():
        step = step_event(split(client, 2))
        pending = client.get(step["measure"]).get_data(as_text=True)
        assert 'id="measure-pending"' in pending
        with app.test_request_context():
            q = dict(parse_qsl(urlsplit(step["url"]).query))
            s = Session.from_request("mm_relu", q)
            assert measuring.settled_bodies().get("measure", s) is None
    drain(app)


def session_of(app, url: str) -> Session:
    q = dict(parse_qsl(urlsplit(url).query))
    return Session.from_request("mm_relu", q)


def good_rows(n: int) -> list[dict]:
    return [{"step": k, "ok": True, "stage": "done", "error": None, "time_ms": 1.0}
            for k in range(n)]


@pytest.mark.parametrize("change, settled_", [
    ({}, True),
    ({"pending": [1]}, False),
    ({"queued": {1: "queued (position 1)"}}, False),
    ({"busy": "the server is busy"}, False),
    ({"unavailable": "no workers"}, False),
    ({"roofline_pending": "measuring"}, False),
    ({"roofline_fig": None}, False),
    ({"rows": good_rows(1)}, False),                                  # a step missing
    ({"rows": good_rows(1) + [{"step": 1, "ok": False, "stage": "check",
                               "error": "WRONG result"}]}, False),
    ({"rows": good_rows(1) + [{"step": 1, "ok": False, "stage": "time",
                               "error": "timed out", "status": "timeout"}]}, False),
])
def test_only_a_body_with_every_step_measured_and_nothing_failed_is_settled(app, change,
                                                                              settled_):
    client = app.test_client()
    url = step_event(split(client, 4))["url"]
    drain(app)
    with app.test_request_context():
        s = session_of(app, url)
        assert s.nsteps == 1
        ctx = {"rows": good_rows(2), "pending": [], "queued": {}, "busy": None,
               "unavailable": None, "roofline_fig": "{}"}
        ctx.update(change)
        assert measuring.is_settled("measure", s, ctx) is settled_
        assert measuring.is_settled("measure", s, None) is False


def test_a_cache_body_is_settled_only_with_every_step_simulated(app):
    client = app.test_client()
    url = step_event(split(client, 4))["url"]
    drain(app)
    levels = [{"name": "L1", "misses": 1}]
    with app.test_request_context():
        s = session_of(app, url)
        rows = [{"step": 0, "levels": levels, "error": None},
                {"step": 1, "levels": levels, "error": None}]
        assert measuring.is_settled("cache", s, {"rows": rows, "pending": []})
        failed = rows[:1] + [{"step": 1, "levels": None,
                              "error": "cache simulation failed: crashed"}]
        assert not measuring.is_settled("cache", s, {"rows": failed, "pending": []})
        assert not measuring.is_settled("cache", s, {"rows": rows, "pending": [1]})
