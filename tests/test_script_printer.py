"""Printer: exact course-style text for hand-built IR, printing rules, names, repr."""
from __future__ import annotations

import pytest

import engine
from engine.ir import (Add, Block, BlockRealize, Broadcast, Buffer, BufferStore, Call, Cast,
                       Div, EQ, Evaluate, FloatImm, FloorDiv, FloorMod, For, ForKind,
                       IfThenElse, IntImm, IRModule, IterType, IterVar, LetStmt, LT, Max, Min,
                       Mod, Mul, Not, Or, And, PrimFunc, Ramp, Range, Select, StringImm, Sub,
                       Var, seq)
from engine.script import parse, repr_node, script

from test_script_irgen import MM_RELU_TEXT, TRUE, mm_relu, point


def _func(body, params=(), allocs=(), name="f"):
    """A PrimFunc whose root block holds ``body`` (and ``allocs``)."""
    root = Block((), (), (), "root", body, None, tuple(allocs), ())
    return PrimFunc(name, tuple(params), BlockRealize((), TRUE, root))


def _expr_text(e):
    """How the printer writes expression ``e`` (as the value stored into a buffer)."""
    out = Buffer("out", (1,), e.dtype if e.dtype != "bool" else "bool")
    f = PrimFunc("f", (out,), BufferStore(out, e, (IntImm("int32", 0),)))
    line = script(f).splitlines()[-1].strip()
    assert line.startswith("out[0] = ")
    return line[len("out[0] = "):]


def test_mm_relu_prints_exactly_like_the_course():
    assert script(mm_relu()) == MM_RELU_TEXT
    assert mm_relu().script() == MM_RELU_TEXT


def test_primfunc_alone_starts_at_column_zero():
    f = mm_relu()["mm_relu"]
    text = f.script()
    lines = text.splitlines()
    assert lines[0] == "@T.prim_func"
    assert lines[1].startswith("def mm_relu(A: T.Buffer((128, 128), \"float32\")")
    assert lines[2] == '    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})'
    # the module text is the function text indented by one level
    body = "\n".join("    " + l for l in lines)
    assert body in MM_RELU_TEXT


def test_split_loop_prints_axis_lines_and_grid():
    i, j0, j1 = Var("i"), Var("j_0"), Var("j_1")
    A = Buffer("A", (8, 8))
    vi, vj = Var("vi"), Var("vj")
    blk = Block((IterVar(vi, Range(0, 8), IterType.SPATIAL),
                 IterVar(vj, Range(0, 8), IterType.SPATIAL)), (), (point(A, vi, vj),), "B",
                BufferStore(A, FloatImm("float32", 1), (vi, vj)))
    body = For(i, 0, 8, ForKind.SERIAL, For(j0, 0, 2, ForKind.SERIAL, For(
        j1, 0, 4, ForKind.SERIAL, BlockRealize((i, j0 * 4 + j1), TRUE, blk))))
    text = script(_func(body, (A,)))
    assert "for i, j_0, j_1 in T.grid(8, 2, 4):" in text
    assert "vi = T.axis.spatial(8, i)" in text
    assert "vj = T.axis.spatial(8, j_0 * 4 + j_1)" in text
    assert "T.reads()" in text and "T.writes(A[vi, vj])" in text


def test_loop_kinds_annotations_and_starts():
    A = Buffer("A", (64,))
    i, j, k, l, m = (Var(n) for n in "ijklm")
    store = BufferStore(A, FloatImm("float32", 0), (i + j + k + l + m,))
    body = For(i, 0, 4, ForKind.PARALLEL, For(
        j, 0, 4, ForKind.VECTORIZED, For(
            k, 2, 4, ForKind.SERIAL, For(
                l, 0, 4, ForKind.UNROLLED, For(
                    m, 0, 3, ForKind.SERIAL, store, (("pragma_auto_unroll_max_step", 16),
                                                     ("pragma_x", "y")))))))
    text = PrimFunc("f", (A,), body).script()
    assert "for i in T.parallel(4):" in text
    assert "for j in T.vectorized(4):" in text
    assert "for k in T.serial(2, 6):" in text
    assert "for l in T.unroll(4):" in text
    assert ('for m in T.serial(3, annotations={"pragma_auto_unroll_max_step": 16, '
            '"pragma_x": "y"}):') in text


