"""Fixtures for the browser tests: the real server (python -m app, waitress) on a free
127.0.0.1 port, and Debian's Chromium driven by Playwright (never a downloaded browser)."""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import sys
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHOTS = os.path.join(ROOT, "test-artifacts", "screenshots")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    # a fresh store (stored results from earlier runs must not hide compiles) and a log
    # file rather than a pipe nobody reads (a full pipe would block the server)
    work = tempfile.mkdtemp(prefix="explorer-e2e-")
    log = open(os.path.join(work, "server.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port),
                             "--instance", os.path.join(work, "instance")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log_path = log.name  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log.name, errors="replace") as f:
                out = f.read()
            raise RuntimeError(f"the server exited early:\n{out}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/static/favicon.svg", timeout=2)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start within 60 s")


@pytest.fixture(scope="session")
def server():
    port = free_port()
    proc = start_server(port)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (run ./run-tests.sh to install it)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


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
          if m.type == "error" and "status of 422" not in m.text else None)
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
