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
    """After a step the Tune tab tunes the page's new program: the click's answer carries
    the tab again (out-of-band, loaded when shown) with the new state's address; a page that
    asks for its panes (an undo, a step link) gets it too."""
    import re
    from html import unescape
    from urllib.parse import parse_qs, urlsplit
    data = {"n": "16", "sel": "L/mm_relu/1/Y", "primitive": "split", "factors": "None, 4"}
    r = client.post("/explore/mm_relu/apply", data=data, headers=HX)
    assert r.status_code == 200
    slot = re.search(r'<div id="tune-pane"[^>]*>', text(r), re.S).group(0)
    assert 'hx-swap-oob="true"' in slot and 'hx-trigger="intersect once"' in slot
    url = unescape(re.search(r'hx-get="([^"]+)"', slot).group(1))
    pushed = r.headers["HX-Push-Url"]
    assert urlsplit(url).path == "/explore/mm_relu/tune"
    assert parse_qs(urlsplit(url).query)["t"] == parse_qs(urlsplit(pushed).query)["t"]
    # the form it loads starts a search from that program
    assert "Search from the initial program" not in text(client.get(url, headers=HX))
    back = client.get("/explore/mm_relu?n=16", headers=HX)
    assert re.search(r'<div id="tune-pane"[^>]*hx-swap-oob="true"', text(back), re.S)
