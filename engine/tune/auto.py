"""The ``auto`` search space: design-space rules like MetaSchedule's for CPU.

Applied to a schedule (after any fixed prefix), block by block:

1. **auto-inline** — an element-wise stage that is not an output and has no condition in
   its body is inlined into its consumers (``compute_inline``; the MLP's ``relu``), except
   one that calls an expensive intrinsic (``exp``, ``log``, ...) and feeds more than one
   consumer, which would each compute it again (softmax's ``exp``: its location is
   sampled by rule 3 instead);
2. **multi-level tiling** (``SSRSRS``) of every block that reduces and has at least two
   spatial loops (matmul, conv2d, batch matmul, depthwise): each spatial loop is split into
   four sampled factors (``sample_perfect_tile``), each reduction loop into two, and the
   loops are reordered ``S0 S1 R0 S2 R1 S3`` (the innermost tiles at most what the target's
   registers hold: :func:`tile_limits` of :func:`engine.codegen.isa.isa_of`). The results
   are written back per tile: the block's element-wise consumer (mm_relu's ReLU) is moved
   into the tile (``reverse_compute_at``), or else the block accumulates into a tile-sized
   buffer (``cache_write``) written back per tile; the level of the write-back (after
   ``S0`` or after ``S1``) is sampled (``sample_categorical``). Then the ``S0`` loops are
   fused and run in parallel (from :data:`PARALLEL_MIN_WORK` iterations), the innermost
   spatial loop is vectorized, the other ``S3`` loops are unrolled, and the
   initialisation is separated (``decompose_reduction``); a matrix read as ``B[k, j]`` is
   read in place or first packed into contiguous panels (sampled: ``_maybe_pack``);
3. **random compute location** — every other reduction and every remaining producer
   (softmax's max and sum, layernorm's row statistics, the convolution's padding) is moved
   to a sampled location (``sample_compute_location``: under a loop of its consumer, the
   root, or inlined);
4. **parallel + vectorize** — each remaining block's outermost loop runs in parallel (an
   element-wise one from :data:`PARALLEL_MIN_ELEMENTS` elements); an element-wise
   block's innermost loop is split by a sampled factor and its inner part vectorized.

Every choice is a sampling instruction, so the evolutionary search can mutate it; a draw the
program does not allow is refused by the primitive and the search draws again.
"""
from __future__ import annotations

from typing import Any

from engine.codegen.isa import VectorISA, isa_of
from engine.ir import expr as E
from engine.ir.stmt import Block, BlockRealize, ForKind
from engine.schedule import Schedule, ScheduleError

__all__ = ["apply_auto", "tile_limits"]

#: innermost tile of the vectorized spatial loop / of the other spatial loops (unrolled)
#: on AVX-512 (16 lanes, 32 registers); :func:`tile_limits` derives them for any ISA
VECTOR_TILE = 64
UNROLL_TILE = 8
UNROLL_TILE_MANY = 4
#: intrinsics too costly to compute twice: a stage calling one that feeds more than one
#: consumer is not inlined (MetaSchedule's AutoInline refuses ``tir.exp`` on CPU)
EXPENSIVE_OPS = ("exp", "exp2", "exp10", "log", "log2", "log10", "tanh", "erf", "pow")

#: iterations of a tiled block, elements of an element-wise one, from which its outer loop
#: runs in parallel: below, waking the second core costs more than it gains (the MLP at
#: batch 1, 128 x 784 multiply-adds, ran 4 µs serial and far slower in parallel on a
#: loaded machine); a reduction that is not tiled keeps its parallel rows
PARALLEL_MIN_WORK = 1 << 20
PARALLEL_MIN_ELEMENTS = 1 << 16


def _work(blk: Block) -> int | None:
    """The product of the block's iteration extents (None when one is symbolic)."""
    total = 1
    for iv in blk.iter_vars:
        ext = iv.dom.extent
        if not isinstance(ext, E.IntImm):
            return None
        total *= int(ext.value)
    return total


def _worth_parallel(blk: Block, least: int) -> bool:
    work = _work(blk)
    return work is None or work >= least


