"""fuse_reduction_epilogue: what it fuses computes what the two blocks computed, and what
it refuses is a ScheduleError naming the rule.

Every accepted schedule here is run three ways on random inputs: the reference interpreter
on the ORIGINAL program, the interpreter on the new one, and the compiled new one
(``engine.build``). The inputs are small integers (held in float32 they add up exactly
whatever the order), so the three must be equal, not merely close.

The programs are written for these tests; the docstrings name the test of Apache TVM's
``tests/python/s_tir/schedule/test_tir_schedule_fuse_reduction_epilogue*.py`` each one
mirrors. Where TVM's fused program computes something else than its input (a clipping or a
ReLU applied at every step of the sum; a second reader of the reduction result left with
an unwritten buffer) the test says what the engine does instead.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import event, given, strategies as st

import engine
from engine.schedule import Schedule, ScheduleError, Trace
from engine.schedule.python_trace import apply_python_trace
from semantics import (assert_computes_exactly, assert_refused, run_compiled,
                       run_interpreted, small_integer_args)


# ----------------------------------------------------------------------------- helpers
def _args(mod, seed: int = 0) -> list:
    return small_integer_args(mod["main"], seed, -4, 5)


def _interpret(mod, args) -> list:
    return run_interpreted(mod, "main", args)


def _compiled(mod, args) -> list:
    return run_compiled(mod, "main", args)


def _computes_the_same(original, new, seed: int = 0, compiled: bool = True) -> list:
    """The interpreter on the original == the interpreter on the new program == the
    compiled new program, on every parameter; returns the original's results."""
    return assert_computes_exactly(original, new, "main", seeds=(seed,), compiled=compiled)


def _refused(sch: Schedule, action, *needles) -> ScheduleError:
    """``action()`` raises a ScheduleError naming the rule, and the program is unchanged."""
    err = assert_refused(sch, action, *needles, prefix="fuse_reduction_epilogue refused")
    assert err.rule
    return err


def _fuse(sch: Schedule, red: str = "dot", epi: str = "epilogue") -> None:
    sch.fuse_reduction_epilogue(sch.get_block(red), sch.get_block(epi))


def _replays(sch: Schedule, mod) -> None:
    """The trace replays to the same program from JSON and from TVM's Python export."""
    doc = json.loads(json.dumps(sch.trace.as_json()))
    again = Schedule(mod)
    Trace.from_json(doc).apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)
    text = sch.trace.export("tvm")
    assert "sch.fuse_reduction_epilogue(reduction_block=b0, epilogue_block=b1)" in text
    again = Schedule(mod)
    apply_python_trace(text, again)
    assert engine.structural_equal(again.mod, sch.mod)


def _program(epilogue: str, dtype: str = "float32", acc: str | None = None,
             extra: str = "", m: int = 6, n: int = 5, k: int = 7, d_dtype: str | None = None,
             bias: str = "(5,)") -> str:
    """A matrix product ``temp = A @ B`` (``dot``) then ``D[vi, vj] = <epilogue>``
    (``epilogue``); ``acc`` is the accumulator's dtype (the inputs are cast to it),
    ``extra`` a block placed between the two."""
    acc = acc or dtype
    a, b = "A[vi, vk]", "B[vk, vj]"
    if acc != dtype:
        a, b = f"T.Cast(\"{acc}\", {a})", f"T.Cast(\"{acc}\", {b})"
    return f"""
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "{dtype}"), B: T.Buffer(({k}, {n}), "{dtype}"),
         bias: T.Buffer({bias}, "{acc}"), D: T.Buffer(({m}, {n}), "{d_dtype or acc}")):
    temp = T.alloc_buffer(({m}, {n}), "{acc}")
    for i, j, k in T.grid({m}, {n}, {k}):
        with T.block("dot"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = T.{acc}(0)
            temp[vi, vj] = temp[vi, vj] + {a} * {b}
{extra}
    for i, j in T.grid({m}, {n}):
        with T.block("epilogue"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = {epilogue}
"""


