"""rfactor never produces a wrong program, and refuses what TVM refuses.

Every accepted schedule here is run three ways on random inputs: the reference interpreter
on the ORIGINAL program, the interpreter on the new one, and the compiled new one
(``engine.build``) — they must agree (the inputs are small integers held in float32, so
sums are exact whatever their order) — and, where one is given, with numpy. Every
refusal is a ScheduleError whose message names the rule.

The programs are written for these tests; the docstrings name the case of Apache TVM's
``tests/python/s_tir/schedule/test_tir_schedule_rfactor.py`` each one mirrors.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, strategies as st

import engine
from engine.ir import stmt as S
from engine.ir.functor import collect
from engine.lower import lower
from engine.schedule import Schedule, ScheduleError
from semantics import (assert_computes_exactly, assert_refused, run_compiled,
                       run_interpreted, small_integer_args)


# ----------------------------------------------------------------------------- helpers
def _args(mod, seed: int = 0) -> list:
    return small_integer_args(mod["main"], seed, -8, 9)


def _interpret(mod, args) -> list:
    return run_interpreted(mod, "main", args)


def _compiled(mod, args) -> list:
    return run_compiled(mod, "main", args)


def _computes_the_same(original, sch: Schedule, seed: int = 0, reference=None) -> None:
    """The scheduled program computes what the original computes: interpreter on the
    original == interpreter on the new program == compiled new program (== numpy)."""
    assert_computes_exactly(original, sch.mod, "main", seeds=(seed,), low=-8, high=9,
                            reference=reference)


def _refused(sch: Schedule, action, *needles) -> ScheduleError:
    """``action()`` raises a ScheduleError naming the rule, and the program is unchanged."""
    err = assert_refused(sch, action, *needles, prefix="rfactor refused")
    assert err.rule
    return err


def _loops(sch: Schedule, block: str = "B") -> list:
    return sch.get_loops(sch.get_block(block))


# A row sum written for these tests: B[i] = sum over k of A[i, k].
ROW_SUM = """
@T.prim_func
def main(A: T.Buffer((6, 24), "float32"), B: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 24):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


# ------------------------------------------- item 1: init and update write other elements
def test_init_and_update_storing_to_different_elements_is_refused():
    """The case of TVM's test_reduction_rfactor_not_same_buffer_access: the init sets
    ``C[vi, vj]`` but the update accumulates into ``C[vj, vi]`` — not a reduction."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((5, 5, 7), "float32"), C: T.Buffer((5, 5), "float32")):
    for i, j, k in T.grid(5, 5, 7):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vj, vi] = C[vj, vi] + A[vi, vj, vk]
""")
    sch = Schedule(mod)
    for ax in (0, 2):
        e = _refused(sch, lambda: sch.rfactor(_loops(sch, "C")[2], ax),
                     "T.init() writes other elements than the update")
        assert "C" in e.highlight


def test_update_reading_other_elements_than_it_writes_is_refused():
    """A variant of TVM's test_reduction_rfactor_not_same_buffer_access: init and store at
    ``C[vi, vj]``, but the old value is read from ``C[vj, vi]``."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((5, 5, 7), "float32"), C: T.Buffer((5, 5), "float32")):
    for i, j, k in T.grid(5, 5, 7):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vj, vi] + A[vi, vj, vk]
""")
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(_loops(sch, "C")[2], 0),
             "does not combine the buffer's old value")


# ----------------------------------------------- item 2: bindings that are not one-to-one
SQUARE_HALF = """
@T.prim_func
def main(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(32, k * k // 2)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_non_affine_reduction_binding_is_refused():
    """The case of TVM's test_reduction_rfactor_not_reduction_block2: the reduction axis
    is bound to ``k * k // 2``, not a quasi-affine expression of the loops."""
    mod = engine.parse(SQUARE_HALF)
    sch = Schedule(mod)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "reduction axis vk",
                 "k * k // 2", "not a quasi-affine expression")
    assert "B" in e.highlight


