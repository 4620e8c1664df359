"""loop_partition and merge: compiled results (and the interpreter's) against numpy,
refusals that leave the schedule untouched, traces (JSON, token, Python, TVM export re-run
on our API, TVM's JSON imported)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from test_schedule_blockize import check_traces
from test_schedule_support import SMALL, fresh, refused, run_and_check


def _both(sch, name):
    run_and_check(sch.mod, name, SMALL[name])
    run_and_check(sch.mod, name, SMALL[name], use_build=False)


# ------------------------------------------------------------------ loop_partition
def test_loop_partition_inferred_factor_matches_numpy_and_tvm_shape(monkeypatch):
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    parts = sch.loop_partition(i, [None, 4, 3])
    text = sch.mod.script()
    for name in ("Y_i_common", "Y_i0_partition", "Y_i1_partition", "Y_i2_partition"):
        assert f'with T.block("{name}"):' in text
    assert "for i1 in T.serial(9, 13):" in text and "vi = T.axis.spatial((9, 13), i1)" in text
    assert "T.reads(A[13:16, 0:16], B[0:16, 0:16])" in text
    assert [sch.get(p).loop_var.name for p in parts] == ["i0", "i1", "i2"]
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("Y_i2"))] == \
        ["i2", "j", "k"]
    assert not sch.is_alive(y) and not sch.is_alive(j)
    _both(sch, "mm_relu")
    check_traces(sch, "mm_relu", monkeypatch)


def test_loop_partition_without_none_adds_the_rest_and_partitions_again(monkeypatch):
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    i, j = sch.get_loops(blk)
    parts = sch.loop_partition(j, [3, 2])          # [0, 3), [3, 5), [5, 8)
    assert len(parts) == 3
    assert sch.get(parts[2]).extent.value == 3
    sch.loop_partition(parts[2], [1])              # inside a partition: [5, 6), [6, 8)
    _both(sch, "add")
    check_traces(sch, "add", monkeypatch)


def test_loop_partition_after_split_keeps_regions_and_matches(monkeypatch):
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    sch.loop_partition(i0, [1, 2])
    _both(sch, "matmul")
    check_traces(sch, "matmul", monkeypatch)


def test_loop_partition_refusals_leave_the_schedule_untouched():
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    i, j = sch.get_loops(blk)
    refused(sch, lambda: sch.loop_partition(j, [None, None]), "at most one factor")
    refused(sch, lambda: sch.loop_partition(j, [4, 4]), "add up to 8", "extent 8")
    refused(sch, lambda: sch.loop_partition(j, [None, 8]), "add up to 8")
    refused(sch, lambda: sch.loop_partition(j, [0, 2]), "positive integer")
    refused(sch, lambda: sch.loop_partition(j, []), "at least one factor")
    refused(sch, lambda: sch.loop_partition(j, 4), "factors must be a list")
    refused(sch, lambda: sch.loop_partition(blk, [2]), "must be a loop")
    sch.annotate(j, "pragma_x", 1)
    refused(sch, lambda: sch.loop_partition(j, [2]), "annotations")


def test_loop_partition_of_a_reduction_loop_needs_the_init_decomposed(monkeypatch):
    """TVM 0.27 partitions k of a matmul with its init in every copy (a wrong program:
    each copy starts the sum again); here it is refused until decompose_reduction."""
    sch = fresh("matmul")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    refused(sch, lambda: sch.loop_partition(k, [None, 4]), "reduction axis vk", "init",
            "decompose_reduction")
    sch.decompose_reduction(c, k)
    parts = sch.loop_partition(sch.get_loops(sch.get_block("C_update"))[2], [None, 4])
    assert len(parts) == 2
    _both(sch, "matmul")
    check_traces(sch, "matmul", monkeypatch)


# ------------------------------------------------------------------ merge
def test_merge_producer_and_consumer_nests_matches_numpy(monkeypatch):
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    i, j, k = sch.get_loops(y)
    i2, j2 = sch.get_loops(c)
    m = sch.merge(j, j2)
    assert sch.get(m).loop_var.name == "j_m"
    assert [sch.get(x).loop_var.name for x in sch.get_loops(c)] == ["i_m", "j_m"]
    assert [sch.get(x).loop_var.name for x in sch.get_loops(y)] == ["i_m", "j_m", "k"]
    _both(sch, "mm_relu")
    check_traces(sch, "mm_relu", monkeypatch)


def test_merge_outer_loops_of_softmax_stages(monkeypatch):
    sch = fresh("softmax")
    names = ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    outer = [sch.get_loops(sch.get_block(n))[0] for n in names]
    sch.merge(*outer)
    assert sch.mod.script().count("for i_m in T.serial(4):") == 1
    _both(sch, "softmax")
    check_traces(sch, "softmax", monkeypatch)


def test_merge_refusals_leave_the_schedule_untouched():
    sch = fresh("softmax")
    mx, ex = sch.get_block("T_softmax_maxelem"), sch.get_block("T_softmax_exp")
    (i, k), (i2, j2) = sch.get_loops(mx), sch.get_loops(ex)
    # exp reads the row maximum that only the whole k loop makes: merging k and j is wrong
    refused(sch, lambda: sch.merge(k, j2), "T_softmax_maxelem", "slice by slice")
    refused(sch, lambda: sch.merge(i, k), "contains loop k")
    refused(sch, lambda: sch.merge(i), "at least two loops")
    sch2 = fresh("mm_relu")
    y, c = sch2.get_block("Y"), sch2.get_block("C")
    i, j, k = sch2.get_loops(y)
    i2, j2 = sch2.get_loops(c)
    refused(sch2, lambda: sch2.merge(k, j2), "same depth")
    sch2.split(j2, [None, 4])
    j2 = sch2.get_loops(c)[1]
    refused(sch2, lambda: sch2.merge(j, j2), "extent")
    sch3 = fresh("mm_relu")
    y, c = sch3.get_block("Y"), sch3.get_block("C")
    i, j, k = sch3.get_loops(y)
    i2, j2 = sch3.get_loops(c)
    sch3.annotate(j2, "pragma_x", 1)
    refused(sch3, lambda: sch3.merge(j, j2), "annotations")
    refused(sch3, lambda: sch3.merge(j, j), "given twice")


def test_merge_refuses_what_would_reorder_a_producer_and_its_users():
    """Beyond TVM (which builds these programs, with wrong results): merging keeps the
    order of a producer and its consumer, and moves no nest past a block it shares a
    buffer with."""
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    (i, j, k), (i2, j2) = sch.get_loops(y), sch.get_loops(c)
    refused(sch, lambda: sch.merge(j2, j), "would swap them", "order their nests run")
    sch = fresh("softmax")
    names = ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    outer = [sch.get_loops(sch.get_block(n))[0] for n in names]
    refused(sch, lambda: sch.merge(outer[0], outer[3]), "block T_softmax_exp",
            "runs between the merged nests")
    sch.merge(outer[2], outer[3])      # neighbours: expsum then norm
    _both(sch, "softmax")


@pytest.mark.parametrize("at", [0, 1])
def test_loop_partition_of_either_loop_in_two(at, monkeypatch):
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    i, j = sch.get_loops(blk)
    parts = sch.loop_partition([i, j][at], [5])
    assert len(parts) == 2
    _both(sch, "add")
    check_traces(sch, "add", monkeypatch)


def test_merge_compares_the_very_variables_of_the_accesses():
    """After transform_block_layout swaps Y's axes, Y's outer loop walks j: merging it with
    C's i would read rows not made yet (structurally alike indices, other variables)."""
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    sch.transform_block_layout(y, "lambda i, j, k: (j, i, k)")
    outer_y, outer_c = sch.get_loops(y)[0], sch.get_loops(c)[0]
    refused(sch, lambda: sch.merge(outer_y, outer_c), "slice by slice")


