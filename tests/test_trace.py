"""Traces: JSON / URL round trips, Python exports, TVM import, undo, and bad input."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace, TraceError, replay
from test_schedule_support import SMALL, apply_exported, fresh, run_and_check


def course(n=16):
    sch = Schedule(engine.workloads.get("mm_relu", n=n), workload=("mm_relu", {"n": n}))
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(block_Y, k)
    return sch


def rich(name="conv2d_relu"):
    """A longer schedule touching most primitives."""
    sch = fresh(name)
    conv = sch.get_block("conv")
    sch.compute_inline(sch.get_block("pad"))
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    ow0, ow1 = sch.split(ow, factors=[None, 4])
    sch.reorder(ci, kh, kw, ow1)
    sch.reverse_compute_at(sch.get_block("relu"), oh)
    sch.decompose_reduction(conv, ci)
    sch.parallel(co)
    sch.annotate(conv, "note", "inner \"quoted\" text")
    sch.unroll(kw)
    return sch


def test_json_document_shape():
    doc = course().trace.as_json()
    assert doc["format"] == "schedule-explorer/trace" and doc["version"] == 1
    assert doc["workload"] == {"name": "mm_relu", "params": {"n": 16}}
    assert doc["insts"][2] == ["Split", ["l2", None, 4], [True, False], ["l4", "l5"]]
    assert doc["insts"][0] == ["GetBlock", [], ["Y", "mm_relu"], ["b0"]]


@pytest.mark.parametrize("make", [course, rich])
def test_json_and_url_round_trips_replay_to_equal_modules(make):
    sch = make()
    text = json.dumps(sch.trace.as_json())
    for tr in (Trace.from_json(json.loads(text)), Trace.from_json(text),
               Trace.decode(sch.trace.encode()), Trace.from_json(sch.trace.export("json"))):
        assert tr == sch.trace
        name, params = sch.workload
        target = Schedule(engine.workloads.get(name, **params), workload=(name, params))
        tr.apply_to_schedule(target)
        assert structural_equal(target.mod, sch.mod)
        assert target.trace == sch.trace
    token = sch.trace.encode()
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("make", [course, rich])
def test_as_python_re_executes_to_equal_module(make):
    sch = make()
    name, params = sch.workload
    target = Schedule(engine.workloads.get(name, **params))
    exec(sch.trace.as_python(), {"sch": target})  # our own generated text
    assert structural_equal(target.mod, sch.mod)
    ns: dict = {}
    exec(sch.trace.as_python(header=True).replace("print(sch.mod.script())", ""), ns)
    assert structural_equal(ns["sch"].mod, sch.mod)


def test_truncate_is_undo():
    sch = course()
    full = sch.trace
    for k in range(len(full) + 1):
        part = full.truncate(k)
        assert part == full[:k] and len(part) == k
        s = fresh("mm_relu")
        part.apply_to_schedule(s)
        ref = fresh("mm_relu")
        for inst in full.insts[:k]:
            pass
        Trace(full.insts[:k], full.workload).apply_to_schedule(ref)
        assert structural_equal(s.mod, ref.mod)
    s = fresh("mm_relu")
    full[:4].apply_to_schedule(s)   # get_block, get_loops, split, reorder
    assert "for i, j_0, k, j_1 in T.grid(16, 4, 16, 4):" in s.mod.script()
    run_and_check(s.mod, "mm_relu", SMALL["mm_relu"])


TVM_COURSE = [[
    ["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
    ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
    ["Split", ["l2", "None", 4], [1, 0], ["l4", "l5"]],
    ["Reorder", ["l4", "l3", "l5"], [], []],
    ["GetBlock", [], ["C", "mm_relu"], ["b6"]],
    ["ReverseComputeAt", ["b6", "l4"], [0, -1], []],
    ["DecomposeReduction", ["b0", "l3"], [], ["b7"]],
], []]


def test_import_tvm_trace_list():
    tr = Trace.from_json(TVM_COURSE)
    s = fresh("mm_relu")
    tr.apply_to_schedule(s)
    assert structural_equal(s.mod, course().mod)
    sblock = json.loads(json.dumps(TVM_COURSE).replace('"GetBlock"', '"GetSBlock"'))
    s2 = fresh("mm_relu")
    Trace.from_json(sblock).apply_to_schedule(s2)
    assert structural_equal(s2.mod, s.mod)


@pytest.mark.parametrize("doc,msg", [
    ({"format": "schedule-explorer/trace", "version": 2, "insts": []}, "version"),
    ({"format": "other", "version": 1, "insts": []}, "format"),
    ({"format": "schedule-explorer/trace", "version": 1}, "insts"),
    ({"format": "schedule-explorer/trace", "version": 1, "insts": [["Bogus", [], [], []]]},
     "unknown instruction kind 'Bogus'"),
    ({"format": "schedule-explorer/trace", "version": 1, "insts": [["Split", ["l9", None, 4],
                                                                     [True], ["a", "b"]]]},
     "refers to 'l9'"),
    ({"format": "schedule-explorer/trace", "version": 1, "insts": [["Split", "x", [], []]]},
     "must be lists"),
    ({"format": "schedule-explorer/trace", "version": 1, "insts": [["Split"]]},
     r"\[kind, inputs, attrs, outputs\]"),
    ({"format": "schedule-explorer/trace", "version": 1, "workload": 3, "insts": []},
     "workload"),
    ("{not json", "not valid JSON"),
    (42, "must be a JSON object"),
    ([[["Split", [], [], []]], [[0, 4]]], "samples nothing"),
])
def test_malformed_documents(doc, msg):
    with pytest.raises(TraceError, match=msg):
        Trace.from_json(doc)


def test_trace_error_is_value_error_and_damaged_token():
    assert issubclass(TraceError, ValueError)
    with pytest.raises(TraceError, match="damaged|letters"):
        Trace.decode("!!!")
    with pytest.raises(TraceError):
        Trace.decode("abc")
    tok = course().trace.encode()
    with pytest.raises(TraceError):
        Trace.decode(tok[:-7])


def test_tokens_are_deflated_and_links_of_the_first_format_still_open():
    import base64
    import zlib
    from engine.schedule.recorded_trace import MAX_TOKEN_JSON_BYTES
    trace = course().trace
    tok = trace.encode()
    plain = base64.urlsafe_b64encode(
        json.dumps(trace.as_json(), separators=(",", ":")).encode()).decode().rstrip("=")
    assert tok.startswith("z") and len(tok) < 0.7 * len(plain)   # shorter links
    assert Trace.decode(tok).as_json() == trace.as_json()
    assert Trace.decode(plain).as_json() == trace.as_json()   # a link shared before
    # a few kilobytes that would inflate to megabytes are refused, not inflated
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = packer.compress(b" " * (4 * MAX_TOKEN_JSON_BYTES)) + packer.flush()
    bomb_tok = "z" + base64.urlsafe_b64encode(bomb).decode().rstrip("=")
    assert len(bomb_tok) < 6000
    with pytest.raises(TraceError, match="inflates to more than"):
        Trace.decode(bomb_tok)
    for cut in (tok[:-3], "z", "zAAAA"):
        with pytest.raises(TraceError, match="damaged"):
            Trace.decode(cut)


def test_nothing_applied_half_way():
    sch = course()
    doc = sch.trace.as_json()
    doc["insts"].append(["Split", ["l1", None, 0], [True, False], ["l8", "l9"]])
    bad = Trace.from_json(doc)
    target = fresh("mm_relu")
    mod, n = target.mod, len(target.trace)
    with pytest.raises(TraceError, match="instruction 8 .*cannot be replayed.*positive integer"):
        bad.apply_to_schedule(target)
    assert target.mod is mod and len(target.trace) == n


def test_other_workload_is_refused():
    tr = course().trace
    target = fresh("matmul")
    mod = target.mod
    with pytest.raises(TraceError, match="recorded on workload 'mm_relu'"):
        tr.apply_to_schedule(target)
    assert target.mod is mod
    # a module from engine.workloads.get names its workload, so the refusal is the same
    with pytest.raises(TraceError, match="recorded on workload 'mm_relu'"):
        tr.apply_to_schedule(Schedule(engine.workloads.get("matmul", n=16)))
    # without metadata on the schedule (a parsed program) the replay is attempted, and
    # fails cleanly
    anon = Schedule(engine.parse(engine.workloads.get("matmul", n=16).script()))
    with pytest.raises(TraceError, match="instruction 1 .*no function of that name"):
        tr.apply_to_schedule(anon)


def test_replay_convenience():
    sch = course()
    for t in (sch.trace, sch.trace.as_json(), sch.trace.encode(),
              json.dumps(sch.trace.as_json())):
        s = replay("mm_relu", {"n": 16}, t)
        assert structural_equal(s.mod, sch.mod)
        assert s.workload == ("mm_relu", {"n": 16})


def test_exports_are_python_and_unknown_format():
    sch = rich()
    for fmt in ("tvm", "course", "python", "json"):
        out = sch.trace.export(fmt)
        if fmt == "json":
            json.loads(out)
        else:
            compile(out, fmt, "exec")
    assert 'sch.annotate(block_or_loop=b0, ann_key="note", ann_val="inner \\"quoted\\" text")' \
        in sch.trace.export("tvm")
    with pytest.raises(TraceError, match="unknown export format"):
        sch.trace.export("yaml")


def test_queries_recorded_and_handles_named():
    sch = fresh("softmax")
    b = sch.get_block("T_softmax_exp")
    prods = sch.get_producers(b)
    cons = sch.get_consumers(b)
    assert [sch.get(p).name_hint for p in prods] == ["T_softmax_maxelem"]
    assert [sch.get(c).name_hint for c in cons] == ["T_softmax_expsum", "T_softmax_norm"]
    kids = sch.get_child_blocks(sch.get_loops(b)[0])
    assert [sch.get(x).name_hint for x in kids] == ["T_softmax_exp"]
    kinds = [i.kind for i in sch.trace]
    assert kinds == ["GetBlock", "GetProducers", "GetConsumers", "GetLoops", "GetChildBlocks"]
    assert sch.trace.as_python().splitlines()[1] == "(b1,) = sch.get_producers(b0)"


def test_get_block_errors():
    sch = fresh("mm_relu")
    with pytest.raises(ScheduleError, match=r"no block named .Z.\. Its blocks are: Y, C"):
        sch.get_block("Z")
    with pytest.raises(ScheduleError, match="no function named|has no function"):
        sch.get_block("Y", func_name="nope")
    assert len(sch.trace) == 0


@pytest.mark.parametrize("dialect", ["tvm", "course"])
@pytest.mark.parametrize("make", [course, rich])
def test_tvm_exports_run_against_our_tvm_compatible_api(dialect, make, monkeypatch):
    """The exported TVM code uses TVM's method and keyword names; ours are the same, so
    running it (with stand-in ``tvm`` modules) on our Schedule rebuilds the program."""
    sch = make()
    name, params = sch.workload
    target = apply_exported(sch.trace.export(dialect),
                            Schedule(engine.workloads.get(name, **params)), monkeypatch)
    assert structural_equal(target.mod, sch.mod)


def test_enter_postproc_and_preserve_unit_loops_round_trip():
    sch = fresh("mm_relu")
    c_loops = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("Y"), c_loops[1], preserve_unit_loops=True)
    sch.enter_postproc()
    assert "for ax0, ax1, ax2 in T.grid(1, 1, 16):" in sch.mod.script()
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    assert "sch.compute_at(b3, l2, preserve_unit_loops=True)" in sch.trace.as_python()
    again = fresh("mm_relu")
    Trace.decode(sch.trace.encode()).apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 200), st.floats(-2, 2),
                  st.sampled_from(["l1", "l4", "b0", "b99", '"x"', "None", "", "Split",
                                   "GetBlock", "Y", "mm_relu"]),
                  st.lists(st.integers(-1, 5), max_size=3))


@given(data=st.data())
def test_mutated_documents_fail_cleanly_or_replay(data):
    """Any corruption of a valid trace either replays or raises TraceError, and a
    failed replay leaves the schedule exactly as it was."""
    doc = json.loads(json.dumps(course().trace.as_json()))
    for _ in range(data.draw(st.integers(1, 3))):
        inst = data.draw(st.sampled_from(doc["insts"]))
        part = data.draw(st.integers(0, 3))
        if part == 0:
            inst[0] = data.draw(st.sampled_from(["Split", "Fuse", "Reorder", "Parallel",
                                                 "GetLoops", "Bogus", "ComputeAt"]))
        elif isinstance(inst[part], list):
            if inst[part] and data.draw(st.booleans()):
                i = data.draw(st.integers(0, len(inst[part]) - 1))
                inst[part][i] = data.draw(_JUNK)
            else:
                inst[part].append(data.draw(_JUNK))
    target = fresh("mm_relu")
    mod, n = target.mod, len(target.trace)
    try:
        Trace.from_json(doc).apply_to_schedule(target)
    except TraceError as e:
        assert str(e)
        assert target.mod is mod and len(target.trace) == n
    else:
        run_and_check(target.mod, "mm_relu", SMALL["mm_relu"])


def test_small_tvm_api_same_as_from_expr_and_te_var():
    """TVM's ``same_as`` (identity), ``IRModule.from_expr`` (one function named main) and
    ``te.var`` (a free scalar variable)."""
    import engine
    from engine import te
    mod = engine.workloads.get("mm_relu", n=16)
    func = mod["mm_relu"]
    assert func.same_as(func) and not func.same_as(engine.workloads.get("mm_relu", n=16)
                                                  ["mm_relu"])
    main = engine.IRModule.from_expr(func)
    assert main.names() == ["main"] and dict(main["main"].attrs)["global_symbol"] == "main"
    n = te.var("n")
    assert n.name == "n" and n.dtype == "int32" and te.var("m", "int64").dtype == "int64"
