"""The real server (``python -m app``: waitress + measurement worker processes + the store)
over HTTP: a generated kernel that crashes, or runs past the step time limit, is reported on
its step while the server keeps serving; and user text in names, programs, parameters and
imported traces renders inert in Chromium (no injected element, no script run)."""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import time
from urllib.parse import quote, urlencode, urlsplit

import pytest

from live_server import free_port, start_app, stop_app, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

CRASH = '''@T.prim_func
def oob(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "oob", "tir.noalias": True})
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi * 100000000]
'''

ENDLESS = '''@T.prim_func
def slow(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "slow", "tir.noalias": True})
    for i, j, k in T.grid(100000, 100000, 100000):
        with T.block("B"):
            vi = T.axis.spatial(4, i % 4)
            vj = T.axis.reduce(100000, j)
            vk = T.axis.reduce(100000, k)
            B[vi] = B[vi] + A[vi]
'''

# Markup that would add an element (and run script, were the CSP absent) if it were not escaped.
PAYLOAD = '<img src=x data-xss=1 onerror="window.__xss=1">'
EVIL_BLOCK = '''@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "f", "tir.noalias": True})
    for i in range(8):
        with T.block("%s"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
''' % PAYLOAD.replace('"', "'")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    proc = start_app(["--port", str(port), "--measure-workers", "2",
                      "--instance", str(tmp_path_factory.mktemp("instance")),
                      "--limit", "step_time_limit_s=1"], tmp_path_factory.mktemp("log"))

    def answers():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/static/favicon.svg")
        return c.getresponse().status == 200

    try:
        wait_until(proc, answers)
    except RuntimeError as e:
        pytest.fail(str(e))
    yield f"http://127.0.0.1:{port}", proc
    stop_app(proc)


def request(base: str, method: str, path: str, fields: dict | None = None,
            headers: dict | None = None) -> tuple[int, dict, str]:
    u = urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    h = dict(headers or {})
    body = None
    if fields is not None:
        body = urlencode(fields)
        h["Content-Type"] = "application/x-www-form-urlencoded"
        h.setdefault("Origin", base)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    out = (r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace"))
    c.close()
    return out


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def settled_measure(base: str, url: str, polls: int = 600) -> str:
    path = url.replace("/explore/custom?", "/explore/custom/measure?") if "/custom?" in url \
        else url
    for _ in range(polls):
        st, _, html = request(base, "GET", path, headers={"HX-Request": "true"})
        assert st == 200, html[:300]
        if 'id="measure-pending"' not in html:
            return text_of(html)
        time.sleep(0.25)
    raise AssertionError(f"still pending: {text_of(html)[:300]}")


def custom(base: str, program: str) -> str:
    st, headers, html = request(base, "POST", "/explore/custom", {"program": program})
    assert st == 303, text_of(html)[:300]
    return urlsplit(headers["Location"]).path + "?" + urlsplit(headers["Location"]).query


def test_an_out_of_bounds_kernel_is_refused_and_the_server_keeps_serving(server):
    """The pasted kernel reading far past its input (it used to crash its worker) is refused
    by the bounds proof, in a worker; the server keeps serving."""
    base, proc = server
    url = custom(base, CRASH)
    page = settled_measure(base, url)
    assert "A[i * 100000000] may read past the end of A" in page
    assert proc.poll() is None
    st, _, html = request(base, "GET", "/")
    assert st == 200 and "Pick a tensor program" in html
    assert "matches numpy" in settled_measure(base, "/explore/mm_relu/measure?n=16")


def test_a_step_over_the_time_limit_is_cut_and_reported(server):
    base, proc = server
    page = settled_measure(base, custom(base, ENDLESS))
    assert "this step took longer than 1 s — measurement skipped, the trace is kept" in page
    assert proc.poll() is None
    st, _, html = request(base, "GET", custom(base, ENDLESS).replace("/explore/custom?",
                                                                    "/explore/custom/code?"),
                          headers={"HX-Request": "true"})
    assert st == 200 and "define" in html           # compiling it is fine; only runs are cut


def _chromium() -> str | None:
    for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(p):
            return p
    return shutil.which("chromium")


def in_own_thread(fn, *args):
    """Run ``fn`` in a thread of its own: Playwright's sync API refuses to start where another
    sync Playwright (the browser tests' session fixture) is already running."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as ex:
        return ex.submit(fn, *args).result()


@pytest.mark.e2e
def test_user_text_renders_inert_in_chromium(server):
    exe = _chromium()
    if exe is None:
        pytest.skip("Debian's chromium is not installed")
    pytest.importorskip("playwright.sync_api")
    base, _ = server
    # a saved trace named with markup (listed on the gallery)
    st, _, html = request(base, "POST", "/explore/mm_relu/save",
                          {"n": "16", "name": PAYLOAD}, headers={"HX-Request": "true"})
    assert st == 200 and "saved as" in html
    in_own_thread(_xss_checks, exe, base, custom(base, EVIL_BLOCK))


def _xss_checks(exe: str, base: str, program_url: str) -> None:
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            _xss_pages(browser, base, program_url)
        finally:
            browser.close()


def _xss_pages(browser, base: str, program_url: str) -> None:
    trace = json.dumps({"format": "schedule-explorer/trace", "version": 1,
                        "workload": {"name": PAYLOAD, "params": {}}, "insts": []})
    pages = {   # what -> (url, whether the page quotes the text back)
        "a block name in a pasted program": (base + program_url, True),
        "a workload name in the address": (base + "/explore/" + quote(PAYLOAD, safe=""), True),
        "a parameter name": (base + "/explore/mm_relu?" + quote(PAYLOAD, safe="") + "=1", True),
        "a parameter value": (base + "/explore/mm_relu?n=" + quote(PAYLOAD, safe=""), True),
        "a trace token": (base + "/explore/mm_relu?t=" + quote(PAYLOAD, safe=""), False),
        "a saved trace's name on the gallery": (base + "/", True),
    }
    ctx = browser.new_context()
    page = ctx.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for what, (url, quoted) in pages.items():
        page.goto(url)
        page.wait_for_load_state("load")
        assert page.evaluate("() => document.querySelectorAll('[data-xss]').length") == 0, what
        assert page.evaluate("() => window.__xss === undefined"), what
        if quoted:
            assert "<img src=x" in page.inner_text("body"), what     # shown as text
    # an imported trace naming an evil workload, and a program that does not parse
    page.goto(base + "/")
    page.click("#import summary")
    page.fill("#import-text", trace)
    page.click("#import button[type=submit]")
    page.wait_for_load_state("load")
    assert page.evaluate("() => document.querySelectorAll('[data-xss]').length") == 0
    assert "<img src=x" in page.inner_text("body")
    page.goto(base + "/")
    page.click("details:has(#program) summary")
    page.fill("#program", "@T.prim_func\ndef f(" + PAYLOAD + "):\n    pass\n")
    page.click("details:has(#program) button[type=submit]")
    page.wait_for_load_state("load")
    assert page.evaluate("() => document.querySelectorAll('[data-xss]').length") == 0
    assert page.evaluate("() => window.__xss === undefined")
    assert not dialogs
    # the block's name is also escaped inside the htmx-swapped panes (program + diagram)
    page.goto(base + program_url)
    page.wait_for_selector("#measure-now", timeout=60_000)
    assert page.evaluate("() => document.querySelectorAll('[data-xss]').length") == 0
    assert PAYLOAD.replace('"', "'") in page.inner_text("#program-pane") \
        if page.query_selector("#program-pane") else True
    ctx.close()
