"""read_at and write_at (TVM's ReadAt / WriteAt): a copy of a buffer's region made in every
iteration of a loop (``A_shared``, ``C_local``), marked ``auto_copy``; the accesses under
the loop moved to it. Accepted schedules compute exactly what the original computed
(interpreted and compiled); the step is recorded, replayed from every trace form, exported
to TVM's Python and reached through the tvm namespace; what TVM would accept but gets
wrong (a reduction whose init runs outside the loop reading the new, empty buffer; a copy
past the end of the buffer; a view of the buffer) is refused with a sentence and the
program kept."""
from __future__ import annotations

import random

import numpy as np
import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace
from engine.schedule.primitives import read_write_at
from engine.schedule.tree import FuncIndex
from semantics import (assert_computes_exactly, assert_same_meaning, run_interpreted,
                       small_integer_args)
from test_schedule_support import SMALL, apply_exported, assert_round_trips, fresh, refused


def matmul(n: int = 64) -> Schedule:
    return Schedule(engine.workloads.get("matmul", n=n), workload=("matmul", {"n": n}))


def tiled(n: int = 64, factors=(16, 16, 8)) -> Schedule:
    """The matmul tiled i_0, j_0, k_0, i_1, j_1, k_1: one k_0 step reads a 16x8 tile of A
    and an 8x16 tile of B."""
    sch = matmul(n)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, factors[0]])
    j0, j1 = sch.split(j, [None, factors[1]])
    k0, k1 = sch.split(k, [None, factors[2]])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch


def staged(sch: Schedule) -> Schedule:
    c = sch.get_block("C")
    _i0, j0, k0, *_ = sch.get_loops(c)
    sch.read_at(k0, c, 0, "shared")
    sch.read_at(k0, c, 1, "shared")
    sch.write_at(j0, c, 0, "local")
    return sch


# ---------------------------------------------------------------------------
# accepted: the tiled matmul with its tiles copied per k_0 step and C per (i_0, j_0)
# ---------------------------------------------------------------------------
def test_read_at_and_write_at_on_a_tiled_matmul_keep_the_meaning():
    sch = tiled()
    before = sch.mod
    c = sch.get_block("C")
    _i0, j0, k0, *_ = sch.get_loops(c)
    a = sch.read_at(k0, c, 0, "shared")
    b = sch.read_at(k0, c, "B", "shared")          # a buffer name, as newer TVM allows
    w = sch.write_at(j0, c, 0, "local")
    assert [sch.get(h).name_hint for h in (a, b, w)] == ["A_shared", "B_shared", "C_local"]
    for h in (a, b, w):
        assert sch.get(h).annotations["auto_copy"] is True
    assert_computes_exactly(before, sch.mod, reference=lambda A, B: A @ B)
    text = sch.mod.script()
    for line in (
            'A_shared = T.alloc_buffer((64, 64), scope="shared")',
            'C_local = T.alloc_buffer((64, 64), scope="local")',
            'with T.block("A_shared"):',
            'v0, v1 = T.axis.remap("SS", [i_0, k_0])',
            "T.reads(A[v0 * 16:v0 * 16 + 16, v1 * 8:v1 * 8 + 8])",
            "T.writes(A_shared[v0 * 16:v0 * 16 + 16, v1 * 8:v1 * 8 + 8])",
            'T.block_attr({"auto_copy": True})',
            "for ax0, ax1 in T.grid(16, 8):",
            "A_shared[v0 * 16 + ax0, v1 * 8 + ax1] = A[v0 * 16 + ax0, v1 * 8 + ax1]",
            "B_shared[v0 * 8 + ax0, v1 * 16 + ax1] = B[v0 * 8 + ax0, v1 * 16 + ax1]",
            "T.reads(A_shared[vi, vk], B_shared[vk, vj])",
            "C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]",
            "C[v0 * 16 + ax0, v1 * 16 + ax1] = C_local[v0 * 16 + ax0, v1 * 16 + ax1]"):
        assert line in text, (line, text)
    # the copies sit where TVM puts them: A's then B's before the k_0 step's loops, the
    # copy back after the k_0 loop
    assert text.index('T.block("A_shared")') < text.index('T.block("B_shared")') < \
        text.index('T.block("C")') < text.index('T.block("C_local")')
    # the printed program reads back as the same program
    assert structural_equal(engine.parse(text), sch.mod)


