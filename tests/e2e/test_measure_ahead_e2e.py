"""Measuring ahead, as a learner meets it: they fill in the toolbar's form and pause; the page
sends the form to ``/intent`` and the workers measure the program it makes meanwhile. Their
click then shows every pane at once — the runtime and cache-miss charts with the new point
included — from the click's own answer: no measurement request follows it.

A form the step would refuse is measured for nothing and shows nothing until the click,
which says why as always. Runs its own server, to watch its results store fill."""
from __future__ import annotations

import os
import sqlite3
import tempfile
import time

import pytest

from conftest import start_server
from live_server import free_port, stop_app
from test_explorer_e2e import select, wait_steps

N = 64


@pytest.fixture()
def own_server():
    work = tempfile.mkdtemp(prefix="explorer-e2e-ahead-")
    port = free_port()
    proc = start_server(port, work)
    try:
        yield f"http://127.0.0.1:{port}", os.path.join(work, "instance", "explorer.sqlite3")
    finally:
        stop_app(proc, timeout=10)


def stored(db: str) -> set[tuple[str, str]]:
    """(program hash, kind) of every result in the server's store."""
    if not os.path.exists(db):
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return set(con.execute("SELECT program_hash, kind FROM results"))
    finally:
        con.close()


def wait_stored(db: str, before: set, kinds: set[str], timeout: float = 120.0) -> set:
    """Until results of every kind in ``kinds`` were stored for one new program."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        new = stored(db) - before
        by_program: dict[str, set] = {}
        for h, kind in new:
            by_program.setdefault(h, set()).add(kind.split(":")[0])
        if any(kinds <= got for got in by_program.values()):
            return new
        time.sleep(0.2)
    raise AssertionError(f"no new program was stored with {kinds}: {stored(db) - before}")


def wait_shown(page, points: int) -> None:
    for pid in ("runtime-plot", "cache-plot"):
        page.wait_for_selector(f'#{pid}[data-drawn][data-points="{points}"]:not([data-stale])',
                               state="attached", timeout=120_000)


def test_a_filled_form_is_measured_while_the_learner_pauses(own_server, page, shot):
    base, db = own_server
    page.goto(f"{base}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    page.wait_for_timeout(500)
    before = stored(db)
    select(page, "L/mm_relu/1/Y")
    with page.expect_response(lambda r: r.url.endswith("/intent")) as sent:
        page.fill('#toolbar input[name="factors"]', "None, 8")
    assert sent.value.status == 204
    # while the learner pauses, the program the form makes is measured and simulated
    wait_stored(db, before, {"step", "cache"})
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    # the click (the button pressed from the page's script: no pointer, no second intent)
    page.evaluate("() => document.querySelector('#toolbar button[data-prim=\"split\"]').click()")
    wait_steps(page, 1)
    wait_shown(page, 2)
    assert [u for u in asked if "/measure" in u or "/cache" in u] == []
    assert [u for u in asked if "/apply" in u]
    assert "j_1" in page.inner_text("#program-pane")
    page.locator("#measure-body").scroll_into_view_if_needed()
    shot(page, "measure-ahead-01-the-click-shows-every-point-at-once")
    assert page.js_errors == []


def test_a_form_the_step_would_refuse_is_not_measured_and_shows_nothing(own_server, page):
    base, db = own_server
    page.goto(f"{base}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    page.wait_for_timeout(500)
    before = stored(db)
    message = page.inner_text("#message")
    select(page, "L/mm_relu/1/Y")
    with page.expect_response(lambda r: r.url.endswith("/intent")) as sent:
        page.fill('#toolbar input[name="factors"]', "None, 0")
    assert sent.value.status == 204
    page.wait_for_timeout(1000)
    assert stored(db) == before
    assert page.inner_text("#message") == message
    # the click says why, as always
    page.evaluate("() => document.querySelector('#toolbar button[data-prim=\"split\"]').click()")
    page.wait_for_function("() => /Refused/.test(document.getElementById('message').textContent)",
                           timeout=30_000)
    assert page.js_errors == []


def test_a_click_right_after_typing_sends_no_guess(own_server, page):
    """Enter pressed as soon as the factors are typed: the click's own request measures the
    step; no guess is sent along with it (the server would apply the step twice)."""
    base, _ = own_server
    page.goto(f"{base}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    select(page, "L/mm_relu/1/Y")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url))

    def slow_apply(route):
        # the click's answer takes 400 ms: the form stays on the page long after the
        # pauses after which a guess would go (100 ms after "change", 150 after typing)
        time.sleep(0.4)
        route.continue_()
    page.route("**/apply", slow_apply)
    page.fill('#toolbar input[name="factors"]', "None, 2")
    page.press('#toolbar input[name="factors"]', "Enter")
    wait_steps(page, 1)
    wait_shown(page, 2)
    page.wait_for_timeout(500)
    assert [u for u in sent if u.endswith("/apply")]
    assert [u for u in sent if u.endswith("/intent")] == []
    assert page.js_errors == []


def test_the_pointer_resting_on_a_button_sends_its_form(own_server, page):
    """A primitive taken as it is (no field changed): the pointer resting on its button is
    the learner's intent; passing over a button is not."""
    base, _ = own_server
    page.goto(f"{base}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    select(page, "L/mm_relu/0/Y")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "") if r.url.endswith("/intent") else None)
    with page.expect_response(lambda r: r.url.endswith("/intent")) as got:
        page.hover('#toolbar button[data-prim="parallel"]')
    assert got.value.status == 204
    page.wait_for_timeout(300)
    assert len(sent) == 1 and "primitive=parallel" in sent[0]
    # passing over another button on the way elsewhere sends nothing
    page.evaluate("""() => {
        const b = document.querySelector('#toolbar button[data-prim="vectorize"]');
        const o = {bubbles: true, relatedTarget: document.body};
        b.dispatchEvent(new PointerEvent('pointerover', o));
        b.dispatchEvent(new PointerEvent('pointerout', o));
    }""")
    page.wait_for_timeout(400)
    assert len(sent) == 1
    assert page.js_errors == []
