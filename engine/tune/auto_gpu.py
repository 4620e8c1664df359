"""The ``auto`` search space for a GPU target: MetaSchedule's GPU rules, simplified.

Applied to a schedule (after any fixed prefix) for a CUDA :class:`~engine.gpu.target.Target`,
block by block:

1. **auto-inline** — as on the CPU (:func:`engine.tune.auto._auto_inline`): an element-wise
   stage that is not an output and has no condition is inlined into its consumers;
2. **multi-level tiling** (MetaSchedule's ``SSSRRSRS``) of every block with spatial and
   reduction axes (matmul, conv2d, a row reduction): each spatial loop is split into five
   factors ``[blockIdx, vthread, threadIdx, serial, inner]`` (``sample_perfect_tile``, the
   innermost at most :data:`INNER_TILE`; the vthread factors may be 1), each reduction loop
   into three ``[outer, mid, inner]``. The ``S0`` loops are fused and bound to
   ``blockIdx.x``, the ``S2`` loops to ``threadIdx.x``, the ``S1`` loops to ``vthread.x``.
   One change from MetaSchedule's order ``S0 S1 S2 R0 R1 S3 R2 S4``: the vthread level goes
   below the reduction's outer loops, ``S0 S2 R0 R1 S1 S3 R2 S4``. TVM merges vthreads into
   each thread (its vthread injection); the engine's lowering runs a vthread loop as a
   serial loop, so under MetaSchedule's order each vthread would fetch the shared tiles again
   and the shared buffers could not be compacted per reduction step. Placed inside, the
   vthread level is a strided register tile, as in TVM; for ``reverse_compute_at`` to see one
   box per thread a spatial axis has a vthread factor over 1 only when its thread factor is
   1 (a constraint of the joint draw below). The result
   is accumulated in registers: ``cache_write(..., "local")`` written back per thread
   (``reverse_compute_at`` at the thread loop) — or, when the block's only consumer is an
   element-wise output stage (mm_relu's ReLU), that stage is moved there instead and the
   block's own buffer made ``local`` (``set_scope``). **Cooperative fetching**: every input
   is read into a ``"shared"`` tile at the innermost ``R0`` loop (``cache_read`` +
   ``compute_at``), the fetch loops fused and split ``[None, threads, vector]``, the vector
   part vectorized (its length ``sample_categorical`` among 1, 2, 4 — those that divide the
   tile into whole rounds of the block's threads) and the thread part bound to
   ``threadIdx.x``. Last, the initialisation is separated (``decompose_reduction`` at
   ``R0``);
3. **element-wise blocks** (and any other block left): all loops fused, split
   ``[None, threads]`` with the thread count ``sample_categorical`` among 32..1024 (at most
   the target's ``max_threads_per_block``), bound to ``blockIdx.x`` / ``threadIdx.x``. Each
   block is then its own kernel (its producer's result goes through global memory).

**Sensible sizes.** The five-way tiles of one block are drawn *jointly* (from the
schedule's seeded generator, :meth:`Schedule.fork_seed`) until the thread block has between
a warp and the target's ``max_threads_per_block`` threads, at most :data:`MAX_VTHREADS`
virtual threads and :data:`MAX_ACCUMULATORS` accumulators per thread, the shared tiles fit
in the target's ``max_shared_memory_per_block`` (estimated from the block's read regions),
and each shared tile is a whole number of rounds of the block's threads; the draw is then given to ``sample_perfect_tile`` as its
decision, so the trace records it like any sample and the search can mutate it. (After
:data:`JOINT_TRIES` draws without such a tiling the last draw is used.)

**Refusals.** A mutated trace is replayed as it is, so a child can be illegal: a thread
count over 1024 or a thread axis of two extents in one kernel (``bind`` refuses:
ScheduleError, the child is dropped), too many threads or too much shared memory for the
target (``build_gpu`` refuses: BuildError, a failed candidate). The cooperative fetch is
split by the block's thread count as a constant (the engine's split takes sampled factors
one by one, not their product), so a mutation that changes a thread factor is refused by
``bind`` and the search draws another child.

**Not done** (MetaSchedule does them): an unroll pragma (the lowering has none; the inner
loops stay serial loops, which LLVM unrolls), cross-thread reductions (a block with no
spatial axis is refused: the engine builds none), tensor cores.

**Known gaps**: a fetch of a three-dimensional tile (batch matmul) is refused by ``bind``
(the race check does not see through the fused, split index), and softmax's statistics
stages are refused by ``reverse_compute_at``: the space gives no candidate for those yet.
"""
from __future__ import annotations

