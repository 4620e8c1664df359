"""The analytic GPU performance model (engine.gpu.model): the textbook access patterns on
hand-built kernels (coalescing, bank conflicts, broadcast), the traffic and time formulas,
and the course's GEMM steps ranked naive > local blocking > shared blocking in time."""
from __future__ import annotations

import pytest

from engine.gpu import get_spec
from engine.gpu.kernel import GpuFunction, Kernel, barrier
from engine.gpu.model import (LAUNCH_OVERHEAD_S, KernelModel, ModelError, model_function,
                              model_kernel)
from engine.gpu.toolchain import AssemblyReport, KernelResources
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

H100 = get_spec("h100-sxm")
P100 = get_spec("tesla-p100")


def i32(v):
    return E.IntImm("int32", v)


def f32(v):
    return E.FloatImm("float32", v)


def tvar(axis):
    return E.Var(axis.replace(".", "_"), "int32")


def loop(var, extent, body, kind=S.ForKind.SERIAL):
    return S.For(var, i32(0), i32(extent), kind, body)


def gbuf(name, n, dtype="float32"):
    return Buffer(name, (i32(n),), dtype, "global")


def sbuf(name, n, dtype="float32"):
    return Buffer(name, (i32(n),), dtype, "shared")


def kernel(body, params, grid=(1, 1, 1), block=(32, 1, 1), shared=(), axes=None):
    return Kernel(name="k", params=tuple(params), body=body, grid=grid, block=block,
                  thread_vars=axes or {}, shared=tuple(shared))


def site(model: KernelModel, buffer: str, kind: str = "load"):
    found = [a for a in model.accesses if a.buffer == buffer and a.kind == kind]
    assert len(found) == 1, model.accesses
    return found[0]


# --------------------------------------------------------------------- global coalescing
def copy_kernel(stride: int):
    tx, bx = tvar("threadIdx.x"), tvar("blockIdx.x")
    a, b = gbuf("A", 4 * 128 * stride), gbuf("B", 4 * 128)
    g = bx * 128 + tx
    body = S.BufferStore(b, E.BufferLoad(a, (g * stride,)), (g,))
    return kernel(body, (a, b), grid=(4, 1, 1), block=(128, 1, 1),
                  axes={"threadIdx.x": tx, "blockIdx.x": bx})


def test_stride_one_float_loads_are_four_sectors():
    m = model_kernel(copy_kernel(1), H100)
    a = site(m, "A")
    assert a.sectors_per_request == 4
    assert a.bytes_per_request == 128
    assert a.efficiency == 1.0
    assert a.executions == 1
    assert site(m, "B", "store").sectors_per_request == 4


def test_stride_32_float_loads_are_32_sectors():
    a = site(model_kernel(copy_kernel(32), H100), "A")
    assert a.sectors_per_request == 32
    assert a.efficiency == pytest.approx(128 / (32 * 32))


def test_stride_two_halves_the_efficiency():
    a = site(model_kernel(copy_kernel(2), H100), "A")
    assert a.sectors_per_request == 8
    assert a.efficiency == pytest.approx(0.5)


def test_a_broadcast_global_load_is_one_sector():
    tx = tvar("threadIdx.x")
    a, b = gbuf("A", 1), gbuf("B", 32)
    m = model_kernel(kernel(S.BufferStore(b, E.BufferLoad(a, (i32(0),)), (tx,)), (a, b),
                            axes={"threadIdx.x": tx}), H100)
    ld = site(m, "A")
    assert ld.sectors_per_request == 1 and ld.bytes_per_request == 4


def test_misaligned_stride_one_loads_touch_five_sectors():
    tx = tvar("threadIdx.x")
    a, b = gbuf("A", 64), gbuf("B", 32)
    m = model_kernel(kernel(S.BufferStore(b, E.BufferLoad(a, (tx + 1,)), (tx,)), (a, b),
                            axes={"threadIdx.x": tx}), H100)
    assert site(m, "A").sectors_per_request == 5


def test_vector_loads_count_their_bytes():
    # each thread loads 4 consecutive floats (a float4): a warp asks for 512 bytes
    tx = tvar("threadIdx.x")
    a, b = gbuf("A", 128), gbuf("B", 128)
    idx = E.Ramp(tx * 4, i32(1), 4)
    m = model_kernel(kernel(S.BufferStore(b, E.BufferLoad(a, (idx,)), (idx,)), (a, b),
                            axes={"threadIdx.x": tx}), H100)
    ld = site(m, "A")
    assert ld.vector_lanes == 4
    assert ld.sectors_per_request == 16 and ld.bytes_per_request == 512
    assert ld.efficiency == 1.0


