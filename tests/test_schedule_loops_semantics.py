"""split, fuse, reorder, compute_at and reverse_compute_at: semantics first.

Every schedule a test accepts is checked by what it computes: the scheduled module,
compiled with ``engine.build``, must give what the reference interpreter gives on the
ORIGINAL module, on random inputs (the outputs' initial contents are random too, so a
store that goes missing shows). Every refusal is a :class:`engine.ScheduleError` with a
sentence, and leaves the schedule unchanged. The programs are this project's own; each
test's docstring names the Apache TVM test (tests/python/s_tir/schedule/) whose case it
mirrors.
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import structural_equal
from semantics import assert_computes_exactly, assert_refused, small_integer_args


def _args(func, seed):
    # small integers: sums in any order are exact, so a reordered reduction compares
    # bit for bit
    return small_integer_args(func, seed)


def assert_same_program_meaning(before, after, seeds=(0, 1)):
    """``engine.build(after)`` computes what ``engine.interpret(before)`` computes."""
    assert_computes_exactly(before, after, seeds=seeds)


def refused(sch, fn, *words):
    """``fn()`` is refused with a sentence containing ``words``; the schedule is unchanged."""
    msg = str(assert_refused(sch, fn, *words))
    assert msg.endswith("."), msg
    return msg


def _sch(src):
    mod = engine.parse(src)
    return mod, engine.Schedule(mod)


# ------------------------------------------------------------------------ split and fuse
ANNOTATED = '''
@T.prim_func
def main(A: T.Buffer((6, 10, 12), "float32"), B: T.Buffer((6, 10, 12), "float32")):
    for i, j in T.grid(6, 10):
        for k in T.serial(12, annotations={"pragma_note": 1}):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] + T.float32(3)
'''


def test_split_and_fuse_refuse_an_annotated_loop():
    """Mirrors TVM's test_fuse_split_fail_with_annotation: a loop carrying annotations is
    neither split nor fused (the annotations would be lost)."""
    mod, sch = _sch(ANNOTATED)
    _, j, k = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.split(k, [None, 4]), "split refused on loop k", "annotation")
    refused(sch, lambda: sch.fuse(j, k), "fuse refused on loop k", "annotation")
    i, j, k = sch.get_loops(sch.get_block("B"))
    ij = sch.fuse(i, j)             # the loops without annotations still fuse and split
    sch.split(ij, [None, 7])
    assert "pragma_note" in sch.mod.script()
    assert_same_program_meaning(mod, sch.mod)


OFFSET = '''
@T.prim_func
def main(A: T.Buffer((6, 12), "float32"), B: T.Buffer((6, 12), "float32")):
    for i in range(6):
        for j in T.serial(3, 15):
            with T.block("B"):
                vi = T.axis.spatial(6, i)
                vj = T.axis.spatial(12, j - 3)
                B[vi, vj] = A[vi, vj] * T.float32(2)
'''


def test_split_and_fuse_refuse_a_loop_not_starting_at_zero():
    """Mirrors TVM's test_fuse_split_fail_not_start_with_zero (CheckLoopStartsWithZero:
    split and fuse both refuse a loop whose min is not 0)."""
    mod, sch = _sch(OFFSET)
    i, j = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.split(j, [None, 4]), "split refused on loop j", "start at 0")
    refused(sch, lambda: sch.fuse(i, j), "fuse refused on loop j", "start at 0")
    sch.split(i, [None, 4])         # the loop starting at 0 splits, with a tail guard
    assert_same_program_meaning(mod, sch.mod)


# ------------------------------------------------------------------------------- reorder
PREDICATED = '''
@T.prim_func
def main(A: T.Buffer((4, 4, 4), "float32"), B: T.Buffer((4, 4, 4), "float32")):
    for i, j, k in T.grid(4, 4, 4):
        with T.block("B"):
            T.where(i * 16 + j * 4 + k < 23)
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
'''


def test_reorder_refuses_a_predicate_over_the_loops():
    """Mirrors TVM's test_reorder_with_predicate: the block's T.where bounds a combination
    of the loops that is none of its axes, so its binding is not affine under the loops."""
    mod, sch = _sch(PREDICATED)
    i, j, k = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.reorder(k, i), "reorder refused on block B", "T.where")


def test_reorder_keeps_the_guard_of_a_split_tail():
    """Mirrors TVM's test_reorder_with_cascade_tiled_ops / split-then-reorder: a T.where
    that only guards an axis of an imperfect split (``i_0 * 4 + i_1 < 10``) is no obstacle."""
    src = '''
@T.prim_func
def main(A: T.Buffer((10, 6), "float32"), B: T.Buffer((10, 6), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''
    mod, sch = _sch(src)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])
    sch.reorder(i1, j, i0)
    assert "T.where(" in sch.mod.script()
    assert_same_program_meaning(mod, sch.mod)


SCALED = '''
@T.prim_func
def main(A: T.Buffer((6, 32), "float32"), B: T.Buffer((6, 32), "float32")):
    for i, j in T.grid(6, 8):
        with T.block("B"):
            vi = T.axis.spatial(6, i)
            vj = T.axis.spatial(32, j * 4)
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_reorder_refuses_bindings_not_affine_in_its_loops():
    """Mirrors TVM's test_reorder_fail_not_affine_bindings: ``vj = j * 4`` is not a scale-1
    binding of loop j; and a loop may not make two parts that overlap (``j % 4`` and
    ``j`` of one loop j)."""
    mod, sch = _sch(SCALED)
    i, j = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.reorder(j, i), "reorder refused on block B", "axis vj")
    twice = SCALED.replace("vi = T.axis.spatial(6, i)", "vi = T.axis.spatial(6, j % 4 + i)")
    mod, sch = _sch(twice)
    i, j = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.reorder(j, i), "reorder refused on block B")


def test_reorder_of_one_loop_changes_nothing():
    """TVM's Reorder returns at once for fewer than two loops: no check refuses it (here
    a block TVM would not reorder, ``vj = j * 4``)."""
    mod, sch = _sch(SCALED)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(j)
    assert structural_equal(sch.mod, mod)


OVERLAPPED = '''
@T.prim_func
def main(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for a, b, c in T.grid(6, 4, 4):
        with T.block("B"):
            vi = T.axis.spatial(14, a * 2 + b)
            vj = T.axis.spatial(4, c)
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_reorder_with_overlapping_sums():
    """Mirrors TVM's test_reorder_overlapped_access: ``vi = a * 2 + b`` with b in [0, 4)
    takes every row (some twice); TVM's iterator maps accept it at the surjective level,
    and so does reorder."""
    mod, sch = _sch(OVERLAPPED)
    a, b, c = sch.get_loops(sch.get_block("B"))
    sch.reorder(a, c, b)
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("B"))] == \
        ["a", "c", "b"]
    assert_same_program_meaning(mod, sch.mod)


PARTIAL = '''
@T.prim_func
def main(A: T.Buffer((30, 5), "float32"), B: T.Buffer((30, 5), "float32")):
    for i, j, k in T.grid(5, 5, 5):
        with T.block("B"):
            vi = T.axis.spatial(30, i * i + j)
            vk = T.axis.spatial(5, k)
            B[vi, vk] = A[vi, vk] + T.float32(1)
'''


def test_reorder_with_partially_affine_bindings():
    """Mirrors TVM's test_reorder_with_partial_affineness: ``vi = i * i + j`` is not affine
    in i, so a reorder moving i is refused, but j and k may swap: under loop i the binding
    is affine in j and k (``i * i`` is a constant there)."""
    mod, sch = _sch(PARTIAL)
    i, j, k = sch.get_loops(sch.get_block("B"))
    refused(sch, lambda: sch.reorder(i, k, j), "reorder refused on block B", "axis vi")
    sch.reorder(k, j)
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("B"))] == \
        ["i", "k", "j"]
    assert_same_program_meaning(mod, sch.mod)


# ------------------------------------------------------------------- reverse_compute_at
TWO_PRODUCERS = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    P = T.alloc_buffer((8, 8))
    Q = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("Q"):
            vi, vj = T.axis.remap("SS", [i, j])
            Q[vi, vj] = A[vj, vi] * T.float32(3)
    for i, j in T.grid(8, 8):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = P[vi, vj] - Q[vi, vj]
'''


def test_reverse_compute_at_refuses_a_producer_outside_the_loop():
    """Mirrors TVM's test_fail_all_producers_under_loop: block D reads P and Q; under a
    loop of Q alone, D would be placed without its producer P."""
    mod, sch = _sch(TWO_PRODUCERS)
    d, q = sch.get_block("D"), sch.get_block("Q")
    refused(sch, lambda: sch.reverse_compute_at(d, sch.get_loops(q)[0]),
            "reverse_compute_at refused on block D", "block P", "not under loop i")
    # when Q is D's only producer, the same move is legal
    mod, sch = _sch(TWO_PRODUCERS.replace("P[vi, vj] - Q[vi, vj]", "A[vi, vj] - Q[vi, vj]"))
    d, q = sch.get_block("D"), sch.get_block("Q")
    sch.reverse_compute_at(d, sch.get_loops(q)[0])
    assert_same_program_meaning(mod, sch.mod)


FLOORDIV = '''
@T.prim_func
def main(X: T.Buffer((6, 8), "float32"), Y: T.Buffer((48,), "float32")):
    tmp = T.alloc_buffer((6, 8))
    for i, j in T.grid(6, 8):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            tmp[vi, vj] = X[vi, vj] * T.float32(2)
    for i in range(48):
        with T.block("B"):
            vi = T.axis.spatial(48, i)
            Y[vi] = tmp[vi // 8, vi % 8] + T.float32(1)
'''


def test_reverse_compute_at_with_floordiv_and_floormod_reads():
    """Mirrors TVM's test_reverse_compute_at_floordiv_and_floormod_indices: the consumer
    reads ``tmp[vi // 8, vi % 8]``; one iteration of the producer's loop i finishes row i,
    which is ``vi`` in [i * 8, i * 8 + 8)."""
    mod, sch = _sch(FLOORDIV)
    a, b = sch.get_block("A"), sch.get_block("B")
    sch.reverse_compute_at(b, sch.get_loops(a)[0])
    text = sch.mod.script()
    assert "vi = T.axis.spatial(48, i * 8 + ax0)" in text, text
    assert_same_program_meaning(mod, sch.mod)
    # under loop j (one element per iteration) it works as well
    mod, sch = _sch(FLOORDIV)
    a, b = sch.get_block("A"), sch.get_block("B")
    sch.reverse_compute_at(b, sch.get_loops(a)[1])
    assert_same_program_meaning(mod, sch.mod)


def test_refusals_leave_the_program_unchanged():
    """Every refusal above is a ScheduleError; the module object itself is kept."""
    mod, sch = _sch(ANNOTATED)
    k = sch.get_loops(sch.get_block("B"))[2]
    with pytest.raises(engine.ScheduleError):
        sch.split(k, [2, 6])
    assert structural_equal(sch.mod, mod)


def test_reverse_compute_at_refuses_to_drop_instances_of_the_block():
    """Found by running TVM's test_reverse_compute_at_* cases against partial producers:
    the producer under the loop updates only A[0:4], the consumer reads all of A. The
    region per iteration comes from the producer, so the consumer used to run for
    vi < 4 only and D[4:8] was never written: now refused. TVM has no case of its own."""
    src = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            A[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = A[vi] + T.float32(1)
'''
    mod, sch = _sch(src)
    d, p = sch.get_block("D"), sch.get_block("P")
    refused(sch, lambda: sch.reverse_compute_at(d, sch.get_loops(p)[0]),
            "reverse_compute_at refused on block D", "[0, 4) only", "[0, 8)")
    # a consumer whose T.where skips instances: the new nest would run them all
    src = src.replace("for i in range(4):", "for i in range(8):") \
        .replace("vi = T.axis.spatial(4, i)", "vi = T.axis.spatial(8, i)") \
        .replace('with T.block("D"):', 'with T.block("D"):\n            T.where(i < 5)')
    mod, sch = _sch(src)
    d, p = sch.get_block("D"), sch.get_block("P")
    refused(sch, lambda: sch.reverse_compute_at(d, sch.get_loops(p)[0]), "T.where")
    # a guard of a split tail is kept exactly
    mod, sch = _sch(src.replace("            T.where(i < 5)\n", ""))
    d, p = sch.get_block("D"), sch.get_block("P")
    po, _ = sch.split(sch.get_loops(p)[0], [None, 3])
    sch.reverse_compute_at(d, po)
    assert_same_program_meaning(mod, sch.mod)


def test_reorder_under_a_bound_of_a_fused_sum_digit():
    """Mirrors TVM's test_reorder_with_predicate, on a predicate TVM's iterator maps accept:
    after split, fuse and split again the T.where bounds ``i_0 * 4 + X // 6`` where ``X``
    is a fused sum of loops the bindings also divide. Found by the differential property
    test: the affine check recursed without end on a bound of such a digit (a
    RecursionError, not an answer); a fused sum is now bounded only by conjuncts over
    loops alone."""
    src = '''
@T.prim_func
def main(A: T.Buffer((10, 6), "float32"), B: T.Buffer((10, 6), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''
    mod, sch = _sch(src)
    i, j = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 4])
    f0, f1 = sch.split(sch.fuse(i1, j), [None, 5])
    assert "// 6 < 10" in sch.mod.script()
    sch.reorder(f1, f0)
    assert_same_program_meaning(mod, sch.mod)


def test_compute_at_refuses_a_block_that_is_not_the_only_writer():
    """Mirrors TVM's test_fail_subtree_complete_block: B is written by two blocks (columns
    4..7 by B_1, 0..3 by B_0). Computing B_0 at C's row loop covers the row C reads, all
    eight columns, and overwrote what B_1 wrote (a wrong program); TVM refuses a block
    that is not complete (the only writer of its output). The engine still moves an update
    block whose init block is the other writer where it computes no new elements
    (test_schedule_primitives.py::test_in_place_update_moves_only_where_each_element_...)."""
    src = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 4):
        with T.block("B_1"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.spatial(8, j + 4)
            B[vi, vj] = A[vi, vj] * T.float32(3)
    for i, j in T.grid(8, 4):
        with T.block("B_0"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.spatial(8, j)
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''
    mod, sch = _sch(src)
    c = sch.get_block("C")
    refused(sch, lambda: sch.compute_at(sch.get_block("B_0"), sch.get_loops(c)[0]),
            "compute_at refused on block B_0", "not a complete block", "block B_1")
    # B_1 would move past B_0, which writes B too
    refused(sch, lambda: sch.compute_at(sch.get_block("B_1"), sch.get_loops(c)[0]),
            "compute_at refused on block B_1", "block B_0")


def test_reorder_refuses_a_fused_spatial_and_reduction_loop():
    """Found by the differential property test: fuse a row loop with the reduction loop of
    a sum, split the fused loop and swap the halves; row 1's elements then ran
    f = 4 (vk = 1) before f = 3 (vk = 0, where T.init runs): the init wiped an update.
    TVM reorders these loops too (its reorder checks only iterator kinds and affinity);
    mirrors TVM's test_reorder on a reduction. Reordering pure loops stays allowed."""
    src = '''
@T.prim_func
def main(A: T.Buffer((3, 3), "float32"), Out: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 3):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Out[vi] = T.float32(0)
            Out[vi] = Out[vi] + A[vi, vk]
'''
    mod, sch = _sch(src)
    i, k = sch.get_loops(sch.get_block("S"))
    f0, f1 = sch.split(sch.fuse(i, k), [None, 2])
    refused(sch, lambda: sch.reorder(f1, f0), "reorder refused on block S",
            "both the spatial axis vi and the reduction axis vk", "T.init")
    mod, sch = _sch(src)
    i, k = sch.get_loops(sch.get_block("S"))
    k0, k1 = sch.split(k, [None, 2])
    sch.reorder(k1, i, k0)
    assert_same_program_meaning(mod, sch.mod)