import math
import random
from typing import Any

from engine.ir import expr as E
from engine.ir.functor import collect_vars
from engine.ir.stmt import Block, ForKind
from engine.schedule import Schedule, ScheduleError
from engine.schedule.primitives.sampling import sample_perfect_tile

from .auto import _auto_inline, _fused_consumer, _kinds, _leaf_blocks, _try

__all__ = ["apply_auto_gpu", "THREAD_CHOICES", "INNER_TILE"]

#: the innermost spatial factor (per thread, unrolled by LLVM) and reduction factor
INNER_TILE = 4
INNER_REDUCE = 8
#: threads per block an element-wise kernel may use (those up to the target's maximum)
THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)
#: vector lengths of the cooperative fetch
VECTOR_CHOICES = (1, 2, 4)
#: bounds of the joint draw of a block's tiles
MAX_VTHREADS = 8
MAX_ACCUMULATORS = 128
JOINT_TRIES = 500


class _Limits:
    def __init__(self, target: Any):
        from engine.gpu.target import Target  # noqa: PLC0415 - the space is built once
        t = target if isinstance(target, Target) else Target(str(target))
        self.max_threads = int(t.attrs["max_threads_per_block"])
        self.warp = int(t.attrs.get("thread_warp_size", 32))
        self.max_shared = int(t.attrs["max_shared_memory_per_block"])


def _const(x: Any) -> int | None:
    return E.as_const_int(x)


def _loop_of_iter(sch: Schedule, block, blk: Block, loops: list) -> list[int] | None:
    """For each iter var of the block, the index of the loop it is bound to (None when a
    binding is not a plain loop variable)."""
    from engine.ir.stmt import BlockRealize  # noqa: PLC0415
    realize = None
    func = sch.mod[sch.func_name]
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            if s.block is blk:
                realize = s
                break
            stack.append(s.block.body)
        elif hasattr(s, "seq"):
            stack.extend(s.seq)
        elif hasattr(s, "then_case"):
            stack.append(s.then_case)
            if s.else_case is not None:
                stack.append(s.else_case)
        elif hasattr(s, "body"):
            stack.append(s.body)
    if realize is None:
        return None
    loop_vars = [sch.get(lp).loop_var for lp in loops]
    out = []
    for val in realize.iter_values:
        if not isinstance(val, E.Var):
            return None
        idx = next((n for n, v in enumerate(loop_vars) if v is val), None)
        if idx is None:
            return None
        out.append(idx)
    return out


def _shared_tiles(blk: Block, tile_of_var: dict) -> list[int] | None:
    """Elements of each input's shared tile: per index dimension, the span of its
    variables' tiles (``A[vi, vk]``: tile(vi) x tile(vk); ``vh + vr``: their sum - 1)."""
    out = []
    for r in blk.reads:
        size = 1
        for rng in r.region:
            ext = _const(rng.extent)
            if ext is None:
                return None
            names = {v.name for v in collect_vars(rng.min)}
            size *= max(1, ext + sum(tile_of_var.get(n, 1) - 1 for n in names))
        out.append(size)
    return out


