"""MLC course, chapter "Computational Graph Optimization" (mlc-ai/mlc-en,
chapter_graph_optimization/index.md, in TVM's current spelling: ``tvm.compile``,
``tvm.runtime.tensor``, ``relax.TensorStructInfo``), its cells in order through the engine's
``tvm`` namespace: the chapter's code is kept as written, only ``import tvm`` is
``from engine import tvm``.

Offline: the course downloads the trained MLP's weights (``fasionmnist_mlp_params.pkl``) and a
FashionMNIST picture; here both are random arrays of the same shapes, and every result is
compared with numpy's forward pass of the same weights.

Cells: the pattern-match rewrite (``EwiseFMARewriter``, ``remove_all_unused``), the MLP built
with ``relax.BlockBuilder``, the matmul+add fusion (``MatmulAddFusor``, ``FuseDenseAddPass``
with ``tvm.ir.transform.module_pass``), the lowering to TensorIR (``LowerToTensorIR`` with
``call_te`` of topi), ``relax.transform.FuseTIR``, then build and run; after the chapter,
the same results through TVM's own passes (``LegalizeOps``, ``AnnotateTIROpPattern``,
``FuseOps``, ``FuseTIR``, ``DeadCodeElimination`` in a ``Sequential`` under a
``PassContext``).
"""
from __future__ import annotations

import functools

import numpy as np

from engine import tvm
from engine.ir.function import PrimFunc
from engine.tvm.ir.module import IRModule
from engine.tvm.script import tir as T, relax as R  # noqa: F401 - the chapter's imports
from engine.tvm import relax, topi

# ---------------------------------------------------------------- pattern match and rewriting
@tvm.script.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = relax.op.multiply(x, y)
            gv0 = relax.op.add(lv0, y)
            R.output(gv0)
        return gv0



def _ops(func):
    """The operators a Relax function calls, in order (R.call_tir's callee by name)."""
    out = []
    for b in func.bindings():
        v = b.value
        if isinstance(v, relax.Call):
            if isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir":
                out.append("call_tir:" + v.args[0].name_hint)
            elif isinstance(v.op, tvm.ir.Op):
                out.append(v.op.name)
            else:
                out.append("call:" + v.op.name_hint)
    return out


def test_cells_the_data_structure_of_main():
    relax_func = MyModule["main"]
    assert type(relax_func) is relax.Function
    assert [p.name_hint for p in relax_func.params] == ["x", "y"]
    func_body = relax_func.body
    assert type(func_body) is relax.SeqExpr
    assert len(func_body.blocks) == 1
    dataflow_block = func_body.blocks[0]
    assert isinstance(dataflow_block, relax.DataflowBlock)
    assert len(dataflow_block.bindings) == 2
    binding = dataflow_block.bindings[0]
    assert binding.var.name_hint == "lv0"
    assert isinstance(binding.value, relax.Call)
    assert binding.value.op == tvm.ir.Op.get("relax.multiply")


@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        add_op = tvm.ir.Op.get("relax.add")
        multiply_op = tvm.ir.Op.get("relax.multiply")
        ewise_fma_op = tvm.ir.Op.get("relax.ewise_fma")

        if call.op != add_op:
            return call

        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != multiply_op:
            return call

        fma_call = relax.Call(
            ewise_fma_op, [value.args[0], value.args[1], call.args[1]], None, None
        )
        return fma_call



def test_cells_ewise_fma_rewriter(capsys):
    updated_fn = EwiseFMARewriter().visit_expr(MyModule["main"])
    updated_fn.show()
    text = capsys.readouterr().out
    # gv0 rewritten to the fused operator, lv0 left in the code
    assert "lv0 = R.multiply(x, y)" in text and "gv0 = R.ewise_fma(x, y, y)" in text
    assert _ops(updated_fn) == ["relax.multiply", "relax.ewise_fma"]
    relax.analysis.remove_all_unused(updated_fn).show()
    text = capsys.readouterr().out
    assert "R.multiply" not in text and "gv0 = R.ewise_fma(x, y, y)" in text
    # the rewritten function computes what the original does
    a = np.random.default_rng(1).random((3, 4), dtype=np.float32)
    b = np.random.default_rng(2).random((3, 4), dtype=np.float32)
    for func in (MyModule["main"], relax.analysis.remove_all_unused(updated_fn)):
        vm = relax.VirtualMachine(tvm.compile(IRModule({"main": func}), "llvm"), tvm.cpu())
        np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b))
                                   .numpy(), a * b + b, rtol=1e-6)


# ---------------------------------------------------------------- fuse linear and relu
_rng = np.random.default_rng(0)
mlp_params = {"w0": (_rng.standard_normal((128, 784)) * 0.1).astype("float32"),
              "b0": (_rng.standard_normal((128,)) * 0.1).astype("float32"),
              "w1": (_rng.standard_normal((10, 128)) * 0.1).astype("float32"),
              "b1": (_rng.standard_normal((10,)) * 0.1).astype("float32")}
img = _rng.random((1, 28, 28), dtype=np.float32)


