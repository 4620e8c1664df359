"""Sampling primitives (sample_perfect_tile, sample_categorical, sample_compute_location),
seeded schedules, and decisions in traces: determinism, round trips, TVM import, refusals."""
from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.ir import structural_equal
from engine.schedule import (ExprRV, LoopRV, Schedule, ScheduleError, Trace, TraceError,
                             schedule_from_trace)
from engine.schedule.primitives.sampling import draw_perfect_tile, sample_perfect_tile
from test_schedule_support import SMALL, apply_exported, fresh, run_and_check

MM = {"n": 16}


def mm(seed=None):
    return Schedule(engine.workloads.get("matmul", **MM), workload=("matmul", MM), seed=seed)


def stochastic_schedule_mm(sch: Schedule) -> Schedule:
    """The course's stochastic schedule (its ``main`` is our ``matmul``)."""
    block_C = sch.get_block("C", "matmul")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def stochastic_mm_relu(seed):
    """All three samplers: tiles of i and j, a compute location for Y, an unroll step."""
    sch = Schedule(engine.workloads.get("mm_relu", **MM), workload=("mm_relu", MM), seed=seed)
    y, c = sch.get_block("Y"), sch.get_block("C")
    i, j, k = sch.get_loops(y)
    i0, i1, i2 = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=4))
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(i0, j0, i1, k, i2, j1)
    ci, cj = sch.get_loops(c)
    loc = sch.sample_compute_location(y)
    sch.compute_at(y, loc, preserve_unit_loops=True)
    unroll = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25] * 4)
    sch.annotate(sch.get_loops(c)[0], "pragma_auto_unroll_max_step", unroll)
    return sch


# ---------------------------------------------------------------------------- the sampler
@given(extent=st.integers(1, 600), n=st.integers(1, 4),
       most=st.sampled_from([-1, 1, 2, 4, 16, 64]), seed=st.integers(0, 2 ** 31 - 2))
def test_perfect_tiles_multiply_to_the_extent_within_the_innermost_bound(extent, n, most,
                                                                        seed):
    import random
    tile = sample_perfect_tile(random.Random(seed), extent, n, most)
    assert len(tile) == n and math.prod(tile) == extent and min(tile) >= 1
    if most != -1 and n > 1:
        assert tile[-1] <= most


def test_perfect_tiles_cover_every_tiling():
    """Every perfect tiling of 12 into 2 factors is drawn (none is unreachable)."""
    import random
    rng = random.Random(0)
    seen = {tuple(draw_perfect_tile(rng, 12, 2)) for _ in range(400)}
    assert seen == {(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)}


# ---------------------------------------------------------------------------- determinism
def test_same_seed_same_decisions_and_program():
    a, b = stochastic_mm_relu(11), stochastic_mm_relu(11)
    assert a.trace == b.trace and a.trace.decisions == b.trace.decisions
    assert structural_equal(a.mod, b.mod)
    programs = {json.dumps(stochastic_mm_relu(s).trace.as_json()["decisions"])
                for s in range(8)}
    assert len(programs) > 1  # the seed matters


def test_seed_and_fork_seed():
    sch = mm(seed=5)
    forked = sch.fork_seed()
    assert isinstance(forked, int) and forked != sch.fork_seed()  # fork_seed advances
    sch.seed(42)
    first = [sch.fork_seed() for _ in range(3)]
    sch.seed(42)
    assert [sch.fork_seed() for _ in range(3)] == first
    # a forked seed makes another schedule reproducible
    x, y = stochastic_schedule_mm(mm(seed=forked)), stochastic_schedule_mm(mm(seed=forked))
    assert x.trace.decisions == y.trace.decisions
    with pytest.raises(TypeError, match="seed must be an integer"):
        mm(seed="7")
    with pytest.raises(ValueError, match="non-negative"):
        mm(seed=-5)
    mm(seed=-1)  # -1, like None: a seed from the system's source


