"""``FuseOps()``: group a TensorIR call with the element-wise calls that consume it
(TVM's pass of that name, for chains in dataflow blocks).

Each ``R.call_tir`` callee gets its op pattern (:mod:`.op_pattern`).  Walking a dataflow
block in order, a call joins the group of the call producing one of its operands when

* that operand is used only there (the intermediate never escapes the group), and
* the call is element-wise or broadcast and the group is anything but opaque (a matmul,
  a convolution or a reduction computes its output, element-wise work follows), or the
  call is injective (reshape, transpose) and the group is injective too, and
* its other operands are computed before the group starts (so no cycle is made).

A group of two calls or more becomes a Relax function marked ``Primitive``, and the
group's bindings one call of it.  Before::

    lv0 = R.call_tir(linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
    lv1 = R.call_tir(relu0, (lv0,), out_sinfo=R.Tensor((1, 128), dtype="float32"))
    out = R.call_tir(linear1, (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), dtype="float32"))

After::

    @R.function(private=True)
    def fused_linear0_relu0(x: ..., w0: ..., b0: ...) -> R.Tensor((1, 128), dtype="float32"):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), out_sinfo=...)
            gv = R.call_tir(relu0, (lv0,), out_sinfo=...)
            R.output(gv)
        return gv

    lv1 = fused_linear0_relu0(x, w0, b0)
    out = R.call_tir(linear1, (lv1, w1, b1), out_sinfo=...)

:class:`~.fuse_tir.FuseTIR` then makes each such function one TensorIR function.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.ir.function import IRModule, PrimFunc

from ..expr import (Call, Constant, DataflowBlock, DataflowVar, Function, GlobalVar, Op,
                    SeqExpr, Tuple, Var, VarBinding, call_tir)
from .op_pattern import BROADCAST, INJECTIVE, OPAQUE, op_pattern
from .rewrite import ModulePass, fresh_name, relax_functions, uses, with_blocks

__all__ = ["FuseOps", "call_tir_callee", "tir_args", "fusion_groups"]


def call_tir_callee(value) -> str | None:
    """The PrimFunc name of an ``R.call_tir(gv, ...)`` value, else None."""
    if (isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == "relax.call_tir"
            and isinstance(value.args[0], GlobalVar)):
        return value.args[0].name_hint
    return None


def tir_args(value: Call) -> tuple:
    args = value.args[1]
    return tuple(args.fields) if isinstance(args, Tuple) else (args,)


@dataclass
class _Group:
    members: list = field(default_factory=list)   # positions in the block
    pattern: int = OPAQUE


def _may_join(consumer: int, group: int) -> bool:
    if consumer <= BROADCAST:
        return group != OPAQUE
    if consumer == INJECTIVE:
        return group <= INJECTIVE
    return False


def fusion_groups(mod: IRModule, block, use_count: dict[int, int]) -> list[list[int]]:
    """The groups (positions of bindings, in order) FuseOps makes in one dataflow block."""
    bindings = block.bindings
    defined_at = {id(b.var): i for i, b in enumerate(bindings)}
    group_of: dict[int, int] = {}
    groups: list[_Group] = []
    for pos, b in enumerate(bindings):
        callee = call_tir_callee(b.value)
        prim = mod[callee] if callee is not None and callee in mod else None
        if not isinstance(prim, PrimFunc):
            continue
        pattern = dict(prim.attrs).get("op_pattern")   # AnnotateTIROpPattern's, if run
        if not isinstance(pattern, int):
            pattern = op_pattern(prim)
        args = tir_args(b.value)
        joined = None
        for arg in args:
            g = group_of.get(id(arg))
            if g is None or use_count.get(id(arg), 0) != 1 or not _may_join(
                    pattern, groups[g].pattern):
                continue
            start = groups[g].members[0]
            others_ok = all(
                not isinstance(o, Var) or group_of.get(id(o)) == g
                or defined_at.get(id(o), -1) < start for o in args if o is not arg)
            if others_ok:
                joined = g
                break
        if joined is None:
            groups.append(_Group([pos], pattern))
            joined = len(groups) - 1
        else:
            groups[joined].members.append(pos)
            groups[joined].pattern = max(groups[joined].pattern, pattern)
        group_of[id(b.var)] = joined
    return [g.members for g in groups if len(g.members) > 1]


def _fused_function(mod: IRModule, name: str, members: list[VarBinding]
                    ) -> tuple[Function, tuple]:
    """The Primitive Relax function of a group, and the operands main passes to it (a
    constant operand is named after the TensorIR parameter it is passed as, e.g. ``W``)."""
    produced = {id(b.var) for b in members}
    outside: list = []
    hints: dict[int, str] = {}
    for b in members:
        prim = mod[call_tir_callee(b.value)]
        for k, a in enumerate(tir_args(b.value)):
            if id(a) not in produced and id(a) not in hints and isinstance(a, (Var, Constant)):
                hints[id(a)] = (a.name_hint if isinstance(a, Var)
                                else prim.params[k].name if k < len(prim.params) else f"c{k}")
                outside.append(a)
    params, rename = [], {}
    taken: set[str] = set()
    for a in outside:
        hint = fresh_name(hints[id(a)], taken)
        taken.add(hint)
        p = Var(hint, a.struct_info)
        params.append(p)
        rename[id(a)] = p
    body = []
    for k, b in enumerate(members):
        last = k == len(members) - 1
        var = (Var("gv", b.var.struct_info) if last
               else DataflowVar(b.var.name_hint, b.var.struct_info))
        new_args = [rename.get(id(a), a) for a in tir_args(b.value)]
        body.append(VarBinding(var, call_tir(b.value.args[0], new_args,
                                             b.value.sinfo_args[0])))
        rename[id(b.var)] = var
    out = body[-1].var
    func = Function(name, tuple(params), SeqExpr((DataflowBlock(tuple(body)),), out),
                    out.struct_info, (("Primitive", 1),))
    return func, tuple(outside)


class FuseOps(ModulePass):
    """Fuse element-wise consumers into their producer's group (module docstring)."""

    name = "FuseOps"

    def transform_module(self, mod: IRModule) -> IRModule:
        funcs = dict(mod.items())
        for fname, func in relax_functions(mod):
            if func.attr("Primitive"):
                continue
            count = uses(func)
            blocks = []
            for block in func.body.blocks:
                if not isinstance(block, DataflowBlock):
                    blocks.append(block)
                    continue
                groups = fusion_groups(mod, block, count)
                replace: dict[int, VarBinding | None] = {}
                for members in groups:
                    bs = [block.bindings[i] for i in members]
                    name = fresh_name("fused_" + "_".join(call_tir_callee(b.value) for b in bs),
                                      funcs)
                    fused, operands = _fused_function(mod, name, bs)
                    funcs[name] = fused
                    last = bs[-1]
                    for i in members[:-1]:
                        replace[i] = None
                    replace[members[-1]] = VarBinding(
                        last.var, Call(GlobalVar(name), operands, (), (), last.var.struct_info))
                out = [replace.get(i, b) for i, b in enumerate(block.bindings)]
                blocks.append(DataflowBlock(tuple(b for b in out if b is not None)))
            funcs[fname] = with_blocks(func, blocks)
        return IRModule(tuple(funcs.items()))