@pytest.mark.parametrize("binding, extent, dom, rule", [
    ("k // 2", 16, 8, "use loop k only in part"),        # each instance twice
    ("k + 2", 12, 14, "not at the domain's minimum 0"),  # the init would never run
    ("k * 2", 8, 16, "not a one-to-one map"),            # half the domain, scale 2
    ("k % 4", 8, 4, "use only 4 of the 8 iterations"),   # each instance twice
])
def test_reduction_binding_that_is_not_one_to_one_is_refused(binding, extent, dom, rule):
    """Beyond TVM's quasi-affine check (the case of test_reduction_rfactor_not_reduction_
    block2 again): a quasi-affine reduction binding must also be one-to-one onto the
    domain starting at its minimum — else the init runs more than once, or never, and the
    partial results would not add up to what the original block computes."""
    mod = engine.parse(f"""
@T.prim_func
def main(A: T.Buffer((3, {dom}), "float32"), B: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, {extent}):
        with T.block("B"):
            vi = T.axis.spatial(3, i)
            vk = T.axis.reduce({dom}, {binding})
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""")
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), rule)


def _tvm_init_rule(A: np.ndarray) -> np.ndarray:
    """SQUARE_HALF by TVM's lowering of T.init(): the init runs at every instance whose
    reduction axes are all at their minimum — here where ``k * k // 2 == 0``, i.e. at
    ``k = 0`` and again at ``k = 1``."""
    B = np.zeros(A.shape[0], dtype=A.dtype)
    for i in range(A.shape[0]):
        for k in range(8):
            vk = k * k // 2
            if vk == 0:
                B[i] = 0
            B[i] = B[i] + A[i, vk]
    return B


def test_init_guard_follows_tvms_rule_in_the_interpreter_and_the_compiled_code():
    """The init of SQUARE_HALF runs whenever its reduction axis is at its minimum (TVM's
    lower_init_block.cc): at k = 0 and at k = 1. The compiled code used to hoist the init
    in front of the k loop because the first iteration hits the minimum — which runs it
    only once; the interpreter and the compiled code must both follow TVM's rule."""
    mod = engine.parse(SQUARE_HALF)
    args = _args(mod, 3)
    want = _tvm_init_rule(args[0])
    np.testing.assert_array_equal(_interpret(mod, args)[1], want)
    np.testing.assert_array_equal(_compiled(mod, args)[1], want)


def _init_guards(mod) -> list:
    return [s for s in collect(lower(mod["main"]).body, S.IfThenElse)]


@pytest.mark.parametrize("schedule", ["none", "split", "fuse", "fuse_split", "reorder"])
def test_init_is_still_hoisted_when_only_the_first_iteration_is_at_the_minimum(schedule):
    """The init stays hoisted out of the reduction loops (no ``if`` per iteration) when
    the reduction axes reach their minimum at the first iteration only: plain, split,
    fused (``f // 8``, ``f % 8``), fused then split, reordered reduction loops."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k, l in T.grid(4, 6, 8):
        with T.block("B"):
            vi, vk, vl = T.axis.remap("SRR", [i, k, l])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk, vl]
""")
    sch = Schedule(mod)
    i, k, l = _loops(sch)
    if schedule == "split":
        sch.split(l, [None, 4])
    elif schedule == "fuse":
        sch.fuse(k, l)
    elif schedule == "fuse_split":
        sch.split(sch.fuse(k, l), [None, 16])
    elif schedule == "reorder":
        sch.reorder(l, k)
    assert _init_guards(sch.mod) == []
    args = _args(mod)
    want = args[0].sum(axis=(1, 2))
    np.testing.assert_array_equal(_compiled(sch.mod, args)[1], want)
    np.testing.assert_array_equal(_interpret(sch.mod, args)[1], want)


# ------------------------------------------------- item 3: the other rules TVM refuses by
def test_block_under_a_predicate_is_refused():
    """The case of TVM's test_reduction_rfactor_predicate: a block under ``T.where``.
    Here the last two iterations of the rfactor loop are masked off entirely, so their
    partial sums would never be initialised (the engine used to accept it and add up
    uninitialised memory)."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((3, 6), "float32"), B: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 8):
        with T.block("B"):
            T.where(k < 6)
            vi = T.axis.spatial(3, i)
            vk = T.axis.reduce(6, k)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""")
    sch = Schedule(mod)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 1), "non-trivial predicate",
                 "T.where(k < 6)")
    assert "B" in e.highlight


