"""Lowering: blocks -> loops, init placement, flattening, simplification, legalisation."""
import numpy as np
import pytest

import engine
from engine.ir import (Buffer, BufferStore, Call, For, ForKind, IfThenElse, PrimFunc, Var,
                       collect, const, Evaluate)
from engine.ir import expr as E
from engine.lower import BuildError, lower
from engine.arith.lower_simplify import lower_simplify

from test_lower_ir_helpers import block, elementwise, loop, mm_relu, reduce_sum, root


def test_lowered_form_is_flat_and_marked():
    f = lower(mm_relu(16))
    assert f.attr("lowered") is True
    assert [p.shape[0].value for p in f.params] == [256, 256, 256]
    assert [p.shape for p in f.attr("lowered_params")][0][0].value == 16
    for st in collect(f.body, BufferStore):
        assert len(st.indices) == 1
    # blocks are gone
    from engine.ir import Block, BlockRealize
    assert not collect(f.body, (Block, BlockRealize))


def test_init_is_hoisted_out_of_innermost_reduction():
    f = lower(mm_relu(16))
    assert not collect(f.body, IfThenElse), "init should be hoisted, not guarded by an if"
    rt = engine.build(mm_relu(16))
    a, b = np.random.rand(16, 16).astype("float32"), np.random.rand(16, 16).astype("float32")
    c = np.full((16, 16), 7, "float32")
    rt["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5)


def test_init_guard_when_reduction_is_not_innermost():
    # order i, k, j (reduction loop outside a spatial loop): init must be an if on k == 0
    n = 8
    A, B, C = Buffer("A", (n, n)), Buffer("B", (n, n)), Buffer("C", (n, n))
    i, k, j = Var("i"), Var("k"), Var("j")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    b = block("Y", [(vi, n, "S"), (vj, n, "S"), (vk, n, "R")], (i, j, k),
              BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
              init=BufferStore(C, E.FloatImm("float32", 0.0), (vi, vj)))
    f = PrimFunc("mm", (A, B, C), root(loop(i, n, loop(k, n, loop(j, n, b)))))
    lf = lower(f)
    assert collect(lf.body, IfThenElse)
    a, bb = np.random.rand(n, n).astype("float32"), np.random.rand(n, n).astype("float32")
    c = np.full((n, n), 3, "float32")
    engine.build(f)["mm"](a, bb, c)
    np.testing.assert_allclose(c, a @ bb, rtol=1e-5)


def test_init_with_split_reduction_and_predicate():
    f = reduce_sum(3, 10, split_k=4)
    x = np.random.rand(3, 10).astype("float32")
    out = np.full(3, 5, "float32")
    engine.build(f)["rsum"](x, out)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)


def test_predicate_becomes_if():
    f = elementwise((10,), ["float32"], "float32", lambda x: x + E.FloatImm("float32", 1.0),
                    split=(0, 4))
    lf = lower(f)
    assert collect(lf.body, IfThenElse)