def _draw_tiles(rng: random.Random, s_ext: list[int], r_ext: list[int], blk: Block,
                s_names: list[str], r_names: list[str], lim: _Limits):
    """A joint draw of the block's tiles within the sensible sizes (see the module doc)."""
    total = math.prod(s_ext)
    low = min(lim.warp, total)
    itemsize = 4
    last = None
    for _ in range(JOINT_TRIES):
        ts = [sample_perfect_tile(rng, e, 5, INNER_TILE) for e in s_ext]
        tr = [sample_perfect_tile(rng, e, 3, INNER_REDUCE) for e in r_ext]
        last = (ts, tr)
        threads = math.prod(t[2] for t in ts)
        vthreads = math.prod(t[1] for t in ts)
        acc = math.prod(t[1] * t[3] * t[4] for t in ts)
        if not (low <= threads <= lim.max_threads and vthreads <= MAX_VTHREADS
                and acc <= MAX_ACCUMULATORS):
            continue
        if any(t[1] > 1 and t[2] > 1 for t in ts):  # a thread's tile would not be one box
            continue
        tile = {n: t[1] * t[2] * t[3] * t[4] for n, t in zip(s_names, ts)}
        tile.update({n: t[1] * t[2] for n, t in zip(r_names, tr)})
        tiles = _shared_tiles(blk, tile)
        if tiles is None:
            return last
        if sum(tiles) * itemsize > lim.max_shared:
            continue
        if any(t % threads for t in tiles):
            continue
        return last
    return last


def _multi_level_tiling(sch: Schedule, name: str, lim: _Limits) -> tuple[bool, str | None]:
    """The ``SSSRRSRS`` rule on block ``name``: (False, None) when the block does not fit
    it, else (True, the name of the consumer moved into its threads or None)."""
    block = sch.get_block(name)
    blk = sch.get(block)
    loops = sch.get_loops(block)
    kinds = _kinds(blk)
    if len(loops) != len(kinds) or any(sch.get(lp).kind is not ForKind.SERIAL for lp in loops):
        return False, None
    order = _loop_of_iter(sch, block, blk, loops)
    if order is None or sorted(order) != list(range(len(loops))):
        return False, None
    extents = [_const(sch.get(lp).extent) for lp in loops]
    if any(e is None for e in extents):
        return False, None
    s_idx = [order[n] for n, k in enumerate(kinds) if k == "S"]
    r_idx = [order[n] for n, k in enumerate(kinds) if k == "R"]
    s_names = [iv.var.name for iv, k in zip(blk.iter_vars, kinds) if k == "S"]
    r_names = [iv.var.name for iv, k in zip(blk.iter_vars, kinds) if k == "R"]
    rng = random.Random(sch.fork_seed())
    ts, tr = _draw_tiles(rng, [extents[i] for i in s_idx], [extents[i] for i in r_idx],
                         blk, s_names, r_names, lim)
    levels_s: list[list] = [[] for _ in range(5)]
    for i, d in zip(s_idx, ts):
        lp = loops[i]
        parts = sch.split(lp, factors=sch.sample_perfect_tile(
            lp, n=5, max_innermost_factor=INNER_TILE, decision=d))
        for lvl in range(5):
            levels_s[lvl].append(parts[lvl])
    levels_r: list[list] = [[] for _ in range(3)]
    for i, d in zip(r_idx, tr):
        lp = loops[i]
        parts = sch.split(lp, factors=sch.sample_perfect_tile(
            lp, n=3, max_innermost_factor=INNER_REDUCE, decision=d))
        for lvl in range(3):
            levels_r[lvl].append(parts[lvl])
    # S0 S2 R0 R1 S1 S3 R2 S4: the vthread level below the reduction's outer loops (see
    # the module docstring: here a vthread loop is a serial loop)
    sch.reorder(*levels_s[0], *levels_s[2], *levels_r[0], *levels_r[1], *levels_s[1],
                *levels_s[3], *levels_r[2], *levels_s[4])

    def fused(level: list):
        return sch.fuse(*level) if len(level) > 1 else level[0]
    bx, vx, tx = fused(levels_s[0]), fused(levels_s[1]), fused(levels_s[2])
    sch.bind(bx, "blockIdx.x")
    sch.bind(vx, "vthread.x")
    sch.bind(tx, "threadIdx.x")
    threads = math.prod(t[2] for t in ts)
    # the write-back per thread: the fused element-wise consumer, or a local cache
    consumer = _fused_consumer(sch, block)
    fused_name = None
    if consumer is not None and _applies(sch.reverse_compute_at, consumer, tx):
        fused_name = sch.get(consumer).name_hint
        _try(sch.set_scope, block, 0, "local")
    else:
        writer = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(writer, tx)
    # cooperative fetching of every input into shared memory at the innermost R0 loop
    at = levels_r[0][-1]
    at_var = sch.get(at).loop_var
    for idx in range(len(sch.get(block).reads)):
        cache = sch.cache_read(block, idx, "shared")
        sch.compute_at(cache, at)
        cloops = sch.get_loops(cache)
        pos = next(n for n, lp in enumerate(cloops) if sch.get(lp).loop_var is at_var)
        inner = cloops[pos + 1:]
        if not inner:
            continue
        fetch = sch.fuse(*inner) if len(inner) > 1 else inner[0]
        ext = _const(sch.get(fetch).extent) or 0
        choices = [v for v in VECTOR_CHOICES if ext and ext % (threads * v) == 0] or [1]
        vec = sch.sample_categorical(choices, [1.0 / len(choices)] * len(choices))
        _, t_part, v_part = sch.split(fetch, factors=[None, threads, vec])
        sch.vectorize(v_part)
        sch.bind(t_part, "threadIdx.x")
    sch.decompose_reduction(block, levels_r[0][0])
    return True, fused_name


