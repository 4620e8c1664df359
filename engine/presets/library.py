"""The shipped presets. Each recipe calls toolbar primitives only, reading sizes from the
workload parameters so it replays (correctly, if not fast) at small sizes too.

The tiled and best matmul recipes size their register blocks from the vector ISA they are
applied for (``Preset.apply(sch, params, isa=...)``; None: this machine,
:func:`engine.codegen.isa.isa_of`): vectors of its float32
lanes (16 on AVX-512, 8 on AVX2, 4 on NEON), ``registers / 2`` accumulators (4 rows x 4
vectors with 32 registers, 4 rows x 2 vectors with 16), and a reduction panel of packed B
that fills the L1 data cache (:func:`register_block`, :func:`best_sizes`).
"""
from __future__ import annotations

from engine.codegen.isa import VectorISA, isa_of

from .registry import Preset, register

#: conv2d parameters of the benchmarks (a ResNet-like 3x3 layer, 64 -> 64 channels, 56x56)
CONV_PARAMS = dict(batch=1, in_channels=64, out_channels=64, size=56, kernel=3, pad=1, stride=1)


def _fit(factor: int, extent: int) -> int:
    """``factor`` clamped to a loop's extent (at least 1), so a recipe stays legal at small n."""
    return max(1, min(int(factor), int(extent)))


# --------------------------------------------------------------------------- mm_relu course
def _course(sch, p, isa=None) -> None:
    """The course's TensorIR chapter: split j by 4, reorder, reverse_compute_at, decompose."""
    y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
    sch.decompose_reduction(y, k)


register(Preset(
    "mm_relu-course", "mm_relu: the course's four steps",
    "The MLC course's TensorIR walk-through: split the column loop j by 4, reorder it so the "
    "reduction k sits between the two halves, move the ReLU block C under j0 "
    "(reverse_compute_at) and separate Y's initialisation (decompose_reduction).",
    "mm_relu", {"n": 128}, _course, tags=("course",)))


