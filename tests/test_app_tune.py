"""The Tune tab's routes with bad input: every refusal is a 400 with the reason, before any
job is queued; the tab lists what can be sampled at the current step."""
from __future__ import annotations

import pytest

from inline_service import make_test_app

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def text(r) -> str:
    return r.get_data(as_text=True)


def test_tune_tab_lists_loops_and_blocks(client):
    r = client.get("/explore/mm_relu/tune?n=16", headers=HX)
    assert r.status_code == 200
    page = text(r)
    assert "Search from the initial program" in page
    assert 'name="split" value="j@Y"' in page and 'name="location" value="Y"' in page
    # mm_relu has an i above Y and another above C: both can be chosen, told apart
    assert 'value="i@Y"' in page and 'value="i@C"' in page and "above C" in page


@pytest.mark.parametrize("form,reason", [
    ({"trials": "0"}, "from 1 to 256"),
    ({"trials": "abc"}, "from 1 to 256"),
    ({"trials": "99999"}, "from 1 to 256"),
    ({"trials": "4", "strategy": "greedy"}, "evolutionary or random"),
    ({"trials": "4", "space": "clicks"}, "Tick at least one"),
    ({"trials": "4", "space": "clicks", "split": "nosuchloop"}, "no loop"),
    ({"trials": "4", "space": "clicks", "location": "<script>"}, "no block"),
    ({"trials": "4", "space": "mine"}, "auto or your choices"),
])
def test_bad_tune_forms_are_refused_with_the_reason(client, form, reason):
    r = client.post("/explore/mm_relu/tune?n=16", data=form, headers=HX)
    assert r.status_code == 400
    assert reason in text(r).replace("&lt;", "<")
    assert "<script>" not in text(r)


def test_unknown_search_is_a_404(client):
    r = client.get("/tune/doesnotexist", headers=HX)
    assert r.status_code == 404 and "not known" in text(r)
    assert client.post("/tune/doesnotexist/stop", headers=HX).status_code == 404


def test_a_click_gives_the_tune_tab_the_new_program(client):
    """After a step the Tune tab tunes the page's new program: the click's answer names the
    new state (its step event), and the tab ("data-slot" /tune, relative to the state) loads
    that state's form when shown; the form starts a search from that program."""
    import json
    import re
    data = {"n": "16", "sel": "L/mm_relu/1/Y", "primitive": "split", "factors": "None, 4"}
    r = client.post("/explore/mm_relu/apply", data=data, headers=HX)
    assert r.status_code == 200 and 'id="tune-pane"' not in text(r)
    state = json.loads(r.headers["HX-Trigger"])["explorer:step"]["url"]
    assert state == r.headers["HX-Push-Url"]
    page = text(client.get(state))
    assert re.search(r'<div id="tune-pane"[^>]*data-slot="/tune"', page, re.S)
    path, query = state.split("?", 1)
    url = f"{path}/tune?{query}"
    # the form it loads starts a search from that program
    assert "Search from the initial program" not in text(client.get(url, headers=HX))