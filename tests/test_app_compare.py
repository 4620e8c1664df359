"""Flask test-client tests of the compare page: two explorer links (or tokens) side by side,
forks of one trace, the overlaid measurement figures, and bad links (4xx, never a 500)."""
from __future__ import annotations

import json
import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

import engine
from app.teaching import compare
from inline_service import make_test_app

N = 16


@pytest.fixture(scope="module")
def app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False})


@pytest.fixture()
def client(app):
    return app.test_client()


def html(resp) -> str:
    return resp.get_data(as_text=True)


def course(k: int):
    """mm_relu (n=16) with the first k of the course's four steps."""
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=N), workload=("mm_relu", {"n": N}))
    if k == 0:
        return sch
    y = sch.get_block("Y")
    i, j, kk = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    if k > 1:
        sch.reorder(j0, kk, j1)
    if k > 2:
        sch.reverse_compute_at(sch.get_block("C"), j0)
    if k > 3:
        sch.decompose_reduction(y, kk)
    return sch


def link(sch, at: int | None = None) -> str:
    url = f"http://localhost/explore/mm_relu?n={N}&t={sch.trace.encode()}"
    return url + (f"&at={at}" if at is not None else "")


def test_compare_form_without_sides(client):
    r = client.get("/compare")
    assert r.status_code == 200
    assert 'name="a"' in html(r) and 'name="b"' in html(r)


def test_two_links_side_by_side(client):
    a, b = course(0), course(4)
    r = client.get("/compare", query_string={"a": f"http://localhost/explore/mm_relu?n={N}",
                                             "b": link(b)})
    assert r.status_code == 200
    page = html(r)
    assert 'id="side-A"' in page and 'id="side-B"' in page
    assert 'id="diagram-A"' in page and 'id="diagram-B"' in page
    text = unescape(re.sub(r"<[^>]+>", "", page))
    assert 'T.block("Y_init")' in text and 'T.block("Y")' in text
    # B's new lines are marked, A's removed ones too
    assert "cmp-changed-B" in page and "cmp-changed-A" in page
    # the diagrams are not clickable here (no toolbar on this page)
    assert "data-sel=" not in page
    assert 'hx-get="/compare/measure?' in page


def test_fork_is_recognised_and_offered(client):
    full = course(4)
    r = client.get("/compare", query_string={"a": link(full), "b": link(full, at=2)})
    assert r.status_code == 200
    page = html(r)
    assert "share their first 2 steps" in page
    forks = re.findall(r'class="fork-compare" data-k="(\d)"', page)
    assert forks == ["0", "1", "2", "3"]
    # a fork link compares A with A's first k steps
    url = unescape(re.search(r'<a href="([^"]+)" class="fork-compare" data-k="2"', page).group(1))
    q = parse_qs(urlsplit(url).query)
    assert q["a"][0].endswith(full.trace.encode())
    rf = client.get(url)
    assert rf.status_code == 200 and "share their first 2 steps" in html(rf)


def test_only_a_offers_forks(client):
    r = client.get("/compare", query_string={"a": link(course(3))})
    assert r.status_code == 200
    assert len(re.findall(r'class="fork-compare"', html(r))) == 3


def test_bare_tokens_are_accepted(client):
    r = client.get("/compare", query_string={"a": course(1).trace.encode(),
                                             "b": course(2).trace.encode()})
    assert r.status_code == 200
    assert "share their first 1 step" in html(r)


def test_measure_overlay_has_both_traces(client):
    a, b = course(1), course(4)
    q = {"a": link(a), "b": link(b)}
    body = ""
    for _ in range(30):   # the pane answers progressively (a time budget per request)
        r = client.get("/compare/measure", query_string=q)
        assert r.status_code == 200
        body = html(r)
        if 'id="cmp-pending"' not in body:
            break
    fig = json.loads(unescape(re.search(r'id="cmp-runtime-plot" data-plotly="([^"]+)"', body).group(1)))
    names = [d["name"] for d in fig["data"]]
    assert "A runtime ms" in names and "B runtime ms" in names
    a_trace = next(d for d in fig["data"] if d["name"] == "A runtime ms")
    b_trace = next(d for d in fig["data"] if d["name"] == "B runtime ms")
    assert a_trace["x"] == [0, 1] and b_trace["x"] == [0, 1, 2, 3, 4]
    assert all(t > 0 for t in a_trace["y"] + b_trace["y"])
    assert "than A" in body