def test_lone_serial_loop_and_grid_stops_at_dependent_extent():
    A = Buffer("A", (16,))
    i, j = Var("i"), Var("j")
    body = For(i, 0, 4, ForKind.SERIAL, For(j, 0, i + 1, ForKind.SERIAL,
                                            BufferStore(A, FloatImm("float32", 0), (i + j,))))
    text = PrimFunc("f", (A,), body).script()
    assert "for i in T.serial(4):" in text
    assert "for j in T.serial(i + 1):" in text
    assert structural_roundtrip(PrimFunc("f", (A,), body))


def structural_roundtrip(f):
    mod = f if isinstance(f, IRModule) else IRModule(((f.name, f),))
    text = script(mod)
    back = parse(text)
    return engine.structural_equal(back, mod) and script(back) == text


def test_alloc_buffer_dtype_and_scope_and_block_attr_and_where():
    A = Buffer("A", (4, 4), "int32")
    L = Buffer("L", (4, 4), "float32", "local")
    H = Buffer("H", (2,), "float16")
    i = Var("i")
    vi = Var("vi")
    blk = Block((IterVar(vi, Range(0, 4), IterType.SPATIAL),), (), (point(A, vi, vi),),
                "blk", BufferStore(A, IntImm("int32", 7), (vi, vi)),
                annotations=(("meta_schedule.unroll", 4),), alloc_buffers=(H,))
    body = For(i, 0, 5, ForKind.SERIAL, BlockRealize((i,), LT(i, IntImm("int32", 4)), blk))
    f = _func(body, (A,), (L,))
    text = script(f)
    assert 'L = T.alloc_buffer((4, 4), scope="local")' in text
    assert 'H = T.alloc_buffer((2,), dtype="float16")' in text
    assert 'A: T.Buffer((4, 4), "int32")' in text
    assert "T.where(i < 4)" in text
    assert 'T.block_attr({"meta_schedule.unroll": 4})' in text
    assert "vi = T.axis.spatial(4, i)" in text  # extents differ: no remap
    assert structural_roundtrip(f)


@pytest.mark.parametrize("build,expected", [
    (lambda a, b, x: Add(a, Mul(b, x)), "a + b * x"),
    (lambda a, b, x: Mul(Add(a, b), x), "(a + b) * x"),
    (lambda a, b, x: Sub(a, Sub(b, x)), "a - (b - x)"),
    (lambda a, b, x: Sub(Sub(a, b), x), "a - b - x"),
    (lambda a, b, x: FloorDiv(a, Mul(b, x)), "a // (b * x)"),
    (lambda a, b, x: FloorMod(Mul(a, b), x), "a * b % x"),
    (lambda a, b, x: Div(a, b), "T.truncdiv(a, b)"),
    (lambda a, b, x: Mod(a, b), "T.truncmod(a, b)"),
    (lambda a, b, x: Max(a, Min(b, x)), "T.max(a, T.min(b, x))"),
    (lambda a, b, x: Add(a, IntImm("int32", -3)), "a + -3"),
    (lambda a, b, x: Sub(IntImm("int32", 0), a), "0 - a"),
    (lambda a, b, x: Select(LT(a, b), a, x), "T.Select(a < b, a, x)"),
    (lambda a, b, x: Cast("int64", a), 'T.Cast("int64", a)'),
    (lambda a, b, x: Add(Cast("int64", a), IntImm("int64", 5)), 'T.Cast("int64", a) + T.int64(5)'),
])
def test_expression_parentheses_and_spellings(build, expected):
    a, b, x = Var("a"), Var("b"), Var("x")
    e = build(a, b, x)
    out = Buffer("out", (1,), e.dtype)
    f = PrimFunc("f", (out,), BufferStore(out, e, (IntImm("int32", 0),)))
    text = script(f)
    # a, b, x are free variables: they are declared after the signature
    assert "    a = T.int32()" in text
    assert text.rstrip().endswith(f"out[0] = {expected}")
    assert structural_roundtrip(f)