def test_compute_at_keeps_what_a_producer_where_skips():
    """Found by the differential property test: a producer with ``T.where(i < 3)`` computes
    rows 0..2 only and its consumer reads all six (rows 3..5 uninitialised, NaN). Computed
    at the consumer's row loop, the producer's new nest has no T.where and computed rows
    3..5: a different program. Refused now unless the new nest runs only instances the
    producer ran (mirrors TVM's test_compute_at_* cases, which have no such T.where)."""
    src = '''
@T.prim_func
def main(A: T.Buffer((6, 4), "float32"), C: T.Buffer((6, 4), "float32")):
    P = T.alloc_buffer((6, 4))
    for i, j in T.grid(6, 4):
        with T.block("P"):
            T.where(i < 3)
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(6, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = P[vi, vj] + T.float32(1)
'''
    mod, sch = _sch(src)
    p, c = sch.get_block("P"), sch.get_block("C")
    refused(sch, lambda: sch.compute_at(p, sch.get_loops(c)[0]),
            "compute_at refused on block P", "T.where skips")
    # a T.where the consumer never reaches past is fine: P skips row 0, C reads rows 1..5
    src = src.replace("T.where(i < 3)", "T.where(1 <= i)") \
        .replace("for i, j in T.grid(6, 4):\n        with T.block(\"C\"):",
                 "for i, j in T.grid(5, 4):\n        with T.block(\"C\"):") \
        .replace("vi, vj = T.axis.remap(\"SS\", [i, j])\n            C[vi, vj] = P[vi, vj]",
                 "vi = T.axis.spatial(6, i + 1)\n            vj = T.axis.spatial(4, j)\n"
                 "            C[vi, vj] = P[vi, vj]")
    assert "T.where(1 <= i)" in src and "T.axis.spatial(6, i + 1)" in src
    mod, sch = _sch(src)
    p, c = sch.get_block("P"), sch.get_block("C")
    sch.compute_at(p, sch.get_loops(c)[0])
    assert_same_program_meaning(mod, sch.mod)


