"""transform_layout: packing matmul's B cache, transforming intermediates, index-map parsing
(ast only), refusals, and traces (JSON, Python, TVM IndexMap JSON)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine.ir import expr as E
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace
from engine.schedule.primitives.layout import (IndexMapError, _np_eval, map_text,
                                               normalize_index_map, parse_index_map)
from test_schedule_support import (SMALL, apply_exported, assert_round_trips, fresh,
                                   run_and_check)
from test_schedule_support import refused as _refused

PACK = "lambda k, j: (j // 4, k, j % 4)"


def _packed(n=16):
    P = {"n": n}
    sch = Schedule(engine.workloads.get("matmul", **P), workload=("matmul", P))
    c = sch.get_block("C")
    bg = sch.cache_read(c, 1, "global")
    sch.transform_layout(bg, ("write", 0), PACK)
    return sch, c, bg


def test_pack_b_cache_prints_like_tvm_and_runs():
    sch, c, bg = _packed()
    text = sch.mod.script()
    assert "B_global = T.alloc_buffer((4, 16, 4))" in text
    assert "B_global[v1 // 4, v0, v1 % 4] = B[v0, v1]" in text
    assert "T.writes(B_global[v1 // 4, v0, v1 % 4])" in text
    assert "A[vi, vk] * B_global[vj // 4, vk, vj % 4]" in text
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    assert structural_equal(engine.parse(text), sch.mod)


def test_pack_b_then_compute_at_the_tile_loop():
    """The fast-matmul packing: B_global[j_0] holds the k x 4 panel the tile needs."""
    sch, c, bg = _packed()
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, i, k, j1)
    sch.compute_at(bg, j0)
    sch.vectorize(j1)
    text = sch.mod.script()
    assert "for j_0 in T.serial(4):" in text
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    # and with the micro-kernel of the storage tests on top
    sch2, c2, bg2 = _packed()
    i, j, k = sch2.get_loops(c2)
    i0, i1 = sch2.split(i, [None, 4])
    j0, j1 = sch2.split(j, [None, 4])
    sch2.reorder(j0, i0, k, i1, j1)
    sch2.compute_at(bg2, j0)
    wb = sch2.cache_write(c2, 0, "local")
    sch2.reverse_compute_at(wb, i0)
    sch2.decompose_reduction(c2, k)
    sch2.vectorize(j1)
    run_and_check(sch2.mod, "matmul", SMALL["matmul"])


def test_intermediate_buffer_and_callable_map():
    a = fresh("mm_relu")
    a.transform_layout(a.get_block("Y"), "Y", lambda i, j: (j, i))
    b = fresh("mm_relu")
    b.transform_layout(b.get_block("C"), ("read", 0), "lambda i,j:(j,i)")
    assert structural_equal(a.mod, b.mod)
    assert a.trace.as_json()["insts"][1][2] == [0, 1, "lambda i, j: (j, i)", None]
    assert "Y[vj, vi] = Y[vj, vi] + A[vi, vk] * B[vk, vj]" in a.mod.script()
    run_and_check(a.mod, "mm_relu", SMALL["mm_relu"])


def test_padding_and_non_point_regions():
    P = {"m": 4, "n": 10}
    sch = Schedule(engine.workloads.get("softmax", **P), workload=("softmax", P))
    ex = sch.get_block("T_softmax_exp")
    sch.transform_layout(ex, ("write", 0), "lambda i, j: (i, j // 4, j % 4)", pad_value=0.0)
    assert "T_softmax_exp = T.alloc_buffer((4, 3, 4))" in sch.mod.script()
    run_and_check(sch.mod, "softmax", P)
    # a copy stage computed at a loop has a box region; it is mapped too
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    cw = sch.cache_write(y, 0, "global")
    sch.transform_layout(cw, ("read", 0), "lambda i, j: (i // 2, j, i % 2)")
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])


def test_refusals():
    sch = fresh("matmul")
    c = sch.get_block("C")
    e = _refused(sch, lambda: sch.transform_layout(c, ("read", 1), PACK),
                 "parameter of the function", "irst cache_read B, then transform the cache")
    assert "C" in e.highlight
    bg = sch.cache_read(c, 1, "global")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 0), "lambda i, j: (i // 2, j)"),
             "sends two elements", "one-to-one")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 0), "lambda i: (i,)"),
             "takes 1 index(es) but B_global has 2")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 0), "lambda i, j: (i - 1, j)"),
             "can be negative")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 0), "lambda i, j: (i // 0, j)"),
             "divides by zero")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 1), PACK), "buffer=1")
    _refused(sch, lambda: sch.transform_layout(bg, ("rw", 0), PACK), "(\"read\", n)")
    _refused(sch, lambda: sch.transform_layout(bg, "Z", PACK), "no", "'Z'")
    _refused(sch, lambda: sch.transform_layout(bg, ("write", 0), PACK, pad_value="x"),
             "pad_value must be a number")
    for bad, why in [("__import__('os').system('true')", "must be a lambda"),
                     ("lambda i, j: (__import__('os'), j)", "not allowed"),
                     ("lambda i, j: (k, j)", "unknown name 'k'"),
                     ("lambda i, j: (i ** 2, j)", "operator Pow"),
                     ("lambda i, j: (i.real, j)", "Attribute"),
                     ("lambda i, *j: (i,)", "plain parameters"),
                     ("lambda i, j: (i, j", "not valid Python"),
                     (42, "lambda")]:
        _refused(sch, lambda bad=bad: sch.transform_layout(bg, ("write", 0), bad), why)


_OPS = [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod]


@st.composite
def _exprs(draw, params, depth=3):
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return draw(st.sampled_from(params))
        return E.const(draw(st.integers(-5, 9)), "int32")
    op = draw(st.sampled_from(_OPS))
    a = draw(_exprs(params, depth - 1))
    b = draw(_exprs(params, depth - 1))
    if op in (E.FloorDiv, E.FloorMod):
        b = E.const(draw(st.integers(1, 7)), "int32")
    return op(a, b)


@given(data=st.data())
def test_index_map_text_round_trip(data):
    params = [E.Var("i", "int32"), E.Var("j", "int32")]
    exprs = data.draw(st.lists(_exprs(params), min_size=1, max_size=3))
    text = map_text(params, exprs)
    p2, e2 = parse_index_map(text)
    assert map_text(p2, e2) == text
    env = {p: np.arange(-3, 4, dtype=np.int64) for p in params}
    env2 = {p: env[q] for p, q in zip(p2, params)}
    for a, b in zip(exprs, e2):
        assert np.array_equal(np.broadcast_to(_np_eval(a, env), (7,)),
                              np.broadcast_to(_np_eval(b, env2), (7,)))
    assert normalize_index_map(text) == text


def test_normalize_callable_and_errors():
    assert normalize_index_map(lambda i, j: (j // 16, i, j % 16)) == \
        "lambda i, j: (j // 16, i, j % 16)"
    assert normalize_index_map("lambda i: i + 1") == "lambda i: (i + 1,)"
    assert normalize_index_map("lambda i, j: ((i - 1) - (j - 2), -3 * i)") == \
        "lambda i, j: (i - 1 - (j - 2), -3 * i)"
    with pytest.raises(IndexMapError, match="not an index expression"):
        normalize_index_map(lambda i: ("x",))
    with pytest.raises(IndexMapError, match="one plain parameter"):
        normalize_index_map(lambda *a: a)


def _tvm_index_map_json():
    """``tvm.ir.save_json`` of ``IndexMap.from_func(lambda k, j: (j // 4, k, j % 4))``."""
    nodes = [
        {"type_key": ""},
        {"type_key": "tir.IndexMap", "attrs": {"final_indices": "5", "initial_indices": "2",
                                               "inverse_index_map": "0"}},
        {"type_key": "Array", "data": [3, 4]},
        {"type_key": "tir.Var", "attrs": {"dtype": "int32", "name": "k", "span": "0",
                                          "type_annotation": "0"}},
        {"type_key": "tir.Var", "attrs": {"dtype": "int32", "name": "j", "span": "0",
                                          "type_annotation": "0"}},
        {"type_key": "Array", "data": [6, 3, 8]},
        {"type_key": "tir.FloorDiv", "attrs": {"a": "4", "b": "7", "span": "0"}},
        {"type_key": "IntImm", "attrs": {"dtype": "int32", "span": "0", "value": "4"}},
        {"type_key": "tir.FloorMod", "attrs": {"a": "4", "b": "7", "span": "0"}},
    ]
    return json.dumps({"root": 1, "nodes": nodes, "b64ndarrays": [],
                       "attrs": {"tvm_version": "0.15.0"}})


def test_traces_and_tvm_import():
    sch, c, bg = _packed()
    doc = sch.trace.as_json()
    assert doc["insts"][-1] == ["TransformLayout", [doc["insts"][1][3][0]],
                                [0, 1, PACK, None], []]
    assert f'sch.transform_layout(b1, ("write", 0), "{PACK}")' in sch.trace.as_python()
    assert f'buffer=("write", 0), index_map={PACK}, pad_value=None' in sch.trace.export("tvm")
    assert_round_trips(sch, lambda: fresh("matmul"))
    ns: dict = {}
    exec("def f(sch, b1):\n    " + sch.trace.export("tvm").splitlines()[-1].strip(), ns)
    t2 = fresh("matmul")
    b1 = t2.cache_read(t2.get_block("C"), 1, "global")
    ns["f"](t2, b1)  # the TVM line passes a real lambda; our API accepts callables
    assert structural_equal(t2.mod, sch.mod)
    tvm_doc = [[["GetBlock", [], ["C", "matmul"], ["b0"]],
                ["CacheRead", ["b0", []], [1, "global"], ["b1"]],
                ["TransformLayout", ["b1"], [0, 1, _tvm_index_map_json(), None, False], []]],
               []]
    target = fresh("matmul")
    tr = Trace.from_json(tvm_doc)
    tr.apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)
    assert PACK in tr.as_python()
    run_and_check(target.mod, "matmul", SMALL["matmul"])


@given(data=st.data())
def test_separable_injectivity_check_agrees_with_enumeration(data):
    from engine.arith import bound_of
    from engine.schedule.primitives.layout import _injective, _injective_enum
    params = [E.Var("i", "int32"), E.Var("j", "int32")]
    exprs = data.draw(st.lists(_exprs(params), min_size=1, max_size=3))
    shape = (data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5)))
    ranges = {p: (0, s - 1) for p, s in zip(params, shape)}
    new_shape = []
    for x in exprs:
        lo, hi = bound_of(x, ranges)
        if lo is None or hi is None or lo < 0:
            return
        new_shape.append(hi + 1)
    assert _injective(params, exprs, shape, tuple(new_shape)) == \
        _injective_enum(params, exprs, shape, tuple(new_shape))