def tile_limits(isa: VectorISA | str | None = None) -> tuple[int, int, int, int]:
    """(vector tile, unroll tile, unroll tile with more than two spatial loops, reduction
    tile): the largest innermost tiles the multi-level tiling samples on ``isa`` (None:
    this machine). The vectorized tile is 4 vectors with 32 registers, else 2 (64 floats
    on AVX-512, 16 on AVX2, 16 on NEON); the unrolled rows ``registers / 4`` (``/ 8`` with
    more spatial loops), so the accumulators of a tile fit the registers; the inner
    reduction tile a power of two up to 256 whose square of floats fits a quarter of L2
    (256 with 1 MiB: the block of an operand read in place, rows a whole row apart, stays
    in L2 — the tiled presets' ``tiled_sizes``)."""
    isa = isa_of(isa)
    vectors = 4 if isa.registers >= 32 else 2
    reduction = 64
    while reduction * 2 <= 256 and (reduction * 2) ** 2 * 4 <= isa.l2 // 4:
        reduction *= 2
    return (isa.lanes * vectors, max(1, isa.registers // 4), max(1, isa.registers // 8),
            reduction)


def _leaf_blocks(sch: Schedule) -> list[str]:
    """Names of the blocks that hold a store, in execution order."""
    names: list[str] = []
    stack = [sch.mod[sch.func_name].body]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            blk = s.block
            if blk.name_hint != "root" and not _has_child_block(blk.body):
                names.append(blk.name_hint)
            else:
                stack.append(blk.body)
        elif hasattr(s, "seq"):
            stack.extend(reversed(s.seq))
        elif hasattr(s, "then_case"):
            if s.else_case is not None:
                stack.append(s.else_case)
            stack.append(s.then_case)
        elif hasattr(s, "body"):
            stack.append(s.body)
    return names


def _has_child_block(stmt: Any) -> bool:
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            return True
        if hasattr(s, "seq"):
            stack.extend(s.seq)
        elif hasattr(s, "then_case"):
            stack.append(s.then_case)
        elif hasattr(s, "body"):
            stack.append(s.body)
    return False


def _has_condition(blk: Block) -> bool:
    found = []

    def visit(e: Any) -> None:
        if isinstance(e, E.Select) or (isinstance(e, E.Call) and "if_then_else" in e.op):
            found.append(e)
    from engine.ir.functor import post_order_visit  # noqa: PLC0415
    post_order_visit(blk.body, visit)
    return bool(found)


def _is_output(sch: Schedule, blk: Block) -> bool:
    params = {p.name for p in sch.mod[sch.func_name].params}
    return any(w.buffer.name in params for w in blk.writes)


def _kinds(blk: Block) -> str:
    return "".join(iv.iter_type.value for iv in blk.iter_vars)


def _is_tiled(blk: Block) -> bool:
    k = _kinds(blk)
    return "R" in k and k.count("S") >= 2


def _try(fn, *args, **kwargs):
    """Apply a primitive if the program allows it (a refusal leaves the trace unchanged)."""
    try:
        return fn(*args, **kwargs)
    except ScheduleError:
        return None


# --------------------------------------------------------------------------- rules
def _calls_expensive(blk: Block) -> bool:
    """Whether the block's body calls an expensive intrinsic (``exp``: one libm call per
    element, the cost of softmax)."""
    found = []

    def visit(e: Any) -> None:
        if isinstance(e, E.Call) and e.op.split(".")[-1] in EXPENSIVE_OPS:
            found.append(e)
    from engine.ir.functor import post_order_visit  # noqa: PLC0415
    post_order_visit(blk.body, visit)
    return bool(found)


def _auto_inline(sch: Schedule) -> None:
    for name in _leaf_blocks(sch):
        block = sch.get_block(name)
        blk = sch.get(block)
        if "R" in _kinds(blk) or _is_output(sch, blk) or _has_condition(blk):
            continue
        if not blk.reads:
            continue
        if _calls_expensive(blk) and len(sch.get_consumers(block)) > 1:
            continue  # inlined, each consumer would compute it again (softmax's exp)
        _try(sch.compute_inline, block)


def _fused_consumer(sch: Schedule, block) -> Any:
    """The element-wise output stage that reads only this block's result (mm_relu's C)."""
    consumers = sch.get_consumers(block)
    if len(consumers) != 1:
        return None
    c = sch.get(consumers[0])
    if "R" in _kinds(c) or not _is_output(sch, c):
        return None
    return consumers[0]


def _split_spatial(sch: Schedule, lp, most: int, lanes: int | None) -> list:
    """``lp`` split into four sampled factors, the innermost at most ``most``; with
    ``lanes`` (and an extent it divides) the innermost is a whole number of vectors: a
    fixed ``lanes``-wide split fused under the sampled innermost factor."""
    extent = sch.get(lp).extent
    if lanes and isinstance(extent, E.IntImm) and extent.value % lanes == 0 \
            and extent.value >= lanes and most >= lanes:
        outer, lane = sch.split(lp, factors=[None, lanes])
        parts = sch.split(outer, factors=sch.sample_perfect_tile(
            outer, n=4, max_innermost_factor=max(1, most // lanes)))
        return parts[:3] + [sch.fuse(parts[3], lane)]
    return list(sch.split(lp, factors=sch.sample_perfect_tile(lp, n=4,
                                                                max_innermost_factor=most)))


def _multi_level_tiling(sch: Schedule, name: str, limits: tuple,
                        lanes: int | None = None) -> None:
    block = sch.get_block(name)
    blk = sch.get(block)
    loops = sch.get_loops(block)
    kinds = _kinds(blk)
    if len(loops) != len(kinds):
        return  # already restructured (a prefix): leave it to the simple rules
    spatial = [lp for lp, k in zip(loops, kinds) if k == "S"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "R"]
    vector_tile, unroll_tile, unroll_tile_many, reduction_tile = limits
    inner_most = unroll_tile if len(spatial) <= 2 else unroll_tile_many
    levels_s: list[list] = [[], [], [], []]
    for n, lp in enumerate(spatial):
        last = n == len(spatial) - 1
        most = vector_tile if last else inner_most
        parts = _split_spatial(sch, lp, most, lanes if last else None)
        for lvl in range(4):
            levels_s[lvl].append(parts[lvl])
    levels_r: list[list] = [[], []]
    for lp in reduce:
        parts = sch.split(lp, factors=sch.sample_perfect_tile(
            lp, n=2, max_innermost_factor=reduction_tile))
        levels_r[0].append(parts[0])
        levels_r[1].append(parts[1])
    sch.reorder(*levels_s[0], *levels_s[1], *levels_r[0], *levels_s[2], *levels_r[1],
                *levels_s[3])
    # the write-back per tile: after S0 or after S1 (sampled)
    level = sch.get(sch.sample_categorical([0, 1], [0.5, 0.5]))
    at = levels_s[int(level)][-1]
    consumer = _fused_consumer(sch, block)
    if consumer is not None:
        sch.reverse_compute_at(consumer, at)
        writer = consumer
    else:
        writer = sch.cache_write(block, 0, "global")
        sch.reverse_compute_at(writer, at)
    # parallel outer tiles, vectorized and unrolled inner tiles
    outer = sch.fuse(*levels_s[0]) if len(levels_s[0]) > 1 else levels_s[0][0]
    if _worth_parallel(blk, PARALLEL_MIN_WORK):
        sch.parallel(outer)
    sch.vectorize(levels_s[3][-1])
    for lp in levels_s[3][:-1]:
        if int(sch.get(lp).extent.value) > 1:
            sch.unroll(lp)
    wloops = sch.get_loops(writer)
    _try(sch.vectorize, wloops[-1])
    _maybe_pack(sch, block, levels_s, limits, lanes)
    sch.decompose_reduction(block, levels_r[0][0])


def _packable_read(blk: Block) -> int | None:
    """The position among the block's reads of a matrix read as ``B[vk, vj]`` (``vk`` a
    reduction axis, ``vj`` the last spatial one), or None."""
    spatial = [iv.var for iv in blk.iter_vars if iv.iter_type.value == "S"]
    reduce = {iv.var for iv in blk.iter_vars if iv.iter_type.value == "R"}
    if len(spatial) != 2 or not reduce:
        return None
    from engine.ir.functor import post_order_visit  # noqa: PLC0415
    for idx, region in enumerate(blk.reads):
        if len(region.buffer.shape) != 2:
            continue
        loads: list = []
        post_order_visit(blk.body, lambda e, b=region.buffer: loads.append(e)
                         if isinstance(e, E.BufferLoad) and e.buffer is b else None)
        if loads and all(len(ld.indices) == 2 and ld.indices[0] in reduce
                         and ld.indices[1] is spatial[-1] for ld in loads):
            return idx
    return None


def _maybe_pack(sch: Schedule, block, levels_s: list, limits: tuple,
                whole_vectors: int | None = None) -> None:
    """Rule 2's last, sampled choice for a matmul's ``B[k, j]``: read it as it is, or
    first pack it into contiguous panels as wide as the columns one reduction panel
    updates (``cache_read`` + ``transform_layout`` ``(j // w, k, j % w)``, the copy
    vectorized and parallel: matmul-best's packing), so a panel is one stream and its rows
    no longer fall on the same L1 sets."""
    idx = _packable_read(sch.get(block))
    if idx is None:
        return
    if int(sch.get(sch.sample_categorical([0, 1], [0.5, 0.5]))) != 1:
        return
    width = (int(sch.get(levels_s[2][-1]).extent.value)
             * int(sch.get(levels_s[3][-1]).extent.value))
    lanes = max(1, min(width, limits[0]))
    while width % lanes or (whole_vectors and width % whole_vectors == 0
                            and lanes % whole_vectors):
        lanes -= 1
    try:
        pack = sch.cache_read(block, idx, "global")
        sch.transform_layout(pack, ("write", 0),
                             f"lambda k, j: (j // {width}, k, j % {width})")
        loops = sch.get_loops(pack)
        if len(loops) == 2:
            pk, pj = loops
            inner = sch.split(pj, factors=[None, max(1, width // lanes), lanes])[-1]
            sch.vectorize(inner)
            sch.parallel(pk)
    except ScheduleError:
        return   # the program keeps what applied (still correct)


def _compute_locations(sch: Schedule, names: list[str]) -> None:
    for name in names:
        block = sch.get_block(name)
        if not sch.get_consumers(block):
            continue
        loc = sch.sample_compute_location(block)
        sch.compute_at(block, loc)


def _parallel_vectorize(sch: Schedule, names: list[str], vector_tile: int) -> None:
    alive = set(_leaf_blocks(sch))
    for name in reversed(names):
        if name not in alive:
            continue  # inlined
        block = sch.get_block(name)
        blk = sch.get(block)
        loops = sch.get_loops(block)
        if not loops:
            continue
        if "R" not in _kinds(blk):
            inner = loops[-1]
            extent = sch.get(inner).extent
            if isinstance(extent, E.IntImm) and extent.value > 1 and \
                    sch.get(inner).kind is ForKind.SERIAL:
                if len(loops) == 1:
                    parts = sch.split(inner, factors=sch.sample_perfect_tile(
                        inner, n=3, max_innermost_factor=vector_tile))
                    loops = parts
                else:
                    parts = sch.split(inner, factors=sch.sample_perfect_tile(
                        inner, n=2, max_innermost_factor=vector_tile))
                    loops = loops[:-1] + parts
                _try(sch.vectorize, parts[-1])
        if sch.get(loops[0]).kind is ForKind.SERIAL and (
                "R" in _kinds(blk) or _worth_parallel(blk, PARALLEL_MIN_ELEMENTS)):
            _try(sch.parallel, loops[0])


def apply_auto(sch: Schedule, isa: VectorISA | str | None = None,
               whole_vectors: bool = False) -> None:
    """Apply the ``auto`` rules (see the module docstring) to ``sch``, with tiles sized for
    ``isa`` (:func:`tile_limits`; None: this machine). ``whole_vectors``: the vectorized
    innermost tile of a tiled block (and the packing copy) is a multiple of the ISA's
    lanes whenever the loop allows it — for a space built for another target (the ARM
    board), whose candidates cannot be timed here, so narrow vectors are never weeded out
    by measuring."""
    limits = tile_limits(isa)
    lanes = isa_of(isa).lanes if whole_vectors else None
    _auto_inline(sch)
    names = _leaf_blocks(sch)
    tiled = [n for n in names if _is_tiled(sch.get(sch.get_block(n)))]
    fused = set()
    for name in tiled:
        c = _fused_consumer(sch, sch.get_block(name))
        if c is not None:
            fused.add(sch.get(c).name_hint)
    rest = [n for n in names if n not in tiled and n not in fused]
    for name in reversed(tiled):
        _multi_level_tiling(sch, name, limits, lanes)
    producers = [n for n in rest if sch.get_consumers(sch.get_block(n))]
    _compute_locations(sch, producers)
    _parallel_vectorize(sch, rest, limits[0])
