"""sample_partitioned_tile (TVM's SamplePartitionedTile): the sampled factors meet the
constraint (product = extent, the inner part's product a multiple of innerpart_factor) and
are distributed as TVM's rejection sampling distributes them; a split with them keeps the
program's meaning; decisions are deterministic under the seed, recorded and replayed by
every trace form; bad arguments and decisions are refused with a sentence."""
from __future__ import annotations

import base64
import collections
import itertools
import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.arith.factor import divisors
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace, TraceError, schedule_from_trace
from engine.schedule.python_trace import apply_python_trace
from engine.schedule.primitives.sampling import draw_partitioned_tile
from semantics import assert_computes_exactly
from test_schedule_support import apply_exported, refused

MM = {"n": 16}


def mm(seed=None):
    return Schedule(engine.workloads.get("matmul", **MM), workload=("matmul", MM), seed=seed)


def ok(tile, extent, n, pos, factor) -> bool:
    return len(tile) == n and min(tile) >= 1 and math.prod(tile) == extent and \
        math.prod(tile[pos:]) % factor == 0


def tilings(extent: int, n: int):
    """Every ordered tiling of ``extent`` into ``n`` factors."""
    if n == 1:
        yield (extent,)
        return
    for d in divisors(extent):
        for rest in tilings(extent // d, n - 1):
            yield (d,) + rest


# ---------------------------------------------------------------------------- the sampler
@st.composite
def problems(draw):
    extent = draw(st.one_of(st.integers(1, 5000),
                            st.sampled_from([2 ** 40, 3 ** 20 * 7, 2 ** 62, (1 << 63) - 1])))
    n = draw(st.integers(1, 6))
    pos = draw(st.integers(0, n - 1))
    factor = draw(st.sampled_from(divisors(extent, at_most=10 ** 6)))
    return extent, n, pos, factor


@given(problem=problems(), seed=st.integers(0, 2 ** 31 - 2))
def test_sampled_factors_always_meet_the_constraint(problem, seed):
    extent, n, pos, factor = problem
    tile = draw_partitioned_tile(random.Random(seed), extent, n, pos, factor)
    assert ok(tile, extent, n, pos, factor), (problem, tile)


@pytest.mark.parametrize("extent,n,pos,factor", [(24, 3, 1, 4), (36, 3, 2, 6), (16, 4, 2, 8),
                                                 (12, 2, 1, 1), (8, 3, 0, 8)])
def test_every_valid_tiling_is_drawn_about_equally_often(extent, n, pos, factor):
    """TVM draws perfect tilings (each ordered tiling equally likely) until one meets the
    constraint: each valid tiling equally likely. The sampler draws every one of them, none
    other, each about as often."""
    valid = [t for t in tilings(extent, n) if ok(list(t), extent, n, pos, factor)]
    rng = random.Random(1)
    draws = 300 * len(valid)
    counts = collections.Counter(tuple(draw_partitioned_tile(rng, extent, n, pos, factor))
                                 for _ in range(draws))
    assert set(counts) == set(valid)
    for t in valid:  # 300 expected each: 5 standard deviations either side
        assert 300 - 5 * math.sqrt(300) < counts[t] < 300 + 5 * math.sqrt(300), (t, counts[t])


# ---------------------------------------------------------------------------- the primitive
def _program(extent: int) -> engine.ir.IRModule:
    """A row sum whose reduction loop has the extent asked for (a split of it must keep
    the order of the additions, and an element of C each row)."""
    return engine.parse(f'''
@T.prim_func
def main(A: T.Buffer((3, {extent}), "float32"), C: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, {extent}):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk] * T.float32(2)
''')


@settings(max_examples=12, deadline=None)
@given(extent=st.sampled_from([1, 6, 8, 12, 16, 18, 30, 32, 48]), n=st.integers(2, 4),
       data=st.data(), seed=st.integers(0, 2 ** 31 - 2))
def test_a_split_with_the_sampled_factors_keeps_the_meaning(extent, n, data, seed):
    pos = data.draw(st.integers(0, n - 1))
    factor = data.draw(st.sampled_from(divisors(extent)))
    mod = _program(extent)
    sch = Schedule(mod, seed=seed)
    i, k = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_partitioned_tile(k, n=n, partition_pos=pos, innerpart_factor=factor)
    values = [sch.get(v) for v in factors]
    assert ok(values, extent, n, pos, factor)
    loops = sch.split(k, factors=factors)
    assert [sch.get(lp).extent.value for lp in loops] == values
    assert_computes_exactly(mod, sch.mod, "main")
    # the same seed draws the same factors
    again = Schedule(mod, seed=seed)
    again.sample_partitioned_tile(again.get_loops(again.get_block("C"))[1], n=n,
                                  partition_pos=pos, innerpart_factor=factor)
    assert list(again.trace.decisions.values()) == [values]


def stochastic(seed):
    sch = mm(seed)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1, j2 = sch.split(j, factors=sch.sample_partitioned_tile(
        j, n=3, partition_pos=1, innerpart_factor=4))
    k0, k1 = sch.split(k, factors=sch.sample_partitioned_tile(k, n=2, partition_pos=1,
                                                              innerpart_factor=2))
    sch.reorder(i, j0, k0, j1, k1, j2)
    return sch


def test_decisions_are_recorded_and_every_trace_form_replays_them(monkeypatch):
    sch = stochastic(5)
    (t1, d1), (t2, d2) = sch.trace.decisions.items()
    assert t1.kind == t2.kind == "SamplePartitionedTile"
    assert ok(d1, 16, 3, 1, 4) and ok(d2, 16, 2, 1, 2)
    assert f"partition_pos=1, innerpart_factor=4, decision={d1}" in sch.trace.as_python()
    assert stochastic(5).trace == sch.trace  # the seed decides
    assert_computes_exactly(sch.original_mod, sch.mod, "matmul")
    doc = json.loads(json.dumps(sch.trace.as_json()))
    for n, tr in enumerate((Trace.from_json(doc), Trace.decode(sch.trace.encode()))):
        target = Schedule(sch.original_mod, seed=1000 + n)  # another seed: only the
        tr.apply_to_schedule(target)                          # decisions can agree
        assert structural_equal(target.mod, sch.mod) and target.trace == sch.trace
    target = Schedule(sch.original_mod, seed=2000)
    exec(sch.trace.as_python(), {"sch": target})  # our own generated text
    assert structural_equal(target.mod, sch.mod) and target.trace == sch.trace
    for dialect in ("tvm", "course"):
        text = sch.trace.export(dialect)
        assert "sch.sample_partitioned_tile(loop=l2, n=3, partition_pos=1, " \
               f"innerpart_factor=4, decision={d1})" in text
        target = apply_exported(text, Schedule(sch.original_mod, seed=3000), monkeypatch)
        assert structural_equal(target.mod, sch.mod)
        assert target.trace.decisions == sch.trace.decisions
    target = Schedule(sch.original_mod, seed=4000)  # read as data, never run
    apply_python_trace(sch.trace.export("tvm"), target)
    assert structural_equal(target.mod, sch.mod)


def test_with_decision_and_schedule_from_trace():
    sch = stochastic(2)
    inst = next(iter(sch.trace.decisions))
    other = [1, 4, 4] if sch.trace.get_decision(inst) != [1, 4, 4] else [4, 1, 4]
    got = schedule_from_trace(sch.original_mod, sch.trace.with_decision(inst, other), seed=9)
    assert got.trace.get_decision(inst) == other
    assert_computes_exactly(sch.original_mod, got.mod, "matmul")
    # a decision that breaks the constraint is refused with the reason, never repaired
    bad = sch.trace.with_decision(inst, [8, 2, 1])
    with pytest.raises(ScheduleError, match=r"inner part \[2, 1\] \(from partition_pos=1\) "
                       r"multiplies to 2, which is not a multiple of innerpart_factor=4"):
        schedule_from_trace(sch.original_mod, bad)
    with pytest.raises(TraceError, match="SamplePartitionedTile decision with n=3 has 3 "
                       "factors, got 2"):
        sch.trace.with_decision(inst, [4, 4])


TVM_TRACE = [[
    ["GetSBlock", [], ["C", "matmul"], ["b0"]],
    ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
    ["SamplePartitionedTile", ["l2"], [3, 1, 8], ["v4", "v5", "v6"]],
    ["Split", ["l2", "v4", "v5", "v6"], [1, 0], ["l7", "l8", "l9"]],
], [[2, [2, 1, 8]]]]


def test_a_tvm_trace_imports_and_replays():
    tr = Trace.from_json(TVM_TRACE)
    assert list(tr.decisions.values()) == [[2, 1, 8]]
    sch = mm(0)
    tr.apply_to_schedule(sch)
    expected = mm(0)
    expected.split(expected.get_loops(expected.get_block("C"))[1], factors=[2, 1, 8])
    assert structural_equal(sch.mod, expected.mod)
    assert sch.trace.as_json()["insts"][2] == ["SamplePartitionedTile", ["l2"], [3, 1, 8],
                                               ["v4", "v5", "v6"]]
    # without the decision it samples, meeting the constraint
    free = mm(3)
    Trace.from_json([TVM_TRACE[0], []]).apply_to_schedule(free)
    assert ok(list(free.trace.decisions.values())[0], 16, 3, 1, 8)


@pytest.mark.parametrize("decisions,msg", [
    ([[2, [2, 1, 4]]], r"the decision \[2, 1, 4\] multiplies to 8, but the loop's extent is 16"),
    ([[2, [8, 2, 1]]], "which is not a multiple of innerpart_factor=8"),
    ([[2, [16, 1]]], "has 3 factors, got 2"),
    ([[2, [-1, 1, 1]]], "-1 is only for a loop of symbolic extent"),
    ([[2, "x"]], "list of positive integers"),
])
def test_hostile_decisions_are_refused(decisions, msg):
    doc = [TVM_TRACE[0], decisions]
    target = mm(0)
    before = target.mod
    with pytest.raises((TraceError, ScheduleError), match=msg):
        Trace.from_json(doc).apply_to_schedule(target)
    assert target.mod is before and len(target.trace) == 0
    ours = Schedule(engine.workloads.get("matmul", **MM), workload=("matmul", MM))
    Trace.from_json(TVM_TRACE).apply_to_schedule(ours)
    good = ours.trace.as_json()
    good["decisions"] = decisions
    token = base64.urlsafe_b64encode(json.dumps(good).encode()).decode().rstrip("=")
    with pytest.raises(TraceError, match=msg):  # the same decision from a link
        engine.schedule.replay("matmul", MM, token)


def test_bad_arguments_are_refused_with_a_sentence():
    sch = mm(0)
    j = sch.get_loops(sch.get_block("C"))[1]
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=0), "n, the number of factors, "
            "must be an integer from 1 to 10, got 0")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=11), "from 1 to 10")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=3, partition_pos=3),
            "partition_pos must be the position of one of the 3 factors (0 to 2)")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=3, partition_pos=-1), "got -1")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=3, innerpart_factor=0),
            "innerpart_factor must be a positive integer, got 0")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=3, partition_pos=1,
                                                     innerpart_factor=3),
            "innerpart_factor=3 does not divide the loop's extent 16", "e.g. 2")
    refused(sch, lambda: sch.sample_partitioned_tile(j, n=2, partition_pos=1,
                                                     innerpart_factor=4, decision=[8, 2]),
            "which is not a multiple of innerpart_factor=4", "e.g. [4, 4]")
    c = sch.get_block("C")
    refused(sch, lambda: sch.sample_partitioned_tile(c, n=2), "must be a loop handle")
    # n=1 is the loop itself
    assert [sch.get(v) for v in sch.sample_partitioned_tile(j, n=1, innerpart_factor=4)] == [16]