# -------------------------------------------------- the affine check itself, case by case
def _bindings_of(binds, where="", grid="4, 4, 4"):
    src = f'''
@T.prim_func
def main(A: T.Buffer((64, 64, 64), "float32"), B: T.Buffer((64, 64, 64), "float32")):
    for i, j, k in T.grid({grid}):
        with T.block("B"):
            {where}
            vi = T.axis.spatial(64, {binds[0]})
            vj = T.axis.spatial(64, {binds[1]})
            vk = T.axis.spatial(64, {binds[2]})
            B[vi, vj, vk] = A[vi, vj, vk]
'''
    from engine.ir.functor import post_order_visit
    from engine.ir.stmt import BlockRealize, For
    func = engine.parse(src)["main"]
    found, loops = [], []
    post_order_visit(func.body, lambda x: found.append(x) if isinstance(x, BlockRealize)
                     and x.block.name_hint == "B" else None)
    post_order_visit(func.body, lambda x: loops.append(x) if isinstance(x, For) else None)
    loops.sort(key=lambda lp: "ijk".index(lp.loop_var.name))
    return found[0], loops


@pytest.mark.parametrize("binds,where,ok,ranges", [
    (("i", "j", "k"), "", True, [(0, 4), (0, 4), (0, 4)]),
    (("i * 4 + j", "k", "0"), "T.where(i * 4 + j < 10)", True, [(0, 10), (0, 4), (0, 1)]),
    (("i * 4 + j", "k", "0"), "T.where(1 <= i * 4 + j)", True, [(1, 15), (0, 4), (0, 1)]),
    (("(i * 4 + j) // 2", "(i * 4 + j) % 2", "k"), "", True, [(0, 8), (0, 2), (0, 4)]),
    (("i * 2 + j", "k", "0"), "", True, [(0, 10), (0, 4), (0, 1)]),        # overlap
    (("i // 2", "i % 2 * 4 + j", "k"), "", True, [(0, 2), (0, 8), (0, 4)]),
    (("i", "j", "k"), "T.where(i * 16 + j * 4 + k < 23)", False, None),    # TVM refuses
    (("i", "j * 4", "k"), "", False, None),                               # scale 4
    (("i", "i", "k"), "", False, None),                                   # i used twice
    (("i * i + j", "0", "k"), "", False, None),                           # not affine
    (("(i * 4 + j) // 3", "(i * 4 + j) % 3", "k"), "", False, None),      # 16 % 3 != 0
    (("i % 3", "j", "k"), "", False, None),
    (("i * 4 + j", "k", "0"), "T.where(j < 3)", False, None),             # a gap in vi
])
def test_affine_bindings(binds, where, ok, ranges):
    """engine.schedule.primitives._common.affine_bindings, TVM's IsAffineBinding (its
    DetectIterMap at the surjective level) in small: which bindings and T.where it takes,
    and the box of axis values the loops give. The binding shapes are those of TVM's
    test_tir_schedule_reorder.py (test_reorder_overlapped_access, _fail_not_affine_bindings,
    _with_predicate, _with_partial_affineness) and of split/fuse results."""
    from engine.schedule.primitives._common import affine_bindings
    r, loops = _bindings_of(binds, where)
    res = affine_bindings(r.iter_values, loops, r.predicate)
    assert res.ok is ok, res.reason
    if ok:
        assert res.ranges == ranges
