"""A lesson measures the program its next step asks for while the learner reads it: the
learner's click then finds every result stored, and its answer carries the runtime and the
cache-miss charts with the new point (no request, compile or simulation after the click).

Only the lesson's own next program is guessed, after the page's own; a learner whose
program is elsewhere gets no guess, and a wrong step is measured by its own click."""
from __future__ import annotations

import json
import pickle
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from engine import lessons
from engine.ir import structural_equal
from inline_service import drain, make_test_app
from toolbar_forms import primitive_fields

HX = {"HX-Request": "true"}
L1 = "01_tensorir_mm_relu"


@pytest.fixture()
def app():
    return make_test_app()          # prefetching on (the default)


def pool(app):
    return app.extensions["measurer"].pool


def programs_measured(app) -> list:
    """The programs of the step jobs submitted so far, in order."""
    return [pickle.loads(j.module) for j in pool(app).jobs
            if j.module is not None and "cache" not in j.actions]


def split_form(client, factors: str) -> dict:
    """The lesson page's toolbar form for ``split`` on loop j of Y, with ``factors``."""
    page = client.get("/explore/mm_relu/toolbar?n=128&sel=L/mm_relu/1/Y").get_data(as_text=True)
    fields = primitive_fields(page, "split")
    fields["factors"] = factors
    return fields


def step_event(resp) -> dict:
    return json.loads(resp.headers["HX-Trigger"])["explorer:step"]


def test_reading_a_step_measures_the_program_it_asks_for(app):
    client = app.test_client()
    les = lessons.get(L1)
    mods = les.modules()
    assert client.get(f"/lessons/{L1}?step=1").status_code == 200
    measured = programs_measured(app)
    # the page's own program first (what is on screen), then the lesson's next one
    assert len(measured) == 2
    assert structural_equal(measured[0], mods[1]) and structural_equal(measured[1], mods[2])
    drain(app)
    fields = split_form(client, "None, 4")
    # the workers are held: nothing the click itself starts could finish before its answer
    with pool(app).held():
        r = client.post(f"/lessons/{L1}/apply?step=1", data=fields, headers=HX)
    assert r.status_code == 200 and "Matches the lesson" in r.get_data(as_text=True)
    ev = step_event(r)
    assert ev["measure_inline"] and ev["cache_inline"]
    page = r.get_data(as_text=True)
    assert re.search(r'id="runtime-plot" data-plotly="[^"]+" data-points="2"', page)
    assert re.search(r'id="cache-plot" data-plotly="[^"]+" data-points="2"', page)
    assert "✓ matches numpy" in page   # the new step, checked against numpy
    # the learner's click was right: the next guess is the lesson's program after step 2
    assert structural_equal(programs_measured(app)[-1], mods[3])


def test_a_wrong_step_is_measured_by_its_own_click(app):
    client = app.test_client()
    client.get(f"/lessons/{L1}?step=1")
    drain(app)
    with pool(app).held():
        r = client.post(f"/lessons/{L1}/apply?step=1", data=split_form(client, "None, 8"),
                        headers=HX)
        assert r.status_code == 200
        ev = step_event(r)
        # not the guessed program: its results are not there yet, the page asks for them
        assert not ev["measure_inline"] and not ev["cache_inline"]
    drain(app)
    again = client.get(ev["measure"]).get_data(as_text=True)
    assert re.search(r'id="runtime-plot" data-plotly="[^"]+" data-points="2"', again)


def test_no_guess_for_a_learner_elsewhere_or_a_finished_lesson(app):
    client = app.test_client()
    les = lessons.get(L1)
    r = client.post(f"/lessons/{L1}/apply?step=1", data=split_form(client, "None, 8"),
                    headers=HX)
    drain(app)
    token = parse_qs(urlsplit(r.headers["HX-Push-Url"]).query)["t"][0]
    before = len(pool(app).jobs)
    # step 2 with the learner's own (wrong) program: the lesson's next program is not theirs
    assert client.get(f"/lessons/{L1}?step=2&t={token}").status_code == 200
    new = pool(app).jobs[before:]
    assert all(not structural_equal(pickle.loads(j.module), les.modules()[3])
               for j in new if j.module is not None)
    # the lesson's end: nothing is asked next
    before = len(pool(app).jobs)
    assert client.get(f"/lessons/{L1}?step={len(les.steps)}").status_code == 200
    assert all(not structural_equal(pickle.loads(j.module), m)
               for j in pool(app).jobs[before:] if j.module is not None
               for m in les.modules()[:-1])


def test_no_guess_when_prefetching_is_off():
    app = make_test_app({"PREFETCH_MEASUREMENTS": False})
    assert app.test_client().get(f"/lessons/{L1}?step=1").status_code == 200
    assert not app.extensions["measurer"].started or pool(app).jobs == []
