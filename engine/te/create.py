"""``create_prim_func``: te tensors -> a TensorIR PrimFunc shaped like TVM's.

For ``create_prim_func([A, B, C], name="mm_relu")`` on the course's mm_relu stages::

    A, B: placeholders;  Y = te.sum(A[i, k] * B[k, j], axis=k);  C = te.max(Y[i, j], 0)

the result is exactly the course program:

* parameters ``A, B, C`` (the tensors passed, in order); every other computed tensor
  (``Y``) is an intermediate buffer allocated by the ``root`` block;
* one loop nest per compute stage, in dependency order, with serial loops named after the
  fcompute arguments then the reduce axes (``i, j, k``);
* inside, a block named after the stage with iter vars ``vi, vj, vk`` (spatial, spatial,
  reduce) bound to the loops, inferred ``T.reads``/``T.writes``, an ``init`` storing the
  reduction's identity and the update ``Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]``;
* attributes ``global_symbol`` = name and ``tir.noalias`` = True.

Symbolic sizes (``n = te.var("n")``; ``te.placeholder((n, m))``) stay symbolic, as in TVM:
the buffers are shaped ``(n, m)``, the loops run to ``n`` and ``m`` (their variables and the
block axes take the size's dtype), and the sizes are bound from the arrays' shapes when the
function is called. A ``te.var`` listed in ``args`` is a scalar parameter.
"""
from __future__ import annotations

from typing import Any, Sequence

from engine.ir import expr as E
from engine.ir.buffer import Buffer, Range
from engine.ir.function import PrimFunc
from engine.ir.functor import Mutator, substitute
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, IterType,
                            IterVar, LetStmt, seq)

from .regions import infer_block_regions
from .tensor import (ComputeOp, PlaceholderOp, Reduce, ReduceAxis, TeError, Tensor,
                     identity_value)

__all__ = ["create_prim_func"]


class _Rewriter(Mutator):
    """Maps te buffers to the function's buffers and te variables to block iter vars."""

    def __init__(self, buffers: dict, vmap: dict):
        self.buffers = buffers
        self.vmap = vmap

    def visit_buffer(self, buf: Buffer) -> Buffer:
        return self.buffers.get(buf, buf)

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(v, v)

    visit_ReduceAxis = visit_Var


def _topo_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    state: dict[int, int] = {}  # 1 = visiting, 2 = done

    def visit(t: Tensor) -> None:
        s = state.get(id(t))
        if s == 2:
            return
        if s == 1:  # pragma: no cover - te graphs are acyclic by construction
            raise TeError(f"tensor {t.name!r} depends on itself")
        state[id(t)] = 1
        for inp in t.op.inputs:
            visit(inp)
        # the outputs of one stage together (a te.comm_reducer over several values)
        for u in getattr(t.op, "outputs", ()) or (t,):
            state[id(u)] = 2
            order.append(u)

    for t in outputs:
        visit(t)
    return order


def _unique(name: str, used: set[str]) -> str:
    if name not in used:
        used.add(name)
        return name
    k = 1
    while f"{name}_{k}" in used:
        k += 1
    out = f"{name}_{k}"
    used.add(out)
    return out


def _stage(t: Tensor, buffers: dict) -> Any:
    """The loop nest + block computing tensor ``t``."""
    op: ComputeOp = t.op
    body = op.body
    red = op.reduce_axis
    used: set[str] = set()
    loop_names = [_unique(v.name, used) for v in op.axis] + [_unique(a.name, used) for a in red]
    # extents and minimums as expressions: a symbolic size (te.var) stays one, and its
    # loop and axis take its dtype (int64 for te.var("n", "int64"), as TVM)
    extents = [_dim_expr(s) for s in t.shape] + [a.dom.extent for a in red]
    mins = [E.IntImm(e.dtype, 0) for e in extents[:len(t.shape)]] + \
        [E.IntImm(a.dom.extent.dtype, a.dom.min.value) if type(a.dom.min) is E.IntImm
         else a.dom.min for a in red]
    axes = list(op.axis) + list(red)
    loop_vars = [E.Var(n, ax.dtype) for n, ax in zip(loop_names, axes)]
    iter_vars = []
    for lv, lo, ext, d in zip(loop_vars, mins, extents, range(len(loop_vars))):
        kind = IterType.SPATIAL if d < len(t.shape) else IterType.REDUCE
        iter_vars.append(IterVar(E.Var("v" + lv.name, lv.dtype), Range(lo, ext), kind))
    vmap = {v: iv.var for v, iv in zip(list(op.axis) + list(red), iter_vars)}
    rw = _Rewriter(buffers, vmap)
    out_buf = buffers[t.buffer]
    out_idx = tuple(iv.var for iv in iter_vars[:len(t.shape)])
    reds = op.reductions
    if reds and not isinstance(reds[0].combiner, str):
        outs = op.outputs if len(reds) > 1 else (t,)
        block_body, init = _comm_reduce(reds, [buffers[u.buffer] for u in outs], out_idx, rw)
    elif isinstance(body, Reduce):
        src = rw.visit(body.source)
        old = E.BufferLoad(out_buf, out_idx)
        if body.combiner == "sum":
            new = E.binary(E.Add, old, src)
        elif body.combiner == "max":
            new = E.binary(E.Max, old, src)
        else:
            new = E.binary(E.Min, old, src)
        update = BufferStore(out_buf, new, out_idx)
        if body.condition is not None:
            update = IfThenElse(rw.visit(body.condition), update, None)
        init_val = (rw.visit(body.init) if body.init is not None
                    else identity_value(body.combiner, t.dtype))
        init = BufferStore(out_buf, init_val, out_idx)
        block_body = update
    else:
        init = None
        block_body = BufferStore(out_buf, rw.visit(body), out_idx)
    reads, writes = infer_block_regions(block_body, iter_vars, init)
    block = Block(iter_vars=tuple(iter_vars), reads=reads, writes=writes, name_hint=op.name,
                  body=block_body, init=init)
    stmt: Any = BlockRealize(tuple(loop_vars), E.IntImm("bool", 1), block)
    for lv, lo, ext in reversed(list(zip(loop_vars, mins, extents))):
        stmt = For(lv, lo, ext, ForKind.SERIAL, stmt)
    return stmt


