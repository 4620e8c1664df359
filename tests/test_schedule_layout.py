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
    with pytest.raises(IndexMapError, match="needs the number of dimensions"):
        normalize_index_map(lambda *a: a)
    # TVM's *args sugar: the variadic part takes the dimensions the others leave
    assert normalize_index_map(lambda *a, k: (*a, k // 4, k % 4), 3) == \
        "lambda a_0, a_1, k: (a_0, a_1, k // 4, k % 4)"
    assert normalize_index_map(lambda i, *rest: (*rest, i), 3) == \
        "lambda i, rest_0, rest_1: (rest_0, rest_1, i)"
    with pytest.raises(IndexMapError, match="one plain parameter"):
        normalize_index_map(lambda i, j=2: (i, j))


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


# ---------------------------------------------------------------------------
# TVM's rules and reach: padding, pad values, parameters (programs of this project)
# ---------------------------------------------------------------------------
from engine.schedule import ScheduleError  # noqa: E402
from semantics import run_compiled, run_interpreted  # noqa: E402
from test_schedule_layout_semantics import _image, to_layout  # noqa: E402

_CHAIN = """
@T.prim_func
def main(A: T.Buffer((10,), "{dt}"), C: T.Buffer((10,), "{dt}")):
    B = T.alloc_buffer((10,), "{dt}")
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + A[vi]
    for i in T.serial(10):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] * A[vi]
"""


def _chain(dtype="float32"):
    mod = engine.parse(_CHAIN.format(dt=dtype))
    return mod, Schedule(mod)


def _args(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-5, 6, tuple(p.const_shape())).astype(p.dtype) for p in func.params]


def _same(before, after, layouts=None, fill=None):
    """``after`` computes what ``before`` does (interpreted and compiled); ``layouts``:
    {parameter position: (index map, new shape)} for the parameters whose layout changed —
    their arrays are compared in the new layout, ``fill`` the padding's expected value
    (None: left as it was)."""
    layouts = layouts or {}
    args = _args(before["main"])
    want = run_interpreted(before, "main", args)
    new_args = [to_layout(a, *layouts[k], -9) if k in layouts else a
                for k, a in enumerate(args)]
    for got in (run_interpreted(after, "main", new_args),
                run_compiled(after, "main", new_args)):
        for k, (w, g) in enumerate(zip(want, got)):
            if k not in layouts:
                np.testing.assert_array_equal(g, w)
                continue
            image = _image(layouts[k][0], w.shape)
            np.testing.assert_array_equal(g[image], w.ravel())
            pad = np.ones(g.shape, bool)
            pad[image] = False
            np.testing.assert_array_equal(g[pad], -9 if fill is None else fill)


def test_padding_needs_a_pad_value():
    """TVM's rule (its test_error_if_padding_forbidden): a map that leaves room no element
    fills is refused without a pad_value — here 10 elements onto (3, 4)."""
    mod, sch = _chain()
    b = sch.get_block("B")
    e = _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)"),
                 "padding", "pad_value", "(3, 4)")
    assert str(e).endswith(".")
    sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)", pad_value=0.0)
    text = sch.mod.script()
    assert "B = T.alloc_buffer((3, 4))" in text
    # TVM's replacement: the writer traverses the new shape and stores the pad value there
    assert "for i_0, i_1 in T.grid(3, 4):" in text
    assert ("B[vi_0, vi_1] = T.if_then_else(vi_0 == 2 and 2 <= vi_1, T.float32(0), "
            "A[vi_0 * 4 + vi_1] + A[vi_0 * 4 + vi_1])") in text
    assert "padding" not in text
    _same(mod, sch.mod)
    assert_round_trips(sch, lambda: Schedule(mod))


def test_pad_value_must_have_the_buffer_type():
    """TVM's test_error_on_non_matching_types / _wrong_padding_type: a Python int fills an
    integer buffer, a float a floating-point one; an IR constant must have the buffer's
    dtype — checked whether or not the map pads."""
    from engine.tvm import tirx
    mod, sch = _chain()
    b = sch.get_block("B")
    for m in ("lambda i: (i // 4, i % 4)", "lambda i: (i // 5, i % 5)"):  # padded or not
        _refused(sch, lambda m=m: sch.transform_layout(b, "B", m, pad_value=0),
                 "B holds float32 but pad_value 0 is a Python int", "0.0")
    mod_i, sch_i = _chain("int32")
    bi = sch_i.get_block("B")
    _refused(sch_i, lambda: sch_i.transform_layout(bi, "B", "lambda i: (i // 4, i % 4)",
                                                   pad_value=0.5), "int32", "0.5")
    _refused(sch_i, lambda: sch_i.transform_layout(bi, "B", "lambda i: (i // 4, i % 4)",
                                                   pad_value=tirx.IntImm("int8", 0)),
             "int8", "int32")
    _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)",
                                               pad_value=float("nan")), "finite")
    sch_i.transform_layout(bi, "B", "lambda i: (i // 4, i % 4)",
                           pad_value=tirx.IntImm("int32", 5))
    assert "T.if_then_else(vi_0 == 2 and 2 <= vi_1, 5, " in sch_i.mod.script()
    _same(mod_i, sch_i.mod)


