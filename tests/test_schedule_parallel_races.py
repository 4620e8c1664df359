"""parallel and vectorize refuse loops whose iterations would race on a shared buffer.

Found while running TVM's own tests (test_parallel_not_compact_data_flow): the engine made
a loop parallel whose iterations all store the same elements (a block storing ``B[vk]``,
indexed by a reduction axis). The same hole let through a scan ``B[i] = B[i - 1] + A[i]``
and ``B[0] = A[i]``: each iteration's result depended on which thread ran last. Legal
schedules stay legal: the tile loops of a matmul (fused too), the rows of a decomposed
reduction, the packed copy of matmul-best.
"""
from __future__ import annotations

import pytest

import engine
from engine.schedule import Schedule, ScheduleError


def one_loop(body: str) -> Schedule:
    return Schedule(engine.parse(f'''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(1, 64):
        with T.block("B"):
            vi = T.axis.spatial((1, 64), i)
            {body}
'''))


@pytest.mark.parametrize("body", ["B[vi] = B[vi - 1] + A[vi]", "B[0] = A[vi]",
                                  "B[vi // 2] = A[vi]", "B[vi] = A[vi] + B[vi + 1]"])
@pytest.mark.parametrize("how", ["parallel", "vectorize"])
def test_iterations_touching_one_element_are_not_run_at_once(body, how):
    sch = one_loop(body)
    (i,) = sch.get_loops(sch.get_block("B"))
    before = sch.mod
    with pytest.raises(ScheduleError, match="same element"):
        getattr(sch, how)(i)
    assert sch.mod is before


@pytest.mark.parametrize("body", ["B[vi] = A[vi] * 2.0", "B[vi] = B[vi] + A[vi]",
                                  "B[vi] = A[vi - 1] + A[vi]"])
def test_iterations_keeping_to_their_elements_run_at_once(body):
    sch = one_loop(body)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)


def test_a_block_storing_at_a_reduction_axis_is_not_parallel():
    """The case of TVM's test_parallel_not_compact_data_flow."""
    sch = Schedule(engine.parse('''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vk] = 0.0
            B[vk] = B[vk] + A[vi, vk]
'''))
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="same element"):
        sch.parallel(i)


def test_the_rows_of_a_decomposed_reduction_and_fused_tiles_stay_parallel():
    sch = Schedule(engine.workloads.get("mm_relu", n=32))
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    sch.decompose_reduction(y, j)
    sch.parallel(i)
    sch2 = Schedule(engine.workloads.get("matmul", n=64))
    i, j, k = sch2.get_loops(sch2.get_block("C"))
    i0, i1 = sch2.split(i, [None, 16])
    j0, j1 = sch2.split(j, [None, 32])
    sch2.reorder(i0, j0, k, i1, j1)
    sch2.parallel(sch2.fuse(i0, j0))


def test_a_block_bound_non_affinely_is_not_parallel():
    """The case of TVM's test_parallel_not_quasi_affine: TVM requires the blocks under a
    parallel loop to be bound affinely."""
    sch = Schedule(engine.parse('''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            vk = T.axis.reduce(16, k * k // 2)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
'''))
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="not an affine"):
        sch.parallel(i)
