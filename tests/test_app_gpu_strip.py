"""The loop diagram's GPU line fills when the worker's result arrives: the measurement
body's own answer carries it out-of-band (registers per thread from ptxas, shared memory,
occupancy), not only the next drawing of the diagram."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import drain, make_test_app

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def app():
    return make_test_app()


def test_the_measure_answer_fills_the_diagrams_gpu_line(app):
    c = app.test_client()
    q = {"target": "cuda-h100-sxm", "n": "256"}
    answers = []
    for sel, prim, args in (("L/window_sum/0/C", "split", {"factors": "None, 64"}),
                            ("L/window_sum/0/C", "bind", {"thread_axis": "blockIdx.x"}),
                            ("L/window_sum/1/C", "bind", {"thread_axis": "threadIdx.x"}),
                            ("B/window_sum/C", "cache_read", {"buffer": "0", "scope": "shared"}),
                            ("B/window_sum/A_shared", "compute_at", {"loop": "L/window_sum/1/C"})):
        r = c.post("/explore/window_sum/apply", data=dict(q, sel=sel, primitive=prim, **args),
                   headers=HX)
        assert r.status_code == 200, r.get_data(as_text=True)[:500]
        answers.append(r.get_data(as_text=True))
        q = {k: v[0] for k, v in parse_qs(urlsplit(r.headers["HX-Push-Url"]).query).items()}
    # the click's own diagram: grid and block, the rest "once built"
    strip = re.search(r'<div class="gpu-strip" id="diagram-gpu">.*?</div>', answers[-1], re.S)
    assert strip and "once built" in strip.group(0)
    c.get("/explore/window_sum/measure", query_string=q)
    drain(app)
    body = c.get("/explore/window_sum/measure", query_string=q).get_data(as_text=True)
    oob = re.search(r'<div class="gpu-strip" id="diagram-gpu" hx-swap-oob="true">(.*?)</div>',
                    body, re.S)
    assert oob, body[-2000:]
    line = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", oob.group(1)))
    assert "block 64×1×1 = 64 of 1024 threads" in line
    assert re.search(r"shared [\d.]+ (B|KiB) of 48 KiB/block", line), line
    assert re.search(r"\d+ registers/thread", line) and re.search(r"occupancy \d+%", line), line
    # only once, outside the body's own content (which is kept for the state)
    assert body.count('id="diagram-gpu"') == 1
