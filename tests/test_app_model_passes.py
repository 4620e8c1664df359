"""The model page stepping through Relax passes: ``passes=`` in the link (validated as
hostile input), each step's graph rendered next to the one before it, the pass buttons, and
every step measured by the workers (inline service) operator by operator."""
from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlparse

import pytest

from inline_service import drain, make_test_app


@pytest.fixture(scope="module")
def client():
    app = make_test_app()
    with app.app_context():
        yield app, app.test_client()


def _html(r):
    return r.get_data(as_text=True)


def _svg(html: str, svg_id: str) -> str:
    m = re.search(rf'<svg class="model-graph" id="{svg_id}".*?</svg>', html, re.S)
    assert m, f"no {svg_id}"
    return unescape(re.sub(r"<[^>]+>", " ", m.group(0)))


def test_stages_page_links_to_the_passes(client):
    _, c = client
    html = _html(c.get("/model/mlp?batch=1&fused=1"))
    assert 'id="step-passes"' in html and "passes=" in html
    assert 'id="model-passes"' not in html


def test_the_graph_as_written_and_the_pass_buttons(client):
    _, c = client
    r = c.get("/model/mlp?batch=1&passes=")
    assert r.status_code == 200
    html = _html(r)
    graph = _svg(html, "model-graph-after")
    assert "R.matmul" in graph and "R.permute_dims" in graph and "input w0" in graph
    assert 'id="graph-before"' not in html            # step 0 has nothing before it
    for key in ("BindParams", "LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR",
                "DeadCodeElimination", "FuseDenseAdd", "EwiseFMA", "LowerToTensorIR"):
        assert f'id="pass-add-{key}"' in html
    m = re.search(r'id="pass-add-FuseDenseAdd" href="([^"]+)"', html)
    assert parse_qs(urlparse(unescape(m.group(1))).query)["passes"] == ["FuseDenseAdd"]
    assert ">fuse matmul + add<" in html and ">ewise_fma<" in html \
        and ">lower to TensorIR<" in html


def test_fuse_matmul_add_shows_the_fused_function_before_and_after(client):
    _, c = client
    html = _html(c.get("/model/mlp?batch=1&passes=BindParams,FuseDenseAdd"))
    after, before = _svg(html, "model-graph-after"), _svg(html, "model-graph-before")
    assert "fused_matmul_add0" in after and "fuses R.matmul → R.add" in after
    assert "fused_matmul_add0" not in before and "R.matmul" in before
    assert "input w0" not in before                    # BindParams ran before it
    assert 'aria-current="step"' in html and 'id="pass-undo"' in html
    # the Relax main of the shown step
    assert "fused_matmul_add0(" in unescape(html)
    # a cursor shows an earlier step; its "before" is the one before that
    html = _html(c.get("/model/mlp?batch=1&passes=BindParams,FuseDenseAdd&at=1"))
    assert "fused_matmul_add0" not in _svg(html, "model-graph-after")
    assert "input w0" in _svg(html, "model-graph-before")


def test_the_chapters_sequence_ends_in_tensor_ir_functions_the_page_lists(client):
    _, c = client
    html = _html(c.get("/model/mlp?batch=1&passes=BindParams,FuseDenseAdd,LowerToTensorIR,"
                       "FuseTIR"))
    after = _svg(html, "model-graph-after")
    assert "fused_matmul_add0" in after and "R.matmul" not in after
    assert 'id="fn-fused_matmul_add0"' in html and 'id="fn-transpose"' in html
    # TVM's own pipeline too
    html = _html(c.get("/model/mlp?batch=1&passes=BindParams,LegalizeOps,AnnotateTIROpPattern,"
                       "FuseOps,FuseTIR,DeadCodeElimination"))
    assert 'id="fn-fused_matmul_add_relu"' in html


def test_url_state_round_trips():
    from app.web.model import ModelState

    app = make_test_app()
    with app.test_request_context():
        from werkzeug.datastructures import MultiDict
        s = ModelState.from_request("mlp", MultiDict(
            {"batch": "2", "passes": "BindParams,FuseDenseAdd", "at": "1"}))
        assert s.passes == ["BindParams", "FuseDenseAdd"] and s.at == 1 and s.batch == 2
        again = ModelState.from_request("mlp", MultiDict(parse_qs(urlparse(s.url(at=1)).query,
                                                                  keep_blank_values=True)))
        assert (again.passes, again.at, again.batch) == (s.passes, 1, 2)
        assert "passes" not in s.url(passes=None)
        assert "passes=&" in s.url(passes=[]) or s.url(passes=[]).endswith("passes=")


@pytest.mark.parametrize("url,status,words", [
    ("/model/mlp?passes=Nope", 400, "no pass named"),
    ("/model/mlp?passes=FuseDenseAdd,__import__", 400, "no pass named"),
    ("/model/mlp?passes=" + ",".join(["FuseTIR"] * 13), 400, "at most 12"),
    ("/model/mlp?passes=FuseDenseAdd&at=5", 400, "outside 0..1"),
    ("/model/mlp?passes=FuseDenseAdd&at=-1", 400, "not a whole number"),
    ("/model/mlp?passes=FuseDenseAdd,FuseOps,FuseTIR", 400, "FuseTIR, cannot apply"),
])
def test_hostile_pass_links_get_sentences_and_keep_the_state(client, url, status, words):
    _, c = client
    r = c.get(url)
    assert r.status_code == status
    html = _html(r)
    assert words in unescape(html)
    if "FuseTIR, cannot" in words:    # the way back keeps the steps that applied
        assert "passes=FuseDenseAdd%2CFuseOps" in html
    if "__import__" in url:           # the known pass stays in the way back
        assert "passes=FuseDenseAdd" in html


def test_every_step_is_measured_by_the_workers(client):
    app, c = client
    url = "/model/mlp/measure?batch=1&passes=BindParams,FuseDenseAdd"
    c.get(url)
    drain(app)
    pane = unescape(_html(c.get(url)))
    assert pane.count("<td>yes</td>") == 3
    for label in ("0. as written", "1. BindParams", "2. fuse matmul + add"):
        assert label in pane
    rows = re.findall(r"<tr>.*?</tr>", pane, re.S)
    assert "lv1 = R.matmul" in rows[1] and "fused_matmul_add0" not in rows[1]
    assert "fused_matmul_add0" in rows[3] and "lv1 = R.matmul" not in rows[3]
