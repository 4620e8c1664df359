"""pad_einsum, reindex, reindex_cache_read and reindex_cache_write: programs as TVM 0.27
prints them, results against numpy (compiled and interpreted), refusals that leave the
schedule unchanged, and traces (JSON, URL, Python, TVM export and TVM JSON import)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace, TraceError
from semantics import assert_computes_exactly
from test_schedule_support import (SMALL, apply_exported, assert_round_trips, fresh, refused,
                                   run_and_check)


def _sch(name, **params):
    return Schedule(engine.workloads.get(name, **params), workload=(name, params))


def _both(mod, name, params):
    run_and_check(mod, name, params)
    run_and_check(mod, name, params, use_build=False)


# ---------------------------------------------------------------------------- pad_einsum
def test_pad_einsum_matmul_prints_like_tvm_and_runs():
    P = {"n": 15}
    sch = _sch("matmul", **P)
    c = sch.get_block("C")
    sch.pad_einsum(c, [4, 4, 4])
    text = sch.mod.script()
    assert "A_pad = T.alloc_buffer((16, 16))" in text
    assert "A_pad[v0, v1] = T.if_then_else(v0 < 15 and v1 < 15, A[v0, v1], T.float32(0))" \
        in text
    assert "for i, j, k in T.grid(16, 16, 16):" in text
    assert "C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B_pad[vk, vj]" in text
    assert "for i0, i1 in T.grid(15, 15):" in text and "C[v0, v1] = C_pad[v0, v1]" in text
    _both(sch.mod, "matmul", P)
    assert structural_equal(engine.parse(text), sch.mod)
    # the padded loops now split evenly, and the result stays right
    i, j, k = sch.get_loops(c)
    sch.split(i, [None, 4])
    sch.split(k, [None, 8])
    _both(sch.mod, "matmul", P)


@settings(max_examples=8, deadline=None)
@given(m=st.integers(1, 7), n=st.integers(1, 7), k=st.integers(1, 7),
       pads=st.lists(st.integers(1, 5), min_size=3, max_size=3))
def test_pad_einsum_batch_matmul_any_sizes(m, n, k, pads):
    P = {"batch": 2, "m": m, "n": n, "k": k}
    sch = _sch("batch_matmul", **P)
    c = sch.get_block("C")
    try:
        sch.pad_einsum(c, [1] + pads)
    except engine.ScheduleError as e:
        assert "nothing to pad" in str(e)
        return
    run_and_check(sch.mod, "batch_matmul", P)


def test_pad_einsum_mm_relu_keeps_the_consumer_on_the_original_buffer():
    P = {"n": 15}
    sch = _sch("mm_relu", **P)
    sch.pad_einsum(sch.get_block("Y"), [8, 8, 1])
    text = sch.mod.script()
    assert "Y_pad" in text and "T.max(Y[vi, vj], T.float32(0))" in text
    _both(sch.mod, "mm_relu", P)
    assert_round_trips(sch, lambda: _sch("mm_relu", **P))


def test_pad_einsum_refusals():
    sch = _sch("matmul", n=15)
    c = sch.get_block("C")
    refused(sch, lambda: sch.pad_einsum(c, [4, 4]), "3 positive integer(s)", "requirement 1")
    refused(sch, lambda: sch.pad_einsum(c, [4, 0, 4]), "positive integers")
    refused(sch, lambda: sch.pad_einsum(c, [5, 3, 1]), "nothing to pad")
    conv = fresh("conv2d")
    cb = conv.get_block("conv")
    refused(conv, lambda: conv.pad_einsum(cb, [1, 1, 4, 4, 1, 1, 1]),
            "not an Einsum", "requirement 2")
    dec = _sch("matmul", n=15)
    c2 = dec.get_block("C")
    dec.decompose_reduction(c2, dec.get_loops(c2)[0])
    refused(dec, lambda: dec.pad_einsum(c2, [4, 4, 4]), "not an Einsum")
    soft = fresh("softmax")  # a max-reduction padded with zeros would be wrong
    mx = soft.get_block("T_softmax_maxelem")
    refused(soft, lambda: soft.pad_einsum(mx, [1, 8]),
            "requirement 4")
    mm = _sch("mm_relu", n=15)
    y = mm.get_block("Y")
    mm.reverse_compute_at(mm.get_block("C"), mm.get_loops(y)[0])
    refused(mm, lambda: mm.pad_einsum(y, [8, 8, 1]), "requirement")


def test_pad_einsum_trace_exports_and_tvm_import(monkeypatch):
    P = {"n": 15}
    sch = _sch("matmul", **P)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    doc = sch.trace.as_json()
    assert doc["insts"][-1] == ["PadEinsum", ["b0"], [[4, 4, 4]], []]
    assert "sch.pad_einsum(b0, [4, 4, 4])" in sch.trace.as_python()
    assert "sch.pad_einsum(block=b0, padding=[4, 4, 4])" in sch.trace.export("tvm")
    assert_round_trips(sch, lambda: _sch("matmul", **P))
    target = apply_exported(sch.trace.export("tvm"), _sch("matmul", **P), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    # TVM 0.27's own trace.as_json() of the same schedule
    tvm_doc = [[["GetSBlock", [], ["C", "matmul"], ["b0"]],
                ["PadEinsum", ["b0"], [[4, 4, 4]], []]], []]
    target = _sch("matmul", **P)
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)
    bad = [[["GetSBlock", [], ["C", "matmul"], ["b0"]], ["PadEinsum", ["b0"], [[4, "x"]], []]],
           []]
    with pytest.raises(TraceError, match="positive integers"):
        Trace.from_json(bad)


# ---------------------------------------------------------------------------- reindex
def test_reindex_read_and_write_print_like_tvm_and_run():
    sch = fresh("matmul")
    c = sch.get_block("C")
    rb = sch.reindex(c, ("read", 1))
    rc = sch.reindex(c, "C")
    text = sch.mod.script()
    assert 'with T.block("B_reindex_reindex"):' in text  # TVM's name for a read copy
    assert "B_reindex[v0, v1] = B[v1, v0]" in text
    assert "C_reindex[vi, vj] = C_reindex[vi, vj] + A[vi, vk] * B_reindex[vj, vk]" in text
    assert "C[v0, v1] = C_reindex[v0, v1]" in text
    assert sch.get(rb).name_hint == "B_reindex_reindex" and sch.get(rc).name_hint == "C_reindex"
    _both(sch.mod, "matmul", SMALL["matmul"])
    assert structural_equal(engine.parse(text), sch.mod)


def test_reindex_conv_drops_unused_axes_and_runs():
    P = SMALL["conv2d"]
    sch = fresh("conv2d")
    conv = sch.get_block("conv")
    sch.reindex(conv, ("read", 1))   # weight[vco, vci, vkh, vkw]: 4 of the 7 axes
    text = sch.mod.script()
    assert "weight_reindex = T.alloc_buffer((2, 2, 3, 3))" in text
    _both(sch.mod, "conv2d", P)


def test_reindex_refusals_and_traces(monkeypatch):
    sch = fresh("conv2d")
    conv = sch.get_block("conv")
    sch.split(sch.get_loops(conv)[0], [1, None])
    ok = fresh("matmul")
    c = ok.get_block("C")
    ok.decompose_reduction(c, ok.get_loops(c)[1])
    refused(ok, lambda: ok.reindex(c, ("read", 0)), "single chain", "requirement 2")
    refused(ok, lambda: ok.reindex(c, ("read", 5)), "is not the index of a buffer")
    t = fresh("matmul")
    t.reindex(t.get_block("C"), ("write", 0))
    doc = t.trace.as_json()
    assert doc["insts"][-1] == ["ReIndex", ["b0"], [0, 1], ["b1"]]
    assert 'b1 = sch.reindex(block=b0, buffer=("write", 0))' in t.trace.export("tvm")
    assert_round_trips(t, lambda: fresh("matmul"))
    target = apply_exported(t.trace.export("tvm"), fresh("matmul"), monkeypatch)
    assert structural_equal(target.mod, t.mod)
    tvm_doc = [[["GetSBlock", [], ["C", "matmul"], ["b0"]],
                ["ReIndex", ["b0"], [0, 1], ["b1"]]], []]
    target = fresh("matmul")
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, t.mod)


# ------------------------------------------------------------- reindex: semantics first
_same_meaning = assert_computes_exactly


TWO_READS = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] + A[vi, vj]
'''


def test_reindex_refuses_a_buffer_read_at_two_index_orders():
    """Mirrors TVM's test_reindex_fail_multiple_read: ``A[vj, vi]`` and ``A[vi, vj]`` are
    two accesses with different indices; one copy laid out by the axes cannot serve both
    (it used to be accepted, rewriting both reads to ``A_reindex[vi, vj]``: a different
    program)."""
    mod = engine.parse(TWO_READS)
    sch = Schedule(mod)
    b = sch.get_block("B")
    refused(sch, lambda: sch.reindex(b, ("read", 0)), "reindex refused on block B",
            "accesses A at different indices")
    sch.reindex(b, ("write", 0))   # B is written at one point: fine
    _same_meaning(mod, sch.mod)


def test_reindex_refuses_a_written_buffer_also_read_elsewhere():
    """The write side of TVM's test_reindex_fail_multiple_read: the block writes C[vi, vj]
    and reads C[vj, vi] (different indices), so neither C's read nor its write can be
    reindexed."""
    src = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = C[vj, vi] + A[vi, vj]
'''
    sch = Schedule(engine.parse(src))
    c = sch.get_block("C")
    refused(sch, lambda: sch.reindex(c, ("write", 0)), "accesses C at different indices")
    refused(sch, lambda: sch.reindex(c, "C"), "accesses C at different indices")


def test_reindex_refuses_an_in_place_update():
    """A block updating A in place (``A[vi] = A[vi] * 2``, no T.init): a read copy would
    take the store too (A never written), a write copy would start from uninitialised
    memory. TVM rewrites both accesses either way; the engine refuses."""
    src = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(8, 4):
        with T.block("U"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[vi, vj] * T.float32(2)
'''
    sch = Schedule(engine.parse(src))
    u = sch.get_block("U")
    refused(sch, lambda: sch.reindex(u, ("read", 0)), "also writes A")
    refused(sch, lambda: sch.reindex(u, ("write", 0)), "reads the old contents of A")


def test_reindex_write_refuses_a_block_that_skips_elements():
    """A block whose T.where skips some of its instances writes only part of B: a copy back
    over all the axes' values would store elements the block never computed."""
    src = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            T.where(i + j < 9)
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] * T.float32(2)
'''
    mod = engine.parse(src)
    sch = Schedule(mod)
    b = sch.get_block("B")
    refused(sch, lambda: sch.reindex(b, ("write", 0)), "T.where")
    sch.reindex(b, ("read", 0))   # copying A in full reads only elements of A
    _same_meaning(mod, sch.mod)


def test_reindex_write_reads_a_where_over_a_loop_not_starting_at_zero():
    """Found by the differential property test (tests/test_schedule_differential.py): with
    ``for i in T.serial(2, 4)`` and ``T.where(i < 3)`` the block runs for vi = 0 only; the
    coverage check read the bound as one on ``i - 2`` (vi < 3: all of the axis) and the copy
    back stored Out[1] from uninitialised memory."""
    src = '''