def test_warps_follow_cuda_linear_order():
    # a 8 x 4 block: one warp is 4 rows of 8 threads; A[ty * 1024 + tx] touches 4 rows of
    # 8 floats, each one whole sector
    tx, ty = tvar("threadIdx.x"), tvar("threadIdx.y")
    a, b = gbuf("A", 4096), gbuf("B", 32)
    body = S.BufferStore(b, E.BufferLoad(a, (ty * 1024 + tx,)), (ty * 8 + tx,))
    m = model_kernel(kernel(body, (a, b), block=(8, 4, 1),
                            axes={"threadIdx.x": tx, "threadIdx.y": ty}), H100)
    assert site(m, "A").sectors_per_request == 4
    assert site(m, "A").efficiency == 1.0


def test_inactive_lanes_of_a_partial_warp_do_not_count():
    tx = tvar("threadIdx.x")
    a, b = gbuf("A", 16 * 32), gbuf("B", 16)
    m = model_kernel(kernel(S.BufferStore(b, E.BufferLoad(a, (tx * 32,)), (tx,)), (a, b),
                            block=(16, 1, 1), axes={"threadIdx.x": tx}), H100)
    assert site(m, "A").sectors_per_request == 16


# ------------------------------------------------------------------ shared bank conflicts
def shared_tile_kernel(index_of):
    tx, k = tvar("threadIdx.x"), E.Var("k", "int32")
    tile, out = sbuf("tile", 32 * 33), gbuf("out", 32 * 32)
    body = loop(k, 32, S.BufferStore(out, E.BufferLoad(tile, (index_of(tx, k),)),
                                     (k * 32 + tx,)))
    return kernel(body, (out,), shared=(tile,), axes={"threadIdx.x": tx})


def test_reading_a_32x32_tile_by_columns_is_a_32_way_conflict():
    m = model_kernel(shared_tile_kernel(lambda tx, k: tx * 32 + k), H100)
    t = site(m, "tile")
    assert t.scope == "shared"
    assert t.conflict_ways == 32
    assert t.executions == 32
    # 32 executions per thread, 1 warp, 32 wavefronts each
    assert m.shared_wavefronts == 32 * 32


def test_padding_the_tile_to_33_columns_removes_the_conflict():
    t = site(model_kernel(shared_tile_kernel(lambda tx, k: tx * 33 + k), H100), "tile")
    assert t.conflict_ways == 1


def test_a_row_read_is_conflict_free():
    t = site(model_kernel(shared_tile_kernel(lambda tx, k: k * 32 + tx), H100), "tile")
    assert t.conflict_ways == 1


def test_a_broadcast_is_no_conflict():
    t = site(model_kernel(shared_tile_kernel(lambda tx, k: k), H100), "tile")
    assert t.conflict_ways == 1
    assert t.bytes_per_request == 4


def test_two_words_per_bank_is_a_two_way_conflict():
    t = site(model_kernel(shared_tile_kernel(lambda tx, k: tx * 2), H100), "tile")
    assert t.conflict_ways == 2


def test_float4_shared_accesses_take_four_conflict_free_phases():
    tx = tvar("threadIdx.x")
    tile, out = sbuf("tile", 128), gbuf("out", 128)
    idx = E.Ramp(tx * 4, i32(1), 4)
    m = model_kernel(kernel(S.BufferStore(out, E.BufferLoad(tile, (idx,)), (idx,)), (out,),
                            shared=(tile,), axes={"threadIdx.x": tx}), H100)
    t = site(m, "tile")
    assert t.wavefronts_per_request == 4 and t.conflict_ways == 1


