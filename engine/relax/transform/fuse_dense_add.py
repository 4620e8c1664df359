"""``FuseDenseAddPass`` ("MatmulAddFuse"): the course's graph-optimisation chapter's fusion
of ``R.matmul`` followed by ``R.add`` into one ``Primitive`` Relax function, written — as
the chapter writes it — with :class:`~engine.relax.expr_functor.PyExprMutator`.

Before (the chapter's MLP)::

    lv0 = R.matmul(x, lv)                     # lv = R.permute_dims(w0)
    lv1 = R.add(lv0, b0)

After::

    @R.function
    def fused_matmul_add0(x: R.Tensor((1, 784), "float32"), w: R.Tensor((784, 128), "float32"),
                          b: R.Tensor((128,), "float32")) -> R.Tensor((1, 128), "float32"):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv0 = R.matmul(x, w)
            gv = R.add(lv0, b)
            R.output(gv)
        return gv

    lv1 = fused_matmul_add0(x, lv, b0)

The code is the chapter's, with one difference a library pass needs: the mutator's builder
starts from the module, so the module's other functions (TensorIR functions made by an
earlier pass) are kept; the chapter's starts empty, its module having only ``main``.
"""
from __future__ import annotations

from engine.ir.function import IRModule

from .. import expr as relax
from .. import op
from ..block_builder import BlockBuilder
from ..expr_functor import PyExprMutator, mutator
from ..struct_info import TensorStructInfo
from .base import module_pass
from .dead_code import remove_unused_bindings as remove_all_unused

__all__ = ["MatmulAddFusor", "FuseDenseAddPass"]


@mutator
class MatmulAddFusor(PyExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.mod_ = mod
        # cache pre-defined ops
        self.add_op = relax.Op.get("relax.add")
        self.matmul_op = relax.Op.get("relax.matmul")
        self.counter = 0

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            # avoid already fused primitive functions
            if func.attrs is not None and "Primitive" in dict(func.attrs).keys() and \
                    dict(func.attrs)["Primitive"] != 0:
                continue
            updated_func = self.visit_expr(func)
            updated_func = remove_all_unused(updated_func)
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
        param_x = relax.Var("x", TensorStructInfo(x.struct_info.shape, x.struct_info.dtype))
        param_w = relax.Var("w", TensorStructInfo(w.struct_info.shape, w.struct_info.dtype))
        param_b = relax.Var("b", TensorStructInfo(b.struct_info.shape, b.struct_info.dtype))

        bb = BlockBuilder()

        fn_name = "fused_matmul_add%d" % (self.counter)
        self.counter += 1
        with bb.function(fn_name, [param_x, param_w, param_b]):
            with bb.dataflow():
                lv0 = bb.emit(op.matmul(param_x, param_w))
                gv = bb.emit_output(op.add(lv0, param_b))
            bb.emit_func_output(gv)

        # Add Primitive attribute to the fused funtions
        fused_fn = bb.get()[fn_name].with_attr("Primitive", 1)
        global_var = self.builder_.add_func(fused_fn, fn_name)

        # construct call into the fused function
        return relax.Call(global_var, [x, w, b], None, None)


@module_pass(opt_level=2, name="MatmulAddFuse")
class FuseDenseAddPass:
    """The wrapper for the MatmulAddFusor (the chapter's ``FuseDenseAddPass``)."""

    def transform_module(self, mod, ctx):
        return MatmulAddFusor(mod).transform()