# --------------------------------------------------------------------------- tiled
def register_block(isa: VectorISA | str | None = None) -> tuple[int, int, int]:
    """(lanes, vectors per row, rows) of the register block on ``isa`` (None: this
    machine): ``registers / 2`` accumulators, 4 vectors a row with 32 registers, else 2."""
    isa = isa_of(isa)
    vectors = 4 if isa.registers >= 32 else 2
    rows = max(1, isa.registers // 2 // vectors)
    return isa.lanes, vectors, rows


def tiled_sizes(isa: VectorISA | str | None = None) -> tuple[int, int]:
    """(TI, TK) of the tiled matmul on ``isa`` (None: this machine): square blocks of A,
    TI rows x TK of the reduction, as large (a power of two, 32..256) as keep a block
    within a quarter of L2, so the block of B it multiplies (TK x the tile's columns, read
    in place: its rows are a whole row of B apart, so they conflict in L1) stays in L2
    and serves TI / rows register blocks (mm_relu 1024 on Zen 4, one core: unsplit
    32-row tiles 77-85 GFLOP/s, 256 x 256 blocks 97-100, numpy 95-99)."""
    isa = isa_of(isa)
    size = 32
    while size * 2 <= 256 and (size * 2) ** 2 * 4 <= isa.l2 // 4:
        size *= 2
    return size, size


def _tiled(block_name: str, func: str, relu: bool):
    def apply(sch, p, isa: VectorISA | str | None = None) -> None:
        """Tiles of TI rows x the register block's width (64 columns on AVX-512, 16 on
        AVX2), the reduction cut into TK-long panels; inside, rows x vectors accumulated
        per step of k (vectorized, rows unrolled)."""
        n = p["n"]
        lanes, vectors, rows = register_block(isa)
        block_ti, block_tk = tiled_sizes(isa)
        ti = _fit(min(block_ti, max(32, n // 4)), n)    # at least 4 rows of tiles
        tj, tk = _fit(lanes * vectors, n), _fit(block_tk, n)
        rows = _fit(rows, ti)
        blk = sch.get_block(block_name, func_name=func)
        i, j, k = sch.get_loops(blk)
        i0, i1 = sch.split(i, factors=[None, ti])
        j0, j1 = sch.split(j, factors=[None, tj])
        i1o, i1i = sch.split(i1, factors=[None, rows])
        k0, k1 = sch.split(k, factors=[None, tk])
        sch.reorder(i0, j0, k0, i1o, k1, i1i, j1)
        if relu:
            sch.reverse_compute_at(sch.get_block("C", func_name=func), j0)
        sch.vectorize(j1)
        if relu:
            sch.vectorize(sch.get_loops(sch.get_block("C", func_name=func))[-1])
        sch.unroll(i1i)
        sch.parallel(i0)
        # last, as TVM requires (afterwards the update block is no longer a reduction
        # block, and TVM refuses loop annotations over it); the init loops copy the
        # kinds (unrolled, vectorized) of the loops they are copied from
        sch.decompose_reduction(blk, k0)
    return apply


register(Preset(
    "matmul-tiled", "matmul: tiles sized to the caches, vectorized, parallel",
    "Tile C into blocks of 256 rows x 64 columns (4 vectors of the machine's width: 16 "
    "columns with 8 lanes) and the reduction into 256-long panels, so the block of B a "
    "panel uses stays in L2; inside a tile, 4 rows of 64 columns are updated for each k "
    "(the 64 columns vectorized, the 4 rows unrolled); the tile-row loop runs in parallel.",
    "matmul", {"n": 1024}, _tiled("C", "matmul", relu=False), tags=("tiling",)))

register(Preset(
    "mm_relu-tiled", "mm_relu: tiles sized to the caches, vectorized, parallel, ReLU fused",
    "matmul-tiled's schedule for Y, with the ReLU block C moved into each tile "
    "(reverse_compute_at) while the tile is still in cache.",
    "mm_relu", {"n": 1024}, _tiled("Y", "mm_relu", relu=True), tags=("tiling",)))


# --------------------------------------------------------------------------- best
def best_sizes(isa: VectorISA | str | None = None) -> dict:
    """The best matmul's sizes on ``isa`` (None: this machine): the register block of
    :func:`register_block` (R rows x V vectors of LANES), reduction panels of TK rows of
    packed B filling the L1 data cache (a power of two, 32..512), and tiles of TI rows x
    TJ = V x LANES columns, TI as many rows (32..128) as keep TI x TK of A within an
    eighth of L2: each L1 panel of B then serves TI / R register blocks. The recipe takes
    TI rows only once packed B is more than 8 L2s, else 32 (at n=2048 on Zen 4, one core:
    32 rows 94, 128 rows 104 GFLOP/s, numpy 103; at 512 and 1024 within 3% of each
    other)."""
    isa = isa_of(isa)
    lanes, vectors, rows = register_block(isa)
    tj = lanes * vectors
    tk = 32
    while tk * 2 <= 512 and tk * 2 * tj * 4 <= isa.l1d:
        tk *= 2
    ti = 32
    while ti * 2 <= 128 and ti * 2 * tk * 4 * 8 <= isa.l2:
        ti *= 2
    return dict(TI=ti, TJ=tj, TK=tk, R=rows, V=vectors, LANES=lanes)


#: the register-blocked micro-kernel on AVX-512: R rows x (V x 16) columns of accumulators
#: (16 zmm registers for R=4, V=4), in 32x64 tiles of C — 128x64 once B is more than 8 L2s
#: (n=2048) — with the reduction cut into 128-long panels; B is packed once into
#: 64-column panels, each contiguous (row stride 256 bytes instead of 4 KiB: no L1 set
#: conflicts, sequential prefetch), so a 128x64 panel (32 KiB) stays in L1. Other ISAs:
#: :func:`best_sizes`.
BEST = dict(TI=128, TJ=64, TK=128, R=4, V=4, LANES=16)


def _best(block_name: str, func: str, relu: bool):
    def apply(sch, p, isa: VectorISA | str | None = None) -> None:
        """Pack B (cache_read + transform_layout), tiles for L2/L1, register block with k
        innermost-but-one, vectorize, unroll, parallel over the tile rows."""
        n = p["n"]
        best = best_sizes(isa)
        lanes = _fit(best["LANES"], n)
        # tall tiles only once B is much larger than L2 (each row of tiles reads all of
        # packed B again: at n=2048, 16 MiB of it; at 1024, 32 rows do as well as 128)
        tall = n * n * 4 > 8 * isa_of(isa).l2
        ti = _fit(min(best["TI"] if tall else 32, max(32, n // 4)), n)
        r = _fit(best["R"], ti)
        tj = _fit(best["TJ"], n)
        v = _fit(best["V"], max(1, tj // lanes))
        tk = _fit(best["TK"], n)
        blk = sch.get_block(block_name, func_name=func)
        # 1. pack B: B_global[j // tj, k, j % tj] = B[k, j] (whole B, once, in parallel)
        pack = sch.cache_read(blk, 1, "global")
        sch.transform_layout(pack, ("write", 0), f"lambda k, j: (j // {tj}, k, j % {tj})",
                             pad_value=0.0)      # (pads when tj does not divide n)
        loops = sch.get_loops(pack)
        if len(loops) == 2:
            pk, pj = loops
            # split by the panel width first, so each 16-lane vector provably stays in one
            # panel and the packed store is one contiguous vector (not 16 scalar stores)
            _, _, pj2 = sch.split(pj, factors=[None, max(1, tj // lanes), lanes])
        else:
            # padded (TVM's rule): the copy runs over B_global's own shape (j // tj, k,
            # j % tj), storing the padding's zeros itself; k outermost as above
            pjo, pk, pji = loops
            sch.reorder(pk, pjo)
            _, pj2 = sch.split(pji, factors=[None, lanes])
        sch.vectorize(pj2)
        sch.parallel(pk)
        # 2. tiles and the register block
        i, j, k = sch.get_loops(blk)
        # k first: with an unsplit 1024-long k innermost, LLVM unrolls every copy of it in
        # the intermediate programs (a 16-wide j3 around it), which took 100 ms to compile
        k0, k1 = sch.split(k, factors=[None, tk])
        # i: tile rows / register-block rows;  j: tile / vectors per row / 16 lanes
        i0, i1, i2 = sch.split(i, factors=[None, max(1, ti // r), r])
        j0, j1, j2, j3 = sch.split(j, factors=[None, max(1, tj // (v * lanes)), v, lanes])
        # micro-kernel: for k1: for i2 (unrolled): for j2 (unrolled): 16-wide FMA on C[i, j]
        sch.reorder(i0, j0, k0, i1, j1, k1, i2, j2, j3)
        if relu:
            sch.reverse_compute_at(sch.get_block("C", func_name=func), j0)
        sch.vectorize(j3)
        sch.unroll(j2)
        sch.unroll(i2)
        if relu:
            c = sch.get_block("C", func_name=func)
            cj = sch.get_loops(c)[-1]
            _, cj1 = sch.split(cj, factors=[None, lanes])
            sch.vectorize(cj1)
        # the tile-row loop runs in parallel (32 rows of tiles at n=1024: balanced on 2-8
        # threads, and each thread streams its own rows of A and C)
        sch.parallel(i0)
        # last (TVM's order): C = 0 for the tile before the k panels; the init loops copy
        # the unrolled/vectorized kinds of the loops they are copied from
        sch.decompose_reduction(blk, k0)
    return apply


_BEST_TEXT = (
    "Register-blocked matmul in the style of BLAS micro-kernels, with toolbar primitives only: "
    "B is first packed into contiguous 64-column panels (cache_read + transform_layout); C is "
    "cut into 32x64 tiles (128x64 at n=2048; the rows of tiles run in parallel) and the "
    "reduction into "
    "128-long panels so a 32 KiB panel of packed B stays in L1; inside, 4 rows x 64 columns of C "
    "(16 AVX-512 registers; the sizes follow the machine's vector width and register count) "
    "are updated for each k — the 16-wide column loop vectorized, the "
    "4 rows and 4 vectors unrolled — with the reduction innermost-but-one.")

register(Preset(
    "matmul-best", "matmul 1024: register-blocked, vectorized, parallel (fastest)",
    _BEST_TEXT, "matmul", {"n": 1024}, _best("C", "matmul", relu=False),
    tags=("performance",)))

register(Preset(
    "mm_relu-best", "mm_relu 1024: matmul-best with the ReLU fused per tile",
    _BEST_TEXT + " The ReLU block C is computed per tile (reverse_compute_at), vectorized.",
    "mm_relu", {"n": 1024}, _best("Y", "mm_relu", relu=True), tags=("performance",)))


# --------------------------------------------------------------------------- conv2d
def _conv_tiled(sch, p, isa=None) -> None:
    """Reduction (ci, kh, kw) outside the vectorized output row; (n, co) fused, parallel."""
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    sch.reorder(n, co, oh, ci, kh, kw, ow)
    sch.vectorize(ow)
    sch.parallel(sch.fuse(n, co))
    pad = sch.get_block("pad", func_name="conv2d")
    pn, pc, _, _ = sch.get_loops(pad)
    sch.parallel(sch.fuse(pn, pc))
    sch.decompose_reduction(conv, ci)


def _conv_best(sch, p, isa=None) -> None:
    """Register block of 4 output channels x one output row (vectors of 8 along ow),
    reduction outside it; the channel-block loop (moved outermost) runs in parallel."""
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    cb = _fit(4, p["out_channels"])
    wv = _fit(8, (p["size"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1)
    co0, co1 = sch.split(co, factors=[None, cb])
    ow0, ow1 = sch.split(ow, factors=[None, wv])
    sch.reorder(co0, n, oh, ci, kh, kw, co1, ow0, ow1)
    sch.vectorize(ow1)
    sch.unroll(ow0)
    sch.unroll(co1)
    sch.parallel(co0)
    pad = sch.get_block("pad", func_name="conv2d")
    pn, pc, _, _ = sch.get_loops(pad)
    sch.parallel(sch.fuse(pn, pc))
    sch.decompose_reduction(conv, ci)


def _conv_course(sch, p, isa=None) -> None:
    """The course's mm_relu steps carried over to conv2d: split the output column loop by
    4, move the reduction loops between its halves, separate the initialisation."""
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    ow0, ow1 = sch.split(ow, factors=[None, 4])
    sch.reorder(ow0, ci, kh, kw, ow1)
    sch.decompose_reduction(conv, ci)


register(Preset(
    "conv2d-course", "conv2d: the course's steps on a convolution",
    "The TensorIR chapter's recipe applied to conv2d: split the output column loop ow by 4 "
    "and move the reduction loops (ci, kh, kw) between the two halves, so four neighbouring "
    "outputs are accumulated together; then separate the initialisation "
    "(decompose_reduction).", "conv2d", dict(CONV_PARAMS), _conv_course, tags=("course",)))

register(Preset(
    "conv2d-tiled", "conv2d: reduction outside a vectorized row, parallel channels",
    "For each output row, accumulate over input channels and the 3x3 window with the output "
    "row vectorized; batch and output channels fused and run in parallel.",
    "conv2d", dict(CONV_PARAMS), _conv_tiled, tags=("tiling",)))

register(Preset(
    "conv2d-best", "conv2d: 4 channels x one row in registers, parallel",
    "A register block of 4 output channels x one output row (vectors of 8 columns, all "
    "unrolled) is accumulated over input channels and the 3x3 window; the "
    "channel-block loop, moved outermost, runs in parallel.",
    "conv2d", dict(CONV_PARAMS), _conv_best, tags=("performance",)))


# --------------------------------------------------------------------------- the GPU chapter
#: the course's GPU chapter (engine.presets.gpu_chapter) opens on this GPU target
GPU_TARGET = "cuda -model=h100-sxm"


def _gpu(recipe: str):
    def apply(sch, p, isa=None) -> None:
        from . import gpu_chapter
        if recipe == "vector_add":
            gpu_chapter.apply_vector_add(sch, _fit(128, p["n"]), func_name="vector_add")
        elif recipe == "window_sum":
            gpu_chapter.apply_window_sum(sch, _fit(128, p["n"]), func_name="window_sum")
        elif recipe == "gemm_local":
            gpu_chapter.apply_gemm_local(sch, 8, 8, 8, 8, 4, func_name="matmul")
        else:
            gpu_chapter.apply_gemm_shared(sch, 8, 8, 8, 8, 8, func_name="matmul")
    return apply


register(Preset(
    "gpu-vector-add", "GPU: vector add, blockIdx.x × threadIdx.x",
    "The course's GPU chapter, first program: split the loop by 128 and bind the parts to "
    "blockIdx.x and threadIdx.x (built for the H100 SXM target).",
    "vector_add", {"n": 1024}, _gpu("vector_add"), tags=("course", "gpu"), target=GPU_TARGET))

register(Preset(
    "gpu-window-sum", "GPU: window sum with a cooperative fetch into shared memory",
    "As vector add, then A is read into a shared-memory tile per thread block "
    "(cache_read \"shared\", compute_at under the thread loop) fetched cooperatively: the "
    "fetch loop split by the thread count, its inner part bound to threadIdx.x.",
    "window_sum", {"n": 1024}, _gpu("window_sum"), tags=("course", "gpu"), target=GPU_TARGET))

register(Preset(
    "gpu-gemm-local", "GPU: GEMM with local blocking (8, 8, 8, 8, 4)",
    "The course's blocking(sch, 8, 8, 8, 8, 4): an 8x8 tile of C per thread accumulated in "
    "\"local\" registers, 8x8 threads per block, k split by 4 and unrolled.",
    "matmul", {"n": 1024}, _gpu("gemm_local"), tags=("course", "gpu"), target=GPU_TARGET))

register(Preset(
    "gpu-gemm-shared", "GPU: GEMM with shared-memory blocking (8, 8, 8, 8, 8)",
    "The course's blocking_with_shared(sch, 8, 8, 8, 8, 8): local blocking with the thread "
    "loops fused into threadIdx.x, and A and B read into \"shared\" tiles at k0 by "
    "cooperative, vectorized fetches.",
    "matmul", {"n": 1024}, _gpu("gemm_shared"), tags=("course", "gpu"), target=GPU_TARGET))