# ------------------------------------------------------ TVM's tests, one by one (bias)
def test_bias_on_an_int8_product_accumulated_in_int32_becomes_the_init():
    """The case of TVM's test_fuse_reduction_epilogue_basic: int8 inputs, an int32
    accumulator, a bias added after: the bias becomes the init (``D = bias``), the block
    reads the bias first, and the epilogue block (and its loops) disappear; ``temp`` stays
    allocated (unused), as TVM leaves it."""
    mod = engine.parse(_program("temp[vi, vj] + bias[vj]", dtype="int8", acc="int32"))
    sch = Schedule(mod)
    _fuse(sch)
    text = sch.mod.script()
    assert "with T.init():\n                    D[vi, vj] = bias[vj]" in text
    assert "T.reads(bias[vj], A[vi, vk], B[vk, vj])" in text and "T.writes(D[vi, vj])" in text
    assert 'D[vi, vj] = D[vi, vj] + T.Cast("int32", A[vi, vk])' in text
    assert 'T.block("epilogue")' not in text and "temp = T.alloc_buffer" in text
    _computes_the_same(mod, sch.mod)
    _replays(sch, mod)


def test_bias_on_a_float32_product_becomes_the_init():
    """The case of TVM's test_fuse_reduction_epilogue_fp32: the same in float32, the bias a
    whole matrix (``D[vi, vj] = bias[vi, vj]``)."""
    mod = engine.parse(_program("temp[vi, vj] + bias[vi, vj]", bias="(6, 5)"))
    sch = Schedule(mod)
    _fuse(sch)
    text = sch.mod.script()
    assert "D[vi, vj] = bias[vi, vj]\n" in text
    assert "D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vk, vj]\n" in text
    _computes_the_same(mod, sch.mod)
    _replays(sch, mod)


def test_fused_bias_computes_the_product_plus_the_bias():
    """The case of TVM's test_fuse_reduction_epilogue_numerical_correctness: the fused
    program, interpreted and compiled, equals numpy's ``A @ B + bias``."""
    mod = engine.parse(_program("bias[vj] + temp[vi, vj]", dtype="int8", acc="int32"))
    sch = Schedule(mod)
    _fuse(sch)
    args = _args(mod, seed=3)
    want = args[0].astype("int32") @ args[1].astype("int32") + args[2]
    np.testing.assert_array_equal(_computes_the_same(mod, sch.mod, seed=3)[3], want)
    np.testing.assert_array_equal(_compiled(sch.mod, args)[3], want)


SECOND_READER = """
    for i, j in T.grid(6, 5):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = temp[vi, vj]
"""


def _with_second_reader(epilogue: str) -> str:
    text = _program(epilogue, extra=SECOND_READER)
    return text.replace('D: T.Buffer((6, 5), "float32")):',
                        'D: T.Buffer((6, 5), "float32"), E: T.Buffer((6, 5), "float32")):')


def test_second_reader_of_the_reduction_result_is_refused():
    """The case of TVM's test_fuse_reduction_epilogue_multiple_epilogue: another block
    (``copy``) reads ``temp`` too. TVM fuses anyway and leaves ``temp`` allocated but no
    longer written, so ``copy`` reads garbage; here it is refused."""
    sch = Schedule(engine.parse(_with_second_reader("temp[vi, vj] + bias[vj]")))
    e = _refused(sch, lambda: _fuse(sch), "block copy also reads temp",
                 "nothing would write once dot writes D")
    assert "copy" in e.highlight


def test_reduction_result_read_twice_is_refused():
    """The case of TVM's test_fuse_reduction_epilogue_reject_multiple_use."""
    sch = Schedule(engine.parse(_program("(temp[vi, vj] + bias[vj]) * (temp[vi, vj] - "
                                         "bias[vj])")))
    e = _refused(sch, lambda: _fuse(sch), "reads temp 2 times", "exactly once")
    assert e.highlight == ["dot", "epilogue"]


