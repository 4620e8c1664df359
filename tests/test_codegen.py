"""Code generation: every IR feature compiled and compared with numpy (small sizes)."""
import math

import llvmlite.ir as ir
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine.ir import (Allocate, Buffer, BufferStore, Call, Evaluate, For, ForKind, IfThenElse, collect,
                       LetStmt, PrimFunc, StringImm, Var, const, seq)
from engine.ir import expr as E
from engine.lower import BuildError, lower

from test_lower_ir_helpers import (block, elementwise, loop, mm_relu, mm_relu_tiled,
                                   reduce_sum, root)

F32 = "float32"


def run_ew(shape, in_dtypes, out_dtype, fn, inputs, **kw):
    f = elementwise(shape, in_dtypes, out_dtype, fn, **kw)
    out = np.zeros(shape, out_dtype)
    engine.build(f)["ew"](*inputs, out)
    return out


def lowered_func(name, params, body):
    """A lowered PrimFunc built directly (flat buffers)."""
    return PrimFunc(name, params, body, (("lowered", True),))


# ---------------------------------------------------------------------------- loops
@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED,
                                  ForKind.UNROLLED])
def test_loop_kinds(kind):
    x = np.random.rand(5, 12).astype(F32)
    out = run_ew((5, 12), [F32], F32, lambda a: a * E.FloatImm(F32, 2.0) + E.FloatImm(F32, 1.0),
                 [x], kinds=[ForKind.SERIAL, kind])
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)


def test_loop_with_nonzero_min():
    Z = Buffer("Z", (10,), "int32")
    i = Var("i")
    f = lowered_func("m", (Z,), For(i, const(3), const(5), ForKind.SERIAL,
                                    BufferStore(Z, i * 10, (i,))))
    z = np.zeros(10, "int32")
    engine.build(f, lowered=True)["m"](z)
    np.testing.assert_array_equal(z, [0, 0, 0, 30, 40, 50, 60, 70, 0, 0])


def test_int32_loop_value_where_first_needed_in_a_branch_and_in_a_parallel_body():
    # an int32 loop counts in i64; its int32 value is made once, in the loop's header, the
    # first time something needs it: here in one branch first, then in the other branch and
    # (captured) in a parallel loop's body: the value must dominate all of them
    Z = Buffer("Z", (24,), "int32")
    i, j, k = Var("i"), Var("j"), Var("k")
    inner = For(k, const(0), const(4), ForKind.PARALLEL,
                BufferStore(Z, E.BufferLoad(Z, (i * 4 + k,)) + i * 100 + k, (i * 4 + k,)))
    body = For(i, const(0), const(6), ForKind.SERIAL, seq(
        For(j, const(0), const(4), ForKind.SERIAL,
            IfThenElse(i % 2 == 0, BufferStore(Z, i, (i * 4 + j,)),
                       BufferStore(Z, -i, (i * 4 + j,)))),
        inner))
    f = lowered_func("nar", (Z,), body)
    z = np.zeros(24, "int32")
    engine.build(f, lowered=True)["nar"](z)
    ii = np.repeat(np.arange(6), 4)
    kk = np.tile(np.arange(4), 6)
    np.testing.assert_array_equal(z, np.where(ii % 2 == 0, ii, -ii) + ii * 100 + kk)


@pytest.mark.parametrize("n,f", [(10, 4), (7, 3), (16, 4), (1, 5)])
def test_split_with_predicate(n, f):
    x = np.random.rand(3, n).astype(F32)
    out = run_ew((3, n), [F32], F32, lambda a: a - E.FloatImm(F32, 0.5), [x], split=(1, f))
    np.testing.assert_allclose(out, x - 0.5, rtol=1e-6)


@given(n=st.integers(1, 13), m=st.integers(1, 13), f=st.integers(1, 6),
       kind=st.sampled_from([ForKind.SERIAL, ForKind.VECTORIZED, ForKind.UNROLLED,
                             ForKind.PARALLEL]))