def test_overlay_figures_unit():
    rows_a = [{"step": 0, "time_ms": 2.0, "correct": True, "numpy_ms": 0.5},
              {"step": 1, "time_ms": 1.0, "correct": True}]
    rows_b = [{"step": 0, "time_ms": 2.0, "correct": True}, {"step": 1, "time_ms": 4.0,
                                                            "correct": False}]
    fig = json.loads(compare.runtime_overlay(rows_a, rows_b))
    assert [d["name"] for d in fig["data"]][:2] == ["A runtime ms", "B runtime ms"]
    assert fig["data"][1]["marker"]["symbol"] == ["circle", "x"]
    assert fig["data"][2]["y"] == [0.5, 0.5]
    assert compare.runtime_overlay([], []) is None
    lv = lambda m: [{"name": "L1", "misses": m, "accesses": 100, "miss_rate": m / 100}]  # noqa: E731
    cfig = json.loads(compare.cache_overlay([{"step": 0, "levels": lv(10)}],
                                            [{"step": 0, "levels": lv(5)}]))
    assert [d["name"] for d in cfig["data"]] == ["A L1 misses", "B L1 misses"]


@pytest.mark.parametrize("a,b", [
    ("garbage", "also garbage"),
    ("http://localhost/explore/nope?t=x", "http://localhost/explore/mm_relu"),
    ("http://localhost/lessons/01", "http://localhost/explore/mm_relu"),
    ("http://localhost/explore/mm_relu/measure", "http://localhost/explore/mm_relu"),
    ("http://localhost/explore/mm_relu?n=banana", "http://localhost/explore/mm_relu"),
    ("http://localhost/explore/mm_relu?t=AAAA", "http://localhost/explore/mm_relu"),
    ("x" * 30000, "http://localhost/explore/mm_relu"),
    ("http://localhost/explore/mm_relu", "<script>alert(1)</script>"),
])
def test_bad_links_are_4xx_with_a_way_back(client, a, b):
    r = client.get("/compare", query_string={"a": a, "b": b})
    assert 400 <= r.status_code < 500, html(r)[:400]
    page = html(r)
    assert 'href="/compare"' in page
    assert "<script>alert" not in page
    r = client.get("/compare/measure", query_string={"a": a, "b": b})
    assert 400 <= r.status_code < 500


def test_fork_link_include_for_the_trace_pane(app):
    """templates/compare/_fork_link.html renders a compare button of a trace and its fork
    (it sends the trace pane's fork form to /fork-compare, which answers with the compare
    page of both)."""
    from flask import render_template
    from werkzeug.datastructures import MultiDict

    from app.web.session import Session
    sch = course(3)
    with app.test_request_context("/"):
        s = Session.from_request("mm_relu", MultiDict({"n": str(N), "t": sch.trace.encode()}))
        out = render_template("compare/_fork_link.html", s=s, st=type("St", (), {"k": 1}))
        last = render_template("compare/_fork_link.html", s=s, st=type("St", (), {"k": 3}))
        present = render_template("lessons/_present_link.html", s=s)
    assert "button" not in last        # no fork after the last step
    assert re.search(r'form="trace-forks" name="from" value="1" '
                     r'formaction="/explore/mm_relu/fork-compare"', out)
    r = app.test_client().get("/explore/mm_relu/fork-compare",
                              query_string={"n": str(N), "t": sch.trace.encode(), "from": "1"})
    assert r.status_code == 303
    q = parse_qs(urlsplit(r.headers["Location"]).query)
    sa = Session.from_request("mm_relu", MultiDict(parse_qs(urlsplit(q["a"][0]).query)))
    sb = Session.from_request("mm_relu", MultiDict(parse_qs(urlsplit(q["b"][0]).query)))
    assert (sa.nsteps, sb.nsteps) == (3, 1)
    assert 'href="/explore/mm_relu/present?' in present
