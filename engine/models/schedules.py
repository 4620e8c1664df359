"""The model's "scheduled" stage: a schedule for each TensorIR function of a model, made
only of the explorer's primitives and recorded as a trace (so the explorer can open the
function with it, and the same trace can be applied to every function of the same shape).

The recipe's first steps store the constant weights a linear layer reads as ``W[j, k]``
transposed (:func:`.layouts.transpose_weight`: ``transform_layout`` of the parameter with
``lambda j, k: (k, j)``, only for the parameters the caller says are constants — the
model's weights, which :func:`.layouts.with_schedules` then stores transposed once at build
time, as TVM's constant folding does — so ``x @ W.T`` is scheduled as ``x @ W``).

The rest is sized from the target's vector ISA (:func:`engine.codegen.isa.isa_of`: float32
lanes per register ``w``, vector registers), for each reduction block with one reduction
loop ``k`` whose last spatial loop ``j`` is contiguous in an operand (``B[k, j]``: a matmul,
or a linear layer whose constant weight the first steps transposed):

* ``j`` is split into ``j_0, j_1, j_2``: ``j_2`` one vector of ``w`` lanes (vectorized),
  ``j_1`` the vectors of a row of the register block (unrolled);
* with one row (batch 1, a matrix-vector product) the order is ``j_0, k, j_1, j_2``:
  ``registers / 4`` vectors of outputs accumulate over the whole of ``k`` (8 on AVX-512 and
  NEON, 4 on AVX2), each row of ``B`` read once, contiguously;
* with several rows, the rows loop ``i`` is split too and the order is
  ``i_0, j_0, k, i_1, j_1, j_2``: a register block of ``i_1 x j_1`` vectors — ``registers /
  2`` accumulators (4 x 4 vectors of 16 on AVX-512, 4 x 2 of 8 on AVX2), ``i_1`` unrolled —
  updated by one broadcast of ``A`` and one vector of ``B`` per FMA; the tile-row loop
  ``i_0`` runs in parallel when the product is large enough to pay for the launch; when
  the strip of ``B`` one column tile reads is more than half of L2, ``k`` is cut into
  panels and a block of rows goes inside each (``i_0, j_0, k_0, i_m, k_1, i_1, j_1, j_2``,
  sizes from L2: :func:`_cache_block`), so a panel serves many register blocks from L2;
* the element-wise blocks that consume it (the bias ``Z``, a fused ``relu``) are moved
  under ``j_0`` with ``reverse_compute_at`` and vectorized, so each tile is finished
  while in registers or L1;
* the reduction's init is decomposed out of ``k`` (``decompose_reduction``).

A reduction read as ``W[j, k]`` (a computed weight) gets the course's ``mm_relu`` shape
instead: ``j`` and ``k`` split by 8 and ordered ``j_0, k_0, j_1, k_1`` (a strip of dot
products), consumers under ``j_0``, the batch loop parallel.

A step the engine refuses ends the recipe for that block (the schedule keeps the steps
that applied).
"""
from __future__ import annotations

from engine.codegen.isa import VectorISA, isa_of
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, IterType
from engine.schedule import Schedule, ScheduleError

from .layouts import (constant_params, transpose_weight, transposed_weight_params,
                      with_schedules)

__all__ = ["default_schedule", "schedule_module", "RecipeSizes", "recipe_sizes"]

#: multiply-adds from which the rows of tiles run in parallel (below, a launch costs more
#: than the second core gains: the MLP's second layer, 64 x 128 x 10)
PARALLEL_MIN_FMAS = 1 << 20


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root"]


def _factor(extent: int) -> int | None:
    for f in (8, 4):
        if extent % f == 0 and extent > f:
            return f
    return None


