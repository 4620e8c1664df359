"""A vectorized loop whose extent is not a power of two becomes power-of-two vector pieces
(engine/lower/legalize.py): the same operations on the same elements, so the results are
numpy's and one wide vector's (up to where LLVM fuses a multiply and an add: one rounding
instead of two); LLVM keeps every piece in whole registers (one vector of 56 floats was
taken apart lane by lane on every step of a reduction)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
import engine.lower.legalize as legalize
from engine import workloads
from engine.ir import BufferStore, collect
from engine.ir.dtype import lanes_of
from engine.lower import lower
from engine.lower.legalize import piece_widths


@pytest.mark.parametrize("ext, widths", [(56, [32, 16, 8]), (7, [4, 2, 1]), (12, [8, 4]),
                                         (60, [32, 16, 8, 4]), (3, [2, 1]), (64, [64]),
                                         (1, [1])])
def test_piece_widths_are_the_binary_digits(ext, widths):
    assert piece_widths(ext) == widths
    assert sum(widths) == ext


def _row_matmul(e, m=3, k=5):
    """C[i, 0:e] accumulated over k with the row vectorized (kept in registers over k)."""
    sch = engine.Schedule(workloads.get("matmul", m=m, n=e, k=k))
    blk = sch.get_block("C")
    i, j, kk = sch.get_loops(blk)
    sch.reorder(i, kk, j)
    sch.vectorize(j)
    sch.decompose_reduction(blk, kk)
    return sch


def _store_lanes(func):
    return sorted(lanes_of(s.value.dtype) for s in collect(func.body, BufferStore)
                  if s.buffer.name == "C")


def test_a_row_of_56_is_stored_as_32_16_and_8_lanes():
    low = lower(_row_matmul(56).mod["matmul"])
    # the initialisation and the update, each in three pieces
    assert _store_lanes(low) == [8, 8, 16, 16, 32, 32]


def test_a_power_of_two_row_stays_one_vector():
    assert _store_lanes(lower(_row_matmul(32).mod["matmul"])) == [32, 32]


def test_no_vector_type_of_56_lanes_reaches_llvm():
    text = engine.build(_row_matmul(56).mod, cache=False).get_source("ll")
    widths = {int(w) for w in re.findall(r"<(\d+) x float>", text)}
    assert widths and all(w & (w - 1) == 0 for w in widths), widths


def _run(sch, m, e, k):
    rt = engine.build(sch.mod, cache=False)
    a, b, c = [np.asarray(x) for x in workloads.random_args("matmul", m=m, n=e, k=k)]
    rt["matmul"](a, b, c)
    return a, b, c


@settings(max_examples=15, deadline=None)
@given(e=st.integers(2, 80), m=st.integers(1, 4), k=st.integers(1, 6))
def test_pieces_match_one_wide_vector_and_numpy(e, m, k):
    a, b, pieces = _run(_row_matmul(e, m, k), m, e, k)
    np.testing.assert_allclose(pieces, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-4, atol=1e-4)
    legalize.SPLIT_ODD_WIDTHS = False
    try:
        _, _, whole = _run(_row_matmul(e, m, k), m, e, k)
    finally:
        legalize.SPLIT_ODD_WIDTHS = True
    # the same operations lane for lane; LLVM may fuse a multiply-add in one and not the
    # other (the wide vector's lanes taken apart): a rounding's difference at most per step
    np.testing.assert_allclose(pieces, whole, rtol=1e-6 * k, atol=1e-6 * k)


def test_a_padded_convolution_row_of_56_matches_numpy():
    # conv2d-tiled: the 56-wide output row; the padding's condition is per lane in each piece
    from engine.presets.library import CONV_PARAMS
    small = dict(CONV_PARAMS, in_channels=3, out_channels=2)
    sch = engine.Schedule(workloads.get("conv2d", **small), workload=("conv2d", small))
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    sch.reorder(n, co, oh, ci, kh, kw, ow)
    sch.vectorize(ow)
    pad = sch.get_block("pad", func_name="conv2d")
    sch.vectorize(sch.get_loops(pad)[-1])              # 58 columns, under a condition
    sch.decompose_reduction(conv, ci)
    rt = engine.build(sch.mod, cache=False)
    args = [np.asarray(x) for x in workloads.random_args("conv2d", **small)]
    rt["conv2d"](*args)
    want = workloads.reference("conv2d", **small)(*args[:2])
    want = want[-1] if isinstance(want, (tuple, list)) else want
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)


def test_a_dependence_across_lanes_still_falls_back():
    # B[i] = B[i + 1] reads what another lane writes: refused for the pieces as for the whole
    from engine.script import parse
    text = '''
# from tvm.script import tir as T
@T.prim_func
def shift(B: T.Buffer((57,), "float32")):
    for i in T.vectorized(56):
        with T.block("S"):
            vi = T.axis.spatial(56, i)
            B[vi] = B[vi + 1]
'''
    func = parse(text)
    low = lower(func["shift"] if hasattr(func, "functions") else func)
    assert any(("vectorize_fallback" in dict(f.annotations))
               for f in collect(low.body, engine.ir.For))
