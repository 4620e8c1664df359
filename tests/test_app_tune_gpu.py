"""The Tune tab on a GPU target (issue 39): the engine's GPU space, every candidate built
for the target, emulated, checked against numpy and ranked by the model — the tab says
"modeled for <GPU>"; its candidates open on the same target. The search runs as the
workers' tune job (inline in this process here), with a few trials."""
from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import drain, make_test_app

HX = {"HX-Request": "true"}
Q = "n=64&target=cuda-a100"


@pytest.fixture(scope="module")
def app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False})


def text(r) -> str:
    return r.get_data(as_text=True)


def test_gpu_tune_tab_says_what_it_searches(app):
    c = app.test_client()
    page = text(c.get(f"/explore/matmul/tune?{Q}", headers=HX))
    assert 'id="tune-modeled"' in page and "Target A100" in page
    assert "modeled for A100 (no GPU on this machine)" in page
    assert 'value="clicks"' not in page           # only the GPU space
    cpu = text(c.get("/explore/matmul/tune?n=64", headers=HX))
    assert 'id="tune-modeled"' not in cpu and 'value="clicks"' in cpu
    r = c.post(f"/explore/matmul/tune?{Q}", data={"trials": "3", "space": "clicks",
                                                   "split": "i@C"}, headers=HX)
    assert r.status_code == 400 and "GPU space" in text(r)


def test_gpu_search_ranks_candidates_by_the_model(app):
    c = app.test_client()
    r = c.post(f"/explore/matmul/tune?{Q}", data={"trials": "3", "strategy": "random",
                                                   "seed": "1"}, headers=HX)
    assert r.status_code == 200, text(r)
    tid = re.search(r'id="tune-([\w-]+)"', text(r)).group(1)
    drain(app)
    live = text(c.get(f"/tune/{tid}", headers=HX))
    assert "3 / 3 trials" in live and "hx-trigger" not in live.split(">", 1)[0]
    assert "Times and GFLOP/s modeled for A100" in live and "(modeled)" in live
    assert "numpy" not in live.split('id="tune-plot"')[0].split("best so far")[1]
    links = [unescape(u) for u in re.findall(r'href="([^"]+)" class="tune-open"', live)]
    assert links, live
    q = parse_qs(urlsplit(links[0]).query)
    assert q["target"] == ["cuda-a100"] and q["n"] == ["64"] and q["t"]
    # the best candidate opens in the explorer as a bound GPU program
    page = text(c.get(links[0]))
    assert "Target: A100" in page and 'thread="threadIdx.x"' in page
