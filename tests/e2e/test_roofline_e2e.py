"""The roofline tab of the measurement pane in a real Chromium against ``python -m app``:
after the course's first step (split j by 4) the machine's peaks — measured once by a worker
with the engine's FMA and streaming-copy kernels — draw the roof, and both steps sit on it
as numbered markers. Screenshot: test-artifacts/screenshots/roofline.png."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def test_roofline_plot_after_the_course_first_step(page, server, shot):
    page.goto(server + "/explore/mm_relu")
    page.wait_for_selector("#program-pane .node")
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    page.fill('#toolbar form.prim:has(button[data-prim="split"]) input[name="factors"]', "None, 4")
    page.click('#toolbar button[data-prim="split"]')
    page.wait_for_function(
        "() => document.querySelectorAll('#trace-pane li.step').length === 2")
    # both steps measured (the runtime tab is the default one)
    page.wait_for_function(
        "() => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === 2; }", timeout=120_000)
    page.click("#mtab-roofline")
    # the peaks may still be measuring: the pane polls until the roofline is there
    page.wait_for_function(
        "() => { const e = document.querySelector('#roofline-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === 2; }", timeout=120_000)
    plot = page.locator("#roofline-plot")
    assert plot.is_visible()
    assert not page.locator("#runtime-plot").is_visible()
    labels = plot.inner_text()
    assert re.search(r"peak [\d,.]+ GFLOP/s", labels), labels
    assert re.search(r"[\d.]+ GB/s", labels), labels
    assert "numpy" in labels
    # one numbered marker per step, the current one (1) among them
    marks = page.evaluate(
        "() => Object.fromEntries(document.getElementById('roofline-plot').data"
        ".filter(d => d.name === 'steps' || d.name === 'current step')"
        ".map(d => [d.name, d.text]))")
    assert marks == {"current step": ["1"], "steps": ["0"]}
    assert "of the roof" in page.inner_text("#roofline-now")
    # the program column's tabs are independent of the measurement pane's
    assert page.get_attribute("#tab-program", "aria-selected") == "true"
    assert page.is_visible("#panel-program")
    shot(page, "roofline")
    # the chosen tab survives the pane's re-render after the next step
    page.click('#program-pane [data-sel="L/mm_relu/0/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/0/Y"] form.prim')
    page.fill('#toolbar input[name="order"]', "i, j_0, k, j_1")
    page.click('#toolbar button[data-prim="reorder"]')
    page.wait_for_function(
        "() => { const e = document.querySelector('#roofline-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === 3 && e.offsetParent !== null; }",
        timeout=120_000)
    assert page.get_attribute("#mtab-roofline", "aria-selected") == "true"
    assert page.js_errors == []