@settings(max_examples=6)
@given(seed=st.integers(0, 2 ** 31 - 2))
def test_course_stochastic_schedule_is_correct_and_replays(seed, monkeypatch_module):
    sch = stochastic_schedule_mm(mm(seed))
    (inst, tile), = sch.trace.decisions.items()
    assert inst.kind == "SamplePerfectTile" and math.prod(tile) == 16 and tile[1] <= 16
    assert [lp.extent.value for lp in [sch.get(x) for x in sch.get_loops(sch.get_block(
        "C_update"))]] == [16, tile[0], 16, tile[1]]
    run_and_check(sch.mod, "matmul", MM)
    _assert_replays(sch, monkeypatch_module)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _assert_replays(sch: Schedule, monkeypatch) -> None:
    """JSON, URL token, engine Python and the TVM/course exports (run by a stand-in
    ``tvm``) all rebuild the same program with the same decisions, on schedules seeded
    differently (so only the recorded decisions can make them agree)."""
    doc = json.loads(json.dumps(sch.trace.as_json()))
    for n, tr in enumerate((Trace.from_json(doc), Trace.decode(sch.trace.encode()))):
        target = Schedule(sch.original_mod, seed=1000 + n)
        tr.apply_to_schedule(target)
        assert structural_equal(target.mod, sch.mod)
        assert target.trace == sch.trace
    target = Schedule(sch.original_mod, seed=2000)
    exec(sch.trace.as_python(), {"sch": target})  # our own generated text
    assert structural_equal(target.mod, sch.mod) and target.trace == sch.trace
    for dialect in ("tvm", "course"):
        target = apply_exported(sch.trace.export(dialect),
                                Schedule(sch.original_mod, seed=3000), monkeypatch)
        assert structural_equal(target.mod, sch.mod)
        assert target.trace.decisions == sch.trace.decisions


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_all_three_samplers_build_correct_programs_that_replay(seed, monkeypatch):
    sch = stochastic_mm_relu(seed)
    kinds = [i.kind for i in sch.trace.decisions]
    assert kinds == ["SamplePerfectTile", "SamplePerfectTile", "SampleComputeLocation",
                     "SampleCategorical"]
    run_and_check(sch.mod, "mm_relu", MM)
    _assert_replays(sch, monkeypatch)


