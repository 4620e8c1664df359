"""The FLOP estimate of functions outside the gallery, and GFLOP/s in their tuning trials."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from engine import te, workloads
from engine.tune.flops import estimate_flops
from engine.tune.measure import TaskContext
from engine.tune.task import task_of


@pytest.mark.parametrize("name,params", [("mm_relu", {"n": 16}), ("matmul", {"n": 24})])
def test_the_estimate_agrees_with_the_gallery_counts(name, params):
    mod = workloads.get(name, **params)
    assert estimate_flops(mod[workloads.info(name).func_name]) == \
        workloads.info(name).flops(**params)


@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9))
def test_a_matmul_plus_bias_counts_two_per_multiply_add_and_one_per_add(m, n, k):
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="r")
    y = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="Y")
    z = te.compute((m, n), lambda i, j: y[i, j] + 1.0, name="Z")
    func = te.create_prim_func([a, b, z])
    assert estimate_flops(func) == 2 * m * n * k + m * n


def test_a_function_outside_the_gallery_gets_gflops_in_its_trials():
    import engine

    mod = workloads.get("mm_relu", n=16)
    fname = workloads.info("mm_relu").func_name
    task = task_of(mod, fname, "t")     # an IRModule: its own unscheduled self is the reference
    assert task.workload is None and task.flops() == workloads.info("mm_relu").flops(n=16)
    ctx = TaskContext(task)
    res = ctx.time(ctx.build(engine.Schedule(mod).trace.as_json()))
    assert res.ok and res.gflops is not None and res.gflops > 0