def test_block_under_a_predicate_of_a_split_is_refused():
    """The case of TVM's test_reduction_rfactor_predicate: the ``T.where`` of a split
    that does not divide the reduction loop."""
    sch = Schedule(engine.parse(ROW_SUM.replace("24", "22")))
    k0, k1 = sch.split(_loops(sch)[1], [None, 4])
    for lp in (k0, k1):
        _refused(sch, lambda: sch.rfactor(lp, 0), "non-trivial predicate")


def test_scope_that_is_not_a_stage_pipeline_is_refused():
    """The case of TVM's test_reduction_rfactor_not_stage_pipeline: block D reads all of
    the 10x10 buffer C, of which the reduction writes only the top-left 6x6."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((10, 4), "float32"), D: T.Buffer((10, 10), "float32")):
    C = T.alloc_buffer((10, 10))
    for i, j, k in T.grid(6, 6, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * A[vj, vk]
    for i, j in T.grid(10, 10):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj]
""")
    sch = Schedule(mod)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch, "C")[2], 0), "not a stage pipeline",
                 "block D reads C [0, 9]", "write only [0, 5]")
    assert "D" in e.highlight


IN_PLACE_AFTER = """
@T.prim_func
def main(A: T.Buffer((5, 8), "float32"), B: T.Buffer((5,), "float32")):
    for i in range(5):
        for k in range(8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
        for j in range(8):
            with T.block("bump"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i < 4)
                A[vi + 1, vj] = A[vi + 1, vj] + A[vi, vj]
"""


def test_scope_with_a_buffer_written_after_it_is_read_is_refused():
    """The case of TVM's test_reduction_rfactor_not_stage_pipeline, with the other way a
    scope stops being a stage pipeline: block ``bump`` writes row i + 1 of A after block
    B read A in iteration i. The rfactor block would read all of A before ``bump`` runs
    (the engine used to accept it, and its rows 1-4 of B differed)."""
    mod = engine.parse(IN_PLACE_AFTER)
    sch = Schedule(mod)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "not a stage pipeline",
                 "block B reads A before block bump writes it")
    assert "bump" in e.highlight


def test_output_indexed_by_a_reduction_axis_is_refused():
    """The case of TVM's test_reduction_rfactor_not_reduction_block3: the output element
    depends on the reduction axis, so the block is no reduction."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 9), "float32"), B: T.Buffer((4, 9), "float32")):
    for i, k in T.grid(4, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi, vk] = T.float32(0)
            B[vi, vk] = B[vi, vk] + A[vi, vk]
""")
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "depends on a reduction axis")


def test_block_that_is_not_its_outputs_only_writer_is_refused():
    """The case of TVM's test_reduction_rfactor_not_reduction_block3 (rule 4 of a reduction
    block: it dominates its output): block ``scale`` writes B too."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 9), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i in range(4):
        with T.block("scale"):
            vi = T.axis.remap("S", [i])
            B[vi] = B[vi] * T.float32(2)
""")
    sch = Schedule(mod)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0),
                 "not the only block writing B", "block scale writes it too")
    assert "scale" in e.highlight


def test_loop_bound_to_both_kinds_of_axes_is_refused():
    """The case of TVM's test_reduction_rfactor_wrong_loops2: the fused loop of a spatial
    and a reduction loop sits above the reduction loop asked for."""
    sch = Schedule(engine.parse(ROW_SUM))
    i, k = _loops(sch)
    k0, k1 = sch.split(k, [None, 4])
    sch.fuse(i, k0)
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0),
             "is bound to both spatial and reduction axes")


def test_not_a_serial_loop_is_refused():
    """The case of TVM's test_reduction_rfactor_not_serial_loop."""
    sch = Schedule(engine.parse("""
@T.prim_func
def main(A: T.Buffer((6, 24), "float32"), B: T.Buffer((6,), "float32")):
    for i in range(6):
        for k in T.unroll(24):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
"""))
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "needs a serial loop")


