"""relax.PyExprVisitor / PyExprMutator, relax.analysis, and the pass infrastructure
(module_pass, function_pass, Sequential under a PassContext, AnnotateTIROpPattern) on
modules parsed from Relax text."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import relax
from engine.ir.function import PrimFunc
from engine.relax.expr import Call, DataflowBlock, Function, Op, Var
from engine.relax.expr_functor import ExprFunctorError
from engine.relax.transform import (AnnotateTIROpPattern, FuseOps, FuseTIR, LegalizeOps,
                                    PassContext, Sequential, function_pass, module_pass)

FMA_TEXT = """
@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0
"""

MLP_TEXT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 16), "float32"), w0: R.Tensor((16, 8), "float32"),
             b0: R.Tensor((8,), "float32")):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
"""


@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != Op.get("relax.add"):
            return call
        value = self.lookup_binding(call.args[0])
        if not isinstance(value, Call) or value.op != Op.get("relax.multiply"):
            return call
        return Call(Op.get("relax.ewise_fma"), [value.args[0], value.args[1], call.args[1]],
                    None, None)


@relax.expr_functor.visitor
class OpCounter(relax.PyExprVisitor):
    def __init__(self):
        self.ops: list[str] = []
        self.defs: list[str] = []

    def visit_call_(self, call):
        if isinstance(call.op, Op):
            self.ops.append(call.op.name)
        super().visit_call_(call)

    def visit_var_def_(self, var):
        self.defs.append(var.name_hint)

    def visit_dataflow_var_def_(self, var):
        self.defs.append("df:" + var.name_hint)


def _ops(func):
    c = OpCounter()
    c.visit_expr(func)
    return c.ops


def _run(mod, *args):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), engine.cpu())
    return np.asarray(vm["main"](*args))


def test_visitor_walks_calls_and_definitions_in_order():
    c = OpCounter()
    c.visit_expr(engine.parse(MLP_TEXT)["main"])
    assert c.ops == ["relax.matmul", "relax.add", "relax.nn.relu"]
    assert c.defs == ["x", "w0", "b0", "df:lv0", "df:lv1", "gv"]


def test_fma_rewriter_rewrites_add_of_multiply_and_keeps_the_results():
    mod = engine.parse(FMA_TEXT)
    updated = EwiseFMARewriter().visit_expr(mod["main"])
    assert _ops(updated) == ["relax.multiply", "relax.ewise_fma"]
    (block,) = updated.body.blocks
    fma = block.bindings[1].value
    x, y = updated.params
    assert fma.args[0] is x and fma.args[1] is y and fma.args[2] is y
    assert fma.struct_info.shape == (3, 4) and fma.struct_info.dtype == "float32"
    cleaned = relax.analysis.remove_all_unused(updated)
    assert _ops(cleaned) == ["relax.ewise_fma"]
    assert isinstance(cleaned.body.blocks[0], DataflowBlock)
    assert "R.ewise_fma(x, y, y)" in cleaned.script()
    a = np.arange(12, dtype="float32").reshape(3, 4)
    b = np.full((3, 4), 0.5, "float32")
    out = _run(engine.IRModule((("main", cleaned),)), a, b)
    np.testing.assert_allclose(out, a * b + b)


def test_mutator_returns_the_same_function_when_nothing_changes():
    mod = engine.parse(MLP_TEXT)
    f = mod["main"]
    assert relax.PyExprMutator().visit_expr(f) is f
    assert EwiseFMARewriter().visit_expr(f) is f


def test_visit_expr_post_order_does_not_call_the_hook_on_the_node_itself():
    seen = []

    @relax.expr_functor.mutator
    class Probe(relax.PyExprMutator):
        def visit_call_(self, call):
            seen.append(call.op.name)
            out = self.visit_expr_post_order(call)
            assert out is call     # operands unchanged: the same node
            return out

    Probe().visit_expr(engine.parse(MLP_TEXT)["main"])
    assert seen == ["relax.matmul", "relax.add", "relax.nn.relu"]


def test_a_changed_struct_info_gives_a_new_variable_and_later_uses_follow():
    """relu(lv1) rewritten to matmul(lv1, ...) of another shape would be wrong; here add's
    operands are swapped into a broadcast of another shape: lv1's variable is replaced and
    relu reads the new one."""
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8), "float32"), b: R.Tensor((4, 1), "float32")):
        with R.dataflow():
            lv1 = R.multiply(x, x)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
