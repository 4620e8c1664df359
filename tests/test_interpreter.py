"""engine.interpreter: reference semantics of every IR node, checked against numpy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import workloads as W
from engine.interpreter import (ArgumentError, InterpretError, OutOfBoundsError, compile_func,
                                interpret)
from engine.ir import (Allocate, Block, BlockRealize, Broadcast, Buffer, BufferStore, Call, Cast,
                       Evaluate, For, ForKind, IfThenElse, IntImm, IRModule, IterType, IterVar,
                       Let, LetStmt, PrimFunc, Ramp, Range, Select, Var, seq)
from engine.ir import expr as E

TRUE = IntImm("bool", 1)


def func_of(params, body, allocs=(), name="f"):
    root = Block(iter_vars=(), reads=(), writes=(), name_hint="root", body=body,
                 alloc_buffers=tuple(allocs))
    return PrimFunc(name, tuple(params), BlockRealize((), TRUE, root))


def loop(var, extent, body, kind=ForKind.SERIAL, lo=0):
    tag = "threadIdx.x" if kind is ForKind.THREAD_BINDING else ""
    return For(var, lo, extent, kind, body, (), tag)


def block(name, iters, values, body, init=None, predicate=TRUE, allocs=()):
    """iters: [(var, lo, extent, 'S'|'R')]"""
    ivs = tuple(IterVar(v, Range(lo, ext), IterType.SPATIAL if t == "S" else IterType.REDUCE)
                for v, lo, ext, t in iters)
    blk = Block(iter_vars=ivs, reads=(), writes=(), name_hint=name, body=body, init=init,
                alloc_buffers=tuple(allocs))
    return BlockRealize(tuple(values), predicate, blk)


# --------------------------------------------------------------------- workloads vs numpy
SMALL = {
    "mm_relu": st.fixed_dictionaries({"n": st.integers(1, 9)}),
    "matmul": st.fixed_dictionaries({"m": st.integers(1, 7), "n": st.integers(1, 7),
                                     "k": st.integers(1, 7)}),
    "batch_matmul": st.fixed_dictionaries({"batch": st.integers(1, 3), "m": st.integers(1, 5),
                                           "n": st.integers(1, 5), "k": st.integers(1, 5)}),
    "conv2d": st.fixed_dictionaries({
        "batch": st.integers(1, 2), "in_channels": st.integers(1, 3),
        "out_channels": st.integers(1, 3), "size": st.integers(3, 7),
        "kernel": st.integers(1, 3), "pad": st.integers(0, 2), "stride": st.integers(1, 3)}),
    "conv2d_relu": st.fixed_dictionaries({
        "in_channels": st.integers(1, 2), "out_channels": st.integers(1, 3),
        "size": st.integers(3, 6), "kernel": st.integers(1, 3), "pad": st.integers(0, 1),
        "stride": st.integers(1, 2)}),
    "depthwise_conv2d": st.fixed_dictionaries({
        "batch": st.integers(1, 2), "channels": st.integers(1, 4), "size": st.integers(3, 8),
        "kernel": st.integers(1, 3), "pad": st.integers(0, 2), "stride": st.integers(1, 3)}),
    "window_sum": st.fixed_dictionaries({"n": st.integers(1, 40)}),
    "vector_add": st.fixed_dictionaries({"n": st.integers(1, 40)}),
    "softmax": st.fixed_dictionaries({"m": st.integers(1, 6), "n": st.integers(1, 13)}),
    "layernorm": st.fixed_dictionaries({"m": st.integers(1, 6), "n": st.integers(1, 13)}),
    "transpose": st.fixed_dictionaries({"m": st.integers(1, 9), "n": st.integers(1, 9)}),
    "add": st.fixed_dictionaries({"m": st.integers(1, 9), "n": st.integers(1, 9)}),
    "relu": st.fixed_dictionaries({"m": st.integers(1, 9), "n": st.integers(1, 9)}),
    "mlp": st.fixed_dictionaries({"batch": st.integers(1, 3), "in_features": st.integers(1, 17),
                                  "hidden": st.integers(1, 9),
                                  "out_features": st.integers(1, 5)}),
    "sum": st.fixed_dictionaries({"m": st.integers(1, 6), "n": st.integers(1, 33)}),
}


def test_every_workload_has_a_small_strategy():
    assert set(SMALL) == set(W.names())


def _check(name, params, seed):
    mod = W.get(name, **params)
    inf = W.info(name)
    args = W.random_args(name, seed, **params)
    inputs = [a.copy() for a in args[:inf.num_inputs]]
    interpret(mod, inf.func_name, *args)
    want = W.reference(name, **params)(*inputs)
    for a, b in zip(args[:inf.num_inputs], inputs):  # inputs untouched
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(args[-1], want, rtol=2e-5, atol=2e-5)


def _draw_params(name: str, data) -> dict | None:
    """Small parameters for workload ``name``, or None when the workload refuses them
    (e.g. a kernel larger than the padded input: nothing to run)."""
    params = data.draw(SMALL[name], label="params")
    try:
        W.resolve_params(name, **params)
    except W.WorkloadError:
        return None
    return params


@pytest.mark.parametrize("name", sorted(SMALL))
@given(data=st.data())
def test_workload_matches_reference(name, data):
    params = _draw_params(name, data)
    if params is None:
        return
    _check(name, params, data.draw(st.integers(0, 3), label="seed"))


def test_mm_relu_32_cubed():
    _check("mm_relu", {"n": 32}, 0)


# --------------------------------------------------------------------- argument checking
def test_argument_errors_name_the_buffer():
    mod = W.get("add", m=3, n=4)
    a, b, c = W.random_args("add", m=3, n=4)
    with pytest.raises(ArgumentError, match=r"expects 3 array\(s\) \(A, B, C\), got 2"):
        interpret(mod, "add", a, b)
    with pytest.raises(ArgumentError, match=r"\(B\).*dtype float32, got float64"):
        interpret(mod, "add", a, b.astype("float64"), c)
    with pytest.raises(ArgumentError, match=r"\(C\).*shape \(3, 4\), got \(4, 3\)"):
        interpret(mod, "add", a, b, c.T.copy())
    with pytest.raises(ArgumentError, match=r"\(A\).*numpy array, got list"):
        interpret(mod, "add", a.tolist(), b, c)
    c.flags.writeable = False
    with pytest.raises(ArgumentError, match=r"\(C\).*read-only"):
        interpret(mod, "add", a, b, c)
    with pytest.raises(ArgumentError, match="no function named 'nope'"):
        interpret(mod, "nope", a, b, c)
    with pytest.raises(ArgumentError, match="IRModule or a PrimFunc"):
        interpret("add", "add", a, b, c)


def test_read_only_inputs_are_fine_and_prim_func_or_single_module_work():
    mod = W.get("add", m=2, n=2)
    a, b, c = W.random_args("add", m=2, n=2)
    a.flags.writeable = False
    interpret(mod, None, a, b, c)
    np.testing.assert_array_equal(c, a + b)
    c[:] = 0
    interpret(mod["add"], a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert engine.interpret is interpret
    assert compile_func(mod["add"]) is compile_func(mod["add"])  # compiled once


# --------------------------------------------------------------------- out of bounds
def test_out_of_bounds_read_names_buffer_and_index():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i, vi = Var("i"), Var("vi")
    body = loop(i, 4, block("shift", [(vi, 0, 4, "S")], [i],
                            BufferStore(B, A[vi + 1], (vi,))))
    f = func_of([A, B], body)
    with pytest.raises(OutOfBoundsError, match=r"read of buffer 'A' at index \[4\] in block "
                                               r"'shift'; its shape is \(4,\)"):
        interpret(f, "f", np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_negative_index_is_an_error_not_a_wrap():
    A, B = Buffer("A", (3, 3), "float32"), Buffer("B", (3, 3), "float32")
    i, j = Var("i"), Var("j")
    body = loop(i, 3, loop(j, 3, BufferStore(B, A[i, j - 1], (i, j))))
    with pytest.raises(OutOfBoundsError, match=r"'A' at index \[0, -1\]"):
        interpret(func_of([A, B], body), "f", np.zeros((3, 3), "float32"),
                  np.zeros((3, 3), "float32"))
    body = loop(i, 3, loop(j, 3, BufferStore(B, A[i, j], (i, j - 3))))
    with pytest.raises(OutOfBoundsError, match=r"write of buffer 'B' at index \[0, -3\]"):
        interpret(func_of([A, B], body), "f", np.zeros((3, 3), "float32"),
                  np.zeros((3, 3), "float32"))


def test_binding_outside_domain_is_reported():
    A = Buffer("A", (8,), "float32")
    i0, i1, vi = Var("i0"), Var("i1"), Var("vi")
    # split 6 by 4 without a predicate: vi reaches 7 (>= 6)
    body = loop(i0, 2, loop(i1, 4, block("b", [(vi, 0, 6, "S")], [i0 * 4 + i1],
                                         BufferStore(A, E.FloatImm("float32", 1.0), (vi,)))))
    with pytest.raises(InterpretError, match=r"iter var vi is bound to 6, outside its domain"
                                             r" \[0, 6\)"):
        interpret(func_of([A], body), "f", np.zeros(8, "float32"))
    # with the predicate T.where(i0 * 4 + i1 < 6) the extra iterations are skipped
    body = loop(i0, 2, loop(i1, 4, block("b", [(vi, 0, 6, "S")], [i0 * 4 + i1],
                                         BufferStore(A, E.FloatImm("float32", 1.0), (vi,)),
                                         predicate=i0 * 4 + i1 < 6)))
    a = np.zeros(8, "float32")
    interpret(func_of([A], body), "f", a)
    np.testing.assert_array_equal(a, [1, 1, 1, 1, 1, 1, 0, 0])


# --------------------------------------------------------------------- integer semantics
def _int_binop(cls, a_vals, b_vals, dtype="int32"):
    n = len(a_vals)
    A, B, C = (Buffer(x, (n,), dtype) for x in "ABC")
    i = Var("i")
    f = func_of([A, B, C], loop(i, n, BufferStore(C, cls(A[i], B[i]), (i,))))
    c = np.zeros(n, dtype)
    interpret(f, "f", np.array(a_vals, dtype), np.array(b_vals, dtype), c)
    return c


SIGNS = ([7, -7, 7, -7, 6, -6, 0, -1], [2, 2, -2, -2, 3, 3, 5, 4])


def test_div_and_mod_truncate_like_c():
    a, b = (np.array(x) for x in SIGNS)
    trunc_q = np.trunc(a / b).astype(int)
    np.testing.assert_array_equal(_int_binop(E.Div, *SIGNS), trunc_q)
    np.testing.assert_array_equal(_int_binop(E.Mod, *SIGNS), a - b * trunc_q)
    assert list(_int_binop(E.Div, *SIGNS)[:4]) == [3, -3, -3, 3]
    assert list(_int_binop(E.Mod, *SIGNS)[:4]) == [1, -1, 1, -1]


def test_floordiv_and_floormod_round_down():
    a, b = (np.array(x) for x in SIGNS)
    np.testing.assert_array_equal(_int_binop(E.FloorDiv, *SIGNS), a // b)
    np.testing.assert_array_equal(_int_binop(E.FloorMod, *SIGNS), a % b)
    assert list(_int_binop(E.FloorDiv, *SIGNS)[:4]) == [3, -4, -4, 3]
    assert list(_int_binop(E.FloorMod, *SIGNS)[:4]) == [1, 1, -1, -1]


@given(st.lists(st.tuples(st.integers(-1000, 1000), st.integers(-50, 50).filter(bool)),
                min_size=1, max_size=8))
def test_division_semantics_property(pairs):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    na, nb = np.array(a), np.array(b)
    q = np.fix(na / nb).astype(int)
    np.testing.assert_array_equal(_int_binop(E.Div, a, b), q)
    np.testing.assert_array_equal(_int_binop(E.Mod, a, b), na - nb * q)
    np.testing.assert_array_equal(_int_binop(E.FloorDiv, a, b), na // nb)
    np.testing.assert_array_equal(_int_binop(E.FloorMod, a, b), na % nb)


def test_integer_division_by_zero_is_an_error():
    with pytest.raises(InterpretError, match="division by zero"):
        _int_binop(E.FloorDiv, [1], [0])


def test_int32_arithmetic_wraps_and_casts_truncate():
    big = 2**31 - 1
    np.testing.assert_array_equal(_int_binop(E.Add, [big, -big - 1], [1, -1]),
                                  [-2**31, 2**31 - 1])
    np.testing.assert_array_equal(_int_binop(E.Mul, [65536], [65536]), [0])
    A = Buffer("A", (5,), "float32")
    B = Buffer("B", (5,), "int8")
    C = Buffer("C", (5,), "int8")
    i = Var("i")
    body = loop(i, 5, seq(BufferStore(B, Cast("int8", A[i]), (i,)),
                          BufferStore(C, Cast("int8", Cast("int32", A[i]) * 100), (i,))))
    f = func_of([A, B, C], body)
    a = np.array([2.9, -2.9, 0.5, -0.5, 127.0], "float32")
    b, c = np.zeros(5, "int8"), np.zeros(5, "int8")
    interpret(f, "f", a, b, c)
    np.testing.assert_array_equal(b, [2, -2, 0, 0, 127])
    np.testing.assert_array_equal(c, (np.array([2, -2, 0, 0, 127]) * 100).astype(np.int8))


# --------------------------------------------------------------------- blocks and init
def test_init_runs_when_reduce_bindings_are_at_their_minimum():
    """The reduce axis is walked backwards: init fires at vk == 0, i.e. on the *last*
    iteration, wiping the partial sum — exactly what TVM's lowering does."""
    A, Y = Buffer("A", (4,), "float32"), Buffer("Y", (1,), "float32")
    k, vk, vi = Var("k"), Var("vk"), Var("vi")
    body = loop(k, 4, block("Y", [(vi, 0, 1, "S"), (vk, 0, 4, "R")], [0, 3 - k],
                            BufferStore(Y, Y[vi] + A[vk], (vi,)),
                            init=BufferStore(Y, E.FloatImm("float32", 0.0), (vi,))))
    a = np.array([1, 10, 100, 1000], "float32")
    y = np.full(1, 5, "float32")
    interpret(func_of([A, Y], body), "f", a, y)
    assert y[0] == 1.0
    # forward order: ordinary sum
    body = loop(k, 4, block("Y", [(vi, 0, 1, "S"), (vk, 0, 4, "R")], [0, k],
                            BufferStore(Y, Y[vi] + A[vk], (vi,)),
                            init=BufferStore(Y, E.FloatImm("float32", 0.0), (vi,))))
    interpret(func_of([A, Y], body), "f", a, y)
    assert y[0] == 1111.0


