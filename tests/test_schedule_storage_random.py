"""Random sequences mixing the storage, reduction and layout primitives with the loop and
compute-location ones: every accepted sequence compiles and matches numpy (and the
reference interpreter), every refusal leaves the schedule untouched, and the trace replays
to the same program."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.ir import structural_equal
from engine.schedule import Trace
from test_schedule_primitives import _OPS, _blocks, _random_step
from test_schedule_support import SMALL, fresh, run_and_check, try_step

_MINE = ["cache_read", "cache_write", "set_scope", "storage_align", "rfactor",
         "transform_layout"]
_METHOD = {"cache_read": "cache_read", "cache_write": "cache_write"}


def _index_map(ndim: int, pick: int) -> str:
    names = [f"x{d}" for d in range(ndim)]
    outs = list(names)
    if pick % 3 == 0 and ndim >= 2:
        outs[0], outs[-1] = outs[-1], outs[0]
    elif pick % 3 == 1:
        d = pick % ndim
        outs[d:d + 1] = [f"{names[d]} // 2", f"{names[d]} % 2"]
    return f"lambda {', '.join(names)}: ({', '.join(outs)}{',' if len(outs) == 1 else ''})"


def _my_step(sch, op, picks):
    blocks = _blocks(sch)
    b = blocks[picks[0] % len(blocks)]
    blk = sch.get_block(b)
    node = sch.get(blk)
    loops = sch.get_loops(blk)
    scope = ["global", "local"][picks[2] % 2]
    if op == "cache_read":
        n = max(len(node.reads), 1)
        return lambda: sch.cache_read(blk, picks[1] % n, scope)
    if op == "cache_write":
        return lambda: sch.cache_write(blk, 0, scope)
    if op == "set_scope":
        return lambda: sch.set_scope(blk, 0, scope)
    if op == "storage_align":
        nd = node.writes[0].buffer.ndim if node.writes else 1
        return lambda: sch.storage_align(blk, 0, picks[1] % nd, 4, picks[2] % 4)
    if op == "rfactor":
        lp = loops[picks[1] % len(loops)]
        nd = node.writes[0].buffer.ndim if node.writes else 0
        return lambda: sch.rfactor(lp, picks[2] % (nd + 1))
    kind = ["read", "write"][picks[1] % 2]
    regions = node.reads if kind == "read" else node.writes
    if not regions:
        kind, regions = "write", node.writes
    i = picks[2] % len(regions)
    if any(p is regions[i].buffer for p in sch.mod[sch.func_name].params):
        # a parameter's new layout changes the arrays the caller passes: the check here
        # runs the workload's own arrays (tests/test_schedule_layout_semantics.py maps them)
        return lambda: None
    text = _index_map(regions[i].buffer.ndim, picks[1] + picks[2])
    return lambda: sch.transform_layout(blk, (kind, i), text)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=st.sampled_from(sorted(SMALL)),
       steps=st.lists(st.tuples(st.sampled_from(_MINE * 2 + _OPS),
                                st.tuples(st.integers(0, 50), st.integers(0, 50),
                                          st.integers(0, 50))), min_size=1, max_size=5))
def test_random_sequences_with_storage_primitives(name, steps):
    sch = fresh(name)
    for op, picks in steps:
        step = _my_step(sch, op, picks) if op in _MINE else _random_step(sch, op, picks)
        try_step(sch, op, step)
    run_and_check(sch.mod, name, SMALL[name], use_build=False)
    run_and_check(sch.mod, name, SMALL[name])
    again = fresh(name)
    Trace.decode(sch.trace.encode()).apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)
