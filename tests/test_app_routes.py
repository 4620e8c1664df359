"""Flask test-client tests of every route of the explorer, its htmx protocol and its error
paths (every bad link answers 4xx with a reason and a way back, never a 500)."""
from __future__ import annotations

import io
import json
import os
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

import engine
from inline_service import HX, drain, make_test_app, settled, state_of
from toolbar_forms import primitive_fields, primitive_forms, toolbar_state

N = 16


def html(resp) -> str:
    return resp.get_data(as_text=True)


def apply(client, url_query: dict, sel: str, primitive: str, **args):
    data = dict(url_query)
    data.update(sel=sel, primitive=primitive, **args)
    return client.post("/explore/mm_relu/apply", data=data, headers=HX)


def course_steps(client):
    """The course's four steps through the apply endpoint; returns the final query dict."""
    q = {"n": str(N)}
    steps = [("L/mm_relu/1/Y", "split", {"factors": "None, 4"}),
             ("L/mm_relu/0/Y", "reorder", {"order": "i, j_0, k, j_1"}),
             ("B/mm_relu/C", "reverse_compute_at", {"loop": "L/mm_relu/1/Y"}),
             ("B/mm_relu/Y", "decompose_reduction", {"loop": "L/mm_relu/2/Y"})]
    for sel, prim, args in steps:
        r = apply(client, q, sel, prim, **args)
        assert r.status_code == 200, html(r)
        q = state_of(r.headers["HX-Push-Url"])
    return q


def course_schedule():
    mod = engine.workloads.get("mm_relu", n=N)
    sch = engine.Schedule(mod, workload=("mm_relu", {"n": N}))
    b = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
    sch.decompose_reduction(b, k)
    return sch


# ---------------------------------------------------------------------------- gallery
def test_gallery_lists_every_workload_with_its_parameters(client):
    r = client.get("/")
    assert r.status_code == 200
    page = html(r)
    for name in engine.workloads.names():
        assert f'action="/explore/{name}"' in page
    assert "the course&#39;s mm_relu" in page or "mm_relu" in page
    assert 'name="n" value="128"' in page
    assert 'action="/explore/custom"' in page and 'action="/import"' in page
    assert "/static/vendor/htmx.min.js" in page


def test_static_assets_are_served_locally(client):
    for path in ("/static/vendor/htmx.min.js", "/static/vendor/plotly.min.js",
                 "/static/explorer.js", "/static/explorer.css"):
        r = client.get(path)
        assert r.status_code == 200 and len(r.data) > 1000, path
        r.close()


# ---------------------------------------------------------------------------- explorer
def test_explorer_page_has_every_pane(client):
    r = client.get(f"/explore/mm_relu?n={N}")
    assert r.status_code == 200
    page = html(r)
    for pane in ("program-pane", "diagram-pane", "toolbar", "trace-pane", "diff-pane",
                 "measure-pane", "code-ll", "code-asm", "statebar", "message"):
        assert f'id="{pane}"' in page, pane
    assert 'with T.block(&#34;Y&#34;)' in page or 'with T.block("Y")' in page
    # loops and blocks are clickable (program text and diagram share selection ids)
    assert page.count('data-sel="L/mm_relu/1/Y"') == 2
    assert page.count('data-sel="B/mm_relu/C"') == 2
    assert "<svg" in page and "for k in 16" in page
    assert re.search(r"class=\"fp\">[^<]+ → L[123]<", page)   # loop footprints vs caches
    assert 'hx-trigger="load"' in page and f"/explore/mm_relu/measure?n={N}" in page
    assert "step 0 of 0" in page


def test_explorer_default_params_are_left_out_of_links(client):
    page = html(client.get("/explore/mm_relu"))
    assert 'data-toolbar-url="/explore/mm_relu/toolbar"' in page
    assert "n=128" in page   # shown in the state bar


def test_htmx_navigation_returns_only_out_of_band_panes(client):
    r = client.get(f"/explore/mm_relu?n={N}", headers=HX)
    page = html(r)
    assert r.status_code == 200 and "<html" not in page
    oob = re.findall(r'id="([a-z-]+)"[^>]*hx-swap-oob="true"', page)
    assert set(oob) >= {"statebar", "toolbar", "program-pane", "diagram-pane", "trace-pane"}
    # the measurement pane stays (its drawn plots are updated in place): the answer's step
    # event names its bodies for this state, and the page asks for them; the tabs loaded
    # when shown are not sent either: the step event names the state, they follow it
    assert "measure-pane" not in oob
    assert not set(oob) & {"diff-pane", "code-ll", "code-asm", "tune-pane", "pattern-pane"}
    step = json.loads(r.headers["HX-Trigger"])["explorer:step"]
    assert step["url"] == f"/explore/mm_relu?n={N}"
    assert step["measure"] == f"/explore/mm_relu/measure?n={N}"
    assert step["cache"] == f"/explore/mm_relu/cache?n={N}"
    # a history restore (back button after a cache miss) gets the whole page
    r = client.get(f"/explore/mm_relu?n={N}",
                   headers={**HX, "HX-History-Restore-Request": "true"})
    assert "<html" in html(r)


def test_toolbar_depends_on_the_selection(client):
    r = client.get(f"/explore/mm_relu/toolbar?n={N}&sel=L/mm_relu/1/Y")
    page = html(r)
    assert r.status_code == 200
    assert 'data-selected="L/mm_relu/1/Y"' in page
    for prim in ("split", "reorder", "fuse", "parallel", "vectorize", "unroll"):
        assert f'data-prim="{prim}"' in page
    assert 'data-prim="compute_at"' not in page
    page = html(client.get(f"/explore/mm_relu/toolbar?n={N}&sel=B/mm_relu/C"))
    for prim in ("compute_at", "reverse_compute_at", "compute_inline", "decompose_reduction",
                 "cache_read", "cache_write"):
        assert f'data-prim="{prim}"' in page
    assert 'data-prim="split"' not in page
    # a selection that does not exist (stale or forged) asks to select again
    for sel in ("L/mm_relu/9/Y", "B/mm_relu/nope", "garbage", "B/other/Y"):
        page = html(client.get(f"/explore/mm_relu/toolbar?n={N}&sel={sel}"))
        assert "<strong>Select</strong>" in page and "form" not in page


