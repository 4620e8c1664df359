"""Notebook helpers: HTML views of modules/schedules and links into the explorer."""
import html
import re
from urllib.parse import parse_qs, urlparse

import pytest

import engine
from engine import notebook as nb


def _course_sch(n=32):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n), workload=("mm_relu", {"n": n}))
    b = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return sch


def _text_of(markup):
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_highlight_keeps_every_character_and_escapes():
    code = 'for i in T.grid(4):  # loop <b>\n    x = "a&b" + 1.5\n'
    out = nb.highlight(code)
    assert _text_of(out) == code
    assert "<b>" not in out.replace("<span", "").replace("</span>", "")
    assert 'style="color:#8959a8;font-weight:bold">for<' in out
    # text the tokenizer cannot handle is still shown, escaped
    broken = 'x = "unterminated <\n'
    assert _text_of(nb.highlight(broken)) == broken


def test_module_html_has_script_and_nest():
    mod = engine.workloads.get("mm_relu", n=32)
    out = nb.repr_html(mod)
    assert _text_of(out).count("def mm_relu") == 1
    assert "block <b>Y</b>" in out and "for <b>k</b> &times; 32" in out
    assert "<script" not in out


def test_schedule_html_has_trace_and_link():
    sch = _course_sch()
    sch.parallel(sch.get_loops(sch.get_block("Y", func_name="mm_relu"))[0])
    out = nb.repr_html(sch)
    text = _text_of(out)
    assert "sch.split(" in text and "sch.reorder(" in text
    assert "<i>parallel</i>" in out
    assert 'href="http://127.0.0.1:5000/explore/mm_relu?n=32&amp;t=' in out


def test_open_in_explorer_prints_a_link_that_replays(capsys):
    sch = _course_sch()
    link = nb.open_in_explorer(sch, base="http://localhost:8000/")
    assert capsys.readouterr().out.strip() == link
    u = urlparse(link)
    assert (u.scheme, u.netloc, u.path) == ("http", "localhost:8000", "/explore/mm_relu")
    q = parse_qs(u.query)
    assert q["n"] == ["32"]
    again = engine.Trace.decode(q["t"][0])
    sch2 = engine.Schedule(engine.workloads.get("mm_relu", n=32),
                           workload=("mm_relu", {"n": 32}))
    again.apply_to_schedule(sch2)
    assert engine.structural_equal(sch2.mod, sch.mod)


def test_link_without_steps_and_without_workload():
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=32), workload=("mm_relu", {"n": 32}))
    assert nb.explorer_link(sch) == "http://127.0.0.1:5000/explore/mm_relu?n=32"
    # a module from engine.workloads.get carries its workload
    own = engine.Schedule(engine.workloads.get("mm_relu", n=32))
    assert nb.explorer_link(own) == "http://127.0.0.1:5000/explore/mm_relu?n=32"
    bare = engine.Schedule(engine.parse(engine.workloads.get("mm_relu", n=32).script()))
    with pytest.raises(ValueError, match="does not know its workload"):
        nb.explorer_link(bare)
    assert "open in the explorer" not in nb.repr_html(bare)


def test_show_and_install():
    view = nb.show(engine.workloads.get("relu"))
    # without IPython, show() returns an object Jupyter would render
    if view is not None:
        assert "def relu" in _text_of(view._repr_html_())
    classes = [engine.IRModule, engine.PrimFunc, engine.Schedule]
    added = [c for c in classes if "_repr_html_" not in c.__dict__]
    try:
        nb.install()
        assert "def mm_relu" in _text_of(engine.workloads.get("mm_relu", n=16)._repr_html_())
        assert "sch.split(" in _text_of(_course_sch()._repr_html_())
    finally:
        for c in added:  # leave the classes as we found them
            if "_repr_html_" in c.__dict__:
                delattr(c, "_repr_html_")
