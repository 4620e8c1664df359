"""The tiled and best matmul presets sized for AVX-512, AVX2 and NEON (the ISA passed
explicitly): each schedule compiles on this machine and matches numpy."""
import pytest

import engine
from engine.codegen.isa import AVX2, AVX512, NEON
from engine.presets import library

ISAS = [AVX512, AVX2, NEON]


def test_sizes_follow_the_isa():
    assert library.register_block(AVX512) == (16, 4, 4)     # 16 zmm accumulators
    assert library.register_block(AVX2) == (8, 2, 4)        # 8 ymm accumulators of 16
    assert library.register_block(NEON) == (4, 4, 4)
    assert library.best_sizes(AVX512) == library.BEST
    for isa in ISAS:
        b = library.best_sizes(isa)
        assert b["TK"] * b["TJ"] * 4 <= isa.l1d           # the panel of B fits L1
        assert b["R"] * b["V"] <= isa.registers // 2


@pytest.mark.parametrize("isa", ISAS, ids=lambda i: i.name)
@pytest.mark.parametrize("recipe,block,workload,relu", [
    (library._tiled, "C", "matmul", False), (library._tiled, "Y", "mm_relu", True),
    (library._best, "C", "matmul", False), (library._best, "Y", "mm_relu", True)])
@pytest.mark.parametrize("n", [64, 80])
def test_presets_for_each_isa_match_numpy(isa, recipe, block, workload, relu, n):
    sch = engine.Schedule(engine.workloads.get(workload, n=n))
    recipe(block, workload, relu)(sch, {"n": n}, isa=isa)
    assert "T.vectorized" in sch.mod.script()
    rep = engine.runtime.check_correctness(sch.mod, workload)
    assert rep.ok, rep.message
