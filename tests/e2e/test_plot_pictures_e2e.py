"""Pictures of drawn figures: a plot given a figure it has already drawn (at the same width)
shows the kept picture of it at once, instead of plotly drawing it again; plotly redraws
the live plot under the picture when the pointer enters it (static/explorer.js).

A picture must show exactly that figure: a state seen before gets one, a new state never
does, and the live plot redrawn under the picture has the same points."""
from __future__ import annotations

import re

from test_explorer_e2e import apply, select, wait_steps

N = 64
PLOTS = ("runtime-plot", "cache-plot")


def wait_shown(page, points: int) -> None:
    """Both plots show a figure with ``points`` points (drawn or pictured), none pending."""
    for pid in PLOTS:
        page.wait_for_selector(f'#{pid}[data-drawn][data-points="{points}"]:not([data-stale])',
                               state="attached", timeout=120_000)


def kept_pictures(page) -> list[str]:
    return page.evaluate("() => Object.keys(sessionStorage).filter(k => k.startsWith('plotpic1:')"
                         " && !k.endsWith(':index'))")


def wait_kept(page, pid: str) -> None:
    """Until the plot's current figure has a kept picture."""
    page.wait_for_function(
        "id => { const t = document.getElementById(id).getAttribute('data-plotly') + '\\u0000';"
        " return Object.keys(sessionStorage).some(k => k.startsWith('plotpic1:' + id + ':')"
        " && sessionStorage.getItem(k).startsWith(t)); }", arg=pid)


def pictured(page) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll('[data-pictured]')].map(e => e.id)")


def picture_points(page, pid: str) -> int:
    """Markers in the plot's picture (its shadow root), or -1 without a picture."""
    return page.evaluate(
        "id => { const h = document.querySelector('#' + id + ' > .plot-picture');"
        " return h && h.shadowRoot ? h.shadowRoot.querySelectorAll('.point').length : -1; }", pid)


def live_points(page, pid: str) -> int:
    return page.evaluate(
        "id => document.querySelectorAll('#' + id + ' > .plot-container .point').length", pid)


def test_a_state_seen_before_shows_the_pictures_of_its_figures(page, server, shot):
    page.goto(f"{server}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    # a new step: plotly draws its figures (no picture of them exists yet)
    select(page, "L/mm_relu/1/Y")
    page.fill('#toolbar input[name="factors"]', "None, 4")
    apply(page, "split")
    wait_steps(page, 1)
    wait_shown(page, 2)
    assert pictured(page) == []
    # ... and keeps a picture of each once the page is idle
    for pid in PLOTS:
        wait_kept(page, pid)
    drawn = {pid: live_points(page, pid) for pid in PLOTS}
    assert drawn["runtime-plot"] >= 2 and drawn["cache-plot"] >= 2

    # undo: the figures differ from every one drawn so far (step 1 is there, not current)
    page.click('#trace-pane a[data-key="undo"]')
    page.wait_for_function("() => /step 0 of 1/.test(document.querySelector('#statebar').textContent)")
    wait_shown(page, 2)
    page.wait_for_timeout(300)
    assert pictured(page) == []

    # redo: back to a state seen before — both plots show their pictures at once
    page.keyboard.press("]")
    page.wait_for_function("() => /step 1 of 1/.test(document.querySelector('#statebar').textContent)")
    wait_shown(page, 2)
    assert sorted(pictured(page)) == sorted(PLOTS)
    for pid in PLOTS:
        assert picture_points(page, pid) == drawn[pid]
    page.locator("#measure-body").scroll_into_view_if_needed()
    shot(page, "pictures-01-redo-shows-the-kept-pictures")

    # the pointer over a plot: plotly redraws the live plot (same points), the picture goes
    page.hover("#runtime-plot")
    page.wait_for_function("() => !document.querySelector('#runtime-plot[data-pictured]')")
    assert live_points(page, "runtime-plot") == drawn["runtime-plot"]
    assert page.evaluate("() => document.getElementById('runtime-plot').data[0].x.length") == 2
    assert page.locator("#runtime-plot > .plot-picture").count() == 0
    shot(page, "pictures-02-redrawn-under-the-pointer")
    # the index of kept pictures (their order of dropping) lists exactly the pictures kept
    index = page.evaluate("() => JSON.parse(sessionStorage.getItem('plotpic1:index'))")
    assert sorted(index) == sorted(kept_pictures(page)) and len(index) >= 4
    assert page.js_errors == []


def test_pictures_are_never_shown_for_a_figure_they_were_not_taken_of(page, server):
    """A kept picture whose figure text is not the plot's new figure (a key collision, a
    stale entry) is not shown: the figure is drawn by plotly."""
    page.goto(f"{server}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    select(page, "L/mm_relu/1/Y")
    page.fill('#toolbar input[name="factors"]', "None, 8")
    apply(page, "split")
    wait_steps(page, 1)
    wait_shown(page, 2)
    for pid in PLOTS:
        wait_kept(page, pid)
    # every kept picture now claims another figure
    page.evaluate("() => { for (const k of Object.keys(sessionStorage)) if (k.startsWith('plotpic1:')"
                  " && !k.endsWith(':index')) { const v = sessionStorage.getItem(k);"
                  " sessionStorage.setItem(k, '{\"data\": []}' + v.slice(v.indexOf('\\u0000'))); } }")
    page.click('#trace-pane a[data-key="undo"]')
    page.wait_for_function("() => /step 0 of 1/.test(document.querySelector('#statebar').textContent)")
    page.keyboard.press("]")
    page.wait_for_function("() => /step 1 of 1/.test(document.querySelector('#statebar').textContent)")
    wait_shown(page, 2)
    assert pictured(page) == []
    assert re.search(r"\d", page.inner_text("#measure-body"))
    assert page.js_errors == []


def test_a_page_left_before_it_was_quiet_keeps_the_pictures_of_its_figures(page, server):
    """The figures on screen are kept when the page is left (a link, a reload), also when
    the page never was quiet enough to keep them before."""
    page.goto(f"{server}/explore/mm_relu?n={N}")
    wait_shown(page, 1)
    select(page, "L/mm_relu/1/Y")
    page.fill('#toolbar input[name="factors"]', "None, 2")
    # a request that never ends, as far as the page can tell: never quiet
    page.evaluate("() => { const d = document.createElement('div'); d.className = 'htmx-request';"
                  " document.body.appendChild(d); }")
    apply(page, "split")
    wait_steps(page, 1)
    wait_shown(page, 2)
    figures = {pid: page.get_attribute(f"#{pid}", "data-plotly") for pid in PLOTS}
    page.wait_for_timeout(300)
    assert not any(has_picture(page, pid, fig) for pid, fig in figures.items())
    page.goto(f"{server}/explore/mm_relu?n={N}")        # leaves the page
    assert all(has_picture(page, pid, fig) for pid, fig in figures.items())
    assert page.js_errors == []


def has_picture(page, pid: str, figure: str) -> bool:
    return page.evaluate(
        "([id, t]) => Object.keys(sessionStorage).some(k => k.startsWith('plotpic1:' + id + ':')"
        " && sessionStorage.getItem(k).startsWith(t + '\\u0000'))", [pid, figure])