@pytest.mark.parametrize("dialect", ["tvm", "course"])
def test_tvm_exports_with_layout_and_rfactor_rerun_on_our_api(dialect, monkeypatch):
    sch, c, bg = _packed()
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, factor_axis=0)
    text = sch.trace.export(dialect)
    assert ("pad_value=None" in text) == (dialect == "tvm")
    target = apply_exported(text, Schedule(engine.workloads.get("matmul", n=16)), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    run_and_check(target.mod, "matmul", SMALL["matmul"])


def test_tvm_ffi_index_map_json():
    """The tvm-ffi object-graph layout (``root_index``, plain values as their own nodes)."""
    from engine.schedule.primitives.layout import tvm_index_map_from_json
    nodes = [
        {"type": "tir.IndexMap", "data": {"initial_indices": 1, "final_indices": 6,
                                          "inverse_index_map": 11}},
        {"type": "ffi.Array", "data": [2, 4]},
        {"type": "tir.Var", "data": {"name": 3, "dtype": 12, "span": 11}},
        {"type": "ffi.String", "data": "k"},
        {"type": "tir.Var", "data": {"name": 5, "dtype": 12, "span": 11}},
        {"type": "ffi.String", "data": "j"},
        {"type": "ffi.Array", "data": [7, 2, 10]},
        {"type": "tir.FloorDiv", "data": {"a": 4, "b": 8, "span": 11}},
        {"type": "ir.IntImm", "data": {"dtype": 12, "value": 9, "span": 11}},
        {"type": "int", "data": 4},
        {"type": "tir.FloorMod", "data": {"a": 4, "b": 8, "span": 11}},
        {"type": "None"},
        {"type": "DataType", "data": "int32"},
    ]
    params, exprs = tvm_index_map_from_json(json.dumps({"root_index": 0, "nodes": nodes}))
    assert map_text(params, exprs) == PACK
    with pytest.raises(IndexMapError, match="not a TVM IndexMap"):
        tvm_index_map_from_json(json.dumps({"root_index": 1, "nodes": nodes}))
    with pytest.raises(IndexMapError, match="neither a lambda string"):
        tvm_index_map_from_json("{not json")
