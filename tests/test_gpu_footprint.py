"""engine.gpu.footprint: the shared memory per block of a program's kernels, read without
building them, agrees with what lower_gpu builds and refuses."""
from __future__ import annotations

import pytest

from engine.gpu.footprint import over_shared_limit, shared_footprints, shared_limit_sentence
from engine.gpu.lower import lower_gpu
from engine.lower.errors import BuildError
from engine.presets.gpu_chapter import gemm_shared, matmul_program, window_sum
from engine.schedule import Schedule

H100 = "cuda -model=h100-sxm"


def _kernels(mod):
    return [k for f in lower_gpu(mod, H100).functions for k in f.kernels]


@pytest.mark.parametrize("make, n", [(window_sum, 256), (gemm_shared, 128)])
def test_footprint_is_what_the_lowering_allocates(make, n):
    sch = make(n)
    fps = shared_footprints(sch.mod, H100)
    kernels = _kernels(sch.mod)
    assert [f.name for f in fps] == [k.name for k in kernels if k.shared]
    for f in fps:
        k = next(k for k in kernels if k.name == f.name)
        assert f.shared_bytes == k.shared_bytes
        assert f.threads == k.block[0] * k.block[1] * k.block[2]
        assert sorted(t.name for t in f.tiles) == sorted(b.name for b in k.shared)
    assert not over_shared_limit(fps, H100)


def test_window_sum_tile_and_its_stage():
    (fp,) = shared_footprints(window_sum(256, 64).mod, H100)
    (tile,) = fp.tiles
    assert (tile.name, tile.shape, tile.bytes) == ("A_shared", (66,), 66 * 4)
    assert tile.writers == ("A_shared",) and tile.at_loop == "i_1"


def _gemm_tile_at(n: int, where: str) -> Schedule:
    """GEMM in 64x64 blocks (blockIdx.y, blockIdx.x), A read into "shared" at ``where``."""
    sch = Schedule(matmul_program(n))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 64])
    j0, j1 = sch.split(j, [None, 64])
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    a = sch.cache_read(c, 0, "shared")
    if where:
        sch.compute_at(a, {"j_0": j0, "k_0": k0}[where])
    return sch


def test_a_stage_not_in_a_kernel_yet_is_not_counted():
    # after cache_read the stage is its own top-level nest: no kernel holds it yet
    assert shared_footprints(_gemm_tile_at(256, "").mod, H100) == ()


def test_over_the_limit_as_the_lowering_refuses():
    sch = _gemm_tile_at(256, "j_0")       # a 64 x 256 float tile per block: 64 KiB
    fps = shared_footprints(sch.mod, H100)
    (bad,) = over_shared_limit(fps, H100)
    (tile,) = bad.tiles
    assert tile.shape == (64, 256) and bad.shared_bytes == 64 * 1024
    assert tile.writers == ("A_shared",) and tile.at_loop == "j_0"
    text = shared_limit_sentence(bad, H100)
    assert "64 KiB" in text and "48 KiB" in text and "A_shared 64 x 256" in text
    with pytest.raises(BuildError, match="shared memory"):
        lower_gpu(sch.mod, H100)
    # placed at k_0 instead: a 64 x 8 tile, built
    ok = _gemm_tile_at(256, "k_0")
    (fp,) = shared_footprints(ok.mod, H100)
    assert fp.tiles[0].shape == (64, 8) and not over_shared_limit((fp,), H100)


def test_a_kernel_the_lowering_refuses_for_another_reason_is_skipped():
    # a serial loop around the thread-bound loop: not a kernel yet (the build says why)
    sch = Schedule(matmul_program(128))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, i)
    j0, j1 = sch.split(j, [None, 32])
    sch.bind(j1, "threadIdx.x")
    assert shared_footprints(sch.mod, H100) == ()
    with pytest.raises(BuildError, match="loop around a kernel"):
        lower_gpu(sch.mod, H100)