# --------------------------------------------------------------------------- totals
def test_executions_traffic_and_flops_of_a_loop():
    # out[tx] = sum_k A[k * 32 + tx] * 2: 64 coalesced loads, 64 FMAs per thread
    tx, k = tvar("threadIdx.x"), E.Var("k", "int32")
    a, out = gbuf("A", 64 * 32), gbuf("out", 32)
    ld = E.BufferLoad(a, (k * 32 + tx,))
    body = S.seq(S.BufferStore(out, f32(0.0), (tx,)),
                 loop(k, 64, S.BufferStore(out, E.BufferLoad(out, (tx,)) + ld * f32(2.0), (tx,))))
    m = model_kernel(kernel(body, (a, out), axes={"threadIdx.x": tx}), H100)
    assert site(m, "A").executions == 64
    assert m.flops == 2 * 64 * 32
    assert m.fp32_instructions == 64        # warp instructions: one FMA per iteration
    # L2: A 64 x 4 sectors; out: 64 loads + 65 stores of 4 sectors
    assert m.l2_bytes == (64 * 4 + 64 * 4 + 65 * 4) * 32
    # DRAM: A's 8 KB once, out's 128 bytes read and written
    assert m.dram_bytes == 64 * 32 * 4 + 128 + 128
    assert m.time_s == pytest.approx(max(m.time_s_per_pipe.values()) + LAUNCH_OVERHEAD_S)
    assert m.bottleneck in m.time_s_per_pipe


def test_guarded_accesses_are_counted_and_said_so():
    tx = tvar("threadIdx.x")
    a, b = gbuf("A", 32), gbuf("B", 32)
    body = S.IfThenElse(tx < 16, S.BufferStore(b, E.BufferLoad(a, (tx,)), (tx,)))
    m = model_kernel(kernel(body, (a, b), axes={"threadIdx.x": tx}), H100)
    assert site(m, "A").guarded and site(m, "A").executions == 1
    assert any("if" in n for n in m.notes)


def test_a_data_dependent_index_is_assumed_scattered():
    tx = tvar("threadIdx.x")
    a, idx, b = gbuf("A", 1024), gbuf("I", 32, "int32"), gbuf("B", 32)
    body = S.BufferStore(b, E.BufferLoad(a, (E.BufferLoad(idx, (tx,)),)), (tx,))
    m = model_kernel(kernel(body, (a, idx, b), axes={"threadIdx.x": tx}), H100)
    ld = site(m, "A")
    assert not ld.analysed and ld.sectors_per_request == 32
    assert site(m, "I").analysed and site(m, "I").sectors_per_request == 4


def test_registers_from_ptxas_change_occupancy():
    k = copy_kernel(1)
    assert model_kernel(k, H100).registers_from == "estimate"
    assert model_kernel(k, H100).registers_per_thread == 32
    m = model_kernel(k, H100, registers_per_thread=255)
    assert m.registers_from == "ptxas" and m.occupancy.active_warps_per_sm == 8
    report = AssemblyReport("sm_90", b"", (KernelResources("k", "sm_90", 128),), "")
    assert model_kernel(k, H100, registers_per_thread=report).registers_per_thread == 128


def test_spec_by_name_and_function_sums_kernels():
    k = copy_kernel(1)
    one = model_kernel(k, "h100-sxm")
    fn = GpuFunction(name="f", params=k.params, kernels=(k, k))
    both = model_function(fn, H100)
    assert both.time_s == pytest.approx(2 * one.time_s)
    assert both.dram_bytes == pytest.approx(2 * one.dram_bytes)
    text = "\n".join(both.summary())
    assert "H100" in text and "sectors/request" in text


def test_a_loop_of_unknown_extent_needs_sizes():
    tx, k, n = tvar("threadIdx.x"), E.Var("k", "int32"), E.Var("n", "int32")
    a, b = gbuf("A", 4096), gbuf("B", 32)
    body = S.For(k, i32(0), n, S.ForKind.SERIAL,
                 S.BufferStore(b, E.BufferLoad(a, (k * 32 + tx,)), (tx,)))
    kern = Kernel("k", (a, b, n), body, (1, 1, 1), (32, 1, 1), {"threadIdx.x": tx})
    with pytest.raises(ModelError, match="sizes"):
        model_kernel(kern, H100)
    assert site(model_kernel(kern, H100, sizes={"n": 10}), "A").executions == 10


