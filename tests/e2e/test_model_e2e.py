"""The model page in a real Chromium against ``python -m app``: from the gallery's card to
the MLP's page (graph with its fused group, test images with predictions), the workers'
measurement drawn as stacked bars by operator, then a function opened in the explorer.
Screenshot: test-artifacts/screenshots/model.png."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_model_page_from_the_gallery(page, server, shot):
    page.goto(server + "/")
    page.click("#card-model-mlp a.button")
    page.wait_for_selector("svg.model-graph")
    assert page.locator("svg.model-graph .mg-fused").count() == 1
    assert page.locator(".samples .sample").count() == 8
    # the measurement: every stage compiled, checked and timed in the workers
    page.wait_for_selector("#model-plot[data-drawn]", timeout=240_000)
    assert "%" in page.inner_text("#engine-accuracy")
    rows = page.locator(".model-table tbody tr")
    assert rows.count() == 4
    assert page.locator(".model-table td:text-is('yes')").count() == 4
    bars = page.evaluate("() => document.querySelectorAll('#model-plot .bars .point').length")
    assert bars > 0
    page.locator("#model-plot").scroll_into_view_if_needed()
    path = shot(page, "model")
    assert path.endswith("model.png")
    page.goto(server + "/model/mlp?batch=1&fused=1")
    page.wait_for_selector("svg.model-graph")
    shot(page, "model-top")
    # a function opens in the ordinary explorer
    page.click("#fn-fused_linear0_relu0 a.fname")
    page.wait_for_selector("#program-pane .node")
    assert "fused_linear0_relu0" in page.inner_text("#program-pane")
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]