@pytest.mark.parametrize("epilogue", [
    "temp[vi, vj] * T.float32(2) + bias[vj]",
    "(temp[vi, vj] + bias[vj]) * T.float32(2)",
    "temp[vi, vj] / T.float32(2)",
])
def test_scaled_reduction_result_is_refused(epilogue):
    """The case of TVM's test_fuse_reduction_epilogue_reject_scaling: the result is
    multiplied or divided (anywhere above it)."""
    sch = Schedule(engine.parse(_program(epilogue)))
    _refused(sch, lambda: _fuse(sch), "scales the reduction result")


# -------------------------------------------------- TVM's tests (clipping, ReLU)
CLIPS = [
    "T.min(T.max(temp[vi, vj], T.float32(-3)), T.float32(4))",
    "T.min(T.float32(4), T.max(temp[vi, vj], T.float32(-3)))",
    "T.min(T.max(T.float32(-3), temp[vi, vj]), T.float32(4))",
    "T.max(T.min(temp[vi, vj], T.float32(4)), T.float32(-3))",
    "T.max(T.float32(-3), T.min(temp[vi, vj], T.float32(4)))",
]


def test_clipping_is_applied_once_when_each_element_is_finished():
    """The case of TVM's test_matmul_clipping: TVM clips the running sum at every step
    (``D = min(max(D + A * B, lo), hi)``); here the init is the sum's own (0), the sum
    runs unclipped, and the clipping is applied by the last instance of each element."""
    mod = engine.parse(_program(CLIPS[0]))
    sch = Schedule(mod)
    _fuse(sch)
    text = sch.mod.script()
    assert "with T.init():\n                    D[vi, vj] = T.float32(0)" in text
    assert ("D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vk, vj]\n                if vk == 6:\n"
            "                    D[vi, vj] = T.min(T.max(D[vi, vj], T.float32(-3)), "
            "T.float32(4))") in text
    _computes_the_same(mod, sch.mod)
    _replays(sch, mod)


def test_clipping_the_finished_sum_is_not_clipping_every_step():
    """The case of TVM's test_matmul_clipping_correctness_unified, which checks that the
    fused program clips at every step; the engine's computes what the original program
    computes — ``clip(A @ B)`` — and on these inputs that differs from clipping each step
    (the sum climbs past the bound and comes back)."""
    mod = engine.parse(_program(CLIPS[0], m=1, n=1, k=3, bias="(1,)"))
    sch = Schedule(mod)
    _fuse(sch)
    A = np.array([[4, 4, -4]], "float32")
    B = np.array([[1], [1], [1]], "float32")
    args = [A, B, np.zeros(1, "float32"), np.zeros((1, 1), "float32")]
    assert _interpret(mod, args)[3][0, 0] == 4 == _compiled(sch.mod, args)[3][0, 0]
    step = 0.0
    for kk in range(3):
        step = min(max(step + A[0, kk], -3), 4)
    assert step == 0          # what clipping every step (TVM's fused program) gives
    _computes_the_same(mod, sch.mod)


def test_clipping_with_a_second_reader_is_refused():
    """The case of TVM's test_matmul_clipping_multiple_epilogue (see
    test_second_reader_of_the_reduction_result_is_refused)."""
    sch = Schedule(engine.parse(_with_second_reader(CLIPS[0])))
    _refused(sch, lambda: _fuse(sch), "block copy also reads temp")


@pytest.mark.parametrize("clip", CLIPS)
def test_every_order_of_min_and_max_is_fused(clip):
    """The case of TVM's test_matmul_clipping_commutative_variants: all five ways of
    writing the clipping are fused (and replay)."""
    mod = engine.parse(_program(clip))
    sch = Schedule(mod)
    _fuse(sch)
    assert "if vk == 6:" in sch.mod.script()
    _computes_the_same(mod, sch.mod, compiled=False)
    _replays(sch, mod)