@pytest.mark.parametrize("e,expected", [
    (FloatImm("float32", 0.0), "T.float32(0)"),
    (FloatImm("float32", 0.5), "T.float32(0.5)"),
    (FloatImm("float64", -1e-5), "T.float64(-1e-05)"),
    (FloatImm("float32", float("inf")), 'T.float32("inf")'),
    (IntImm("int64", 5), "T.int64(5)"),
    (IntImm("int32", 5), "5"),
    (IntImm("uint8", 255), "T.uint8(255)"),
    (IntImm("bool", 1), "True"),
    (Call("float32", "exp", (FloatImm("float32", 1.0),)), "T.exp(T.float32(1))"),
    (Call("float32", "if_then_else", (IntImm("bool", 0), FloatImm("float32", 1.0),
                                      FloatImm("float32", 2.0))),
     "T.if_then_else(False, T.float32(1), T.float32(2))"),
    (Call("float32", "my_fn", (IntImm("int32", 1),)), 'T.call_extern("float32", "my_fn", 1)'),
    (Call("float64", "sqrt", (FloatImm("float32", 4.0),)),
     'T.sqrt(T.float32(4), dtype="float64")'),
    (Div(FloatImm("float32", 1.0), Add(FloatImm("float32", 2.0), FloatImm("float32", 3.0))),
     "T.float32(1) / (T.float32(2) + T.float32(3))"),
    (Not(Or(EQ(IntImm("int32", 1), IntImm("int32", 2)), IntImm("bool", 1))),
     "not (1 == 2 or True)"),
    (And(Or(IntImm("bool", 0), IntImm("bool", 1)), IntImm("bool", 1)), "(False or True) and True"),
    (LT(LT(IntImm("int32", 1), IntImm("int32", 2)), IntImm("bool", 1)), "(1 < 2) < True"),
])
def test_constants_and_calls(e, expected):
    assert _expr_text(e) == expected
    out = Buffer("out", (1,), e.dtype)
    assert structural_roundtrip(PrimFunc("f", (out,), BufferStore(out, e, (IntImm("int32", 0),))))


def test_vectors_ramp_broadcast():
    A = Buffer("A", (16,))
    i = Var("i")
    st = BufferStore(A, Broadcast(FloatImm("float32", 1.0), 4), (Ramp(i * 4, IntImm("int32", 1), 4),))
    f = PrimFunc("f", (A,), For(i, 0, 4, ForKind.SERIAL, st))
    assert "A[T.Ramp(i * 4, 1, 4)] = T.Broadcast(T.float32(1), 4)" in script(f)
    assert structural_roundtrip(f)


def test_if_else_elif_evaluate_let():
    A = Buffer("A", (4,), "int32")
    i, x, y = Var("i"), Var("x"), Var("y", "int64")
    inner = IfThenElse(LT(i, IntImm("int32", 2)), BufferStore(A, IntImm("int32", 2), (i,)))
    body = For(i, 0, 4, ForKind.SERIAL, seq(
        IfThenElse(LT(i, IntImm("int32", 1)), BufferStore(A, IntImm("int32", 1), (i,)), inner),
        LetStmt(x, i + 1, BufferStore(A, x, (i,))),
        Evaluate(StringImm("hello")),
        LetStmt(y, Cast("int64", i), Evaluate(y))))
    f = PrimFunc("f", (A,), body)
    text = script(f)
    assert "        if i < 1:\n            A[i] = 1\n        elif i < 2:\n" in text
    assert "with T.LetStmt(i + 1) as x:" in text     # not last: keeps its own body
    assert '        T.evaluate("hello")' in text
    assert '        y: T.int64 = T.Cast("int64", i)\n        T.evaluate(y)' in text
    assert structural_roundtrip(f)


def test_same_names_are_made_distinct_and_scoped():
    A = Buffer("A", (4, 4))
    i1, i2, i3 = Var("i"), Var("i"), Var("i")
    inner = For(i2, 0, 4, ForKind.SERIAL, BufferStore(A, FloatImm("float32", 0), (i1, i2)))
    body = seq(For(i1, 0, 4, ForKind.SERIAL, inner),
               For(i3, 0, 4, ForKind.SERIAL, BufferStore(A, FloatImm("float32", 1), (i3, i3))))
    text = PrimFunc("f", (A,), body).script()
    assert "for i, i_1 in T.grid(4, 4):" in text
    assert "A[i, i_1] = T.float32(0)" in text
    # the sibling loop's scope is separate: the name is reused
    assert "    for i in T.serial(4):\n        A[i, i] = T.float32(1)" in text
    assert structural_roundtrip(PrimFunc("f", (A,), body))