def numpy_mlp(x):
    p = mlp_params
    return np.maximum(x @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]


def create_model():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    w0 = relax.const(mlp_params["w0"], "float32")
    b0 = relax.const(mlp_params["b0"], "float32")
    w1 = relax.const(mlp_params["w1"], "float32")
    b1 = relax.const(mlp_params["b1"], "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w0)))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.nn.relu(lv1))
            lv3 = bb.emit(relax.op.matmul(lv2, relax.op.permute_dims(w1)))
            lv4 = bb.emit(relax.op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)

    return bb.get()


@relax.expr_functor.mutator
class MatmulAddFusor(relax.PyExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__()
        self.mod_ = mod
        # cache pre-defined ops
        self.add_op = tvm.ir.Op.get("relax.add")
        self.matmul_op = tvm.ir.Op.get("relax.matmul")
        self.counter = 0

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            # avoid already fused primitive functions
            if func.attrs is not None and "Primitive" in func.attrs.keys() and func.attrs["Primitive"] != 0:
                continue
            updated_func = self.visit_expr(func)
            updated_func = relax.analysis.remove_all_unused(updated_func)
            self.builder_.update_func(global_var, updated_func)

        return self.builder_.get()

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        def match_call(node, op):
            if not isinstance(node, relax.Call):
                return False
            return node.op == op

        # pattern match matmul => add
        if not match_call(call, self.add_op):
            return call

        value = self.lookup_binding(call.args[0])
        if value is None:
            return call

        if not match_call(value, self.matmul_op):
            return call

        x = value.args[0]
        w = value.args[1]
        b = call.args[1]

        # construct a new fused primitive function
        param_x = relax.Var("x" ,relax.TensorStructInfo(x.struct_info.shape, x.struct_info.dtype))
        param_w = relax.Var("w" ,relax.TensorStructInfo(w.struct_info.shape, w.struct_info.dtype))
        param_b = relax.Var("b" ,relax.TensorStructInfo(b.struct_info.shape, b.struct_info.dtype))

        bb = relax.BlockBuilder()

        fn_name = "fused_matmul_add%d" % (self.counter)
        self.counter += 1
        with bb.function(fn_name, [param_x, param_w, param_b]):
            with bb.dataflow():
                lv0 = bb.emit(relax.op.matmul(param_x, param_w))
                gv = bb.emit_output(relax.op.add(lv0, param_b))
            bb.emit_func_output(gv)

        # Add Primitive attribute to the fused funtions
        fused_fn = bb.get()[fn_name].with_attr("Primitive", 1)
        global_var = self.builder_.add_func(fused_fn, fn_name)

        # construct call into the fused function
        return relax.Call(global_var, [x, w, b], None, None)

@tvm.ir.transform.module_pass(opt_level=2, name="MatmulAddFuse")
class FuseDenseAddPass:
    """The wrapper for the LowerTensorIR pass."""
    def transform_module(self, mod, ctx):
        return MatmulAddFusor(mod).transform()


@relax.expr_functor.mutator
class LowerToTensorIR(relax.PyExprMutator):
    def __init__(self, mod: IRModule, op_map) -> None:
        super().__init__()
        self.mod_ = mod
        self.op_map = {
            tvm.ir.Op.get(k): v for k, v in op_map.items()
        }


    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        if call.op in self.op_map:
            return self.op_map[call.op](self.builder_, call)
        return call

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            updated_func = self.visit_expr(func)
            self.builder_.update_func(global_var, updated_func)

        return self.builder_.get()


def map_matmul(bb, call):
    x, w = call.args
    return bb.call_te(topi.nn.matmul, x, w)

def map_add(bb, call):
    a, b = call.args
    return bb.call_te(topi.add, a, b)

def map_relu(bb, call):
    return bb.call_te(topi.nn.relu, call.args[0])

def map_transpose(bb, call):
    return bb.call_te(topi.transpose, call.args[0], )

op_map = {
  "relax.matmul": map_matmul,
  "relax.add": map_add,
  "relax.nn.relu": map_relu,
  "relax.permute_dims": map_transpose
}

@tvm.ir.transform.module_pass(opt_level=0, name="LowerToTensorIR")
class LowerToTensorIRPass:
    """The wrapper for the LowerTensorIR pass."""
    def transform_module(self, mod, ctx):
        return LowerToTensorIR(mod, op_map).transform()



@functools.lru_cache(maxsize=None)
def _stages():
    MLPModel = create_model()
    MLPFused = FuseDenseAddPass()(MLPModel)
    MLPModelTIR = LowerToTensorIRPass()(MLPFused)
    MLPModelFinal = relax.transform.FuseTIR()(MLPModelTIR)
    return MLPModel, MLPFused, MLPModelTIR, MLPModelFinal


def _run(mod, x):
    ex = tvm.compile(mod, "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def test_cells_create_model(capsys):
    MLPModel = _stages()[0]
    MLPModel.show()
    assert "R.matmul" in capsys.readouterr().out
    assert MLPModel.names() == ["main"]
    assert _ops(MLPModel["main"]) == [
        "relax.permute_dims", "relax.matmul", "relax.add", "relax.nn.relu",
        "relax.permute_dims", "relax.matmul", "relax.add"]
    x = img.reshape(1, 784)
    np.testing.assert_allclose(_run(MLPModel, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)


def test_cells_fuse_dense_add_pass(capsys):
    MLPFused = _stages()[1]
    MLPFused.show()
    assert "fused_matmul_add0" in capsys.readouterr().out
    assert FuseDenseAddPass().info.name == "MatmulAddFuse"
    assert FuseDenseAddPass().info.opt_level == 2
    assert sorted(MLPFused.names()) == ["fused_matmul_add0", "fused_matmul_add1", "main"]
    assert _ops(MLPFused["main"]) == [
        "relax.permute_dims", "call:fused_matmul_add0", "relax.nn.relu",
        "relax.permute_dims", "call:fused_matmul_add1"]
    for name, (k, n) in (("fused_matmul_add0", (784, 128)), ("fused_matmul_add1", (128, 10))):
        f = MLPFused[name]
        assert f.attrs["Primitive"] == 1
        assert [p.name_hint for p in f.params] == ["x", "w", "b"]
        assert [p.struct_info.shape for p in f.params] == [(1, k), (k, n), (n,)]
        assert _ops(f) == ["relax.matmul", "relax.add"]
    x = img.reshape(1, 784)
    np.testing.assert_allclose(_run(MLPFused, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)


def test_cells_lower_to_tensor_ir(capsys):
    MLPModelTIR = _stages()[2]
    MLPModelTIR.show()
    assert "R.call_tir" in capsys.readouterr().out
    prims = sorted(n for n, f in MLPModelTIR.functions if isinstance(f, PrimFunc))
    assert prims == ["add", "add1", "matmul", "matmul1", "relu", "transpose", "transpose1"]
    assert _ops(MLPModelTIR["main"]) == [
        "call_tir:transpose", "call:fused_matmul_add0", "call_tir:relu",
        "call_tir:transpose1", "call:fused_matmul_add1"]
    # the fused functions are still Relax functions calling TensorIR
    assert _ops(MLPModelTIR["fused_matmul_add0"]) == ["call_tir:matmul", "call_tir:add"]
    assert _ops(MLPModelTIR["fused_matmul_add1"]) == ["call_tir:matmul1", "call_tir:add1"]
    x = img.reshape(1, 784)
    np.testing.assert_allclose(_run(MLPModelTIR, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)


def test_cells_fuse_tir(capsys):
    MLPModelFinal = _stages()[3]
    MLPModelFinal.show()
    capsys.readouterr()
    assert sorted(MLPModelFinal.names()) == ["fused_matmul_add0", "fused_matmul_add1", "main",
                                             "relu", "transpose", "transpose1"]
    assert _ops(MLPModelFinal["main"]) == [
        "call_tir:transpose", "call_tir:fused_matmul_add0", "call_tir:relu",
        "call_tir:transpose1", "call_tir:fused_matmul_add1"]
    fused = MLPModelFinal["fused_matmul_add0"]
    assert isinstance(fused, PrimFunc)
    assert [b.shape for b in fused.params] == [(1, 784), (784, 128), (128,), (1, 128)]


def test_cells_build_and_run():
    MLPModelFinal = _stages()[3]
    target = tvm.target.Target("llvm", host="llvm")
    ex = tvm.compile(MLPModelFinal, target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    data_nd = tvm.runtime.tensor(img.reshape(1, 784))

    nd_res = vm["main"](data_nd)

    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    ref = numpy_mlp(img.reshape(1, 784))
    np.testing.assert_allclose(nd_res.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert pred_kind[0] == np.argmax(ref, axis=1)[0]


# ---------------------------------------------------------------- after the chapter
def test_tvm_passes_in_a_sequential_give_the_same_numbers():
    """The chapter's discussion: TVM's own fusor does the steps from the TensorIR patterns."""
    seq = tvm.ir.transform.Sequential([
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
    ])
    with tvm.transform.PassContext(opt_level=3):
        mod = seq(create_model())
    names = mod.names()
    assert any(n.startswith("fused_matmul") for n in names)
    assert all(isinstance(mod[n], PrimFunc) for n in names if n != "main")
    x = img.reshape(1, 784)
    np.testing.assert_allclose(_run(mod, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)


def test_our_fusion_then_tvm_passes_compose():
    """"Each of these transformations is composable": the chapter's fusion, then LegalizeOps
    for the rest and FuseTIR."""
    seq = tvm.transform.Sequential([FuseDenseAddPass(), relax.transform.LegalizeOps(),
                                    relax.transform.FuseTIR()])
    mod = seq(create_model())
    assert _ops(mod["main"])[1] == "call_tir:fused_matmul_add0"
    x = img.reshape(1, 784)
    np.testing.assert_allclose(_run(mod, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)
    # below the pass's opt_level (2) a Sequential skips it
    with tvm.transform.PassContext(opt_level=1):
        skipped = tvm.transform.Sequential([FuseDenseAddPass()])(create_model())
    assert not any(n.startswith("fused") for n in skipped.names())