def test_write_at_the_reduction_loop_itself_copies_back_every_step():
    """write_at k_0: the reduction's init runs in k_0's first iteration; the later ones read
    what the earlier ones left in the new buffer."""
    sch = tiled(32, (8, 8, 8))
    before = sch.mod
    c = sch.get_block("C")
    k0 = sch.get_loops(c)[2]
    sch.write_at(k0, c, 0, "local")
    assert_computes_exactly(before, sch.mod)


def test_write_at_a_decomposed_reduction_whose_init_is_under_the_loop():
    sch = tiled(32, (8, 8, 8))
    before = sch.mod
    c = sch.get_block("C")
    _i0, j0, k0, *_ = sch.get_loops(c)
    sch.decompose_reduction(c, k0)           # C_init under j_0, before the k_0 loop
    sch.write_at(j0, sch.get_block("C_update"), 0, "local")
    assert 'T.writes(C_local[vi, vj])' in sch.mod.script()
    assert_computes_exactly(before, sch.mod)


TWO_STAGES = """
@T.prim_func
def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8, 16), "float32")):
    T_ = T.alloc_buffer((8, 16))
    for i in range(8):
        for j in range(16):
            with T.block("P"):
                vi, vj = T.axis.remap("SS", [i, j])
                T_[vi, vj] = X[vi, vj] * T.float32(2)
        for j in range(16):
            with T.block("Q"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T_[vi, vj] + T_[vi, 15 - vj]
"""


def test_read_at_after_a_write_earlier_in_the_iteration():
    """P writes the row before Q reads it (and again in the next iteration, before that
    iteration's copy): the copy goes between them."""
    sch = Schedule(engine.parse(TWO_STAGES))
    before = sch.mod
    q = sch.get_block("Q")
    i = sch.get_loops(q)[0]
    sch.read_at(i, q, 0, "local")
    text = sch.mod.script()
    assert text.index('T.block("P")') < text.index('T.block("T__local")') < \
        text.index('T.block("Q")')
    assert "T.reads(T_[v0, 0:16])" in text
    assert_computes_exactly(before, sch.mod)


# ---------------------------------------------------------------------------
# traces, exports, the tvm namespace
# ---------------------------------------------------------------------------
def test_trace_round_trips_and_tvm_kinds():
    sch = staged(tiled())
    assert_round_trips(sch, matmul)
    insts = sch.trace.as_json()["insts"]
    kinds = [inst[0] for inst in insts]
    assert kinds[-3:] == ["ReadAt", "ReadAt", "WriteAt"]
    assert insts[-3][2] == [0, "shared"] and insts[-1][2] == [0, "local"]
    assert len(insts[-3][1]) == 2 and len(insts[-3][3]) == 1      # [loop, block] -> [block]
    # TVM's own JSON form ([[insts], decisions], GetSBlock) replays to the same program
    tvm_doc = [[["GetSBlock" if i[0] == "GetBlock" else i[0], *i[1:]] for i in insts], []]
    target = matmul()
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


