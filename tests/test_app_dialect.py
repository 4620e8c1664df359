"""The program pane's dialect toggle: dialect= in the link prints the program as Apache TVM
0.27 reads it; the choice survives applying a step (the forms carry it), undo links and the
program export; a bad dialect is a 400 with a sentence."""
from __future__ import annotations

import html as html_lib

import engine
from inline_service import HX, state_of


def _text(resp) -> str:
    return html_lib.unescape(resp.get_data(as_text=True))


def test_toggle_links_switch_the_printed_dialect(client):
    page = _text(client.get("/explore/mm_relu?n=16"))
    assert 'with T.block("Y")' in page and "T.sblock" not in page
    assert 'data-dialect="tvm-0.27"' in page
    page = _text(client.get("/explore/mm_relu?n=16&dialect=tvm-0.27"))
    assert 'with T.sblock("Y")' in page and "T.sblock_alloc_buffer" in page
    assert 'with T.block("Y")' not in page
    # the other button goes back to the course's spelling
    assert 'href="/explore/mm_relu?n=16" class="button small secondary"' in page


def test_the_dialect_survives_a_step_and_the_export(client):
    data = {"n": "16", "at": "0", "dialect": "tvm-0.27", "sel": "L/mm_relu/1/Y",
            "primitive": "split", "factors": "None, 4"}
    r = client.post("/explore/mm_relu/apply", data=data, headers=HX)
    assert r.status_code == 200, _text(r)
    url = r.headers["HX-Push-Url"]
    q = state_of(url)
    assert q["dialect"] == "tvm-0.27" and q["t"]
    assert "T.sblock" in _text(r)
    exp = client.get(url.replace("/explore/mm_relu?", "/explore/mm_relu/export/program?"))
    assert exp.status_code == 200
    assert "program-tvm-0.27" in exp.headers["Content-Disposition"]
    text = exp.get_data(as_text=True)
    assert text.startswith("# from tvm.script import ir as I") and "j_1" in text
    # the exported text is the page's program: it parses back to the same schedule
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=16))
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(j, [None, 4])
    assert engine.structural_equal(engine.parse(text), sch.mod)
    course = client.get(f"/explore/mm_relu/export/program?n=16&t={q['t']}")
    assert 'with T.block("Y")' in course.get_data(as_text=True)


def test_a_bad_dialect_is_refused_with_a_sentence(client):
    r = client.get("/explore/mm_relu?n=16&dialect=tvm-9")
    assert r.status_code == 400
    assert "dialect= must be one of course-2022, tvm-0.27" in _text(r)