def test_bias_relu_moves_the_bias_into_the_init_and_applies_relu_at_the_end():
    """The case of TVM's test_matmul_bias_relu: ``max(temp + bias, 0)``. TVM makes the
    init ``max(bias, 0)`` and applies the ReLU at every step; here the bias (the linear
    part) is the init and the ReLU is applied once, to the finished sum."""
    mod = engine.parse(_program("T.max(temp[vi, vj] + bias[vj], T.float32(0))"))
    sch = Schedule(mod)
    _fuse(sch)
    text = sch.mod.script()
    assert "with T.init():\n                    D[vi, vj] = bias[vj]" in text
    assert ("if vk == 6:\n                    D[vi, vj] = T.max(D[vi, vj], T.float32(0))"
            in text)
    _computes_the_same(mod, sch.mod)
    _replays(sch, mod)


def test_relu_of_the_finished_sum_is_not_relu_of_every_step():
    """The case of TVM's test_matmul_bias_relu_correctness_unified, which checks the
    per-step ReLU of TVM's fused program; the engine's computes ``relu(A @ B + bias)``,
    which on these inputs differs from a ReLU after every step."""
    mod = engine.parse(_program("T.max(temp[vi, vj] + bias[vj], T.float32(0))",
                                m=1, n=1, k=2, bias="(1,)"))
    sch = Schedule(mod)
    _fuse(sch)
    A, B = np.array([[-3, 4]], "float32"), np.array([[1], [1]], "float32")
    args = [A, B, np.zeros(1, "float32"), np.zeros((1, 1), "float32")]
    assert _compiled(sch.mod, args)[3][0, 0] == 1 == _interpret(mod, args)[3][0, 0]
    step = 0.0
    for kk in range(2):
        step = max(step + A[0, kk], 0)
    assert step == 4          # what a ReLU at every step (TVM's fused program) gives


def test_bias_relu_with_a_second_reader_is_refused():
    """The case of TVM's test_matmul_bias_relu_multiple_epilogue."""
    sch = Schedule(engine.parse(_with_second_reader(
        "T.max(temp[vi, vj] + bias[vj], T.float32(0))")))
    _refused(sch, lambda: _fuse(sch), "block copy also reads temp")


# ------------------------------------------------------------------ beyond TVM's tests
@pytest.mark.parametrize("epilogue, needle", [
    ("temp[vi, 0] + bias[vj]", "reads temp[vi, 0], not the element at its own axes"),
    ("temp[(vi + 1) % 6, vj]", "not the element at its own axes"),
    ("bias[vj]", "does not read temp"),
])
def test_epilogue_reading_another_element_is_refused(epilogue, needle):
    """TVM maps the epilogue's axes onto the reduction's one by one and never looks at the
    index it reads ``temp`` at: ``temp[vi, 0]`` would be fused as ``temp[vi, vj]``."""
    sch = Schedule(engine.parse(_program(epilogue)))
    _refused(sch, lambda: _fuse(sch), needle)


def test_transposed_read_is_fused_at_the_element_it_reads():
    """``D[vi, vj] = temp[vj, vi] + bias[vi]`` is element-wise too: the fused block writes
    ``D`` transposed (TVM would write ``D[vi, vj]`` from ``temp[vi, vj]``)."""
    mod = engine.parse(_program("temp[vj, vi] + bias[vi]", m=5, n=5, k=3))
    sch = Schedule(mod)
    _fuse(sch)
    assert "D[vj, vi] = bias[vj]" in sch.mod.script()
    _computes_the_same(mod, sch.mod)


def test_epilogue_storing_elsewhere_than_its_axes_is_refused():
    text = _program("temp[vi, vj] + bias[vj]").replace("D[vi, vj] = temp", "D[vi, 0] = temp")
    sch = Schedule(engine.parse(text))
    _refused(sch, lambda: _fuse(sch), "writes D[vi, 0], not the element at its own axes")


def test_output_of_another_dtype_is_refused():
    """``D`` is int8 (the epilogue casts): the fused block would keep its int32 running sum
    in an int8 buffer."""
    text = _program('T.Cast("int8", temp[vi, vj])', dtype="int8", acc="int32",
                    d_dtype="int8")
    sch = Schedule(engine.parse(text))
    _refused(sch, lambda: _fuse(sch), "writes D as int8", "keeps its running result in D")


