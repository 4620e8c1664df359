"""engine.te: the tensor-expression frontend produces TVM-shaped TensorIR."""
import numpy as np
import pytest

import engine
from engine import te
from engine.ir import (Block, BlockRealize, Buffer, BufferStore, For, ForKind, IntImm, IterType,
                       IterVar, Max, PrimFunc, Range, Var, structural_equal)
from engine.ir import expr as E

from test_script_irgen import SEED_PRINTED


def course_mm_relu(n=128):
    """The course's mm_relu, hand-built with engine.ir (the 'Module' listing of chapter 2)."""
    A = Buffer("A", (n, n), "float32")
    B = Buffer("B", (n, n), "float32")
    C = Buffer("C", (n, n), "float32")
    Y = Buffer("Y", (n, n), "float32")

    def dom():
        return Range(IntImm("int32", 0), IntImm("int32", n))

    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    from engine.ir import BufferRegion
    y_block = Block(
        iter_vars=(IterVar(vi, dom(), IterType.SPATIAL), IterVar(vj, dom(), IterType.SPATIAL),
                   IterVar(vk, dom(), IterType.REDUCE)),
        reads=(BufferRegion(A, (Range(vi, 1), Range(vk, 1))),
               BufferRegion(B, (Range(vk, 1), Range(vj, 1)))),
        writes=(BufferRegion(Y, (Range(vi, 1), Range(vj, 1))),),
        name_hint="Y",
        body=BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(Y, E.FloatImm("float32", 0.0), (vi, vj)))
    y_nest = For(i, 0, n, ForKind.SERIAL, For(j, 0, n, ForKind.SERIAL, For(
        k, 0, n, ForKind.SERIAL, BlockRealize((i, j, k), IntImm("bool", 1), y_block))))
    i2, j2, vi2, vj2 = Var("i"), Var("j"), Var("vi"), Var("vj")
    c_block = Block(
        iter_vars=(IterVar(vi2, dom(), IterType.SPATIAL), IterVar(vj2, dom(), IterType.SPATIAL)),
        reads=(BufferRegion(Y, (Range(vi2, 1), Range(vj2, 1))),),
        writes=(BufferRegion(C, (Range(vi2, 1), Range(vj2, 1))),),
        name_hint="C",
        body=BufferStore(C, Max(Y[vi2, vj2], E.FloatImm("float32", 0.0)), (vi2, vj2)))
    c_nest = For(i2, 0, n, ForKind.SERIAL, For(j2, 0, n, ForKind.SERIAL, BlockRealize(
        (i2, j2), IntImm("bool", 1), c_block)))
    from engine.ir import SeqStmt
    root = Block(iter_vars=(), reads=(), writes=(), name_hint="root",
                 body=SeqStmt((y_nest, c_nest)), alloc_buffers=(Y,))
    return PrimFunc("mm_relu", (A, B, C), BlockRealize((), IntImm("bool", 1), root),
                    attrs=(("global_symbol", "mm_relu"), ("tir.noalias", True)))


def te_mm_relu(n=128):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), "k")
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, n), lambda i, j: te.max(Y[i, j], 0), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


def _blocks(func):
    out = []

    def fn(n):
        if isinstance(n, Block) and n.name_hint != "root":
            out.append(n)
    from engine.ir import post_order_visit
    post_order_visit(func.body, fn)
    return out


def _loops(stmt):
    out = []
    while isinstance(stmt, For):
        out.append(stmt)
        stmt = stmt.body
    return out, stmt


def test_mm_relu_is_structurally_the_course_program():
    assert structural_equal(te_mm_relu(), course_mm_relu())
    assert structural_equal(te_mm_relu(16), course_mm_relu(16))
    assert not structural_equal(te_mm_relu(16), course_mm_relu(32))


def test_mm_relu_names_attrs_and_loops_follow_the_course():
    f = te_mm_relu(32)
    assert f.name == "mm_relu"
    assert f.attr("global_symbol") == "mm_relu" and f.attr("tir.noalias") is True
    assert [b.name for b in f.params] == ["A", "B", "C"]
    root = f.body.block
    assert root.name_hint == "root" and [b.name for b in root.alloc_buffers] == ["Y"]
    y_nest, c_nest = root.body.seq
    loops, realize = _loops(y_nest)
    assert [lp.loop_var.name for lp in loops] == ["i", "j", "k"]
    assert all(lp.kind is ForKind.SERIAL and lp.extent.value == 32 for lp in loops)
    blk = realize.block
    assert blk.name_hint == "Y"
    assert [iv.var.name for iv in blk.iter_vars] == ["vi", "vj", "vk"]
    assert [iv.iter_type.value for iv in blk.iter_vars] == ["S", "S", "R"]
    assert all(v is lp.loop_var for v, lp in zip(realize.iter_values, loops))
    # update written old-value first: Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    upd = blk.body.value
    assert isinstance(upd, E.Add) and isinstance(upd.a, E.BufferLoad)
    assert upd.a.buffer is root.alloc_buffers[0]
    assert isinstance(blk.init.value, E.FloatImm) and blk.init.value.value == 0.0
    c_loops, c_realize = _loops(c_nest)
    assert [lp.loop_var.name for lp in c_loops] == ["i", "j"]
    assert isinstance(c_realize.block.body.value, Max)


