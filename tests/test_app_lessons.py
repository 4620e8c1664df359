"""Flask test-client tests of the teaching pages: the lesson player (every step of every
lesson renders, "apply for me", "try it yourself" with its check), challenges, presenter mode,
and their error pages (4xx with a way back, never a 500)."""
from __future__ import annotations

import json
import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

import engine
from engine import lessons
from inline_service import make_test_app
from toolbar_forms import primitive_fields

HX = {"HX-Request": "true"}
L1 = "01_tensorir_mm_relu"


@pytest.fixture(scope="module")
def app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False})


@pytest.fixture()
def client(app):
    return app.test_client()


def html(resp) -> str:
    return resp.get_data(as_text=True)


def program_of(page: str) -> str:
    m = re.search(r'<div id="program-pane".*?</div>', page, re.S)
    assert m, "no program pane"
    return unescape(re.sub(r"<[^>]+>", "", m.group(0)))


def toolbar_form(client, sel: str, prim: str, state_url: str = "/explore/mm_relu/toolbar") -> dict:
    """The fields the explorer toolbar's form for ``prim`` on selection ``sel`` sends: its own
    hidden ones and the session's state (``#toolbar-state``, which every form includes)."""
    sep = "&" if "?" in state_url else "?"
    page = html(client.get(f"{state_url}{sep}sel={sel}"))
    return primitive_fields(page, prim)


# ---------------------------------------------------------------------------- list + player
def test_lesson_list_links_every_lesson(client):
    r = client.get("/lessons")
    assert r.status_code == 200
    for lid in lessons.names():
        assert f'href="/lessons/{lid}"' in html(r)


def test_gallery_links_lessons(client):
    assert 'href="/lessons"' in html(client.get("/"))


@pytest.mark.parametrize("lid", lessons.names())
def test_every_step_of_every_lesson_renders(client, lid):
    les = lessons.get(lid)
    n = len(les.steps)
    for k, step in enumerate(les.steps):
        r = client.get(f"/lessons/{lid}?step={k}")
        assert r.status_code == 200, (lid, k, html(r)[:500])
        page = html(r)
        assert f"Step {k + 1} of {n}" in page
        assert "lesson-pane" in page and 'id="program-pane"' in page and 'id="diagram-pane"' in page
        # the narrative is rendered (markdown-light), escaped by the lesson markup
        first_words = re.sub(r"[`*]", "", step.text.split()[0])
        assert first_words in re.sub(r"<[^>]+>", "", page)
        if step.action:
            assert 'id="apply-for-me"' in page and 'id="try-yourself"' in page
            ra = client.get(f"/lessons/{lid}?step={k}&applied=1")
            assert ra.status_code == 200
            assert "Applied for you" in html(ra)
            # "apply for me" shows the program after the step = the lesson's program k+1
            want = les.schedule_at(k + 1).mod.script()
            got = program_of(html(ra))
            for line in want.splitlines()[:40]:
                assert line.strip() in got
        if step.question:
            assert 'id="question"' in page and 'id="answer"' in page
            assert step.question.answer in page
        # the state opens in the free explorer
        m = re.search(r'id="open-explorer" href="([^"]+)"', page)
        assert m and m.group(1).startswith(f"/explore/{les.workload}")
        assert client.get(m.group(1).replace("&amp;", "&")).status_code == 200
    end = client.get(f"/lessons/{lid}?step={n}")
    assert end.status_code == 200 and "Lesson finished" in html(end)


def test_next_and_previous_links(client):
    page = html(client.get(f"/lessons/{L1}?step=2"))
    assert re.search(r'id="lesson-prev"[^>]*href="/lessons/01_tensorir_mm_relu\?step=1"', page)
    assert re.search(r'id="lesson-next"[^>]*href="/lessons/01_tensorir_mm_relu\?step=3"', page)
    first = html(client.get(f"/lessons/{L1}?step=0"))
    assert 'id="lesson-prev"' not in first


def test_before_state_equals_previous_applied_state(client):
    """Step k's program (before) is the program step k-1 left ("apply for me" then "next")."""
    after1 = program_of(html(client.get(f"/lessons/{L1}?step=1&applied=1")))
    before2 = program_of(html(client.get(f"/lessons/{L1}?step=2")))
    assert after1 == before2
    assert "j_0" in before2