# ---------------------------------------------------------------------------- values
def test_sampled_values_are_handles_usable_as_integers():
    sch = mm(seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    v0, v1 = sch.sample_perfect_tile(j, n=2, decision=[4, 4])
    assert isinstance(v0, ExprRV) and (sch.get(v0), sch.get(v1)) == (4, 4)
    j0, j1 = sch.split(j, factors=[v0, v1])
    assert sch.get(j1).extent.value == 4
    u = sch.sample_categorical([0, 16, 64], [0.2, 0.3, 0.5], decision=2)
    sch.annotate(i, "pragma_auto_unroll_max_step", u)
    assert dict(sch.get(i).annotations)["pragma_auto_unroll_max_step"] == 64
    assert "sch.split(l2, factors=[v4, v5])" in sch.trace.as_python()
    assert 'sch.annotate(l1, "pragma_auto_unroll_max_step", v8)' in sch.trace.as_python()
    run_and_check(sch.mod, "matmul", MM)


def test_sampled_values_are_refused_where_a_value_must_be_plain():
    sch = mm(seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    v = sch.sample_categorical([1], [1.0])
    with pytest.raises(ScheduleError, match="must be a plain value"):
        sch.compute_at(sch.get_block("C"), i, index=v)
    with pytest.raises(ScheduleError, match="must be a block handle, got 1"):
        sch.get_loops(v)
    other = mm(seed=3)
    with pytest.raises(ScheduleError, match="belongs to another schedule"):
        other.split(other.get_loops(other.get_block("C"))[1], factors=[None, v])


def test_compute_location_marks_root_and_inline():
    src = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''
    mod = engine.parse(src)
    results = {}
    for decision in (-2, -1, 0, 1):
        sch = Schedule(mod, seed=0)
        b = sch.get_block("B")
        loc = sch.sample_compute_location(b, decision=decision)
        assert isinstance(loc, LoopRV)
        sch.compute_at(b, loc, preserve_unit_loops=True)
        results[decision] = sch
    inlined = results[-2].mod.script()
    assert 'T.block("B")' not in inlined and "A[vi, vj] * T.float32(2) + T.float32(1)" in inlined
    assert structural_equal(results[-1].mod, mod)                         # left at the root
    assert results[-1].get(results[-1].sample_compute_location(
        results[-1].get_block("B"), decision=-1)) is None
    for d in (0, 1):  # under C's loop i (0) or j (1), unit loops preserved
        loops = [results[d].get(x) for x in results[d].get_loops(results[d].get_block("B"))]
        assert len(loops) == 3 + d and loops[0].loop_var.name == "i"
    x = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    for sch in results.values():
        out = np.zeros((8, 8), np.float32)
        engine.build(sch.mod)["main"](x, out)
        np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)
    sch = Schedule(mod, seed=0)
    with pytest.raises(ScheduleError, match=r"5 is not a legal compute location of block B.*"
                       r"legal: -2, -1, 0, 1"):
        sch.sample_compute_location(sch.get_block("B"), decision=5)


# ---------------------------------------------------------------------------- decisions
def test_with_decision_changes_one_and_schedule_from_trace_applies_it():
    sch = stochastic_mm_relu(4)
    trace = sch.trace
    tile_j = [i for i in trace.decisions if i.kind == "SamplePerfectTile"][1]
    other = [2, 8] if trace.get_decision(tile_j) != [2, 8] else [8, 2]
    new = trace.with_decision(tile_j, other)
    assert new.get_decision(tile_j) == other and trace.get_decision(tile_j) != other
    others = {k: v for k, v in trace.decisions.items() if k != tile_j}
    assert {k: v for k, v in new.decisions.items() if k != tile_j} == others
    got = schedule_from_trace(sch.original_mod, new, workload=sch.workload)
    assert got.trace.get_decision(tile_j) == other
    run_and_check(got.mod, "mm_relu", MM)
    again = schedule_from_trace(sch.original_mod, new, seed=99)
    assert structural_equal(again.mod, got.mod)
    # an illegal combination is refused with the reason, never repaired
    bad = trace.with_decision(tile_j, [3, 5])
    with pytest.raises(ScheduleError, match=r"the decision \[3, 5\] multiplies to 15, but the "
                       r"loop's extent is 16"):
        schedule_from_trace(sch.original_mod, bad)
    with pytest.raises(TraceError, match="has 2 factors, got 3"):
        trace.with_decision(tile_j, [1, 2, 8])
    with pytest.raises(TraceError, match="samples nothing"):
        trace.with_decision(0, 3)
    with pytest.raises(TraceError, match="no instruction 99"):
        trace.with_decision(99, 3)


def test_with_decision_drops_postproc_like_tvm():
    sch = mm(seed=1)
    j = sch.get_loops(sch.get_block("C"))[1]
    sch.sample_perfect_tile(j, n=2)
    sch.enter_postproc()
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    assert len(sch.trace.with_decision(2, [4, 4])) == 3
    assert len(sch.trace.with_decision(2, [4, 4], remove_postproc=False)) == 7


def test_traces_without_sampling_keep_their_documents():
    sch = fresh("mm_relu")
    sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[None, 4])
    doc = sch.trace.as_json()
    assert list(doc) == ["format", "version", "workload", "insts"]
    assert sch.trace.decisions == {}
    assert "decision" not in sch.trace.export("tvm")


def _doc_with(decisions):
    doc = json.loads(json.dumps(stochastic_schedule_mm(mm(0)).trace.as_json()))
    doc["decisions"] = decisions
    return doc