BUMP_BIAS = """
    for j in range(5):
        with T.block("bump"):
            vj = T.axis.remap("S", [j])
            bias[vj] = bias[vj] + T.float32(1)
"""


def test_block_between_writing_the_bias_is_refused():
    """Block ``bump`` changes the bias after the product and before the epilogue: fused,
    the bias would be read before the change."""
    sch = Schedule(engine.parse(_program("temp[vi, vj] + bias[vj]", extra=BUMP_BIAS)))
    e = _refused(sch, lambda: _fuse(sch), "block bump runs between the reduction dot and "
                 "the epilogue epilogue and writes bias")
    assert "bump" in e.highlight


def test_block_between_writing_other_buffers_is_fine():
    text = _program("temp[vi, vj] + bias[vj]", extra=BUMP_BIAS.replace("bias[vj] = bias[vj]",
                                                                        "A[0, vj] = A[0, vj]"))
    mod = engine.parse(text)
    sch = Schedule(mod)
    _fuse(sch)
    _computes_the_same(mod, sch.mod)


def test_decomposed_reduction_is_refused():
    sch = Schedule(engine.parse(_program("temp[vi, vj] + bias[vj]")))
    sch.decompose_reduction(sch.get_block("dot"), sch.get_loops(sch.get_block("dot"))[2])
    _refused(sch, lambda: _fuse(sch, "dot_update"), "has no T.init()")


def test_epilogue_and_reduction_swapped_are_refused():
    sch = Schedule(engine.parse(_program("temp[vi, vj] + bias[vj]")))
    _refused(sch, lambda: _fuse(sch, "epilogue", "dot"), "not a reduction block")


@pytest.mark.parametrize("epilogue", ["temp[vi, vj] + bias[vj]", CLIPS[1]])
def test_tiled_reduction_with_the_epilogue_computed_at_a_row(epilogue):
    """After a tiling (``k`` split, the inner spatial loop inside the reduction loops) and
    the epilogue moved under the row loop (reverse_compute_at), the fusion is exact: each
    element still finishes at its last reduction iteration."""
    mod = engine.parse(_program(epilogue, k=8))
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("dot"))
    k0, k1 = sch.split(k, [None, 4])
    j0, j1 = sch.split(j, [None, 5])
    sch.reorder(j0, k0, j1, k1)
    sch.reverse_compute_at(sch.get_block("epilogue"), i)
    _fuse(sch)
    _computes_the_same(mod, sch.mod)


def test_clipping_under_a_split_that_does_not_divide_the_reduction_is_refused():
    """A split of the 7 reduction iterations by 4 (``T.where(k_0 * 4 + k_1 < 7)`` on the
    block): the clipping cannot be shown to run at the finishing instance. A bias needs
    no such proof (it is the init) and is fused."""
    for epilogue, ok in ((CLIPS[0], False), ("temp[vi, vj] + bias[vj]", True)):
        mod = engine.parse(_program(epilogue))
        sch = Schedule(mod)
        sch.split(sch.get_loops(sch.get_block("dot"))[2], [None, 4])
        if ok:
            _fuse(sch)
            _computes_the_same(mod, sch.mod)
        else:
            _refused(sch, lambda: _fuse(sch), "is bound to k_0 * 4 + k_1, which takes 8 "
                     "values where its domain has 7")


def test_clipping_on_a_reversed_reduction_binding_is_refused():
    """``vk = 6 - k`` visits the maximum first: the clipping would run before the sum."""
    text = _program(CLIPS[0]).replace('vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
                                      'vi, vj = T.axis.remap("SS", [i, j])\n'
                                      '            vk = T.axis.reduce(7, 6 - k)')
    sch = Schedule(engine.parse(text))
    _refused(sch, lambda: _fuse(sch), "the reduction axis vk is bound to 6 - k")