# ------------------------------------------------------------------- the chapter's GEMMs
# Hand-built at the lowered level, as lower_gpu writes them (flat buffers, thread indices
# as variables): C = A @ B, n x n float32.
def gemm_naive_kernel(n: int) -> Kernel:
    """i bound to blockIdx.x, j to threadIdx.x, nothing cached."""
    bx, tx, k = tvar("blockIdx.x"), tvar("threadIdx.x"), E.Var("k", "int32")
    a, b, c = gbuf("A", n * n), gbuf("B", n * n), gbuf("C", n * n)
    ci = bx * n + tx
    body = S.seq(
        S.BufferStore(c, f32(0.0), (ci,)),
        loop(k, n, S.BufferStore(c, E.BufferLoad(c, (ci,)) + E.BufferLoad(a, (bx * n + k,))
                                 * E.BufferLoad(b, (k * n + tx,)), (ci,))))
    return Kernel("gemm_naive", (a, b, c), body, (n, 1, 1), (n, 1, 1),
                  {"blockIdx.x": bx, "threadIdx.x": tx})


def gemm_local_kernel(n: int, t: int = 8, tk: int = 4) -> Kernel:
    """The course's blocking(8, 8, 8, 8, 4): 8 x 8 threads, each an 8 x 8 tile of C."""
    bx, by = tvar("blockIdx.x"), tvar("blockIdx.y")
    tx, ty = tvar("threadIdx.x"), tvar("threadIdx.y")
    k0, k1, i2, j2 = (E.Var(v, "int32") for v in ("k_0", "k_1", "i_2", "j_2"))
    a, b, c = gbuf("A", n * n), gbuf("B", n * n), gbuf("C", n * n)
    cl = Buffer("C_local", (i32(t * t),), "float32", "local")
    row = by * (t * t) + ty * t + i2
    col = bx * (t * t) + tx * t + j2
    kk = k0 * tk + k1
    update = S.BufferStore(cl, E.BufferLoad(cl, (i2 * t + j2,))
                           + E.BufferLoad(a, (row * n + kk,)) * E.BufferLoad(b, (kk * n + col,)),
                           (i2 * t + j2,))
    body = S.Allocate(cl, S.seq(
        loop(i2, t, loop(j2, t, S.BufferStore(cl, f32(0.0), (i2 * t + j2,)))),
        loop(k0, n // tk, loop(k1, tk, loop(i2, t, loop(j2, t, update)), S.ForKind.UNROLLED)),
        loop(i2, t, loop(j2, t, S.BufferStore(c, E.BufferLoad(cl, (i2 * t + j2,)),
                                              (row * n + col,))))))
    return Kernel("gemm_local", (a, b, c), body, (n // (t * t), n // (t * t), 1), (t, t, 1),
                  {"blockIdx.x": bx, "blockIdx.y": by, "threadIdx.x": tx, "threadIdx.y": ty})


def gemm_shared_kernel(n: int, t: int = 8, tk: int = 8) -> Kernel:
    """The course's blocking_with_shared(8, 8, 8, 8, 8): 64 threads, A and B tiles fetched
    into shared memory per k_0 by float4 cooperative loads."""
    bx, by, tx = tvar("blockIdx.x"), tvar("blockIdx.y"), tvar("threadIdx.x")
    k0, k1, i2, j2, f = (E.Var(v, "int32") for v in ("k_0", "k_1", "i_2", "j_2", "ax_0"))
    a, b, c = gbuf("A", n * n), gbuf("B", n * n), gbuf("C", n * n)
    tile = t * t                              # 64: rows of A / columns of B per block
    nthread = t * t
    a_sh = sbuf("A_shared", tile * tk)        # 64 x 8
    b_sh = sbuf("B_shared", tk * tile)        # 8 x 64
    cl = Buffer("C_local", (i32(t * t),), "float32", "local")
    fetches = tile * tk // (nthread * 4)      # 2
    f0 = f * (nthread * 4) + tx * 4
    fetch_a = loop(f, fetches, S.BufferStore(
        a_sh, E.BufferLoad(a, (E.Ramp((by * tile + f0 // tk) * n + k0 * tk + f0 % tk,
                                      i32(1), 4),)), (E.Ramp(f0, i32(1), 4),)))
    fetch_b = loop(f, fetches, S.BufferStore(
        b_sh, E.BufferLoad(b, (E.Ramp((k0 * tk + f0 // tile) * n + bx * tile + f0 % tile,
                                      i32(1), 4),)), (E.Ramp(f0, i32(1), 4),)))
    i1, j1 = tx // t, tx % t
    update = S.BufferStore(cl, E.BufferLoad(cl, (i2 * t + j2,))
                           + E.BufferLoad(a_sh, ((i1 * t + i2) * tk + k1,))
                           * E.BufferLoad(b_sh, (k1 * tile + j1 * t + j2,)), (i2 * t + j2,))
    body = S.Allocate(cl, S.seq(
        loop(i2, t, loop(j2, t, S.BufferStore(cl, f32(0.0), (i2 * t + j2,)))),
        loop(k0, n // tk, S.seq(barrier(), fetch_a, fetch_b, barrier(),
                                loop(k1, tk, loop(i2, t, loop(j2, t, update))))),
        loop(i2, t, loop(j2, t, S.BufferStore(
            c, E.BufferLoad(cl, (i2 * t + j2,)),
            ((by * tile + i1 * t + i2) * n + bx * tile + j1 * t + j2,))))))
    return Kernel("gemm_shared", (a, b, c), body, (n // tile, n // tile, 1), (nthread, 1, 1),
                  {"blockIdx.x": bx, "blockIdx.y": by, "threadIdx.x": tx},
                  shared=(a_sh, b_sh))


@pytest.mark.parametrize("spec", [H100, P100], ids=lambda s: s.name)
def test_hand_built_gemm_steps_rank_naive_local_shared(spec):
    n = 1024
    naive, local, shared = (model_kernel(build(n), spec) for build in
                            (gemm_naive_kernel, gemm_local_kernel, gemm_shared_kernel))
    for m in (naive, local, shared):
        assert m.flops == 2 * n ** 3
    assert naive.time_s > local.time_s > shared.time_s
    # naive: A broadcast (1 sector), B coalesced (4 sectors)
    assert site(naive, "A").sectors_per_request == 1
    assert site(naive, "B").sectors_per_request == 4
    # shared: fetches are coalesced float4 loads (16 sectors, fully used), conflict-free
    assert site(shared, "A").sectors_per_request == 16 and site(shared, "A").efficiency == 1
    assert site(shared, "A_shared", "store").conflict_ways == 1
    # the tiles' reads: 4 rows of A_shared in one bank (4-way), 8 columns of B_shared in
    # 4 banks (2-way)
    assert site(shared, "A_shared").conflict_ways == 4
    assert site(shared, "B_shared").conflict_ways == 2
    assert shared.dram_bytes < local.l2_bytes


# ----------------------------------------------------- end to end, through lower_gpu
def naive_gemm_schedule(n: int):
    from engine.presets.gpu_chapter import matmul_program
    from engine.schedule import Schedule
    sch = Schedule(matmul_program(n))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    return sch


def _model_schedule(build, n, spec):
    from engine.gpu.lower import lower_gpu
    return model_function(lower_gpu(build(n).mod, "cuda").functions[0], spec)


@pytest.mark.parametrize("spec", [H100, P100], ids=lambda s: s.name)
def test_chapter_local_blocking_beats_naive(spec):
    from engine.presets.gpu_chapter import gemm_local
    n = 1024
    naive = _model_schedule(naive_gemm_schedule, n, spec)
    local = _model_schedule(gemm_local, n, spec)
    for m in (naive, local):
        assert m.flops == 2 * n ** 3
    assert naive.time_s > local.time_s
    # the lowered local blocking is the hand-built one
    assert local.time_s == pytest.approx(model_kernel(gemm_local_kernel(n), spec).time_s)


@pytest.mark.parametrize("spec", [H100, P100], ids=lambda s: s.name)
def test_chapter_shared_blocking_beats_local(spec):
    from engine.presets.gpu_chapter import gemm_local, gemm_shared
    n = 1024
    local = _model_schedule(gemm_local, n, spec)
    shared = _model_schedule(gemm_shared, n, spec)
    assert shared.flops == 2 * n ** 3
    assert local.time_s > shared.time_s
    assert shared.kernels[0].shared_wavefronts > 0


def test_chapter_vector_add_and_window_sum_are_launch_bound():
    from engine.presets.gpu_chapter import vector_add, window_sum
    for build in (vector_add, window_sum):
        m = _model_schedule(build, 1024, H100)
        assert m.time_s < 2 * LAUNCH_OVERHEAD_S
        for a in m.kernels[0].accesses:
            if a.scope == "global":
                assert a.efficiency == 1.0
            else:
                assert a.conflict_ways == 1