def test_init_uses_the_domain_minimum_not_zero():
    A, Y = Buffer("A", (6,), "float32"), Buffer("Y", (1,), "float32")
    k, vk, vi = Var("k"), Var("vk"), Var("vi")
    body = loop(k, 4, block("Y", [(vi, 0, 1, "S"), (vk, 2, 4, "R")], [0, k + 2],
                            BufferStore(Y, Y[vi] + A[vk], (vi,)),
                            init=BufferStore(Y, E.FloatImm("float32", 0.0), (vi,))))
    y = np.full(1, 99, "float32")
    interpret(func_of([A, Y], body), "f", np.arange(6, dtype="float32"), y)
    assert y[0] == 2 + 3 + 4 + 5


def test_uninitialised_intermediate_shows_up_as_nan():
    A, C = Buffer("A", (4,), "float32"), Buffer("C", (4,), "float32")
    Y = Buffer("Y", (4,), "float32")
    i = Var("i")
    body = loop(i, 4, BufferStore(C, E.Max(Y[i], A[i]), (i,)))
    c = np.zeros(4, "float32")
    interpret(func_of([A, C], body, allocs=[Y]), "f", np.ones(4, "float32"), c)
    assert np.isnan(c).all()


def test_block_alloc_buffer_and_allocate_scopes():
    A, C = Buffer("A", (4,), "float32"), Buffer("C", (4,), "float32")
    T1 = Buffer("T1", (1,), "float32", scope="local")
    T2 = Buffer("T2", (2,), "float32", scope="shared")
    i, vi = Var("i"), Var("vi")
    inner = seq(BufferStore(T1, A[vi] * 2, (0,)),
                Allocate(T2, seq(BufferStore(T2, T1[0] + 1, (1,)),
                                 BufferStore(C, T2[1], (vi,)))))
    body = loop(i, 4, block("b", [(vi, 0, 4, "S")], [i], inner, allocs=[T1]))
    c = np.zeros(4, "float32")
    interpret(func_of([A, C], body), "f", np.arange(4, dtype="float32"), c)
    np.testing.assert_array_equal(c, [1, 3, 5, 7])
    # using T1 outside its block is refused before running
    bad = seq(body, BufferStore(C, T1[0], (0,)))
    with pytest.raises(InterpretError, match="buffer 'T1' is read.*neither a parameter"):
        interpret(func_of([A, C], bad), "f", np.zeros(4, "float32"), c)


