"""The course's GPU chapter (part 1), its cells in order, through the engine's ``tvm``
namespace, on a machine without a GPU: the kernels run in the emulator and the timings
are modeled (the evaluator says so). The cells are the course's, with sizes made small
where a cell only checks a result (the GEMMs at 256: the course uses 1024, which
``python -m engine gpu-check`` runs)."""
from __future__ import annotations

import numpy as np

from engine import tvm
from engine.script import tir as T

N = 256   # the GEMM size here (the course: 1024)


@tvm.script.ir_module
class MyModuleVecAdd:
    @T.prim_func
    def main(A: T.Buffer[(1024,), "float32"],
             B: T.Buffer[(1024,), "float32"],
             C: T.Buffer[(1024,), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]


@tvm.script.ir_module
class MyModuleWindowSum:
    @T.prim_func
    def main(A: T.Buffer[(1027,), "float32"],
             B: T.Buffer[(1024,), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]


@tvm.script.ir_module
class MyModuleMatmul:
    @T.prim_func
    def main(A: T.Buffer[(N, N), "float32"],
             B: T.Buffer[(N, N), "float32"],
             C: T.Buffer[(N, N), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(N, N, N):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_vector_add_cells(capsys):
    sch = tvm.tir.Schedule(MyModuleVecAdd)
    block_C = sch.get_block("C")
    i, = sch.get_loops(block=block_C)
    i0, i1 = sch.split(i, [None, 128])
    sch.mod.show()
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    sch.mod.show()
    rt_mod = tvm.build(sch.mod, target="cuda")
    A_np = np.random.uniform(size=(1024,)).astype("float32")
    B_np = np.random.uniform(size=(1024,)).astype("float32")
    A_nd = tvm.nd.array(A_np, tvm.cuda(0))
    B_nd = tvm.nd.array(B_np, tvm.cuda(0))
    C_nd = tvm.nd.array(np.zeros((1024,), dtype="float32"), tvm.cuda(0))
    rt_mod["main"](A_nd, B_nd, C_nd)
    print(A_nd)
    print(B_nd)
    print(C_nd)
    np.testing.assert_allclose(C_nd.numpy(), A_np + B_np)
    assert 'T.thread_binding(128, thread="threadIdx.x")' in capsys.readouterr().out


def test_window_sum_cells():
    sch = tvm.tir.Schedule(MyModuleWindowSum)
    nthread = 128
    block_C = sch.get_block("C")
    i, = sch.get_loops(block=block_C)
    i0, i1 = sch.split(i, [None, nthread])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    A_shared = sch.cache_read(block_C, read_buffer_index=0, storage_scope="shared")
    sch.compute_at(A_shared, i1)
    ax = sch.get_loops(A_shared)[-1]
    ax0, ax1 = sch.split(ax, [None, nthread])
    sch.bind(ax1, "threadIdx.x")
    rt_mod = tvm.build(sch.mod, target="cuda")
    source = rt_mod.imported_modules[0].get_source()
    assert "__shared__ float A_shared[130];" in source.replace("__align__(16) ", "")
    assert "__syncthreads();" in source
    A_np = np.random.uniform(size=(1027,)).astype("float32")
    B_nd = tvm.nd.array(np.zeros((1024,), dtype="float32"), tvm.cuda(0))
    rt_mod["main"](tvm.nd.array(A_np, tvm.cuda(0)), B_nd)
    np.testing.assert_allclose(B_nd.numpy(), A_np[:1024] + A_np[1:1025] + A_np[2:1026],
                               rtol=1e-6)


def blocking(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k0)
    return sch


def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    # vectorized cooperative fetch
    inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
    sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")


def blocking_with_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x,
                         tile_k):
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    sch.decompose_reduction(block_C, k0)
    return sch


def _run_gemm(sch, capsys, label):
    rt_mod = tvm.build(sch.mod, target="cuda")
    dev = tvm.cuda(0)
    A_np = np.random.uniform(size=(N, N)).astype("float32")
    B_np = np.random.uniform(size=(N, N)).astype("float32")
    A_nd = tvm.nd.array(A_np, dev)
    B_nd = tvm.nd.array(B_np, dev)
    C_nd = tvm.nd.array(np.zeros((N, N), dtype="float32"), dev)
    num_flop = 2 * N * N * N
    rt_mod["main"](A_nd, B_nd, C_nd)
    evaluator = rt_mod.time_evaluator("main", dev, number=10)
    print("%s: %f GFLOPS" % (label, num_flop / evaluator(A_nd, B_nd, C_nd).mean / 1e9))
    np.testing.assert_allclose(C_nd.numpy(), A_np @ B_np, rtol=1e-4, atol=1e-3)
    out = capsys.readouterr().out
    assert f"{label}: " in out and " GFLOPS" in out
    return evaluator(A_nd, B_nd, C_nd)


def test_gemm_local_then_shared_blocking_cells(capsys):
    local = _run_gemm(blocking(tvm.tir.Schedule(MyModuleMatmul), 8, 8, 8, 8, 4), capsys,
                      "GEMM-Blocking")
    shared = _run_gemm(blocking_with_shared(tvm.tir.Schedule(MyModuleMatmul), 8, 8, 8, 8, 8),
                       capsys, "GEMM-Blocking")
    # no GPU here: the times are the model's, and say so
    assert local.modeled and "no GPU on this machine" in local.note
    assert shared.mean < local.mean


def test_the_chapters_tuning_cell(tmp_path):
    """The chapter's last cell: MetaSchedule on the same GEMM for a GPU (here a few trials,
    ranked by the model: no GPU), then built and run."""
    from engine.tvm import meta_schedule as ms
    sch_tuned = ms.tune_tir(mod=MyModuleMatmul, target="nvidia/tesla-p100",
                            config=ms.TuneConfig(max_trials_global=6, num_trials_per_iter=6),
                            work_dir=str(tmp_path / "tune_tmp"), task_name="main")
    sch_tuned.mod.show()
    rt_mod = tvm.build(sch_tuned.mod, target="nvidia/tesla-p100")
    A_np = np.random.uniform(size=(N, N)).astype("float32")
    B_np = np.random.uniform(size=(N, N)).astype("float32")
    C_nd = tvm.nd.array(np.zeros((N, N), dtype="float32"), tvm.cuda(0))
    rt_mod["main"](tvm.nd.array(A_np, tvm.cuda(0)), tvm.nd.array(B_np, tvm.cuda(0)), C_nd)
    np.testing.assert_allclose(C_nd.numpy(), A_np @ B_np, rtol=1e-4, atol=1e-3)
    # TVM 0.27's form: a database, then compile_tir
    database = ms.tune_tir(mod=MyModuleMatmul, target="nvidia/tesla-p100",
                           max_trials_global=6, num_trials_per_iter=6,
                           work_dir=str(tmp_path / "tune_tmp"))
    sch = ms.tir_integration.compile_tir(database, MyModuleMatmul, "nvidia/tesla-p100")
    assert "thread_binding" in sch.mod.script()


def test_tune_tir_on_the_cpu_as_the_automatic_optimisation_chapter_calls_it(tmp_path):
    from engine.presets import gpu_chapter
    from engine.tvm import meta_schedule as ms
    mod = gpu_chapter.matmul_program(32)
    database = ms.tune_tir(mod=mod, target="llvm --num-cores=1", max_trials_global=3,
                           num_trials_per_iter=3, work_dir=str(tmp_path / "tune_tmp"))
    assert "measured on this machine's CPU" in repr(database)
    sch = ms.tir_integration.compile_tir(database, mod, "llvm --num-cores=1")
    a, b = (np.random.uniform(size=(32, 32)).astype("float32") for _ in range(2))
    c = np.zeros((32, 32), "float32")
    tvm.build(sch.mod, target="llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
