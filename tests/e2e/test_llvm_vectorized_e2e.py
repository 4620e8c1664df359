"""The program pane says which loops LLVM vectorized on its own, in a real Chromium: a
matmul whose output row ``j`` is innermost under the reduction, unvectorized, gets the badge
"vectorized by LLVM (width N)" on ``j``'s line once the step is measured; vectorizing ``j``
with the toolbar makes it the schedule's own vector code, and the badge goes.
Screenshot: test-artifacts/screenshots/llvm-vectorized-badge.png."""
from __future__ import annotations

import re

import pytest

import engine
from engine.schedule import Schedule

pytestmark = pytest.mark.e2e

N = 64


def _row_inner_token() -> str:
    sch = Schedule(engine.workloads.get("matmul", n=N), workload=("matmul", {"n": N}))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    sch.reorder(i, k, j)
    return sch.trace.encode()


def test_the_badge_names_the_loop_llvm_vectorized(page, server, shot):
    page.goto(f"{server}/explore/matmul?n={N}&t={_row_inner_token()}")
    badge = page.wait_for_selector('#program-pane .llvm-vec-badge[data-loop="j"]',
                                   timeout=120_000)
    text = badge.get_attribute("data-label")
    # the badge's words are drawn, not part of the program's text (copying it stays clean)
    assert "vectorized by LLVM" not in page.inner_text("#program-pane")
    # (j's line is T.grid(64, 64, 64) of i, k and j: the badge names its loop)
    assert re.fullmatch(r"j: vectorized by LLVM \(width (\d+)\)", text), text
    assert int(re.search(r"\d+", text).group(0)) >= 4
    # on j's own line, and only there (k, the float sum, is not vectorized)
    line = page.evaluate("() => document.querySelector('#program-pane .llvm-vec-badge')"
                         ".closest('.line').textContent")
    assert "for j in" in line or re.search(r"\bj\b", line.split("in")[0])
    assert page.locator("#program-pane .llvm-vec-badge").count() == 1
    assert "loop j" in page.inner_text("#llvm-vectorized")
    shot(page, "llvm-vectorized-badge")

    # the schedule vectorizes j itself: no badge once the new step is measured
    page.click('#program-pane .node-loop[data-loop="j"]')
    page.wait_for_selector('#toolbar button[data-prim="vectorize"]')
    page.click('#toolbar button[data-prim="vectorize"]')
    page.wait_for_function(
        "() => document.querySelector('#trace-pane li.step.current') &&"
        " document.querySelector('#trace-pane li.step.current').value === 2")
    page.wait_for_function(
        "() => { const b = document.getElementById('measure-body');"
        " const now = document.getElementById('measure-now');"
        " return b && !b.classList.contains('stale') && now &&"
        " now.textContent.includes('Step 2') && now.textContent.includes('numpy'); }",
        timeout=120_000)
    assert page.locator('#program-pane .llvm-vec-badge[data-loop="j"]').count() == 0
    shot(page, "llvm-vectorized-badge-gone")
    assert not page.js_errors, page.js_errors
