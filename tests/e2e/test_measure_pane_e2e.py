"""After a click the measurement pane stays on the page and is updated in place, in a real
Chromium: the runtime plot is the same plotly element, updated (``Plotly.react``) with the
new step's point (drawn as soon as the body's answer is swapped in), the roofline plot too
when its tab is shown, a state seen before comes
with its measurements (no request of its own), and an answer for an older state never
overwrites the current one.
Screenshot: test-artifacts/screenshots/measure-pane-in-place.png."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

N = 64


def wait_points(page, plot_id: str, n: int) -> None:
    page.wait_for_function(
        "([id, n]) => { const e = document.querySelector('#' + id + '[data-drawn]');"
        " return e && parseInt(e.dataset.points) === n && e.offsetParent !== null; }",
        arg=[plot_id, n], timeout=120_000)


def test_a_click_updates_the_measurement_pane_in_place(page, server, shot):
    page.goto(f"{server}/explore/mm_relu?n={N}")
    wait_points(page, "runtime-plot", 1)
    page.click("#mtab-roofline")
    wait_points(page, "roofline-plot", 1)
    page.click("#mtab-runtime")
    # mark the elements that must survive the click
    page.evaluate("() => { document.getElementById('measure-pane').dataset.mark = 'kept';"
                  " document.getElementById('roofline-plot').dataset.mark = 'kept';"
                  " document.getElementById('runtime-plot').dataset.mark = 'kept';"
                  " document.getElementById('program-pane').dataset.mark = 'old'; }")
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    page.fill('#toolbar form.prim:has(button[data-prim="split"]) input[name="factors"]',
              "None, 4")
    page.click('#toolbar button[data-prim="split"]')
    wait_points(page, "runtime-plot", 2)
    assert page.get_attribute("#measure-pane", "data-mark") == "kept"    # not swapped
    assert page.get_attribute("#program-pane", "data-mark") is None       # swapped
    # the runtime plot is the same plotly element, its figure updated: the new step's
    # point is there, checked correct
    assert page.get_attribute("#runtime-plot", "data-mark") == "kept"
    runtime = page.evaluate("() => document.getElementById('runtime-plot').data"
                            ".filter(d => d.name === 'runtime ms').map(d => [d.x, d.text])")
    assert runtime == [[[0, 1], ["correct", "correct"]]]
    # a body's own answer draws its plot in the task of its swap, not a frame later (the
    # panes of a click are painted first; a body's answer has nothing else to paint): when
    # it has settled, the plot is drawn (no longer stale)
    stale_when_settled = page.evaluate(
        "() => new Promise(done => { const b = document.getElementById('measure-body');"
        " b.addEventListener('htmx:afterSettle', () => done(document.getElementById("
        "'runtime-plot').hasAttribute('data-stale')), {once: true});"
        " htmx.ajax('GET', b.getAttribute('data-url'), {source: b, target: b,"
        " swap: 'innerHTML'}); })")
    assert stale_when_settled is False
    assert page.get_attribute("#runtime-plot", "data-mark") == "kept"
    wait_points(page, "cache-plot", 2)
    assert page.locator("#measure-body.stale, #cache-body.stale").count() == 0
    # the roofline plot: the same plotly element, updated when its tab is shown
    page.click("#mtab-roofline")
    wait_points(page, "roofline-plot", 2)
    assert page.get_attribute("#roofline-plot", "data-mark") == "kept"
    marks = page.evaluate("() => document.getElementById('roofline-plot').data"
                          ".filter(d => d.name === 'current step').map(d => d.text)")
    assert marks == [["1"]]
    shot(page, "measure-pane-in-place")
    page.click("#mtab-runtime")

    # undo: step 0 is measured already, so its bodies come with the answer
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/measure?" in r.url or
            "/cache?" in r.url else None)
    page.click('#trace-pane a[data-key="undo"]')
    page.wait_for_function(
        "() => document.querySelector('#trace-pane li.step.current') &&"
        " document.querySelector('#trace-pane li.step.current').value === 0")
    wait_points(page, "runtime-plot", 2)
    page.wait_for_function("() => document.querySelector('#measure-now') &&"
                           " /Step 0:/.test(document.querySelector('#measure-now').textContent)")
    assert asked == []
    assert page.get_attribute("#measure-pane", "data-mark") == "kept"

    # an answer for another state than the page's is dropped
    old = page.get_attribute("#measure-body", "data-url").replace(f"n={N}", f"n={N + 8}")
    page.evaluate(
        "(url) => new Promise(done => { const b = document.getElementById('measure-body');"
        " b.addEventListener('htmx:afterRequest', () => setTimeout(done, 50), {once: true});"
        " htmx.ajax('GET', url, {source: b, target: b, swap: 'innerHTML'}); })", old)
    assert "Step 0:" in page.inner_text("#measure-now")
    assert page.get_attribute("#runtime-plot", "data-points") == "2"
    assert page.js_errors == []