def test_invalid_and_reserved_names_are_sanitized():
    A = Buffer("A", (4,))
    v1, v2, v3 = Var("i.outer"), Var("T"), Var("for")
    body = For(v1, 0, 2, ForKind.PARALLEL, For(v2, 0, 2, ForKind.PARALLEL, For(
        v3, 0, 1, ForKind.PARALLEL, BufferStore(A, FloatImm("float32", 0), (v1 + v2 + v3,)))))
    text = PrimFunc("f", (A,), body).script()
    assert "for i_outer in T.parallel(2):" in text
    assert "for T_1 in T.parallel(2):" in text
    assert "for for_ in T.parallel(1):" in text
    assert structural_roundtrip(PrimFunc("f", (A,), body))


def test_explicit_root_block_when_not_trivial():
    A = Buffer("A", (4,))
    root = Block((), (), (), "root",
                 BufferStore(A, FloatImm("float32", 0), (IntImm("int32", 0),)),
                 None, (), (("attr", 1),))
    f = PrimFunc("f", (A,), BlockRealize((), TRUE, root))
    text = script(f)
    assert 'with T.block("root"):' in text and "# with" not in text
    assert structural_roundtrip(f)


def test_repr_node():
    mod = mm_relu()
    f = mod["mm_relu"]
    loop = f.body.block.body.seq[0]
    assert repr(loop).startswith("for i, j, k in T.grid(128, 128, 128):")
    i = Var("i")
    assert repr(i * 4 + 1) == "i * 4 + 1"
    assert repr(FloatImm("float32", 2.0)) == "T.float32(2)"
    assert repr(f.params[0]) == 'A: T.Buffer((128, 128), "float32")'
    assert repr(f).startswith("@T.prim_func")
    assert "\n" not in repr(Select(LT(i, 1), i, i))
    assert repr(Range(0, 4)) == "Range(0, 4)"

    class Weird:  # a foreign object inside a node must not make repr raise
        pass
    assert isinstance(repr_node(Weird()), str)
    bad = BufferStore.__new__(BufferStore)  # a broken node (no fields set)
    assert isinstance(repr(bad), str)


def test_script_rejects_non_ir_objects():
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        script(42)


def test_buffer_options_allocate_and_let_expression():
    from engine.ir import Allocate, Let
    A = Buffer("A", (4, 4), "float32", "global", strides=(8, 1), elem_offset=2, align=16)
    B = Buffer("B", (4,), "int32", "local")
    S = Buffer("S", (4,), "float32", "local")
    x, i = Var("x"), Var("i")
    body = For(i, 0, 4, ForKind.SERIAL, Allocate(S, seq(
        BufferStore(S, FloatImm("float32", 1), (i,)),
        BufferStore(A, S[i] + Let(x, i + 1, Cast("float32", x * x)), (i, i)))))
    f = PrimFunc("f", (A, B), body)
    text = script(f)
    assert ('def f(A: T.Buffer((4, 4), "float32", strides=(8, 1), elem_offset=2, align=16), '
            'B: T.Buffer((4,), "int32", scope="local")):') in text
    assert 'with T.allocate((4,), "float32", scope="local") as S:' in text
    assert 'A[i, i] = S[i] + T.Let(x, i + 1, T.Cast("float32", x * x))' in text
    assert structural_roundtrip(f)


def test_limits_and_empty_module():
    mod = parse('''
@T.prim_func
def g(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int8")):
    A[0] = T.max_value("float32")
    A[2] = T.infinity("float32")
    B[0] = T.min_value("int8")
''')
    text = script(mod)
    assert "A[0] = T.float32(3.4028234663852886e+38)" in text
    assert 'A[2] = T.float32("inf")' in text
    assert "B[0] = T.int8(-128)" in text
    assert script(IRModule(())).endswith("class Module:\n    pass\n")
