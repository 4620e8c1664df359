"""A learner opens a link whose trace samples (the course's stochastic schedule on mm_relu:
sample_perfect_tile, then split with the sampled factors): the trace pane lists the
sampling step with its decision, every step is measured and matches numpy, and stepping
back to the sampling step shows the program it left unchanged.
Screenshot: test-artifacts/screenshots/sampling-trace.png."""
from __future__ import annotations

import re

import pytest

import engine

pytestmark = pytest.mark.e2e


def test_a_link_with_sampling_steps_replays_and_shows_decisions(page, server, shot):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=64),
                          workload=("mm_relu", {"n": 64}), seed=3)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, decision=[16, 4]))
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction(y, k)
    page.goto(f"{server}/explore/mm_relu?n=64&t={sch.trace.encode()}")
    page.wait_for_selector("#program-pane .node")
    steps = page.inner_text("#trace-pane ol.steps")
    assert "sch.sample_perfect_tile(j, n=2, max_innermost_factor=16, decision=[16, 4])" \
        in steps, steps
    assert "factors=[v4, v5]" in steps
    m = re.search(r"step (\d+) of (\d+)", page.inner_text("header"))
    assert m and m.group(1) == m.group(2) == "4"
    program = page.inner_text("#program-pane")
    assert "for i, j_0 in T.grid(64, 16):" in program and "for k, j_1 in T.grid(64, 4):" \
        in program, program
    page.wait_for_function(
        "(n) => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === n; }", arg=5, timeout=180_000)
    table = page.locator("#measure-pane table.mtable").first
    assert table.locator("span.ok").count() == 5                 # every step matches numpy
    shot(page, "sampling-trace")
    page.click("#trace-pane a.steplink:has-text('sample_perfect_tile')")
    page.wait_for_url(re.compile(r"at=1"))
    page.wait_for_selector("#program-pane .node")
    program = page.inner_text("#program-pane")
    assert "for i, j, k in T.grid(64, 64, 64):" in program and "j_0" not in program
    assert page.js_errors == []
