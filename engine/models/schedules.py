"""The model's "scheduled" stage: a schedule for each TensorIR function of a model, made
only of the explorer's primitives and recorded as a trace (so the explorer can open the
function with it, and the same trace can be applied to every function of the same shape).

The recipe, for each reduction block with one reduction loop (matmul, linear, conv2d):

* the last spatial loop ``j`` and the reduction loop ``k`` are split by 8 (when their
  extents allow) and ordered ``..., j_0, k_0, j_1, k_1`` — a tile of outputs accumulates
  over a strip of ``k``, the course's ``mm_relu`` schedule — or, when an operand is read
  as ``B[k, j]`` (a matmul), ``..., j_0, k_0, k_1, j_1`` with ``j_1`` vectorized;
* the element-wise blocks that consume it (the bias ``Z``, a fused ``relu``) are moved
  under ``j_0`` with ``reverse_compute_at``, so each tile is finished while in cache;
* the reduction's init is decomposed out of ``k_0`` (``decompose_reduction``);
* with a batch, the outermost loop runs in parallel.

A step the engine refuses ends the recipe for that block (the schedule keeps the steps
that applied).
"""
from __future__ import annotations

from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, IterType
from engine.schedule import Schedule, ScheduleError

__all__ = ["default_schedule", "schedule_module"]


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root"]


def _factor(extent: int) -> int | None:
    for f in (8, 4):
        if extent % f == 0 and extent > f:
            return f
    return None


def _readers(func: PrimFunc, producer: Block) -> list[str]:
    """Blocks after ``producer`` reading what it writes, transitively (element-wise chain)."""
    out, written = [], {r.buffer for r in producer.writes}
    for b in _blocks(func):
        if b is producer or b.init is not None:
            continue
        if any(r.buffer in written for r in b.reads):
            out.append(b.name_hint)
            written |= {w.buffer for w in b.writes}
    return out


def _j_contiguous(block: Block) -> bool:
    """True when an operand is read with the reduction axis then the last spatial axis as
    its last two indices (``B[vk, vj]``): then the tile of ``j`` is contiguous in it."""
    from engine.ir import expr as E

    spatial = [iv.var for iv in block.iter_vars if iv.iter_type == IterType.SPATIAL]
    reduce = [iv.var for iv in block.iter_vars if iv.iter_type == IterType.REDUCE]
    found: list = []
    post_order_visit(block.body, lambda n: found.append(n) if isinstance(n, E.BufferLoad)
                     else None)
    return any(len(ld.indices) >= 2 and ld.indices[-1] is spatial[-1]
               and ld.indices[-2] is reduce[0] for ld in found)


def default_schedule(mod: IRModule, func_name: str | None = None) -> Schedule:
    """A schedule of one TensorIR function (module docstring); ``sch.trace`` records it."""
    func_name = func_name or mod.names()[0]
    sch = Schedule(mod)
    func = mod[func_name]
    for block in _blocks(func):
        if block.init is None:
            continue
        kinds = [iv.iter_type for iv in block.iter_vars]
        if kinds.count(IterType.REDUCE) != 1 or IterType.SPATIAL not in kinds:
            continue
        try:
            _tile(sch, func, block, func_name)
        except ScheduleError:
            continue
    return sch


def _tile(sch: Schedule, func: PrimFunc, block: Block, func_name: str) -> None:
    handle = sch.get_block(block.name_hint, func_name=func_name)
    loops = sch.get_loops(handle)
    kinds = [iv.iter_type for iv in block.iter_vars]
    if len(loops) != len(kinds) or kinds[-1] != IterType.REDUCE:
        return
    n_spatial = len(kinds) - 1
    ext = [iv.dom.extent.value for iv in block.iter_vars]
    fj, fk = _factor(ext[n_spatial - 1]), _factor(ext[-1])
    if fj is None or fk is None:
        return
    j0, j1 = sch.split(loops[n_spatial - 1], factors=[None, fj])
    k0, k1 = sch.split(loops[-1], factors=[None, fk])
    row_major = _j_contiguous(block)
    if row_major:   # B[k, j]: the j tile is a vector of each row of B
        sch.reorder(*loops[:n_spatial - 1], j0, k0, k1, j1)
    else:           # W[j, k] (the course's linear): a strip of dot products along k
        sch.reorder(*loops[:n_spatial - 1], j0, k0, j1, k1)
    for name in _readers(func, block):
        sch.reverse_compute_at(sch.get_block(name, func_name=func_name), j0)
    sch.decompose_reduction(handle, k0)
    if row_major:
        sch.vectorize(j1)
    if n_spatial >= 2 and ext[0] > 1:
        sch.parallel(loops[0])


def schedule_module(mod: IRModule) -> tuple[IRModule, dict]:
    """Every TensorIR function of ``mod`` with its default schedule; also name -> trace."""
    funcs, traces = dict(mod.items()), {}
    for name, f in mod.items():
        if isinstance(f, PrimFunc):
            sch = default_schedule(IRModule(((name, f),)), name)
            funcs[name] = sch.mod[name]
            traces[name] = sch.trace
    return IRModule(tuple(funcs.items())), traces
