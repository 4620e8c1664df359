"""The per-call argument checks: the fast path agrees with the detailed one."""
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import engine
from engine.runtime import ArgumentError
from engine.runtime.module import data_pointer

from argument_variants import VARIANTS, arguments, misaligned


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from(["float32", "float64", "int8", "int32"]), st.booleans())
def test_data_pointer_is_the_first_elements_address(rows, cols, r0, c0, dtype, transpose):
    base = np.zeros((rows + 3, cols + 3), dtype)
    view = base[r0:r0 + rows, c0:c0 + cols]
    if transpose:
        view = view.T
    assert data_pointer(view) == view.ctypes.data
    assert data_pointer(base) == base.ctypes.data


@pytest.fixture(scope="module")
def matmul8():
    f = engine.workloads.get("matmul", n=8)
    return engine.build(f)["matmul"]


def _args():
    return [np.random.rand(8, 8).astype("float32") for _ in range(3)]


def test_good_arguments_run(matmul8):
    a, b, c = _args()
    matmul8(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.parametrize("bad, words", [
    (lambda a, b, c: (a, b, c.astype("float64")), "dtype float32"),
    (lambda a, b, c: (a, b, np.zeros((8, 9), "float32")), "shape (8, 8)"),
    (lambda a, b, c: (a, b, np.zeros((8, 16), "float32")[:, ::2]), "C-contiguous"),
    (lambda a, b, c: (a, b, a), "overlap"),
    (lambda a, b, c: (a, b, np.zeros((16, 8), "float32")[4:12].reshape(8, 8)), None),
    (lambda a, b, c: (a, b, [[0.0] * 8] * 8), "numpy.ndarray"),
    (lambda a, b, c: (a, b), "takes 3 arrays"),
])
def test_bad_arguments_get_the_detailed_reason(matmul8, bad, words):
    a, b, c = _args()
    args = bad(a, b, c)
    if words is None:  # a view into a bigger array is fine
        matmul8(*args)
        np.testing.assert_allclose(args[2], a @ b, rtol=1e-5)
        return
    with pytest.raises(ArgumentError, match=words.replace("(", r"\(").replace(")", r"\)")):
        matmul8(*args)


def test_read_only_output_is_refused(matmul8):
    a, b, c = _args()
    c.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        matmul8(a, b, c)


def test_an_input_may_be_passed_twice(matmul8):
    a, _, c = _args()
    matmul8(a, a, c)  # both read-only uses: allowed
    np.testing.assert_allclose(c, a @ a, rtol=1e-5)


def test_overlapping_views_of_one_array_are_refused():
    f = engine.build(engine.workloads.get("matmul", n=4))["matmul"]
    big = np.zeros(40, "float32")
    a, b = np.ones((4, 4), "float32"), np.ones((4, 4), "float32")
    with pytest.raises(ArgumentError, match="overlap"):
        f(big[:16].reshape(4, 4), b, big[8:24].reshape(4, 4))
    f(a, b, big[16:32].reshape(4, 4))  # disjoint: fine
    np.testing.assert_allclose(big[16:32], 4.0)


def test_check_correctness_reports_the_kernel_run_time(matmul8):
    from engine.runtime import check_correctness
    a, b, c = _args()
    rep = check_correctness(matmul8.module, "matmul", reference_fn=lambda x, y: x @ y,
                            args=[a, b, c])
    assert rep.ok and rep.kernel_seconds is not None and 0 < rep.kernel_seconds < 60


def test_right_arguments_take_the_quick_pass(matmul8, monkeypatch):
    # the per-call check of the common case never reaches the detailed one
    a, b, c = _args()
    monkeypatch.setattr(type(matmul8), "_check", lambda self, arrays: pytest.fail("slow path"))
    assert matmul8.pointers((a, b, c)) == [x.ctypes.data for x in (a, b, c)]


def test_element_misaligned_array_is_refused(matmul8):
    a, b, _ = _args()
    c = misaligned()
    assert not c.flags.aligned
    with pytest.raises(ArgumentError, match="not aligned"):
        matmul8(a, b, c)


@given(st.lists(st.sampled_from(VARIANTS), min_size=3, max_size=3), st.integers(0, 2 ** 16))
def test_quick_pass_agrees_with_the_detailed_check(matmul8, kinds, seed):
    args = arguments(kinds, np.random.default_rng(seed))
    try:
        expected = matmul8._check(tuple(args))
    except ArgumentError as e:
        with pytest.raises(ArgumentError, match=re.escape(str(e))):
            matmul8.pointers(tuple(args))
    else:
        assert matmul8.pointers(tuple(args)) == expected