def test_printed_mm_relu_parses_back_to_the_same_program():
    from engine import script
    parsed = script.parse(SEED_PRINTED)
    func = parsed["mm_relu"]
    assert structural_equal(func, te_mm_relu())
    text = engine.IRModule.from_funcs(te_mm_relu()).script()
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, j, k])' in text
    assert "T.reads(A[vi, vk], B[vk, vj])" in text
    assert "Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]" in text
    assert "C[vi, vj] = T.max(Y[vi, vj], T.float32(0))" in text


# ----------------------------------------------------------------------------- regions
def _single_block(func):
    (blk,) = _blocks(func)
    return blk


def _region(r):
    out = []
    for rg in r.region:
        out.append((rg.min, rg.extent.value if isinstance(rg.extent, IntImm) else rg.extent))
    return r.buffer.name, out


def test_window_accesses_are_merged_into_one_range():
    A = te.placeholder((10,), name="A")
    B = te.compute((8,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    blk = _single_block(te.create_prim_func([A, B]))
    (r,) = blk.reads
    name, [(lo, ext)] = _region(r)
    assert name == "A" and lo is blk.iter_vars[0].var and ext == 3
    (w,) = blk.writes
    assert _region(w)[1] == [(blk.iter_vars[0].var, 1)]


def test_window_with_negative_offsets_starts_at_the_smallest():
    A = te.placeholder((10,), name="A")
    B = te.compute((8,), lambda i: A[i + 2] - A[i + 1], name="B")
    blk = _single_block(te.create_prim_func([A, B]))
    (lo, ext), = _region(blk.reads[0])[1]
    assert isinstance(lo, E.Add) and lo.a is blk.iter_vars[0].var and lo.b.value == 1
    assert ext == 2


def test_sum_of_iter_vars_is_a_point_access():
    A = te.placeholder((12,), name="A")
    W = te.placeholder((3,), name="W")
    r = te.reduce_axis((0, 3), name="r")
    B = te.compute((10,), lambda i: te.sum(A[i + r] * W[r], axis=r), name="B")
    blk = _single_block(te.create_prim_func([A, W, B]))
    (lo, ext), = _region(blk.reads[0])[1]
    vi, vr = (iv.var for iv in blk.iter_vars)
    assert isinstance(lo, E.Add) and lo.a is vi and lo.b is vr and ext == 1
    assert [r.buffer.name for r in blk.reads] == ["A", "W"]  # output not among reads


def test_unrelated_indices_fall_back_to_constant_bounds():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + A[j, i], name="B")
    blk = _single_block(te.create_prim_func([A, B]))
    (r,) = blk.reads
    assert [(lo.value, ext) for lo, ext in _region(r)[1]] == [(0, 8), (0, 8)]


def test_strided_accesses_use_interval_bounds():
    A = te.placeholder((16,), name="A")
    B = te.compute((8,), lambda i: A[i * 2] + A[i], name="B")
    blk = _single_block(te.create_prim_func([A, B]))
    [(lo, ext)] = _region(blk.reads[0])[1]
    assert (lo.value, ext) == (0, 15)


def test_infer_regions_relaxes_loops_inside_a_block():
    A = Buffer("A", (4, 16), "float32")
    B = Buffer("B", (4,), "float32")
    vi, k = Var("vi"), Var("k")
    iv = IterVar(vi, Range(0, 4), IterType.SPATIAL)
    body = For(k, 0, 16, ForKind.SERIAL, BufferStore(B, B[vi] + A[vi, k], (vi,)))
    reads, writes = te.infer_block_regions(body, (iv,))
    assert [r.buffer.name for r in reads] == ["B", "A"]
    (lo0, e0), (lo1, e1) = _region(reads[1])[1]
    assert lo0 is vi and e0 == 1 and (lo1.value, e1) == (0, 16)


# ----------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "uint8"])
def test_reduction_identities(dtype):
    A = te.placeholder((4, 5), dtype, name="A")
    k = te.reduce_axis((0, 5), "k")
    outs = {kind: te.compute((4,), lambda i, kind=kind: getattr(te, kind)(A[i, k], axis=k),
                             name=f"R{kind}") for kind in ("sum", "max", "min")}
    for kind, t in outs.items():
        blk = _single_block(te.create_prim_func([A, t]))
        init = blk.init.value
        if dtype.startswith("float"):
            info = np.finfo(dtype)
            want = {"sum": 0.0, "max": float(info.min), "min": float(info.max)}[kind]
            assert isinstance(init, E.FloatImm) and init.value == want
        else:
            info = np.iinfo(dtype)
            want = {"sum": 0, "max": int(info.min), "min": int(info.max)}[kind]
            assert isinstance(init, IntImm) and init.value == want
        assert init.dtype == dtype
        combiner = blk.body.value
        assert type(combiner) is {"sum": E.Add, "max": E.Max, "min": E.Min}[kind]
        assert isinstance(combiner.a, E.BufferLoad) and combiner.a.buffer.name == f"R{kind}"


def test_reductions_compute_the_right_values():
    rng = np.random.default_rng(1)
    A = te.placeholder((3, 7), name="A")
    k = te.reduce_axis((0, 7), "k")
    S = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="S")
    Mx = te.compute((3,), lambda i: te.max(A[i, k], axis=k), name="Mx")
    Mn = te.compute((3,), lambda i: te.min(A[i, k], axis=k), name="Mn")
    f = te.create_prim_func([A, S, Mx, Mn], name="red")
    a = rng.uniform(-5, 5, (3, 7)).astype("float32")
    outs = [np.zeros(3, "float32") for _ in range(3)]
    engine.interpret(f, "red", a, *outs)
    np.testing.assert_allclose(outs[0], a.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(outs[1], a.max(1))
    np.testing.assert_array_equal(outs[2], a.min(1))


def test_multi_axis_reduction_with_init_and_where():
    A = te.placeholder((2, 3, 4), name="A")
    bias = te.placeholder((2,), name="bias")
    r1 = te.reduce_axis((0, 3), "r1")
    r2 = te.reduce_axis((0, 4), "r2")
    S = te.compute((2,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2], init=bias[i],
                                          where=r2 > r1), name="S")
    f = te.create_prim_func([A, bias, S])
    blk = _single_block(f)
    assert [iv.var.name for iv in blk.iter_vars] == ["vi", "vr1", "vr2"]
    assert [iv.iter_type for iv in blk.iter_vars] == [IterType.SPATIAL, IterType.REDUCE,
                                                      IterType.REDUCE]
    a = np.arange(24, dtype="float32").reshape(2, 3, 4)
    b = np.array([100, 200], "float32")
    s = np.zeros(2, "float32")
    engine.interpret(f, "main", a, b, s)
    mask = np.arange(4)[None, :] > np.arange(3)[:, None]
    np.testing.assert_array_equal(s, b + (a * mask).sum((1, 2)))