def test_bias_on_a_max_reduction_is_applied_at_the_end():
    """A bias on a max reduction is not an init (``max(bias, ...)`` is not ``max + bias``):
    it is applied once, by the last instance, as a clipping would be."""
    text = _program("temp[vi, vj] + bias[vj]").replace(
        "temp[vi, vj] = T.float32(0)", "temp[vi, vj] = T.float32(-100)").replace(
        "temp[vi, vj] + A[vi, vk] * B[vk, vj]", "T.max(temp[vi, vj], A[vi, vk] * B[vk, vj])")
    mod = engine.parse(text)
    sch = Schedule(mod)
    _fuse(sch)
    assert "D[vi, vj] = T.float32(-100)" in sch.mod.script()
    _computes_the_same(mod, sch.mod)


# ---------------------------------------------------------- the differential property
#: epilogues: (text, must be refused) — {t} is the element of temp the epilogue reads,
#: {b} an element of the bias, {lo} {hi} clipping bounds, {c} a constant
_EPILOGUES = [
    ("{t} + {b}", False), ("{b} + {t}", False), ("{t} - {b}", False), ("{b} - {t}", False),
    ("({t} + {b}) - {b}", False), ("{t}", False),
    ("T.max({t}, {z})", False), ("T.max({t} + {b}, {z})", False),
    ("T.min(T.max({t}, {lo}), {hi})", False), ("T.max({hi}, T.min({t}, {lo}))", False),
    ("T.min(T.max({t} + {b}, {lo}), {hi})", False), ("T.max({lo}, T.min({hi}, {t}))", False),
    # what must be refused: the result twice, scaled, another element, a broadcast index
    ("{t} + {t}", True), ("{t} * {c} + {b}", True), ("({t} + {b}) * {c}", True),
    ("{other} + {b}", True), ("T.max({other}, {z})", True),
]


#: how the first reduction axis is bound: (binding of loop k, the loop's extent as a
#: multiple of the domain's) — its loop, reversed (the maximum first), each instance twice
#: in a row, or the whole domain twice round
_BINDINGS = [("k", 1)] * 6 + [("{n} - 1 - k", 1), ("k // 2", 2), ("k % {n}", 2)]


