"""A learner opens a shipped preset from the explorer's Presets menu (matmul-best at the
sizes being explored) and sees every step measured against numpy, the last one far faster
than the first. Screenshot: test-artifacts/screenshots/preset-matmul-best.png."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def test_open_matmul_best_from_the_presets_menu(page, server, shot):
    page.goto(server + "/explore/matmul?n=128")
    page.wait_for_selector("#program-pane .node")
    page.click("#trace-presets summary")
    page.click("#trace-presets a:text-is('matmul-best')")
    page.wait_for_url(re.compile(r"/explore/matmul\?n=128&t="))
    state = page.inner_text("header")
    m = re.search(r"step (\d+) of (\d+)", state)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) >= 10, state
    program = page.inner_text("#program-pane")
    assert "T.parallel" in program and "T.unroll" in program and "T.vectorized" in program
    # every step compiled, checked and timed; the plot has a point per step
    steps = int(m.group(2)) + 1
    page.wait_for_function(
        "(n) => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === n; }", arg=steps, timeout=180_000)
    table = page.locator("#measure-pane table.mtable").first   # (the cache table follows)
    assert table.locator("tbody tr").count() == steps
    assert table.locator("span.ok").count() == steps               # all match numpy
    now = page.inner_text("#measure-now") if page.locator("#measure-now").count() else \
        page.inner_text("#measure-pane")
    assert "matches numpy" in now and "faster than step 0" in now, now
    # compile time split into ours + llvmlite's on every row
    assert table.locator("td.compile span.split").count() == steps
    table.scroll_into_view_if_needed()
    shot(page, "preset-matmul-best")
    # the code tabs show each parallel loop body's module after the kernel's
    page.click("#tab-ll")
    page.wait_for_selector("#code-ll pre")
    ll = page.inner_text("#code-ll")
    assert ll.count("parallel loop body") == 2 and "engine_fn_matmul_par2_task" in ll, ll[:500]
    page.click("#tab-asm")
    page.wait_for_selector("#code-asm pre")
    asm = page.inner_text("#code-asm")
    assert "vfmadd" in asm and asm.count("parallel loop body") == 2
    shot(page, "preset-matmul-best-assembly")
    assert page.js_errors == []