def test_elementwise_max_min_and_intrinsics():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: te.min(te.max(A[i], -1.0), 1.0) + te.exp(A[i]) * 0
                   + te.if_then_else(i < 3, te.sqrt(te.abs(A[i])), te.tanh(A[i])), name="B")
    f = te.create_prim_func([A, B])
    a = np.linspace(-2, 2, 6).astype("float32")
    b = np.zeros(6, "float32")
    engine.interpret(f, "main", a, b)
    want = np.clip(a, -1, 1) + np.where(np.arange(6) < 3, np.sqrt(np.abs(a)), np.tanh(a))
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_loop_names_come_from_the_lambda_and_are_deduplicated():
    A = te.placeholder((4, 4), name="A")
    row = te.reduce_axis((0, 4), name="row")
    B = te.compute((4,), lambda row_: te.sum(A[row_, row], axis=row), name="B")
    f = te.create_prim_func([A, B])
    loops, _ = _loops(f.body.block.body)
    assert [lp.loop_var.name for lp in loops] == ["row_", "row"]
    # a reduce axis named like the lambda argument gets a suffix
    k = te.reduce_axis((0, 4), name="i")
    C = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="C")
    loops, realize = _loops(te.create_prim_func([A, C]).body.block.body)
    assert [lp.loop_var.name for lp in loops] == ["i", "i_1"]
    assert [iv.var.name for iv in realize.block.iter_vars] == ["vi", "vi_1"]
    # *args lambdas are named i0, i1, ...
    D = te.compute((2, 2), lambda *ax: A[ax[0], ax[1]], name="D")
    loops, _ = _loops(te.create_prim_func([A, D]).body.block.body)
    assert [lp.loop_var.name for lp in loops] == ["i0", "i1"]


