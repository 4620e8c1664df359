"""Lesson files: loading, validation errors, markup, loop-nest summaries and patterns."""
import copy
import json

import pytest

from engine import lessons
from engine.lessons import LessonError, load, parse_lesson
from engine.lessons.actions import ActionError, action_python, validate_action
from engine.lessons.markup import to_html, to_text
from engine.script.nest import first_difference, match_nest, nest_lines

from test_te import te_mm_relu

MIN = {
    "format": "schedule-explorer/lesson", "version": 1, "id": "tiny",
    "title": "Tiny", "workload": {"name": "mm_relu", "params": {"n": 16}},
    "steps": [{"title": "Split", "text": "Split j.",
               "action": {"primitive": "split", "block": "Y", "loop": "j",
                          "factors": [None, 4]}}],
}


def _bad(mutate, match):
    doc = copy.deepcopy(MIN)
    mutate(doc)
    with pytest.raises(LessonError, match=match):
        parse_lesson(doc, "tiny.json")


def test_minimal_lesson_parses():
    les = parse_lesson(copy.deepcopy(MIN), "tiny.json")
    assert les.id == "tiny" and les.workload == "mm_relu" and les.params == {"n": 16}
    assert les.steps[0].look_at == "program"
    assert les.steps[0].code == "sch.split(j, factors=[None, 4])"


def test_shipped_lessons_load_in_order():
    ids = lessons.names()
    assert len(ids) >= 7
    assert ids[:7] == ["01_tensorir_mm_relu", "02_tiling_and_cache", "03_vectorize_parallel",
                       "04_fusion", "05_softmax_reductions", "06_packing", "07_rfactor"]
    for lid in ids:
        les = lessons.get(lid)
        assert les.title and les.steps
        d = les.to_dict()
        json.dumps(d)  # the web app serves it as JSON
        assert [s["index"] for s in d["steps"]] == list(range(len(les.steps)))
        assert all(s.look_at in lessons.LOOK_AT for s in les.steps)


def test_lesson1_follows_the_course():
    les = lessons.get("01_tensorir_mm_relu")
    prims = [s.action["primitive"] for s in les.steps if s.action]
    assert prims == ["split", "reorder", "reverse_compute_at", "decompose_reduction"]
    codes = [s.code for s in les.steps if s.action]
    assert codes[0] == "j0, j1 = sch.split(j, factors=[None, 4])"
    assert codes[1] == "sch.reorder(j0, k, j1)"


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.pop("id"), "id"),
    (lambda d: d.update(id="Bad Id"), "lower-case"),
    (lambda d: d.update(version=7), "unsupported lesson version 7"),
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(colour="red"), "unknown key 'colour'"),
    (lambda d: d.pop("title"), "title: must be text"),
    (lambda d: d.update(workload="mm_relu"), "workload"),
    (lambda d: d["workload"].update(params=[1]), "params"),
    (lambda d: d.update(steps=[]), "non-empty"),
    (lambda d: d["steps"][0].update(look_at="sideways"), r"steps\[0\].look_at"),
    (lambda d: d["steps"][0]["action"].update(primitive="twist"), "unknown primitive 'twist'"),
    (lambda d: d["steps"][0]["action"].update(factors=[None, None]), "at most one null"),
    (lambda d: d["steps"][0]["action"].update(factors=[0, 4]), "positive"),
    (lambda d: d["steps"][0]["action"].pop("loop"), "split needs 'loop'"),
    (lambda d: d["steps"][0]["action"].update(speed=3), "takes no argument 'speed'"),
    (lambda d: d["steps"][0].update(question={"text": "why?"}), "answer"),
    (lambda d: d["steps"][0].update(question={"text": "q", "answer": "c",
                                              "choices": ["a", "b"]}), "not one of the choices"),
    (lambda d: d["steps"][0].update(action=None), "at least one step with an action"),
    (lambda d: d["steps"][0].update(expect=3), "expect"),
    (lambda d: d["steps"].append("step two"), r"steps\[1\]"),
])
def test_malformed_lessons_are_refused_with_the_place(mutate, match):
    _bad(mutate, match)


def test_unknown_workload_is_named():
    _bad(lambda d: d["workload"].update(name="nope"), "unknown workload 'nope'")