def test_toolbar_writes_the_state_once_and_every_form_sends_it(client):
    q = course_steps(client)
    page = html(client.get(f"/explore/mm_relu/toolbar?n={N}&t={q['t']}&sel=B/mm_relu/C"))
    assert page.count(q["t"]) == 2          # the toolbar's own address, and #toolbar-state
    assert 'hx-include="#toolbar-state"' in page
    assert toolbar_state(page)["t"] == q["t"]
    forms = primitive_forms(page)
    assert len(forms) > 5 and not any('name="t"' in f for f in forms)
    # a form's own fields plus the shared state apply the step on top of the trace
    explorer = html(client.get(f"/explore/mm_relu?n={N}&t={q['t']}"))
    outer = re.search(r'data-sel="(L/mm_relu/0/[^"]+)"', explorer).group(1)    # the i loop
    page = html(client.get(f"/explore/mm_relu/toolbar?n={N}&t={q['t']}&sel={outer}"))
    fields = primitive_fields(page, "split")
    fields["factors"] = "None, 2"
    r = client.post("/explore/mm_relu/apply", data=fields, headers=HX)
    assert r.status_code == 200, html(r)
    assert "step 5 of 5" in html(r)


# ---------------------------------------------------------------------------- apply
def test_apply_split_updates_every_pane_and_pushes_the_new_url(client):
    r = apply(client, {"n": str(N), "at": "0"}, "L/mm_relu/1/Y", "split", factors="None, 4")
    assert r.status_code == 200
    page = html(r)
    url = r.headers["HX-Push-Url"]
    q = state_of(url)
    assert url.startswith("/explore/mm_relu?") and q["n"] == str(N) and q["t"]
    assert "applied: split j by [None, 4]" in page
    assert "j_0" in page and "for j_1 in 4" in page
    assert "step 1 of 1" in page
    assert 'class="line changed"' in page          # the program marks what the step changed
    assert "sch.split(j, factors=[None, 4])" in page  # the trace pane shows the course's line
    assert "l4, l5 = sch.split(l2, factors=[None, 4])" in page   # and the raw one as a tooltip
    # the pushed URL reproduces the same state on a fresh load
    again = html(client.get(url))
    assert "for j_1 in 4" in again and "step 1 of 1" in again


def test_course_steps_give_the_course_program(client):
    q = course_steps(client)
    page = html(client.get("/explore/mm_relu?" + "&".join(f"{k}={v}" for k, v in q.items())))
    assert "step 4 of 4" in page
    expected = course_schedule().mod.script()
    from app.web.session import Session
    s = Session.from_request("mm_relu", q)
    assert engine.structural_equal(s.mod_at(4), course_schedule().mod)
    assert s.mod_at(4).script() == expected
    assert "Y_init" in page
    for line in ("sch.split(j, factors=[None, 4])", "sch.reorder(i, j_0, k, j_1)",
                 "sch.reverse_compute_at(C, j_0)", "sch.decompose_reduction(Y, k)"):
        assert line in page


def test_a_click_goes_on_from_the_kept_schedule_and_equals_a_replay(app, client, monkeypatch):
    """Each click applies its primitive to a duplicate of the schedule the previous click
    kept (no replay of the trace); that schedule is the one a replay of the link gives —
    the same program, the same trace — and the duplicates a request changes never change
    the kept one."""
    from app.web import session as sess
    from app.web.session import Session
    from engine.schedule.recorded_trace import Trace
    replays = []
    real = Trace.apply_to_schedule
    monkeypatch.setattr(Trace, "apply_to_schedule",
                        lambda self, sch, *a, **k: (replays.append(len(self.insts)),
                                                    real(self, sch, *a, **k))[1])
    sess._SCHEDULE_CACHE.clear()
    q = course_steps(client)
    assert replays == []
    with app.test_request_context():
        kept = Session.from_request("mm_relu", q).schedule_at(4)
        assert replays == []
        before = kept.mod
        kept.split(kept.get_loops(kept.get_block("Y_update", func_name="mm_relu"))[0],
                   factors=[None, 2])
        again = Session.from_request("mm_relu", q).schedule_at(4)
        assert again.mod is before and replays == []
    sess._SCHEDULE_CACHE.clear()
    with app.test_request_context():
        replayed = Session.from_request("mm_relu", q).schedule_at(4)
    assert len(replays) == 1
    assert engine.structural_equal(again.mod, replayed.mod)
    assert engine.structural_equal(replayed.mod, course_schedule().mod)
    assert again.trace.encode() == replayed.trace.encode()
    # both go on alike: the same primitive names its new loops alike
    outs = [str(sch.split(sch.get_loops(sch.get_block("C", func_name="mm_relu"))[-1],
                          factors=[None, 2])) for sch in (again, replayed)]
    assert outs[0] == outs[1]
    assert again.trace.encode() == replayed.trace.encode()


def test_every_answer_says_how_long_the_server_worked_on_it(client):
    """``Server-Timing: app;dur=MS`` (the browser's developer tools show it; the latency
    benchmark splits a click with it), on pages, panes and refusals alike."""
    answers = [client.get(f"/explore/mm_relu?n={N}"),
               apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 4"),
               apply(client, {"n": str(N)}, "L/mm_relu/2/Y", "parallel")]
    assert [r.status_code for r in answers] == [200, 200, 422]
    for r in answers:
        m = re.fullmatch(r"app;dur=(\d+\.\d)", r.headers.get("Server-Timing", ""))
        assert m and 0 < float(m.group(1)) < 60_000, r.headers


