"""parallel on the fused outer tile loops — the standard CPU schedule — is accepted and
runs correctly; fusing a reduction loop into it is still refused."""
import numpy as np
import pytest

import engine


@pytest.mark.parametrize("wl,block", [("matmul", "C"), ("mm_relu", "Y")])
@pytest.mark.parametrize("n,ti,tj", [(64, 16, 32), (96, 32, 16), (80, 16, 32)])
def test_parallel_fused_tile_loops(wl, block, n, ti, tj):
    sch = engine.Schedule(engine.workloads.get(wl, n=n))
    i, j, k = sch.get_loops(sch.get_block(block))
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    sch.reorder(i0, j0, k, i1, j1)
    fused = sch.fuse(i0, j0)
    sch.parallel(fused)
    assert sch.get(fused).kind.value == "parallel"
    rt = engine.build(sch.mod)
    args = engine.workloads.random_args(wl, n=n)
    rt[wl](*args)
    ref = engine.workloads.reference(wl, n=n)(*args[:2])
    np.testing.assert_allclose(args[2], ref, rtol=1e-4, atol=1e-4)


def test_parallel_fused_with_reduction_is_refused():
    sch = engine.Schedule(engine.workloads.get("matmul", n=32))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    fused = sch.fuse(i, k)
    before = sch.mod
    with pytest.raises(engine.ScheduleError, match="reduction"):
        sch.parallel(fused)
    assert sch.mod is before
