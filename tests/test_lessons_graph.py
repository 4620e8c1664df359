"""The graph lessons (integration and graph-optimisation chapters): loaded and validated
like the schedule lessons, played step by step — each pass applies, every check of a step
holds on the graph after it, the checks say what is missing before it, and every step's
graph runs in the virtual machine and matches numpy."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from engine import lessons
from engine.lessons import LessonError, graph
from engine.relax import VirtualMachine, build
from engine.relax.course_graphs import GRAPHS
from engine.relax.transform.steps import runnable

IDS = graph.names()


def test_graph_lessons_load_in_order_and_apart_from_the_schedule_lessons():
    assert IDS == ["10_integration_pipeline", "11_graph_optimization", "12_ewise_fma"]
    assert not set(IDS) & set(lessons.names())
    les = graph.get("11_graph_optimization")
    assert les.passes == ["BindParams", "FuseDenseAdd", "LowerToTensorIR", "FuseTIR"]
    assert les.model == "mlp" and graph.get("12_ewise_fma").model is None
    with pytest.raises(LessonError, match="no graph lesson named"):
        graph.get("nope")


@pytest.mark.parametrize("lid", IDS)
def test_graph_lesson_plays_and_its_checks_hold(lid):
    les = graph.get(lid)
    mods = les.modules()
    start, weights = GRAPHS[les.graph](les.batch)
    rng = np.random.default_rng(0)
    inputs = [rng.random(tuple(p.struct_info.shape)).astype("float32")
              for p in start["main"].params if p.name_hint not in weights]
    want = None
    for k, step in enumerate(les.steps):
        after = mods[k + 1]
        for out in les.run_checks(k, after):
            assert out.ok, f"{lid} step {k} ({step.title}): {out.text}"
        if step.pass_key is None:
            assert after is mods[k]
        got = np.asarray(VirtualMachine(build(runnable(after, weights)))["main"](*inputs))
        if want is None:
            want = got
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_checks_say_what_is_missing_before_the_step():
    les = graph.get("11_graph_optimization")
    mods = les.modules()
    outs = les.run_checks(1, mods[1])          # fuse matmul + add, not yet applied
    assert [o.state for o in outs] == ["failed", "failed", "failed"]
    assert "none in the graph" in outs[0].text and "main calls" in outs[1].text
    outs = les.run_checks(3, mods[3])          # FuseTIR not yet applied
    assert not outs[1].ok and "still calls fused_matmul_add0" in outs[1].text
    e = graph.get("12_ewise_fma")
    assert "main calls multiply" in e.run_checks(1, e.modules()[0])[0].text


MIN = {"format": "schedule-explorer/graph-lesson", "version": 1, "id": "tiny",
       "title": "t", "graph": {"name": "ewise"},
       "steps": [{"title": "s", "text": "x", "pass": "EwiseFMA",
                  "checks": [{"kind": "main_calls", "callee": "ewise_fma"}]}]}


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.update(format="x"), "format"),
    (lambda d: d.update(graph={"name": "resnet"}), "graph"),
    (lambda d: d["graph"].update(batch=0), "batch"),
    (lambda d: d["steps"][0].update({"pass": "os.system"}), r"steps\[0\].pass.*no pass named"),
    (lambda d: d["steps"][0].update({"pass": None}), "at least one step with a pass"),
    (lambda d: d["steps"][0].update(checks=[{"kind": "eval"}]), r"checks\[0\]"),
    (lambda d: d["steps"][0].update(checks=[{"kind": "main_calls"}]), "needs \"callee\""),
    (lambda d: d["steps"][0].update(checks=[{"kind": "main_calls", "callee": "a",
                                             "form": "python"}]), "form"),
    (lambda d: d["steps"][0].update(extra=1), "unknown key"),
    (lambda d: d.update(id="Bad-Id"), "id"),
])
def test_malformed_graph_lessons_are_refused_naming_the_place(mutate, match):
    d = copy.deepcopy(MIN)
    mutate(d)
    with pytest.raises(LessonError, match=match):
        graph.parse(json.loads(json.dumps(d)), "tiny.json")


def test_minimal_graph_lesson_parses_and_plays():
    les = graph.parse(copy.deepcopy(MIN), "tiny.json")
    assert les.steps[0].label == "ewise_fma"
    assert all(o.ok for o in les.run_checks(0, les.modules()[1]))


# ---------------------------------------------------------------- the player
@pytest.fixture(scope="module")
def client():
    from inline_service import make_test_app
    app = make_test_app()
    with app.app_context():
        yield app.test_client()


def test_lesson_list_links_the_graph_lessons(client):
    html = client.get("/lessons").get_data(as_text=True)
    for lid in IDS:
        assert f'href="/lessons/graph/{lid}"' in html


@pytest.mark.parametrize("lid", IDS)
def test_every_step_of_every_graph_lesson_renders(client, lid):
    from html import unescape
    les = graph.get(lid)
    for k, step in enumerate(les.steps):
        r = client.get(f"/lessons/graph/{lid}?step={k}")
        assert r.status_code == 200, (lid, k)
        page = unescape(r.get_data(as_text=True))
        assert f"Step {k + 1} of {len(les.steps)}" in page and 'id="graph-after"' in page
        assert page.count('class="check-ok"') == len(step.checks)
        assert ('id="graph-before"' in page) == bool(step.pass_key)
        if les.model:
            link = page.split('id="open-model" href="')[1].split('"')[0]
            assert client.get(link).status_code == 200
    end = client.get(f"/lessons/graph/{lid}?step={len(les.steps)}")
    assert end.status_code == 200 and "Lesson finished" in end.get_data(as_text=True)


@pytest.mark.parametrize("url,status", [("/lessons/graph/nope", 404),
                                        ("/lessons/graph/12_ewise_fma?step=9", 400),
                                        ("/lessons/graph/12_ewise_fma?step=-1", 400),
                                        ("/lessons/graph/12_ewise_fma?step=1e3", 400)])
def test_bad_graph_lesson_links(client, url, status):
    assert client.get(url).status_code == status
