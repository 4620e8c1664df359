"""Weights stored in the layout their kernel reads fastest, once, when they are constants.

A linear layer written as the course writes it (:func:`engine.topi.linear`, TVM's
``dense``) reads its weight as ``W[j, k]``: the output column ``j`` is the first index, the
reduction ``k`` the second, so neighbouring outputs are 3 KiB apart in ``W`` and the loop
over ``j`` cannot become a vector. When ``main`` passes that weight as a constant (the
model's trained weights, bound by ``BindParams``), :func:`pretranspose_weights` stores the
constant transposed — ``W_t[k, j] = W[j, k]``, computed once in numpy — and gives the
TensorIR function the transposed parameter (the explorer's ``transform_layout`` with
``lambda j, k: (k, j)`` on the parameter, which rewrites every access to ``W[k, j]``). The
layer then reads its weight as ``x @ W_t`` does, and is scheduled as well as a matmul.

This is what TVM's ``FoldConstant`` does to ``R.linear(x, w)`` with a constant ``w``
(``matmul(x, permute_dims(w))``: the transpose of a constant is folded into a constant);
ONNX's ``Gemm(transB=1)`` with a weight is folded the same way when it is read
(:mod:`engine.relax.frontend.onnx_reader`). A function called with a computed value in
that position (not a constant) is left as it is.
"""
from __future__ import annotations

import numpy as np

from engine.ir import expr as E
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, IterType
from engine.relax import expr as X
from engine.relax.transform.fuse_ops import call_tir_callee, tir_args
from engine.schedule import Schedule, ScheduleError

__all__ = ["pretranspose_weights", "transposed_weight_params"]

#: the index map applied to a transposed weight parameter
TRANSPOSE_MAP = "lambda j, k: (k, j)"


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root"]


def _loads(block: Block, buf) -> list[E.BufferLoad]:
    found: list = []
    post_order_visit(block.body, lambda n: found.append(n)
                     if isinstance(n, E.BufferLoad) and n.buffer is buf else None)
    return found


def _reads_as_dense_weight(func: PrimFunc, buf) -> str | None:
    """The name of the one block reading the 2-D ``buf`` as ``buf[vj, vk]`` — ``vj`` its
    last spatial axis, ``vk`` its only reduction axis — when nothing else touches ``buf``;
    else None."""
    if len(buf.shape) != 2:
        return None
    users = [b for b in _blocks(func)
             if any(r.buffer is buf for r in b.reads) or any(w.buffer is buf for w in b.writes)]
    if len(users) != 1:
        return None
    blk = users[0]
    if any(w.buffer is buf for w in blk.writes) or blk.init is None:
        return None
    spatial = [iv.var for iv in blk.iter_vars if iv.iter_type == IterType.SPATIAL]
    reduce = [iv.var for iv in blk.iter_vars if iv.iter_type == IterType.REDUCE]
    if len(reduce) != 1 or not spatial:
        return None
    loads = _loads(blk, buf)
    if not loads or not all(len(ld.indices) == 2 and ld.indices[0] is spatial[-1]
                            and ld.indices[1] is reduce[0] for ld in loads):
        return None
    return blk.name_hint


def transposed_weight_params(func: PrimFunc) -> dict[int, str]:
    """Positions (among the buffer parameters) of the weights ``func`` reads as
    ``W[j, k]`` -> the block reading each."""
    out = {}
    for pos, buf in enumerate(func.buffer_params):
        name = _reads_as_dense_weight(func, buf)
        if name is not None:
            out[pos] = name
    return out


def _transpose_param(func: PrimFunc, name: str, pos: int, block_name: str) -> PrimFunc | None:
    """``func`` with its ``pos``-th buffer parameter transposed (None if refused)."""
    buf = func.buffer_params[pos]
    sch = Schedule(IRModule(((name, func),)))
    handle = sch.get_block(block_name, func_name=name)
    reads = sch.get(handle).reads
    index = next(i for i, r in enumerate(reads) if r.buffer is buf)
    try:
        sch.transform_layout(handle, ("read", index), TRANSPOSE_MAP)
    except ScheduleError:
        return None
    return sch.mod[name]


def pretranspose_weights(mod: IRModule, func_name: str = "main") -> IRModule:
    """``mod`` with every constant weight read as ``W[j, k]`` stored transposed (module
    docstring). A TensorIR function is rewritten only when every call of it passes a
    constant in that position; the module is returned unchanged when there is none."""
    if func_name not in mod or not isinstance(mod[func_name], X.Function):
        return mod
    main = mod[func_name]
    calls: dict[str, list] = {}
    for b in main.bindings():
        callee = call_tir_callee(b.value)
        if callee is not None:
            calls.setdefault(callee, []).append(tir_args(b.value))
    funcs = dict(mod.items())
    chosen: dict[str, set[int]] = {}
    for callee, arg_lists in calls.items():
        f = funcs.get(callee)
        if not isinstance(f, PrimFunc):
            continue
        for pos, block_name in transposed_weight_params(f).items():
            if not all(pos < len(a) and isinstance(a[pos], X.Constant) for a in arg_lists):
                continue
            new = _transpose_param(f, callee, pos, block_name)
            if new is None:
                continue
            f = funcs[callee] = new
            chosen.setdefault(callee, set()).add(pos)
    if not chosen:
        return mod
    transposed: dict[int, X.Constant] = {}     # one transposed copy per constant

    def flip(c: X.Constant) -> X.Constant:
        if id(c) not in transposed:
            transposed[id(c)] = X.Constant.of(np.ascontiguousarray(c.data.array.T))
        return transposed[id(c)]

    blocks = []
    for block in main.body.blocks:
        bindings = []
        for b in block.bindings:
            callee = call_tir_callee(b.value)
            if callee in chosen:
                args = list(tir_args(b.value))
                for pos in chosen[callee]:
                    args[pos] = flip(args[pos])
                b = b.replace(value=b.value.replace(
                    args=(b.value.args[0], X.Tuple(tuple(args)))))
            bindings.append(b)
        blocks.append(block.replace(bindings=tuple(bindings)))
    funcs[func_name] = main.replace(body=main.body.replace(blocks=tuple(blocks)))
    return IRModule(tuple(funcs.items()))
