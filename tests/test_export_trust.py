"""Exports of shared links: a link is hostile input, and the Python an export writes must
hold only schedule calls, whatever values the trace in the link carries.

* the engine writes every value from a typed, checked value (a trace whose attributes have
  the wrong types is refused when it is read, and the writer refuses what it cannot write);
* the export route replays the trace as the page does first: a trace the page refuses
  gets the page's 400, never a file.
"""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.schedule import Trace, TraceError
from engine.schedule.instruction import Instruction
from export_safety import assert_safe_export
from inline_service import make_test_app
from test_schedule_primitives import _OPS, _random_step
from test_schedule_storage_random import _MINE, _my_step
from test_schedule_support import fresh, try_step

APP = make_test_app({"PREFETCH_MEASUREMENTS": False})
N = 16
ATTACK = "__import__('os').system('echo pwned')"
DIALECTS = ("python", "tvm", "course")
FORMAT = "schedule-explorer/trace"


def token(doc) -> str:
    text = json.dumps(doc, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def mm_relu_doc(*extra, params=None) -> dict:
    insts = [["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
             ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]], *extra]
    return {"format": FORMAT, "version": 1,
            "workload": {"name": "mm_relu", "params": params or {"n": N}}, "insts": insts}


def export(doc, fmt: str, at: int | None = None):
    q = {"n": str(N), "t": token(doc)}
    if at is not None:
        q["at"] = str(at)
    return APP.test_client().get(f"/explore/mm_relu/export/{fmt}", query_string=q)


def assert_no_download_with_code(r) -> None:
    """A refusal is an HTML page (no attachment); a download holds no injected code."""
    if r.status_code == 200:
        body = r.get_data(as_text=True)
        assert "__import__" not in body and "os.system" not in body
        if not r.headers["Content-Disposition"].endswith('.json"'):
            assert_safe_export(body)
    else:
        assert r.status_code == 400, r.status_code
        assert "Content-Disposition" not in r.headers
        assert r.mimetype == "text/html"


_CACHE_B = ["CacheRead", ["b0", []], [1, "global"], ["b4"]]
ATTACKS = {
    "rfactor factor_axis": mm_relu_doc(["RFactor", ["l3"], [ATTACK], ["b4"]]),
    "compute_at index": mm_relu_doc(
        ["GetBlock", [], ["C", "mm_relu"], ["b4"]], ["GetLoops", ["b4"], [], ["l5", "l6"]],
        ["ComputeAt", ["b0", "l5"], [False, ATTACK], []]),
    "transform_layout buffer index": mm_relu_doc(
        _CACHE_B, ["TransformLayout", ["b4"], [ATTACK, 1, "lambda k, j: (j, k)", None], []]),
    "transform_layout index map": mm_relu_doc(
        _CACHE_B, ["TransformLayout", ["b4"], [0, 1, f"lambda k, j: ({ATTACK}, j)", None], []]),
    "transform_layout pad_value": mm_relu_doc(
        _CACHE_B, ["TransformLayout", ["b4"], [0, 1, "lambda k, j: (j, k)", ATTACK], []]),
    "storage_align axis": mm_relu_doc(["StorageAlign", ["b0"], [0, ATTACK, 4, 0], []]),
    "cache_read buffer index": mm_relu_doc(["CacheRead", ["b0", []], [ATTACK, "global"],
                                            ["b4"]]),
    "workload parameter name": mm_relu_doc(["Split", ["l3", None, 4], [True, False],
                                            ["l4", "l5"]],
                                           params={"n": N, f"x={ATTACK},y": 1}),
}


@pytest.mark.parametrize("fmt", DIALECTS + ("json",))
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_links_download_no_code(name, fmt):
    assert_no_download_with_code(export(ATTACKS[name], fmt))


def test_rfactor_attack_is_refused_when_the_trace_is_read():
    with pytest.raises(TraceError, match="factor_axis"):
        Trace.from_json(ATTACKS["rfactor factor_axis"])
    r = export(ATTACKS["rfactor factor_axis"], "python")
    assert r.status_code == 400 and "factor_axis" in r.get_data(as_text=True)


def test_the_writer_refuses_values_it_cannot_write():
    """A trace built in Python (not read from a document) with a value of the wrong type
    is refused by the export, not written."""
    insts = [Instruction("GetBlock", (), ("Y", "mm_relu"), ("b0",)),
             Instruction("GetLoops", ("b0",), (), ("l1", "l2", "l3")),
             Instruction("RFactor", ("l3",), (ATTACK,), ("b4",))]
    for fmt in DIALECTS:
        with pytest.raises(TraceError, match="factor_axis"):
            Trace(insts, ("mm_relu", {"n": N})).export(fmt)
    nan = [*insts[:2], Instruction("Annotate", ("l1", float("nan")), ("k",), ())]
    with pytest.raises(TraceError, match="finite"):
        Trace(nan).export("python")


