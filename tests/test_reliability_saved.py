"""Saved (named) traces in the store, reachable from the UI: "save as" in the trace pane, the
list on the gallery, ``/saved/<id>`` reopening the session — also after a restart."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import make_test_app

HX = {"HX-Request": "true"}


def text_of(r) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.get_data(as_text=True)))


@pytest.fixture()
def instance(tmp_path):
    return str(tmp_path / "inst")


def make(instance, **extra):
    return make_test_app({"EXPLORER_INSTANCE": instance, "PREFETCH_MEASUREMENTS": False,
                          **extra}).test_client()


def split_step(client) -> str:
    r = client.post("/explore/mm_relu/apply", headers=HX,
                    data={"n": "16", "sel": "L/mm_relu/1/Y", "primitive": "split",
                          "factors": "None, 4"})
    assert r.status_code == 200
    return r.headers["HX-Push-Url"]


def test_save_list_and_reopen_after_a_restart(instance):
    c = make(instance)
    url = split_step(c)
    page = c.get(url).get_data(as_text=True)
    assert 'hx-post="/explore/mm_relu/save"' in page and 'name="name"' in page
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    r = c.post("/explore/mm_relu/save", headers=HX, data={**q, "name": "my <b>tiling</b>"})
    assert r.status_code == 200 and "saved as “my &lt;b&gt;tiling&lt;/b&gt;” (step 1)" in \
        r.get_data(as_text=True)
    tid = re.search(r"/saved/([A-Za-z0-9_-]+)", text_of(r)).group(1)
    # a new server on the same store: listed on the gallery, the link reopens the session
    c2 = make(instance)
    gallery = c2.get("/").get_data(as_text=True)
    assert f'href="/saved/{tid}"' in gallery
    assert "my &lt;b&gt;tiling&lt;/b&gt;" in gallery and "<b>tiling" not in gallery
    r = c2.get(f"/saved/{tid}")
    assert r.status_code == 303
    reopened = c2.get(r.headers["Location"]).get_data(as_text=True)
    assert "sch.split(j, factors=[None, 4])" in reopened
    assert c2.get("/saved/nope").status_code == 404
    assert c2.get("/saved/..%2f..%2fetc").status_code == 404


def test_bad_names_and_custom_programs_are_refused_with_a_reason(instance):
    c = make(instance, EXPLORER_LIMITS={"max_name_chars": 10})
    url = split_step(c)
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    r = c.post("/explore/mm_relu/save", headers=HX, data={**q, "name": "x" * 11})
    assert r.status_code == 422 and "max_name_chars" in text_of(r)
    r = c.post("/explore/mm_relu/save", headers=HX, data={**q, "name": "   "})
    assert r.status_code == 422 and "empty" in text_of(r)
    r = c.post("/explore/mm_relu/save", headers=HX, data={**q, "name": "a\x00b"})
    assert r.status_code == 422 and "control character" in text_of(r)
    # cross-site save attempts are refused like every other POST
    r = c.post("/explore/mm_relu/save", headers={**HX, "Origin": "http://evil.example"},
               data={**q, "name": "x"})
    assert r.status_code == 403
    assert "saved-traces" not in c.get("/").get_data(as_text=True)


def test_without_a_store_saving_says_so(instance):
    c = make(instance, EXPLORER_STORE=False)
    url = split_step(c)
    assert 'hx-post="/explore/mm_relu/save"' not in c.get(url).get_data(as_text=True)
    r = c.post("/explore/mm_relu/save", headers=HX, data={"n": "16", "name": "x"})
    assert r.status_code == 422 and "copy the link" in text_of(r)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_FUZZ = {}


def _fuzz_client(tmp_path_factory):
    if "c" not in _FUZZ:
        _FUZZ["c"] = make(str(tmp_path_factory.mktemp("fuzz")))
    return _FUZZ["c"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.text(max_size=120), tid=st.text(max_size=60),
       at=st.one_of(st.none(), st.integers(-2, 3).map(str), st.text(max_size=5)))
def test_save_and_open_never_500(tmp_path_factory, name, tid, at):
    c = _fuzz_client(tmp_path_factory)
    data = {"n": "16", "name": name}
    if at is not None:
        data["at"] = at
    r = c.post("/explore/mm_relu/save", headers=HX, data=data)
    assert r.status_code < 500 and "Traceback" not in r.get_data(as_text=True)
    if r.status_code == 200:
        assert "saved as" in text_of(r)
    from urllib.parse import quote
    r = c.get("/saved/" + quote(tid, safe=""))
    # (an id with a "/" makes a path with "//", which the router merges: a 308 to it)
    assert r.status_code in (303, 404) or (r.status_code == 308 and "/" in tid), \
        (tid, r.status_code)