def test_a_program_seen_before_shows_its_kept_loop_diagram(client, monkeypatch):
    """The loop diagram of a program already drawn (the same click again, an undo, a step
    link) is not analysed again; it is the same diagram, and another program gets its own."""
    from app.web.panes import diagram
    analysed = []
    real = diagram.loop_footprints
    monkeypatch.setattr(diagram, "loop_footprints",
                        lambda *a, **k: (analysed.append(1), real(*a, **k))[1])
    diagram._DRAWN.clear()
    pages = [html(apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 4"))
             for _ in range(2)]
    svgs = [re.search(r'<svg class="loop-diagram".*?</svg>', p, re.S).group(0) for p in pages]
    assert len(analysed) == 1 and svgs[0] == svgs[1]     # analysed once (one function)
    other = html(apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 2"))
    assert len(analysed) == 2
    assert re.search(r'<svg class="loop-diagram".*?</svg>', other, re.S).group(0) != svgs[0]
    assert "j_1 in 2" in other and "j_1 in 4" in svgs[0]


def test_refusal_keeps_the_trace_and_names_the_offender(client):
    r = apply(client, {"n": str(N)}, "L/mm_relu/2/Y", "parallel")
    assert r.status_code == 422
    assert "HX-Push-Url" not in r.headers
    page = html(r)
    assert "parallel refused on loop k" in page and "reduction" in page
    assert 'data-highlight="' in page and "L/mm_relu/2/Y" in page
    assert 'id="message"' in page and "hx-swap-oob" not in page


def test_bad_toolbar_inputs_are_refused_with_a_sentence(client):
    q = {"n": str(N)}
    cases = [
        (("L/mm_relu/1/Y", "split"), {"factors": "x, 4"}, "not a whole number"),
        (("L/mm_relu/1/Y", "split"), {"factors": "4"}, "at least two"),
        (("L/mm_relu/0/Y", "reorder"), {"order": "i, zz"}, "There is no loop “zz”"),
        (("L/mm_relu/0/Y", "reorder"), {"order": "i"}, "at least two loop names"),
        (("B/mm_relu/Y", "split"), {"factors": "None, 4"}, "Select a loop first"),
        (("L/mm_relu/0/Y", "compute_inline"), {}, "Select a block first"),
        (("L/mm_relu/1/Y", "frobnicate"), {}, "Unknown primitive"),
        (("L/mm_relu/7/Y", "parallel"), {}, "not in the current program"),
        (("B/mm_relu/C", "reverse_compute_at"), {"loop": "nonsense"}, "Select a loop first"),
        (("B/mm_relu/Y", "cache_read"), {"buffer": "x", "scope": "local"}, "whole number"),
        (("B/mm_relu/Y", "cache_read"), {"buffer": "0", "scope": "<b>"}, "Unknown storage scope"),
    ]
    for (sel, prim), args, words in cases:
        r = apply(client, q, sel, prim, **args)
        assert r.status_code == 422, (prim, args)
        assert words in html(r), (prim, args, html(r))
        assert "<b>" not in html(r)


def test_applying_after_undo_drops_the_undone_steps(client):
    q = course_steps(client)
    q["at"] = "2"
    r = apply(client, q, "L/mm_relu/0/C", "parallel")
    assert r.status_code == 200, html(r)
    page = html(r)
    assert "step 3 of 3" in page and "Y_init" not in page


# ---------------------------------------------------------------------------- undo / redo / jump
def test_undo_redo_jump_are_links_to_states(client):
    q = course_steps(client)
    t = q["t"]
    page = html(client.get(f"/explore/mm_relu?n={N}&t={t}&at=1"))
    assert "step 1 of 4" in page
    assert 'data-key="undo"' in page and 'data-key="redo"' in page
    assert f"t={t}&amp;at=0" in page and f"t={t}&amp;at=2" in page  # undo / redo links
    assert "Y_init" not in page and "j_1" in page
    assert 'class="step future"' in page
    page = html(client.get(f"/explore/mm_relu?n={N}&t={t}&at=0"))
    assert "step 0 of 4" in page and 'button small disabled" aria-disabled="true">↶ Undo' in page
    # reset is the URL without a trace
    assert f'href="/explore/mm_relu?n={N}"' in page


def test_fork_buttons_open_a_truncated_trace(client):
    q = course_steps(client)
    page = html(client.get(f"/explore/mm_relu?n={N}&t={q['t']}"))
    # one form carries the trace; each step's fork and compare buttons send it
    form = re.search(r'<form id="trace-forks" method="get" action="([^"]+)" target="_blank" rel="noopener">'
                     r'(.*?)</form>', page, re.S)
    assert form and form.group(1) == "/explore/mm_relu/fork"
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))
    assert fields["t"] == q["t"] and fields["n"] == str(N)
    forks = re.findall(r'form="trace-forks" name="from" value="(\d+)" class="fork linkish"', page)
    assert forks == ["0", "1", "2", "3"]      # from steps 0..3 (not from the last one)
    compares = re.findall(r'form="trace-forks" name="from" value="(\d+)" '
                          r'formaction="/explore/mm_relu/fork-compare"', page)
    assert compares == ["0", "1", "2", "3"]
    # the trace pane writes the trace once per step link, not once more per fork
    pane = page[page.index('<div id="trace-pane"'):]
    pane = pane[:pane.index("</ol>")]
    assert pane.count(q["t"]) == 5 + 1 + 1      # steps 0..4, undo, the fork form
    r = client.get("/explore/mm_relu/fork", query_string={**fields, "from": "2"})
    assert r.status_code == 303
    page2 = html(client.get(r.headers["Location"]))
    assert "step 2 of 2" in page2
    # from step 0: the initial program, a trace of its own
    r0 = client.get("/explore/mm_relu/fork", query_string={**fields, "from": "0"})
    assert r0.status_code == 303 and "t=" not in r0.headers["Location"]


def test_export_menu_is_one_form_carrying_the_state(client):
    q = course_steps(client)
    page = html(client.get(f"/explore/mm_relu?n={N}&t={q['t']}"))
    bar = page[page.index('<div id="statebar"'):]
    bar = bar[:bar.index("</details>")]
    assert bar.count(q["t"]) == 2              # the share link and the export form, once each
    form = re.search(r'<form class="menu-items" method="get" action="[^"]+">(.*?)</form>', bar, re.S)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(1)))
    actions = re.findall(r'formaction="([^"]+)"', form.group(1))
    assert [a.rsplit("/", 1)[1] for a in actions] == ["json", "python", "tvm", "course", "program"]
    for action in actions:
        r = client.get(action, query_string=fields)
        assert r.status_code == 200, action
        assert r.headers["Content-Disposition"].startswith("attachment;")
    doc = json.loads(client.get(actions[0], query_string=fields).get_data(as_text=True))
    assert doc["format"] == "schedule-explorer/trace"
    assert doc["workload"] == {"name": "mm_relu", "params": {"n": N}}
    py = client.get(actions[1], query_string=fields).get_data(as_text=True)
    assert "sch.decompose_reduction" in py      # the whole trace (4 steps)


def test_fork_compare_opens_the_compare_page(client):
    q = course_steps(client)
    args = {"n": str(N), "t": q["t"], "from": "1"}
    r = client.get("/explore/mm_relu/fork-compare", query_string=args)
    assert r.status_code == 303
    loc = urlsplit(r.headers["Location"])
    assert loc.path == "/compare"
    ab = parse_qs(loc.query)
    assert ab["a"][0].endswith(q["t"])
    page = html(client.get(r.headers["Location"]))
    assert "share their first 1 step" in page


@pytest.mark.parametrize("bad", ["", "x", "-1", "4", "99", "1.5"])
def test_fork_from_a_step_that_is_not_there_is_refused(client, bad):
    q = course_steps(client)
    for route in ("fork", "fork-compare"):
        r = client.get(f"/explore/mm_relu/{route}", query_string={"n": str(N), "t": q["t"],
                                                                  "from": bad})
        assert r.status_code == 400
        assert "from= must be a step number between 0 and 3" in html(r)


