"""What kind of computation a TensorIR function is, for fusion (TVM's
``AnnotateTIROpPattern``): the *op pattern* of each PrimFunc a ``call_tir`` calls.

==================  ===  =================================================================
pattern             int  a function whose every block ...
==================  ===  =================================================================
ELEMWISE             0   writes ``out[v0, v1, ...]`` reading each input at the same indices
BROADCAST            1   reads inputs at some of the output's indices (a bias ``B[v1]``)
INJECTIVE            2   writes each output element once from any index (reshape, transpose)
COMM_REDUCE          3   has a reduction block (``with T.init()``), e.g. softmax's sums
OUT_EWISE_FUSABLE    4   has a multiply-add reduction (matmul, conv2d): element-wise
                         consumers can be computed at its output
OPAQUE               8   anything else (several outputs, no blocks, ...)
==================  ===  =================================================================

A function's pattern is the largest of its blocks' (``linear0``: the reduction ``Y`` is
OUT_EWISE_FUSABLE, the bias block ``Z`` BROADCAST, so the function is OUT_EWISE_FUSABLE).
"""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.functor import post_order_visit
from engine.ir.function import IRModule, PrimFunc
from engine.ir.stmt import Block, BufferStore

from .base import Pass

__all__ = ["AnnotateTIROpPattern", "ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE", "OUT_EWISE_FUSABLE",
           "OPAQUE", "PATTERN_NAMES", "op_pattern"]

ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 0, 1, 2, 3, 4, 8
PATTERN_NAMES = {ELEMWISE: "elementwise", BROADCAST: "broadcast", INJECTIVE: "injective",
                 COMM_REDUCE: "reduction", OUT_EWISE_FUSABLE: "out-elementwise-fusable",
                 OPAQUE: "opaque"}


def _leaf_blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root" or b.iter_vars]


def _stores(block: Block) -> list[BufferStore]:
    out: list[BufferStore] = []
    post_order_visit(block.body, lambda n: out.append(n) if isinstance(n, BufferStore) else None)
    return out


def _loads(expr) -> list[E.BufferLoad]:
    out: list[E.BufferLoad] = []
    post_order_visit(expr, lambda n: out.append(n) if isinstance(n, E.BufferLoad) else None)
    return out


def _is_mul_add(store: BufferStore) -> bool:
    """``out[...] = out[...] + a * b`` (the update of a matmul or a convolution)."""
    v = store.value
    if not isinstance(v, E.Add):
        return False
    for acc, term in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, E.BufferLoad) and acc.buffer is store.buffer and isinstance(
                term, E.Mul):
            return True
    return False


def _block_pattern(block: Block) -> int:
    stores = _stores(block)
    if len(stores) != 1:
        return OPAQUE
    store = stores[0]
    if block.init is not None:
        return OUT_EWISE_FUSABLE if _is_mul_add(store) else COMM_REDUCE
    out_idx = store.indices
    iter_vars = [iv.var for iv in block.iter_vars]
    if not all(isinstance(i, E.Var) for i in out_idx) or len({id(i) for i in out_idx}) != len(
            out_idx) or {id(i) for i in out_idx} != {id(v) for v in iter_vars}:
        return INJECTIVE
    pattern = ELEMWISE
    position = {id(v): d for d, v in enumerate(out_idx)}
    for load in _loads(store.value):
        idx = load.indices
        if len(idx) == len(out_idx) and all(a is b for a, b in zip(idx, out_idx)):
            continue
        dims = []
        for i in idx:
            if isinstance(i, E.IntImm) and i.value == 0:
                continue
            if isinstance(i, E.Var) and id(i) in position:
                dims.append(position[id(i)])
                continue
            dims = None
            break
        if dims is not None and dims == sorted(dims) and len(set(dims)) == len(dims):
            pattern = max(pattern, BROADCAST)
        else:
            pattern = max(pattern, INJECTIVE)
    return pattern


def op_pattern(func: PrimFunc) -> int:
    """The op pattern of ``func`` (see the module docstring)."""
    blocks = _leaf_blocks(func)
    if not blocks:
        return OPAQUE
    return max(_block_pattern(b) for b in blocks)


class AnnotateTIROpPattern(Pass):
    """``AnnotateTIROpPattern()``: each TensorIR function of the module gets the attribute
    ``op_pattern`` (its :func:`op_pattern`, an int), which FuseOps then reads (TVM's pass of
    that name)."""

    name = "AnnotateTIROpPattern"

    def transform_module(self, mod: IRModule) -> IRModule:
        return IRModule(tuple((n, f.with_attr("op_pattern", op_pattern(f))
                               if isinstance(f, PrimFunc) else f) for n, f in mod.functions))
