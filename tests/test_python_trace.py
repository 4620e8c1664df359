"""A trace written as Python (the engine's TVM export, TVM's ``as_python()``) is read back
without being run: the same program, and anything but calls of the schedule's primitives
is refused with the line."""
from __future__ import annotations

import pytest

import engine
from engine.schedule import Schedule, TraceError
from engine.schedule.python_trace import apply_python_trace


def scheduled():
    sch = Schedule(engine.workloads.get("mm_relu", n=16), workload=("mm_relu", {"n": 16}),
                   seed=3)
    b = sch.get_block("Y")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    sch.reorder(j0, k, j1)
    sch.cache_read(b, 0, "global")
    sch.transform_layout(b, ("write", 0), "lambda i, j: (j, i)")
    sch.annotate(j0, "pragma_auto_unroll_max_step", 16)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    return sch


@pytest.mark.parametrize("dialect", ["tvm", "course"])
def test_an_exported_trace_reads_back_to_the_same_program(dialect):
    sch = scheduled()
    again = Schedule(engine.workloads.get("mm_relu", n=16), workload=("mm_relu", {"n": 16}))
    apply_python_trace(sch.trace.export(dialect), again)
    assert engine.structural_equal(again.mod, sch.mod)


@pytest.mark.parametrize("line,words", [
    ("x = 1", "only calls"),
    ("del sch", "not a line"),
    ("b0 = sch.get_block('Y'); __import__('os').system('true')", "only calls"),
    ("b0 = open('/etc/passwd')", "only calls"),
    ("sch.split(l9, factors=[None, 4])", "not defined"),
    ("b0 = sch.nope()", "not a schedule primitive"),
    ("b0 = sch.get_block(name=(1).__class__)", "not a value"),
    ("for x in []: pass", "not a line"),
])
def test_anything_but_primitive_calls_is_refused_naming_the_line(line, words):
    sch = Schedule(engine.workloads.get("mm_relu", n=16))
    with pytest.raises(TraceError, match=words):
        apply_python_trace(line, sch)