def _divisor_at_most(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is at most ``most`` (at least 1)."""
    for d in range(max(1, min(n, most)), 0, -1):
        if n % d == 0:
            return d
    return 1


class RecipeSizes(tuple):
    """(width, vectors, rows): lanes of one vector, vectors per row of the register block,
    rows of the register block."""

    __slots__ = ()

    def __new__(cls, width: int, vectors: int, rows: int):
        return super().__new__(cls, (width, vectors, rows))

    width = property(lambda self: self[0])
    vectors = property(lambda self: self[1])
    rows = property(lambda self: self[2])


def recipe_sizes(isa: VectorISA, rows: int, cols: int) -> RecipeSizes:
    """The register block for an output of ``rows x cols`` on ``isa`` (module docstring):
    vectors of ``isa.lanes`` (or, when ``cols`` is not a multiple, the largest divisor of
    ``cols`` below it: 10 columns are one vector of 10), ``registers / 4`` vectors for one
    row, else ``registers / 2`` accumulators as rows x vectors."""
    width = isa.lanes if cols % isa.lanes == 0 else _divisor_at_most(cols, isa.lanes)
    per_row = cols // width
    if rows == 1:
        return RecipeSizes(width, _divisor_at_most(per_row, max(1, isa.registers // 4)), 1)
    # a width that is not a power of two is kept in power-of-two pieces (10 = 8 + 2)
    pieces = bin(width).count("1")
    accumulators = max(1, isa.registers // 2 // pieces)
    vectors = _divisor_at_most(per_row, 4 if isa.registers >= 32 else 2)
    return RecipeSizes(width, vectors, _divisor_at_most(rows, max(1, accumulators // vectors)))


def _cache_block(isa: VectorISA, sizes: RecipeSizes, rows: int, red: int
                 ) -> tuple[int, int]:
    """(rows, reduction) of the cache block of a batched product: the whole reduction
    (no panels) while the strip of B one column tile reads (``red x vectors x width``
    floats) fits half of L2 — the MLP's 784 x 64 strip, 200 KiB — else panels of ``tk``
    rows of B and blocks of ``ti`` rows of A, both up to the square of floats a quarter
    of L2 holds (256 with 1 MiB), so a panel is reused by ``ti / rows`` register blocks
    while in L2."""
    strip = red * sizes.vectors * sizes.width * 4
    if strip <= isa.l2 // 2 or rows <= sizes.rows:
        return rows, red
    side = 32
    while side * 2 <= 256 and (side * 2) ** 2 * 4 <= isa.l2 // 4:
        side *= 2
    tk = _divisor_at_most(red, side)
    groups = _divisor_at_most(rows // sizes.rows, max(1, side // sizes.rows))
    return sizes.rows * groups, (tk if tk > 1 else red)


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


def default_schedule(mod: IRModule, func_name: str | None = None,
                     isa: VectorISA | str | None = None,
                     weights: frozenset[int] | set[int] = frozenset()) -> Schedule:
    """A schedule of one TensorIR function (module docstring) for ``isa`` (a
    :class:`~engine.codegen.isa.VectorISA` or a target string; None: this machine);
    ``weights``: the positions of the buffer parameters its caller passes constants
    (:func:`.layouts.constant_params`), which it may store transposed; ``sch.trace``
    records it."""
    isa = isa_of(isa)
    func_name = func_name or mod.names()[0]
    sch = Schedule(mod)
    for pos, block_name in transposed_weight_params(mod[func_name]).items():
        if pos in weights:
            transpose_weight(sch, func_name, pos, block_name)
    func = sch.mod[func_name]
    for block in _blocks(func):
        if block.init is None:
            continue
        kinds = [iv.iter_type for iv in block.iter_vars]
        if kinds.count(IterType.REDUCE) != 1 or IterType.SPATIAL not in kinds:
            continue
        try:
            _tile(sch, func, block, func_name, isa)
        except ScheduleError:
            continue
    return sch


def _consumers_under(sch: Schedule, func: PrimFunc, block: Block, func_name: str, at,
                     width: int | None) -> None:
    """The element-wise consumers moved under ``at``; with ``width``, their innermost loop
    split by it and vectorized."""
    for name in _readers(func, block):
        handle = sch.get_block(name, func_name=func_name)
        sch.reverse_compute_at(handle, at)
        if width is not None and width > 1:
            inner = sch.get_loops(handle)[-1]
            extent = sch.get(inner).extent
            if getattr(extent, "value", 0) % width == 0:
                _, lanes = sch.split(inner, factors=[None, width])
                sch.vectorize(lanes)


def _tile(sch: Schedule, func: PrimFunc, block: Block, func_name: str,
          isa: VectorISA) -> None:
    handle = sch.get_block(block.name_hint, func_name=func_name)
    loops = sch.get_loops(handle)
    kinds = [iv.iter_type for iv in block.iter_vars]
    if len(loops) != len(kinds) or kinds[-1] != IterType.REDUCE:
        return
    if _j_contiguous(block):
        _tile_vectors(sch, func, block, func_name, isa, handle, loops)
    else:
        _tile_dot_strips(sch, func, block, func_name, handle, loops)


def _tile_vectors(sch: Schedule, func: PrimFunc, block: Block, func_name: str,
                  isa: VectorISA, handle, loops) -> None:
    """``B[k, j]``: vectors along ``j``, a register block of rows x vectors (docstring)."""
    ext = [iv.dom.extent.value for iv in block.iter_vars]
    n_spatial = len(ext) - 1
    cols, red = ext[n_spatial - 1], ext[-1]
    rows = ext[n_spatial - 2] if n_spatial >= 2 else 1
    outer = loops[:max(0, n_spatial - 2)]
    sizes = recipe_sizes(isa, rows, cols)
    if sizes.width < 2:
        return
    j0, j1, j2 = sch.split(loops[n_spatial - 1], factors=[None, sizes.vectors, sizes.width])
    k = loops[-1]
    fmas = red
    for e in ext[:-1]:
        fmas *= e
    ti, tk = _cache_block(isa, sizes, rows, red)
    if n_spatial >= 2 and rows > 1 and tk < red:
        # B's strip for one column tile is larger than half of L2: panels of k, and a
        # block of rows inside each panel so the panel is reused while in L2
        i0, i_mid, i1 = sch.split(loops[n_spatial - 2],
                                  factors=[None, ti // sizes.rows, sizes.rows])
        k, k1 = sch.split(k, factors=[None, tk])
        sch.reorder(*outer, i0, j0, k, i_mid, k1, i1, j1, j2)
    elif n_spatial >= 2 and rows > 1:
        i0, i1 = sch.split(loops[n_spatial - 2], factors=[None, sizes.rows])
        sch.reorder(*outer, i0, j0, k, i1, j1, j2)
    else:
        i0, i1 = (loops[n_spatial - 2] if n_spatial >= 2 else None), None
        sch.reorder(*loops[:n_spatial - 1], j0, k, j1, j2)
    _consumers_under(sch, func, block, func_name, j0, sizes.width)
    sch.decompose_reduction(handle, k)
    sch.vectorize(j2)
    if sizes.vectors > 1:
        sch.unroll(j1)
    if i1 is not None and sizes.rows > 1:
        sch.unroll(i1)
    if fmas >= PARALLEL_MIN_FMAS and rows > 1:
        par = [*outer, i0] if i0 is not None else list(outer)
        if tk < red:
            par.append(j0)      # few blocks of rows: their column tiles run in parallel too
        if par:
            sch.parallel(sch.fuse(*par) if len(par) > 1 else par[0])


def _tile_dot_strips(sch: Schedule, func: PrimFunc, block: Block, func_name: str, handle,
                     loops) -> None:
    """``W[j, k]``: the course's ``mm_relu`` shape, a strip of dot products along ``k``."""
    kinds = [iv.iter_type for iv in block.iter_vars]
    n_spatial = len(kinds) - 1
    ext = [iv.dom.extent.value for iv in block.iter_vars]
    fj, fk = _factor(ext[n_spatial - 1]), _factor(ext[-1])
    if fj is None or fk is None:
        return
    j0, j1 = sch.split(loops[n_spatial - 1], factors=[None, fj])
    k0, k1 = sch.split(loops[-1], factors=[None, fk])
    sch.reorder(*loops[:n_spatial - 1], j0, k0, j1, k1)
    _consumers_under(sch, func, block, func_name, j0, None)
    sch.decompose_reduction(handle, k0)
    if n_spatial >= 2 and ext[0] > 1:
        sch.parallel(loops[0])


def schedule_module(mod: IRModule, isa: VectorISA | str | None = None
                    ) -> tuple[IRModule, dict]:
    """Every TensorIR function of ``mod`` with its default schedule for ``isa`` (None: this
    machine), the constant weights it transposes stored transposed
    (:func:`.layouts.with_schedules`); also name -> trace."""
    isa = isa_of(isa)
    funcs, traces = {}, {}
    for name, f in mod.items():
        if isinstance(f, PrimFunc):
            sch = default_schedule(IRModule(((name, f),)), name, isa,
                                   constant_params(mod, name))
            funcs[name] = sch.mod[name]
            traces[name] = sch.trace
    return with_schedules(mod, funcs, traces), traces