# ---------------------------------------------------------------------------- measure / code
def test_measure_pane_reports_every_step(client):
    q = course_steps(client)
    r = settled(client, f"/explore/mm_relu/measure?n={N}&t={q['t']}")
    assert r.status_code == 200
    page = html(r)
    m = re.search(r'data-plotly="([^"]+)" data-points="(\d+)"', page)
    assert m and m.group(2) == "5"
    fig = json.loads(m.group(1).replace("&#34;", '"').replace("&quot;", '"')
                     .replace("&#39;", "'").replace("&amp;", "&"))
    assert fig["data"][0]["x"] == [0, 1, 2, 3, 4]
    assert all(v > 0 for v in fig["data"][0]["y"])
    assert any("numpy" in d["name"] for d in fig["data"])
    assert page.count('<span class="ok">✓</span>') == 5
    assert "matches numpy" in page
    # compile ms = ours + llvmlite's, shown as "total (ours+llvm)" for every step
    splits = re.findall(r'<td class="compile">(\d+) <span class="muted split" title="our '
                        r'lowering[^"]*">\((\d+)\+(\d+)\)</span>', page)
    assert len(splits) == 5, page
    for total, ours, llvm in splits:
        assert abs(int(total) - int(ours) - int(llvm)) <= 1 and int(llvm) > 0


def test_a_state_seen_before_carries_its_measurement_bodies(client):
    """A click (or an undo) to a state whose every step is measured answers with the
    measurement and cache bodies themselves, swapped into the bodies on the page; a state
    not measured yet names them in its step event (and prefetches them). The addresses in
    the event are the ones the bodies' own polls use: the page drops an answer whose
    address is not its body's current one."""
    # the workers held from before the click: the jobs its prefetch starts cannot finish
    # before the pane's own answer is asked for
    with client.application.extensions["measurer"].pool.held():
        r = apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 8")
        step = json.loads(r.headers["HX-Trigger"])["explorer:step"]
        assert not step["measure_inline"] and not step["cache_inline"]
        assert 'id="measure-body"' not in html(r) and 'id="cache-body"' not in html(r)
        q = state_of(r.headers["HX-Push-Url"])
        assert step["measure"] == "/explore/mm_relu/measure?" + urlencode(q)
        # the pane's own answer, before the jobs ran, polls at the event's address
        pending = html(client.get(step["measure"]))
    poll = re.search(r'id="measure-pending" hx-get="([^"]+)"', pending).group(1)
    assert poll.replace("&amp;", "&") == step["measure"]
    settled(client, step["measure"])
    settled(client, step["cache"], pending='id="cache-pending"')
    r = client.get("/explore/mm_relu?" + urlencode(q), headers=HX)
    step = json.loads(r.headers["HX-Trigger"])["explorer:step"]
    assert step["measure_inline"] and step["cache_inline"]
    page = html(r)
    assert re.search(r'<div id="measure-body" hx-swap-oob="innerHTML">\s*<p class="measure-now', page)
    assert re.search(r'<div id="cache-body" hx-swap-oob="innerHTML">', page)
    assert re.search(r'id="runtime-plot" data-plotly="[^"]+" data-points="2"', page)


def test_the_tabs_loaded_when_shown_follow_the_state_of_a_click(client):
    """A click's answer does not carry the diff, code and Tune tabs: its step event names the
    new state, and each tab (its "data-slot" address relative to the state, on the page)
    asks for that state's content when shown (static/explorer.js). The addresses answer
    the new state's content: the step's diff, its LLVM IR, its Tune form."""
    r = apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 4")
    page = html(r)
    assert 'id="diff-pane"' not in page and 'id="code-ll"' not in page
    state = json.loads(r.headers["HX-Trigger"])["explorer:step"]["url"]
    assert state == r.headers["HX-Push-Url"]
    full = html(client.get(state))
    slots = dict(re.findall(r'id="([a-z-]+)" class="pane[^"]*"[^>]*?\s+data-slot="([^"]+)"', full))
    assert slots == {"diff-pane": "/diff", "code-ll": "/code?kind=ll-opt",
                     "code-asm": "/code?kind=asm", "tune-pane": "/tune"}
    assert f'data-state="{state.replace("&", "&amp;")}"' in full
    query = urlencode(state_of(state))
    body = html(client.get(f"/explore/mm_relu/diff?{query}"))
    assert "Step 1: " in body and "added" in body and 'class="line d-add"' in body
    assert "define" in html(client.get(f"/explore/mm_relu/code?{query}&kind=ll-opt"))
    assert 'class="line d-add"' in full                     # a page: the diff inline
    assert "No step applied yet" in html(client.get(f"/explore/mm_relu/diff?n={N}"))


