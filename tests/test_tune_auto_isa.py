"""The tuner's ``auto`` space sized from a vector ISA given explicitly: the sampled
vectorized tiles stay within what the ISA's registers hold, and the programs match numpy."""
import pytest

import engine
from engine.codegen.isa import AVX2, AVX512, NEON
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, For, ForKind
from engine.tune.auto import apply_auto, tile_limits


def test_tile_limits_follow_the_isa():
    assert tile_limits(AVX512) == (64, 8, 4, 256)       # 1 MiB L2
    assert tile_limits(AVX2) == (16, 4, 2, 128)         # 256 KiB
    assert tile_limits(NEON) == (16, 8, 4, 128)         # 512 KiB


@pytest.mark.parametrize("isa", [AVX512, AVX2, NEON], ids=lambda i: i.name)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_auto_for_each_isa_matches_numpy(isa, seed):
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=64), seed=seed)
    apply_auto(sch, isa)
    widths = []   # the vectorized loops of the matmul's accumulation (not the write-back)

    def visit(s):
        if isinstance(s, For) and s.kind is ForKind.VECTORIZED:
            names = []
            post_order_visit(s.body, lambda b: names.append(b.name_hint)
                             if isinstance(b, Block) else None)
            if any(n.startswith("Y") for n in names):
                widths.append(int(s.extent.value))
    post_order_visit(sch.mod["mm_relu"].body, visit)
    assert widths and max(widths) <= tile_limits(isa)[0]
    rep = engine.runtime.check_correctness(sch.mod, "mm_relu")
    assert rep.ok, rep.message


def test_auto_packs_b_in_some_samples_and_every_sample_matches_numpy():
    """The sampled packing of B (cache_read + transform_layout into panels): some seeds
    pack, some read B in place; all match numpy, at a size the panels divide and one whose
    tiles are odd."""
    packed = 0
    for n in (64, 48):
        for seed in range(6):
            sch = engine.Schedule(engine.workloads.get("matmul", n=n), seed=seed)
            apply_auto(sch)
            packed += "B_global" in sch.mod.script()
            rep = engine.runtime.check_correctness(sch.mod, "matmul")
            assert rep.ok, (n, seed, rep.message)
    assert 0 < packed < 12