def test_exported_tvm_python_replays(monkeypatch):
    sch = staged(tiled())
    text = sch.trace.export("tvm")
    assert "sch.read_at(loop=l13, block=b10, read_buffer_index=0, storage_scope=\"shared\")" \
        in text
    assert "sch.write_at(loop=l12, block=b10, write_buffer_index=0, storage_scope=\"local\")" \
        in text
    target = apply_exported(text, matmul(), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    assert "sch.read_at(l13, b10, 0, \"shared\")" in sch.trace.as_python()


def test_the_tvm_namespace():
    from engine import tvm
    sch = tvm.s_tir.Schedule(tiled().mod)
    block = sch.get_sblock("C")
    _i0, j0, k0, *_ = sch.get_loops(block)
    a = sch.read_at(k0, block, 0, "shared")
    sch.write_at(j0, block, 0, "local")
    assert sch.get(a).name_hint == "A_shared"
    want = Schedule(tiled().mod)
    c = want.get_block("C")
    _i0, j0, k0, *_ = want.get_loops(c)
    want.read_at(k0, c, 0, "shared")
    want.write_at(j0, c, 0, "local")
    assert structural_equal(sch.mod, want.mod)


# ---------------------------------------------------------------------------
# refusals: a sentence, and the program, the trace and the handles kept
# ---------------------------------------------------------------------------
def test_bad_arguments_are_refused():
    sch = tiled()
    c = sch.get_block("C")
    k0 = sch.get_loops(c)[2]
    refused(sch, lambda: sch.read_at(k0, c, 2, "shared"),
            "read_buffer_index=2 is not the index of a buffer block C reads")
    refused(sch, lambda: sch.write_at(k0, c, 1, "local"),
            "write_buffer_index=1 is not the index of a buffer block C writes")
    refused(sch, lambda: sch.read_at(c, c, 0, "shared"), "the loop argument must be a loop")
    refused(sch, lambda: sch.write_at(k0, k0, 0, "local"),
            "the block argument must be a block")
    refused(sch, lambda: sch.read_at(k0, c, 0, "texture"), "unknown storage scope")


def test_no_reader_or_writer_under_the_loop():
    sch = fresh("mm_relu")
    y, relu = sch.get_block("Y"), sch.get_block("C")
    i_relu = sch.get_loops(relu)[0]
    e = refused(sch, lambda: sch.read_at(i_relu, y, 0, "shared"),
                "no block under loop", "reads A")
    assert str(e).startswith("read_at refused")
    e = refused(sch, lambda: sch.write_at(i_relu, y, 0, "local"),
                "no block under loop", "writes Y")
    assert str(e).startswith("write_at refused")


WRITE_AFTER_READ = """
@T.prim_func
def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8, 16), "float32")):
    for i in range(8):
        for j in range(16):
            with T.block("Q"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi, vj] * T.float32(2)
        for j in range(16):
            with T.block("P"):
                vi, vj = T.axis.remap("SS", [i, j])
                X[vi, vj] = X[vi, vj] + T.float32(1)
        for j in range(16):
            with T.block("R"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = Y[vi, vj] + X[vi, vj]
"""


def test_a_write_after_the_first_read_is_refused():
    sch = Schedule(engine.parse(WRITE_AFTER_READ))
    q = sch.get_block("Q")
    i = sch.get_loops(q)[0]
    refused(sch, lambda: sch.read_at(i, q, 0, "local"),
            "block P writes X in loop i at or after block Q first reads it")
    # write_at of X: R reads X after P, its last writer
    p = sch.get_block("P")
    refused(sch, lambda: sch.write_at(i, p, 0, "local"),
            "block R reads X in loop i after block P last writes it")
    # the inner loop of Q alone is fine
    before = sch.mod
    sch.read_at(sch.get_loops(q)[1], q, 0, "local")
    assert_computes_exactly(before, sch.mod)


SUM_FROM_ONE = """
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] + A[vi, vk]
"""

ACCUMULATE = """
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            B[vi] = B[vi] + A[vi, vk]
"""


def _unchecked_write_at(monkeypatch, sch, loop, block):
    """What TVM does: the same rewrite without the engine's check of the reads."""
    monkeypatch.setattr(read_write_at, "_check_reads_written", lambda *a, **k: None)
    sch.write_at(loop, block, 0, "local")
    monkeypatch.undo()
    return sch.mod


def _differs(before, after) -> bool:
    args = small_integer_args(before["main"])
    want, got = run_interpreted(before, "main", args), run_interpreted(after, "main", args)
    return not all(np.array_equal(w, g) for w, g in zip(want, got))


def test_write_at_refuses_a_reduction_whose_init_runs_outside_the_loop(monkeypatch):
    """decompose_reduction outside the loop: the update reads B_local, which nothing wrote
    in the loop (TVM accepts; its program loses the init's 1.0)."""
    def make():
        sch = Schedule(engine.parse(SUM_FROM_ONE))
        b = sch.get_block("B")
        i, k = sch.get_loops(b)
        k0, _k1 = sch.split(k, [None, 4])
        sch.decompose_reduction(b, k0)
        return sch, sch.get_block("B_update"), k0
    sch, upd, k0 = make()
    refused(sch, lambda: sch.write_at(k0, upd, 0, "local"),
            "block B_update reads B elements that were not written in the same iteration "
            "of loop k_0", "it has no T.init")
    sch2, upd2, k02 = make()
    assert _differs(sch2.mod, _unchecked_write_at(monkeypatch, sch2, k02, upd2))
    # at the loop around the init, the init writes every element first: accepted
    before = sch.mod
    sch.write_at(sch.get_loops(upd)[0], upd, 0, "local")
    assert_computes_exactly(before, sch.mod)


def test_write_at_refuses_an_accumulation_into_the_callers_values(monkeypatch):
    """No init at all: the block adds to B's old contents, which the new buffer lacks."""
    sch = Schedule(engine.parse(ACCUMULATE))
    b = sch.get_block("B")
    i = sch.get_loops(b)[0]
    refused(sch, lambda: sch.write_at(i, b, 0, "local"), "it has no T.init")
    other = Schedule(engine.parse(ACCUMULATE))
    ob = other.get_block("B")
    assert _differs(other.mod, _unchecked_write_at(monkeypatch, other, other.get_loops(ob)[0],
                                                   ob))


def test_write_at_refuses_a_reduction_split_around_the_loop():
    """The reduction loop k_0 outside loop i_1: an element's init ran in an earlier
    execution of i_1."""
    sch = tiled(32, (8, 8, 8))
    c = sch.get_block("C")
    i1 = sch.get_loops(c)[3]
    refused(sch, lambda: sch.write_at(i1, c, 0, "local"),
            "its T.init does not run in the same execution of loop i_1")


def test_a_region_past_the_end_of_the_buffer_is_refused():
    """30 = 4 * 8 - 2: the last k_0 step's tile of A would be read past column 29."""
    sch = tiled(30, (8, 8, 8))
    c = sch.get_block("C")
    _i0, j0, k0, *_ = sch.get_loops(c)
    refused(sch, lambda: sch.read_at(k0, c, 0, "shared"),
            "may lie outside the buffer (0 to 29)")
    refused(sch, lambda: sch.write_at(j0, c, 0, "local"), "may lie outside the buffer")


VIEWS = """
@T.prim_func
def f(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
    B = T.alloc_buffer((8, 12))
    for i, j in T.grid(8, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 3):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bb = T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,))
            for k in range(4):
                C[vi, vj * 4 + k] = Bb[k] + Bb[3 - k]
"""


def test_an_opaque_access_is_refused():
    sch = Schedule(engine.parse(VIEWS))
    c = sch.get_block("C")
    i = sch.get_loops(c)[0]
    refused(sch, lambda: sch.read_at(i, c, "B", "local"),
            "buffer B is accessed opaquely under loop i", "T.match_buffer view (Bb)")


def test_a_parallel_loop_is_refused():
    sch = tiled()
    c = sch.get_block("C")
    i0, _j0, k0, *_ = sch.get_loops(c)
    sch.parallel(i0)
    refused(sch, lambda: sch.read_at(k0, c, 0, "shared"), "loop i_0 is parallel")


# ---------------------------------------------------------------------------
# property: random loops and buffers on small workloads
# ---------------------------------------------------------------------------
def _loops_of(sch: Schedule) -> list:
    idx = FuncIndex(sch.mod[sch.func_name])
    out = []
    for b in idx.all_blocks():
        for lp in sch.get_loops(sch.get_block(b.name_hint)):
            if sch.get(lp) not in [sch.get(x) for x in out]:
                out.append(lp)
    return out


@pytest.mark.parametrize("name", ["matmul", "mm_relu", "sum", "softmax", "conv2d",
                                  "window_sum", "layernorm"])
def test_random_read_at_and_write_at_keep_the_meaning_or_refuse(name):
    rng = random.Random(name)
    accepted = 0
    for _trial in range(10):
        sch = fresh(name)
        blocks = [b.name_hint for b in FuncIndex(sch.mod[sch.func_name]).all_blocks()]
        bname = rng.choice(blocks)
        if rng.random() < 0.5:                      # sometimes tile a loop first
            loop = rng.choice(sch.get_loops(sch.get_block(bname)))
            try:
                sch.split(loop, [None, rng.choice([2, 3, 4])])
            except ScheduleError:
                pass
        block = sch.get_block(bname)
        op = rng.choice(["read_at", "write_at"])
        regions = sch.get(block).reads if op == "read_at" else sch.get(block).writes
        if not regions:
            continue
        loop = rng.choice(_loops_of(sch))
        index = rng.randrange(len(regions))
        mod, n, handles = sch.mod, len(sch.trace), sch.handles()
        try:
            getattr(sch, op)(loop, block, index, rng.choice(["local", "shared"]))
        except ScheduleError as e:
            assert str(e).startswith(f"{op} refused"), str(e)
            assert sch.mod is mod and len(sch.trace) == n and sch.handles() == handles
            continue
        accepted += 1
        assert_same_meaning(fresh(name).mod, sch.mod, compiled=accepted <= 2)
    assert accepted, "no random step was accepted"


def test_small_workloads_are_known():
    assert {"matmul", "mm_relu", "sum", "softmax", "conv2d", "window_sum",
            "layernorm"} <= set(SMALL)


LOCAL_TEMP = """
@T.prim_func
def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8, 16), "float32")):
    for i in range(8):
        with T.block("row"):
            vi = T.axis.spatial(8, i)
            T_ = T.alloc_buffer((16,))
            for j in range(16):
                with T.block("P"):
                    vj = T.axis.spatial(16, j)
                    T_[vj] = X[vi, vj] * T.float32(2)
            for j in range(16):
                with T.block("Q"):
                    vj = T.axis.spatial(16, j)
                    Y[vi, vj] = T_[vj] + T_[15 - vj]
"""


def test_a_buffer_allocated_under_the_loop_is_refused():
    sch = Schedule(engine.parse(LOCAL_TEMP))
    q = sch.get_block("Q")
    i = sch.get_loops(sch.get_block("row"))[0]
    refused(sch, lambda: sch.read_at(i, q, 0, "local"),
            "buffer T_ is allocated by block row under loop i")
    # the loop of Q inside the block: the copy is in the buffer's scope
    before = sch.mod
    sch.read_at(sch.get_loops(q)[0], q, 0, "local")
    assert_computes_exactly(before, sch.mod)


def _bound_matmul():
    """A 32×32 matmul tiled as the GPU chapter's: blockIdx.y/x, threadIdx.y/x over 4×4
    tiles of 2×2 per thread, the reduction split by 8 inside each thread."""
    from engine.presets.gpu_chapter import matmul_program
    sch = Schedule(matmul_program(32))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [2, 8, 2])
    j0, j1, j2 = sch.split(j, [2, 8, 2])
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    for lp, tag in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"),
                    (j1, "threadIdx.x")):
        sch.bind(lp, tag)
    return sch, c, k0


def test_read_at_into_shared_copies_the_thread_blocks_tile():
    """TVM's rule (its read_at tests): under thread loops, a "shared" copy holds what the
    whole thread block reads at the loop — 16 rows of A per k_0 tile, not one thread's 2 —
    and each thread's iteration copies the same values, so the meaning is kept."""
    sch, c, k0 = _bound_matmul()
    before = sch.mod
    sch.read_at(k0, c, 0, "shared")
    text = sch.mod.script()
    assert "A[v0 * 16:v0 * 16 + 16, v1 * 8:v1 * 8 + 8]" in text, text
    assert_computes_exactly(before, sch.mod, compiled=False)
    # "local" is each thread's own: its copy holds one thread's 2 rows
    sch2, c2, k02 = _bound_matmul()
    sch2.read_at(k02, c2, 0, "local")
    assert "v0 * 16 + v1 * 2:v0 * 16 + v1 * 2 + 2" in sch2.mod.script().replace(
        "T.axis.remap", "")
    assert_computes_exactly(before, sch2.mod, compiled=False)