@pytest.mark.parametrize("decisions,msg", [
    ([[2, [3, 5]]], r"the decision \[3, 5\] multiplies to 15, but the loop's extent is 16"),
    ([[2, [4, 2, 2]]], "has 2 factors, got 3"),
    ([[2, [0, 16]]], "list of positive integers"),
    ([[2, [-1, 16]]], "list of positive integers"),
    ([[2, "8"]], "list of positive integers"),
    ([[0, 3]], "samples nothing"),
    ([[9, [4, 4]]], "names instruction 9"),
    ([[2, [4, 4]], [2, [4, 4]]], "two decisions"),
    ([[2]], r"\[instruction index, decision\]"),
    ("x", "must be a list"),
])
def test_hostile_decisions_are_refused_with_a_plain_message(decisions, msg):
    doc = _doc_with(decisions)
    target = mm(0)
    mod = target.mod
    with pytest.raises(TraceError, match=msg):
        Trace.from_json(doc).apply_to_schedule(target)
    token = base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")
    with pytest.raises(TraceError, match=msg):  # the same document from a link
        engine.schedule.replay("matmul", MM, token)
    assert target.mod is mod and len(target.trace) == 0


def test_categorical_decisions_are_checked():
    sch = mm(0)
    with pytest.raises(ScheduleError, match=r"indexes its 2 candidates \(0 to 1\), got 2"):
        sch.sample_categorical([1, 2], [0.5, 0.5], decision=2)
    with pytest.raises(ScheduleError, match="one per candidate"):
        sch.sample_categorical([1, 2], [1.0])
    with pytest.raises(ScheduleError, match="all zero"):
        sch.sample_categorical([1, 2], [0, 0])
    with pytest.raises(ScheduleError, match="finite number >= 0"):
        sch.sample_categorical([1, 2], [float("nan"), 1])
    assert len(sch.trace) == 0


def test_sample_perfect_tile_arguments_are_checked():
    sch = mm(0)
    j = sch.get_loops(sch.get_block("C"))[1]
    with pytest.raises(ScheduleError, match="n, the number of factors"):
        sch.sample_perfect_tile(j, n=0)
    with pytest.raises(ScheduleError, match="max_innermost_factor must be"):
        sch.sample_perfect_tile(j, n=2, max_innermost_factor=0)
    with pytest.raises(ScheduleError, match=r"multiplies to 8, but the loop's extent is 16"):
        sch.sample_perfect_tile(j, n=2, decision=[2, 4])
    assert len(sch.trace) == 2  # the two queries


# ---------------------------------------------------------------------------- TVM traces
TVM_SAMPLED = [[
    ["GetSBlock", [], ["C", "matmul"], ["b0"]],
    ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
    ["SamplePerfectTile", ["l2"], [2, 16], ["v4", "v5"]],
    ["Split", ["l2", "v4", "v5"], [1, 0], ["l6", "l7"]],
    ["Reorder", ["l1", "l6", "l3", "l7"], [], []],
    ["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v8"]],
    ["Annotate", ["b0", "v8"], ["meta_schedule.unroll_explicit"], []],
    ["DecomposeReduction", ["b0", "l3"], [], ["b9"]],
], [[2, [4, 4]], [5, 1]]]


