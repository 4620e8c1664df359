"""Symbolic shapes and scalar parameters, end to end: parsing and printing, te, building,
running at several sizes (compiled == interpreted == numpy), the argument checks, the
bounds proof with symbolic sizes, and the schedule primitives on symbolic loops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import te
from engine.interpreter.errors import ArgumentError as InterpArgumentError
from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.function import PrimFunc
from engine.lower import BuildError
from engine.runtime import ArgumentError
from engine.schedule import Schedule
from engine.schedule.error import ScheduleError
from engine.script import parse

# the course's symbolic matmul (chapter 2's spelling: T.handle + T.match_buffer, sizes
# declared as m, n, k = T.int64(), ...)
COURSE_MM = '''
@tvm.script.ir_module
class Module:
    @T.prim_func
    def mm(var_A: T.handle, var_B: T.handle, var_C: T.handle):
        T.func_attr({"global_symbol": "mm", "tir.noalias": True})
        m, n, k = T.int64(), T.int64(), T.int64()
        A = T.match_buffer(var_A, (m, k), "float32")
        B = T.match_buffer(var_B, (k, n), "float32")
        C = T.match_buffer(var_C, (m, n), "float32")
        for i, j, kk in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

SCALE = '''
@T.prim_func
def scale(a: T.handle, b: T.handle, n: T.int32, alpha: T.float32):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * alpha
'''

ADD = '''
@T.prim_func
def add(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = A[vi] + B[vi]
'''

# a loop of extent n split by 8 as TVM's split(i, [None, 8]) makes it: T.ceildiv(n, 8)
# outer iterations, the last one cut by T.where; the inner loop vectorized
SPLIT = '''
@T.prim_func
def double(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i_0 in range(T.ceildiv(n, 8)):
        for i_1 in T.vectorized(8):
            with T.block("B"):
                vi = T.axis.spatial(n, i_0 * 8 + i_1)
                T.where(i_0 * 8 + i_1 < n)
                B[vi] = A[vi] * T.float32(2)
'''


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def _mm_run(mod, rt, m, n, k, seed=0):
    a, b = _rand((m, k), seed), _rand((k, n), seed + 1)
    c = np.full((m, n), np.nan, "float32")
    rt["mm"](a, b, c)
    ci = np.full((m, n), np.nan, "float32")
    engine.interpret(mod, "mm", a, b, ci)
    ref = a.astype("float64") @ b.astype("float64")
    return c, ci, ref


# ---------------------------------------------------------------------------- script
def test_scalar_parameters_parse_into_params_in_order():
    f = parse(SCALE)["scale"]
    kinds = [type(p).__name__ for p in f.params]
    assert kinds == ["Buffer", "Buffer", "Var", "Var"]
    assert [p.dtype for p in f.params[2:]] == ["int32", "float32"]
    assert f.buffer_params == f.params[:2] and f.scalar_params == f.params[2:]
    assert f.params[0].shape[0] is f.params[2]   # the shape uses the parameter itself


@pytest.mark.parametrize("dialect", ["course-2022", "tvm-0.27"])
@pytest.mark.parametrize("src", [SCALE, COURSE_MM, ADD, SPLIT])
def test_print_then_parse_is_structurally_equal(src, dialect):
    mod = parse(src)
    text = mod.script(dialect=dialect)
    back = parse(text)
    assert engine.structural_equal(back, mod)
    assert back.script(dialect=dialect) == text


def test_scalar_parameters_print_as_tvm_does():
    text = parse(SCALE).script(dialect="tvm-0.27")
    assert "def scale(var_A: T.handle, var_B: T.handle, n: T.int32, alpha: T.float32):" in text
    assert 'A = T.match_buffer(var_A, (n,), "float32")' in text
    assert "n = T.int32()" not in text       # a parameter, not a symbolic variable


def test_symbolic_sizes_of_the_function_print_as_before():
    text = parse(COURSE_MM)["mm"].script()
    assert 'def mm(A: T.Buffer((m, k), "float32"), B: T.Buffer((k, n), "float32"), ' \
           'C: T.Buffer((m, n), "float32")):' in text
    assert "m = T.int64()" in text


def test_a_float_scalar_parameter_is_a_value_and_refused_in_a_shape():
    with pytest.raises(engine.script.ScriptError, match="integers"):
        parse('''
@T.prim_func
def f(a: T.handle, x: T.float32):
    A = T.match_buffer(a, (x,), "float32")
    A[0] = x
''')


def test_a_bad_parameter_annotation_names_the_forms():
    with pytest.raises(engine.script.ScriptError, match="T.Buffer.*T.handle.*T.int32"):
        parse("@T.prim_func\ndef f(n: T.grid):\n    pass\n")


def test_primfunc_refuses_a_vector_scalar_parameter():
    with pytest.raises(TypeError, match="scalar parameter"):
        PrimFunc("f", (E.Var("x", "float32x4"),), engine.ir.stmt.Evaluate(E.IntImm("int32", 0)))


# ---------------------------------------------------------------------------- build and run
def test_course_symbolic_matmul_built_once_runs_at_two_sizes():
    mod = parse(COURSE_MM)
    rt = engine.build(mod)
    for m, n, k in ((16, 8, 32), (7, 13, 5)):
        c, ci, ref = _mm_run(mod, rt, m, n, k)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ci, ref, rtol=1e-5, atol=1e-5)
    assert engine.build(mod) is rt       # one build for every size (cached by structure)


def test_scalar_parameters_are_passed_in_their_place():
    mod = parse(SCALE)
    rt = engine.build(mod)
    for n, alpha in ((6, 2.5), (1, -1.0), (0, 3.0)):
        a = _rand(n)
        b, bi = np.zeros(n, "float32"), np.zeros(n, "float32")
        rt["scale"](a, b, n, alpha)
        engine.interpret(mod, "scale", a, bi, n, alpha)
        np.testing.assert_array_equal(b, a * np.float32(alpha))
        np.testing.assert_array_equal(bi, b)
    rt["scale"](a, b, np.int64(0), np.float32(1))   # numpy scalars too


def test_mismatched_sizes_are_refused_with_a_sentence():
    mod = parse(ADD)
    rt = engine.build(mod)
    a, b, c = np.zeros(5, "float32"), np.zeros(7, "float32"), np.zeros(5, "float32")
    with pytest.raises(ArgumentError, match=r"argument 1 \(buffer 'B'\) of add has 7 elements "
                                            r"along axis 0, but its size n is 5 \(from "
                                            r"argument 0 \(buffer 'A'\) of add, axis 0\)"):
        rt["add"](a, b, c)
    with pytest.raises(InterpArgumentError, match=r"argument 1 \(B\) of add must have shape "
                                                  r"\(5,\), got \(7,\) \(its size n is 5, from "
                                                  r"axis 0 of argument 0 \(A\)\)"):
        engine.interpret(mod, "add", a, b, c)


def test_the_compiled_check_binds_sizes_and_hands_the_rest_to_python():
    mod = parse(COURSE_MM)
    f = engine.build(mod)["mm"]
    for _ in range(4):      # the check of this signature is compiled on a third call
        for m, n, k in ((3, 4, 5), (6, 1, 2)):
            a, b = _rand((m, k)), _rand((k, n))
            c = np.zeros((m, n), "float32")
            f(a, b, c)
            np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match=r"argument 1 \(buffer 'B'\) of mm has 3 elements "
                                            r"along axis 0, but its size k is 2"):
        f(a, np.zeros((3, n), "float32"), c)
    add = engine.build(parse(ADD))["add"]
    x = np.zeros(10, "float32")
    for _ in range(4):
        add(x[:5], x[5:], np.zeros(5, "float32"))
    with pytest.raises(ArgumentError, match=r"arguments 0 \('A'\) and 2 \('C'\) of add overlap"):
        add(x[:5], x[5:], x[3:8])
    z = np.zeros((0, 2), "float32")
    f(z, np.zeros((2, 3), "float32"), np.zeros((0, 3), "float32"))   # empty: nothing runs


def test_shape_expressions_and_scalar_parameters_are_checked():
    mod = parse(SCALE)
    rt = engine.build(mod)
    a, b = np.zeros(5, "float32"), np.zeros(5, "float32")
    with pytest.raises(ArgumentError, match=r"has 5 elements along axis 0, but its size n is "
                                            r"6 \(from argument 2 \(scalar 'n'\)"):
        rt["scale"](a, b, 6, 1.0)
    with pytest.raises(ArgumentError, match=r"must be an integer \(int32\), got float"):
        rt["scale"](a, b, 5.0, 1.0)
    with pytest.raises(ArgumentError, match=r"that int32 holds"):
        rt["scale"](a, b, 2**31, 1.0)
    with pytest.raises(ArgumentError, match=r"must be a number \(float32\), got str"):
        rt["scale"](a, b, 5, "1")
    with pytest.raises(ArgumentError, match=r"takes 4 arguments \(A, B, n, alpha\), got 3"):
        rt["scale"](a, b, 5)
    with pytest.raises(ArgumentError, match=r"must have 1 dimension"):
        rt["scale"](a.reshape(5, 1), b, 5, 1.0)
    with pytest.raises(InterpArgumentError, match=r"must be an integer \(int32\)"):
        engine.interpret(mod, "scale", a, b, 5.5, 1.0)


def test_an_expression_shape_is_computed_from_the_scalar_parameter():
    mod = parse('''
@T.prim_func
def pad(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, ((n + 31) // 32 * 32,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi]
''')
    rt = engine.build(mod)
    a, b = _rand(5), np.zeros(32, "float32")
    rt["pad"](a, b, 5)
    np.testing.assert_array_equal(b[:5], a)
    with pytest.raises(ArgumentError, match=r"must have 32 elements along axis 0 \(\(n \+ 31\) "
                                            r"// 32 \* 32 with n = 5"):
        rt["pad"](a, np.zeros(30, "float32"), 5)


def test_a_size_no_array_gives_is_refused_at_build():
    n = E.Var("n", "int32")
    buf = Buffer("A", (n * 2,), "float32")
    i = E.Var("i", "int32")
    body = engine.ir.stmt.For(i, E.IntImm("int32", 0), n, engine.ir.stmt.ForKind.SERIAL,
                              engine.ir.stmt.BufferStore(buf, E.FloatImm("float32", 1.0), (i,)))
    with pytest.raises(BuildError, match="which no array gives"):
        engine.build(PrimFunc("f", (buf,), body))


def test_an_access_past_a_symbolic_size_is_refused_naming_it():
    mod = parse('''
@T.prim_func
def shift(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi + 1]
''')
    with pytest.raises(BuildError, match=r"A\[vi \+ 1\]|A\[i \+ 1\]") as info:
        engine.build(mod)
    assert "cannot be proven below n" in str(info.value)


def test_a_guard_proves_the_shifted_access():
    mod = parse('''
@T.prim_func
def shift(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = T.if_then_else(vi + 1 < n, A[vi + 1], T.float32(0))
''')
    rt = engine.build(mod)
    a, b = _rand(9), np.zeros(9, "float32")
    rt["shift"](a, b)
    np.testing.assert_array_equal(b, np.append(a[1:], 0))


@pytest.mark.parametrize("n", [16, 13, 8, 1, 0])
def test_split_symbolic_loop_runs_at_multiples_and_not(n):
    mod = parse(SPLIT)
    rt = engine.build(mod)
    a = _rand(n)
    b, bi = np.full(n, np.nan, "float32"), np.full(n, np.nan, "float32")
    rt["double"](a, b)
    engine.interpret(mod, "double", a, bi)
    np.testing.assert_array_equal(b, a * 2)
    np.testing.assert_array_equal(bi, b)


def test_te_symbolic_placeholders():
    n, m = te.var("n", "int64"), te.var("m", "int64")
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((n, m), name="B")
    C = te.compute((n, m), lambda i, j: A[i, j] + B[i, j], name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] * 2.0, name="D")
    k = te.reduce_axis((0, m), name="k")
    S = te.compute((n,), lambda i: te.sum(D[i, k], axis=k), name="S")
    x = te.var("x", "float32")
    Y = te.compute((n,), lambda i: S[i] * x, name="Y")
    func = te.create_prim_func([A, B, Y, x])
    assert func.params[3] is x and func.params[0].shape == (n, m)
    text = func.script()
    assert "n = T.int64()" in text and "x: T.float32" in text
    assert engine.structural_equal(parse(text)["main"], func)
    rt = engine.build(func)      # C and D: intermediate buffers of a symbolic size (heap)
    for shape in ((3, 5), (8, 1)):
        a, b = _rand(shape), _rand(shape, 1)
        y, yi = np.zeros(shape[0], "float32"), np.zeros(shape[0], "float32")
        rt["main"](a, b, y, 0.5)
        engine.interpret(func, a, b, yi, 0.5)
        ref = ((a.astype("float64") + b) * 2).sum(axis=1) * 0.5
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(yi, ref, rtol=1e-5, atol=1e-5)


def test_te_refuses_a_float_size():
    with pytest.raises(te.TeError, match="symbolic size is a scalar integer"):
        te.placeholder((te.var("x", "float32"),), name="A")


def test_random_arrays_refuse_a_symbolic_function_with_a_sentence():
    with pytest.raises(ArgumentError, match="symbolic shape"):
        engine.runtime.random_args(parse(COURSE_MM)["mm"])
    with pytest.raises(ArgumentError, match="scalar parameter"):
        engine.runtime.random_args(parse(SCALE)["scale"])


# ---------------------------------------------------------------------------- schedules
def _check_mm_schedule(sch):
    rt = engine.build(sch.mod)
    for m, n, k in ((9, 4, 17), (1, 1, 1), (12, 16, 8)):
        c, ci, ref = _mm_run(sch.mod, rt, m, n, k)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ci, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("steps", ["fuse", "reorder", "parallel", "cache_read", "cache_write",
                                   "decompose"])
def test_schedule_primitives_on_symbolic_loops(steps):
    sch = Schedule(parse(COURSE_MM))
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    if steps == "fuse":
        sch.fuse(i, j)
    elif steps == "reorder":
        sch.reorder(k, j, i)
    elif steps == "parallel":
        sch.parallel(i)
    elif steps == "cache_read":
        sch.cache_read(blk, 0, "global")
    elif steps == "cache_write":
        sch.cache_write(blk, 0, "global")
    else:
        sch.decompose_reduction(blk, k)
    _check_mm_schedule(sch)


def test_vectorize_of_a_symbolic_loop_is_refused():
    sch = Schedule(parse(COURSE_MM))
    with pytest.raises(ScheduleError, match="constant extent"):
        sch.vectorize(sch.get_loops(sch.get_block("C"))[1])


# ---------------------------------------------------------------------------- property
@given(n=st.integers(0, 40), m=st.integers(1, 12), k=st.integers(1, 12),
       alpha=st.floats(-4, 4, width=32))
def test_random_sizes_compiled_interpreted_numpy(n, m, k, alpha):
    mm_mod = parse(COURSE_MM)
    rt = engine.build(mm_mod)
    c, ci, ref = _mm_run(mm_mod, rt, max(n, 1), m, k, seed=n)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ci, ref, rtol=1e-5, atol=1e-5)
    for src, name in ((SPLIT, "double"), (SCALE, "scale")):
        mod = parse(src)
        rtx = engine.build(mod)
        a = _rand(n, n)
        b, bi = np.zeros(n, "float32"), np.zeros(n, "float32")
        args = (n, alpha) if name == "scale" else ()
        rtx[name](a, b, *args)
        engine.interpret(mod, name, a, bi, *args)
        want = a * (np.float32(alpha) if name == "scale" else np.float32(2))
        np.testing.assert_array_equal(b, want)
        np.testing.assert_array_equal(bi, want)


def test_check_correctness_with_scalar_parameters():
    mod = parse(SCALE)
    a = _rand(7)
    report = engine.runtime.check_correctness(mod, "scale", args=[a, np.zeros(7, "float32"),
                                                                 7, 1.5])
    assert report.ok, report.message
    report = engine.runtime.check_correctness(mod, "scale")
    assert not report.ok and "scalar parameter" in report.message


def test_a_symbolic_intermediate_is_compacted_to_the_tile_one_iteration_uses():
    mod = parse('''
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 16))
    B = T.match_buffer(b, (n, 16))
    tmp = T.alloc_buffer((n, 16))
    for i in range(n):
        for j in range(16):
            with T.block("tmp"):
                vi, vj = T.axis.remap("SS", [i, j])
                tmp[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = tmp[vi, 15 - vj] + T.float32(1)
''')
    allocs = engine.ir.functor.collect_stmts(engine.lower.lower(mod["f"]).body,
                                             engine.ir.stmt.Allocate)
    assert [a.buffer.shape[0].value for a in allocs] == [16]   # inside loop i, constant
    rt = engine.build(mod)
    for n in (3, 0):
        a = _rand((n, 16))
        b = np.zeros((n, 16), "float32")
        rt["f"](a, b)
        np.testing.assert_array_equal(b, a[:, ::-1] * 2 + 1)


def test_scalar_parameters_of_every_kind():
    mod = parse('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), flag: T.bool, h: T.float16, k: T.int8, u: T.uint64,
      d: T.float64):
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.if_then_else(flag, T.Cast("float32", h) + T.Cast("float32", k),
                                   T.Cast("float32", u) + T.Cast("float32", d))
''')
    rt = engine.build(mod)
    for args, want in (((True, 1.5, -3, 7, 0.25), -1.5), ((False, 1.5, -3, 7, 0.25), 7.25)):
        a, b = np.zeros(4, "float32"), np.zeros(4, "float32")
        rt["f"](a, *args)
        engine.interpret(mod, "f", b, *args)
        np.testing.assert_array_equal(a, np.full(4, want, "float32"))
        np.testing.assert_array_equal(b, a)
    with pytest.raises(ArgumentError, match=r"scalar 'flag'.*must be a bool"):
        rt["f"](a, 1, 1.5, -3, 7, 0.25)
    with pytest.raises(ArgumentError, match=r"int8 holds \(-128 to 127\), got 200"):
        rt["f"](a, True, 1.5, 200, 7, 0.25)
    with pytest.raises(ArgumentError, match=r"uint64 holds .* got -1"):
        rt["f"](a, True, 1.5, -3, -1, 0.25)


def test_split_of_a_symbolic_loop_infers_ceildiv_and_guards_the_tail():
    """TVM's split of a loop of extent n: [None, 4] gives (n + 3) // 4 outer iterations
    and T.where(i_0 * 4 + i_1 < n); right at sizes that are and are not multiples of 4,
    compiled and interpreted. Factors all given, or disable_predication, are refused."""
    import numpy as np

    import engine
    mod = engine.parse('''
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * 2.0
''')
    sch = engine.Schedule(mod)
    (i,) = sch.get_loops("B")
    with pytest.raises(engine.ScheduleError, match="not a constant"):
        sch.split(i, [2, 4])
    with pytest.raises(engine.ScheduleError, match="disable_predication"):
        sch.split(i, [None, 4], disable_predication=True)
    _, i1 = sch.split(i, [None, 4])
    sch.vectorize(i1)
    assert "T.serial((n + 3) // 4)" in sch.mod.script() and "< n)" in sch.mod.script()
    rt = engine.build(sch.mod)
    for n in (1, 8, 13):
        a = np.arange(n, dtype="float32")
        b = np.zeros(n, "float32")
        rt["f"](a, b)
        np.testing.assert_array_equal(b, a * 2)
        c = np.zeros(n, "float32")
        engine.interpret(sch.mod, "f", a, c)
        np.testing.assert_array_equal(c, a * 2)