def test_hypothesis_split_shapes(n, m, f, kind):
    x = np.random.rand(n, m).astype(F32)
    y = np.random.rand(n, m).astype(F32)
    out = run_ew((n, m), [F32, F32], F32, lambda a, b: a * b + a, [x, y], split=(1, f),
                 kinds=[ForKind.SERIAL, ForKind.SERIAL, kind])
    np.testing.assert_allclose(out, x * y + x, rtol=1e-5)


@given(n=st.integers(1, 6), m=st.integers(1, 17), f=st.integers(1, 8),
       inner=st.sampled_from([ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED]))
def test_hypothesis_split_reduction(n, m, f, inner):
    x = np.random.rand(n, m).astype(F32)
    out = np.full(n, 9, F32)
    engine.build(reduce_sum(n, m, split_k=f, kinds=[ForKind.SERIAL, ForKind.SERIAL, inner]))[
        "rsum"](x, out)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)


@given(n=st.sampled_from([8, 16, 24]), split=st.sampled_from([2, 4, 8]))
def test_hypothesis_course_schedule(n, split):
    if n % split:
        return
    f = mm_relu(n, schedule="course", split=split)
    a, b = np.random.rand(n, n).astype(F32) - 0.5, np.random.rand(n, n).astype(F32) - 0.5
    c = np.zeros((n, n), F32)
    engine.build(f)["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("order", ["ikj", "kij", "micro"])
@pytest.mark.parametrize("parallel", [False, True])
def test_tiled_vectorized_parallel_matmul(order, parallel):
    n = 64
    f = mm_relu_tiled(n, ti=32, tj=32, order=order, parallel=parallel)
    a, b = np.random.rand(n, n).astype(F32) - 0.5, np.random.rand(n, n).astype(F32) - 0.5
    c = np.zeros((n, n), F32)
    engine.build(f)["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- blocks
def test_local_alloc_buffer_in_inner_block():
    # per row: T_local[j] = X[i, j] * 2 in a "local" buffer, then Out[i, j] = T_local[j] + 1
    n, m = 4, 6
    X, Out = Buffer("X", (n, m)), Buffer("Out", (n, m))
    Tl = Buffer("T_local", (m,), F32, scope="local")
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    vi = Var("vi")
    vj, vj2 = Var("vj"), Var("vj2")
    inner1 = block("T", [(vj, m, "S")], (j,), BufferStore(Tl, X[vi, vj] * E.FloatImm(F32, 2.0), (vj,)))
    inner2 = block("O", [(vj2, m, "S")], (j2,),
                   BufferStore(Out, Tl[vj2] + E.FloatImm(F32, 1.0), (vi, vj2)))
    outer = block("row", [(vi, n, "S")], (i,), seq(loop(j, m, inner1), loop(j2, m, inner2)),
                  alloc=(Tl,))
    f = PrimFunc("rows", (X, Out), root(loop(i, n, outer)))
    x = np.random.rand(n, m).astype(F32)
    o = np.zeros((n, m), F32)
    rt = engine.build(f)
    rt["rows"](x, o)
    np.testing.assert_allclose(o, x * 2 + 1, rtol=1e-6)
    assert "alloca" in rt.get_source("ll")


def test_large_global_buffer_on_heap():
    n = 160  # 160*160*4 = 100 KiB > stack limit
    # unscheduled: Y is written and read by two separate loop nests, so it stays a whole
    # 160x160 buffer (in the course schedule compaction makes it a 1x4 tile per j0)
    f = mm_relu(n, schedule="naive")
    rt = engine.build(f)
    assert "aligned_alloc" in rt.get_source("ll")
    a, b = np.random.rand(n, n).astype(F32), np.random.rand(n, n).astype(F32)
    c = np.zeros((n, n), F32)
    rt["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4)


# ---------------------------------------------------------------------------- expressions
def test_if_then_else_and_select():
    x = np.random.rand(9).astype(F32) - 0.5
    out = run_ew((9,), [F32], F32, lambda a: E.Select(a > E.FloatImm(F32, 0.0), a,
                                                      a * E.FloatImm(F32, -3.0)), [x])
    np.testing.assert_allclose(out, np.where(x > 0, x, -3 * x), rtol=1e-6)
    Z = Buffer("Z", (8,), "int32")
    i = Var("i")
    body = For(i, const(0), const(8), ForKind.SERIAL,
               IfThenElse(i % 2 == 0, BufferStore(Z, i, (i,)), BufferStore(Z, -i, (i,))))
    z = np.zeros(8, "int32")
    engine.build(lowered_func("ite", (Z,), body), lowered=True)["ite"](z)
    np.testing.assert_array_equal(z, [0, -1, 2, -3, 4, -5, 6, -7])


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float64"),
                                     ("float64", "float32"), ("int64", "int8"),
                                     ("uint8", "int32"), ("int32", "bool"), ("bool", "float32"),
                                     ("float32", "float16"), ("int8", "uint16")])
def test_casts(src, dst):
    if src == "bool":
        x = np.array([True, False, True, True, False])
    elif src.startswith("float"):
        x = (np.random.rand(5) * 20 - 10).astype(src)
    elif src.startswith("uint"):
        x = np.array([0, 1, 200, 255, 7], src)
    else:
        x = np.array([-100, -1, 0, 5, 127], src)
    out = run_ew((5,), [src], dst, lambda a: E.Cast(dst, a), [x])
    if src.startswith("float") and dst.startswith("int"):
        expected = np.trunc(x).astype(dst)
    else:
        expected = x.astype(dst)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_semantics(dtype):
    a = np.array([-9, -8, -7, -1, 0, 1, 7, 8, 9, -13, 13, 5], dtype)
    b = np.array([4, 4, 3, 3, 5, -3, -4, 8, -2, 5, 6, -7], dtype)
    ops = {
        "div": (lambda p, q: E.Div(p, q), lambda p, q: np.trunc(p / q).astype(dtype)),
        "mod": (lambda p, q: E.Mod(p, q), lambda p, q: np.fmod(p, q)),
        "floordiv": (lambda p, q: E.FloorDiv(p, q), lambda p, q: p // q),
        "floormod": (lambda p, q: E.FloorMod(p, q), lambda p, q: p % q),
    }
    for name, (mk, ref) in ops.items():
        out = run_ew((12,), [dtype, dtype], dtype, mk, [a, b])
        np.testing.assert_array_equal(out, ref(a, b), err_msg=name)


@pytest.mark.parametrize("c", [1, 2, 3, 4, 7, 8, 16])
def test_floordiv_by_constant_negative_operands(c):
    a = np.arange(-20, 20, dtype="int32")
    out = run_ew((40,), ["int32"], "int32", lambda p: E.FloorDiv(p, const(c)) * 100
                 + E.FloorMod(p, const(c)), [a])
    np.testing.assert_array_equal(out, (a // c) * 100 + a % c)


def test_float_floordiv_floormod_min_max():
    a = (np.random.rand(10) * 10 - 5).astype("float64")
    b = np.array([2.0, -3.0, 1.5, 4.0, -2.5, 3.0, 2.0, -1.0, 0.5, 7.0])
    out = run_ew((10,), ["float64", "float64"], "float64",
                 lambda p, q: E.FloorDiv(p, q) * 1000.0 + E.FloorMod(p, q)
                 + E.Min(p, q) * 10.0 + E.Max(p, q), [a, b])
    np.testing.assert_allclose(out, np.floor(a / b) * 1000 + (a - np.floor(a / b) * b)
                               + np.minimum(a, b) * 10 + np.maximum(a, b), rtol=1e-12)


NUMPY_INTRINSICS = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "fabs": np.abs, "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "trunc": np.trunc, "sin": np.sin, "cos": np.cos,
    "erf": np.vectorize(math.erf),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vector", [False, True])
def test_unary_intrinsics(dtype, vector):
    x = np.array([0.3, 1.7, 2.5, 0.01, 3.9, 0.5, 1.5, 2.0], dtype)
    kinds = [ForKind.VECTORIZED] if vector else None
    for op, ref in NUMPY_INTRINSICS.items():
        out = run_ew((8,), [dtype], dtype, lambda a: Call(dtype, op, (a,)), [x], kinds=kinds)
        np.testing.assert_allclose(out, ref(x).astype(dtype), rtol=2e-6 if dtype == F32 else 1e-12,
                                   err_msg=op)
    for op, ref in [("pow", np.power)]:
        out = run_ew((8,), [dtype, dtype], dtype, lambda a, b: Call(dtype, op, (a, b)), [x, x],
                     kinds=kinds)
        np.testing.assert_allclose(out, ref(x, x), rtol=1e-5 if dtype == F32 else 1e-12)
    out = run_ew((8,), [dtype] * 3, dtype, lambda a, b, c: Call(dtype, "fma", (a, b, c)),
                 [x, x, x], kinds=kinds)
    np.testing.assert_allclose(out, x * x + x, rtol=1e-6)
    # (the integer ones, E.BITWISE, are checked against numpy in test_script_bitwise.py)
    assert set(NUMPY_INTRINSICS) | {"pow", "fma", "if_then_else", "likely"} | E.BITWISE == \
        set(E.INTRINSICS)


def test_if_then_else_intrinsic_is_lazy():
    # reads X[i - 1] only when i > 0: the other branch must not be evaluated
    x = np.arange(6, dtype=F32)
    X, Y = Buffer("X", (6,)), Buffer("Y", (6,))
    i = Var("i")
    val = Call(F32, "if_then_else", (i > 0, X[i - 1], E.FloatImm(F32, -1.0)))
    f = lowered_func("ite", (X, Y), For(i, const(0), const(6), ForKind.SERIAL,
                                        BufferStore(Y, Call(F32, "likely", (val,)), (i,))))
    y = np.zeros(6, F32)
    engine.build(f, lowered=True)["ite"](x, y)
    np.testing.assert_array_equal(y, [-1, 0, 1, 2, 3, 4])


def test_integer_abs_and_int_intrinsic():
    x = np.array([-3, 4, 0, -7], "int32")
    out = run_ew((4,), ["int32"], "int32", lambda a: Call("int32", "abs", (a,)), [x])
    np.testing.assert_array_equal(out, np.abs(x))


def test_ramp_broadcast_let_letstmt_evaluate_allocate():
    # hand-written lowered vector code: Y[4i : 4i+4] = X[4i : 4i+4] * bcast(2) + let t = 1 in t
    X, Y = Buffer("X", (16,)), Buffer("Y", (16,))
    Tmp = Buffer("Tmp", (4,), F32, scope="local")
    i, t, s = Var("i"), Var("t", F32), Var("s")
    r = E.Ramp(i * 4, const(1), 4)
    body = For(i, const(0), const(4), ForKind.SERIAL, Allocate(Tmp, seq(
        BufferStore(Tmp, X[r] * E.Broadcast(E.FloatImm(F32, 2.0), 4), (E.Ramp(const(0), const(1), 4),)),
        LetStmt(s, i * 4, seq(
            Evaluate(const(0)),
            BufferStore(Y, Tmp[E.Ramp(const(0), const(1), 4)]
                        + E.Broadcast(E.Let(t, E.FloatImm(F32, 1.0), t), 4), (E.Ramp(s, const(1), 4),)))))))
    f = lowered_func("vec", (X, Y), body)
    x = np.random.rand(16).astype(F32)
    y = np.zeros(16, F32)
    rt = engine.build(f, lowered=True)
    rt["vec"](x, y)
    np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)


def test_gather_with_strided_ramp():
    X, Y = Buffer("X", (16,)), Buffer("Y", (4,))
    body = BufferStore(Y, X[E.Ramp(const(1), const(4), 4)], (E.Ramp(const(0), const(1), 4),))
    x = np.random.rand(16).astype(F32)
    y = np.zeros(4, F32)
    engine.build(lowered_func("g", (X, Y), body), lowered=True)["g"](x, y)
    np.testing.assert_array_equal(y, x[1::4])


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int64", "float16",
                                   "float64", "uint32"])
def test_dtypes_roundtrip(dtype):
    if dtype == "bool":
        x = np.array([True, False, False, True])
        out = run_ew((4,), [dtype], dtype, lambda a: E.Not(a), [x])
        np.testing.assert_array_equal(out, ~x)
        return
    x = np.array([1, 2, 3, 4], dtype)
    out = run_ew((4,), [dtype, dtype], dtype, lambda a, b: a * b + a, [x, x])
    np.testing.assert_array_equal(out, x * x + x)


def test_bool_logic_vectorized():
    x = np.random.rand(16).astype(F32)
    out = run_ew((16,), [F32], "bool", lambda a: E.And(a > E.FloatImm(F32, 0.2),
                                                      E.Not(a > E.FloatImm(F32, 0.7))),
                 [x], kinds=[ForKind.VECTORIZED])
    np.testing.assert_array_equal(out, (x > 0.2) & ~(x > 0.7))


def test_fast_math_option_builds_and_is_correct():
    f = mm_relu(16, schedule="course")
    rt = engine.build(f, fast_math=True)
    assert "fast" in rt.get_source("ll")
    a, b = np.random.rand(16, 16).astype(F32), np.random.rand(16, 16).astype(F32)
    c = np.zeros((16, 16), F32)
    rt["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4)


# ---------------------------------------------------------------------------- source text
def test_sources_and_vector_assembly():
    f = elementwise((4, 64), [F32, F32], F32, lambda a, b: a * b + a,
                    kinds=[ForKind.SERIAL, ForKind.VECTORIZED])
    rt = engine.build(f)
    ll, opt, asm = rt.get_source("ll"), rt.get_source("ll-opt"), rt.get_source("asm")
    assert "<64 x float>" in ll or "x float>" in ll
    assert "noalias" in ll
    assert "define" in opt
    assert any(v in asm for v in ("ymm", "zmm", "xmm"))
    assert any(op in asm for op in ("vmulps", "vfmadd", "mulps"))
    with pytest.raises(ValueError, match="unknown source format"):
        rt.get_source("pdf")


def test_innermost_loop_starts_on_a_32_byte_boundary():
    # the course's mm_relu: its hot k loop is the only innermost loop; it gets .p2align 5
    # (LLVM's default on x86 is 4), outer loops keep 4
    import llvmlite.binding as llvm
    from engine.codegen import target
    if llvm.llvm_version_info[0] not in target._INNERMOST_ALIGN_LLVM or \
            not llvm.get_process_triple().startswith("x86_64"):
        pytest.skip("the loop alignment is only asked of x86 LLVM versions that have it")
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=16))
    i, j, k = sch.get_loops(sch.get_block("Y", func_name="mm_relu"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    asm = engine.build(sch.mod, cache=False).get_source("asm").splitlines()
    heads = [asm[n - 1].split() for n, line in enumerate(asm) if line.startswith(".LBB")]
    aligns = [h[1] for h in heads if h and h[0] == ".p2align"]
    assert target.INNERMOST_LOOP_ALIGN_LOG2 == 5
    assert "5" in aligns, asm   # the k loop
    assert "4" in aligns, asm   # the outer loops


def test_compile_stats_fields():
    rt = engine.build(mm_relu(8), cache=False)
    for k in ("lower", "codegen", "llvm_opt", "llvm_jit"):
        assert rt.compile_stats[k] >= 0


# ---------------------------------------------------------------------------- hooks
def test_address_of_and_call_extern_with_extra_module():
    # an extra llvmlite module defines `int32 record(int64 addr)` that counts calls and
    # remembers the last address; the kernel is instrumented after lowering
    m = ir.Module("hooks")
    i32, i64 = ir.IntType(32), ir.IntType(64)
    counter = ir.GlobalVariable(m, i64, "hook_counter")
    counter.initializer = ir.Constant(i64, 0)
    last = ir.GlobalVariable(m, i64, "hook_last")
    last.initializer = ir.Constant(i64, 0)
    fn = ir.Function(m, ir.FunctionType(i32, [i64]), "hook_record")
    b = ir.IRBuilder(fn.append_basic_block())
    b.store(b.add(b.load(counter), ir.Constant(i64, 1)), counter)
    b.store(fn.args[0], last)
    b.ret(ir.Constant(i32, 0))
    get = ir.Function(m, ir.FunctionType(i64, [i32]), "hook_get")
    b = ir.IRBuilder(get.append_basic_block())
    b.ret(b.select(b.icmp_signed("==", get.args[0], ir.Constant(i32, 0)), b.load(counter),
                   b.load(last)))

    f = lower(elementwise((3, 4), [F32], F32, lambda a: a + E.FloatImm(F32, 1.0)))
    from engine.ir import Mutator

    class Instrument(Mutator):
        def visit_BufferStore(self, s):
            addr = Call("int64", "address_of", (E.BufferLoad(s.buffer, s.indices),))
            return seq(Evaluate(Call("int32", "call_extern", (StringImm("hook_record"), addr))), s)

    inst = f.with_body(Instrument().visit(f.body))
    Z = Buffer("Z", (2,), "int64")
    q = lowered_func("query", (Z,), seq(
        BufferStore(Z, Call("int64", "call_extern", (StringImm("hook_get"), const(0))), (const(0),)),
        BufferStore(Z, Call("int64", "call_extern", (StringImm("hook_get"), const(1))), (const(1),))))
    from engine.ir import IRModule
    rt = engine.build(IRModule.from_funcs(inst, q), lowered=True, extra_modules=[m])
    x = np.random.rand(3, 4).astype(F32)
    out = np.zeros((3, 4), F32)
    rt["ew"](x, out)
    np.testing.assert_allclose(out, x + 1)
    z = np.zeros(2, "int64")
    rt["query"](z)
    assert z[0] == 12
    assert z[1] == out.ctypes.data + 11 * 4


def test_lowered_option_requires_lowered_input():
    with pytest.raises(BuildError, match="lowered"):
        engine.build(mm_relu(8), lowered=True)


def test_call_extern_signature_clash():
    Z = Buffer("Z", (1,), "int32")
    body = seq(BufferStore(Z, Call("int32", "call_extern", (StringImm("abs"), const(-3))), (const(0),)),
               BufferStore(Z, Call("int32", "call_extern", (StringImm("abs"), const(-3, "int64"))), (const(0),)))
    with pytest.raises(BuildError, match="two different signatures"):
        engine.build(lowered_func("clash", (Z,), body), lowered=True)


def test_call_extern_libc():
    Z = Buffer("Z", (1,), "int32")
    body = BufferStore(Z, Call("int32", "call_extern", (StringImm("abs"), const(-42))), (const(0),))
    z = np.zeros(1, "int32")
    engine.build(lowered_func("labs", (Z,), body), lowered=True)["labs"](z)
    assert z[0] == 42


def test_vectorized_predicate_uses_masked_stores():
    # split 10 by 4 (T.where j0*4 + j1 < 10), inner loop vectorized: masked vector code
    f = elementwise((3, 10), [F32], F32, lambda a: a * E.FloatImm(F32, 5.0), split=(1, 4),
                    kinds=[ForKind.SERIAL, ForKind.SERIAL, ForKind.VECTORIZED])
    lf = lower(f)
    assert any(lanes_of_cond(x) > 1 for x in collect(lf.body, IfThenElse))
    rt = engine.build(f)
    assert "llvm.masked.store" in rt.get_source("ll")
    assert rt.compile_stats["vectorize_fallbacks"] == 0
    x = np.random.rand(3, 10).astype(F32)
    y = np.zeros((3, 10), F32)
    rt["ew"](x, y)
    np.testing.assert_allclose(y, x * 5, rtol=1e-6)


def lanes_of_cond(s):
    from engine.ir import lanes_of
    return lanes_of(s.condition.dtype)


@pytest.mark.parametrize("n", [5, 8, 13])
def test_vectorized_if_then_else_padding(n):
    # Out[i] = X[i - 1] if 1 <= i < n + 1 else 0, i in [0, n + 2): the pad stage of conv2d,
    # vectorized; the masked loads never read X[-1] or X[n]
    X, Out = Buffer("X", (n,)), Buffer("Out", (n + 2,))
    i, vi = Var("i"), Var("vi")
    val = Call(F32, "if_then_else", (E.And(vi >= 1, vi < n + 1), X[vi - 1], E.FloatImm(F32, 0.0)))
    f = PrimFunc("pad", (X, Out), root(loop(i, n + 2, block("pad", [(vi, n + 2, "S")], (i,),
                                                          BufferStore(Out, val, (vi,))),
                                             ForKind.VECTORIZED)))
    rt = engine.build(f)
    assert rt.compile_stats["vectorize_fallbacks"] == 0
    assert "llvm.masked.load" in rt.get_source("ll")
    x = np.random.rand(n).astype(F32)
    out = np.full(n + 2, 7, F32)
    rt["pad"](x, out)
    np.testing.assert_array_equal(out, np.pad(x, 1))


def test_vectorized_predicate_with_gather_and_scalar_load():
    # Out[j] = X[2j] * S[0] for j < 7 with a split of 8 (mask) and a strided (gather) load
    X, S, Out = Buffer("X", (14,)), Buffer("S", (1,)), Buffer("Out", (7,))
    j0, j1, vj = Var("j0"), Var("j1"), Var("vj")
    b = block("B", [(vj, 7, "S")], (j0 * 8 + j1,),
              BufferStore(Out, X[vj * 2] * S[0], (vj,)), pred=j0 * 8 + j1 < 7)
    f = PrimFunc("g", (X, S, Out), root(loop(j0, 1, loop(j1, 8, b, ForKind.VECTORIZED))))
    x = np.random.rand(14).astype(F32)
    s = np.array([3.0], F32)
    out = np.zeros(7, F32)
    rt = engine.build(f)
    rt["g"](x, s, out)
    np.testing.assert_allclose(out, x[::2] * 3, rtol=1e-6)


@pytest.mark.parametrize("auto_vectorize", [False, True])
def test_reduction_outside_fused_loop_n16(auto_vectorize):
    # regression: this legal program was once miscompiled with LLVM's loop vectorizer on (k
    # outside the fused i*j loop, n=16: `if k == 0: Y[f] = 0; Y[f] += A[f // 16 * 16 + k] *
    # B[k * 16 + f % 16]`); kept under both settings
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=16))
    i, j, k = sch.get_loops(sch.get_block("Y", func_name="mm_relu"))
    sch.reorder(k, sch.fuse(i, j))
    rt = engine.build(sch.mod, auto_vectorize=auto_vectorize)
    a, b = np.random.rand(16, 16).astype(F32), np.random.rand(16, 16).astype(F32)
    c = np.zeros((16, 16), F32)
    rt["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5)


# ---------------------------------------------------------------------------- guarded loops
def _padding(n=40):
    """pad[h, w] = if_then_else(1 <= h < n+1 and 1 <= w < n+1, X[h - 1, w - 1], 0)."""
    from engine import te
    x = te.placeholder((n, n), F32, name="X")
    pad = te.compute((n + 2, n + 2), lambda h, w: E.Call(F32, "if_then_else", (
        E.And(E.And(h >= 1, h < n + 1), E.And(w >= 1, w < n + 1)),
        x[h - 1, w - 1], E.FloatImm(F32, 0.0))), name="pad")
    return te.create_prim_func([x, pad], name="padding")


def test_padding_loop_asks_for_the_loop_vectorizer_and_is_right():
    # the innermost loop reads under a condition: LLVM's loop vectorizer is asked for it
    # (llvm.loop.vectorize.enable), the result is numpy's
    rt = engine.build(_padding(), cache=False)
    assert "llvm.loop.vectorize.enable" in rt.get_source("ll")
    assert rt.compile_stats["guarded_vectorized"] == 1
    asm = rt.get_source("asm")
    assert "ymm" in asm or "xmm" in asm
    x = np.random.rand(40, 40).astype(F32)
    out = np.full((42, 42), np.nan, F32)
    rt["padding"](x, out)
    np.testing.assert_array_equal(out, np.pad(x, 1))


def test_plain_loops_do_not_ask_for_the_loop_vectorizer():
    # (it runs on them unasked, as TVM's pipeline: engine.codegen.loops keeps it off only
    # some loops, with the option false)
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=32))
    rt = engine.build(sch.mod, cache=False)
    assert '!"llvm.loop.vectorize.enable", i1 1' not in rt.get_source("ll")
    assert rt.compile_stats["guarded_vectorized"] == 0