def _draw_program(draw) -> tuple[str, bool, dict]:
    """A random small reduction (1-2 spatial axes, 1-2 reduction axes; a sum of products,
    sometimes a max) and a random epilogue over it; returns the program, whether it must
    be refused, and what was drawn."""
    dtype = draw(st.sampled_from(["float32"] * 3 + ["int32"]))
    n_sp, n_rd = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    sp = [draw(st.integers(1, 4)) for _ in range(n_sp)]
    rd = [draw(st.integers(2, 4)) for _ in range(n_rd)]
    s_ax, r_ax = ["vi", "vj"][:n_sp], ["vk", "vl"][:n_rd]
    loops = ["i", "j"][:n_sp] + ["k", "l"][:n_rd]
    order = draw(st.permutations(list(zip(s_ax + r_ax, sp + rd))))
    a_shape = ", ".join(str(e) for _, e in order)
    a_idx = ", ".join(v for v, _ in order)
    kind = draw(st.sampled_from(["sum"] * 4 + ["max"]))
    lowest = "T.float32(-100)" if dtype == "float32" else "T.int32(-100)"
    init = f"T.{dtype}(0)" if kind == "sum" else lowest
    t = f"temp[{', '.join(s_ax)}]"
    term = f"A[{a_idx}] * W[{', '.join(r_ax)}]"
    update = f"{t} + {term}" if kind == "sum" else f"T.max({t}, {term})"
    # the bias: broadcast along a random choice of the epilogue's axes
    b_axes = draw(st.sampled_from([[], *[[a] for a in s_ax], s_ax]))
    b_shape = ", ".join(str(sp[s_ax.index(a)]) for a in b_axes) or "1"
    b = f"bias[{', '.join(b_axes) or '0'}]"
    text, must_refuse = draw(st.sampled_from(_EPILOGUES))
    lo = draw(st.integers(-6, 6))
    hi = lo + draw(st.integers(0, 8))
    other = (f"temp[{(', '.join([f'({s_ax[0]} + 1) % {sp[0]}'] + s_ax[1:]))}]"
             if draw(st.booleans()) else f"temp[{', '.join(['0'] * n_sp)}]")
    transposed = n_sp == 2 and sp[0] == sp[1] and draw(st.sampled_from([False] * 3 + [True]))
    t_epi = f"temp[{s_ax[1]}, {s_ax[0]}]" if transposed else t
    epilogue = text.format(t=t_epi, b=b, lo=f"T.{dtype}({lo})", hi=f"T.{dtype}({hi})",
                           z=f"T.{dtype}(0)", c=f"T.{dtype}(2)", other=other)
    # sometimes a block between the two: writing the bias, reading temp, or unrelated
    between = draw(st.sampled_from(["none"] * 9 + ["bias", "temp", "other"]))
    extra = ""
    if between != "none":
        target, source = {"bias": (b, b), "temp": ("F[0]", t), "other": ("F[0]", "F[0]")}[
            between]
        ax = ", ".join(s_ax)
        extra = f"""
    for {", ".join(loops[:n_sp])} in T.grid({", ".join(map(str, sp))}):
        with T.block("between"):
            {ax} = T.axis.remap("{'S' * n_sp}", [{", ".join(loops[:n_sp])}])
            {target} = {source} + T.{dtype}(1)
"""
        must_refuse = must_refuse or between == "temp" or (between == "bias" and
                                                            "{b}" in text)
    # the reduction's loops: the first reduction axis sometimes bound other than to its
    # loop (reversed, each instance twice, or twice round), the block sometimes under a
    # T.where cutting its last iteration, and now and then a loop no axis uses
    binding, times = draw(st.sampled_from(_BINDINGS))
    extents = sp + [rd[0] * times] + rd[1:]
    axes = [f"{v} = T.axis.spatial({e}, {lp})" for v, e, lp in zip(s_ax, sp, loops)]
    axes.append(f"vk = T.axis.reduce({rd[0]}, {binding.format(n=rd[0])})")
    axes += [f"{v} = T.axis.reduce({e}, {lp})" for v, e, lp in zip(r_ax[1:], rd[1:],
                                                                   loops[n_sp + 1:])]
    if binding != "{n} - 1 - k" and draw(st.sampled_from([False] * 7 + [True])):
        # (not on the reversed binding: its last iteration is the one that initialises,
        # and the original would read temp before writing it)
        axes.append(f"T.where(k < {rd[0] * times - 1})")
    grid = list(zip(loops, extents))
    if draw(st.sampled_from([False] * 5 + [True])):
        grid.insert(draw(st.integers(0, len(grid))), ("r", 2))
    head = "\n            ".join(axes)
    s_dims = ", ".join(map(str, sp))
    r_dims = ", ".join(map(str, rd))
    program = f"""
@T.prim_func
def main(A: T.Buffer(({a_shape}), "{dtype}"), W: T.Buffer(({r_dims}), "{dtype}"),
         bias: T.Buffer(({b_shape},), "{dtype}"), D: T.Buffer(({s_dims}), "{dtype}"),
         F: T.Buffer((1,), "{dtype}")):
    temp = T.alloc_buffer(({s_dims}), "{dtype}")
    for {", ".join(lp for lp, _ in grid)} in T.grid({", ".join(str(e) for _, e in grid)}):
        with T.block("dot"):
            {head}
            with T.init():
                {t} = {init}
            {t} = {update}
{extra}
    for {", ".join(loops[:n_sp])} in T.grid({s_dims}):
        with T.block("epilogue"):
            {", ".join(s_ax)} = T.axis.remap("{'S' * n_sp}", [{", ".join(loops[:n_sp])}])
            D[{", ".join(s_ax)}] = {epilogue}
"""
    return program, must_refuse, {"kind": kind, "between": between}


