""""Tune every function" on the MLP's page in a real Chromium against ``python -m app``:
the button starts the searches in the workers, the progress table fills in function by
function, and when they end the page reloads on the link with every function's trace, whose
measurement matches numpy. Screenshot: test-artifacts/screenshots/model-tune.png."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

pytestmark = pytest.mark.e2e


def test_tune_every_function_from_the_model_page(page, server, shot):
    page.goto(server + "/model/mlp?batch=1&fused=1")
    page.wait_for_selector("svg.model-graph")
    page.fill(".model-tune-form input[name=trials]", "3")
    page.click("#model-tune-start")
    page.wait_for_selector("#model-tune-table")
    # when every search has ended the page moves to the tuned link
    page.wait_for_url("**tuned=**", timeout=300_000)
    q = parse_qs(urlparse(page.url).query)
    assert "t.fused_linear0_relu0" in q and "t.linear1" in q
    page.wait_for_selector("#model-tune-table")
    assert page.locator("#model-tune-table tbody tr").count() == 2
    assert "3 / 3" in page.inner_text("#model-tune-fused_linear0_relu0")
    assert page.locator("#model-tune-table .error").count() == 0
    # the end-to-end measurement includes the tuned stage, matching numpy
    page.wait_for_selector("#model-plot[data-drawn]", timeout=240_000)
    assert page.locator(".model-table td:text-is('yes')").count() == 5
    page.locator("#model-tune-table").scroll_into_view_if_needed()
    shot(page, "model-tune")
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]
