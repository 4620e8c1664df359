"""Integer bits in TVMScript (``T.bitwise_and`` .. ``T.shift_right``, and ``& | ^ ~ << >>`` on
integer expressions) and Python helpers called inside a ``@T.prim_func`` (TVM's way of
building an expression with a function of the module): read, printed, compared, compiled
and interpreted the same as numpy computes them."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.interpreter import InterpretError
from engine.ir import IntImm, Var, structural_equal
from engine.script import ScriptError
from engine.script import tir as T

from semantics import assert_computes_exactly

BITS = '''
@T.prim_func
def f(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32"), C: T.Buffer((64,), "uint8")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = ((A[vi] >> (vi % 5)) & 255) ^ (A[vi] << 3) | ~vi
            C[vi] = (T.Cast("uint8", A[vi]) >> T.uint8(1)) | T.shift_left(T.uint8(1), T.Cast("uint8", vi % 8))
'''


def _numpy(a):
    vi = np.arange(64, dtype=np.int32)
    with np.errstate(all="ignore"):
        b = ((a >> (vi % 5)) & 255) ^ (a << 3) | ~vi
        c = (a.astype(np.uint8) >> np.uint8(1)) | (np.uint8(1) << (vi % 8).astype(np.uint8))
    return b, c


def test_bits_parse_print_and_compute_as_numpy():
    mod = engine.parse(BITS)
    text = mod.script()
    assert "T.shift_right(A[vi], vi % 5)" in text and "T.bitwise_not(vi)" in text
    assert structural_equal(engine.parse(text), mod)
    a = np.random.default_rng(0).integers(-2**31, 2**31, 64).astype("int32")
    want_b, want_c = _numpy(a)
    for run in ("interpret", "build"):
        b, c = np.zeros(64, "int32"), np.zeros(64, "uint8")
        if run == "interpret":
            engine.interpret(mod, "f", a, b, c)
        else:
            engine.build(mod)["f"](a, b, c)
        np.testing.assert_array_equal(b, want_b, err_msg=run)
        np.testing.assert_array_equal(c, want_c, err_msg=run)


def test_bits_vectorized_keep_their_meaning():
    mod = engine.parse(BITS)
    sch = engine.Schedule(mod)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, ii = sch.split(i, [None, 8])
    sch.vectorize(ii)
    assert_computes_exactly(mod, sch.mod)


def test_python_operators_build_the_same_calls():
    i = Var("i", "int32")
    assert (i & 3).op == "bitwise_and" and (i | 3).op == "bitwise_or"
    assert (i ^ 3).op == "bitwise_xor" and (~i).op == "bitwise_not"
    assert (i << 2).op == "shift_left" and (2 >> i).op == "shift_right"
    b = Var("b", "bool")
    assert type(b & b).__name__ == "And" and type(~b).__name__ == "Not"
    with pytest.raises(TypeError, match="integers"):
        Var("x", "float32") << 1


def test_a_shift_by_the_width_is_refused_by_the_interpreter():
    mod = engine.parse(BITS.replace("(A[vi] << 3)", "(A[vi] << (vi % 40))"))
    with pytest.raises(InterpretError, match="undefined"):
        engine.interpret(mod, "f", np.ones(64, "int32"), np.zeros(64, "int32"),
                         np.zeros(64, "uint8"))


def test_bits_of_floats_are_refused():
    with pytest.raises(ScriptError, match="need integers"):
        engine.parse(BITS.replace("(A[vi] << 3)", "(T.float32(1) << 3)"))


def test_constants_compare_equal_by_value():
    assert IntImm("bool", 1) == True  # noqa: E712 - TVM's folding of constants
    assert IntImm("int32", 3) == IntImm("int64", 3)
    assert not (IntImm("int32", 3) == IntImm("int32", 4))
    i = Var("i")
    assert not (i == Var("i")) and (i == i)


# ---------------------------------------------------------------- helpers called in TVMScript
def _unpack(nbit: int):
    def f(val, pos, dtype: str):
        mask = engine.ir.const((1 << nbit) - 1, "int32")
        return engine.ir.Cast(dtype, (val >> (pos.astype("int32") * nbit)) & mask)
    return f


def _twice(x):
    return x * 2


def test_a_helper_of_the_module_builds_the_expression():
    @T.prim_func
    def f(A: T.Buffer((4,), "int32"), B: T.Buffer((32,), "float32")):
        for i in range(32):
            with T.block("B"):
                vi = T.axis.spatial(32, i)
                B[vi] = _unpack(4)(A[vi // 8], vi % 8, dtype="float32") + _twice(T.float32(1))

    a = np.array([0x76543210, -1, 0x12345678, 0], dtype=np.int64).astype("int32")
    b = np.zeros(32, "float32")
    engine.interpret(f, "f", a, b)
    want = np.array([(int(a[k // 8]) >> (4 * (k % 8))) & 15 for k in range(32)], "float32")
    np.testing.assert_array_equal(b, want + 2)
    b2 = np.zeros(32, "float32")
    engine.build(f)["f"](a, b2)
    np.testing.assert_array_equal(b2, b)


def _broken(x):
    raise ValueError("no")


def test_a_helper_that_fails_or_gives_no_expression_is_named():
    with pytest.raises(ScriptError, match="calling _broken"):
        @T.prim_func
        def f(A: T.Buffer((4,), "int32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.spatial(4, i)
                    A[vi] = _broken(vi)

    def gives_list(x):
        return [x]

    with pytest.raises(ScriptError, match="not an expression"):
        @T.prim_func
        def g(A: T.Buffer((4,), "int32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.spatial(4, i)
                    A[vi] = gives_list(vi)


def test_a_text_never_calls_python():
    text = '''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            A[vi] = _twice(vi)
'''
    with pytest.raises(ScriptError, match="unknown function '_twice'"):
        engine.parse(text)


def test_a_helper_may_use_the_tvmscript_functions():
    clip = lambda t, lo, hi: T.min(T.max(t, lo), hi)  # noqa: E731 - TVM's way

    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = clip(A[vi], T.float32(-1), T.float32(2)) + T.Cast("float32", 0)

    a = np.linspace(-4, 4, 8).astype("float32")
    b = np.zeros(8, "float32")
    engine.interpret(f, "f", a, b)
    np.testing.assert_array_equal(b, np.clip(a, -1, 2))
    b2 = np.zeros(8, "float32")
    engine.build(f)["f"](a, b2)
    np.testing.assert_array_equal(b2, b)
    assert structural_equal(T.max(Var("x", "float32"), 1.0).b, engine.ir.FloatImm("float32", 1))