def test_load_reports_json_errors_and_id_mismatch(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"id": "broken",\n "title": }')
    with pytest.raises(LessonError, match=r"broken.json: invalid JSON at line 2"):
        load(p)
    q = tmp_path / "other.json"
    q.write_text(json.dumps(MIN))
    with pytest.raises(LessonError, match="must match the file name"):
        load(q)
    with pytest.raises(LessonError, match="cannot read"):
        load(tmp_path / "missing.json")


def test_get_unknown_lesson_lists_available():
    with pytest.raises(LessonError, match="01_tensorir_mm_relu"):
        lessons.get("nope")


def test_step_numbers_are_checked():
    les = parse_lesson(copy.deepcopy(MIN), "tiny.json")
    with pytest.raises(LessonError, match="between 0 and 1"):
        les.schedule_at(5)
    with pytest.raises(LessonError, match="between 0 and 0"):
        les.check_step(1, None)


def test_actions_validation_and_python():
    validate_action({"primitive": "reorder", "loops": ["j0", "k", "j1"]})
    with pytest.raises(ActionError, match="non-empty list"):
        validate_action({"primitive": "reorder", "loops": []})
    with pytest.raises(ActionError, match="must be an object"):
        validate_action(["Split"])
    with pytest.raises(ActionError, match="a block name"):
        validate_action({"primitive": "compute_inline", "block": 3})
    assert action_python({"primitive": "reverse_compute_at", "block": "C", "loop": "j0"}) \
        == "sch.reverse_compute_at(block_C, j0)"
    assert action_python({"primitive": "cache_read", "block": "Y", "read_buffer_index": 1,
                          "storage_scope": "global", "outputs": ["B_g"]}) \
        == "B_g = sch.cache_read(block_Y, 1, 'global')"


def test_markup_is_escaped_and_light():
    h = to_html("Use `a<b` and **bold** and *em*.\n\n- one\n- two <script>")
    assert "<code>a&lt;b</code>" in h and "<strong>bold</strong>" in h and "<em>em</em>" in h
    assert "<ul><li>one</li><li>two &lt;script&gt;</li></ul>" in h
    assert "<script>" not in h
    assert to_text("**x** `y`") == "x y"
    assert to_html("```\na = 1\n```") == "<pre><code>a = 1</code></pre>"


def test_nest_lines_and_patterns():
    f = te_mm_relu(16)
    lines = nest_lines(f)
    assert [ln.strip() for ln in lines] == [
        "for i in serial(16)", "for j in serial(16)", "for k in serial(16)", "block Y",
        "for i in serial(16)", "for j in serial(16)", "block C"]
    assert lines[3] == "      block Y"
    assert match_nest(f, ["for * in serial(*)", "  for * in serial(*)", "    block C"])
    assert match_nest(f, "for k in serial(16)\n  block Y")
    assert not match_nest(f, ["for * in vectorized(*)"])
    assert not match_nest(f, ["for k in serial(16)", "block Y"])   # wrong depth
    assert match_nest(f, ["for i in *", "  ...", "      block Y"])
    with pytest.raises(ValueError, match="empty"):
        match_nest(f, [])


def test_first_difference():
    assert first_difference(["a", "  b"], ["a", "  b"]) is None
    assert "expected `b`" in first_difference(["a", "  b"], ["a", "  c"])
    assert "missing `b`" in first_difference(["a", "b"], ["a"])
    assert "extra `c`" in first_difference(["a"], ["a", "c"])


def test_unbound_loop_names_need_a_block():
    doc = copy.deepcopy(MIN)
    doc["steps"].append({"title": "r", "text": "r",
                         "action": {"primitive": "reorder", "loops": ["j0", "k"]}})
    with pytest.raises(LessonError, match=r"steps\[1\].action: loop 'j0' is not bound"):
        parse_lesson(doc, "tiny.json")
    doc["steps"][0]["action"]["outputs"] = ["j0", "j1"]
    with pytest.raises(LessonError, match="loop 'k' is not bound"):
        parse_lesson(doc, "tiny.json")
    doc["steps"][1]["action"]["block"] = "Y"
    parse_lesson(doc, "tiny.json")