def test_every_swap_of_the_pages_replaces_content():
    """static/explorer.js removes the content a swap replaces before htmx does (without
    htmx's element-by-element clean-up): right only for swaps that replace content. Every
    swap the templates and scripts ask for is innerHTML or outerHTML (or an out-of-band
    outerHTML, "true")."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    styles = set()
    for folder, _, files in os.walk(os.path.join(root, "templates")):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                styles |= set(re.findall(r'hx-swap(?:-oob)?="([^"]*)"', f.read()))
    for name in ("explorer.js", "lessons.js", "present.js"):
        with open(os.path.join(root, "static", name), encoding="utf-8") as f:
            styles |= set(re.findall(r'swap: "([^"]*)"', f.read()))
    assert styles and styles <= {"innerHTML", "outerHTML", "true"}, styles


def test_code_pane_shows_llvm_ir_and_assembly(client):
    r = client.get(f"/explore/mm_relu/code?n={N}&kind=ll-opt")
    assert r.status_code == 200 and "define" in html(r)
    r = client.get(f"/explore/mm_relu/code?n={N}&kind=asm")
    assert r.status_code == 200 and "ret" in html(r)
    r = client.get(f"/explore/mm_relu/code?n={N}&kind=<x>")
    assert r.status_code == 400 and "<x>" not in html(r)


# ---------------------------------------------------------------------------- export / import
def test_exports_are_downloads_in_four_formats(client):
    q = course_steps(client)
    base = f"/explore/mm_relu/export/%s?n={N}&t={q['t']}"
    r = client.get(base % "json")
    assert r.status_code == 200
    assert r.headers["Content-Disposition"] == 'attachment; filename="mm_relu-trace.json"'
    doc = json.loads(r.data)
    assert doc["format"] == "schedule-explorer/trace"
    assert doc["workload"] == {"name": "mm_relu", "params": {"n": N}}
    r = client.get(base % "python")
    assert "engine.Schedule" in html(r) and "sch.decompose_reduction" in html(r)
    compile(html(r), "export.py", "exec")
    r = client.get(base % "tvm")
    assert "s_tir" in html(r) and "get_sblock" in html(r)
    compile(html(r), "tvm.py", "exec")
    r = client.get(base % "course")
    assert "tir.Schedule" in html(r) and "get_block" in html(r)
    # the export is of the current state (the cursor), not of undone steps
    doc2 = json.loads(client.get(base % "json" + "&at=1").data)
    assert [i[0] for i in doc2["insts"]][-1] == "Split"
    r = client.get(base % "yaml")
    assert r.status_code == 404 and "Exports are" in html(r)


def test_import_our_json_by_paste_and_by_upload(client):
    q = course_steps(client)
    text = client.get(f"/explore/mm_relu/export/json?n={N}&t={q['t']}").get_data(as_text=True)
    r = client.post("/import", data={"text": text})
    assert r.status_code == 303
    loc = r.headers["Location"]
    assert "/explore/mm_relu?" in loc and state_of(loc)["n"] == str(N)
    assert "step 4 of 4" in html(client.get(loc))
    r = client.post("/import", data={"file": (io.BytesIO(text.encode()), "trace.json")},
                    content_type="multipart/form-data")
    assert r.status_code == 303 and "step 4 of 4" in html(client.get(r.headers["Location"]))


def test_import_tvm_trace_list_with_chosen_workload(client):
    tvm_doc = [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
                ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
                ["Split", ["l2", None, 4], [True, False], ["l4", "l5"]]], []]
    r = client.post("/import", data={"text": json.dumps(tvm_doc), "workload": "mm_relu",
                                     "params": f"n={N}"})
    assert r.status_code == 303, html(r)
    page = html(client.get(r.headers["Location"]))
    assert "step 1 of 1" in page and "j_1" in page


@pytest.mark.parametrize("data, words", [
    ({"text": ""}, "Paste a trace"),
    ({"text": "{not json"}, "not valid JSON"),
    ({"text": "[" * 5000 + "]" * 5000}, "nested more than"),
    ({"text": '{"format": "other"}'}, "not a schedule trace"),
    ({"text": json.dumps({"format": "schedule-explorer/trace", "version": 1,
                          "workload": {"name": "nope", "params": {}}, "insts": []})},
     "does not have"),
    ({"text": json.dumps({"format": "schedule-explorer/trace", "version": 1,
                          "workload": {"name": "mm_relu", "params": {"n": N}},
                          "insts": [["GetBlock", [], ["ZZZ", "mm_relu"], ["b0"]]]})},
     "does not replay"),
    ({"text": json.dumps({"format": "schedule-explorer/trace", "version": 1,
                          "workload": {"name": "mm_relu", "params": {"n": "big"}},
                          "insts": []})}, "whole number"),
])
def test_import_refusals(client, data, words):
    r = client.post("/import", data=data)
    assert r.status_code == 400
    assert words in html(r), html(r)
    assert 'href="/"' in html(r)


# ---------------------------------------------------------------------------- custom programs
def test_custom_program_is_explored_like_a_preset(client):
    text = engine.workloads.get("mm_relu", n=8).script()
    r = client.post("/explore/custom", data={"program": text})
    assert r.status_code == 303
    loc = r.headers["Location"]
    assert loc.startswith("/explore/custom?src=")
    page = html(client.get(loc))
    assert "custom program (mm_relu)" in page and 'data-sel="L/mm_relu/1/Y"' in page
    q = state_of(loc)
    r = client.post("/explore/custom/apply", data={**q, "sel": "L/mm_relu/1/Y",
                                                    "primitive": "split", "factors": "None, 2"},
                    headers=HX)
    assert r.status_code == 200, html(r)
    url = r.headers["HX-Push-Url"]
    assert url.startswith("/explore/custom?") and "src=" in url and "t=" in url
    r = settled(client, "/explore/custom/measure?" + urlsplit(url).query)
    assert r.status_code == 200 and html(r).count('<span class="ok">✓</span>') == 2
    # a fork of a pasted program keeps the program (from step 0: no trace)
    r = client.get("/explore/custom/fork?" + urlsplit(url).query + "&from=0")
    assert r.status_code == 303
    loc = r.headers["Location"]
    assert loc.startswith("/explore/custom?src=") and "t=" not in loc
    assert "step 0 of 0" in html(client.get(loc))


def test_custom_program_errors(client):
    r = client.post("/explore/custom", data={"program": "   "})
    assert r.status_code == 400 and "Paste a TVMScript program" in html(r)
    r = client.post("/explore/custom", data={"program": "@T.prim_func\ndef f(:\n"})
    assert r.status_code == 400 and "does not parse" in html(r)
    r = client.get("/explore/custom")
    assert r.status_code == 400 and "carries no program" in html(r)
    r = client.get("/explore/custom?src=!!!")
    assert r.status_code == 400 and "damaged" in html(r)


# ---------------------------------------------------------------------------- bad links
@pytest.mark.parametrize("url, status, words", [
    ("/explore/nope", 404, "no workload called"),
    ("/explore/mm_relu?n=abc", 400, "must be a whole number"),
    ("/explore/mm_relu?n=0", 400, "must be from 1"),
    ("/explore/mm_relu?n=99999", 400, "must be from 1"),
    ("/explore/mm_relu?size=3", 400, "has no parameter"),
    ("/explore/mm_relu?t=%%%", 400, "cannot be read"),
    ("/explore/mm_relu?t=eyJhIjoxfQ", 400, "cannot be read"),
    ("/explore/mm_relu?t=" + "A" * 20000, 400, "over the limit"),
    ("/explore/mm_relu?at=3", 400, "outside 0..0"),
    ("/explore/mm_relu?at=x", 400, "step number"),
    ("/explore/mm_relu/toolbar?n=x", 400, "whole number"),
    ("/explore/nope/measure", 404, "no workload"),
    ("/explore/nope/code", 404, "no workload"),
    ("/explore/mm_relu/export/json?t=zz", 400, "cannot be read"),
    ("/no/such/page", 404, "no page at this address"),
])
def test_bad_links_answer_4xx_with_a_reason_and_a_way_back(client, url, status, words):
    r = client.get(url)
    assert r.status_code == status, html(r)
    page = html(r)
    assert words in page
    assert 'class="button' in page and "href=" in page


def test_trace_of_another_workload_is_refused(client):
    q = course_steps(client)
    r = client.get(f"/explore/matmul?n={N}&t={q['t']}")
    assert r.status_code == 400
    assert "recorded on “mm_relu”" in html(r) and 'href="/explore/mm_relu"' in html(r)


def test_trace_that_does_not_replay_is_a_400_with_the_initial_program_link(client):
    from engine.schedule.trace import Trace
    bad = Trace.from_json({"format": "schedule-explorer/trace", "version": 1,
                           "workload": {"name": "mm_relu", "params": {"n": N}},
                           "insts": [["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
                                     ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
                                     ["Parallel", ["l3"], [], []]]}).encode()
    r = client.get(f"/explore/mm_relu?n={N}&t={bad}")
    assert r.status_code == 400
    assert "cannot be applied" in html(r) and f'href="/explore/mm_relu?n={N}"' in html(r)


def test_wrong_method_and_htmx_errors_are_friendly(client):
    r = client.get("/explore/mm_relu/apply")
    assert r.status_code == 405 and "does not accept" in html(r)
    r = client.get("/explore/nope", headers=HX)
    assert r.status_code == 404 and 'id="message"' in html(r) and "<html" not in html(r)


def test_user_text_is_escaped_everywhere(client):
    r = client.get("/explore/<script>alert(1)</script>")
    assert r.status_code == 404 and "<script>alert" not in html(r)
    r = client.get("/explore/mm_relu?<img src=x>=1")
    assert r.status_code == 400 and "<img" not in html(r)
    evil = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    for i in range(4):\n' \
           '        with T.block("<b>x</b>"):\n            A[i] = T.float32(0)\n'
    r = client.post("/explore/custom", data={"program": evil})
    if r.status_code == 303:
        page = html(client.get(r.headers["Location"]))
        assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    else:
        assert r.status_code == 400 and "<b>x</b>" not in html(r)


def test_unexpected_exceptions_become_a_friendly_500_page(app):
    bad = make_test_app()

    @bad.get("/boom")
    def boom():
        raise RuntimeError("secret internals")

    r = bad.test_client().get("/boom")
    assert r.status_code == 500
    assert "Something went wrong" in html(r) and "secret internals" not in html(r)


def test_no_route_answers_500(client):
    """Every route with good and bad inputs: never a server error."""
    q = course_steps(client)
    t = q["t"]
    urls = ["/", f"/explore/mm_relu?n={N}", f"/explore/mm_relu?n={N}&t={t}&at=2",
            f"/explore/mm_relu/toolbar?n={N}&t={t}&sel=B/mm_relu/Y_update",
            f"/explore/mm_relu/measure?n={N}&t={t}&at=1", f"/explore/mm_relu/code?n={N}&t={t}",
            f"/explore/mm_relu/export/course?n={N}&t={t}", "/explore/custom?src=",
            f"/explore/mm_relu/cache?n={N}&t={t}&at=3",
            f"/explore/mm_relu/pattern?n={N}&t={t}&sel=L/mm_relu/3/Y_update&iteration=x",
            "/explore/matmul?n=8", "/explore/softmax", "/explore/mm_relu?n=-1&t=&at=",
            "/explore/mm_relu/export/json", "/favicon.ico", "/static/nope.js"]
    for name in engine.workloads.names():
        urls.append(f"/explore/{name}")
    for u in urls:
        r = client.get(u)
        assert r.status_code < 500, (u, r.status_code)
    posts = [("/explore/mm_relu/apply", {}), ("/explore/mm_relu/apply", {"n": "x"}),
             ("/explore/mm_relu/apply", {"t": "%%", "primitive": "split"}),
             ("/import", {"text": "[]"}), ("/import", {"text": "[1, 2]"}),
             ("/import", {"text": '{"format": "schedule-explorer/trace", "version": 1, "insts": []}'}),
             ("/explore/custom", {"program": "x = 1"})]
    for u, data in posts:
        r = client.post(u, data=data, headers=HX)
        assert r.status_code < 500, (u, data, r.status_code, html(r))


def test_every_primitive_the_toolbar_offers_is_a_schedule_method(client):
    offered = set()
    for sel in ("L/mm_relu/2/Y", "L/mm_relu/0/C", "B/mm_relu/Y", "B/mm_relu/C"):
        page = html(client.get(f"/explore/mm_relu/toolbar?n={N}&sel={sel}"))
        offered |= set(re.findall(r'data-prim="(\w+)"', page))
    assert {"split", "reorder", "parallel", "cache_read", "compute_at"} <= offered
    for prim in offered:
        assert callable(getattr(engine.Schedule, prim, None)), prim
    # posting one with a bad input is a refusal with a reason, not a server error
    r = apply(client, {"n": str(N)}, "B/mm_relu/Y", "cache_read", buffer="9", scope="local")
    assert r.status_code == 422 and "cache_read" in html(r)


def test_cache_pane_reports_simulated_misses_per_step_and_buffer(client):
    q = course_steps(client)
    r = settled(client, f"/explore/mm_relu/cache?n={N}&t={q['t']}", 'id="cache-pending"')
    assert r.status_code == 200
    page = html(r)
    assert "Step 4, simulated:" in page and "L1" in page and "misses" in page
    m = re.search(r'id="cache-plot" data-plotly="[^"]+" data-points="(\d+)"', page)
    assert m and m.group(1) == "5"
    for buf in ("A", "B", "C", "Y"):
        assert f"<tr><td>{buf}</td>" in page
    # once every step is stored the explorer page carries it (no request of its own) ...
    page = html(client.get(f"/explore/mm_relu?n={N}&t={q['t']}"))
    assert f'hx-get="/explore/mm_relu/cache?n={N}&amp;t=' not in page
    m = re.search(r'id="cache-plot" data-plotly="[^"]+" data-points="(\d+)"', page)
    assert m and m.group(1) == "5"
    # ... a state not measured yet loads it lazily, separately from the runtime measurements
    page = html(client.get(f"/explore/mm_relu?n={N + 2}&t={q['t']}"))
    assert f'hx-get="/explore/mm_relu/cache?n={N + 2}&amp;t=' in page
    r = client.get("/explore/nope/cache")
    assert r.status_code == 404


def test_security_headers_and_cross_origin_posts(client):
    r = client.get(f"/explore/mm_relu?n={N}")
    csp = r.headers.get("Content-Security-Policy", "")
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers.get("X-Content-Type-Options") == "nosniff"
    # a POST from another site is refused with a sentence, not applied
    r = client.post("/explore/mm_relu/apply", data={"n": str(N), "sel": "L/mm_relu/0/Y",
                                                    "primitive": "parallel"},
                    headers={"Origin": "http://evil.example", "HX-Request": "true"})
    assert r.status_code == 403 and "another site" in html(r) and "HX-Push-Url" not in r.headers
    r = client.post("/explore/mm_relu/apply", data={"n": str(N), "sel": "L/mm_relu/0/Y",
                                                    "primitive": "parallel"},
                    headers={"Origin": "http://localhost", "HX-Request": "true"})
    assert r.status_code == 200


def test_long_measurements_fill_in_progressively(monkeypatch):
    import pickle

    from app.web import measuring
    from app.web.session import Session
    app = make_test_app({"PREFETCH_MEASUREMENTS": False})
    client = app.test_client()
    q = course_steps(client)
    monkeypatch.setattr(measuring, "STEP_BUDGET_S", 0.0)   # answer at once, never wait
    url = f"/explore/mm_relu/measure?n={N}&t={q['t']}&at=2"
    seen = []
    pool = app.extensions["measurer"].pool
    for _ in range(10):
        with pool.held():           # nothing the request queues can finish before it answers
            page = html(client.get(url))
        m = re.search(r'data-points="(\d+)"', page)
        seen.append(int(m.group(1)) if m else 0)
        if 'id="measure-pending"' not in page:
            break
        assert 'hx-trigger="load delay:1s"' in page and "queued (position" in page
        drain(app)                  # the jobs this request queued finish before the next poll
    # nothing was waited for; each poll shows more, at most POOL_AHEAD + 1 new steps each
    assert seen[0] == 0 and seen[-1] == 5 and seen == sorted(seen)
    assert all(b - a <= measuring.POOL_AHEAD + 1 for a, b in zip(seen, seen[1:]))
    assert len(seen) >= 3 and "Step 2:" in page
    # the current step (2) was the first one queued
    first = pickle.loads(next(j.module for j in app.extensions["measurer"].pool.jobs
                              if j.actions == ("step",)))
    with app.test_request_context():
        assert engine.structural_equal(first, Session.from_request("mm_relu", q).mod_at(2))
    url = f"/explore/mm_relu/cache?n={N}&t={q['t']}"
    pages = []
    for _ in range(6):
        pages.append(html(client.get(url)))
        drain(app)
    assert 'id="cache-pending"' in pages[0] and 'id="cache-pending"' not in pages[-1]


def test_applying_a_step_starts_measuring_it_in_the_background():
    from app.web.session import Session
    app = make_test_app()
    client = app.test_client()
    r = apply(client, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 8")
    assert r.status_code == 200
    measurer = app.extensions["measurer"]
    assert [j.actions for j in measurer.pool.jobs][-2:] == [("step",), ("cache",)]
    drain(app)
    with app.test_request_context():
        s = Session.from_request("mm_relu", state_of(r.headers["HX-Push-Url"]))
        mod = s.mod_at(1)
    res = measurer.cached(mod, "mm_relu", {"n": N}, "mm_relu")
    assert res is not None and res["correct"] is True
    assert measurer.cached_cache(mod, "mm_relu") is not None


def test_access_pattern_of_a_loop(client):
    r = client.get(f"/explore/mm_relu/pattern?n={N}&sel=L/mm_relu/1/Y&iteration=3")
    assert r.status_code == 200
    page = html(r)
    assert "loop j" in page and 'value="3"' in page
    caps = re.findall(r"<figcaption><strong>(\w+)</strong>", page)
    assert caps == ["A", "B", "Y"]
    figs = re.findall(r'data-plotly="([^"]+)" data-buffer="B"', page)
    fig = json.loads(figs[0].replace("&#34;", '"').replace("&quot;", '"').replace("&#39;", "'")
                     .replace("&amp;", "&"))
    z = fig["data"][0]["z"]
    # one iteration of j (j = 3) reads column 3 of B, in order of k
    col = [row[3] for row in z]
    assert all(v is not None for v in col) and col == sorted(col)
    assert all(row[c] is None for row in z for c in range(N) if c != 3)
    # no loop selected: the first loop; a bad iteration is explained
    page = html(client.get(f"/explore/mm_relu/pattern?n={N}&iteration=99"))
    assert "loop i" in page and "from 0 to 15" in page
    page = html(client.get(f"/explore/mm_relu/pattern?n={N}&sel=B/mm_relu/Y"))
    assert "loop i" in page


def test_pattern_downsampling_keeps_the_earliest_touch():
    from app.web.plots import _downsample
    import numpy as np
    big = np.arange(512 * 512).reshape(512, 512)
    big[0, 0] = -1
    a, block = _downsample(big.tolist())
    assert a.shape[0] * a.shape[1] <= 128 * 128 and block == (4, 4)
    assert a[0, 0] == 1            # -1 (untouched) ignored, earliest of the block kept
    assert a[1, 1] == 4 * 512 + 4


def test_a_step_that_fails_to_compile_is_reported_on_the_step(monkeypatch):
    from app.service import actions, timing

    def broken_build(mod, target="llvm", **kw):
        raise RuntimeError("LLVM says no")
    monkeypatch.setattr(timing, "build", broken_build)
    monkeypatch.setattr(actions, "build", broken_build)
    client = make_test_app().test_client()
    page = html(settled(client, f"/explore/mm_relu/measure?n={N}"))
    assert "compile failed: LLVM says no" in page and "failed: compile" in page
    page = html(client.get(f"/explore/mm_relu/code?n={N}&kind=asm"))
    assert "compile failed:" in page and "LLVM says no" in page
    monkeypatch.undo()
    client = make_test_app().test_client()      # a fresh store: nothing remembered
    assert "matches numpy" in html(settled(client, f"/explore/mm_relu/measure?n={N}"))


def test_trace_length_limit_is_explained(app):
    small = make_test_app({"EXPLORER_LIMITS": {"max_trace_insts": 4}})
    c = small.test_client()
    r = apply(c, {"n": str(N)}, "L/mm_relu/1/Y", "split", factors="None, 4")
    assert r.status_code == 200
    t = state_of(r.headers["HX-Push-Url"])["t"]
    r = apply(c, {"n": str(N), "t": t}, "L/mm_relu/0/Y", "parallel")    # 6 instructions
    page = html(c.get(r.headers["HX-Push-Url"])) if r.status_code == 200 else html(r)
    assert "max_trace_insts" in page


def test_custom_program_by_file_upload_and_upload_size_limit(client):
    text = engine.workloads.get("mm_relu", n=8).script()
    r = client.post("/explore/custom", data={"file": (io.BytesIO(text.encode()), "prog.py")},
                    content_type="multipart/form-data")
    assert r.status_code == 303 and r.headers["Location"].startswith("/explore/custom?src=")
    big = io.BytesIO(b"x" * (3 * 1024 * 1024))
    r = client.post("/import", data={"file": (big, "huge.json")}, content_type="multipart/form-data")
    assert r.status_code == 413 and "larger than" in html(r)


def test_apply_pad_einsum_on_a_block_and_refuse_bad_factors(client):
    r = apply(client, {"n": str(N), "at": "0"}, "B/mm_relu/Y", "pad_einsum", padding="12, 12, 1")
    assert r.status_code == 200, html(r)
    page = html(r)
    assert "applied: pad_einsum Y by [12, 12, 1]" in page
    assert "Y_pad" in page and "sch.pad_einsum(" in page
    r = apply(client, {"n": str(N), "at": "0"}, "B/mm_relu/Y", "pad_einsum", padding="4, 4, 4")
    assert r.status_code == 422 and "nothing to pad" in html(r)
    r = apply(client, {"n": str(N), "at": "0"}, "B/mm_relu/Y", "pad_einsum", padding="4, x")
    assert r.status_code == 422 and "positive" not in html(r) and "whole number" in html(r)


def test_apply_reindex_cache_inplace_and_rolling_buffer_from_the_toolbar(client):
    q = {"n": str(N), "at": "0"}
    r = apply(client, q, "B/mm_relu/Y", "reindex", buffer="r1")
    assert r.status_code == 200, html(r)
    assert "applied: reindex Y read buffer #1" in html(r) and "B_reindex" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "reindex", buffer="x1")
    assert r.status_code == 422
    r = apply(client, q, "B/mm_relu/Y", "cache_inplace", buffer="0", scope="local")
    assert r.status_code == 422 and "requirement 2" in html(r)   # Y only reads A
    r = apply(client, q, "B/mm_relu/Y", "rolling_buffer", buffer="0")
    assert r.status_code == 422 and "share no loop" in html(r)


def test_apply_cache_index_from_the_toolbar(client):
    q = {"n": str(N), "at": "0"}
    r = apply(client, q, "B/mm_relu/Y", "cache_index", scope="global", cse_thresh="0")
    assert r.status_code == 422 and "requirement 3" in html(r)   # Y[vi, vj]: no arithmetic

    def window(**args):
        data = {"n": "24", "at": "0", "sel": "B/window_sum/C", "primitive": "cache_index"}
        data.update(args)
        return client.post("/explore/window_sum/apply", data=data, headers=HX)
    r = window(scope="global", cse_thresh="0")
    assert r.status_code == 200, html(r)
    assert "applied: cache_index C (2 index buffers, global)" in html(r)
    assert "index_var_1" in html(r)
    r = window(scope="global", cse_thresh="x")
    assert r.status_code == 422 and "whole number" in html(r)


def test_apply_partition_merge_layout_and_buffer_access_from_the_toolbar(client):
    q = {"n": str(N), "at": "0"}
    r = apply(client, q, "L/mm_relu/0/Y", "loop_partition", factors="None, 4")
    assert r.status_code == 200, html(r)
    assert "applied: loop_partition i into [None, 4]" in html(r) and "Y_i_common" in html(r)
    r = apply(client, q, "L/mm_relu/0/Y", "loop_partition", factors="20")
    assert r.status_code == 422 and "add up to 20" in html(r)
    r = apply(client, q, "L/mm_relu/1/Y", "merge", loop="L/mm_relu/1/C")
    assert r.status_code == 200, html(r)
    assert "applied: merge j with j" in html(r) and "j_m" in html(r)
    r = apply(client, q, "L/mm_relu/2/Y", "merge", loop="L/mm_relu/1/C")
    assert r.status_code == 422 and "same depth" in html(r)
    r = apply(client, q, "B/mm_relu/C", "transform_block_layout", index_map="lambda i, j: (j, i)")
    assert r.status_code == 200, html(r)
    assert "ax0" in html(r)
    r = apply(client, q, "B/mm_relu/C", "transform_block_layout", index_map="lambda i, j: (i, i)")
    assert r.status_code == 422 and "not bijective" in html(r)
    r = apply(client, q, "B/mm_relu/C", "transform_block_layout",
              index_map="lambda i, j: __import__('os')")
    assert r.status_code == 422 and "not allowed" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "reorder_block_iter_var", order="2, 0, 1")
    assert r.status_code == 200, html(r)
    assert "applied: reorder_block_iter_var Y to [2, 0, 1]" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "reorder_block_iter_var", order="0, 0, 1")
    assert r.status_code == 422 and "permutation" in html(r)
    r = apply(client, q, "B/mm_relu/C", "annotate_buffer_access", buffer="r0",
              index_map="lambda vi, vj: [vi, (0, 16)]")
    assert r.status_code == 200, html(r)
    assert "explicit_read_region" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "unsafe_set_dtype", buffer="0", dtype="float64")
    assert r.status_code == 200, html(r)
    assert "float64" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "unsafe_set_dtype", buffer="0", dtype="complex")
    assert r.status_code == 422 and "Unknown type" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "reindex_cache_read", buffer="0", scope="local",
              index_map="lambda i, j, k: (k, i)")
    assert r.status_code == 200, html(r)
    assert "A_local" in html(r)
    r = apply(client, q, "B/mm_relu/Y", "reindex_cache_write", buffer="0", scope="shared",
              index_map="lambda i, j, k: (j, i)")
    assert r.status_code == 200, html(r)
    r = apply(client, q, "B/mm_relu/Y", "reindex_cache_write", buffer="0", scope="shared",
              index_map="lambda i, j, k: (j, i")
    assert r.status_code == 422 and "not valid Python" in html(r)


def test_a_step_changing_a_parameters_layout_is_refused_by_the_explorer():
    """transform_layout of a function parameter rewrites the signature (TVM does; the
    engine does too): the explorer, which runs every step on the workload's own arrays,
    refuses it with the way around (a cache_read first) — on a click and in a link."""
    import engine
    from inline_service import make_test_app
    client = make_test_app().test_client()
    r = client.post("/explore/matmul/apply?m=16&n=16&k=16",
                    data={"sel": "B/matmul/C", "primitive": "transform_layout",
                          "buffer": "read 0", "index_map": "lambda i, k: (k, i)"},
                    headers={"HX-Request": "true"})
    sch = engine.Schedule(engine.workloads.get("matmul", m=16, n=16, k=16),
                          workload=("matmul", {"m": 16, "n": 16, "k": 16}))
    sch.transform_layout(sch.get_block("C"), ("read", 0), "lambda i, k: (k, i)")
    page = client.get(f"/explore/matmul?m=16&n=16&k=16&t={sch.trace.encode()}")
    assert page.status_code == 400 and "cache_read A first" in page.get_data(as_text=True)
    assert r.status_code in (400, 422)


def test_a_pasted_program_of_symbolic_sizes_is_refused_with_the_way_around():
    """The engine builds programs of symbolic sizes and scalar parameters now; the explorer
    measures programs of constant sizes, and says so (not a 500)."""
    from app.web.session import encode_src
    from inline_service import make_test_app
    client = make_test_app().test_client()
    for src in ('''@T.prim_func
def f(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            A[vi] = A[vi] + 1.0
''', '''@T.prim_func
def f(A: T.Buffer((8,), "float32"), x: T.float32):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] + x
'''):
        r = client.get(f"/explore/custom?src={encode_src(src)}")
        assert r.status_code == 400 and "constant sizes" in r.get_data(as_text=True)
        r = client.post("/explore/custom", data={"program": src})
        assert r.status_code == 400 and "constant sizes" in r.get_data(as_text=True)