# ---------------------------------------------------------------------------- try it yourself
def _try_split(client, factors: str):
    fields = toolbar_form(client, "L/mm_relu/1/Y", "split")
    page = html(client.get(f"/lessons/{L1}?step=1"))
    assert f'data-apply-url="/lessons/{L1}/apply?step=1"' in page
    fields["factors"] = factors
    return client.post(f"/lessons/{L1}/apply?step=1", data=fields, headers=HX)


def test_try_it_yourself_right_step_is_accepted(client):
    r = _try_split(client, "None, 4")
    assert r.status_code == 200
    page = html(r)
    assert "Matches the lesson" in page and 'class="lesson-check ok"' in page
    push = r.headers["HX-Push-Url"]
    q = parse_qs(urlsplit(push).query)
    assert urlsplit(push).path == f"/lessons/{L1}" and q["step"] == ["1"] and q["t"]
    # every pane comes back out-of-band, the lesson pane included; the measurement pane
    # stays, and the step event names its bodies for the learner's new state
    for pane in ("program-pane", "diagram-pane", "lesson-pane", "toolbar"):
        assert re.search(rf'id="{pane}"[^>]*hx-swap-oob="true"', page), pane
    step = json.loads(r.headers["HX-Trigger"])["explorer:step"]
    assert step["measure"].startswith("/explore/mm_relu/measure?") and \
        parse_qs(urlsplit(step["measure"]).query)["t"] == q["t"]
    # the pushed URL renders the same state, and "next" continues with the learner's trace
    again = html(client.get(push))
    assert "Matches the lesson" in again
    nxt = re.search(r'id="lesson-next"[^>]*href="([^"]+)"', again).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(nxt).query)["t"] == q["t"]
    assert parse_qs(urlsplit(nxt).query)["step"] == ["2"]
    waiting = html(client.get(nxt))
    assert "Your turn" in waiting and "j_0" in program_of(waiting)


def test_try_it_yourself_wrong_step_says_what_differs(client):
    r = _try_split(client, "None, 8")
    assert r.status_code == 200
    page = html(r)
    assert 'class="lesson-check wrong"' in page
    assert "serial(32)" in page and "serial(16)" in page     # expected vs found
    assert "sch.split(j, factors=[None, 4])" in page         # the hint
    assert "msg-wrong" in page


def test_try_it_yourself_wrong_primitive_named(client):
    fields = toolbar_form(client, "L/mm_relu/1/Y", "parallel")
    r = client.post(f"/lessons/{L1}/apply?step=1", data=fields, headers=HX)
    assert r.status_code == 200
    assert "this step asks for split" in html(r)


def test_try_it_yourself_refusal_is_422_message(client):
    fields = toolbar_form(client, "L/mm_relu/1/Y", "split")
    fields["factors"] = "None, 5"   # 128 is not divisible... or a bad input: either way refused
    fields["factors"] = "banana"
    r = client.post(f"/lessons/{L1}/apply?step=1", data=fields, headers=HX)
    assert r.status_code == 422
    assert 'id="message"' in html(r)


def test_learner_trace_is_checked_from_the_link(client):
    les = lessons.get(L1)
    mine = les.schedule_at(3)          # the learner did steps 1 and 2 (step 0 is reading)
    tok = mine.trace.encode()
    page = html(client.get(f"/lessons/{L1}?step=2&t={tok}"))
    assert "Matches the lesson" in page
    page = html(client.get(f"/lessons/{L1}?step=3&t={tok}"))
    assert "Your turn" in page


# ---------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("url,status", [
    ("/lessons/no_such_lesson", 404),
    ("/lessons/01_tensorir_mm_relu?step=99", 400),
    ("/lessons/01_tensorir_mm_relu?step=-1", 400),
    ("/lessons/01_tensorir_mm_relu?step=two", 400),
    ("/lessons/01_tensorir_mm_relu?step=1&t=not-a-token", 400),
    ("/lessons/01_tensorir_mm_relu?step=1&t=" + "A" * 30, 400),
    ("/lessons/%3Cscript%3E", 404),
])
def test_bad_lesson_links_are_4xx_with_a_way_back(client, url, status):
    r = client.get(url)
    assert r.status_code == status
    page = html(r)
    assert 'class="button"' in page and "href=" in page
    assert "<script>alert" not in page


