"""TVMScript read with values from outside the text and with nested annotation values:

* a ``@T.prim_func`` may name a plain constant of its Python surroundings (a closure's
  variable, a module's variable): a dtype, a number, a shape, a constant IntImm; nothing is
  evaluated, anything else stays an undefined name;
* annotation values may be lists and dicts (``{"arr": [0, 0], "key": 3}``): parsed, printed,
  compared, recorded by ``sch.annotate`` and replayed from the trace's JSON and Python.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from engine.ir import AttrMap, structural_equal, structural_hash
from engine.schedule.python_trace import apply_python_trace
from engine.script import ScriptError
from engine.script import tir as T

MODULE_SIZE = 6


def make_copy(dtype, scale):
    @T.prim_func
    def copy(A: T.Buffer((MODULE_SIZE,), "float32"), B: T.Buffer((MODULE_SIZE,), "float32")):
        C = T.alloc_buffer((MODULE_SIZE,), dtype)
        for i in range(MODULE_SIZE):
            with T.block("C"):
                vi = T.axis.spatial(MODULE_SIZE, i)
                C[vi] = T.Cast(dtype, A[vi] * scale)
        for i in range(MODULE_SIZE):
            with T.block("B"):
                vi = T.axis.spatial(MODULE_SIZE, i)
                B[vi] = T.Cast("float32", C[vi])
    return copy


def test_closure_dtype_and_number_and_module_constant():
    f = make_copy("int32", 3)
    (c,) = [b for b in f.body.block.alloc_buffers]
    assert c.dtype == "int32" and [int(s) for s in c.shape] == [MODULE_SIZE]
    a = np.arange(MODULE_SIZE, dtype="float32") - 2.5
    b = np.zeros(MODULE_SIZE, dtype="float32")
    engine.interpret(f, "copy", a, b)
    np.testing.assert_array_equal(b, np.trunc(a * 3))
    b2 = np.zeros(MODULE_SIZE, dtype="float32")
    engine.build(f)["copy"](a, b2)
    np.testing.assert_array_equal(b2, b)
    assert make_copy("int8", 3).body.block.alloc_buffers[0].dtype == "int8"


def test_closure_shape_and_intimm():
    shape = (2, 3)
    fill = engine.ir.IntImm("int32", 7)

    @T.prim_func
    def f(A: T.Buffer((2, 3), "int32")):
        for i, j in T.grid(2, 3):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads()
                T.writes(A[vi, vj])
                B = T.alloc_buffer(shape, "int32")
                B[vi, vj] = fill
                A[vi, vj] = B[vi, vj] + vi

    a = np.zeros((2, 3), "int32")
    engine.interpret(f, "f", a)
    np.testing.assert_array_equal(a, 7 + np.arange(2)[:, None] + np.zeros((2, 3), "int32"))


def test_a_closure_value_that_is_not_a_constant_stays_undefined():
    table = {"a": 1}

    with pytest.raises(ScriptError, match="undefined name 'table'"):
        @T.prim_func
        def f(A: T.Buffer((2,), "float32")):
            for i in range(2):
                with T.block("A"):
                    vi = T.axis.spatial(2, i)
                    A[vi] = table


def test_the_text_wins_over_a_captured_name():
    n = 99  # noqa: F841 - shadowed by the loop variable below

    @T.prim_func
    def f(A: T.Buffer((4,), "int32")):
        for n in range(4):
            with T.block("A"):
                vn = T.axis.spatial(4, n)
                A[vn] = vn

    a = np.zeros(4, "int32")
    engine.interpret(f, "f", a)
    np.testing.assert_array_equal(a, np.arange(4))


NESTED = '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in T.serial(4, annotations={"a": {"arr": [0, 0], "key": 3}, "b": ["aa", 1]}):
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.block_attr({"deep": {"x": {"y": [1, {"z": "w"}]}}})
                B[vi, vj] = A[vi, vj]
'''


def test_nested_annotation_values_parse_print_and_compare():
    mod = engine.parse(NESTED)
    loop = mod["f"].body.block.body
    anns = dict(loop.annotations)
    assert isinstance(anns["a"], AttrMap) and anns["a"]["arr"] == (0, 0) and \
        anns["a"]["key"] == 3
    assert anns["b"] == ("aa", 1)
    text = mod.script()
    assert '{"arr": [0, 0], "key": 3}' in text and '["aa", 1]' in text
    again = engine.parse(text)
    assert structural_equal(again, mod)
    assert structural_hash(again) == structural_hash(mod)
    # a dict is not a list of pairs, a different value is different
    other = engine.parse(NESTED.replace('"key": 3', '"key": 4'))
    assert not structural_equal(other, mod)
    listed = engine.parse(NESTED.replace('{"arr": [0, 0], "key": 3}', '[["arr", [0, 0]], ["key", 3]]'))
    assert not structural_equal(listed, mod)
    assert structural_hash(listed) != structural_hash(mod)
    # key order does not matter (TVM's Map)
    swapped = engine.parse(NESTED.replace('{"arr": [0, 0], "key": 3}', '{"key": 3, "arr": [0, 0]}'))
    assert structural_equal(swapped, mod) and structural_hash(swapped) == structural_hash(mod)


def test_duplicate_keys_are_refused():
    with pytest.raises(ScriptError, match="appears twice"):
        engine.parse(NESTED.replace('{"arr": [0, 0], "key": 3}', '{"k": 1, "k": 2}'))


MM = '''
@T.prim_func
def mm(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
       C: T.Buffer((8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def _annotated():
    sch = engine.Schedule(engine.parse(MM))
    blk = sch.get_block("C")
    i, j, _ = sch.get_loops(blk)
    sch.annotate(i, "test3", ["aa", 1])
    sch.annotate(j, "test4", {"arr": [0, 0], "key": 3, "name": "x"})
    sch.annotate(blk, "test5", {"deep": {"v": [1.5, True]}})
    return sch


def test_annotate_with_lists_and_dicts_replays_from_json_and_python():
    sch = _annotated()
    func = sch.mod["mm"]
    loop = func.body.block.body
    assert dict(loop.annotations)["test3"] == ("aa", 1)
    assert dict(loop.body.annotations)["test4"] == AttrMap(
        {"arr": (0, 0), "key": 3, "name": "x"})
    # the engine's own document, through JSON text
    doc = json.loads(json.dumps(sch.trace.as_json()))
    again = engine.Schedule(engine.parse(MM))
    engine.Trace.from_json(doc).apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)
    # the Python exports, read back without running them
    for dialect in ("engine", "tvm", "course"):
        text = sch.trace.export(dialect)
        assert '{"arr": [0, 0], "key": 3, "name": "x"}' in text and '["aa", 1]' in text
    other = engine.Schedule(engine.parse(MM))
    apply_python_trace(sch.trace.export("tvm"), other)
    assert structural_equal(other.mod, sch.mod)
    # annotations change nothing of what is computed
    from semantics import assert_computes_exactly
    assert_computes_exactly(engine.parse(MM), sch.mod)


def test_annotation_values_that_are_not_plain_are_refused():
    sch = engine.Schedule(engine.parse(MM))
    (i, _, _) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(engine.ScheduleError, match="annotation values"):
        sch.annotate(i, "bad", {"k": object()})
    with pytest.raises(engine.ScheduleError, match="keys of an annotation dict"):
        sch.annotate(i, "bad", {1: 2})


def test_a_trace_with_a_block_where_a_value_belongs_is_refused():
    sch = _annotated()
    doc = sch.trace.as_json()
    for inst in doc["insts"]:
        if inst[0] == "Annotate":
            inst[1][1] = inst[1][0]     # the handle itself as the value
            break
    trace = engine.Trace.from_json(doc)    # a handle may be a value: a sampled one
    with pytest.raises(engine.TraceError, match="annotation values"):
        trace.apply_to_schedule(engine.Schedule(engine.parse(MM)))
    doc["insts"][-1][1][1] = "nowhere"     # a name no instruction defines
    with pytest.raises(engine.TraceError, match="no earlier instruction defines"):
        engine.Trace.from_json(doc)
