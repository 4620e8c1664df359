"""The compare page in a real Chromium: two independent schedules of mm_relu side by side
(programs with their differing lines marked, both loop diagrams, runtime and cache plots
overlaid), swapping A and B, and presenter mode. Screenshots:
test-artifacts/screenshots/lessons-compare-*.png."""
from __future__ import annotations

import re

import pytest

import engine

pytestmark = pytest.mark.e2e
N = 64


def _link(server: str, build) -> str:
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=N), workload=("mm_relu", {"n": N}))
    build(sch)
    return f"{server}/explore/mm_relu?n={N}&t={sch.trace.encode()}"


def course(sch):
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(y, k)


def parallel_rows(sch):
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    sch.parallel(i)


def test_two_schedules_side_by_side(page, server, shot):
    a, b = _link(server, course), _link(server, parallel_rows)
    page.goto(server + "/compare")
    page.fill('input[name="a"]', a)
    page.fill('input[name="b"]', b)
    page.click("#compare-go")
    page.wait_for_selector("#side-B")
    assert "lines only in A" in page.inner_text("#cmp-summary")
    assert page.locator("#side-A .cmp-changed-A").count() > 0
    assert page.locator("#side-B .cmp-changed-B").count() > 0
    assert "parallel" in page.inner_text("#diagram-B").lower() or \
        page.locator("#diagram-B svg").count() == 1
    page.wait_for_selector("#cmp-runtime-plot[data-drawn]", timeout=240_000)
    page.wait_for_selector("#cmp-pending", state="detached", timeout=240_000)
    assert re.search(r"B is [0-9.]+× (faster|slower) than A", page.inner_text("#cmp-now"))
    shot(page, "lessons-compare-01-side-by-side")
    # swap: A and B change places
    page.click("text=⇄ swap")
    page.wait_for_selector("#side-A")
    assert "Y_init" in page.inner_text("#side-B") and "Y_init" not in page.inner_text("#side-A")
    # presenter mode on the compare page: larger text, panes can be hidden
    page.goto(page.url + "&present=1")
    page.wait_for_selector("#presentbar")
    page.uncheck('#presentbar input[data-pane=".cmp-diagrams"]')
    assert not page.locator("#diagram-A").is_visible()
    shot(page, "lessons-compare-02-presenter")
    page.check('#presentbar input[data-pane=".cmp-diagrams"]')
    assert not page.js_errors, page.js_errors


def test_trace_pane_forks_open_in_a_new_tab(page, server, shot):
    """The trace pane's "fork" and "compare" buttons (one form carries the trace) open the
    branch from that step, and the compare page of the trace and that branch, in new tabs."""
    page.goto(_link(server, course))
    page.wait_for_selector("#trace-pane li.step")
    with page.context.expect_page() as new_tab:
        page.click('#trace-pane button.fork[value="2"]:not(.compare-link)')
    branch = new_tab.value
    branch.wait_for_load_state()
    assert "t=" in branch.url and "step 2 of 2" in branch.inner_text("#statebar")
    branch.close()
    with page.context.expect_page() as new_tab:
        page.click('#trace-pane button.compare-link[value="1"]')
    cmp_page = new_tab.value
    cmp_page.wait_for_selector("#side-B")
    assert "share their first 1 step" in cmp_page.inner_text("body")
    shot(cmp_page, "lessons-compare-03-fork-from-trace")
    cmp_page.close()