def test_unbound_variable_is_reported():
    A = Buffer("A", (4,), "float32")
    i, j = Var("i"), Var("j")
    with pytest.raises(InterpretError, match="variable 'j' is used"):
        interpret(func_of([A], loop(i, 4, BufferStore(A, A[j], (i,)))), "f",
                  np.zeros(4, "float32"))


# --------------------------------------------------------------------- other statements
def test_if_then_else_select_let_and_evaluate():
    A, B = Buffer("A", (6,), "int32"), Buffer("B", (6,), "int32")
    i, x, y = Var("i"), Var("x"), Var("y")
    body = loop(i, 6, LetStmt(x, A[i] * 3, IfThenElse(
        i % 2 == 0,
        BufferStore(B, Select(x > 6, x, Let(y, x + 100, y * 2)), (i,)),
        seq(Evaluate(A[i]), BufferStore(B, E.IntImm("int32", -1), (i,))))))
    a = np.arange(6, dtype="int32")
    b = np.zeros(6, "int32")
    interpret(func_of([A, B], body), "f", a, b)
    want = [(3 * v if 3 * v > 6 else (3 * v + 100) * 2) if v % 2 == 0 else -1 for v in a]
    np.testing.assert_array_equal(b, want)


def test_if_then_else_intrinsic_guards_out_of_bounds_reads():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (6,), "float32")
    i = Var("i")
    guarded = Call("float32", "if_then_else",
                   ((i >= 1) & (i < 5), A[i - 1], E.FloatImm("float32", 0.0)))
    body = loop(i, 6, BufferStore(B, guarded, (i,)))
    b = np.ones(6, "float32")
    interpret(func_of([A, B], body), "f", np.arange(1, 5, dtype="float32"), b)
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4, 0])
    # Select evaluates both sides: the same guard written with Select reads out of bounds
    sel = Select((i >= 1) & (i < 5), A[i - 1], E.FloatImm("float32", 0.0))
    with pytest.raises(OutOfBoundsError):
        interpret(func_of([A, B], loop(i, 6, BufferStore(B, sel, (i,)))), "f",
                  np.zeros(4, "float32"), b)


