"""annotate_buffer_access: the declared region used by later primitives, compiled results
against numpy, refusals that leave the schedule untouched, traces (JSON, token, Python,
TVM export re-run on our API, TVM's JSON imported)."""
from __future__ import annotations

import pytest

from engine.schedule import Trace
from engine.schedule.error import TraceError
from test_schedule_blockize import check_traces
from test_schedule_support import SMALL, fresh, refused, run_and_check


def test_annotated_read_region_drives_compute_at(monkeypatch):
    sch = fresh("mm_relu")
    c = sch.get_block("C")
    sch.annotate_buffer_access(c, 0, "read", "lambda vi, vj: [(vi, vi + 1), "
                               "(vj // 4 * 4, vj // 4 * 4 + 4)]")
    sch.annotate_buffer_access(c, "C", "write", lambda vi, vj: (vi, vj))
    text = sch.mod.script()
    assert "T.reads(Y[vi, vj // 4 * 4:vj // 4 * 4 + 4])" in text
    assert 'T.block_attr({"explicit_read_region": [0], "explicit_write_region": [0]})' in text
    sch.compute_at(sch.get_block("Y"), sch.get_loops(c)[1])
    assert "for ax0, ax1 in T.grid(4, 16):" in sch.mod.script()   # the declared 4 columns
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"], use_build=False)
    check_traces(sch, "mm_relu", monkeypatch)


def test_annotating_twice_lists_the_index_once(monkeypatch):
    sch = fresh("matmul")
    c = sch.get_block("C")
    for _ in range(2):
        sch.annotate_buffer_access(c, 1, "read", "lambda i, j, k: [(0, 16), j]")
    text = sch.mod.script()
    assert 'T.block_attr({"explicit_read_region": [1]})' in text
    assert "B[0:16, vj]" in text
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    check_traces(sch, "matmul", monkeypatch)


def test_annotate_buffer_access_refusals_leave_the_schedule_untouched():
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.annotate_buffer_access(c, 5, "read", "lambda i, j, k: [i, k]"),
            "buffer_index=5", "0: A, 1: B")
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "reads", "lambda i, j, k: [i, k]"),
            'buf_type must be "read" or "write"')
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "read", "lambda i, j: [i, j]"),
            "takes 2 parameter(s) but the block has 3 axes")
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "read", "lambda i, j, k: [i]"),
            "gives 1 range(s) but A has 2 dimension(s)")
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "read",
                                                    "lambda i, j, k: [(i, i), k]"), "empty")
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "read",
                                                    "lambda i, j, k: [(i, i, 1), k]"),
            "(begin, end) or one index")
    refused(sch, lambda: sch.annotate_buffer_access(c, 0, "read",
                                                    "lambda i, j, k: [open(i), k]"),
            "not allowed")
    refused(sch, lambda: sch.annotate_buffer_access(c, "Z", "read", "lambda i, j, k: [i, k]"),
            "no buffer named 'Z'")


def test_a_hostile_trace_of_annotate_buffer_access_is_refused():
    doc = [[["GetSBlock", [], ["C", "matmul"], ["b0"]],
            ["AnnotateBufferAccess", ["b0", 0, 0, '"lambda i, j, k: [__import__(i), k]"'],
             [], []]], []]
    trace = Trace.from_json(doc)
    with pytest.raises(TraceError, match="not allowed"):
        trace.as_python()
    sch = fresh("matmul")
    with pytest.raises(Exception, match="not allowed"):
        trace.apply_to_schedule(sch)
    assert len(sch.trace) == 0
