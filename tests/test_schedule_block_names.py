"""Blocks by name, as TVM's primitives take them wherever they take a block
(``sch.cache_read("B", 0, "local")``, ``sch.get_loops("matmul")``): the same program as
with the block's handle, and a trace that replays (the look-up is a GetBlock step, as TVM
records it). TVM's tests run most primitives both ways (their ``use_block_name`` fixture)."""
from __future__ import annotations

import pytest

import engine
from engine.schedule import Schedule, ScheduleError, Trace


def mm_relu():
    return Schedule(engine.workloads.get("mm_relu", n=16), workload=("mm_relu", {"n": 16}))


CASES = {
    "get_loops": lambda s, b: s.get_loops(b("Y")),
    "get_consumers": lambda s, b: s.get_consumers(b("Y")),
    "cache_read": lambda s, b: s.cache_read(b("Y"), 0, "global"),
    "cache_write": lambda s, b: s.cache_write(b("Y"), 0, "global"),
    "reverse_compute_at": lambda s, b: s.reverse_compute_at(b("C"), s.get_loops(b("Y"))[1]),
    "compute_at": lambda s, b: s.compute_at(b("Y"), s.get_loops(b("C"))[1]),
    "decompose_reduction": lambda s, b: s.decompose_reduction(b("Y"), s.get_loops(b("Y"))[2]),
    "set_scope": lambda s, b: s.set_scope(b("Y"), 0, "global"),
    "annotate a block": lambda s, b: s.annotate(b("Y"), "note", "x"),
    "storage_align": lambda s, b: s.storage_align(b("Y"), 0, 0, 16, 1),
    "transform_layout": lambda s, b: s.transform_layout(b("Y"), ("write", 0),
                                                        "lambda i, j: (j, i)"),
    "get_producers": lambda s, b: s.get_producers(b("C")),
    "cache_read for some consumers": lambda s, b: s.cache_read(b("C"), 0, "global",
                                                               consumer_blocks=["C"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_block_given_by_name_is_the_block(case):
    by_handle, by_name = mm_relu(), mm_relu()
    CASES[case](by_handle, by_handle.get_block)
    CASES[case](by_name, lambda name: name)
    assert engine.structural_equal(by_handle.mod, by_name.mod)
    replayed = mm_relu()
    Trace.from_json(by_name.trace.as_json()).apply_to_schedule(replayed)
    assert engine.structural_equal(replayed.mod, by_name.mod)


def test_an_unknown_block_name_is_a_sentence():
    sch = mm_relu()
    with pytest.raises(ScheduleError, match="nope"):
        sch.cache_read("nope", 0, "global")