@pytest.mark.parametrize("kind", list(ForKind))
def test_loop_kinds_do_not_change_results(kind):
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    b = np.zeros(8, "float32")
    interpret(func_of([A, B], loop(i, 8, BufferStore(B, A[i] * 2, (i,)), kind=kind)), "f",
              np.arange(8, dtype="float32"), b)
    np.testing.assert_array_equal(b, np.arange(8) * 2)


def test_ramp_and_broadcast_vectors():
    A, B = Buffer("A", (4, 8), "float32"), Buffer("B", (4, 8), "float32")
    i, j0 = Var("i"), Var("j0")
    vec = Ramp(j0 * 4, 1, 4)
    body = loop(i, 4, loop(j0, 2, BufferStore(
        B, A[i, vec] * Broadcast(E.FloatImm("float32", 2.0), 4)
        + Cast("float32x4", Ramp(i, 0, 4)), (i, vec))))
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.zeros((4, 8), "float32")
    interpret(func_of([A, B], body), "f", a, b)
    np.testing.assert_array_equal(b, a * 2 + np.arange(4)[:, None])
    # a vector lane out of range is caught
    bad = loop(i, 4, loop(j0, 2, BufferStore(B, A[i, Ramp(j0 * 4 + 1, 1, 4)], (i, vec))))
    with pytest.raises(OutOfBoundsError, match="'A'"):
        interpret(func_of([A, B], bad), "f", a, b)