def test_spatial_loop_is_refused():
    """The case of TVM's test_reduction_rfactor_wrong_loops1."""
    sch = Schedule(engine.parse(ROW_SUM))
    _refused(sch, lambda: sch.rfactor(_loops(sch)[0], 0), "bound to a spatial axis")


@pytest.mark.parametrize("init, update, rule", [
    ("T.float32(1)", "B[vi] + A[vi, vk]", "not the identity of a sum"),
    ("T.float32(0)", "B[vi] - A[vi, vk]", "not a sum, max or min"),
    ("T.float32(0)", "B[vi] * A[vi, vk]", "not a sum, max or min"),
    ("T.float32(0)", "T.max(B[vi], A[vi, vk])", "not the identity of a max"),
    ("A[vi, 0]", "B[vi] + A[vi, vk]", "not the identity of a sum"),
])
def test_reduction_pattern_that_is_not_a_commutative_reducer_is_refused(init, update, rule):
    """The cases of TVM's test_reduction_rfactor_wrong_reduce_pattern1 (an init that is not
    the identity: 1 for a sum, 0 for a max, a loaded value) and
    test_reduction_rfactor_wrong_reduce_pattern2 (a subtraction), with a product added:
    the engine knows sums, maxima and minima."""
    sch = Schedule(engine.parse(ROW_SUM.replace("T.float32(0)", init)
                                .replace("B[vi] + A[vi, vk]", update)))
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), rule)


def test_init_that_is_not_a_single_store_is_refused():
    """The case of TVM's test_reduction_rfactor_init_not_bufferstore: the init is an
    ``if`` around the store, not the store itself."""
    sch = Schedule(engine.parse(ROW_SUM.replace(
        "                B[vi] = T.float32(0)",
        "                if vi >= 0:\n                    B[vi] = T.float32(0)")))
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "does not initialise the buffer")


def test_reduction_not_first_under_its_outermost_loop_is_refused():
    """The case of TVM's test_reduction_rfactor_outermost_loop_multiple_children_fail: block
    E is the second block under loop i; block D, the first, can be factored."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 6), "float32"), E: T.Buffer((4,), "float32")):
    D = T.alloc_buffer((4,))
    for i in range(4):
        for k0, k1 in T.grid(2, 3):
            with T.block("D"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(6, k0 * 3 + k1)
                with T.init():
                    D[vi] = T.float32(0)
                D[vi] = D[vi] + A[vi, vk]
        for k0, k1 in T.grid(3, 2):
            with T.block("E"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(6, k0 * 2 + k1)
                with T.init():
                    E[vi] = T.float32(0)
                E[vi] = E[vi] + A[vi, vk] * D[vi]
""")
    sch = Schedule(mod)
    for lp in _loops(sch, "E")[1:]:
        _refused(sch, lambda: sch.rfactor(lp, 0), "not the first block under its outermost "
                 "loop i")
    sch.rfactor(_loops(sch, "D")[1], 1)
    _computes_the_same(mod, sch)


def test_unbound_loop_inside_the_reduction_loops_is_refused():
    """The rule kUnboundLoopUnderReductionLoop of TVM's rfactor (its
    test_reduction_rfactor_outermost_loop_multiple_children_fail family): a loop of more
    than one iteration, bound to no axis, under a reduction loop repeats the update."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((3, 5), "float32"), B: T.Buffer((3,), "float32")):
    for i, k, u in T.grid(3, 5, 2):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""")
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(_loops(sch)[1], 0), "loop u, inside a reduction loop, "
             "is not bound to any axis")


