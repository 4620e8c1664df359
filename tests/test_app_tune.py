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