@T.prim_func
def main(A: T.Buffer((2, 3), "float32"), Out: T.Buffer((2, 3), "float32")):
    for i in T.serial(2, 4):
        for j in range(3):
            with T.block("S0"):
                T.where(i < 3)
                vi = T.axis.spatial(2, i - 2)
                vj = T.axis.spatial(3, j)
                Out[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
'''
    mod = engine.parse(src)
    sch = Schedule(mod)
    s0 = sch.get_block("S0")
    refused(sch, lambda: sch.reindex(s0, ("write", 0)), "axis vi in [0, 2)")
    sch.reindex(s0, ("read", 0))
    _same_meaning(mod, sch.mod)


def test_reindex_after_an_imperfect_split_keeps_the_program():
    """TVM's test_reindex_read_basic / matmul write, after a split whose tail is guarded:
    the guard only skips instances outside the axes' domains, so both copies are exact."""
    src = '''
@T.prim_func
def main(A: T.Buffer((10, 6), "float32"), B: T.Buffer((6, 10), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vj, vi] = A[vi, vj] + T.float32(1)
'''
    mod = engine.parse(src)
    sch = Schedule(mod)
    b = sch.get_block("B")
    sch.split(sch.get_loops(b)[0], [None, 4])
    sch.reindex(b, ("read", 0))
    sch.reindex(b, ("write", 0))
    _same_meaning(mod, sch.mod)


def test_reindex_of_an_int64_axis_gives_unit_extents_of_the_index_dtype():
    """An axis of int64 domain beside int32 ones: every point region the copy and the
    rewritten block get has extent 1 in its index's own dtype (as the parser reads
    ``T.writes(C[i, j])``), so the printed program parses back equal, and both run exactly."""
    src = '''
@T.prim_func
def main(A: T.Buffer((T.int64(3), 5), "float32"), B: T.Buffer((4, 5), "float32"),
         C: T.Buffer((T.int64(3), 4), "float32")):
    for i0, i1, i2 in T.grid(T.int64(3), 4, 5):
        with T.block("C"):
            i = T.axis.spatial(T.int64(3), i0)
            j, k = T.axis.remap("SR", [i1, i2])
            with T.init():
                C[i, j] = T.float32(0)
            C[i, j] = C[i, j] + A[i, k] * B[j, k]
'''
    from engine.ir import stmt as S
    from engine.ir.functor import collect_stmts
    mod = engine.parse(src)
    sch = Schedule(mod)
    sch.reindex(sch.get_block("C"), ("write", 0))
    sch.reindex(sch.get_block("C"), ("read", 0))
    func = sch.mod["main"]
    regions = [r for b in collect_stmts(func.body, S.Block) for r in b.reads + b.writes]
    assert any(rg.min.dtype == "int64" for r in regions for rg in r.region)
    for r in regions:
        for rg in r.region:
            assert rg.extent.dtype == rg.min.dtype, (r.buffer.name, rg)
    text = sch.mod.script()
    assert "T.writes(C_reindex[i, j])" in text and "T.writes(C[v0, v1])" in text
    assert structural_equal(engine.parse(text), sch.mod)
    assert_computes_exactly(mod, sch.mod, "main")


# ---------------------------------------------------------------------------- reindex caches
def test_reindex_cache_read_write_print_like_tvm_and_run():
    sch = fresh("matmul")
    c = sch.get_block("C")
    a = sch.reindex_cache_read(c, 0, "local", lambda i, j, k: (k, i))
    w = sch.reindex_cache_write(c, "C", "shared", "lambda i, j, k: (j // 4, i, j % 4)")
    text = sch.mod.script()
    assert "for i, k in T.grid(16, 16):" in text
    assert "A_local[vk, vi] = A[vi, vk]" in text
    assert "C_shared = T.alloc_buffer((4, 16, 4), scope=\"shared\")" in text
    assert "C[vi, vj] = C_shared[vj // 4, vi, vj % 4]" in text
    assert sch.get(a).name_hint == "A_local" and sch.get(w).name_hint == "C_shared"
    _both(sch.mod, "matmul", SMALL["matmul"])
    # the stages move like the block: compute_at / reverse_compute_at them
    sch = fresh("matmul")
    c = sch.get_block("C")
    a = sch.reindex_cache_read(c, 0, "local", lambda i, j, k: (k, i))
    w = sch.reindex_cache_write(c, 0, "local", lambda i, j, k: (j, i))
    i, j, k = sch.get_loops(c)
    sch.compute_at(a, i)
    sch.reverse_compute_at(w, i)
    _both(sch.mod, "matmul", SMALL["matmul"])


def test_reindex_cache_follows_a_split_block_and_mm_relu_consumer():
    P = SMALL["mm_relu"]
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    sch.split(j, [None, 4])
    sch.reindex_cache_write(y, 0, "local", "lambda i, j, k: (j, i)")
    sch.reindex_cache_read(sch.get_block("C"), 0, "global", "lambda i, j: (i, j)")
    _both(sch.mod, "mm_relu", P)
    assert_round_trips(sch, lambda: fresh("mm_relu"))


def test_reindex_cache_refusals():
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.reindex_cache_read(c, 0, "local", "lambda i, j: (j, i)"),
            "takes 2 index(es)", "requirement 3")
    refused(sch, lambda: sch.reindex_cache_read(c, 0, "local", "lambda i, j, k: (j, i)"),
            "axis vj appears in the index map", "requirement 3")
    refused(sch, lambda: sch.reindex_cache_read(c, 0, "local", "lambda i, j, k: (i // 2, k)"),
            "same place")
    refused(sch, lambda: sch.reindex_cache_read(c, 0, "texture", "lambda i, j, k: (i, k)"),
            "unknown storage scope")
    dec = fresh("matmul")
    c2 = dec.get_block("C")
    dec.decompose_reduction(c2, dec.get_loops(c2)[0])
    refused(dec, lambda: dec.reindex_cache_read(c2, "C", "local", "lambda i, j, k: (i, j)"),
            "would go stale", "requirement 1")
    refused(dec, lambda: dec.reindex_cache_write(c2, 0, "local", "lambda i, j, k: (i, j)"),
            "also written by block C_init", "requirement 1")


def test_reindex_cache_traces_exports_and_import(monkeypatch):
    sch = fresh("matmul")
    c = sch.get_block("C")
    sch.reindex_cache_read(c, 0, "local", "lambda i, j, k: (k, i)")
    sch.reindex_cache_write(c, 0, "local", lambda i, j, k: (j, i))
    doc = sch.trace.as_json()
    assert doc["insts"][1] == ["ReindexCacheRead", ["b0", '"lambda i, j, k: (k, i)"'],
                               [0, "local"], ["b1"]]
    tvm = sch.trace.export("tvm")
    assert ('b1 = sch.reindex_cache_read(block=b0, read_buffer_index=0, '
            'storage_scope="local", index_map=lambda i, j, k: (k, i))') in tvm
    assert_round_trips(sch, lambda: fresh("matmul"))
    target = apply_exported(tvm, fresh("matmul"), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    target = fresh("matmul")
    Trace.from_json([[["GetSBlock", [], ["C", "matmul"], ["b0"]], *doc["insts"][1:]], []]) \
        .apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)
    bad = dict(doc, insts=[doc["insts"][0], ["ReindexCacheRead", ["b0", '"lambda i: (sch,)"'],
                                             [0, "local"], ["b1"]]])
    with pytest.raises(TraceError):
        Trace.from_json(bad).export("tvm")