def test_interleaved_spatial_loop_writing_one_element_twice_is_refused():
    """Beyond TVM (it has no such case, and its checks would accept it): the spatial loop
    i runs inside the reduction loop k, and rows i = 0, 1 (and 2, 3) of A are summed into
    the same element ``B[vi // 2]``, interleaved — each k = 0 step re-initialises it. The
    write-back block would then add one row's partial sums twice (the engine used to
    accept it; both elements of B differed). The same block with i outside k is factored:
    the last row of each pair wins, in both programs."""
    text = """
@T.prim_func
def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((2,), "float32")):
    for LOOPS:
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(6, k)
            with T.init():
                B[vi // 2] = T.float32(0)
            B[vi // 2] = B[vi // 2] + A[vi, vk]
"""
    inner = engine.parse(text.replace("LOOPS", "k, i in T.grid(6, 4)"))
    sch = Schedule(inner)
    e = _refused(sch, lambda: sch.rfactor(_loops(sch)[0], 0),
                 "loop i, bound to a spatial axis, runs inside the reduction loops",
                 "write its own element of B", "use loop i only in part")
    assert "i" in e.highlight
    outer = engine.parse(text.replace("LOOPS", "i, k in T.grid(4, 6)"))
    sch = Schedule(outer)
    sch.rfactor(_loops(sch)[1], 0)
    _computes_the_same(outer, sch, reference=lambda A: A[1::2].sum(axis=1))


def test_interleaved_spatial_loop_writing_its_own_elements_is_factored():
    """The case of TVM's test_reduction_rfactor_matmul (its loops interleave spatial and
    reduction loops): with k outside i, every i writes its own row."""
    mod = engine.parse(ROW_SUM)
    sch = Schedule(mod)
    i, k = _loops(sch)
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(k0, i, k1)
    sch.rfactor(k0, 1)
    _computes_the_same(mod, sch, reference=lambda A: A.sum(axis=1))


def test_loop_that_starts_above_zero():
    """The case of TVM's test_reduction_rfactor_square_sum, on a loop ``range(2, 10)``: the
    partial results are stored from index 0 of the extra dimension (the engine used to
    store them at 2..9 of a dimension of 8)."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((3, 10), "float32"), B: T.Buffer((3,), "float32")):
    for i in range(3):
        for k in range(2, 10):
            with T.block("B"):
                vi = T.axis.spatial(3, i)
                vk = T.axis.reduce(8, k - 2)
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk + 2] * A[vi, vk + 2]
""")
    sch = Schedule(mod)
    rf = sch.rfactor(_loops(sch)[1], 1)
    assert tuple(int(s.value) for s in sch.get(rf).writes[0].buffer.shape) == (3, 8)
    _computes_the_same(mod, sch, reference=lambda A: (A[:, 2:] ** 2).sum(axis=1))


# ------------------------------------------------------- item 4: fused reduction loops
TWO_AXES = """
@T.prim_func
def main(A: T.Buffer((3, 4, 6), "float32"), B: T.Buffer((3,), "float32")):
    for i, k, l in T.grid(3, 4, 6):
        with T.block("B"):
            vi, vk, vl = T.axis.remap("SRR", [i, k, l])
            with T.init():
                B[vi] = T.float32(-3.4028234663852886e+38)
            B[vi] = T.max(B[vi], A[vi, vk, vl])
"""


@pytest.mark.parametrize("how", ["fused", "fused_outer", "fused_inner", "split_fused",
                                 "reordered_fused"])
def test_rfactor_over_fused_reduction_loops(how):
    """The case of TVM's test_reduction_rfactor_spatial_only (a loop fused from two
    reduction loops, bound as ``f // 6`` and ``f % 6``): the fused loop, either half of a
    split of it, a split part fused with the other loop, and the loops fused the other
    way round are all factored, and compute the same maximum."""
    mod = engine.parse(TWO_AXES)
    sch = Schedule(mod)
    i, k, l = _loops(sch)
    if how == "fused":
        target = sch.fuse(k, l)
    elif how in ("fused_outer", "fused_inner"):
        f0, f1 = sch.split(sch.fuse(k, l), [None, 8])
        target = f0 if how == "fused_outer" else f1
    elif how == "split_fused":
        l0, l1 = sch.split(l, [None, 3])
        target = sch.fuse(k, l0)
    else:
        sch.reorder(l, k)
        target = sch.fuse(l, k)
    rf = sch.rfactor(target, 0)
    assert sch.get(rf).name_hint == "B_rf"
    _computes_the_same(mod, sch, reference=lambda A: A.max(axis=(1, 2)))