def test_vector_if_then_else_guards_each_lane():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (6,), "float32")
    lanes = Ramp(IntImm("int32", 0), IntImm("int32", 1), 6)
    guarded = Call("float32x6", "if_then_else",
                   ((lanes >= Broadcast(IntImm("int32", 1), 6))
                    & (lanes < Broadcast(IntImm("int32", 5), 6)),
                    A[lanes - Broadcast(IntImm("int32", 1), 6)],
                    Broadcast(E.FloatImm("float32", 0.0), 6)))
    f = func_of([A, B], BufferStore(B, guarded, (lanes,)))
    b = np.ones(6, "float32")
    interpret(f, "f", np.arange(1, 5, dtype="float32"), b)
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4, 0])


def test_intrinsics_match_numpy():
    x = np.array([0.25, 0.5, 1.5, 2.5, 3.0], "float32")
    A = Buffer("A", (5,), "float32")
    i = Var("i")
    ops = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
           "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "floor": np.floor, "ceil": np.ceil,
           "round": np.rint, "trunc": np.trunc, "fabs": np.abs, "exp2": np.exp2,
           "log2": np.log2, "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos}
    for op, ref in ops.items():
        B = Buffer("B", (5,), "float32")
        f = func_of([A, B], loop(i, 5, BufferStore(B, Call("float32", op, (A[i],)), (i,))))
        b = np.zeros(5, "float32")
        interpret(f, "f", x, b)
        np.testing.assert_allclose(b, ref(x).astype("float32"), rtol=1e-6, err_msg=op)
    B = Buffer("B", (5,), "float32")
    f = func_of([A, B], loop(i, 5, BufferStore(B, Call("float32", "pow", (A[i], A[i])), (i,))))
    b = np.zeros(5, "float32")
    interpret(f, "f", x, b)
    np.testing.assert_allclose(b, x ** x, rtol=1e-6)
    bad = func_of([A, B], loop(i, 5, BufferStore(B, Call("float32", "nope", (A[i],)), (i,))))
    with pytest.raises(InterpretError, match="unknown intrinsic T.nope"):
        interpret(bad, "f", x, b)