def test_stages_are_in_dependency_order_and_intermediates_allocated():
    A = te.placeholder((4,), name="A")
    X = te.compute((4,), lambda i: A[i] * 2, name="X")
    Y = te.compute((4,), lambda i: X[i] + A[i], name="Y")
    Z = te.compute((4,), lambda i: Y[i] + X[i], name="Z")
    f = te.create_prim_func([A, Z])
    assert [b.name_hint for b in _blocks(f)] == ["X", "Y", "Z"]
    assert [b.name for b in f.body.block.alloc_buffers] == ["X", "Y"]
    # an intermediate listed as an argument becomes a parameter
    g = te.create_prim_func([A, X, Z])
    assert [b.name for b in g.params] == ["A", "X", "Z"]
    assert [b.name for b in g.body.block.alloc_buffers] == ["Y"]
    # each call makes fresh buffers
    assert f.params[0] is not g.params[0]


def test_with_attr_keeps_the_function():
    f = te_mm_relu(8).with_attr("global_symbol", "other")
    assert f.attr("global_symbol") == "other" and f.attr("tir.noalias") is True


# ----------------------------------------------------------------------------- errors
def test_nested_reduction_is_refused():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    with pytest.raises(te.TeError, match="whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1, name="B")


def test_missing_placeholder_is_named():
    A = te.placeholder((4,), name="A")
    W = te.placeholder((4,), name="W")
    B = te.compute((4,), lambda i: A[i] * W[i], name="B")
    with pytest.raises(te.TeError, match="placeholder 'W' is read by B"):
        te.create_prim_func([A, B])


def test_arity_and_index_count_errors():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(te.TeError, match="takes 1 argument"):
        te.compute((4, 4), lambda i: A[i, i], name="B")
    with pytest.raises(te.TeError, match="2 dimension"):
        te.compute((4,), lambda i: A[i], name="B")
    with pytest.raises(te.TeError, match="integers"):
        te.compute((4,), lambda i: A[i, 1.5], name="B")


def test_reduce_axis_must_be_listed():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    j = te.reduce_axis((0, 4), "j")
    with pytest.raises(te.TeError, match="'k'"):
        te.compute((4,), lambda i: te.sum(A[i, k] + A[j, i], axis=j), name="B")
    with pytest.raises(te.TeError, match="axis="):
        te.compute((4,), lambda i: te.sum(A[i, k]), name="B")
    with pytest.raises(te.TeError, match="empty"):
        te.reduce_axis((3, 3), "e")


def test_bad_shapes_and_names():
    with pytest.raises(te.TeError, match="at least 1"):
        te.placeholder((4, 0), name="A")
    with pytest.raises(te.TeError, match="identifier"):
        te.placeholder((4,), name="not a name")
    with pytest.raises(te.TeError, match="dtype"):
        te.placeholder((4,), "float33", name="A")
    A = te.placeholder((4,), name="A")
    with pytest.raises(te.TeError, match="te.compute"):
        A + 1
    with pytest.raises(te.TeError, match="nothing to compute"):
        te.create_prim_func([A])


def test_const_all_any_and_value_limits():
    assert te.const(1).dtype == "int32" and te.const(1.5).dtype == "float32"
    assert te.const(2, "float64").dtype == "float64"
    assert te.max_value("int8").value == 127 and te.min_value("float32").value < -3e38
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: te.if_then_else(te.all(i >= 1, i < 4), A[i], 0.0)
                   + te.if_then_else(te.any(i == 0, i == 5), 10.0, 0.0), name="B")
    f = te.create_prim_func([A, B])
    b = np.zeros(6, "float32")
    engine.interpret(f, None, np.arange(6, dtype="float32"), b)
    np.testing.assert_array_equal(b, [10, 1, 2, 3, 0, 10])
    with pytest.raises(te.TeError, match="at least one"):
        te.all()


def test_elementwise_max_accepts_a_number_first():
    A = te.placeholder((3,), name="A")
    e = te.max(0, A[0])
    assert isinstance(e, Max) and isinstance(e.a, E.FloatImm) and e.a.dtype == "float32"
    with pytest.raises(te.TeError, match="only apply to reductions"):
        te.max(A[0], 1.0, init=0.0)