def test_rfactor_over_a_fused_loop_with_constant_spatial_axes():
    """The case of TVM's test_reduction_rfactor_spatial_only, on a program of its shape:
    spatial axes bound to 0, loops of one iteration around and below the reduction loop,
    the window's two axes bound to ``r // 3`` and ``r % 3`` of one loop."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((1, 5, 3, 3), "float32"), B: T.Buffer((1, 5, 1, 1), "float32")):
    for n, c, h, w, r, u in T.grid(1, 5, 1, 1, 9, 1):
        with T.block("pool"):
            v0 = T.axis.spatial(1, 0)
            v1 = T.axis.spatial(5, c)
            v2 = T.axis.spatial(1, 0)
            v3 = T.axis.spatial(1, 0)
            ry = T.axis.reduce(3, r // 3)
            rx = T.axis.reduce(3, r % 3)
            with T.init():
                B[v0, v1, v2, v3] = T.float32(0)
            B[v0, v1, v2, v3] = B[v0, v1, v2, v3] + A[v0, v1, v2 * 3 + ry, v3 * 3 + rx]
""")
    for axis in (4, 1, -1):
        sch = Schedule(mod)
        sch.rfactor(_loops(sch, "pool")[4], axis)
        _computes_the_same(mod, sch, reference=lambda A: A.sum(axis=(2, 3),
                                                               keepdims=True))


def test_rfactor_of_a_loop_of_one_iteration_bound_to_no_axis():
    """The cases of TVM's test_reduction_rfactor_square_sum_square_root (and its
    factor_one_1 / factor_one_2 programs): the factored loop has one iteration and no
    axis uses it — below or above the loop of the fused reduction — so there is one
    partial result. A loop of more iterations bound to no axis is refused (TVM would
    accept one above the reduction loops, and the write-back would add up that many
    copies of the whole sum)."""
    text = """
@T.prim_func
def main(A: T.Buffer((3, 4, 5), "float32"), D: T.Buffer((3,), "float32")):
    C = T.alloc_buffer((3,))
    for LOOPS:
        with T.block("C"):
            vb = T.axis.spatial(3, b)
            vi = T.axis.reduce(4, f // 5)
            vj = T.axis.reduce(5, f % 5)
            with T.init():
                C[vb] = T.float32(0)
            C[vb] = C[vb] + A[vb, vi, vj] * A[vb, vi, vj]
    for b in range(3):
        with T.block("D"):
            vb = T.axis.spatial(3, b)
            D[vb] = C[vb] * T.float32(2)
"""
    for loops, pick in (("b, f, u in T.grid(3, 20, 1)", 2),
                        ("b, u, f in T.grid(3, 1, 20)", 1)):
        mod = engine.parse(text.replace("LOOPS", loops))
        for axis in (0, 1):
            sch = Schedule(mod)
            rf = sch.rfactor(_loops(sch, "C")[pick], axis)
            shape = tuple(int(x.value) for x in sch.get(rf).writes[0].buffer.shape)
            assert shape == ((1, 3) if axis == 0 else (3, 1))
            _computes_the_same(mod, sch, reference=lambda A: 2 * (A * A).sum(axis=(1, 2)))
    mod = engine.parse(text.replace("LOOPS", "u, b, f in T.grid(2, 3, 20)"))
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(_loops(sch, "C")[0], 0),
             "loop u is not bound to any reduction axis", "more than one iteration")