def test_float32_accumulation_rounds_like_float32():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, (1, 257)).astype("float32") * np.float32(1e4)
    mod = W.get("sum", m=1, n=257)
    b = np.zeros(1, "float32")
    interpret(mod, "sum", a, b)
    acc = np.float32(0)
    for v in a[0]:
        acc = np.float32(acc + v)
    assert b[0] == acc  # exactly the sequential float32 sum


def test_symbolic_shapes_are_bound_from_the_arrays():
    n = Var("n")
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    i = Var("i")
    f = func_of([A, B], For(i, 0, n, ForKind.SERIAL, BufferStore(B, A[i] + 1, (i,))))
    b = np.zeros(5, "float32")
    interpret(f, "f", np.arange(5, dtype="float32"), b)
    np.testing.assert_array_equal(b, np.arange(5) + 1)
    with pytest.raises(ArgumentError, match=r"\(B\).*shape \(5,\), got \(4,\)"):
        interpret(f, "f", np.zeros(5, "float32"), np.zeros(4, "float32"))


def test_flattened_buffers_accept_nd_arrays():
    A = Buffer("A", (12,), "float32")
    i = Var("i")
    a = np.zeros((3, 4), "float32")
    interpret(func_of([A], loop(i, 12, BufferStore(A, Cast("float32", i), (i,)))), "f", a)
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4))


def test_module_with_several_functions():
    mod = IRModule.from_funcs(W.get("add", n=2)["add"], W.get("relu", n=2)["relu"])
    a = np.array([[-1, 2], [3, -4]], "float32")
    out = np.zeros((2, 2), "float32")
    with pytest.raises(ArgumentError, match="say which one"):
        interpret(mod, None, a, out)
    interpret(mod, "relu", a, out)
    np.testing.assert_array_equal(out, np.maximum(a, 0))


# --------------------------------------------------------------------- numpy bands
def run_both(f, *arrays, need_band=True):
    """Run ``f`` lane-vectorised and iteration by iteration; results must be identical."""
    assert compile_func(f).bands >= 1 or not need_band, "the program should use a numpy band"
    assert compile_func(f, vectorize=False).bands == 0
    fast = [a.copy() for a in arrays]
    slow = [a.copy() for a in arrays]
    interpret(f, None, *fast)
    interpret(f, None, *slow, vectorize=False)
    for x, y in zip(fast, slow):
        np.testing.assert_array_equal(x, y)
    return fast