def test_workload_parameters_must_be_names_and_plain_values():
    with pytest.raises(TraceError, match="parameter"):
        Trace.from_json(ATTACKS["workload parameter name"])


@pytest.mark.parametrize("fmt", DIALECTS + ("json",))
def test_export_of_a_trace_the_page_refuses_is_the_pages_400(fmt):
    doc = mm_relu_doc(["Split", ["l3", None, 4], [True, False], ["l4", "l5"]],
                      ["RFactor", ["l5"], [7], ["b6"]])
    page = APP.test_client().get("/explore/mm_relu", query_string={"n": N, "t": token(doc)})
    assert page.status_code == 400
    r = export(doc, fmt)
    assert r.status_code == 400 and "Content-Disposition" not in r.headers
    body = r.get_data(as_text=True)
    assert "does not replay" in body and "factor_axis=7" in body
    # the steps before the refused one still export
    ok = export(doc, fmt, at=1)
    assert ok.status_code == 200 and "Content-Disposition" in ok.headers


def _tvm_map(k_name: str, a_of_div: str = "4") -> str:
    """TVM's IndexMap JSON of ``lambda k, j: (j // 4, k, j % 4)``, the first variable named
    ``k_name`` (a node may point at itself with ``a_of_div="6"``)."""
    var = {"dtype": "int32", "span": "0", "type_annotation": "0"}
    nodes = [{"type_key": ""},
             {"type_key": "tir.IndexMap", "attrs": {"final_indices": "5",
                                                    "initial_indices": "2"}},
             {"type_key": "Array", "data": [3, 4]},
             {"type_key": "tir.Var", "attrs": {**var, "name": k_name}},
             {"type_key": "tir.Var", "attrs": {**var, "name": "j"}},
             {"type_key": "Array", "data": [6, 3, 8]},
             {"type_key": "tir.FloorDiv", "attrs": {"a": a_of_div, "b": "7", "span": "0"}},
             {"type_key": "IntImm", "attrs": {"dtype": "int32", "span": "0", "value": "4"}},
             {"type_key": "tir.FloorMod", "attrs": {"a": "4", "b": "7", "span": "0"}}]
    return json.dumps({"root": 1, "nodes": nodes})


def _tvm_layout_doc(index_map: str) -> list:
    return [[["GetBlock", [], ["C", "matmul"], ["b0"]],
             ["CacheRead", ["b0", []], [1, "global"], ["b1"]],
             ["TransformLayout", ["b1"], [0, 1, index_map, None, False], []]], []]


def test_tvm_index_maps_are_written_from_the_parsed_map():
    good = Trace.from_json(_tvm_layout_doc(_tvm_map("k")))
    assert "index_map=lambda k, j: (j // 4, k, j % 4)" in good.export("tvm")
    for hostile in (f"{ATTACK}", "k): __import__('os'); (lambda k", "k, j"):
        with pytest.raises(TraceError, match="index_map"):
            Trace.from_json(_tvm_layout_doc(_tvm_map(hostile)))
    with pytest.raises(TraceError, match="index_map"):   # a node that refers to itself
        Trace.from_json(_tvm_layout_doc(_tvm_map("k", a_of_div="6")))


def test_a_step_after_the_cursor_that_cannot_be_written_does_not_break_the_page():
    """Undone steps are listed in the trace pane without being replayed."""
    doc = mm_relu_doc(["Split", ["l3", None, 4], [True, False], ["l4", "l5"]],
                      ["RFactor", [], [1], ["b6"]])
    q = {"n": N, "t": token(doc), "at": 1}
    assert APP.test_client().get("/explore/mm_relu", query_string=q).status_code == 200
    assert export(doc, "python", at=1).status_code == 200
    assert export(doc, "python").status_code == 400


# ------------------------------------------------------------------ property tests
WORKLOADS = ["mm_relu", "matmul", "sum", "softmax", "transpose"]
steps = st.lists(st.tuples(st.sampled_from(_MINE * 2 + _OPS + ["annotate"]),
                           st.tuples(st.integers(0, 50), st.integers(0, 50),
                                     st.integers(0, 50))), min_size=1, max_size=5)
ann_values = st.one_of(st.text(max_size=12), st.integers(-5, 10 ** 6), st.booleans(),
                       st.floats(allow_nan=False, allow_infinity=False))


