"""LegalizeOps, FuseOps, FuseTIR, DeadCodeElimination: the passes keep results equal (run
in the virtual machine before and after), and make the programs TVM makes."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import engine
from engine import relax
from engine.ir.function import PrimFunc
from engine.models.course import mlp_module
from engine.relax.expr import (Call, DataflowBlock, DataflowVar, Function, Op, SeqExpr, ShapeExpr,
                               Var, VarBinding)
from engine.relax.struct_info import TensorStructInfo
from engine.relax.transform import (DeadCodeElimination, FuseOps, FuseTIR, LegalizeOps)
from engine.relax.transform.op_pattern import (BROADCAST, COMM_REDUCE, ELEMWISE, INJECTIVE,
                                               OUT_EWISE_FUSABLE, op_pattern)


def T(*shape):
    return TensorStructInfo(shape, "float32")


def _op(name, *args, si, **attrs):
    od = relax.op.get_op(name)
    norm = relax.op.normalize_attrs(od, attrs)
    return Call(Op(name), args, norm, (), si)


def _high_level_mlp(batch=2):
    """x @ w0 + b0 -> relu -> @ w1 + b1 -> softmax, with R.* operators."""
    x, w0, b0 = Var("x", T(batch, 16)), Var("w0", T(16, 8)), Var("b0", T(8))
    w1, b1 = Var("w1", T(8, 4)), Var("b1", T(4))
    lv = [DataflowVar(f"lv{i}", si) for i, si in enumerate(
        [T(batch, 8), T(batch, 8), T(batch, 8), T(batch, 4), T(batch, 4)])]
    out = Var("out", T(batch, 4))
    bs = [VarBinding(lv[0], _op("relax.matmul", x, w0, si=lv[0].struct_info)),
          VarBinding(lv[1], _op("relax.add", lv[0], b0, si=lv[1].struct_info)),
          VarBinding(lv[2], _op("relax.nn.relu", lv[1], si=lv[2].struct_info)),
          VarBinding(lv[3], _op("relax.matmul", lv[2], w1, si=lv[3].struct_info)),
          VarBinding(lv[4], _op("relax.add", lv[3], b1, si=lv[4].struct_info)),
          VarBinding(out, _op("relax.nn.softmax", lv[4], si=out.struct_info, axis=-1))]
    main = Function("main", (x, w0, b0, w1, b1), SeqExpr((DataflowBlock(tuple(bs)),), out),
                    out.struct_info, (("global_symbol", "main"),))
    return engine.IRModule((("main", main),))


def _inputs(mod, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.struct_info.shape).astype("float32")
            for p in mod["main"].params]


def _run(mod, args):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"))
    return np.asarray(vm["main"](*args))


def _reference(args):
    x, w0, b0, w1, b1 = [a.astype("float64") for a in args]
    z = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_legalize_ops_lowers_every_operator_to_call_tir_and_keeps_results():
    mod = _high_level_mlp()
    args = _inputs(mod)
    legal = LegalizeOps()(mod)
    assert sorted(n for n, f in legal.items() if isinstance(f, PrimFunc)) == [
        "add", "add1", "matmul", "matmul1", "relu", "softmax"]
    for b in legal["main"].bindings():
        assert b.value.op.name == "relax.call_tir"
    np.testing.assert_allclose(_run(legal, args), _reference(args), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(legal, args), _run(mod, args), rtol=1e-5, atol=1e-6)


def test_fuse_ops_then_fuse_tir_fuses_elementwise_consumers_and_keeps_results():
    mod = LegalizeOps()(_high_level_mlp())
    args = _inputs(mod)
    fused = FuseOps()(mod)
    prim = {n: f for n, f in fused.items() if isinstance(f, Function) and f.attr("Primitive")}
    assert sorted(prim) == ["fused_matmul1_add1", "fused_matmul_add_relu"]
    np.testing.assert_allclose(_run(FuseTIR()(fused), args), _reference(args), rtol=1e-5,
                               atol=1e-6)
    tir = FuseTIR()(fused)
    assert sorted(tir.names()) == ["fused_matmul1_add1", "fused_matmul_add_relu", "main",
                                   "softmax"]
    f = tir["fused_matmul_add_relu"]
    assert [p.name for p in f.params][:3] == ["x", "w0", "b0"]
    calls = [b.value.args[0].name_hint for b in tir["main"].bindings()]
    assert calls == ["fused_matmul_add_relu", "fused_matmul1_add1", "softmax"]


def test_the_course_mlp_fuses_linear0_with_relu0_into_a_schedulable_function():
    mod = mlp_module(batch=1)
    args = _inputs(mod, seed=3)
    tir = FuseTIR()(FuseOps()(mod))
    assert "fused_linear0_relu0" in tir.names() and "relu0" not in tir.names()
    np.testing.assert_allclose(_run(tir, args), _run(mod, args), rtol=1e-5, atol=1e-5)
    # the fused function's blocks are one program the explorer can schedule
    sch = engine.Schedule(engine.IRModule((("f", tir["fused_linear0_relu0"]),)))
    blocks = [b for b in ("Y", "Z", "Y_1")]
    y = sch.get_block(blocks[0])
    i, j, k = sch.get_loops(y)
    sch.reverse_compute_at(sch.get_block("Z"), j)
    sch.reverse_compute_inline(sch.get_block("Y_1"))
    out = np.zeros((1, 128), "float32")
    engine.build(sch.mod)["f"](args[0], args[1], args[2], out)
    np.testing.assert_allclose(out, np.maximum(args[0] @ args[1].T + args[2], 0), rtol=1e-4,
                               atol=1e-4)


def test_fusion_stops_at_a_value_used_twice():
    x = Var("x", T(4, 4))
    a, b, c = DataflowVar("a", T(4, 4)), DataflowVar("b", T(4, 4)), Var("c", T(4, 4))
    bs = [VarBinding(a, _op("relax.matmul", x, x, si=T(4, 4))),
          VarBinding(b, _op("relax.nn.relu", a, si=T(4, 4))),
          VarBinding(c, _op("relax.add", a, b, si=T(4, 4)))]
    main = Function("main", (x,), SeqExpr((DataflowBlock(tuple(bs)),), c), T(4, 4))
    mod = LegalizeOps()(engine.IRModule((("main", main),)))
    fused = FuseOps()(mod)
    # a is read by relu and by add: neither joins matmul's group; add joins relu's
    assert [n for n, f in fused.items() if isinstance(f, Function) and f.attr("Primitive")] == [
        "fused_relu_add"]
    x_val = np.random.default_rng(0).standard_normal((4, 4)).astype("float32")
    ref = x_val @ x_val
    np.testing.assert_allclose(_run(FuseTIR()(fused), [x_val]), ref + np.maximum(ref, 0),
                               rtol=1e-5, atol=1e-5)


def test_op_patterns():
    mod = LegalizeOps()(_high_level_mlp())
    assert op_pattern(mod["relu"]) == ELEMWISE
    assert op_pattern(mod["add"]) == BROADCAST
    assert op_pattern(mod["matmul"]) == OUT_EWISE_FUSABLE
    assert op_pattern(mod["softmax"]) == COMM_REDUCE
    course = mlp_module()
    assert op_pattern(course["linear0"]) == OUT_EWISE_FUSABLE
    x = Var("x", T(2, 6))
    r = Var("r", T(3, 4))
    main = Function("main", (x,), SeqExpr((DataflowBlock((VarBinding(
        r, _op("relax.reshape", x, ShapeExpr((3, 4)), si=T(3, 4))),)),), r), T(3, 4))
    assert op_pattern(LegalizeOps()(engine.IRModule((("main", main),)))["reshape"]) == INJECTIVE


def test_dead_code_elimination_drops_unused_bindings_and_functions():
    mod = mlp_module()
    main = mod["main"]
    bs = list(main.bindings())
    dead = DataflowVar("dead", bs[1].var.struct_info)
    extra = VarBinding(dead, bs[1].value)
    block = DataflowBlock(tuple(bs[:2]) + (extra,) + tuple(bs[2:]))
    main2 = Function("main", main.params, SeqExpr((block,), main.body.body),
                     main.ret_struct_info, main.attrs)
    unused = mod["relu0"].with_attr("global_symbol", "unused")
    mod2 = engine.IRModule(tuple((n, main2 if n == "main" else f) for n, f in mod.items())
                           + (("unused", unused),))
    out = DeadCodeElimination()(mod2)
    assert "unused" not in out.names() and len(list(out["main"].bindings())) == 3
    args = _inputs(mod)
    np.testing.assert_allclose(_run(out, args), _run(mod, args), rtol=1e-6)


@st.composite
def _chains(draw):
    """A random dataflow block of high-level operators on a (2, 6) input: each operand is
    the last value or, sometimes, an earlier one (so values are used more than once)."""
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    x = Var("x", T(2, 6))
    values = [x]
    bindings = []
    for i in range(draw(st.integers(2, 5))):
        a = values[-1] if draw(st.booleans()) or len(values) == 1 else draw(
            st.sampled_from(values))
        shape = a.struct_info.shape
        kind = draw(st.sampled_from(["relu", "add", "add_self", "matmul", "softmax",
                                     "permute", "reshape"]))
        if kind == "relu":
            call = _op("relax.nn.relu", a, si=T(*shape))
        elif kind == "add":
            c = relax.const(rng.standard_normal(shape[-1:]).astype("float32"))
            call = _op("relax.add", a, c, si=T(*shape))
        elif kind == "add_self":
            b = draw(st.sampled_from([v for v in values if v.struct_info.shape == shape]))
            call = _op("relax.add", a, b, si=T(*shape))
        elif kind == "matmul":
            m = draw(st.sampled_from([3, 4]))
            w = relax.const(rng.standard_normal((shape[-1], m)).astype("float32"))
            call = _op("relax.matmul", a, w, si=T(*shape[:-1], m))
        elif kind == "softmax":
            call = _op("relax.nn.softmax", a, si=T(*shape), axis=-1)
        elif kind == "permute":
            call = _op("relax.permute_dims", a, si=T(*shape[::-1]), axes=(1, 0))
        else:
            new = (shape[0] * shape[1] // 2, 2)
            call = _op("relax.reshape", a, ShapeExpr(new), si=T(*new))
        v = DataflowVar(f"lv{i}", call.struct_info)
        bindings.append(VarBinding(v, call))
        values.append(v)
    last = bindings[-1]
    out = Var("out", last.var.struct_info)
    bindings[-1] = VarBinding(out, last.value)
    main = Function("main", (x,), SeqExpr((DataflowBlock(tuple(bindings)),), out),
                    out.struct_info, (("global_symbol", "main"),))
    return engine.IRModule((("main", main),))


@settings(max_examples=8, deadline=None)
@given(_chains())
def test_legalize_and_fusion_keep_results_on_random_graphs(mod):
    x = np.random.default_rng(0).standard_normal((2, 6)).astype("float32")
    want = _run(mod, [x])                      # the VM runs the operators' numpy meaning
    legal = LegalizeOps()(mod)
    fused = DeadCodeElimination()(FuseTIR()(FuseOps()(legal)))
    np.testing.assert_allclose(_run(legal, [x]), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_run(fused, [x]), want, rtol=1e-4, atol=1e-5)
    assert not [f for f in fused.items() if isinstance(f[1], Function) and f[1].attr("Primitive")]
    text = fused.script()
    assert engine.structural_equal(engine.parse(text, constants=relax.constants_of(fused)), fused)


def test_bind_params_then_fusion_keeps_results():
    from engine.relax.transform import BindParams

    mod = mlp_module(batch=2)
    args = _inputs(mod, seed=5)
    names = ["w0", "b0", "w1", "b1"]
    bound = BindParams("main", dict(zip(names, args[1:])))(mod)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    fused = DeadCodeElimination()(FuseTIR()(FuseOps()(bound)))
    f = fused["fused_linear0_relu0"]
    assert [p.name for p in f.params][:3] == ["x", "W", "B"]
    np.testing.assert_allclose(_run(fused, args[:1]), _run(mod, args), rtol=1e-5, atol=1e-5)