@settings(max_examples=15)
@given(st.sampled_from(["mm_relu", "softmax", "transpose", "sum"]),
       st.randoms(use_true_random=False),
       st.lists(st.sampled_from(["partition", "merge", "decompose"]), min_size=1, max_size=3))
def test_accepted_partitions_and_merges_compute_what_numpy_computes(name, rnd, ops):
    """Random partitions and merges (after a reduction is decomposed or not): whatever is
    accepted computes the workload's result, run through the interpreter."""
    from engine.schedule import ScheduleError
    sch = fresh(name)
    for op in ops:
        blocks = sch.index().all_blocks()
        b = sch.get_block(rnd.choice(blocks).name_hint)
        loops = sch.get_loops(b)
        if not loops:
            continue
        try:
            if op == "partition":
                sch.loop_partition(rnd.choice(loops), rnd.choice([[None, 1], [2], [1, 1]]))
            elif op == "decompose":
                sch.decompose_reduction(b, rnd.choice(loops))
            else:
                other = sch.get_block(rnd.choice(blocks).name_hint)
                theirs = sch.get_loops(other)
                d = rnd.randrange(min(len(loops), len(theirs))) if theirs else None
                if d is None:
                    continue
                sch.merge(loops[d], theirs[d])
        except ScheduleError:
            continue
    run_and_check(sch.mod, name, SMALL[name], use_build=False)
