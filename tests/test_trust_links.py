"""Trust, round two: what a link makes the web process do is bounded in advance.

Each test reproduces a link an attacker sent (issue: "no request does unbounded work in
the web process"): a sampling step on a huge prime extent (trial division kept a request
thread busy for 64 s), fuse + split rounds that doubled the loop names (a 220 MB page),
and a chain of inlined stages that doubles the program at every step. The work runs in a
forked child with a hang guard (:mod:`bounded_work`): a regression fails instead of hanging.
"""
from __future__ import annotations

import base64
import json
import math
import re

import pytest
from hypothesis import given, strategies as st

import engine
from app.kept import MiB
from app.web.session import encode_src
from bounded_work import ends_within
from engine.arith.factor import FactorLimitError, divisors, is_prime, prime_factors
from engine.schedule import Schedule, WorkBudget, WorkBudgetError, work_budget
from engine.schedule.primitives._common import MAX_GENERATED_NAME
from inline_service import make_test_app

HUGE_PRIME = (1 << 61) - 1


def token_of(insts, workload=None) -> str:
    doc = {"format": "schedule-explorer/trace", "version": 1, "workload": workload,
           "insts": insts}
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def one_loop_program(extent: int) -> str:
    return f'''@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.func_attr({{"global_symbol": "f", "tir.noalias": True}})
    for i in T.serial({extent}):
        with T.block("B"):
            vi = T.axis.spatial({extent}, i)
            A[0] = A[0] + 1.0
'''


def doubling_chain(stages: int) -> str:
    """``B_k[i] = B_{k-1}[i] + B_{k-1}[i]``: inlining every stage doubles the expression."""
    lines = ['@T.prim_func',
             'def f(A: T.Buffer((4,), "float32"), Z: T.Buffer((4,), "float32")):',
             '    T.func_attr({"global_symbol": "f", "tir.noalias": True})']
    lines += [f'    B{k} = T.alloc_buffer((4,))' for k in range(stages)]
    prev = "A"
    for k in range(stages):
        lines += ['    for i in range(4):', f'        with T.block("S{k}"):',
                  '            vi = T.axis.spatial(4, i)', f'            B{k}[vi] = {prev}[vi] + {prev}[vi]']
        prev = f"B{k}"
    lines += ['    for i in range(4):', '        with T.block("Z"):',
              '            vi = T.axis.spatial(4, i)', f'            Z[vi] = {prev}[vi]']
    return "\n".join(lines) + "\n"


def get(url: str, config: dict | None = None) -> tuple[int, str]:
    client = make_test_app(config).test_client()
    r = client.get(url)
    return r.status_code, r.get_data(as_text=True)


# --------------------------------------------------------------------------- factoring
def test_factoring_a_huge_prime_or_semiprime_is_bounded():
    got = ends_within(20, lambda: [prime_factors(HUGE_PRIME),
                                   prime_factors(4294967291 * 4294967279),
                                   prime_factors((1 << 64) - 59)])
    assert got == [[(HUGE_PRIME, 1)], [(4294967279, 1), (4294967291, 1)],
                   [((1 << 64) - 59, 1)]]
    with pytest.raises(FactorLimitError):
        prime_factors(1 << 64)


@given(st.integers(min_value=1, max_value=(1 << 64) - 1))
def test_prime_factors_multiply_back_to_the_number(n):
    fs = prime_factors(n)
    assert math.prod(p ** e for p, e in fs) == n
    assert all(is_prime(p) and e >= 1 for p, e in fs)
    assert [p for p, _ in fs] == sorted({p for p, _ in fs})


@given(st.integers(min_value=1, max_value=5000), st.integers(min_value=1, max_value=64))
def test_divisors_are_every_divisor(n, at_most):
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(n, at_most=at_most) == [d for d in divisors(n) if d <= at_most]


# --------------------------------------------------------------------------- sampling links
def test_a_link_sampling_tiles_of_a_huge_prime_extent_is_answered_at_once():
    """A 519-character link: a loop of extent 2**61 - 1 and a SamplePerfectTile without a
    decision took 64 s of the server's CPU (trial division, again on each of 2000 draws)."""
    insts = [["GetBlock", [], ["B", "f"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]],
             ["SamplePerfectTile", ["l1"], [2, 16], ["v2", "v3"]]]
    url = f"/explore/custom?src={encode_src(one_loop_program(HUGE_PRIME))}&t={token_of(insts)}"
    assert len(url) < 700
    status, page = ends_within(60, get, url)
    assert status == 200, page[:500]
    assert "sample_perfect_tile" in page
    status, doc = ends_within(60, get, url.replace("/explore/custom?", "/explore/custom/export/json?"))
    assert status == 200 and json.loads(doc)["decisions"] == [[2, [HUGE_PRIME, 1]]]


