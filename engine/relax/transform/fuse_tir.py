"""``FuseTIR()``: each ``Primitive`` Relax function FuseOps made becomes one TensorIR
function (TVM's pass of that name), whose blocks the explorer can then schedule together
(``compute_at`` the bias block under the matmul's loop, ``reverse_compute_inline`` the
relu, ...).

The calls' bodies are put one after the other in the new function's root block; the
intermediate tensors (``lv0`` of ``linear0`` read by ``relu0``) become buffers it
allocates; a block or buffer name already used gets a suffix (``Y_1``).  Before: the
function ``fused_linear0_relu0`` of :mod:`.fuse_ops`'s docstring.  After::

    @T.prim_func
    def fused_linear0_relu0(x: T.Buffer((1, 784), "float32"), w0: ..., b0: ...,
                            compute: T.Buffer((1, 128), "float32")):
        Y = T.alloc_buffer((1, 128))
        Z = T.alloc_buffer((1, 128))
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"): ...
        for i, j in T.grid(1, 128):
            with T.block("Z"): ...
        for i0, i1 in T.grid(1, 128):
            with T.block("compute"):
                compute[v_i0, v_i1] = T.max(Z[v_i0, v_i1], T.float32(0))

    lv1 = R.call_tir(fused_linear0_relu0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), ...))
"""
from __future__ import annotations

import dataclasses

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.functor import Mutator
from engine.ir.function import IRModule, PrimFunc
from engine.ir.stmt import Block, BlockRealize, seq

from ..expr import Call, Function, GlobalVar, VarBinding, call_tir
from ..struct_info import TensorStructInfo
from .dead_code import remove_unused_functions
from .fuse_ops import call_tir_callee, tir_args
from .rewrite import ModulePass, map_bindings, relax_functions

__all__ = ["FuseTIR", "fuse_primitive"]


class _Rename(Mutator):
    """Buffers replaced (parameters by the fused function's), blocks renamed."""

    def __init__(self, buffers: dict, block_names: dict):
        self.buffers = buffers
        self.block_names = block_names

    def visit_buffer(self, buf: Buffer) -> Buffer:
        return self.buffers.get(buf, buf)

    def visit_Block(self, block: Block):
        out = self.generic_visit(block)
        new = self.block_names.get(id(block))
        return dataclasses.replace(out, name_hint=new) if new else out


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 0
    while out in used:
        k += 1
        out = f"{name}_{k}"
    used.add(out)
    return out


def _collect_blocks(stmt) -> list[Block]:
    from engine.ir.functor import post_order_visit
    found: list[Block] = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, Block) else None)
    return found


def fuse_primitive(mod: IRModule, func: Function) -> PrimFunc:
    """One PrimFunc computing the Primitive Relax function ``func`` (module docstring)."""
    buffer_names: set[str] = set()
    block_names: set[str] = set()
    buf_of: dict[int, Buffer] = {}          # id(relax var) -> its buffer
    params = []
    for p in func.params:
        si = p.struct_info
        if not isinstance(si, TensorStructInfo) or si.shape is None:
            raise ValueError(f"FuseTIR: parameter {p.name_hint!r} of {func.name} is not a "
                             "tensor of known shape")
        b = Buffer(_unique(p.name_hint, buffer_names), si.shape, si.dtype)
        buf_of[id(p)] = b
        params.append(b)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    result = func.body.body
    stages, allocs = [], []
    for binding in bindings:
        callee = call_tir_callee(binding.value)
        prim = mod[callee] if callee is not None and callee in mod else None
        if not isinstance(prim, PrimFunc):
            raise ValueError(f"FuseTIR: {func.name} calls {callee or binding.value!r}, which "
                             "is not a TensorIR function of the module")
        args = tir_args(binding.value)
        if len(prim.params) != len(args) + 1:
            raise ValueError(f"FuseTIR: {callee} takes {len(prim.params)} buffers but is "
                             f"called with {len(args)} operands and one output")
        out_param = prim.params[-1]
        if binding.var is result:
            out_buf = Buffer(_unique(out_param.name, buffer_names), out_param.shape,
                             out_param.dtype)
            out_is_param = True
        else:
            out_buf = Buffer(_unique(out_param.name, buffer_names), out_param.shape,
                             out_param.dtype)
            out_is_param = False
        mapping = {}
        for prm, arg in zip(prim.params[:-1], args):
            if id(arg) not in buf_of:
                raise ValueError(f"FuseTIR: an operand of {callee} in {func.name} is neither "
                                 "a parameter nor computed earlier in the function")
            mapping[prm] = buf_of[id(arg)]
        mapping[out_param] = out_buf
        root = prim.body.block
        for a in root.alloc_buffers:
            nb = dataclasses.replace(a, name=_unique(a.name, buffer_names))
            mapping[a] = nb
            allocs.append(nb)
        renames = {}
        for blk in _collect_blocks(root.body):
            new = _unique(blk.name_hint, block_names)
            if new != blk.name_hint:
                renames[id(blk)] = new
        stages.append(_Rename(mapping, renames).visit(root.body))
        buf_of[id(binding.var)] = out_buf
        if out_is_param:
            result_buf = out_buf
        else:
            allocs.append(out_buf)
    root = Block(iter_vars=(), reads=(), writes=(), name_hint="root", body=seq(*stages),
                 alloc_buffers=tuple(allocs))
    body = BlockRealize((), E.IntImm("bool", 1), root)
    return PrimFunc(func.name, tuple(params) + (result_buf,), body,
                    attrs=(("global_symbol", func.name), ("tir.noalias", True)))


class FuseTIR(ModulePass):
    """Turn every ``Primitive`` Relax function into one TensorIR function and its calls
    into ``R.call_tir`` (module docstring); TensorIR functions no longer called are
    removed."""

    name = "FuseTIR"

    def transform_module(self, mod: IRModule) -> IRModule:
        primitive = {n: f for n, f in relax_functions(mod) if f.attr("Primitive")}
        if not primitive:
            return mod
        funcs = {n: f for n, f in mod.items() if n not in primitive}
        for name, f in primitive.items():
            funcs[name] = fuse_primitive(mod, f)

        def to_call_tir(binding: VarBinding) -> VarBinding:
            v = binding.value
            if isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint in primitive:
                return VarBinding(binding.var, call_tir(GlobalVar(v.op.name_hint), v.args,
                                                        binding.var.struct_info))
            return binding

        for name, f in list(funcs.items()):
            if isinstance(f, Function):
                funcs[name] = map_bindings(f, to_call_tir)
        return remove_unused_functions(IRModule(tuple(funcs.items())))