def test_unknown_lesson_name_is_escaped(client):
    r = client.get("/lessons/%3Cb%3Ebold%3C%2Fb%3E")
    assert r.status_code == 404
    assert "<b>bold</b>" not in html(r)


def test_trace_of_another_workload_is_refused(client):
    sch = engine.Schedule(engine.workloads.get("softmax"), workload=("softmax", {}))
    sch.get_loops(sch.get_block("T_softmax_norm"))
    sch.parallel(sch.get_loops(sch.get_block("T_softmax_norm"))[0])
    r = client.get(f"/lessons/{L1}?step=1&t={sch.trace.encode()}")
    assert r.status_code == 400


def test_apply_with_bad_step_is_400(client):
    fields = toolbar_form(client, "L/mm_relu/1/Y", "split")
    r = client.post(f"/lessons/{L1}/apply?step=6", data=fields, headers=HX)
    assert r.status_code == 400
    r = client.post("/lessons/nope/apply?step=1", data=fields, headers=HX)
    assert r.status_code == 404


# ---------------------------------------------------------------------------- presenter mode
def test_presenter_mode_on_lessons(client):
    page = html(client.get(f"/lessons/{L1}?step=1&present=1"))
    assert re.search(r'<body class="[^"]*\bpresenting\b', page)
    assert 'id="presentbar"' in page and "present.js" in page
    # links keep presenter mode; the toggle leaves it
    assert re.search(r'id="lesson-next"[^>]*href="[^"]*present=1', page)
    assert re.search(r'id="toggle-present" href="/lessons/01_tensorir_mm_relu\?step=1"', page)
    plain = html(client.get(f"/lessons/{L1}?step=1"))
    assert not re.search(r'<body class="[^"]*\bpresenting\b', plain)


def test_presenter_mode_on_the_explorer(client):
    les = lessons.get(L1)
    tok = les.schedule_at(3).trace.encode()
    r = client.get(f"/explore/mm_relu/present?t={tok}&at=1")
    assert r.status_code == 200
    page = html(r)
    assert re.search(r'<body class="[^"]*\bpresenting\b', page)
    assert 'id="presentbar"' in page and 'data-key="redo"' in page and 'id="trace-pane"' in page
    assert client.get("/explore/nope/present").status_code == 404
    assert client.get("/explore/mm_relu/present?n=banana").status_code == 400


def test_no_inline_scripts_on_teaching_pages(client):
    for url in ("/lessons", f"/lessons/{L1}?step=1", "/challenges", "/compare",
                f"/lessons/{L1}?step=1&present=1"):
        page = html(client.get(url))
        for tag in re.findall(r"<script[^>]*>", page):
            assert "src=" in tag, (url, tag)
        assert not re.search(r"\son[a-z]+=", page), url


# ---------------------------------------------------------------------------- challenges
def test_challenge_list_and_pages(client):
    from engine import challenges
    page = html(client.get("/challenges"))
    for cid in challenges.names():
        assert f'href="/challenges/{cid}"' in page
        assert client.get(f"/challenges/{cid}").status_code == 200


def test_challenge_checks_a_pasted_link(client):
    les = lessons.get(L1)
    sch = les.schedule_at(len(les.steps))
    link = "http://localhost/explore/mm_relu?t=" + sch.trace.encode()
    r = client.get("/challenges/mm_relu_course_nest", query_string={"solution": link})
    assert r.status_code == 200
    page = html(r)
    assert "Solved" in page and 'id="solution-link"' in page
    # a partial solution is "not yet", with the difference
    part = les.schedule_at(2).trace.encode()
    r = client.get("/challenges/mm_relu_course_nest", query_string={"solution": part})
    assert r.status_code == 200 and "Not yet" in html(r)


@pytest.mark.parametrize("solution,status", [
    ("http://localhost/explore/softmax?t=abc", 400),
    ("http://localhost/explore/mm_relu", 400),
    ("http://localhost/lessons/x", 400),
    ("not a token at all", 400),
])
def test_challenge_bad_solutions(client, solution, status):
    r = client.get("/challenges/mm_relu_course_nest", query_string={"solution": solution})
    assert r.status_code == status, html(r)[:300]
    assert "href=" in html(r)


def test_unknown_challenge_404(client):
    assert client.get("/challenges/nope").status_code == 404


