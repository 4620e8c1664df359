"""unsafe_hide_buffer_access (TVM's UnsafeHideBufferAccess): a read region of a buffer that
no block writes leaves the block's T.reads and the program computes what it did; every
other request (a write region, a buffer some block writes or stores into, a position not in
the list) is refused with a sentence and the program kept; the step is recorded and
replayed by every trace form."""
from __future__ import annotations

import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace
from semantics import assert_computes_exactly
from test_schedule_support import assert_round_trips, refused

GATHER = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), IA: T.Buffer((10,), "int32"),
         B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            T.reads(A[0:128], IA[vi])
            T.writes(B[vi])
            B[vi] = A[(IA[vi] % 128 + 128) % 128]
"""

# IA is produced in the function: hiding its region would hide a dependence
PRODUCED = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), J: T.Buffer((10,), "int32"),
         B: T.Buffer((10,), "float32")):
    IA = T.alloc_buffer((10,), "int32")
    for i in range(10):
        with T.block("IA"):
            vi = T.axis.spatial(10, i)
            IA[vi] = (J[vi] % 128 + 128) % 128
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            T.reads(A[0:128], IA[vi])
            T.writes(B[vi])
            B[vi] = A[IA[vi]]
"""


def gather():
    return Schedule(engine.parse(GATHER), seed=0)


def test_a_hidden_read_leaves_t_reads_and_keeps_the_meaning():
    sch = gather()
    before = sch.mod
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [1])
    blk = sch.get(sch.get_block("B"))
    assert [r.buffer.name for r in blk.reads] == ["A"]
    assert [r.buffer.name for r in blk.writes] == ["B"]
    assert "IA[" in sch.mod.script()  # the body still loads the index
    assert_computes_exactly(before, sch.mod)
    assert_round_trips(sch, gather)


def test_hiding_nothing_and_hiding_every_read():
    sch = gather()
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [])
    assert structural_equal(sch.mod, gather().mod)
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [0, 1])
    assert sch.get(sch.get_block("B")).reads == ()
    assert_computes_exactly(gather().mod, sch.mod)


@pytest.mark.parametrize("args,needles", [
    (("write", [0]), ("a write region is never hidden",)),
    (("read", [2]), ("2 is not a position in block B's T.reads (0 to 1; it lists 0: A, 1: IA)",)),
    (("read", [-1]), ("is not a position",)),
    (("reads", [0]), ('the buffer type must be "read" or "write"',)),
    (("read", "1"), ("buf_index_array must be a list",)),
])
def test_bad_requests_are_refused_with_a_sentence(args, needles):
    sch = gather()
    b = sch.get_block("B")
    refused(sch, lambda: sch.unsafe_hide_buffer_access(b, *args), *needles)


def test_a_buffer_some_block_writes_is_not_hidden():
    sch = Schedule(engine.parse(PRODUCED), seed=0)
    b = sch.get_block("B")
    refused(sch, lambda: sch.unsafe_hide_buffer_access(b, "read", [1]), "block IA")
    # the input A is read only: hiding it is accepted, and the program is the same
    before = sch.mod
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [0])
    assert_computes_exactly(before, sch.mod)


def test_tvms_trace_form_and_namespace():
    from engine import tvm
    sch = tvm.s_tir.Schedule(engine.parse(GATHER), seed=0)
    sch.unsafe_hide_buffer_access(sch.get_sblock("B"), "read", [1])
    doc = sch.trace.as_json()
    assert doc["insts"][-1][0] == "UnsafeHideBufferAccess"
    replayed = gather()
    Trace.from_json(doc).apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, sch.mod)
