"""Fixtures for the browser tests: the real server (python -m app, waitress) on a free
127.0.0.1 port, and Debian's Chromium driven by Playwright (never a downloaded browser)."""
from __future__ import annotations

import os
import subprocess
import tempfile
import urllib.request

import pytest

from live_server import free_port, start_app, stop_app, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHOTS = os.path.join(ROOT, "test-artifacts", "screenshots")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def start_server(port: int, work: str | None = None) -> subprocess.Popen:
    """The real server on ``port`` with a fresh store (stored results from earlier runs must
    not hide compiles) in ``work``/instance (a new folder by default), once it serves its
    static files."""
    work = work or tempfile.mkdtemp(prefix="explorer-e2e-")
    proc = start_app(["--host", "127.0.0.1", "--port", str(port),
                      "--instance", os.path.join(work, "instance")], work)
    wait_until(proc, lambda: urllib.request.urlopen(
        f"http://127.0.0.1:{port}/static/favicon.svg", timeout=2), timeout=60, poll=0.2)
    return proc


@pytest.fixture(scope="session")
def server():
    port = free_port()
    proc = start_server(port)
    yield f"http://127.0.0.1:{port}"
    stop_app(proc, timeout=10)


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (run ./run-tests.sh to install it)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# htmx logs a request it aborted on purpose as two console errors, "htmx:afterRequest" then
# "htmx:sendAbort": a search's Stop supersedes the progress poll in flight (hx-sync replace).
# A request that failed is still caught: its "htmx:afterRequest" comes with "htmx:sendError"
# or "htmx:timeout", which are not ignored.
_SUPERSEDED_REQUEST = ("htmx:afterRequest", "htmx:sendAbort")


def _expected_console_error(text: str) -> bool:
    return "status of 422" in text or text in _SUPERSEDED_REQUEST


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # CSP violations and failed loads show up as console errors
    # (a refused primitive answers 422 on purpose: Chromium logs that as a failed load)
    pg.on("console", lambda m: errors.append(m.text)
          if m.type == "error" and not _expected_console_error(m.text) else None)
    pg.js_errors = errors  # type: ignore[attr-defined]
    yield pg
    ctx.close()


@pytest.fixture()
def shot():
    os.makedirs(SHOTS, exist_ok=True)

    def take(page, name: str) -> str:
        path = os.path.join(SHOTS, f"{name}.png")
        page.screenshot(path=path)
        return path
    return take