@pytest.mark.parametrize("name", sorted(SMALL))
@given(data=st.data())
def test_vectorised_bands_are_bit_exact(name, data):
    params = _draw_params(name, data)
    if params is None:
        return
    inf = W.info(name)
    run_both(W.get(name, **params)[inf.func_name], *W.random_args(name, 1, **params),
             need_band=False)


def _reduce_func(k_binding, extent=16, dtype="float32", op=E.Add, init=True, predicate=None,
                 lo=0):
    A, Y = Buffer("A", (extent + lo,), dtype), Buffer("Y", (1,), dtype)
    k, vk, vi = Var("k"), Var("vk"), Var("vi")
    zero = E.FloatImm(dtype, 0.0) if dtype.startswith("float") else IntImm(dtype, 0)
    body = loop(k, extent, block(
        "Y", [(vi, 0, 1, "S"), (vk, lo, extent, "R")], [0, k_binding(k)],
        BufferStore(Y, op(Y[vi], A[vk]), (vi,)),
        init=BufferStore(Y, zero, (vi,)) if init else None,
        predicate=TRUE if predicate is None else predicate(k)))
    return func_of([A, Y], body), A, Y


@pytest.mark.parametrize("binding", [lambda k: k, lambda k: 15 - k, lambda k: (k * 5) % 16])
@pytest.mark.parametrize("op", [E.Add, E.Max, E.Min])
def test_band_reduction_with_init_anywhere(binding, op):
    f, _, _ = _reduce_func(binding, op=op)
    a = np.random.default_rng(0).uniform(-1e3, 1e3, 16).astype("float32")
    run_both(f, a, np.full(1, 7, "float32"))


def test_band_reduction_without_init_accumulates_onto_the_old_value():
    f, _, _ = _reduce_func(lambda k: k, init=False)
    (a, y) = run_both(f, np.arange(16, dtype="float32"), np.full(1, 1000, "float32"))
    assert y[0] == 1000 + 120


def test_band_reduction_int_wraps_and_float_nan_propagates():
    f, _, _ = _reduce_func(lambda k: k, dtype="int32")
    a = np.full(16, 2**30, "int32")
    (_, y) = run_both(f, a, np.zeros(1, "int32"))
    assert y[0] == np.int32(np.int64(2**30 * 16) % 2**32 - (2**32 if 2**30 * 16 % 2**32 >= 2**31
                                                             else 0))
    f, _, _ = _reduce_func(lambda k: k, op=E.Max)
    a = np.arange(16, dtype="float32")
    a[5] = np.nan
    (_, y) = run_both(f, a, np.zeros(1, "float32"))
    assert np.isnan(y[0])


def test_band_with_predicate_and_domain_minimum():
    f, _, _ = _reduce_func(lambda k: k + 2, extent=16, lo=2, predicate=lambda k: k % 3 != 1)
    (_, y) = run_both(f, np.arange(18, dtype="float32"), np.zeros(1, "float32"))
    assert y[0] == sum(k + 2 for k in range(16) if k % 3 != 1)
    A, B = Buffer("A", (20,), "float32"), Buffer("B", (20,), "float32")
    i0, i1, vi = Var("i0"), Var("i1"), Var("vi")
    body = loop(i0, 3, loop(i1, 8, block("b", [(vi, 0, 20, "S")], [i0 * 8 + i1],
                                         BufferStore(B, A[vi] * 3, (vi,)),
                                         predicate=i0 * 8 + i1 < 20)))
    (_, b) = run_both(func_of([A, B], body), np.arange(20, dtype="float32"),
                      np.zeros(20, "float32"))
    np.testing.assert_array_equal(b, np.arange(20) * 3)


def test_band_falls_back_when_lanes_write_the_same_element():
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (4,), "float32")
    i = Var("i")
    body = loop(i, 16, BufferStore(B, A[i], (i % 4,)))  # last write wins
    (_, b) = run_both(func_of([A, B], body), np.arange(16, dtype="float32"),
                      np.zeros(4, "float32"))
    np.testing.assert_array_equal(b, [12, 13, 14, 15])