"""

    @relax.expr_functor.mutator
    class Widen(relax.PyExprMutator):
        def __init__(self, b):
            super().__init__()
            self.b = b

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op == Op.get("relax.multiply"):
                return Call(Op.get("relax.add"), [call.args[0], self.b])
            return call

    f = engine.parse(text)["main"]
    out = Widen(f.params[1]).visit_expr(f)
    (block,) = out.body.blocks
    lv1, gv = block.bindings
    assert lv1.var is not f.body.blocks[0].bindings[0].var
    assert lv1.var.struct_info.shape == (4, 8)
    assert gv.value.args[0] is lv1.var
    assert gv.value.struct_info.shape == (4, 8)


def test_functor_errors_name_the_problem():
    with pytest.raises(ExprFunctorError, match="one by one"):
        relax.PyExprVisitor().visit_expr(engine.parse(MLP_TEXT))
    with pytest.raises(ExprFunctorError, match="PyExprMutator"):
        relax.expr_functor.mutator(OpCounter)


def test_module_pass_over_a_class_and_a_function():
    @module_pass(opt_level=2, name="FMA")
    class FMAPass:
        def __init__(self, prefix=""):
            self.prefix = prefix

        def transform_module(self, mod, ctx):
            assert isinstance(ctx, PassContext)
            funcs = [(n, relax.analysis.remove_all_unused(EwiseFMARewriter().visit_expr(f))
                      if isinstance(f, Function) else f) for n, f in mod.functions]
            return engine.IRModule(tuple(funcs))

    p = FMAPass(prefix="x")
    assert p.info.name == "FMA" and p.info.opt_level == 2 and p.prefix == "x"
    out = p(engine.parse(FMA_TEXT))
    assert _ops(out["main"]) == ["relax.ewise_fma"]

    @module_pass(opt_level=0)
    def count_functions(mod, ctx):
        count_functions.seen = len(mod.functions)
        return mod

    assert count_functions.info.name == "count_functions"
    mod = engine.parse(MLP_TEXT)
    assert count_functions(mod) is mod


def test_sequential_follows_the_pass_context():
    calls = []

    def tagged(name, level):
        @module_pass(opt_level=level, name=name)
        def p(mod, ctx):
            calls.append((name, ctx.opt_level))
            return mod
        return p

    seq = Sequential([tagged("A", 0), tagged("B", 2), tagged("C", 3)])
    mod = engine.parse(MLP_TEXT)
    seq(mod)
    assert calls == [("A", 2), ("B", 2)]             # default opt_level 2
    calls.clear()
    with PassContext(opt_level=3, disabled_pass=["A"]):
        assert PassContext.current().opt_level == 3
        seq(mod)
    assert calls == [("B", 3), ("C", 3)]
    calls.clear()
    with PassContext(opt_level=0, required_pass=["C"]):
        seq(mod)
    assert calls == [("A", 0), ("C", 0)]
    assert PassContext.current().opt_level == 2
    with pytest.raises(TypeError):
        PassContext(opt_level="3")


def test_function_pass_rewrites_each_relax_function():
    @function_pass(opt_level=0, name="FMAEachFunction")
    class FMAEach:
        def transform_function(self, func, mod, ctx):
            return relax.analysis.remove_all_unused(EwiseFMARewriter().visit_expr(func))

    out = FMAEach()(engine.parse(FMA_TEXT))
    assert _ops(out["main"]) == ["relax.ewise_fma"]


def test_annotate_op_pattern_then_fuse_matches_fuse_alone():
    mod = LegalizeOps()(engine.parse(MLP_TEXT))
    annotated = AnnotateTIROpPattern()(mod)
    patterns = {n: dict(f.attrs)["op_pattern"] for n, f in annotated.functions
                if isinstance(f, PrimFunc)}
    assert patterns == {"matmul": 4, "add": 1, "relu": 0}
    a = FuseTIR()(FuseOps()(annotated))
    b = FuseTIR()(FuseOps()(mod))
    assert [n for n, _ in a.functions] == [n for n, _ in b.functions]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.struct_info.shape).astype("float32")
            for p in mod["main"].params]
    x, w0, b0 = args
    np.testing.assert_allclose(_run(a, *args), np.maximum(x @ w0 + b0, 0), rtol=1e-5)


def test_remove_all_unused_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="Relax function"):
        relax.analysis.remove_all_unused(engine.parse(MLP_TEXT))
    assert isinstance(relax.analysis.get_var2val(engine.parse(MLP_TEXT)["main"]), dict)
    seen = []
    relax.analysis.post_order_visit(engine.parse(MLP_TEXT)["main"],
                                    lambda e: seen.append(type(e).__name__))
    assert seen[-1] == "Function" and "Call" in seen and isinstance(seen, list)
    assert all(isinstance(v, Var) for v in relax.analysis.get_var2val(
        engine.parse(MLP_TEXT)["main"]))
