"""A split that does not divide its loop, vectorized: the partial vector is peeled
(engine/lower/tails.py) — the full vectors run without the lane predicate, the last one keeps
it — and the result is still numpy's."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import workloads
from engine.ir import IfThenElse, For, collect
from engine.ir.dtype import lanes_of
from engine.lower import lower


def _schedule(m, n, k, lanes, parallel=False):
    sch = engine.Schedule(workloads.get("matmul", m=m, n=n, k=k))
    blk = sch.get_block("C")
    i, j, kk = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, lanes])
    sch.reorder(i, j0, kk, j1)
    sch.vectorize(j1)
    if parallel:
        sch.parallel(i)
    sch.decompose_reduction(blk, kk)
    return sch


def _lane_ifs(stmt):
    return [s for s in collect(stmt, IfThenElse) if lanes_of(s.condition.dtype) != 1]


def _check_numpy(sch, m, n, k):
    rt = engine.build(sch.mod, cache=False)
    a, b, c = [np.asarray(x) for x in workloads.random_args("matmul", m=m, n=n, k=k)]
    rt["matmul"](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-4)


def test_the_full_vectors_run_without_the_predicate():
    low = lower(_schedule(96, 100, 128, 16).mod["matmul"])
    loops = {f.loop_var.name: f for f in collect(low.body, For)}
    head, tail = loops["j_0"], loops["j_0_tail"]
    assert (head.min.value, head.extent.value) == (0, 6)      # lanes 0..95: all inside
    assert (tail.min.value, tail.extent.value) == (6, 1)      # lanes 96..111: 4 inside
    assert not _lane_ifs(head.body) and len(_lane_ifs(tail.body)) == 2


def test_a_split_that_divides_has_no_tail():
    low = lower(_schedule(32, 64, 16, 16).mod["matmul"])
    assert not _lane_ifs(low.body)
    assert not any(f.loop_var.name.endswith("_tail") for f in collect(low.body, For))


def test_a_vector_shorter_than_the_loop_has_only_a_tail():
    # 3 columns in vectors of 8: no iteration has every lane inside, nothing to peel
    low = lower(_schedule(4, 3, 5, 8).mod["matmul"])
    assert not any(f.loop_var.name.endswith("_tail") for f in collect(low.body, For))
    assert _lane_ifs(low.body)


def test_parallel_outer_loop_keeps_its_kind():
    sch = _schedule(40, 70, 24, 16, parallel=True)
    low = lower(sch.mod["matmul"])
    kinds = {f.loop_var.name: f.kind.value for f in collect(low.body, For)}
    assert kinds["i"] == "parallel" and "j_0_tail" in kinds
    _check_numpy(sch, 40, 70, 24)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 40), k=st.integers(1, 9),
       lanes=st.sampled_from([4, 8, 16]))
def test_peeled_tails_match_numpy(m, n, k, lanes):
    _check_numpy(_schedule(m, n, k, lanes), m, n, k)
