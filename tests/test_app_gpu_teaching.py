"""The explorer on a GPU, teaching (issue 39): the GPU lessons open on their target, a
learner's toolbar steps are checked (bindings and scopes from the IR, the no-race and
traffic checks from the workers' results, polled while they run), and the toolbar of a GPU
session offers no CPU-only primitive."""
from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import drain, make_test_app
from toolbar_forms import primitive_fields, primitive_forms

HX = {"HX-Request": "true"}
VA = "gpu_1_vector_add"


@pytest.fixture(scope="module")
def app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False})


@pytest.fixture()
def client(app):
    return app.test_client()


def html(resp) -> str:
    return resp.get_data(as_text=True)


def toolbar_url(page: str) -> str:
    return unescape(re.search(r'data-toolbar-url="([^"]+)"', page).group(1))


def learner_step(client, page: str, k: int, sel: str, prim: str, **args):
    """Post the toolbar's form for ``prim`` on ``sel`` from the lesson ``page`` (step k)."""
    tb = html(client.get(toolbar_url(page) + f"&sel={sel}"))
    fields = primitive_fields(tb, prim)
    fields.update(args)
    r = client.post(f"/lessons/{VA}/apply?step={k}", data=fields, headers=HX)
    assert r.status_code == 200, html(r)[:800]
    return r


def checks_of(page: str) -> list[tuple[str, str]]:
    ul = re.search(r'<ul id="lesson-checks".*?</ul>', page, re.S)
    assert ul, "no checks list"
    return [(state, unescape(re.sub(r"<[^>]+>", "", text)).strip())
            for state, text in re.findall(r'data-state="(\w+)">(.*?)</li>', ul.group(0), re.S)]


def test_gpu_lesson_opens_on_its_gpu(client):
    page = html(client.get(f"/lessons/{VA}?step=1"))
    assert re.search(r'id="lesson-target"[^>]*>Target: H100 SXM<', page)
    assert "target=cuda-h100-sxm" in toolbar_url(page)
    m = re.search(r'id="open-explorer" href="([^"]+)"', page)
    assert "target=cuda-h100-sxm" in unescape(m.group(1))


def test_learner_completes_the_vector_add_steps_with_checks(client, app):
    page = html(client.get(f"/lessons/{VA}?step=1"))
    r = learner_step(client, page, 1, "L/vector_add/0/C", "split", factors="None, 128")
    page = html(r)
    assert "Matches the lesson" in page
    push = r.headers["HX-Push-Url"]
    t = parse_qs(urlsplit(push).query)["t"][0]
    # step 2: bind blockIdx.x — an IR check, answered at once
    page = html(client.get(f"/lessons/{VA}?step=2&t={t}"))
    r = learner_step(client, page, 2, "L/vector_add/0/C", "bind", thread_axis="blockIdx.x")
    page = html(r)
    assert "Matches the lesson" in page
    assert checks_of(page) == [("ok", "✓ a loop above block C is bound to blockIdx.x")]
    t = parse_qs(urlsplit(r.headers["HX-Push-Url"]).query)["t"][0]
    # step 3: bind threadIdx.x — the result checks wait for the worker, the list polls
    page = html(client.get(f"/lessons/{VA}?step=3&t={t}"))
    r = learner_step(client, page, 3, "L/vector_add/1/C", "bind", thread_axis="threadIdx.x")
    page = html(r)
    assert "Matches the lesson" in page
    t = parse_qs(urlsplit(r.headers["HX-Push-Url"]).query)["t"][0]
    states = dict((text.split(" ", 1)[1].split(":")[0], s) for s, text in checks_of(page))
    assert states["a loop above block C is bound to threadIdx.x (extent 128)"] == "ok"
    poll = re.search(r'<ul id="lesson-checks"[^>]*hx-get="([^"]+)"', page)
    if poll:    # the worker had not answered yet: the list asks again
        url = unescape(poll.group(1))
        assert url.startswith(f"/lessons/{VA}/checks?step=3") and f"t={t}" in url
        drain(app)
        page = html(client.get(url))
    got = checks_of(page)
    assert [s for s, _ in got] == ["ok"] * 4, got
    assert "✓ the emulator's race check finds no race" in [x for _, x in got]
    assert 'hx-get' not in re.search(r'<ul id="lesson-checks"[^>]*>', page).group(0)


def test_a_learners_wrong_binding_fails_its_check(client):
    page = html(client.get(f"/lessons/{VA}?step=1"))
    r = learner_step(client, page, 1, "L/vector_add/0/C", "split", factors="None, 128")
    t = parse_qs(urlsplit(r.headers["HX-Push-Url"]).query)["t"][0]
    page = html(client.get(f"/lessons/{VA}?step=2&t={t}"))
    r = learner_step(client, page, 2, "L/vector_add/0/C", "bind", thread_axis="threadIdx.x")
    page = html(r)
    assert "Not the lesson's program yet" in page
    got = checks_of(page)
    assert got[0][0] == "failed" and "loops bound above it: threadIdx.x" in got[0][1]


def test_the_checks_fragment_of_a_gemm_stage_compares_traffic(client, app):
    les = "gpu_3_gemm_blocking"
    url = f"/lessons/{les}/checks?step=10"   # local blocking, the lesson's own program
    page = html(client.get(url))
    for _ in range(5):
        if "hx-get" not in re.search(r'<ul id="lesson-checks"[^>]*>', page).group(0):
            break
        drain(app)
        page = html(client.get(url))
    got = checks_of(page)
    assert all(s == "ok" for s, _ in got), got
    assert any("DRAM traffic is below step 7's" in x and " MB vs " in x for _, x in got)


def test_gpu_toolbar_has_no_parallel_but_keeps_vectorize(client):
    q = "n=256&target=cuda-h100-sxm"
    tb = html(client.get(f"/explore/vector_add/toolbar?{q}&sel=L/vector_add/0/C"))
    names = [re.search(r'name="primitive" value="([^"]+)"', f).group(1)
             for f in primitive_forms(tb)]
    assert "vectorize" in names and "bind" in names and "parallel" not in names
    cpu = html(client.get("/explore/vector_add/toolbar?n=256&sel=L/vector_add/0/C"))
    assert 'name="primitive" value="parallel"' in cpu
    # a hand-made form asking for parallel on a GPU session is refused with the sentence
    fields = dict(primitive_fields(tb, "vectorize"), primitive="parallel")
    r = client.post("/explore/vector_add/apply", data=fields, headers=HX)
    assert r.status_code == 422 and "bind the loop to a thread axis" in html(r)
