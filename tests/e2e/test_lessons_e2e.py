"""The lesson player in a real Chromium: play lesson 1 through with "apply for me", do one
step yourself with the explorer toolbar (checked against the lesson), presenter mode with
keyboard stepping, and a comparison of two branches of one trace. Screenshots go to
test-artifacts/screenshots/lessons-*.png."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e

L1 = "01_tensorir_mm_relu"


def program_text(page) -> str:
    return page.inner_text("#program-pane")


def wait_plot(page, sel: str = "#runtime-plot[data-drawn]", timeout: int = 180_000) -> None:
    page.wait_for_selector(sel, timeout=timeout)


def test_play_lesson_one_with_apply_for_me(page, server, shot):
    page.goto(server + "/")
    page.click('a[href="/lessons"]')
    page.wait_for_selector(f"#lesson-{L1}")
    shot(page, "lessons-01-list")
    page.click(f"#lesson-{L1} a.button")
    page.wait_for_url(re.compile(rf"/lessons/{L1}"))
    page.wait_for_selector("#lesson-pane")
    assert "Step 1 of 6" in page.inner_text("#lesson-pane")
    # the question and its reveal
    page.click("#question > summary")
    page.click("#answer > summary")
    assert page.locator("#answer p").is_visible()
    wait_plot(page)
    shot(page, "lessons-02-step1-question")
    page.click("#lesson-next")
    # steps 2..5 apply a primitive each: "apply for me", look, then next
    for k in range(1, 5):
        page.wait_for_url(re.compile(rf"step={k}(&|$)"))
        page.wait_for_selector("#apply-for-me")
        before = program_text(page)
        page.click("#apply-for-me")
        page.wait_for_url(re.compile(rf"step={k}&applied=1"))
        page.wait_for_selector(".lesson-applied")
        assert program_text(page) != before
        if k == 1:
            assert "j_0" in program_text(page)
            shot(page, "lessons-03-split-applied")
        if k == 3:
            wait_plot(page)
            shot(page, "lessons-04-reverse-compute-at")
        page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=5(&|$)"))
    assert "Y_init" in program_text(page) and "Y_update" in program_text(page)
    # the runtime chart has one point per step of the lesson's trace (0..4)
    page.wait_for_function(
        "() => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === 5; }", timeout=240_000)
    shot(page, "lessons-05-measure-step")
    page.click("#lesson-next")
    page.wait_for_selector("text=Lesson finished")
    # the state opens in the free explorer with the whole trace
    href = page.get_attribute("#open-explorer", "href")
    page.goto(server + href)
    page.wait_for_selector("#trace-pane li.step")
    assert page.locator("#trace-pane li.step").count() == 5
    assert not page.js_errors, page.js_errors


def test_try_it_yourself_with_the_toolbar(page, server, shot):
    page.goto(server + f"/lessons/{L1}?step=1")
    page.wait_for_selector("#try-yourself")
    page.click("#try-yourself > summary")
    # select loop j (the second loop of block Y) in the program text, split it by 8: wrong
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    page.fill('#toolbar form.prim input[name="factors"]', "None, 8")
    page.click('#toolbar button[data-prim="split"]')
    page.wait_for_selector("#lesson-check.wrong")
    assert "serial(32)" in page.inner_text("#lesson-check")
    # (the address follows once the step's measurements are in: static/explorer.js)
    page.wait_for_url(re.compile(rf"/lessons/{L1}\?step=1&t="))
    shot(page, "lessons-06-try-wrong")
    # start again and do it right (the link is followed in the page: its panes are swapped)
    page.click("#lesson-check a.linkish")
    page.wait_for_url(re.compile(rf"/lessons/{L1}\?step=1$"))
    page.wait_for_selector("#lesson-check", state="detached")
    page.wait_for_selector("#try-yourself")
    assert "j_0" not in program_text(page)
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    page.fill('#toolbar form.prim input[name="factors"]', "None, 4")
    page.evaluate("() => { window.__oob = 0;"
                  " document.addEventListener('htmx:oobBeforeSwap', () => window.__oob++); }")
    page.click('#toolbar button[data-prim="split"]')
    page.wait_for_selector("#lesson-check.ok")
    assert "j_0" in program_text(page)
    # (the answer's panes were swapped by the page, not by htmx: static/explorer.js)
    assert page.evaluate("() => window.__oob") == 0
    shot(page, "lessons-07-try-right")
    # "next" continues with the learner's own trace
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=2&t="))
    page.wait_for_selector("#lesson-check.waiting")
    # reload keeps the state (the URL is the state)
    page.reload()
    page.wait_for_selector("#lesson-check.waiting")
    assert "j_0" in program_text(page)
    assert not page.js_errors, page.js_errors


def test_presenter_mode_keyboard_stepping(page, server, shot):
    page.goto(server + f"/lessons/{L1}?step=1&present=1")
    page.wait_for_selector("#presentbar")
    size = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.lesson-pane')).fontSize)")
    assert size >= 19
    page.click("#presentbar [data-font='1']")
    bigger = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.lesson-pane')).fontSize)")
    assert bigger > size
    # hide the measurements pane
    page.uncheck('#presentbar input[data-pane="#measure-pane"]')
    assert not page.locator("#measure-pane").is_visible()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"step=2&present=1"))
    page.wait_for_selector("#presentbar")
    assert not page.locator("#measure-pane").is_visible()      # the choice is remembered
    shot(page, "lessons-08-presenter")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(re.compile(r"step=1&present=1"))
    page.check('#presentbar input[data-pane="#measure-pane"]')
    page.click("#presentbar [data-font='-1']")
    # the explorer in presenter mode: arrows step through a shared trace
    page.goto(server + f"/lessons/{L1}?step=5")
    href = page.get_attribute("#open-explorer", "href")
    page.goto(server + href + "&at=0&present=1")      # redirected to /explore/mm_relu/present
    page.wait_for_selector("#presentbar")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => /at=1/.test(location.href)")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => /at=2/.test(location.href)")
    assert "/present?" in page.url
    assert "j_0" in program_text(page)
    shot(page, "lessons-09-present-explorer")
    page.click("[data-leave-present]")
    page.wait_for_url(re.compile(r"/explore/mm_relu\?.*at=2"))
    assert "/present" not in page.url
    page.wait_for_selector("#trace-pane")
    assert not page.locator("#presentbar").count()
    assert not page.js_errors, page.js_errors


def test_compare_two_branches(page, server, shot):
    # the lesson's final state (A) and a fork of it after the split (B)
    page.goto(server + f"/lessons/{L1}?step=5")
    a = server + page.get_attribute("#open-explorer", "href")
    page.goto(server + "/compare")
    page.fill('input[name="a"]', a)
    page.click("#compare-go")
    page.wait_for_selector(".fork-compare")
    page.click('.fork-compare[data-k="1"]')
    page.wait_for_selector("#side-A")
    page.wait_for_selector("#side-B")
    assert "share their first 1 step" in page.inner_text("#cmp-summary")
    assert "Y_init" in page.inner_text("#side-A") and "Y_init" not in page.inner_text("#side-B")
    page.wait_for_selector("#cmp-runtime-plot[data-drawn]", timeout=240_000)
    page.wait_for_selector("#cmp-pending", state="detached", timeout=240_000)
    shot(page, "lessons-10-compare")
    page.evaluate("() => document.querySelector('#cmp-measure').scrollIntoView()")
    shot(page, "lessons-11-compare-plots")
    assert not page.js_errors, page.js_errors


def test_challenge_checks_my_link(page, server, shot):
    page.goto(server + "/")
    page.wait_for_selector('a[href="/challenges"]')
    shot(page, "lessons-12-gallery-links")
    page.click('a[href="/challenges"]')
    page.wait_for_selector("#challenge-mm_relu_course_nest")
    page.click("#challenge-mm_relu_course_nest a.button")
    page.wait_for_selector("#solution")
    # a half-done trace first: "not yet", with both loop nests
    page.goto(server + f"/lessons/{L1}?step=3")
    half = server + page.get_attribute("#open-explorer", "href")
    page.goto(server + f"/lessons/{L1}?step=5")
    full = server + page.get_attribute("#open-explorer", "href")
    page.goto(server + "/challenges/mm_relu_course_nest")
    page.fill("#solution", half)
    page.click("#check-solution")
    page.wait_for_selector("#challenge-result.wrong")
    assert "Not yet" in page.inner_text("#challenge-result")
    shot(page, "lessons-13a-challenge-not-yet")
    page.fill("#solution", full)
    page.click("#check-solution")
    page.wait_for_selector("#challenge-result.ok")
    shot(page, "lessons-13-challenge-solved")
    # the share link of the solution opens it in the explorer
    page.click("#solution-link")
    page.wait_for_selector("#trace-pane li.step")
    assert page.locator("#trace-pane li.step").count() == 5
    assert not page.js_errors, page.js_errors


def test_a_lesson_step_is_measured_while_the_learner_reads_it(page, server, shot):
    """While the learner reads a step, the workers measure the program it asks for: the
    learner's click then answers with both charts' new point, and the page asks for no
    measurement of its own (lesson 2, which no other test here plays)."""
    les = "02_tiling_and_cache"
    page.goto(server + f"/lessons/{les}?step=1")
    wait_plot(page)
    wait_plot(page, "#cache-plot[data-drawn]")
    # the learner reads: wait until the program after this step is measured (asked for by
    # no one but the step's page; the "apply for me" page only reads what is stored)
    done = re.compile(r'id="runtime-plot" data-plotly="[^"]+" data-points="2".*'
                      r'id="cache-plot" data-plotly="[^"]+" data-points="2"', re.S)
    for _ in range(300):
        if done.search(page.request.get(server + f"/lessons/{les}?step=1&applied=1").text()):
            break
        page.wait_for_timeout(200)
    else:
        raise AssertionError("the program after the step was not measured while reading")
    page.click("#try-yourself > summary")
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    form = page.locator('#toolbar form.prim:has(button[data-prim="reorder"])')
    field = form.locator('[name="order"]')
    if field.evaluate("e => e.tagName") == "SELECT":
        field.select_option("i, k, j")
    else:
        field.fill("i, k, j")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    form.locator("button").click()
    page.wait_for_selector("#lesson-check.ok")
    page.wait_for_selector('#runtime-plot[data-points="2"][data-drawn]:not([data-stale])')
    page.wait_for_selector('#cache-plot[data-points="2"][data-drawn]:not([data-stale])')
    assert "matches numpy" in page.inner_text("#measure-now")
    assert not [u for u in asked if "/measure?" in u or "/cache?" in u], asked
    shot(page, "lessons-14-measured-while-reading")
    assert not page.js_errors, page.js_errors


def test_next_and_previous_keep_the_page(page, server, shot):
    """Moving between steps swaps the panes in the page: no reload (the page's own state
    survives), the address and the title follow, the plots are the same elements updated
    in place with the new step's points, and the toolbar then posts to the new step."""
    page.set_viewport_size({"width": 1280, "height": 520})   # a lesson column that scrolls
    page.goto(server + f"/lessons/{L1}?step=1")
    wait_plot(page)
    wait_plot(page, "#cache-plot[data-drawn]")
    page.evaluate("() => { window.__samePage = true;"
                  " window.__plot = document.getElementById('runtime-plot'); }")
    page.click("#apply-for-me")
    page.wait_for_url(re.compile(r"step=1&applied=1"))
    page.wait_for_selector(".lesson-applied")
    assert "j_0" in program_text(page)
    # (the learner scrolled the lesson column down to reach "next")
    assert page.evaluate("() => { const c = document.querySelector('.col-lesson');"
                         " c.scrollTop = c.scrollHeight; return c.scrollTop; }") > 0
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=2$"))
    page.wait_for_selector("text=Step 3 of 6")
    # the new step's narrative starts at its top
    assert page.evaluate("() => document.querySelector('.col-lesson').scrollTop") == 0
    assert "step 3" in page.title()
    assert page.get_attribute("#lesson-config", "data-apply-url") == f"/lessons/{L1}/apply?step=2"
    # the runtime plot: the same element, drawn with the state's two points
    page.wait_for_selector('#runtime-plot[data-points="2"][data-drawn]:not([data-stale])',
                           timeout=180_000)
    assert page.evaluate("() => window.__samePage === true"
                         " && document.getElementById('runtime-plot') === window.__plot")
    page.click("#lesson-prev")
    page.wait_for_url(re.compile(r"step=1$"))
    page.wait_for_selector("text=Step 2 of 6")
    page.wait_for_selector('#runtime-plot[data-points="1"][data-drawn]:not([data-stale])')
    assert "j_0" not in program_text(page)
    assert page.evaluate("() => window.__samePage === true")
    shot(page, "lessons-15-previous-in-place")
    # the browser's back button returns to step 3's address (loaded anew)
    page.go_back()
    page.wait_for_url(re.compile(r"step=2$"))
    page.wait_for_selector("text=Step 3 of 6")
    assert not page.js_errors, page.js_errors
