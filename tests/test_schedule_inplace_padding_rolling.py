"""cache_inplace, decompose_padding / can_decompose_padding and rolling_buffer: programs as
TVM 0.27 prints them, results against numpy (compiled and interpreted), refusals that leave
the schedule unchanged, and traces (JSON, URL, Python, TVM export and TVM JSON import)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace
from test_schedule_support import (SMALL, apply_exported, assert_round_trips, fresh, refused,
                                   run_and_check)

INPLACE = '''
@T.prim_func
def inplace(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("A"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] * T.float32(2)
'''

PAD1D = '''
@T.prim_func
def pad(x: T.Buffer((128,), "int32"), y: T.Buffer((140,), "int32")):
    for i in range(140):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            y[vi] = T.if_then_else(vi >= 6 and vi < 134, x[vi - 6], 0)
'''

POOL = '''
@T.prim_func
def pool(A: T.Buffer((N2, N2), "float32"), C: T.Buffer((N, N), "float32")):
    B = T.alloc_buffer((N1, N1))
    for i, j, ri, rj in T.grid(N1, N1, 3, 3):
        with T.block("B"):
            vi, vj, vri, vrj = T.axis.remap("SSRR", [i, j, ri, rj])
            with T.init():
                B[vi, vj] = T.float32(0)
            B[vi, vj] = B[vi, vj] + A[vi + vri, vj + vrj]
    for i, j, ri, rj in T.grid(N, N, 3, 3):
        with T.block("C"):
            vi, vj, vri, vrj = T.axis.remap("SSRR", [i, j, ri, rj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + B[vi + vri, vj + vrj]
'''


def _run(mod, name, *arrays):
    compiled = [a.copy() for a in arrays]
    engine.build(mod)[name](*compiled)
    interpreted = [a.copy() for a in arrays]
    engine.interpret(mod, name, *interpreted)
    for a, b in zip(compiled, interpreted):
        np.testing.assert_array_equal(a, b)
    return compiled


# ---------------------------------------------------------------------------- cache_inplace
def test_cache_inplace_prints_and_runs():
    sch = Schedule(engine.parse(INPLACE))
    read, write = sch.cache_inplace(sch.get_block("A"), 0, "local")
    text = sch.mod.script()
    assert 'A_local = T.alloc_buffer((8,), scope="local")' in text
    assert "A_local[vi] = A_local[vi] * T.float32(2)" in text
    assert "A_local[v0] = A[v0]" in text and "A[v0] = A_local[v0]" in text
    assert sch.get(read).name_hint == "A_local" and sch.get(write).name_hint == "A_local_1"
    a = np.arange(8, dtype="float32")
    (out,) = _run(sch.mod, "inplace", a)
    np.testing.assert_array_equal(out, a * 2)


def test_cache_inplace_on_the_update_of_a_decomposed_matmul():
    sch = fresh("matmul")
    c = sch.get_block("C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    sch.cache_inplace(c, "C", "local")
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    run_and_check(sch.mod, "matmul", SMALL["matmul"], use_build=False)
    assert_round_trips(sch, lambda: fresh("matmul"))


def test_cache_inplace_refusals_and_traces(monkeypatch):
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.cache_inplace(c, 0, "local"), "does not write it",
            "requirement 2")
    refused(sch, lambda: sch.cache_inplace(c, 0, "texture"), "unknown storage scope")
    sch = Schedule(engine.parse(INPLACE))
    sch.cache_inplace(sch.get_block("A"), 0, "local")
    doc = sch.trace.as_json()
    assert doc["insts"][-1] == ["CacheInplace", ["b0"], [0, "local"], ["b1", "b2"]]
    tvm = sch.trace.export("tvm")
    assert ('b1, b2 = sch.cache_inplace(block=b0, read_buffer_index=0, '
            'storage_scope="local")') in tvm
    assert_round_trips(sch, lambda: Schedule(engine.parse(INPLACE)))
    target = apply_exported(tvm, Schedule(engine.parse(INPLACE)), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    tvm_doc = [[["GetSBlock", [], ["A", "inplace"], ["b0"]],
                ["CacheInplace", ["b0"], [0, "local"], ["b1", "b2"]]], []]
    target = Schedule(engine.parse(INPLACE))
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


# ---------------------------------------------------------------------------- decompose_padding
def test_decompose_padding_prints_like_tvm_and_runs():
    sch = Schedule(engine.parse(PAD1D))
    b = sch.get_block("block")
    (loop,) = sch.get_loops(b)
    assert sch.can_decompose_padding(b, loop)
    n = len(sch.trace)
    fill = sch.decompose_padding(b, loop)
    assert len(sch.trace) == n + 1  # can_decompose_padding is no instruction
    text = sch.mod.script()
    assert 'with T.block("block_pad_const"):' in text and "y[vi] = 0" in text
    assert "for i in T.serial(128):" in text and "y[vi + 6] = x[vi]" in text
    assert sch.get(fill).name_hint == "block_pad_const"
    x = np.arange(128, dtype="int32")
    _x, y = _run(sch.mod, "pad", x, np.full(140, 7, "int32"))
    np.testing.assert_array_equal(y, np.pad(x, (6, 6)))


@pytest.mark.parametrize("at", [0, 1, 2])
def test_decompose_padding_of_conv_pad_after_compute_at(at):
    P = SMALL["conv2d"]
    sch = fresh("conv2d")
    pad, conv = sch.get_block("pad"), sch.get_block("conv")
    sch.compute_at(pad, sch.get_loops(conv)[1])
    loop = sch.get_loops(pad)[at]
    assert sch.can_decompose_padding(pad, loop)
    sch.decompose_padding(pad, loop)
    assert "T.if_then_else" not in sch.mod.script()
    run_and_check(sch.mod, "conv2d", P)
    run_and_check(sch.mod, "conv2d", P, use_build=False)
    assert_round_trips(sch, lambda: fresh("conv2d"))


@settings(max_examples=6, deadline=None)
@given(size=st.integers(3, 7), pad=st.integers(1, 2))
def test_decompose_padding_conv_sizes(size, pad):
    P = dict(SMALL["conv2d"], size=size, pad=pad)
    sch = Schedule(engine.workloads.get("conv2d", **P), workload=("conv2d", P))
    p = sch.get_block("pad")
    sch.decompose_padding(p, sch.get_loops(p)[2])
    run_and_check(sch.mod, "conv2d", P)


def test_decompose_padding_refusals_and_traces(monkeypatch):
    sch = fresh("conv2d")
    conv, pad = sch.get_block("conv"), sch.get_block("pad")
    loop_c = sch.get_loops(conv)[0]
    loop_p = sch.get_loops(pad)[0]
    assert not sch.can_decompose_padding(conv, loop_c)
    refused(sch, lambda: sch.decompose_padding(conv, loop_c), "requirement 1")
    refused(sch, lambda: sch.decompose_padding(pad, loop_c), "is not above block pad",
            "requirement 2")
    mm = fresh("relu")
    r = mm.get_block(mm.mod.script().split('T.block("')[2].split('"')[0])
    r_loop = mm.get_loops(r)[0]
    refused(mm, lambda: mm.decompose_padding(r, r_loop), "not a padding block",
            "requirement 3")
    sch.decompose_padding(pad, loop_p)
    doc = sch.trace.as_json()
    assert doc["insts"][-1][0] == "DecomposePadding" and doc["insts"][-1][2] == []
    tvm = sch.trace.export("tvm")
    assert "b13 = sch.decompose_padding(block=b1, loop=l9)" in tvm
    target = apply_exported(tvm, fresh("conv2d"), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    target = fresh("conv2d")
    Trace.from_json([[[("GetSBlock" if i[0] == "GetBlock" else i[0]), *i[1:]]
                      for i in doc["insts"]], []]).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


# ---------------------------------------------------------------------------- rolling_buffer
def _pool(n=8):
    mod = engine.parse(POOL.replace("N2", str(n + 4)).replace("N1", str(n + 2))
                       .replace("N", str(n)))
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, _ri, _rj = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_block("B"), j0)
    return sch


def _pool_ref(a):
    def once(x):
        n = x.shape[0] - 2
        return sum(x[r:r + n, s:s + n] for r in range(3) for s in range(3))
    return once(once(a.astype("float64")))


@pytest.mark.parametrize("n", [8, 6])
def test_rolling_buffer_prints_like_tvm_and_runs(n):
    sch = _pool(n)
    sch.rolling_buffer(sch.get_block("B"), 0)
    text = sch.mod.script()
    assert f"B = T.alloc_buffer((6, {n + 2}))" in text
    assert "(i_0 < 1 or 2 <= ax0) and (j_0 < 1 or 2 <= ax1))" in text
    assert "B[vi % 6, vj] = B[vi % 6, vj] + A[vi + vri, vj + vrj]" in text
    assert "B[(vi + vri) % 6, vj + vrj]" in text
    a = np.random.default_rng(0).random((n + 4, n + 4)).astype("float32")
    _a, c = _run(sch.mod, "pool", a, np.zeros((n, n), "float32"))
    np.testing.assert_allclose(c, _pool_ref(a), rtol=1e-5)


def test_rolling_buffer_refusals_and_traces(monkeypatch):
    plain = Schedule(engine.parse(POOL.replace("N2", "12").replace("N1", "10")
                                  .replace("N", "8")))
    b = plain.get_block("B")
    refused(plain, lambda: plain.rolling_buffer(b, 0), "share no loop", "requirement 3")
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.rolling_buffer(c, 0), "parameter of the function",
            "requirement 1")
    sch = _pool()
    sch.rolling_buffer(sch.get_block("B"), 0)
    doc = sch.trace.as_json()
    assert doc["insts"][-1][0] == "RollingBuffer" and doc["insts"][-1][2] == [0]
    tvm = sch.trace.export("tvm")
    assert "sch.rolling_buffer(block=b10, write_buffer_index=0)" in tvm
    assert_round_trips(sch, _pool_fresh)
    target = apply_exported(tvm, _pool_fresh(), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    target = _pool_fresh()
    Trace.from_json([[[("GetSBlock" if i[0] == "GetBlock" else i[0]), *i[1:]]
                      for i in doc["insts"]], []]).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


def _pool_fresh():
    return Schedule(engine.parse(POOL.replace("N2", "12").replace("N1", "10")
                                 .replace("N", "8")))


def test_scan_and_opaque_axes_parse_print_and_stop_the_schedule():
    """TVM's T.axis.scan and T.axis.opaque (rolling_buffer marks its rolled axis opaque):
    they print and parse back, run, and the primitives that reason about spatial and
    reduction axes refuse a block that has one."""
    import engine
    text = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.opaque(16, i)
            vs = T.axis.scan(16, i)
            B[vi] = A[vs] + 1.0
'''
    mod = engine.parse(text)
    assert "T.axis.opaque(16, i)" in mod.script() and "T.axis.scan(16, i)" in mod.script()
    assert engine.structural_equal(engine.parse(mod.script()), mod)
    sch = engine.Schedule(mod)
    with pytest.raises(engine.ScheduleError, match="opaque axis"):
        sch.split(sch.get_loops("B")[0], [None, 4])
    sch.annotate(sch.get_loops("B")[0], "note", 1)          # kind-free primitives still run
