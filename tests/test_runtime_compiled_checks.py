"""The argument checks compiled per signature (engine.runtime.fastcall): they accept exactly
what the Python checks accept, never run the kernel on anything else, and hand every doubtful
call to the Python checks (which say what is wrong)."""
import ctypes
import re
import struct
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, strategies as st

import engine
from engine.runtime import ArgumentError
from engine.runtime import fastcall
from engine.runtime.module import Function, ParamSpec

from argument_variants import VARIANTS, arguments, misaligned


def _args(n=8):
    rng = np.random.default_rng(0)
    return [rng.random((n, n)).astype("float32") for _ in range(3)]


@pytest.fixture(scope="module")
def matmul8():
    return engine.build(engine.workloads.get("matmul", n=8), cache=False)["matmul"]


def test_numpy_header_layout_is_confirmed_on_64_bit_cpython():
    if sys.implementation.name != "cpython" or struct.calcsize("P") != 8:
        pytest.skip("the compiled checks are for 64-bit CPython")
    layout = fastcall.array_layout()
    assert layout is not None
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert ctypes.c_void_p.from_address(id(a) + layout.data).value == a.ctypes.data
    assert ctypes.c_void_p.from_address(id(a) + layout.descr).value == id(a.dtype)


def test_right_arguments_never_reach_the_python_checks(matmul8, monkeypatch):
    a, b, c = _args()
    for _ in range(fastcall.COMPILE_AT_CALL):
        matmul8(a, b, c)
    if matmul8._checked is None:
        pytest.skip("no compiled checks in this process")
    monkeypatch.setattr(type(matmul8), "pointers", lambda self, arrays: pytest.fail("Python"))
    c[...] = np.nan
    matmul8(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_a_new_signature_is_compiled_on_the_third_call_and_then_shared(monkeypatch):
    if fastcall.array_layout() is None:
        pytest.skip("no compiled checks in this process")
    monkeypatch.setattr(fastcall, "_checkers", {})
    func = engine.workloads.get("matmul", n=6)
    first = engine.build(func, cache=False)["matmul"]
    a, b, c = _args(6)
    for call in range(1, fastcall.COMPILE_AT_CALL):
        first(a, b, c)
        assert first._checked is not None and not callable(first._checked)
        assert not fastcall._checkers
    first(a, b, c)
    assert callable(first._checked) and len(fastcall._checkers) == 1
    second = engine.build(func, cache=False)["matmul"]
    c[...] = 0
    second(a, b, c)                                   # its first call: the same check
    assert second._checked is first._checked
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def _checker(specs):
    plan = Function._quick_plan(specs)
    call = fastcall.checked_caller(plan) if plan is not None else None
    if call is None:
        pytest.skip("no compiled checks in this process")
    return call


_SPECS = [ParamSpec("A", np.dtype("float32"), (8, 8), None, False),
          ParamSpec("B", np.dtype("float32"), (8, 8), None, False),
          ParamSpec("C", np.dtype("float32"), (8, 8), None, True)]


def _read_only(c):
    c = c.copy()
    c.flags.writeable = False
    return c


@pytest.mark.parametrize("bad", [
    lambda a, b, c: (a, b, c.astype("float64")),
    lambda a, b, c: (a, b, c.astype(">f4")),                    # same kind, other byte order
    lambda a, b, c: (a, b, np.zeros((8, 9), "float32")),
    lambda a, b, c: (a, b, np.zeros((64,), "float32")),          # same size, other rank
    lambda a, b, c: (a, b, np.zeros((8, 16), "float32")[:, ::2]),
    lambda a, b, c: (a, b, np.asfortranarray(c)),
    lambda a, b, c: (a, b, misaligned()),
    lambda a, b, c: (a, b, _read_only(c)),
    lambda a, b, c: (a, b, a),                                   # output overlaps an input
    lambda a, b, c: (a, b, np.asmatrix(c)),                      # a subclass
    lambda a, b, c: (a, b, c.tolist()),
    lambda a, b, c: (a, b, None),
    lambda a, b, c: (a, b),
    lambda a, b, c: (a, b, c, c),
])
def test_each_deviation_is_handed_to_the_python_checks(matmul8, bad):
    call = _checker(_SPECS)
    a, b, c = _args()
    args = bad(a, b, c)
    before = [np.array(x, copy=True) if isinstance(x, np.ndarray) else None for x in args]
    assert call(matmul8.address, id(args)) == fastcall.NEEDS_FULL_CHECK
    for x, old in zip(args, before):   # the kernel did not run
        if old is not None:
            np.testing.assert_array_equal(np.asarray(x), old)


def test_inputs_may_be_the_same_array(matmul8):
    call = _checker(_SPECS)
    a, _, c = _args()
    args = (a, a, c)
    assert call(matmul8.address, id(args)) == 0
    np.testing.assert_allclose(c, a @ a, rtol=1e-5)


def test_adjacent_views_of_one_array_are_apart_and_overlapping_ones_are_not(matmul8):
    call = _checker(_SPECS)
    big = np.ones(64 * 3, "float32")
    a = big[:64].reshape(8, 8)
    b = np.ones((8, 8), "float32")
    touching = (a, b, big[64:128].reshape(8, 8))
    assert call(matmul8.address, id(touching)) == 0
    np.testing.assert_allclose(big[64:128], 8.0)
    one_over = (big[1:65].reshape(8, 8), b, big[64:128].reshape(8, 8))
    assert call(matmul8.address, id(one_over)) == fastcall.NEEDS_FULL_CHECK


def _returning(code: int, nargs: int) -> tuple[object, int]:
    from engine.codegen.target import new_target_machine
    params = ", ".join(["ptr"] * nargs)
    mod = llvm.parse_assembly(f"define i32 @f({params}) {{\n  ret i32 {code}\n}}\n")
    ee = llvm.create_mcjit_compiler(mod, new_target_machine())
    ee.finalize_object()
    return ee, ee.get_function_address("f")


@pytest.mark.parametrize("code, error, words", [(-1, MemoryError, "could not allocate"),
                                                (-7, RuntimeError, "code -7")])
def test_a_kernel_failure_after_the_checks_is_raised(code, error, words):
    ee, address = _returning(code, 3)
    f = Function(None, "f", address, _SPECS)
    with pytest.raises(error, match=words):
        f(*_args())
    with pytest.raises(error, match=words):    # the Python path says the same
        f.call_pointers(f.pointers(tuple(_args())))


def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv("ENGINE_COMPILED_CHECKS", "0")
    f = engine.build(engine.workloads.get("matmul", n=8), cache=False)["matmul"]
    a, b, c = _args()
    f(a, b, c)
    assert f._checked is None
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_signatures_without_a_compiled_check():
    strided = ParamSpec("A", np.dtype("float32"), (4, 4), (32, 4), False)
    empty = ParamSpec("E", np.dtype("float32"), (0, 4), None, True)
    for spec in (strided, empty):    # no quick pass, so no compiled check
        assert Function._quick_plan([spec]) is None
        f = Function(None, "f", 1, [spec])
        assert f._checked is None


@pytest.mark.parametrize("shapes", [[(), (5,)], [(3,), (2, 3, 4)], [(1, 1, 1, 1)]])
def test_other_ranks_and_dtypes(shapes):
    dtypes = ["float64", "int32", "int8", "bool", "uint16"]
    specs = [ParamSpec(f"P{k}", np.dtype(dtypes[k % len(dtypes)]), s, None, k == len(shapes) - 1)
             for k, s in enumerate(shapes)]
    call = _checker(specs)
    ee, address = _returning(0, len(specs))
    good = tuple(np.zeros(s.shape, s.dtype) for s in specs)
    assert call(address, id(good)) == 0
    bad_dtype = good[:-1] + (np.zeros(specs[-1].shape, "float32"),)
    assert call(address, id(bad_dtype)) == fastcall.NEEDS_FULL_CHECK
    bad_shape = good[:-1] + (np.zeros(specs[-1].shape + (1,), specs[-1].dtype),)
    assert call(address, id(bad_shape)) == fastcall.NEEDS_FULL_CHECK


def _outcome(run, args):
    out = args[2] if len(args) > 2 and isinstance(args[2], np.ndarray) else None
    if out is not None and out.flags.writeable:
        out[...] = -1
    try:
        run(args)
    except Exception as e:  # noqa: BLE001 - compared below
        result = (type(e), str(e))
    else:
        result = "ran"
    return result, None if out is None else np.array(out, copy=True)


@given(st.lists(st.sampled_from(VARIANTS), min_size=2, max_size=4), st.integers(0, 2 ** 16))
def test_a_call_does_what_the_python_checks_do(matmul8, tmp_path_factory, kinds, seed):
    tmp = tmp_path_factory.mktemp("mm") / "m.bin"
    args = tuple(arguments(kinds, np.random.default_rng(seed), tmp))
    python = _outcome(lambda xs: matmul8.call_pointers(matmul8.pointers(xs)), args)
    compiled = _outcome(lambda xs: matmul8(*xs), args)
    assert python[0] == compiled[0]
    if python[1] is not None:
        np.testing.assert_array_equal(python[1], compiled[1])
    if python[0] != "ran" and compiled[1] is not None and args[2].flags.writeable:
        assert (compiled[1] == -1).all()   # refused: the kernel did not run
    if python[0] == "ran" and len(args) == 3:
        np.testing.assert_allclose(args[2], np.asarray(args[0]) @ np.asarray(args[1]),
                                   rtol=1e-5)


def test_wrapper_text_names_what_it_checks():
    layout = fastcall.array_layout()
    if layout is None:
        pytest.skip("no compiled checks in this process")
    spec = ParamSpec("C", np.dtype("float32"), (2, 3), None, True)
    text = fastcall.wrapper_ir(Function._quick_plan([spec]), layout)
    for word in ("type.ok", "descr.ok", "nd.ok", "flags.ok", "dim0.ok", "dim1.ok", "call i32"):
        assert word in text
    assert re.search(r"and i32 %a0.flags, 1281", text)   # contiguous | aligned | writeable