def _applies(fn, *args) -> bool:
    """Apply a primitive if the program allows it: whether it did."""
    try:
        fn(*args)
        return True
    except ScheduleError:
        return False


def _thread_bind(sch: Schedule, name: str, lim: _Limits) -> None:
    """Element-wise (or any remaining) block: fuse its loops, ``[None, threads]``, bind."""
    block = sch.get_block(name)
    blk = sch.get(block)
    loops = sch.get_loops(block)
    if not loops or any(sch.get(lp).kind is ForKind.THREAD_BINDING for lp in loops):
        return  # bound by an earlier rule (a fused consumer) or by the prefix
    kinds = _kinds(blk)
    if "S" not in kinds:
        raise ScheduleError(f"block {name} has no spatial axis to spread over GPU threads "
                            "(a reduction to one value needs a cross-thread reduction, which "
                            "the engine does not build)")
    n_spatial = len(loops)
    if "R" in kinds:  # the spatial loops outermost, the reduction kept serial in a thread
        n_spatial = 0
        for lp in loops:
            lv = sch.get(lp).loop_var
            if any(iv.iter_type.value == "R" and lv in collect_vars(v) for iv, v in
                   _iter_bindings(sch, blk)):
                break
            n_spatial += 1
        if n_spatial == 0:
            raise ScheduleError(f"block {name}: its outermost loop runs a reduction axis, "
                                "which GPU threads cannot share")
    outer = loops[:n_spatial]
    fusedl = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    ext = _const(sch.get(fusedl).extent) or lim.max_threads
    choices = [t for t in THREAD_CHOICES if t <= lim.max_threads and t <= max(ext, 32)]
    choices = choices or [min(THREAD_CHOICES[0], lim.max_threads)]
    threads = sch.sample_categorical(choices, [1.0 / len(choices)] * len(choices))
    b_part, t_part = sch.split(fusedl, factors=[None, threads])
    sch.bind(b_part, "blockIdx.x")
    sch.bind(t_part, "threadIdx.x")


def _iter_bindings(sch: Schedule, blk: Block) -> list:
    from engine.ir.stmt import BlockRealize  # noqa: PLC0415
    stack = [sch.mod[sch.func_name].body]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            if s.block is blk:
                return list(zip(blk.iter_vars, s.iter_values))
            stack.append(s.block.body)
        elif hasattr(s, "seq"):
            stack.extend(s.seq)
        elif hasattr(s, "then_case"):
            stack.append(s.then_case)
        elif hasattr(s, "body"):
            stack.append(s.body)
    return []


def apply_auto_gpu(sch: Schedule, target: Any) -> None:
    """Apply the GPU ``auto`` rules (see the module docstring) for ``target``."""
    lim = _Limits(target)
    _auto_inline(sch)
    names = _leaf_blocks(sch)
    tiled = []
    for name in names:
        k = _kinds(sch.get(sch.get_block(name)))
        if "R" in k and "S" in k:
            tiled.append(name)
    done = set()
    for name in reversed(tiled):
        ok, fused = _multi_level_tiling(sch, name, lim)
        if ok:
            done.add(name)
            if fused is not None:
                done.add(fused)
    for name in _leaf_blocks(sch):
        if name not in done:
            _thread_bind(sch, name, lim)