def test_assume_injective_transform():
    """TVM's flag: padding needs no pad_value and is not filled; the trace keeps the flag;
    a map found to send two elements to one place is still refused."""
    mod, sch = _chain()
    b = sch.get_block("B")
    _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 2,)",
                                               assume_injective_transform=True),
             "same place", "does not make a map one-to-one")
    sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)",
                         assume_injective_transform=True)
    assert "padding" not in sch.mod.script()
    assert sch.trace.as_json()["insts"][-1][2] == [0, 1, "lambda i: (i // 4, i % 4)", None,
                                                    True]
    assert "assume_injective_transform=True" in sch.trace.export("tvm")
    _same(mod, sch.mod)
    assert_round_trips(sch, lambda: Schedule(mod))


def test_transform_parameters_rewrites_the_signature():
    """TVM's test_two_elementwise_transform_input_buffer / _output_buffer: a parameter's
    buffer takes the new shape, and the caller passes arrays of the new layout."""
    mod = engine.parse(_CHAIN.format(dt="float32").replace("10", "12"))
    for buf, blk, pos in (("A", "B", 0), ("C", "C", 1)):
        sch = Schedule(mod)
        m = "lambda i: (i % 3, i // 3)"
        sch.transform_layout(blk, buf, m)
        func = sch.mod["main"]
        assert func.params[pos].const_shape() == (3, 4)
        assert func.params[1 - pos] is mod["main"].params[1 - pos]
        assert f"{buf}[vi % 3, vi // 3]" in sch.mod.script()
        _same(mod, sch.mod, {pos: (m, (3, 4))})
        assert_round_trips(sch, lambda: Schedule(mod))
    # matmul's output, read and written by a reduction, and its inputs, packed
    sch = fresh("matmul")
    c = sch.get_block("C")
    sch.transform_layout(c, ("read", 1), PACK)
    sch.transform_layout(c, ("write", 0), "lambda i, j: (j, i)")
    assert [p.const_shape() for p in sch.mod["matmul"].params] == [(16, 16), (4, 16, 4),
                                                                    (16, 16)]
    assert "C[vj, vi] = C[vj, vi] + A[vi, vk] * B[vj // 4, vk, vj % 4]" in sch.mod.script()


def test_padded_output_parameter_is_filled_and_padded_input_assumed():
    """An output's padding holds the pad value after the call (stored by its writer, TVM's
    replacement, or by TVM's epilogue block after the last write when the write is no loop
    nest); an input's is the caller's promise, TVM's first block of
    ``T.assume(not <padding> or A[...] == pad_value)``
    (test_padded_transform_of_input_creates_assumption): no code, the padding never read."""
    mod, sch = _chain("int32")
    b = sch.get_block("B")
    sch.transform_layout(b, "A", "lambda i: (i // 4, i % 4)", pad_value=42)
    assert "T.evaluate(T.assume(not (v0 == 2 and 2 <= v1) or A[v0, v1] == 42))" in \
        sch.mod.script()
    _same(mod, sch.mod, {0: ("lambda i: (i // 4, i % 4)", (3, 4))})
    mod, sch = _chain("int32")
    c = sch.get_block("C")
    sch.transform_layout(c, "C", "lambda i: (i // 4, i % 4)", pad_value=42)
    script = sch.mod.script()
    assert 'C: T.Buffer((3, 4), "int32")' in script
    assert "C[vi_0, vi_1] = T.if_then_else(vi_0 == 2 and 2 <= vi_1, 42, " in script
    _same(mod, sch.mod, {1: ("lambda i: (i // 4, i % 4)", (3, 4))}, fill=42)
    # a write outside any loop (TVM's test_padded_transform_without_loop)
    one = engine.parse("""
@T.prim_func
def main(A: T.Buffer((6,), "int32")):
    with T.block("first"):
        A[0] = 3
""")
    sch = Schedule(one)
    sch.transform_layout("first", "A", "lambda i: (i // 4, i % 4)", pad_value=-1)
    assert "T.where(ax0 == 1 and 2 <= ax1)" in sch.mod.script()
    out = np.zeros((2, 4), "int32")
    engine.interpret(sch.mod, "main", out)
    assert out.tolist() == [[3, 0, 0, 0], [0, 0, -1, -1]]