def _comm_reduce(reds: tuple, bufs: list, idx: tuple, rw: _Rewriter) -> tuple:
    """``(update, init)`` of a :func:`~engine.te.comm_reducer` reduction into ``bufs``, as
    TVM writes it: one value — ``B[i] = combine(B[i], src)``; several — every combined
    value bound first (``v_<buffer>``), then each stored into its buffer."""
    first = reds[0]
    comb = first.combiner
    xs = [E.BufferLoad(b, idx) for b in bufs]
    ys = [rw.visit(s) for s in first.sources]
    vmap = {**dict(zip(comb.lhs, xs)), **dict(zip(comb.rhs, ys))}
    values = [substitute(r, vmap) for r in comb.result]
    if len(bufs) == 1:
        update: Any = BufferStore(bufs[0], values[0], idx)
    else:
        lets = [E.Var("v_" + b.name, v.dtype) for b, v in zip(bufs, values)]
        update = seq(*[BufferStore(b, v, idx) for b, v in zip(bufs, lets)])
        for var, v in reversed(list(zip(lets, values))):
            update = LetStmt(var, v, update)
    if first.condition is not None:
        update = IfThenElse(rw.visit(first.condition), update, None)
    starts = [rw.visit(first.init)] if first.init is not None else list(comb.identity)
    init = seq(*[BufferStore(b, v, idx) for b, v in zip(bufs, starts)])
    return update, init


def _dim_expr(s: Any) -> E.PrimExpr:
    """A tensor dimension as an expression: an int32 constant, or the symbolic size."""
    return E.IntImm("int32", s) if isinstance(s, int) else s


def create_prim_func(args: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """Build the TensorIR PrimFunc computing ``args`` (inputs and outputs, in order).

    Every placeholder the outputs depend on must be in ``args``; computed tensors that are
    not in ``args`` become intermediate buffers (``T.alloc_buffer`` in the root block).
    Stages appear in dependency order.  See the module docstring for the exact shape.
    """
    if isinstance(args, Tensor):
        args = [args]
    if not isinstance(args, (list, tuple)) or not args:
        raise TeError("create_prim_func needs a non-empty list of tensors, e.g. [A, B, C]")
    all_args = list(args)
    for a in all_args:
        if isinstance(a, E.Var) and not isinstance(a, ReduceAxis):
            continue  # a scalar parameter (TVM: a te.var in the argument list)
        if not isinstance(a, Tensor):
            raise TeError(f"create_prim_func: {a!r} is not a te tensor (made by "
                          "te.placeholder or te.compute) nor a te.var")
    if len({id(a) for a in all_args}) != len(all_args):
        raise TeError("create_prim_func: the same tensor is listed twice")
    if not isinstance(name, str) or not name.isidentifier():
        raise TeError(f"create_prim_func: name must be an identifier, got {name!r}")
    args = [a for a in all_args if isinstance(a, Tensor)]
    if not args:
        raise TeError("create_prim_func needs a non-empty list of tensors, e.g. [A, B, C]")
    order = _topo_order(args)
    arg_ids = {id(a) for a in args}
    for t in order:
        if isinstance(t.op, PlaceholderOp) and id(t) not in arg_ids:
            users = [u.name for u in order if t in u.op.inputs]
            raise TeError(f"placeholder {t.name!r} is read by {', '.join(users)} but is not "
                          f"in the argument list of create_prim_func; add it, e.g. "
                          f"create_prim_func([{t.name}, ...])")
    # fresh buffers for this function (names de-duplicated, params first)
    used: set[str] = set()
    buffers: dict[Buffer, Buffer] = {}
    for t in list(args) + [t for t in order if id(t) not in arg_ids]:
        buffers[t.buffer] = Buffer(_unique(t.buffer.name, used), t.shape, t.dtype)
    staged: set = set()
    stages = []
    for t in order:
        if isinstance(t.op, ComputeOp) and id(t.op) not in staged:
            staged.add(id(t.op))
            stages.append(_stage(t, buffers))
    if not stages:
        raise TeError("create_prim_func: nothing to compute — the arguments are all "
                      "placeholders; pass the te.compute outputs as well")
    allocs = tuple(buffers[t.buffer] for t in order
                   if isinstance(t.op, ComputeOp) and id(t) not in arg_ids)
    root = Block(iter_vars=(), reads=(), writes=(), name_hint="root", body=seq(*stages),
                 alloc_buffers=allocs)
    body = BlockRealize((), E.IntImm("bool", 1), root)
    params = tuple(buffers[a.buffer] if isinstance(a, Tensor) else a for a in all_args)
    return PrimFunc(name, params, body,
                    attrs=(("global_symbol", name), ("tir.noalias", True)))
