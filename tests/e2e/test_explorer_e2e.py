"""A new user's session in a real Chromium: gallery -> mm_relu -> the course's four steps by
clicking -> an illegal action -> reload the shared link -> export and re-import the trace.
Screenshots of every step go to test-artifacts/screenshots/."""
from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.e2e


def program_text(page) -> str:
    return page.inner_text("#program-pane")


def n_steps(page) -> int:
    return page.locator("#trace-pane li.step").count() - 1


def plot_points(page) -> int:
    loc = page.locator("#runtime-plot[data-drawn]")
    loc.wait_for()
    return int(loc.get_attribute("data-points"))


def wait_steps(page, n: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('#trace-pane li.step').length === n + 1", arg=n)


def wait_address(page) -> None:
    """Until the address bar shows the page's state (its share link): it is written once
    the state's measurements are on the page (static/explorer.js, the page's history)."""
    page.wait_for_function("() => document.getElementById('share-url').value.endsWith("
                           "location.pathname + location.search)")


def wait_plot(page, n: int) -> None:
    page.wait_for_function(
        "n => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === n; }", arg=n, timeout=120_000)


def select(page, sel: str, where: str = "#program-pane") -> None:
    if where == "#diagram-pane":   # click the box's header, as a user would
        page.locator(f'{where} [data-sel="{sel}"] > text').first.click()
    else:
        page.click(f'{where} [data-sel="{sel}"]')
    page.wait_for_selector(f'#toolbar[data-selected="{sel}"] form.prim')


def apply(page, prim: str) -> None:
    page.click(f'#toolbar button[data-prim="{prim}"]')


def test_course_walkthrough_share_export_import(page, server, shot):
    # --- the gallery
    page.goto(server + "/")
    page.wait_for_selector("#card-mm_relu")
    shot(page, "01-gallery")
    page.click("#card-mm_relu button[type=submit]")
    page.wait_for_url(re.compile(r"/explore/mm_relu"))
    page.wait_for_selector("#program-pane .node")
    wait_plot(page, 1)
    assert 'with T.block("Y")' in program_text(page)
    shot(page, "02-mm_relu-initial")

    # --- step 1: split j by 4 (select j by keyboard: Tab to it, Enter)
    j = page.locator('#program-pane [data-sel="L/mm_relu/1/Y"]')
    j.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    # keyboard users land in the toolbar: the first input (split's factors) has the focus
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'factors'")
    assert page.locator("#program-pane .node.selected").count() >= 1
    assert page.locator('#diagram-pane .dnode.selected').count() == 1
    shot(page, "03-j-selected")
    # ... and can apply it without the mouse: type the factors, press Enter
    page.keyboard.press("Control+a")
    page.keyboard.type("None, 4")
    page.keyboard.press("Enter")
    wait_steps(page, 1)
    assert "j_0" in program_text(page) and "j_1" in program_text(page)
    assert "for j_1 in 4" in page.inner_text("#diagram-pane")
    wait_address(page)
    assert "t=" in page.url
    wait_plot(page, 2)
    shot(page, "04-after-split")

    # --- step 2: reorder j_0, k, j_1 (select a loop above Y in the diagram)
    select(page, "L/mm_relu/0/Y", where="#diagram-pane")
    page.fill('#toolbar input[name="order"]', "i, j_0, k, j_1")
    apply(page, "reorder")
    wait_steps(page, 2)
    assert re.search(r"for i, j_0, k, j_1 in T\.grid", program_text(page))
    wait_plot(page, 3)
    shot(page, "05-after-reorder")

    # --- step 3: reverse_compute_at C under j_0
    select(page, "B/mm_relu/C")
    page.select_option('#toolbar form.prim:has(button[data-prim="reverse_compute_at"]) select[name="loop"]',
                       label="j_0 (above Y)")
    apply(page, "reverse_compute_at")
    wait_steps(page, 3)
    wait_plot(page, 4)
    shot(page, "06-after-reverse-compute-at")

    # --- step 4: decompose_reduction of Y above k
    select(page, "B/mm_relu/Y")
    page.select_option('#toolbar form.prim:has(button[data-prim="decompose_reduction"]) select[name="loop"]',
                       label="k")
    apply(page, "decompose_reduction")
    wait_steps(page, 4)
    text = program_text(page)
    assert 'T.block("Y_init")' in text
    wait_plot(page, 5)
    assert page.locator("#measure-body .bad").count() == 0   # every step matches numpy
    shot(page, "07-after-decompose-reduction")
    page.wait_for_function(
        "() => { const e = document.querySelector('#cache-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) === 5; }", timeout=120_000)
    page.locator("#cache-body").scroll_into_view_if_needed()
    shot(page, "07b-cache-misses")
    page.click("#tab-diff")
    page.wait_for_selector("#panel-diff .d-add")
    shot(page, "08-diff-of-last-step")
    page.click("#tab-ll")
    page.wait_for_selector("#code-ll pre")
    assert "define" in page.inner_text("#code-ll")
    page.click("#tab-asm")
    page.wait_for_selector("#code-asm pre")
    shot(page, "08b-assembly")
    page.click("#tab-program")

    # --- an illegal action: parallel on the reduction loop k
    wait_address(page)
    url_before = page.url
    k_sel = page.locator('#diagram-pane .dloop:has(text:text-is("for k in 128"))').first.get_attribute("data-sel")
    select(page, k_sel, where="#diagram-pane")
    apply(page, "parallel")
    page.wait_for_selector("#message.msg-refused")
    reason = page.inner_text("#message")
    assert "parallel refused" in reason and "reduction" in reason
    assert page.locator('#diagram-pane .dnode.offending').count() >= 1
    # the offending loop is scrolled into view in the diagram
    box = page.locator('#diagram-pane .dnode.offending').first.bounding_box()
    wrap = page.locator('#diagram-pane .svgwrap').bounding_box()
    assert wrap["y"] - 1 <= box["y"] <= wrap["y"] + wrap["height"]
    assert page.url == url_before and n_steps(page) == 4
    shot(page, "09-illegal-parallel-refused")

    # --- the shared link reproduces the state in a new page
    share = page.input_value("#share-url")
    other = page.context.new_page()
    other.goto(share)
    other.wait_for_selector("#program-pane .node")
    assert program_text(other) == text
    assert n_steps(other) == 4
    shot(other, "10-shared-link-reloaded")
    other.close()

    # --- undo then redo through the trace pane
    page.click('#trace-pane a[data-key="undo"]')
    page.wait_for_selector("#trace-pane li.step.current[value='3']")
    assert 'T.block("Y_init")' not in program_text(page)
    page.keyboard.press("]")          # keyboard redo
    page.wait_for_selector("#trace-pane li.step.current[value='4']")
    assert program_text(page) == text

    # --- export the trace as JSON and import it again
    page.click("#export-menu summary")
    with page.expect_download() as dl:
        page.click("#export-menu button:text('Trace JSON')")
    path = dl.value.path()
    doc = json.loads(open(path).read())
    assert doc["format"] == "schedule-explorer/trace" and doc["workload"]["name"] == "mm_relu"
    page.goto(server + "/#import")
    page.wait_for_function("() => document.getElementById('import').open")   # opened by the link
    page.set_input_files("#import input[type=file]", path)
    page.click("#import button[type=submit]")
    page.wait_for_url(re.compile(r"/explore/mm_relu\?.*t="))
    page.wait_for_selector("#program-pane .node")
    assert program_text(page) == text
    shot(page, "11-imported-trace")
    assert page.js_errors == []


def test_bad_link_shows_reason_and_way_back(page, server, shot):
    resp = page.goto(server + "/explore/mm_relu?n=128&t=not-a-trace")
    assert resp.status == 400
    assert "cannot be read" in page.inner_text("main")
    shot(page, "12-bad-link")
    page.click("a.button")
    page.wait_for_selector("#program-pane .node, #card-mm_relu")


def test_layout_fits_1280x720(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=64")
    page.wait_for_selector("#program-pane .node")
    wait_plot(page, 1)
    # nothing overflows the window horizontally; the panes are side by side
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280
    left = page.locator(".col-left").bounding_box()
    right = page.locator(".col-right").bounding_box()
    assert left["x"] + left["width"] <= right["x"] + 1
    assert right["x"] + right["width"] <= 1280
    shot(page, "13-layout-1280x720")


def test_pasted_program_is_explorable(page, server, shot):
    import engine
    text = engine.workloads.get("mm_relu", n=32).script()
    page.goto(server + "/")
    page.click(".side-forms details:first-child summary")
    page.fill("#program", text)
    page.click(".side-forms details:first-child button[type=submit]")
    page.wait_for_url(re.compile(r"/explore/custom\?src="))
    page.wait_for_selector("#program-pane .node")
    select(page, "L/mm_relu/0/Y")
    apply(page, "parallel")
    wait_steps(page, 1)
    wait_plot(page, 2)
    assert page.locator("#measure-body .bad").count() == 0
    assert "T.parallel" in program_text(page)
    assert "parallel" in page.inner_text("#diagram-pane")
    shot(page, "14-custom-program-parallel")


def test_back_button_returns_to_the_previous_step(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=32")
    page.wait_for_selector("#program-pane .node")
    select(page, "L/mm_relu/1/Y")
    apply(page, "split")
    wait_steps(page, 1)
    select(page, "L/mm_relu/0/Y")
    apply(page, "parallel")
    wait_steps(page, 2)
    assert "T.parallel" in program_text(page)
    wait_address(page)
    page.go_back()
    page.wait_for_function("() => document.querySelectorAll('#trace-pane li.step').length === 2")
    assert "T.parallel" not in program_text(page) and "j_1" in program_text(page)
    page.go_forward()
    page.wait_for_function("() => document.querySelectorAll('#trace-pane li.step').length === 3")
    assert "T.parallel" in program_text(page)
    # the selection survives nothing stale: selecting after navigation still works
    select(page, "B/mm_relu/C")
    shot(page, "15-back-forward")


def test_the_address_is_written_once_the_measurements_are_in(page, server):
    """A click's history entry waits for its measurements (a history entry costs the
    browser ~20 ms of CPU, which the worker measuring the step needs), then comes in
    order: one entry per click, back and forward walk them."""
    page.goto(server + "/explore/mm_relu?n=32")
    page.wait_for_selector("#program-pane .node")
    page.evaluate("""() => { window.__pushes = [];
        document.addEventListener('explorer:pushed', () => window.__pushes.push({
            measuring: !!document.querySelector('#measure-body.stale, #cache-body.stale'),
            points: (document.querySelector('#runtime-plot') || {dataset: {}}).dataset.points,
            href: location.href})); }""")
    length0 = page.evaluate("() => history.length")
    select(page, "L/mm_relu/1/Y")
    apply(page, "split")
    wait_steps(page, 1)
    wait_address(page)
    select(page, "L/mm_relu/0/Y")
    apply(page, "parallel")
    wait_steps(page, 2)
    wait_address(page)
    pushes = page.evaluate("() => window.__pushes")
    assert [p["measuring"] for p in pushes] == [False, False]
    assert page.evaluate("() => history.length") == length0 + 2
    assert "T.parallel" in program_text(page)
    page.go_back()
    page.wait_for_function("() => document.querySelectorAll('#trace-pane li.step').length === 2")
    page.go_back()
    page.wait_for_function("() => document.querySelectorAll('#trace-pane li.step').length === 1")
    assert page.js_errors == []


RECORD_SWAPS = """() => { window.__swaps = {oob: 0, load: [], settle: [], pushed: 0};
    document.addEventListener('htmx:oobBeforeSwap', () => window.__swaps.oob++);
    document.addEventListener('htmx:load', e => window.__swaps.load.push(e.detail.elt.id));
    document.addEventListener('htmx:afterSettle', e => window.__swaps.settle.push(e.detail.elt.id));
    document.addEventListener('htmx:pushedIntoHistory', () => window.__swaps.pushed++); }"""


RECORD_PUSHES = """() => { window.__pushes = []; window.__inline = [];
    document.addEventListener('explorer:step', e => window.__inline.push(e.detail.measure_inline));
    document.addEventListener('explorer:pushed', () => window.__pushes.push({
        measuring: !!document.querySelector('#measure-body.stale, #cache-body.stale'),
        undrawn: [...document.querySelectorAll('[data-plotly]:not([data-drawn]), [data-plotly][data-stale]')]
                 .filter(e => !e.closest('[hidden]')).length,
        points: (document.querySelector('#runtime-plot') || {dataset: {}}).dataset.points})); }"""


def test_an_answer_with_its_measurements_writes_the_address_after_its_plots(page, server):
    """When the click's answer carries its measurements (stored by an earlier visit; a new
    tab has no pictures of its figures), the history entry is written once the plots are
    drawn, not in the task after the swap, before the panes were painted."""
    page.goto(server + "/explore/mm_relu?n=32")
    page.wait_for_selector("#program-pane .node")
    select(page, "L/mm_relu/1/Y")
    apply(page, "split")
    wait_steps(page, 1)
    wait_address(page)                       # (its measurements are stored by now)
    tab = page.context.new_page()
    try:
        tab.goto(server + "/explore/mm_relu?n=32")
        tab.wait_for_selector("#program-pane .node")
        tab.wait_for_selector("#runtime-plot[data-drawn]")
        tab.evaluate(RECORD_PUSHES)
        tab.evaluate(RECORD_SWAPS)
        select(tab, "L/mm_relu/1/Y")
        apply(tab, "split")
        wait_steps(tab, 1)
        wait_address(tab)
        assert tab.evaluate("() => window.__inline") == [True]
        pushes = tab.evaluate("() => window.__pushes")
        assert pushes == [{"measuring": False, "undrawn": 0, "points": "2"}]
        # the answer, bodies included, was swapped by the page (static/explorer.js)
        swaps = tab.evaluate("() => window.__swaps")
        assert swaps["oob"] == 0 and swaps["pushed"] == 1, swaps
        assert tab.locator("#measure-body .mtabs").count() == 1
        assert tab.locator("#cache-plot[data-drawn]").get_attribute("data-points") == "2"
    finally:
        tab.close()


def test_a_clicks_panes_are_swapped_by_the_page_and_work_as_htmxs(page, server):
    """The answer to a primitive's click (the message and the panes of a state not measured
    before) is swapped by the page itself, not through htmx's out-of-band machinery; the new panes are
    htmx's as before: the next click uses the new toolbar's form, the history entry is
    written, the selection is highlighted, and a refused step still shows its reason."""
    page.goto(server + "/explore/mm_relu?n=24")   # (a state no other test measures)
    page.wait_for_selector("#program-pane .node")
    wait_plot(page, 1)
    page.evaluate(RECORD_SWAPS)
    select(page, "L/mm_relu/1/Y")
    apply(page, "split")
    wait_steps(page, 1)
    swaps = page.evaluate("() => window.__swaps")
    assert swaps["oob"] == 0
    panes = ["message", "statebar", "toolbar", "program-pane", "diagram-pane", "trace-pane"]
    assert all(p in swaps["load"] and p in swaps["settle"] for p in panes), swaps
    assert swaps["pushed"] == 1
    wait_plot(page, 2)
    wait_address(page)
    assert "applied: split" in page.inner_text("#message")
    assert "j_0" in program_text(page) and "j_1" in program_text(page)
    # the new toolbar is htmx's: the next click goes through its form
    select(page, "L/mm_relu/0/Y")
    assert page.locator("#program-pane .node.selected").count() >= 1
    page.fill('#toolbar form.prim:has(button[data-prim="reorder"]) [name="order"]', "i, j_0, k, j_1")
    apply(page, "reorder")
    wait_steps(page, 2)
    wait_plot(page, 3)
    # a refusal is not a click's panes: htmx swaps its message, the trace stays
    select(page, "L/mm_relu/1/Y")
    page.fill('#toolbar form.prim:has(button[data-prim="split"]) [name="factors"]', "1, 2")
    apply(page, "split")                     # 2 is not j_0's extent 6
    page.wait_for_selector("#message.msg-refused")
    assert n_steps(page) == 2
    assert page.js_errors == []


def test_access_pattern_tab_follows_the_selected_loop(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=32")
    page.wait_for_selector("#program-pane .node")
    page.click("#tab-pattern")
    page.wait_for_selector("#pattern-pane .pattern-plot[data-drawn]")
    assert "loop i" in page.inner_text("#pattern-pane")
    select(page, "L/mm_relu/1/Y", where="#diagram-pane")
    page.wait_for_function("() => document.querySelector('#pattern-pane').innerText.includes('loop j')")
    page.wait_for_selector("#pattern-pane .pattern-plot[data-drawn]")
    captions = page.locator("#pattern-pane figcaption").all_inner_texts()
    assert [c.split()[0] for c in captions] == ["A", "B", "Y"]
    # another iteration of j, typed into the form
    page.fill("#pattern-pane input[name=iteration]", "5")
    page.press("#pattern-pane input[name=iteration]", "Enter")
    page.wait_for_function("() => document.querySelector('#pattern-pane input[name=iteration]').value === '5'"
                           " && document.querySelector('#pattern-pane .pattern-plot[data-drawn]')")
    shot(page, "16-access-pattern")
    assert page.js_errors == []


def test_keyboard_focus_stays_near_the_toolbar(page, server, shot):
    """Enter in a primitive's field: a refused step leaves the focus in that field; an
    applied one replaces the toolbar, and the focus waits on the toolbar's row (not on the
    page's body, where the next Tab would start from the top of the page)."""
    page.goto(server + "/explore/mm_relu?n=64")
    page.wait_for_selector("#program-pane .node")
    page.locator('#program-pane [data-sel="L/mm_relu/1/Y"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'factors'")
    page.keyboard.press("Control+a")
    page.keyboard.type("5, 5")                 # 25 is not j's extent 64: refused
    page.keyboard.press("Enter")
    page.wait_for_selector("#message.msg-refused")
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'factors'")
    page.keyboard.press("Control+a")
    page.keyboard.type("None, 4")
    page.keyboard.press("Enter")
    wait_steps(page, 1)
    assert page.evaluate("() => document.activeElement.matches('.toolrow')")
    page.keyboard.press("Tab")                 # on from the toolbar's row, not the page's top
    assert page.evaluate("() => !!document.activeElement.closest('.toolrow, .workspace')")
    shot(page, "09-keyboard-focus-after-a-step")


def test_a_click_lets_go_of_the_caret_and_focus_in_the_panes_it_replaces(page, server):
    """Clicking the program text to select a loop leaves the caret (and the focus) in it;
    the primitive's request lets go of both (the answer replaces that text: removing the
    nodes holding them made the browser update them in the middle of the swap). A refused
    step gives the focus back to the node; an applied one leaves it on the toolbar's row."""
    page.goto(server + "/explore/mm_relu?n=64")
    node = page.locator('#program-pane [data-sel="L/mm_relu/1/Y"]').first
    node.click()
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    caret_in_program = """() => { const s = getSelection();
        return s.type === 'Caret' && !!s.anchorNode.parentElement.closest('#program-pane'); }"""
    form = page.locator('#toolbar form.prim:has(button[data-prim="split"])')
    form.locator('[name="factors"]').fill("5, 5")          # 25 is not j's extent 64: refused
    page.evaluate("""() => { const n = document.querySelector('#program-pane [data-sel="L/mm_relu/1/Y"]');
        n.focus(); getSelection().collapse(n.firstChild || n, 0); }""")
    assert page.evaluate(caret_in_program)
    form.locator("button").evaluate("b => b.click()")     # (a click that leaves the focus)
    page.wait_for_selector("#message.msg-refused")
    assert page.evaluate("""() => document.activeElement ===
        document.querySelector('#program-pane [data-sel="L/mm_relu/1/Y"]')""")
    assert not page.evaluate(caret_in_program)
    form.locator('[name="factors"]').fill("None, 4")
    page.evaluate("""() => { const n = document.querySelector('#program-pane [data-sel="L/mm_relu/1/Y"]');
        n.focus(); getSelection().collapse(n.firstChild || n, 0); }""")
    form.locator("button").evaluate("b => b.click()")
    wait_steps(page, 1)
    assert page.evaluate("() => document.activeElement.matches('.toolrow')")
    assert not page.evaluate(caret_in_program)
    assert page.js_errors == []


def test_the_tabs_loaded_when_shown_follow_each_click(page, server):
    """The diff, LLVM IR and Tune tabs are not in a click's answer: the page loads them for
    the new state — the tab on view at once, the others when shown."""
    page.goto(server + "/explore/mm_relu?n=32")
    page.wait_for_selector("#program-pane .node")
    page.click("#tab-ll")
    page.wait_for_selector("#code-ll pre")
    select(page, "L/mm_relu/1/Y", where="#diagram-pane")    # (the program text is hidden)
    apply(page, "split")
    wait_steps(page, 1)
    wait_address(page)
    state = page.evaluate("() => location.pathname + location.search")
    # the LLVM IR on view is loaded again for the new state (the split loop is in it)
    page.wait_for_function("s => { const e = document.getElementById('code-ll');"
                           " return e.getAttribute('data-loaded-for') === s && e.querySelector('pre'); }",
                           arg=state)
    # the diff tab, hidden meanwhile, shows the new step's diff when shown
    page.click("#tab-diff")
    page.wait_for_function("() => /Step 1/.test(document.getElementById('diff-pane').innerText)")
    select(page, "L/mm_relu/0/Y", where="#diagram-pane")
    apply(page, "parallel")
    wait_steps(page, 2)
    page.wait_for_function("() => /Step 2/.test(document.getElementById('diff-pane').innerText)")
    page.click("#tab-tune")
    page.wait_for_selector("#tune-pane form")
    wait_address(page)
    assert page.evaluate("() => document.getElementById('tune-pane').getAttribute('data-loaded-for')"
                         " === location.pathname + location.search")
    assert page.js_errors == []
