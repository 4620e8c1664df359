"""The Content-Security-Policy of app.web.security, checked in a real Chromium: plotly.js draws and
htmx swaps under it with no violation, while an inline script is blocked."""
from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENDOR = os.path.join(ROOT, "static", "vendor")


def _chromium() -> str | None:
    for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(p):
            return p
    return shutil.which("chromium")


def _plotly_js() -> str:
    p = os.path.join(VENDOR, "plotly.min.js")
    if os.path.exists(p):
        return p
    import plotly
    return os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")


PAGE = """<!doctype html><html><head><meta charset="utf-8">
<meta name="htmx-config" content='{"allowEval": false, "allowScriptTags": false}'>
<script src="/v.js"></script>
<script src="/plotly.js"></script>
{htmx}
<script src="/t.js" defer></script>
</head><body>
<div id="plot" style="width:400px;height:300px"></div>
<button id="go" hx-post="/clicked" hx-target="#out" hx-swap="innerHTML">go</button>
<div id="out">before</div>
<script>window.inlineRan = true;</script>
</body></html>"""

V_JS = """window.violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.violations.push({directive: e.violatedDirective, blocked: e.blockedURI,
                          sample: e.sample, source: e.sourceFile});
});"""

T_JS = """Plotly.newPlot('plot',
  [{x: [1, 2, 3], y: [3, 1, 2], type: 'scatter', mode: 'lines+markers', name: 'ours'},
   {x: [1, 2, 3], y: [2, 2, 2], type: 'bar', name: 'numpy'}],
  {title: {text: 'runtime'}, margin: {t: 30}}, {responsive: true}
).then(function () { window.plotted = true; });"""


@pytest.fixture(scope="module")
def server():
    from flask import Flask, Response, send_file
    from werkzeug.serving import make_server

    from app.web.security import init_security

    htmx = os.path.join(VENDOR, "htmx.min.js")
    has_htmx = os.path.exists(htmx)
    app = Flask("csp-test")

    @app.get("/")
    def page():
        tag = '<script src="/htmx.js"></script>' if has_htmx else ""
        return PAGE.replace("{htmx}", tag)

    @app.get("/v.js")
    def v():
        return Response(V_JS, mimetype="text/javascript")

    @app.get("/t.js")
    def t():
        return Response(T_JS, mimetype="text/javascript")

    @app.get("/plotly.js")
    def plotly_js():
        return send_file(_plotly_js(), mimetype="text/javascript")

    @app.get("/htmx.js")
    def htmx_js():
        return send_file(htmx, mimetype="text/javascript")

    @app.post("/clicked")
    def clicked():
        return "<b>after</b>"

    init_security(app)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_port}", has_htmx
    srv.shutdown()


def _poll(page, expr: str, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if page.evaluate(expr):
            return True
        time.sleep(0.05)
    return False


def test_plotly_and_htmx_work_under_the_policy(server):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine")
    base, has_htmx = server
    # (in a thread of its own: Playwright's sync API refuses to start where another sync
    # Playwright — the browser tests' session fixture — is already running)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as ex:
        inline_ran, violations, console = ex.submit(_drive, chromium, base, has_htmx).result()
    # The inline <script> is the one and only thing the policy blocked.
    assert inline_ran is False
    assert len(violations) == 1, (violations, console)
    assert violations[0]["directive"].startswith("script-src")
    assert violations[0]["blocked"] == "inline"
    # (a violation's message quotes the policy, whose 'wasm-unsafe-eval' is not an eval)
    assert not [c for c in console
                if "eval" in c.lower().replace("'wasm-unsafe-eval'", "")], console


def _drive(chromium: str, base: str, has_htmx: bool):
    from playwright.sync_api import sync_playwright
    console: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.goto(base + "/")
            # (page.evaluate polls from outside; wait_for_function would need eval in the page.)
            assert _poll(page, "window.plotted === true"), (console, page.evaluate("window.violations"))
            assert page.locator("#plot .main-svg").count() >= 1
            assert page.locator("#plot .scatterlayer .trace").count() == 1
            if has_htmx:
                page.click("#go")
                assert _poll(page, "document.querySelector('#out').textContent === 'after'")
                # htmx's POST carried an Origin the same-origin check accepted.
            violations = page.evaluate("window.violations")
            inline_ran = page.evaluate("window.inlineRan === true")
        finally:
            browser.close()
    return inline_ran, violations, console
