"""The Tune tab in a real Chromium: search from a step with the auto space, watch the
progress bar, the scatter plot and the table fill in, open a candidate as an ordinary trace
(shareable link, measurable steps), and stop a search (what it found stays); a click keeps a
running search on the tab, and once it has ended the tab tunes the page's new program.
Screenshots go to test-artifacts/screenshots/."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def open_tune_tab(page) -> None:
    page.click("#tab-tune")
    page.wait_for_selector("#tune-start")


def test_tune_tab_search_watch_open_and_stop(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=64")
    page.wait_for_selector("#program-pane .node")
    open_tune_tab(page)
    assert "Search from the initial program" in page.inner_text("#tune-pane")
    page.fill("#tune-trials", "6")
    page.click("#tune-start")
    page.wait_for_selector("#tune-progress")
    shot(page, "tune-01-started")
    page.wait_for_function(
        "() => { const e = document.querySelector('#tune-count');"
        " return e && e.textContent.trim().startsWith('6 / 6'); }", timeout=240_000)
    page.wait_for_selector("#tune-plot[data-drawn]")
    page.wait_for_selector("#tune-status")
    shot(page, "tune-02-finished")
    rows = page.locator("#tune-top tbody tr")
    assert rows.count() >= 1
    assert "GFLOP/s" in page.inner_text("#tune-pane")
    # open the best candidate: an ordinary trace with its sampled decisions
    page.locator("#tune-top a.tune-open").first.click()
    page.wait_for_url(re.compile(r"/explore/mm_relu\?n=64&t="))
    page.wait_for_selector("#program-pane .node")
    trace_text = page.inner_text("#trace-pane")
    assert "sample_perfect_tile" in trace_text and "decision=" in trace_text
    page.wait_for_selector("#runtime-plot[data-drawn]", timeout=120_000)
    shot(page, "tune-03-candidate-opened")
    # a long search, stopped: the trials done so far stay on the page
    open_tune_tab(page)
    page.fill("#tune-trials", "200")
    page.click("#tune-start")
    page.wait_for_function(
        "() => { const e = document.querySelector('#tune-count');"
        " return e && parseInt(e.textContent) >= 1; }", timeout=240_000)
    page.click("#tune-stop")
    page.wait_for_selector("#tune-status")
    status = page.inner_text("#tune-status")
    assert "stopped" in status
    done = int(page.inner_text("#tune-count").split("/")[0])
    assert 1 <= done < 200
    shot(page, "tune-04-stopped")
    assert not page.js_errors, page.js_errors


def test_tune_tab_keeps_a_running_search_then_follows_the_program(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=64")
    page.wait_for_selector("#program-pane .node")
    open_tune_tab(page)
    page.fill("#tune-trials", "200")
    page.click("#tune-start")
    page.wait_for_selector("#tune-stop", timeout=240_000)
    # a step while the search runs (loop j picked in the diagram with the keyboard, the tab
    # still shown): the search stays on the tab
    page.focus('#diagram-pane [data-sel="L/mm_relu/1/Y"]')
    page.keyboard.press("Enter")
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    page.fill('#toolbar form.prim input[name="factors"]', "None, 8")
    page.click('#toolbar button[data-prim="split"]')
    page.wait_for_function("() => document.querySelectorAll('#trace-pane li.step').length === 2")
    assert page.locator("#tune-stop").count() == 1
    shot(page, "tune-05-search-kept-across-a-click")
    page.click("#tune-stop")
    # the search has ended: the tab gets the page's program (after the split), and the
    # search's results stay below its form
    page.wait_for_function(
        "() => { const f = document.querySelector('#tune-pane form.tuneform');"
        " return f && /[?&]t=/.test(f.getAttribute('hx-post')); }")
    page.wait_for_selector("#tune-live #tune-status")
    assert "Search from the initial program" not in page.inner_text("#tune-pane form.tuneform")
    shot(page, "tune-06-ended-search-kept-under-the-new-form")
    # the next step gives the tab the page's program again (an undo here)
    page.click('[data-key="undo"]')
    page.wait_for_url(re.compile(r"at=0"))
    page.wait_for_function(
        "() => { const f = document.querySelector('#tune-pane form.tuneform');"
        " return f && /[?&]at=0/.test(f.getAttribute('hx-post')); }")
    assert page.locator("#tune-status").count() == 0
    assert not page.js_errors, page.js_errors
