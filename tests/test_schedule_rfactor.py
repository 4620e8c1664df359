"""rfactor: TVM's rfactor/write-back blocks on the sum, matmul, softmax (max) and layernorm
reductions, compiled and checked against numpy; legality refusals; traces."""
from __future__ import annotations

import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace
from test_schedule_support import SMALL, assert_round_trips, fresh, run_and_check
from test_schedule_support import refused as _refused

SUM = {"m": 6, "n": 12}


def _sum():
    return Schedule(engine.workloads.get("sum", **SUM), workload=("sum", SUM))


def test_rfactor_sum_prints_like_tvm():
    sch = _sum()
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, factor_axis=1)
    text = sch.mod.script()
    assert "B_rf = T.alloc_buffer((6, 4))" in text
    assert 'with T.block("B_rf"):' in text
    assert 'vk_1, vi, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])' in text
    assert "B_rf[vi, vk_1] = B_rf[vi, vk_1] + A[vi, vk_0 * 4 + vk_1]" in text
    assert "for i, k_1 in T.grid(6, 4):" in text
    assert 'vk_1, vi = T.axis.remap("RS", [k_1, i])' in text
    assert "B[vi] = B[vi] + B_rf[vi, vk_1]" in text
    assert sch.get(rf).name_hint == "B_rf"
    # the original handle follows the write-back block; k_0 is gone from it
    assert sch.get(b).name_hint == "B"
    assert len(sch.get_loops(b)) == 2 and len(sch.get_loops(rf)) == 3
    with pytest.raises(ScheduleError, match="no longer exists"):
        sch.get(k0)
    run_and_check(sch.mod, "sum", SUM)
    assert structural_equal(engine.parse(text), sch.mod)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_rfactor_factor_axis(axis):
    sch = _sum()
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, factor_axis=axis)
    shape = sch.get(rf).writes[0].buffer.shape
    want = (4, 6) if axis in (0, -2) else (6, 4)
    assert tuple(s.value for s in shape) == want
    run_and_check(sch.mod, "sum", SUM)


def test_rfactor_then_parallel_and_vectorize_the_factored_loop():
    """The point of rfactor: the partial sums are independent across the factored loop."""
    sch = _sum()
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    with pytest.raises(ScheduleError):
        sch.vectorize(k1)  # a reduction loop cannot be vectorized before rfactor
    rf = sch.rfactor(k1, factor_axis=1)
    ri, rk0, rk1 = sch.get_loops(rf)
    sch.reorder(ri, rk1, rk0)
    sch.parallel(ri)
    ri, rk1, rk0 = sch.get_loops(rf)
    sch.reorder(ri, rk0, rk1)
    sch.vectorize(rk1)
    run_and_check(sch.mod, "sum", SUM)
    sch2 = _sum()
    b2 = sch2.get_block("B")
    i2, k2 = sch2.get_loops(b2)
    rf2 = sch2.rfactor(k2, 0)
    sch2.parallel(sch2.get_loops(rf2)[1])
    run_and_check(sch2.mod, "sum", SUM)


def test_rfactor_matmul_k():
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.rfactor(k, 0)
    text = sch.mod.script()
    assert "C_rf = T.alloc_buffer((16, 16, 16))" in text
    # nothing left to reduce in the rfactor block: a plain store, no init (as TVM)
    assert "C_rf[vk, vi, vj] = A[vi, vk] * B[vk, vj]" in text
    assert 'vk, vi, vj = T.axis.remap("RSS", [k, i, j])' in text
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k0, 2)
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    run_and_check(sch.mod, "matmul", SMALL["matmul"])


def test_rfactor_max_and_other_reductions():
    sch = fresh("softmax")
    mx = sch.get_block("T_softmax_maxelem")
    i, k = sch.get_loops(mx)
    k0, k1 = sch.split(k, [None, 3])
    sch.rfactor(k1, 0)
    assert "T.max(T_softmax_maxelem_rf[vk_1, vi], A[vi, vk_0 * 3 + vk_1])" in sch.mod.script()
    run_and_check(sch.mod, "softmax", SMALL["softmax"])
    sch = fresh("layernorm")
    rs = sch.get_block("row_sum")
    sch.rfactor(sch.get_loops(rs)[1], 1)
    run_and_check(sch.mod, "layernorm", SMALL["layernorm"])
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    sch.rfactor(sch.get_loops(y)[2], 2)
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])


def test_rfactor_refuses_a_block_under_a_predicate():
    """The case of TVM's test_reduction_rfactor_predicate: a split that does not divide its
    loop puts the block under ``T.where``, and TVM refuses to factor it (a partial result
    whose iterations were all masked off would never be initialised); so does the engine,
    which used to accept it."""
    P = {"m": 3, "n": 10}
    sch = Schedule(engine.workloads.get("sum", **P), workload=("sum", P))
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    for lp in (k0, k1):
        e = _refused(sch, lambda: sch.rfactor(lp, 1), "non-trivial predicate",
                     "T.where(k_0 * 4 + k_1 < 10)", "divides the loop's extent")
        assert "B" in e.highlight


def test_refusals():
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    _refused(sch, lambda: sch.rfactor(i, 0), "spatial axis", "loop over a reduction axis")
    _refused(sch, lambda: sch.rfactor(k, 3), "factor_axis=3 is out of range",
             "from -3 to 2")
    _refused(sch, lambda: sch.rfactor(k, 1.5), "factor_axis=1.5")
    sch.unroll(k)
    _refused(sch, lambda: sch.rfactor(k, 0), "needs a serial loop")
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, k)
    _refused(sch, lambda: sch.rfactor(k, 0), "not a reduction block with a T.init()",
             "before decompose_reduction")
    # a bias initial value is not the identity of the sum
    sch = fresh("mlp")
    l0 = sch.get_block("linear0")
    lk = sch.get_loops(l0)[2]
    e = _refused(sch, lambda: sch.rfactor(lk, 0), "identity of a sum")
    assert "linear0" in e.highlight
    # a loop with two blocks
    sch = fresh("mm_relu")
    y, cb = sch.get_block("Y"), sch.get_block("C")
    i, j = sch.get_loops(cb)
    sch.compute_at(y, i)
    _refused(sch, lambda: sch.rfactor(i, 0), "contains 2 blocks")
    # a block handle is not a loop
    sch = _sum()
    b = sch.get_block("B")
    _refused(sch, lambda: sch.rfactor(b, 0), "loop handle")


def test_rfactor_trace_round_trips_and_exports():
    sch = _sum()
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, factor_axis=1)
    sch.parallel(sch.get_loops(rf)[0])
    doc = sch.trace.as_json()
    assert ["RFactor", [doc["insts"][2][3][1]], [1], [doc["insts"][3][3][0]]] == doc["insts"][3]
    assert "sch.rfactor(l4, factor_axis=1)" in sch.trace.as_python()
    assert "sch.rfactor(loop=l4, factor_axis=1)" in sch.trace.export("tvm")
    assert_round_trips(sch, _sum)
    tvm_doc = [[["GetBlock", [], ["B", "sum"], ["b0"]],
                ["GetLoops", ["b0"], [], ["l1", "l2"]],
                ["Split", ["l2", "None", 4], [1, 0], ["l3", "l4"]],
                ["RFactor", ["l4"], [1], ["b5"]],
                ["GetLoops", ["b5"], [], ["l6", "l7", "l8"]],
                ["Parallel", ["l6"], [], []]], []]
    target = _sum()
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)
    run_and_check(target.mod, "sum", SUM)
