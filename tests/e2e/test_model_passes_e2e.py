"""The model page's passes, step by step, in a real Chromium against ``python -m app``: the
MLP's graph as written, "BindParams", then "fuse matmul + add" clicked — the fused
function appears in the graph pane (the graph before it beside), and the per-operator table
the workers measure gains the step, its operators the fused functions.
Screenshots: test-artifacts/screenshots/model-passes.png (the graph pane after the click)
and model-passes-table.png (the per-operator table)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_fuse_matmul_add_on_the_mlp(page, server, shot):
    page.goto(server + "/model/mlp?batch=1&fused=1")
    page.click("#step-passes")
    page.wait_for_selector("#model-passes")
    assert "R.matmul" in page.inner_text("#graph-after")
    page.wait_for_selector(".model-table", timeout=240_000)
    assert page.locator(".model-table tbody tr").count() == 1
    page.click("#pass-add-BindParams")
    page.wait_for_selector("#graph-before")
    page.wait_for_selector(".model-table tbody tr:nth-child(2)", timeout=240_000)
    # the chapter's rewrite, by clicking
    page.click("#pass-add-FuseDenseAdd")
    page.wait_for_url("**passes=BindParams%2CFuseDenseAdd**")
    after = page.inner_text("#graph-after")
    assert "fused_matmul_add0" in after and "fused_matmul_add1" in after
    assert "fuses R.matmul → R.add" in after
    assert "fused_matmul_add0" not in page.inner_text("#graph-before")
    assert page.locator("#graph-after svg .mg-fused").count() == 2
    assert page.inner_text("#pass-step-2").startswith("fuse matmul + add")
    page.locator("#graph-after").scroll_into_view_if_needed()
    shot(page, "model-passes")
    # the per-operator table: one row per step, the new one timing the fused functions
    page.wait_for_selector(".model-table tbody tr:nth-child(3)", timeout=240_000)
    rows = page.locator(".model-table tbody tr")
    assert rows.count() == 3
    last = rows.nth(2).inner_text()
    assert "2. fuse matmul + add" in last and "fused_matmul_add0" in last and "yes" in last
    assert "fused_matmul_add0" not in rows.nth(1).inner_text()
    assert "R.matmul" in rows.nth(1).inner_text()
    page.wait_for_selector("#model-plot[data-drawn]", timeout=60_000)
    page.locator(".model-measure").scroll_into_view_if_needed()
    shot(page, "model-passes-table")
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]