def test_rfactor_of_a_reduction_written_with_a_let():
    """The case of TVM's test_reduction_rfactor_matmul_with_let: the update stores a
    let-bound value (``v = C[vi] + ...; C[vi] = v``), read as the store of that value."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((5, 12), "float32"), B: T.Buffer((5, 12), "float32"),
         C: T.Buffer((5,), "float32")):
    for i, k0, k1 in T.grid(5, 3, 4):
        with T.block("update"):
            vi = T.axis.spatial(5, i)
            vk = T.axis.reduce(12, k0 * 4 + k1)
            with T.init():
                C[vi] = T.float32(0)
            v_C: T.let[T.float32] = C[vi] + A[vi, vk] * B[vi, vk]
            C[vi] = v_C
""")
    sch = Schedule(mod)
    sch.rfactor(_loops(sch, "update")[2], 0)
    assert "C_rf[vk1, vi] = C_rf[vk1, vi] + A[vi, vk0 * 4 + vk1] * B[vi, vk0 * 4 + vk1]" \
        in sch.mod.script()
    _computes_the_same(mod, sch, reference=lambda A, B: (A * B).sum(axis=1))


def test_rfactor_with_int64_loops_writes_one_element_regions():
    """The case of TVM's test_reduction_rfactor_int64: with int64 loops the regions of both
    new blocks are single elements (``C_rf[vk_1, vi]``), not ``C_rf[vk_1:vk_1 + 1, ...]``
    (an int32 extent on int64 indices)."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((T.int64(6), T.int64(8)), "float32"),
         C: T.Buffer((T.int64(6),), "float32")):
    for i, k_0, k_1 in T.grid(T.int64(6), T.int64(2), T.int64(4)):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(6), i)
            vk = T.axis.reduce(T.int64(8), k_0 * T.int64(4) + k_1)
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
""")
    sch = Schedule(mod)
    sch.rfactor(_loops(sch, "C")[2], 0)
    text = sch.mod.script()
    assert "T.writes(C_rf[vk_1, vi])" in text and "T.reads(C_rf[vk_1, vi])" in text
    assert "T.writes(C[vi])" in text and ":" not in text.split("T.writes(C_rf")[1][:12]
    _computes_the_same(mod, sch, reference=lambda A: A.sum(axis=1))


# ---------------------------------------------------------- the differential property
#: how the first reduction axis may be bound: (binding of loop k, loop extent as a multiple
#: of the domain's) — the loop itself, or bindings that are not one-to-one (each instance
#: twice, the init at the last iteration, not quasi-affine)
_BINDINGS = [("k", 1)] * 8 + [("k // 2", 2), ("k % {n}", 2), ("{n} - 1 - k", 1),
                              ("k * k % {n}", 1)]