def test_guarded_element_loop_needs_a_guarded_load_and_no_inner_loop():
    from engine.codegen.loops import guarded_element_loop
    buf_x = Buffer("X", (64,), F32)
    buf_y = Buffer("Y", (64,), F32)
    i, j = Var("i", "int32"), Var("j", "int32")
    load = E.BufferLoad(buf_x, (i,))
    guarded = BufferStore(buf_y, Call(F32, "if_then_else", (i >= 1, load, E.FloatImm(F32, 0.0))), (i,))
    plain = BufferStore(buf_y, load, (i,))
    constant = BufferStore(buf_y, Call(F32, "if_then_else", (i >= 1, E.FloatImm(F32, 1.0),
                                                              E.FloatImm(F32, 0.0))), (i,))
    assert guarded_element_loop(guarded)
    assert guarded_element_loop(IfThenElse(i >= 1, plain, None))
    assert not guarded_element_loop(plain)
    assert not guarded_element_loop(constant)
    assert not guarded_element_loop(For(j, const(0), const(4), ForKind.SERIAL, guarded))
    ramp = E.Ramp(i, const(1), 8)
    vector = BufferStore(buf_y, Call("float32x8", "if_then_else", (
        E.Broadcast(i >= 1, 8), E.BufferLoad(buf_x, (ramp,)), E.Broadcast(E.FloatImm(F32, 0.0), 8))), (ramp,))
    assert not guarded_element_loop(vector)   # vectorized by the schedule already
    hook = Evaluate(Call("int32", "call_extern", (StringImm("__hook"),)))
    assert not guarded_element_loop(seq(hook, guarded))   # e.g. the cache simulator's
    assert not guarded_element_loop(
        BufferStore(buf_y, Call(F32, "if_then_else", (i >= 1, Call(F32, "exp", (load,)),
                                                        E.FloatImm(F32, 0.0))), (i,)))


def test_llvm_is_never_asked_for_what_it_cannot_do(capfd):
    # a vectorized split with a tail (masked vector accesses are calls) and the padding:
    # no "loop not vectorized" warning from LLVM on stderr
    sch = engine.Schedule(engine.workloads.get("matmul", m=12, n=20, k=8))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    sch.decompose_reduction(blk, k)
    engine.build(sch.mod, cache=False)
    engine.build(_padding(), cache=False)
    assert "not vectorized" not in capfd.readouterr().err