def test_toolbar_posts_to_the_step_it_is_checked_against(client):
    # a narrative step (0) and an applied step (1) send the next click to the next step
    for url, want in ((f"/lessons/{L1}?step=0", 1), (f"/lessons/{L1}?step=1&applied=1", 2),
                      (f"/lessons/{L1}?step=2", 2)):
        page = html(client.get(url))
        assert f'data-apply-url="/lessons/{L1}/apply?step={want}"' in page, url


def test_learner_step_on_the_last_narrative_step_is_not_called_correct(client):
    les = lessons.get(L1)
    last = len(les.steps) - 1
    assert les.steps[last].action is None
    state = f"/explore/mm_relu/toolbar?t={les.schedule_at(last).trace.encode()}"
    fields = toolbar_form(client, "L/mm_relu/0/Y_init", "parallel", state)
    r = client.post(f"/lessons/{L1}/apply?step={last}", data=fields, headers=HX)
    assert r.status_code == 200
    page = html(r)
    assert "applies nothing itself" in page and "This is the lesson" not in page


def test_beat_time_challenge_measures_both_programs(client):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=16), workload=("mm_relu", {"n": 16}))
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    sch.parallel(i)
    link = "http://localhost/explore/mm_relu?n=16&t=" + sch.trace.encode()
    r = client.get("/challenges/mm_relu_beat_naive", query_string={"solution": link})
    assert r.status_code == 200
    page = html(r)
    m = re.search(r'id="challenge-result" class="lesson-check (ok|wrong)"', page)
    assert m, page[:2000]
    # the verdict quotes both measured times and the speed-up, and links the attempt
    assert re.search(r"yours [0-9.]+ ms vs reference [0-9.]+ ms \([0-9.]+x\)", page)
    assert "explore/mm_relu?n=16" in page


def test_present_flag_on_the_explorer_redirects(client):
    r = client.get("/explore/mm_relu?n=64&present=1")
    assert r.status_code == 302
    assert r.headers["Location"].endswith("/explore/mm_relu/present?n=64")
    r = client.get("/explore/mm_relu/present?n=64&present=0")
    assert r.status_code == 200          # the presenter route itself ignores the flag
    r = client.get("/explore/mm_relu?n=64&present=0")
    assert r.status_code == 302 and r.headers["Location"].endswith("/explore/mm_relu?n=64")
    # other explorer routes are untouched
    assert client.get("/explore/mm_relu?n=64").status_code == 200


def test_a_step_link_followed_in_the_page_answers_with_its_panes(client):
    """The lesson pane's links (next, previous, the steps, apply for me, start again) are
    followed with htmx: the answer is every pane out-of-band — the toolbar's target and the
    page title included — and the step event of the new state; the page stays."""
    page = html(client.get(f"/lessons/{L1}?step=1"))
    for link in ("lesson-next", "lesson-prev", "apply-for-me"):
        tag = re.search(rf'<a [^>]*id="{link}"[^>]*>', page).group(0)
        assert "data-nav" in tag and 'hx-push-url="true"' in tag, link
    r = client.get(f"/lessons/{L1}?step=2", headers=HX)
    assert r.status_code == 200
    part = html(r)
    assert "<html" not in part
    for pane in ("lesson-pane", "program-pane", "diagram-pane", "toolbar", "lesson-topbar",
                 "lesson-config"):
        assert re.search(rf'id="{pane}"[^>]*hx-swap-oob="true"', part, re.S), pane
    config = re.search(r'<div id="lesson-config"[^>]*>', part, re.S).group(0)
    assert f'data-apply-url="/lessons/{L1}/apply?step=2"' in config
    assert "step 3 · Schedule Explorer" in config      # the page title (steps count from 1)
    assert "Step 3 of 6" in part
    step = json.loads(r.headers["HX-Trigger"])["explorer:step"]
    assert step["measure"].startswith("/explore/mm_relu/measure?")
    # the same address asked without htmx (a reload, a shared link) is the whole page
    assert "<html" in html(client.get(f"/lessons/{L1}?step=2"))


def test_a_right_step_moves_the_toolbar_to_the_next_step(client):
    """Once the learner's step matches, the toolbar's next click is checked against the
    lesson's next step: the answer carries the new target (out-of-band)."""
    r = _try_split(client, "None, 4")
    config = re.search(r'<div id="lesson-config"[^>]*>', html(r), re.S).group(0)
    assert f'data-apply-url="/lessons/{L1}/apply?step=2"' in config
    assert 'hx-swap-oob="true"' in config