def test_a_tvm_trace_with_sampling_decisions_imports_and_replays():
    tr = Trace.from_json(TVM_SAMPLED)
    assert list(tr.decisions.values()) == [[4, 4], 1]
    sch = mm(0)
    tr.apply_to_schedule(sch)
    expected = mm(0)
    b0 = expected.get_block("C")
    l1, l2, l3 = expected.get_loops(b0)
    l6, l7 = expected.split(l2, factors=[4, 4])
    expected.reorder(l1, l6, l3, l7)
    expected.annotate(b0, "meta_schedule.unroll_explicit", 16)
    expected.decompose_reduction(b0, l3)
    assert structural_equal(sch.mod, expected.mod)
    run_and_check(sch.mod, "matmul", MM)
    # without its decisions the trace samples (from the schedule's seed), still correct
    free = Trace.from_json([TVM_SAMPLED[0], []])
    assert free.decisions == {}
    s1, s2 = mm(8), mm(8)
    free.apply_to_schedule(s1)
    free.apply_to_schedule(s2)
    assert s1.trace.decisions == s2.trace.decisions and len(s1.trace.decisions) == 2
    run_and_check(s1.mod, "matmul", MM)


def test_sampling_in_a_module_of_several_functions():
    """sample_categorical acts on no function, so it needs no func_name."""
    mod = engine.workloads.get("matmul", **MM)
    two = engine.ir.IRModule.from_funcs(mod["matmul"], engine.workloads.get(
        "relu", **SMALL["relu"])["relu"])
    sch = Schedule(two, seed=0)
    assert sch.get(sch.sample_categorical([7], [1.0])) == 7


def test_a_trace_is_built_from_its_instructions_and_decisions():
    trace = stochastic_mm_relu(6).trace
    assert Trace(trace.insts, trace.workload, trace.decisions) == trace
    pairs = [[trace.insts.index(i), d] for i, d in trace.decisions.items()]
    assert Trace(trace.insts, trace.workload, pairs) == trace
    assert trace.truncate(3).decisions == {i: d for i, d in trace.decisions.items()
                                          if trace.insts.index(i) < 3}
    assert Trace(trace.insts, trace.workload) != trace  # decisions are part of a trace


@pytest.mark.parametrize("name,block", [("conv2d_relu", "pad"), ("conv2d_relu", "conv"),
                                        ("softmax", "T_softmax_exp"), ("mlp", "relu0")])
def test_every_offered_compute_location_builds_a_correct_program(name, block):
    """The locations sample_compute_location offers (TVM's CollectComputeLocation) are
    all legal: each one, given to compute_at, builds a program that matches numpy; any
    other decision is refused with the list of legal ones."""
    offered = []
    for decision in range(-2, 8):
        sch = fresh(name)
        b = sch.get_block(block)
        try:
            loc = sch.sample_compute_location(b, decision=decision)
        except ScheduleError as e:
            assert "is not a legal compute location" in str(e) and "legal: " in str(e)
            continue
        offered.append(decision)
        sch.compute_at(b, loc, preserve_unit_loops=True)
        run_and_check(sch.mod, name, SMALL[name])
    assert -1 in offered and len(offered) >= 2, offered
    seen = set()
    for seed in range(12):  # sampling draws only offered locations
        sch = fresh(name)
        sch.seed(seed)
        sch.sample_compute_location(sch.get_block(block))
        seen.update(sch.trace.decisions.values())
    assert seen <= set(offered) and len(seen) >= 2


def test_the_replay_command_reads_a_tvm_trace_with_decisions():
    """``python -m engine replay`` (engine.lessons.runner): a TVM list with decisions
    keeps them when the workload is named on the command line, and every prefix replays
    the same way (also without decisions: the runner's schedules have a fixed seed)."""
    from engine.lessons import runner
    trace = runner.load_trace(json.dumps(TVM_SAMPLED), workload="matmul")
    assert list(trace.decisions.values()) == [[4, 4], 1]
    steps = list(runner.replay_steps(trace, params=MM))
    final = mm(0)
    Trace.from_json(TVM_SAMPLED).apply_to_schedule(final)
    assert structural_equal(steps[-1].mod, final.mod)
    free = runner.load_trace(json.dumps([TVM_SAMPLED[0], []]), workload="matmul")
    runs = [list(runner.replay_steps(free, params=MM)) for _ in range(2)]
    assert all(structural_equal(a.mod, b.mod) for a, b in zip(*runs))