def random_schedule(name, plan, draw_text, draw_value):
    sch = fresh(name)
    for op, picks in plan:
        if op == "annotate":
            blk = sch.get_block(sorted(b.name_hint for b in sch.index().all_blocks())[0])
            key, val = draw_text(), draw_value()
            try_step(sch, op, lambda: sch.annotate(blk, key or "k", val))
            continue
        step = _my_step(sch, op, picks) if op in _MINE else _random_step(sch, op, picks)
        try_step(sch, op, step)
    return sch


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=st.sampled_from(WORKLOADS), plan=steps, data=st.data())
def test_exports_of_random_legal_schedules_hold_only_schedule_calls(name, plan, data):
    sch = random_schedule(name, plan, lambda: data.draw(st.text(max_size=12)),
                          lambda: data.draw(ann_values))
    read_back = Trace.decode(sch.trace.encode())
    for fmt in DIALECTS:
        text = sch.trace.export(fmt)
        assert_safe_export(text)
        assert read_back.export(fmt) == text


ATTACKING = st.sampled_from([ATTACK, f"lambda k, j: ({ATTACK}, j)", "0) or (1"])
HOSTILE = st.one_of(
    ATTACKING, ATTACKING,
    st.sampled_from([ATTACK, f'"{ATTACK}"', '"\\"); import os; (\\""', "sch", "print",
                     "import", "__import__", "None", "l1", "b0", '"\\ud83d\\ude00"', "",
                     f"lambda i, j: ({ATTACK}, j)", "lambda i, j: (j, i)", "{}", "[1]",
                     "1; import os", "0) or (1"]),
    st.text(max_size=20), st.integers(), st.booleans(), st.none(),
    st.floats(), st.lists(st.one_of(st.text(max_size=6), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def corrupt(doc: dict, data) -> dict:
    """``doc`` with hostile values put into (or appended to) inputs, attrs and outputs."""
    doc = json.loads(json.dumps(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        inst = data.draw(st.sampled_from(doc["insts"]))
        part = data.draw(st.sampled_from([1, 2, 2, 3]))
        if inst[part] and data.draw(st.booleans()):
            inst[part][data.draw(st.integers(0, len(inst[part]) - 1))] = data.draw(HOSTILE)
        else:
            inst[part].append(data.draw(HOSTILE))
    if data.draw(st.integers(0, 5)) == 0:
        doc["workload"]["params"][data.draw(st.text(max_size=12))] = data.draw(HOSTILE)
    return doc


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=st.sampled_from(WORKLOADS), plan=steps, data=st.data())
def test_exports_of_hostile_traces_are_refused_or_hold_only_schedule_calls(name, plan, data):
    sch = random_schedule(name, plan, lambda: "k", lambda: 1)
    doc = corrupt(sch.trace.as_json(), data)
    # the writer alone, on a trace that was never checked when read
    raw = Trace([Instruction(k, tuple(i), tuple(a), tuple(o)) for k, i, a, o in doc["insts"]],
                (doc["workload"]["name"], doc["workload"]["params"]))
    assert_exports_refused_or_safe(raw, "unchecked")
    try:
        trace = Trace.from_json(doc)
    except TraceError:
        event("refused when read")
        return
    assert_exports_refused_or_safe(trace, "read")


def assert_exports_refused_or_safe(trace, how: str) -> None:
    for fmt in DIALECTS:
        try:
            text = trace.export(fmt)
        except TraceError:
            event(f"{how}: refused by the writer")
            continue
        event(f"{how}: exported")
        assert_safe_export(text)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=25)
@given(data=st.data())
def test_export_route_of_hostile_links_is_refused_or_safe(data):
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 0)
    doc = corrupt(sch.trace.as_json(), data)
    doc["workload"]["params"] = {"n": 16, **doc["workload"]["params"]}
    for fmt in DIALECTS + ("json",):
        assert_no_download_with_code(export(doc, fmt))


def test_an_export_names_only_handles_that_earlier_lines_define():
    """hypothesis found it: a hostile instruction nested in CacheRead's list of consumer
    blocks was written as a list of bare names ([GetBlock, [], [Y, mm_relu], [b0]])."""
    sch = fresh("mm_relu")
    sch.cache_read(sch.get_block("Y"), 0, "global")
    doc = sch.trace.as_json()
    doc["insts"][1][1][1] = ["GetBlock", [], ["Y", "mm_relu"], ["b0"]]
    raw = Trace([Instruction(k, tuple(i), tuple(a), tuple(o)) for k, i, a, o in doc["insts"]],
                (doc["workload"]["name"], doc["workload"]["params"]))
    for fmt in DIALECTS:
        with pytest.raises(TraceError, match="refers to 'GetBlock', which no earlier"):
            raw.export(fmt)