def test_pad_value_lambda_and_its_refusals():
    """TVM's test_padded_transform_non_constant_value: the pad value as a lambda over the
    new indices; test_pad_value_may_not_reference_other_buffer: it may not read a buffer."""
    from engine.ir.buffer import Buffer
    mod, sch = _chain("int32")
    b = sch.get_block("B")
    other = Buffer("other", (1,), "int32")
    _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)",
                                               pad_value=lambda i, j: other[0]),
             "reads another buffer, other")
    _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)",
                                               pad_value=lambda i: i), "takes 1 index(es)")
    _refused(sch, lambda: sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)",
                                               pad_value="x"), "must be a number")
    sch.transform_layout(b, "B", "lambda i: (i // 4, i % 4)", pad_value=lambda i, j: i + j)
    assert "T.if_then_else(vi_0 == 2 and 2 <= vi_1, vi_0 + vi_1, " in sch.mod.script()
    assert 'pad_value="lambda i, j: i + j"' in sch.trace.as_python()
    assert "pad_value=lambda i, j: i + j" in sch.trace.export("tvm")
    _same(mod, sch.mod)
    assert_round_trips(sch, lambda: Schedule(mod))
    # floats: index arithmetic is int32, so a lambda cannot fill a float32 buffer
    modf, schf = _chain()
    bf = schf.get_block("B")
    _refused(schf, lambda: schf.transform_layout(bf, "B", "lambda i: (i // 4, i % 4)",
                                                 pad_value="lambda i, j: i"), "int32")