def _program(draw) -> str:
    """A random reduction: 0-2 spatial axes, 1-3 reduction axes, sum / max / min, A
    indexed by a random order of all axes; sometimes the first reduction axis bound by
    something other than its loop, sometimes a ``T.where`` on the block, sometimes two
    rows writing one element of B."""
    n_sp = draw(st.integers(0, 2))
    n_rd = draw(st.integers(1, 3))
    sp = [draw(st.sampled_from([1, 2, 3, 4])) for _ in range(n_sp)]
    rd = [draw(st.sampled_from([2, 3, 4, 6])) for _ in range(n_rd)]
    kind = draw(st.sampled_from(["sum", "max", "min"]))
    binding, times = draw(st.sampled_from(_BINDINGS))
    where = draw(st.sampled_from([""] * 10 + ["T.where(k >= 1)",
                                              f"T.where(k < {rd[0] * times - 1})"]))
    s_ax, r_ax = ["vi", "vj"][:n_sp], ["vk", "vl", "vm"][:n_rd]
    loops = ["i", "j"][:n_sp] + ["k", "l", "m"][:n_rd]
    extents = sp + [rd[0] * times] + rd[1:]
    order = draw(st.permutations(list(zip(s_ax + r_ax, sp + rd))))
    a_shape = ", ".join(str(e) for _, e in order) + ","
    a_idx = ", ".join(v for v, _ in order)
    b_dims, b_ids = [str(e) for e in sp], list(s_ax)
    if sp and draw(st.sampled_from([False] * 5 + [True])):
        # two spatial iterations write one element (the last wins, or is refused)
        b_dims[0], b_ids[0] = str((sp[0] + 1) // 2), "vi // 2"
    b_shape = (", ".join(b_dims) + ",") if sp else "1,"
    b_idx = ", ".join(b_ids) if sp else "0"
    init = {"sum": "T.float32(0)", "max": "T.float32(-3.4028234663852886e+38)",
            "min": "T.float32(3.4028234663852886e+38)"}[kind]
    new = {"sum": f"B[{b_idx}] + A[{a_idx}]", "max": f"T.max(B[{b_idx}], A[{a_idx}])",
           "min": f"T.min(B[{b_idx}], A[{a_idx}])"}[kind]
    axes = [f"{v} = T.axis.spatial({e}, {lp})" for v, e, lp in zip(s_ax, sp, loops)]
    axes.append(f"vk = T.axis.reduce({rd[0]}, {binding.format(n=rd[0])})")
    axes += [f"{v} = T.axis.reduce({e}, {lp})" for v, e, lp in zip(r_ax[1:], rd[1:],
                                                                   loops[n_sp + 1:])]
    head = "\n            ".join(axes + ([where] if where else []))
    return f"""
@T.prim_func
def main(A: T.Buffer(({a_shape}), "float32"), B: T.Buffer(({b_shape}), "float32")):
    for {", ".join(loops)} in T.grid({", ".join(str(e) for e in extents)}):
        with T.block("B"):
            {head}
            with T.init():
                B[{b_idx}] = {init}
            B[{b_idx}] = {new}
"""


def _schedule_before(draw, sch: Schedule) -> None:
    """Random splits (mostly by divisors), fusions of neighbouring loops and reorders;
    each refusal (of these other primitives) is skipped."""
    for _ in range(draw(st.integers(0, 3))):
        loops = _loops(sch)
        op = draw(st.sampled_from(["split", "fuse", "reorder"]))
        try:
            if op == "split":
                lp = draw(st.sampled_from(loops))
                ext = int(sch.get(lp).extent.value)
                divisors = [d for d in range(2, ext + 1) if ext % d == 0] or [2]
                factor = draw(st.sampled_from(divisors * 3 + [2, 4]))
                sch.split(lp, [None, factor])
            elif op == "fuse" and len(loops) >= 2:
                p = draw(st.integers(0, len(loops) - 2))
                sch.fuse(loops[p], loops[p + 1])
            elif op == "reorder" and len(loops) >= 2:
                sch.reorder(*draw(st.permutations(loops)))
        except ScheduleError:
            pass


@given(st.data())
def test_rfactor_accepts_only_what_it_computes_the_same(data):
    """The differential property: on random small reductions (sums, maxima and minima
    over 1-3 reduction axes, random spatial axes) after random splits, fusions and
    reorders, rfactor of a random loop at a random factor_axis either computes what the
    original computes (interpreter on both, and the compiled new program) or is refused
    with a ScheduleError naming its rule — never another exception. A second rfactor, of
    the rfactor block when it still reduces, is held to the same standard."""
    draw = data.draw
    mod = engine.parse(_program(draw))
    sch = Schedule(mod)
    _schedule_before(draw, sch)
    for round_ in range(2):
        block = "B" if round_ == 0 else "B_rf"
        try:
            loops = _loops(sch, block)
        except ScheduleError:
            return
        # mostly a loop of a reduction axis (named after k, l or m), sometimes any loop
        reducing = [lp for lp in loops if sch.get(lp).loop_var.name[0] in "klm"]
        anywhere = draw(st.sampled_from([False, False, False, True]))
        loop = draw(st.sampled_from(reducing if reducing and not anywhere else loops))
        nd = len(sch.get(sch.get_block(block)).writes[0].buffer.shape)
        # factor_axis in [-(ndim + 1), ndim], and now and then just outside it
        axis = draw(st.sampled_from(list(range(-(nd + 1), nd + 1)) * 8 + [-(nd + 2), nd + 1]))
        before = sch.mod
        try:
            sch.rfactor(loop, axis)
        except ScheduleError as e:
            assert str(e).startswith("rfactor refused") and e.rule
            assert sch.mod is before
            event(f"round {round_}: refused ({' '.join(e.rule.split()[2:6])})")
            return
        event(f"round {round_}: accepted")
        _computes_the_same(mod, sch, seed=round_)
