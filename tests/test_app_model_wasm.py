"""The model page's "Run in your browser" on the server side: the page offers it, the
``.wasm`` of the page's program is built by the workers (the ``export`` job, target wasm32;
inline service) and served by ``/model/<name>/model.wasm`` — 202 while building, then the
module's bytes (kept by the state: the same bytes again without a job, 304 for the same
ETag), another program another module; a bad link a 400 sentence. That the bytes run and
match numpy is tested in Chromium (tests/e2e/test_model_wasm_e2e.py)."""
from __future__ import annotations

import shutil

import pytest

from inline_service import drain, make_test_app

pytestmark = pytest.mark.skipif(shutil.which("wasm-ld") is None,
                                reason="wasm-ld is not installed (Debian's lld)")


@pytest.fixture(scope="module")
def client():
    app = make_test_app()
    with app.app_context():
        yield app, app.test_client()


def _module(c, app, url):
    r = c.get(url)
    for _ in range(60):
        if r.status_code != 202:
            break
        assert "pending" in r.get_json()
        drain(app)
        r = c.get(url)
    return r


def test_the_page_offers_it_and_serves_the_workers_module(client):
    app, c = client
    html = c.get("/model/mlp?batch=1&fused=1").get_data(as_text=True)
    assert 'id="wasm-run"' in html and 'id="wasm-canvas"' in html
    assert 'data-wasm-url="/model/mlp/model.wasm?batch=1&amp;fused=1"' in html
    assert 'data-server-stage="fused"' in html
    assert "engine_wasm.js" in html and "model_wasm.js" in html
    url = "/model/mlp/model.wasm?batch=1&fused=1"
    r = _module(c, app, url)
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.headers["Content-Type"] == "application/wasm"
    data = r.get_data()
    assert data[:8] == b"\0asm\x01\0\0\0"
    assert 400_000 < len(data) < 600_000          # the weights are in it (407 KB)
    assert b"model_main" in data and b"engine_deploy_metadata" in data
    # kept by the state: the same bytes at once, and 304 for the same ETag
    from app.web.services import measurer
    jobs = len(measurer().pool.jobs)
    again = c.get(url)
    assert again.status_code == 200 and again.get_data() == data
    assert len(measurer().pool.jobs) == jobs           # no second build
    etag = again.headers["ETag"]
    assert c.get(url, headers={"If-None-Match": etag}).status_code == 304
    # another program (unfused) is another module
    other = _module(c, app, "/model/mlp/model.wasm?batch=2&fused=0")
    assert other.status_code == 200 and other.get_data() != data
    assert other.headers["ETag"] != etag


def test_a_bad_link_is_a_sentence(client):
    app, c = client
    r = c.get("/model/mlp/model.wasm?batch=abc")
    assert r.status_code == 400 and "whole number" in r.get_data(as_text=True)
    r = c.get("/model/nosuch/model.wasm")
    assert r.status_code == 404


def test_a_module_that_cannot_be_built_is_a_422_sentence(client, monkeypatch, tmp_path):
    """The worker cannot link (no wasm-ld on its PATH): the page gets the worker's sentence,
    kept a while (the job is not run again at each poll)."""
    app, c = client
    monkeypatch.setenv("PATH", str(tmp_path))
    url = "/model/mlp/model.wasm?batch=3&fused=1"
    r = _module(c, app, url)
    assert r.status_code == 422
    assert "could not be built" in r.get_json()["error"] and "lld" in r.get_json()["error"]
    from app.web.services import measurer
    jobs = len(measurer().pool.jobs)
    again = c.get(url)
    assert again.status_code == 422 and again.get_json() == r.get_json()
    assert len(measurer().pool.jobs) == jobs