def test_var_args_index_map():
    """TVM's test_var_args_sugar: ``*rest`` takes the dimensions the other parameters
    leave."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((2, 3, 8), "float32"), B: T.Buffer((2, 3, 8), "float32")):
    for i, j, k in T.grid(2, 3, 8):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(3)
""")
    sch = Schedule(mod)
    sch.transform_layout("B", "A", lambda *rest, k: [*rest, k // 4, k % 4])
    assert sch.mod["main"].params[0].const_shape() == (2, 3, 2, 4)
    assert "A[vi, vj, vk // 4, vk % 4]" in sch.mod.script()
    _same(mod, sch.mod, {0: ("lambda a, b, k: (a, b, k // 4, k % 4)", (2, 3, 2, 4))})


def test_int64_buffer_takes_int64_indices():
    """TVM's test_index_map_dtype_legalize: the map's variables and constants take the
    buffer's index dtype."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((T.int64(10),), "int32")):
    for i in T.serial(T.int64(10)):
        with T.block("block"):
            vi = T.axis.spatial(T.int64(10), i)
            A[vi] = T.Cast("int32", vi)
""")
    sch = Schedule(mod)
    sch.transform_layout("block", "A", lambda h: [h // 4, h % 4], pad_value=0)
    text = sch.mod.script()
    assert ('A[vi_0, vi_1] = T.if_then_else(vi_0 == T.int64(2) and T.int64(2) <= vi_1, 0, '
            'T.Cast("int32", vi_0 * T.int64(4) + vi_1))') in text
    assert "T.Buffer((T.int64(3), T.int64(4))" in text
    out = np.full((3, 4), 9, "int32")
    engine.interpret(sch.mod, "main", out)
    assert out.ravel().tolist() == list(range(10)) + [0, 0]
    built = np.full((3, 4), 9, "int32")
    engine.build(sch.mod)["main"](built)
    assert np.array_equal(out, built)


def test_parameters_of_a_function_relax_calls_are_not_transformed():
    """A Relax function of the module calls the TensorIR function with arrays of the old
    shapes: its parameters keep their layout (cache_read them instead)."""
    from relax_listings import MY_MODULE
    mod = engine.parse(MY_MODULE)
    sch = Schedule(mod, func_name="linear0")
    y = sch.get_block("Y")
    _refused(sch, lambda: sch.transform_layout(y, "W", "lambda i, k: (k, i)"),
             "Relax function main", "cache_read copy of W")
    sch.transform_layout(y, "Y", "lambda i, j: (j, i)")   # its own buffer: fine


def test_tvm_trace_with_a_pad_value_index_map():
    """TVM's JSON trace stores pad_value as an IndexMap (``lambda i, j: 0.0``): read as its
    constant; a lambda over the indices as the lambda."""
    mod, sch = _chain()
    sch.transform_layout(sch.get_block("B"), "B", "lambda i: (i // 4, i % 4)", pad_value=0.0)
    nodes = [{"type_key": ""},
             {"type_key": "tir.IndexMap", "attrs": {"initial_indices": "2",
                                                    "final_indices": "5"}},
             {"type_key": "Array", "data": [3, 4]},
             {"type_key": "tir.Var", "attrs": {"name": "i", "dtype": "int32"}},
             {"type_key": "tir.Var", "attrs": {"name": "j", "dtype": "int32"}},
             {"type_key": "Array", "data": [6]},
             {"type_key": "FloatImm", "attrs": {"dtype": "float32", "value": "0"}}]
    pad = json.dumps({"root": 1, "nodes": nodes})
    doc = [[["GetBlock", [], ["B", "main"], ["b0"]],
            ["TransformLayout", ["b0"], [0, 1, "lambda i: (i // 4, i % 4)", pad, False], []]],
           []]
    target = Schedule(mod)
    tr = Trace.from_json(doc)
    tr.apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)
    assert "pad_value=0.0" in tr.as_python()
    nodes[6] = {"type_key": "tir.Add", "attrs": {"a": "3", "b": "4"}}
    tr = Trace.from_json([[doc[0][0], ["TransformLayout", ["b0"], [
        0, 1, "lambda i: (i // 4, i % 4)", json.dumps({"root": 1, "nodes": nodes})], []]], []])
    assert 'pad_value="lambda i, j: i + j"' in tr.as_python()


def test_index_map_with_sampled_values():
    """TVM's test_transform_layout_with_sampling: a map reading sampled tile sizes takes
    their values (recorded as numbers in the trace)."""
    mod = engine.parse(_CHAIN.format(dt="float32").replace("10", "32"))
    sch = Schedule(mod, seed=3)
    b = sch.get_block("B")
    j0, j1, j2 = sch.sample_perfect_tile(sch.get_loops(b)[0], 3, decision=[2, 4, 4])
    sch.transform_layout(b, ("write", 0), lambda i: (i // (j1 * j2), i % (j1 * j2)))
    assert "B = T.alloc_buffer((2, 16))" in sch.mod.script()
    assert '"lambda i: (i // 16, i % 16)"' in sch.trace.as_python()
    assert_round_trips(sch, lambda: Schedule(mod, seed=3))
    _same(mod, sch.mod)
    sch.transform_block_layout(b, lambda i: (i // j2, i % j2))
    assert "for ax0, ax1 in T.grid(8, 4):" in sch.mod.script()


@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=2),
       cuts=st.lists(st.integers(2, 5), min_size=2, max_size=2), swap=st.booleans())
def test_padded_inverse_marks_exactly_the_padding(shape, cuts, swap):
    """invert_padded: a new index is padding exactly when some old index rebuilt from it
    lies past its axis (checked against the image of every old index)."""
    from engine.arith import bound_of
    from engine.schedule.primitives.index_map_inverse import invert_padded
    names = [f"x{d}" for d in range(len(shape))]
    outs = []
    for x, c in zip(names, cuts):
        outs += [f"{x} // {c}", f"{x} % {c}"]
    if swap:
        outs = outs[1:] + outs[:1]
    text = f"lambda {', '.join(names)}: ({', '.join(outs)})"
    params, exprs = parse_index_map(text)
    ranges = {p: (0, n - 1) for p, n in zip(params, shape)}
    new_shape = [bound_of(x, ranges)[1] + 1 for x in exprs]
    padded, build = invert_padded(params, exprs, list(shape), new_shape)
    new_vars = [E.Var(f"y{k}") for k in range(len(new_shape))]
    olds = build(new_vars)
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in new_shape], indexing="ij")
    env = dict(zip(new_vars, grids))
    pad = np.zeros(new_shape, bool)
    for o, n in zip(olds, shape):
        pad |= np.broadcast_to(_np_eval(o, env), new_shape) >= n
    image = np.zeros(new_shape, bool)
    image[_image(text, tuple(shape))] = True
    assert np.array_equal(pad, ~image)