def test_explicit_strides_and_elem_offset_flatten():
    X = Buffer("X", (3, 4), "float32", strides=(8, 1))
    Y = Buffer("Y", (3, 4), "float32")
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    b = block("B", [(vi, 3, "S"), (vj, 4, "S")], (i, j),
              BufferStore(Y, X[vi, vj] * E.FloatImm("float32", 2.0), (vi, vj)))
    f = PrimFunc("strided", (X, Y), root(loop(i, 3, loop(j, 4, b))))
    lf = lower(f)
    assert lf.params[0].shape[0].value == 2 * 8 + 3 + 1
    base = np.arange(24, dtype="float32").reshape(3, 8)
    x = base[:, :4]
    y = np.zeros((3, 4), "float32")
    engine.build(f)["strided"](x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_floordiv_floormod_simplify_with_loop_ranges():
    i, j = Var("i"), Var("j")
    e = (i * 16 + j) // 16
    st = For(i, const(0), const(8), ForKind.SERIAL,
             For(j, const(0), const(16), ForKind.SERIAL,
                 BufferStore(Buffer("Z", (256,), "int32"), e + (i * 16 + j) % 16, (i * 16 + j,))))
    out = lower_simplify(st)
    stores = collect(out, BufferStore)
    assert not collect(stores[0].value, (E.FloorDiv, E.FloorMod))


def test_floordiv_not_simplified_without_range():
    i, j = Var("i"), Var("j")
    out = lower_simplify((i * 16 + j) // 16)
    assert collect(out, E.FloorDiv), "j has no known range: j // 16 must stay"


def test_unsupported_intrinsic_names_block():
    f = elementwise((4,), ["float32"], "float32", lambda x: Call("float32", "foo", (x,)))
    with pytest.raises(BuildError, match=r"unsupported intrinsic 'foo' in block 'B'"):
        lower(f)


def test_wrong_intrinsic_arity():
    f = elementwise((4,), ["float32"], "float32", lambda x: Call("float32", "exp", (x, x)))
    with pytest.raises(BuildError, match="exp"):
        engine.build(f)


def test_symbolic_shape_is_refused():
    n = Var("n")
    X = Buffer("X", (n,), "float32")
    i, vi = Var("i"), Var("vi")
    b = block("B", [(vi, 4, "S")], (i,), BufferStore(X, E.FloatImm("float32", 1.0), (vi,)))
    f = PrimFunc("sym", (X,), root(loop(i, 4, b)))
    with pytest.raises(BuildError, match="symbolic shape"):
        lower(f)


def test_vectorize_legalisation_and_fallback():
    f = elementwise((4, 16), ["float32"], "float32", lambda x: x * E.FloatImm("float32", 3.0),
                    kinds=[ForKind.SERIAL, ForKind.VECTORIZED])
    lf = lower(f)
    assert collect(lf.body, E.Ramp)
    assert not any(isinstance(x, For) and x.kind is ForKind.VECTORIZED
                   for x in collect(lf.body, For))
    # reduction over a vectorized loop: not vectorizable -> annotated serial loop
    g = reduce_sum(2, 8, split_k=4, kinds=[ForKind.SERIAL, ForKind.SERIAL, ForKind.VECTORIZED])
    lg = lower(g)
    anns = [dict(x.annotations) for x in collect(lg.body, For)]
    assert any("vectorize_fallback" in a for a in anns)
    x = np.random.rand(2, 8).astype("float32")
    out = np.zeros(2, "float32")
    rt = engine.build(g)
    rt["rsum"](x, out)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
    assert rt.compile_stats["vectorize_fallbacks"] >= 1
    assert "vectorize fallback" in rt.get_source("ll")


def test_large_vectorized_extent_is_chunked():
    f = elementwise((100,), ["float32"], "float32", lambda x: x + E.FloatImm("float32", 1.0),
                    kinds=[ForKind.VECTORIZED])
    lf = lower(f)
    ramps = collect(lf.body, E.Ramp)
    assert ramps and max(r.lanes for r in ramps) <= 64
    x = np.random.rand(100).astype("float32")
    y = np.zeros(100, "float32")
    engine.build(f)["ew"](x, y)
    np.testing.assert_allclose(y, x + 1)


def test_unroll_expands_constant_loops():
    f = elementwise((3, 5), ["int32"], "int32", lambda x: x * 2,
                    kinds=[ForKind.SERIAL, ForKind.UNROLLED])
    lf = lower(f)
    assert not any(x.kind is ForKind.UNROLLED for x in collect(lf.body, For))
    assert len(collect(lf.body, BufferStore)) == 5
    x = np.arange(15, dtype="int32").reshape(3, 5)
    y = np.zeros((3, 5), "int32")
    engine.build(f)["ew"](x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_unroll_loop_reaching_codegen_is_marked_for_llvm_full_unrolling():
    f = elementwise((3, 5), ["int32"], "int32", lambda x: x * 2,
                    kinds=[ForKind.SERIAL, ForKind.UNROLLED])
    lf = lower(f, legalize=False)
    unrolled = [x for x in collect(lf.body, For) if x.kind is ForKind.UNROLLED]
    assert len(unrolled) == 1 and unrolled[0].extent.value == 5
    mod = engine.build(lf, lowered=True, cache=False)
    ll = mod.get_source("ll")
    assert ll.count('!"llvm.loop.unroll.full"') == 1 and "distinct !{" in ll
    # LLVM expanded it: no loop is left around the 5 stores of a row
    opt = mod.get_source("ll-opt")
    assert opt.count("store i32") == 5 or "store <" in opt
    x = np.arange(15, dtype="int32").reshape(3, 5)
    y = np.zeros((3, 5), "int32")
    mod["ew"](x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_expand_unrolled_gives_one_copy_per_iteration():
    from engine.lower.legalize import expand_unrolled
    f = elementwise((3, 5), ["int32"], "int32", lambda x: x * 2,
                    kinds=[ForKind.SERIAL, ForKind.UNROLLED])
    inner = [x for x in collect(lower(f, legalize=False).body, For)
             if x.kind is ForKind.UNROLLED][0]
    out = expand_unrolled(inner)
    assert not collect(out, For) and len(collect(out, BufferStore)) == 5


def test_unroll_with_a_symbolic_extent_becomes_a_serial_loop_with_a_note():
    from engine.lower.legalize import unroll_loop
    n = E.Var("n", "int32")
    loop = For(E.Var("i", "int32"), E.IntImm("int32", 0), n, ForKind.UNROLLED,
               Evaluate(E.IntImm("int32", 0)))
    out = unroll_loop(loop)
    assert out.kind is ForKind.SERIAL
    assert dict(out.annotations)["unroll_skipped"] == "the extent is not a constant"


def test_lower_is_idempotent_and_accepts_irmodule():
    from engine.ir import IRModule
    f = mm_relu(8)
    lf = lower(f)
    assert lower(lf) is lf
    m = lower(IRModule.from_funcs(f))
    assert m["mm_relu"].attr("lowered")


@pytest.mark.parametrize("kind", [ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL])
def test_extent_one_loops(kind):
    f = elementwise((3, 1), ["float32"], "float32", lambda x: x + E.FloatImm("float32", 2.0),
                    kinds=[ForKind.SERIAL, kind])
    x = np.random.rand(3, 1).astype("float32")
    y = np.zeros((3, 1), "float32")
    engine.build(f)["ew"](x, y)
    np.testing.assert_allclose(y, x + 2)


def test_init_not_hoisted_over_unused_inner_loop():
    # for i, k, r: Y[i] (init at k == 0) += X[i, k]; r is used by no axis, so the init runs
    # again for every r at k == 0 (literal TensorIR semantics, as the interpreter does)
    n, m, rr = 2, 3, 2
    X, Y = Buffer("X", (n, m)), Buffer("Y", (n,))
    i, k, r = Var("i"), Var("k"), Var("r")
    vi, vk = Var("vi"), Var("vk")
    b = block("S", [(vi, n, "S"), (vk, m, "R")], (i, k),
              BufferStore(Y, Y[vi] + X[vi, vk], (vi,)),
              init=BufferStore(Y, E.FloatImm("float32", 0.0), (vi,)))
    f = PrimFunc("odd", (X, Y), root(loop(i, n, loop(k, m, loop(r, rr, b)))))
    x = np.random.rand(n, m).astype("float32")
    y = np.zeros(n, "float32")
    engine.build(f)["odd"](x, y)
    y_ref = np.zeros(n, "float32")
    engine.interpret(f, "odd", x.copy(), y_ref)
    np.testing.assert_allclose(y, y_ref, rtol=1e-6)