SYMBOLIC = """
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, (n, 8), "float32")
    for i, j in T.grid(n, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
"""


def test_a_symbolic_extent_is_tiled_trivially_only_without_an_inner_factor():
    mod = engine.parse(SYMBOLIC)
    sch = Schedule(mod, seed=0)
    i, j = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.sample_partitioned_tile(i, n=2, partition_pos=1,
                                                     innerpart_factor=4),
            "the loop's extent n is symbolic", "innerpart_factor=1")
    factors = sch.sample_partitioned_tile(i, n=3, partition_pos=1)
    assert factors[0] is None and [sch.get(v) for v in factors[1:]] == [1, 1]
    assert list(sch.trace.decisions.values()) == [[-1, 1, 1]]
    sch.split(i, factors=factors)
    replayed = Schedule(mod, seed=5)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, sch.mod)


def test_the_kind_is_tvms_and_pure():
    from engine.schedule import InstructionKind
    kind = InstructionKind.get("SamplePartitionedTile")
    assert kind.name == "SamplePartitionedTile" and kind.is_pure
    from engine import tvm
    sch = tvm.s_tir.Schedule(engine.workloads.get("matmul", **MM)["matmul"], seed=1)
    j = sch.get_loops(sch.get_sblock("C"))[1]
    values = [sch.get(v) for v in sch.sample_partitioned_tile(j, 4, 2, 4)]
    assert ok(values, 16, 4, 2, 4)


def test_all_small_problems_reach_only_valid_tilings():
    """Exhaustively: for every small extent, n, partition_pos and dividing factor, a few
    seeds draw only valid tilings (the hypothesis test's corner cases, all of them)."""
    for extent, n in itertools.product(range(1, 25), range(1, 4)):
        for pos, factor in itertools.product(range(n), divisors(extent)):
            for seed in range(3):
                tile = draw_partitioned_tile(random.Random(seed), extent, n, pos, factor)
                assert ok(tile, extent, n, pos, factor), (extent, n, pos, factor, tile)