def test_band_errors_are_the_same_errors():
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    i, vi = Var("i"), Var("vi")
    oob = func_of([A, B], loop(i, 16, BufferStore(B, A[i + 3], (i,))))
    for vec in (True, False):
        with pytest.raises(OutOfBoundsError, match=r"'A' at index \[16\]"):
            interpret(oob, None, np.zeros(16, "float32"), np.zeros(16, "float32"),
                      vectorize=vec)
    dom = func_of([A, B], loop(i, 16, block("b", [(vi, 0, 12, "S")], [i],
                                           BufferStore(B, A[vi], (vi,)))))
    for vec in (True, False):
        with pytest.raises(InterpretError, match="vi is bound to 12"):
            interpret(dom, None, np.zeros(16, "float32"), np.zeros(16, "float32"),
                      vectorize=vec)


def test_band_let_select_and_guarded_reads():
    A, B = Buffer("A", (12,), "float32"), Buffer("B", (16,), "float32")
    i, x = Var("i"), Var("x")
    guarded = Call("float32", "if_then_else", ((i >= 2) & (i < 14), A[i - 2],
                                               E.FloatImm("float32", -1.0)))
    value = Let(x, guarded * 2, Select(x > 5, x, x - 100))
    (_, b) = run_both(func_of([A, B], loop(i, 16, BufferStore(B, value, (i,)))),
                      np.arange(12, dtype="float32"), np.zeros(16, "float32"))
    assert b[0] == -102 and b[15] == -102 and b[10] == 16


def test_band_elementwise_with_init_reading_back():
    """An element-wise band whose block has an init (reduce axis outside the band)."""
    A, Y = Buffer("A", (3, 16), "float32"), Buffer("Y", (16,), "float32")
    k, j, vj, vk = Var("k"), Var("j"), Var("vj"), Var("vk")
    body = loop(k, 3, loop(j, 16, block(
        "Y", [(vj, 0, 16, "S"), (vk, 0, 3, "R")], [j, k],
        BufferStore(Y, Y[vj] + A[vk, vj], (vj,)),
        init=BufferStore(Y, E.FloatImm("float32", 0.5), (vj,)))))
    a = np.random.default_rng(2).uniform(-1, 1, (3, 16)).astype("float32")
    (_, y) = run_both(func_of([A, Y], body), a, np.full(16, np.nan, "float32"))
    np.testing.assert_allclose(y, 0.5 + a.sum(0), rtol=1e-6, atol=1e-6)


def test_course_schedule_and_its_lowered_form_run_the_same():
    """Integration: the course's mm_relu schedule, and the program the backend lowers it
    to (flattened buffers, Allocate, Ramp/Broadcast vectors), give the same result."""
    from engine.lower import lower
    sch = engine.Schedule(W.get("mm_relu", n=16))
    b = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(b, k)
    sch.vectorize(sch.get_loops(sch.get_block("C", "mm_relu"))[-1])
    lowered = lower(sch.mod["mm_relu"])
    args = W.random_args("mm_relu", n=16)
    want = W.reference("mm_relu", n=16)(*args[:2])
    scheduled = run_both(sch.mod["mm_relu"], *args, need_band=False)
    np.testing.assert_allclose(scheduled[2], want, rtol=1e-5, atol=1e-5)
    low = run_both(lowered, *args, need_band=False)
    np.testing.assert_array_equal(low[2], scheduled[2])


def test_vector_if_condition_is_refused_clearly():
    A = Buffer("A", (4,), "float32")
    lanes = Ramp(IntImm("int32", 0), IntImm("int32", 1), 4)
    f = func_of([A], IfThenElse(lanes < Broadcast(IntImm("int32", 2), 4),
                                BufferStore(A, Broadcast(E.FloatImm("float32", 1.0), 4),
                                            (lanes,))))
    with pytest.raises(InterpretError, match="condition of an if statement.*vector"):
        interpret(f, None, np.zeros(4, "float32"))


def test_default_workloads_use_bands_where_it_pays():
    assert compile_func(W.get("mm_relu")["mm_relu"]).bands == 2      # k reduction, C nest
    assert compile_func(W.get("conv2d")["conv2d"]).bands == 2        # pad nest, ci-kh-kw
    assert compile_func(W.get("mm_relu", n=4)["mm_relu"]).bands == 1  # only the 16-lane C