def _schedule_before(draw, sch: Schedule) -> None:
    """Random splits (mostly by divisors), fusions of neighbouring loops and reorders of
    the reduction's loops, and sometimes the epilogue moved under one of its spatial loops
    (reverse_compute_at); each refusal of these other primitives is skipped."""
    for _ in range(draw(st.integers(0, 3))):
        loops = sch.get_loops(sch.get_block("dot"))
        op = draw(st.sampled_from(["split", "split", "fuse", "reorder"]))
        try:
            if op == "split":
                lp = draw(st.sampled_from(loops))
                ext = int(sch.get(lp).extent.value)
                divisors = [d for d in range(2, ext + 1) if ext % d == 0] or [2]
                sch.split(lp, [None, draw(st.sampled_from(divisors * 3 + [3]))])
            elif op == "fuse" and len(loops) >= 2:
                p = draw(st.integers(0, len(loops) - 2))
                sch.fuse(loops[p], loops[p + 1])
            elif op == "reorder" and len(loops) >= 2:
                sch.reorder(*draw(st.permutations(loops)))
        except ScheduleError:
            pass
    if draw(st.sampled_from([False] * 3 + [True])):
        loops = sch.get_loops(sch.get_block("dot"))
        try:
            sch.reverse_compute_at(sch.get_block("epilogue"), draw(st.sampled_from(loops)))
        except ScheduleError:
            pass


@given(st.data())
def test_fusion_computes_what_the_two_blocks_computed_or_is_refused(data):
    """The differential property: on random small reductions (sums of products over 1-2
    reduction axes, sometimes maxima; float32 or int32) after random splits, fusions and
    reorders, with random epilogues (a bias broadcast along random axes, added or
    subtracted, clippings with random bounds in every order, ReLU, bias + ReLU, and what
    TVM must refuse: the result read twice or scaled, another element of it read) and now
    and then a block between the two (writing the bias, reading temp, or unrelated), the
    fusion either computes exactly what the original computed (interpreter on both, and
    the compiled new program, against the interpreter on the program the fusion was
    given) or is refused with a ScheduleError naming its rule — never
    another exception; the cases that must be refused are."""
    draw = data.draw
    text, must_refuse, what = _draw_program(draw)
    mod = engine.parse(text)
    sch = Schedule(mod)
    _schedule_before(draw, sch)
    before = sch.mod
    try:
        _fuse(sch)
    except ScheduleError as e:
        assert str(e).startswith("fuse_reduction_epilogue refused") and e.rule
        assert sch.mod is before
        event(f"refused ({' '.join(e.rule.split()[:6])})")
        return
    assert not must_refuse, f"fused what must be refused:\n{text}\n{sch.mod.script()}"
    event(f"accepted ({what['kind']}, {'finish' if 'if ' in sch.mod.script() else 'init'})")
    # against the program the fusion was given (the other primitives are tested on
    # their own)
    _computes_the_same(before, sch.mod, seed=draw(st.integers(0, 3)))


def test_clipping_under_a_loop_repeating_each_instance_is_refused():
    """A loop ``r`` that no axis uses, inside the reduction loop, runs every instance twice
    in a row — the finishing one too, so the clipping would be applied twice, to a sum
    that moved on in between. A bias needs no such proof (it is the init) and is fused."""
    for epilogue, ok in ((CLIPS[2], False), ("temp[vi, vj] - bias[vj]", True)):
        text = _program(epilogue, m=2, n=3, k=4).replace(
            "for i, j, k in T.grid(2, 3, 4):", "for i, j, k, r in T.grid(2, 3, 4, 2):")
        mod = engine.parse(text)
        sch = Schedule(mod)
        if ok:
            _fuse(sch)
            _computes_the_same(mod, sch.mod)
        else:
            _refused(sch, lambda: _fuse(sch), "loop r runs inside the reduction loops",
                     "do not use loop r")


def test_clipping_with_a_spatial_loop_inside_the_reduction_loop_is_fused():
    """``j`` moved inside ``k`` (reorder): each element still finishes at ``vk == 3``, in
    its own iteration of ``j``."""
    mod = engine.parse(_program(CLIPS[3], m=2, n=3, k=4))
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("dot"))
    sch.reorder(k, j)
    _fuse(sch)
    _computes_the_same(mod, sch.mod)
