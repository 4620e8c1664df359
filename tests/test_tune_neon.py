"""The ``auto`` space for an ARM board (issue 42, Edge): built with a target string it
samples NEON tiles (vectorized tiles of whole 4-lane vectors, at most 4 vectors a row); its
candidates build for aarch64 and match numpy under qemu-aarch64; tuning for the board on
this x86 machine is refused with one sentence before any search; this machine's space is
unchanged.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (./run-tests.sh installs them) for the
qemu test: without them it fails with the install sentence, it never skips."""
from __future__ import annotations

import io
import platform

import numpy as np
import pytest

from aarch64_samples import ARM

import engine
from engine import workloads
from engine.codegen.isa import isa_of
from engine.deploy.board import run_on_board
from engine.ir.functor import post_order_visit
from engine.ir.stmt import BlockRealize, For, ForKind
from engine.schedule import Schedule
from engine.tune import TuneError, tune
from engine.tune.auto import tile_limits
from engine.tune.space import AutoSpace, space_of

X86 = platform.machine().lower() in ("x86_64", "amd64")


def vectorized(mod) -> list[tuple[int, set[str]]]:
    """Each vectorized loop of ``mod``: its extent and the names of the blocks under it."""
    out = []

    def visit(s):
        if isinstance(s, For) and s.kind is ForKind.VECTORIZED:
            names: set[str] = set()
            post_order_visit(s.body, lambda b: names.add(b.block.name_hint)
                             if isinstance(b, BlockRealize) else None)
            out.append((int(s.extent.value), names))
    for name in mod.names():
        post_order_visit(mod[name].body, visit)
    return out


def perfect_tiles(sch) -> list[tuple]:
    """(n, max_innermost_factor) of each ``sample_perfect_tile`` of the trace, in order."""
    return [tuple(i.attrs) for i in sch.trace.insts if i.kind == "SamplePerfectTile"]


def samples(space, workload="mm_relu", n=64, count=10):
    for seed in range(count):
        sch = Schedule(workloads.get(workload, n=n), seed=seed)
        space.apply(sch)
        yield sch


@pytest.mark.parametrize("target", ["raspberry-pi-5", ARM])
def test_auto_space_for_the_board_samples_whole_neon_vectors(target):
    space = space_of("auto", target)
    assert isinstance(space, AutoSpace) and space.id == "auto:2:neon"
    assert space.isa.lanes == 4 and "neon" in space.description
    most = tile_limits(isa_of(target))[0]
    assert most == 16                         # 4 vectors of 4 lanes (32 registers)
    inner = set()
    for sch in samples(space):
        # i's tiles as on any target; j split by NEON's 4 lanes, then 4 tiles of at most
        # 16 // 4 vectors sampled
        assert perfect_tiles(sch)[:2] == [(4, tile_limits(isa_of(target))[1]), (4, 4)]
        loops = vectorized(sch.mod)
        assert loops
        for extent, _ in loops:
            assert extent % 4 == 0, loops     # whole NEON vectors, never 1 or 2 lanes
        inner |= {e for e, names in loops if names == {"Y_update"} or names == {"Y"}}
    assert inner and inner <= {4, 8, 16}, inner


def test_this_machines_space_is_unchanged():
    host = space_of("auto")
    assert host.id == "auto:2" and host.isa is None
    assert space_of("auto", "llvm").id == "auto:2"
    most = tile_limits()[0]
    for sch in samples(host, count=4):
        # j's four tiles are sampled directly (no fixed lanes split first), the innermost
        # at most tile_limits' vector tile
        assert perfect_tiles(sch)[1] == (4, most)
        assert all(e <= most for e, names in vectorized(sch.mod) if names == {"Y_update"})


def test_a_neon_candidate_builds_for_aarch64_and_matches_numpy_under_qemu():
    sch = next(iter(samples(space_of("auto", "raspberry-pi-5"), n=16, count=1)))
    rt = engine.build(sch.mod, target="raspberry-pi-5")
    args = [np.array(a) for a in workloads.random_args("mm_relu", 0, n=16)]
    want = workloads.reference("mm_relu", n=16)(*args[:2])
    run_on_board(rt, "mm_relu", args, repeat=1)
    np.testing.assert_allclose(args[2], want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not X86, reason="the refusal is for a board of another architecture")
def test_tuning_for_the_board_here_is_refused_with_one_sentence():
    for target in ("raspberry-pi-5", ARM):
        with pytest.raises(TuneError, match=r"cannot tune for .* on this machine: .*aarch64.*"
                                            r"space_of\('auto'"):
            tune(("mm_relu", {"n": 16}), trials=1, target=target)
    from engine.cli import main
    out, err = io.StringIO(), io.StringIO()
    assert main(["tune", "mm_relu", "--param", "n=16", "--target", "raspberry-pi-5",
                 "--trials", "1"], out=out, err=err) == 2
    assert "cannot tune for 'raspberry-pi-5' on this machine" in err.getvalue()


def test_a_target_the_engine_cannot_read_is_refused():
    with pytest.raises(TuneError, match="no vector description for the triple"):
        space_of("auto", "llvm -mtriple=riscv64-linux-gnu")