def test_sampling_refuses_an_extent_beyond_int64_with_a_sentence():
    sch = Schedule(engine.parse(one_loop_program(1 << 63)))
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(engine.ScheduleError, match="beyond int64"):
        sch.sample_perfect_tile(i, n=2)


# --------------------------------------------------------------------------- names
def fuse_split_rounds(rounds: int):
    sch = Schedule(engine.workloads.get("mm_relu", n=128), workload=("mm_relu", {"n": 128}))
    i, j, _ = sch.get_loops(sch.get_block("Y"))
    for _ in range(rounds):
        i, j = sch.split(sch.fuse(i, j), factors=[None, 128])
    return sch


def test_loop_names_stay_short_through_fuse_and_split_rounds():
    """Each round of fuse + split doubled the names (TVM's scheme joins the fused names):
    20 rounds made a 220 MB page."""
    sch = fuse_split_rounds(12)
    names = [lp.loop_var.name for lp in engine.ir.collect(sch.mod["mm_relu"].body,
                                                          engine.ir.For)]
    assert max(map(len, names)) <= MAX_GENERATED_NAME + 4, max(names, key=len)
    first = fuse_split_rounds(1).mod.script()
    assert "i_j_fused_0, i_j_fused_1" in first      # TVM's names where they are short
    assert len(sch.mod.script()) < 5000


def test_a_link_of_twenty_fuse_split_rounds_makes_a_small_page():
    sch = fuse_split_rounds(20)
    status, page = ends_within(60, get, f"/explore/mm_relu?t={sch.trace.encode()}")
    assert status == 200 and len(page) < 1 * MiB, len(page)


# --------------------------------------------------------------------------- program size
def inline_all(stages: int) -> list:
    insts = []
    for k in range(stages):
        insts += [["GetBlock", [], [f"S{k}", "f"], [f"b{k}"]],
                  ["ComputeInline", [f"b{k}"], [], []]]
    return insts


def test_a_program_that_doubles_at_every_step_is_refused_at_the_limit():
    """Inlining a chain of 24 stages that each read their producer twice makes 2**24
    copies: the step that would pass max_program_nodes is refused, at once."""
    src = encode_src(doubling_chain(24))
    url = f"/explore/custom?src={src}&t={token_of(inline_all(24))}"
    status, page = ends_within(60, get, url)
    assert status == 400 and "max_program_nodes" in page, page[:400]
    # the same link opened for comparison: the same refusal, not a hang or a 500
    side = url.replace('&', '%26').replace('?', '%3F')
    cmp = f"/compare?a={side}&b={side}"
    status, page = ends_within(60, get, cmp)
    assert status == 400 and "max_program_nodes" in page, page[:400]


def test_the_engine_refuses_the_step_over_the_budget_and_keeps_the_schedule():
    sch = Schedule(engine.parse(doubling_chain(24)))
    with work_budget(WorkBudget(max_nodes=20_000)):
        with pytest.raises(WorkBudgetError) as err:
            for k in range(24):
                sch.compute_inline(sch.get_block(f"S{k}"))
    assert err.value.limit == "max_nodes" and "20000 IR nodes" in str(err.value)
    before = sch.mod.script()
    assert len(sch.trace.insts) > 0 and sch.mod.script() == before   # unchanged


def test_a_replay_over_the_request_cpu_budget_is_refused_naming_the_limit():
    sch = Schedule(engine.workloads.get("conv2d"), workload=("conv2d", {}))
    blk = sch.get_block("conv")
    for _ in range(30):
        loops = sch.get_loops(blk)
        sch.split(loops[-1], factors=[None, 1])
    status, page = get(f"/explore/conv2d?t={sch.trace.encode()}",
                       {"EXPLORER_LIMITS": {"max_request_cpu_s": 0.01}})
    assert status == 400 and "max_request_cpu_s" in page, page[:400]


def test_a_pasted_program_over_the_node_limit_is_refused():
    status, page = get(f"/explore/custom?src={encode_src(doubling_chain(40))}",
                       {"EXPLORER_LIMITS": {"max_program_nodes": 500}})
    assert status == 400 and "max_program_nodes" in page


# --------------------------------------------------------------------------- kept states
def test_the_kept_states_are_bounded_by_bytes():
    from app.web import session as sess

    client = make_test_app().test_client()
    for n in range(16, 16 + 24):
        sch = Schedule(engine.workloads.get("conv2d", size=n), workload=("conv2d", {"size": n}))
        blk = sch.get_block("conv")
        sch.split(sch.get_loops(blk)[-1], factors=[None, 1])
        assert client.get(f"/explore/conv2d?size={n}&t={sch.trace.encode()}").status_code == 200
    for cache in (sess._STATE_CACHE, sess._SCHEDULE_CACHE, sess._MOD_CACHE):
        assert 0 < cache.nbytes <= cache.max_bytes
    assert re.search(r"\d", str(sess._STATE_CACHE.nbytes))
