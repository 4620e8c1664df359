"""GPU lowering (engine.gpu.lower): the course's GPU chapter lowered to kernels — launch
shape, thread variables, shared tiles per block, local tiles per thread, barriers — and run
thread by thread between barriers (tests/gpu_reference.py) against numpy; the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.gpu import Target
from engine.gpu.kernel import BARRIER, is_barrier
from engine.gpu.lower import lower_gpu
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.functor import collect_stmts, pre_order_visit
from engine.lower.errors import BuildError
from engine.schedule import Schedule
from gpu_reference import BarrierDivergence, run_function

ORDERS = ("forward", "reverse", 7)

VECTOR_ADD = """
@T.prim_func
def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"),
         C: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.block("C"):
            vi = T.axis.spatial(1024, i)
            C[vi] = A[vi] + B[vi]
"""

MATMUL = """
@T.prim_func
def main(A: T.Buffer(({n}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"),
         C: T.Buffer(({n}, {n}), "float32")):
    for i, j, k in T.grid({n}, {n}, {k}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

# TVM's result of the course's window-sum schedule (binds, cache_read "shared", compute_at
# at i_1, the fetch split by 128 and bound to threadIdx.x)
WINDOW_SUM = """
@T.prim_func
def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
    A_shared = T.alloc_buffer((1027,), scope="shared")
    for i_0 in T.thread_binding(8, thread="blockIdx.x"):
        for i_1 in T.thread_binding(128, thread="threadIdx.x"):
            for ax0_0 in range(2):
                for ax0_1 in T.thread_binding(128, thread="threadIdx.x"):
                    with T.block("A_shared"):
                        v0 = T.axis.spatial(1027, i_0 * 128 + (ax0_0 * 128 + ax0_1))
                        T.where(ax0_0 * 128 + ax0_1 < 130)
                        A_shared[v0] = A[v0]
            with T.block("C"):
                vi = T.axis.spatial(1024, i_0 * 128 + i_1)
                B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]
"""

# TVM's result of the course's blocking_with_shared(sch, 8, 8, 8, 8, 8)
GEMM_SHARED = """
@T.prim_func
def main(A: T.Buffer((N, R), "float32"), B: T.Buffer((R, N), "float32"),
         C: T.Buffer((N, N), "float32")):
    C_local = T.alloc_buffer((N, N), scope="local")
    A_shared = T.alloc_buffer((N, R), scope="shared")
    B_shared = T.alloc_buffer((R, N), scope="shared")
    for i_0 in T.thread_binding(G, thread="blockIdx.y"):
        for j_0 in T.thread_binding(G, thread="blockIdx.x"):
            for i_1_j_1_fused in T.thread_binding(64, thread="threadIdx.x"):
                for i_2_init, j_2_init in T.grid(8, 8):
                    with T.block("C_init"):
                        vi = T.axis.spatial(N, i_0 * 64 + i_1_j_1_fused // 8 * 8 + i_2_init)
                        vj = T.axis.spatial(N, j_0 * 64 + i_1_j_1_fused % 8 * 8 + j_2_init)
                        C_local[vi, vj] = T.float32(0)
                for k_0 in range(K):
                    for ax0_ax1_fused_0 in range(2):
                        for ax0_ax1_fused_1 in T.thread_binding(64, thread="threadIdx.x"):
                            for ax0_ax1_fused_2 in T.vectorized(4):
                                with T.block("A_shared"):
                                    v0 = T.axis.spatial(N, i_0 * 64 + (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 * 4 + ax0_ax1_fused_2) // 8)
                                    v1 = T.axis.spatial(R, k_0 * 8 + (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 * 4 + ax0_ax1_fused_2) % 8)
                                    A_shared[v0, v1] = A[v0, v1]
                    for ax0_ax1_fused_0 in range(2):
                        for ax0_ax1_fused_1 in T.thread_binding(64, thread="threadIdx.x"):
                            for ax0_ax1_fused_2 in T.vectorized(4):
                                with T.block("B_shared"):
                                    v0 = T.axis.spatial(R, k_0 * 8 + (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 * 4 + ax0_ax1_fused_2) // 64)
                                    v1 = T.axis.spatial(N, j_0 * 64 + (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 * 4 + ax0_ax1_fused_2) % 64)
                                    B_shared[v0, v1] = B[v0, v1]
                    for k_1, i_2, j_2 in T.grid(8, 8, 8):
                        with T.block("C_update"):
                            vi = T.axis.spatial(N, i_0 * 64 + i_1_j_1_fused // 8 * 8 + i_2)
                            vj = T.axis.spatial(N, j_0 * 64 + i_1_j_1_fused % 8 * 8 + j_2)
                            vk = T.axis.reduce(R, k_0 * 8 + k_1)
                            C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                for ax0, ax1 in T.grid(8, 8):
                    with T.block("C_local"):
                        v0 = T.axis.spatial(N, i_0 * 64 + i_1_j_1_fused // 8 * 8 + ax0)
                        v1 = T.axis.spatial(N, j_0 * 64 + i_1_j_1_fused % 8 * 8 + ax1)
                        C[v0, v1] = C_local[v0, v1]
"""


def gemm_shared_program(n: int, k: int | None = None):
    k = n if k is None else k
    return engine.parse(GEMM_SHARED.replace("G", str(n // 64)).replace("K", str(k // 8))
                        .replace("N", str(n)).replace("R", str(k)))


def vector_add_schedule():
    sch = Schedule(engine.parse(VECTOR_ADD))
    i, = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch


def gemm_local_schedule(n: int, k: int | None = None):
    """The course's blocking(sch, 8, 8, 8, 8, 4)."""
    sch = Schedule(engine.parse(MATMUL.format(n=n, k=n if k is None else k)))
    c = sch.get_block("C")
    c_local = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, 8, 8])
    j0, j1, j2 = sch.split(j, [None, 8, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(c, k0)
    return sch


def barriers_in(s) -> int:
    return sum(1 for x in collect_stmts(s, S.Evaluate) if is_barrier(x))


def thread_loops(s) -> list:
    return [f for f in collect_stmts(s, S.For) if f.kind is S.ForKind.THREAD_BINDING]


def check_matmul(gfunc, n, orders=ORDERS, k=None):
    rng = np.random.default_rng(0)
    k = n if k is None else k
    a = rng.random((n, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    for order in orders:
        c = np.zeros((n, n), np.float32)
        run_function(gfunc, a, b, c, order=order)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)


# ------------------------------------------------------------------ vector add
def test_vector_add_one_kernel_of_8_blocks_of_128_threads():
    mod = lower_gpu(vector_add_schedule().mod, Target("cuda"))
    f = mod["main"]
    k, = f.kernels
    assert k.name == "main_kernel0"
    assert (k.grid, k.block) == ((8, 1, 1), (128, 1, 1))
    assert sorted(k.thread_vars) == ["blockIdx.x", "threadIdx.x"]
    assert k.thread_vars["threadIdx.x"].name == "threadIdx_x"
    assert all(v.dtype == "int32" for v in k.thread_vars.values())
    assert [p.name for p in k.params] == ["A", "B", "C"]
    assert all(p is q for p, q in zip(k.params, f.params))   # the function's flat buffers
    assert k.shared == () and f.temporaries == ()
    assert type(k.body) is S.BufferStore and not collect_stmts(k.body, S.For)
    assert barriers_in(k.body) == 0
    a, b = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    c = np.zeros(1024, np.float32)
    run_function(f, a, b, c)
    np.testing.assert_array_equal(c, a + b)


# ------------------------------------------------------------------ window sum
def window_sum_check(gfunc):
    a = np.random.default_rng(1).random(1027, dtype=np.float32)
    for order in ORDERS:
        b = np.zeros(1024, np.float32)
        run_function(gfunc, a, b, order=order)
        np.testing.assert_allclose(b, a[:1024] + a[1:1025] + a[2:1026], rtol=1e-6)


def test_window_sum_shared_tile_of_130_floats_per_block():
    f = lower_gpu(engine.parse(WINDOW_SUM), "cuda")["main"]
    k, = f.kernels
    assert (k.grid, k.block) == ((8, 1, 1), (128, 1, 1))
    sh, = k.shared
    assert (sh.name, sh.scope, sh.shape[0].value) == ("A_shared", "shared", 130)
    assert k.shared_bytes == 520
    assert [p.name for p in k.params] == ["A", "B"]     # shared buffers are not parameters
    assert not thread_loops(k.body)
    # the cooperative fetch's two loops became the one thread variable; the tile is indexed
    # relative to the block (blockIdx_x * 128 subtracted)
    text = engine.script.printer.module.repr_node(k.body)
    assert "A_shared[ax0_0 * 128 + threadIdx_x] = A[blockIdx_x * 128 + ax0_0 * 128 + threadIdx_x]" in text
    assert "A_shared[threadIdx_x] + A_shared[threadIdx_x + 1] + A_shared[threadIdx_x + 2]" in text
    # one barrier, between the fetch and the sum, at the top level of the kernel
    seq = k.body.seq
    assert [i for i, s in enumerate(seq) if is_barrier(s)] == [1]
    assert barriers_in(k.body) == 1
    window_sum_check(f)


def drop_barriers(gfunc):
    """The function with every barrier removed (to show the reference executor sees it)."""
    import dataclasses

    from engine.ir.functor import Mutator

    class Drop(Mutator):
        def visit_SeqStmt(self, s):
            return S.seq(*[self.visit(x) for x in s.seq if not is_barrier(x)])
    ks = tuple(dataclasses.replace(k, body=Drop().visit(k.body)) for k in gfunc.kernels)
    return dataclasses.replace(gfunc, kernels=ks)


def test_window_sum_without_its_barrier_is_wrong():
    f = drop_barriers(lower_gpu(engine.parse(WINDOW_SUM), "cuda")["main"])
    with pytest.raises(AssertionError):
        window_sum_check(f)


# ------------------------------------------------------------------ GEMM, local blocking
@pytest.mark.parametrize("n,k", [(64, 64), (128, 16)])
def test_gemm_local_blocking_8x8_accumulator_per_thread(n, k):
    f = lower_gpu(gemm_local_schedule(n, k).mod, "cuda")["main"]
    kern, = f.kernels
    assert (kern.grid, kern.block) == ((n // 64, n // 64, 1), (8, 8, 1))
    assert kern.shared == ()
    alloc, = collect_stmts(kern.body, S.Allocate)
    assert alloc.buffer.name == "C_local" and alloc.buffer.scope == "local"
    assert alloc.buffer.shape[0].value == 64          # 8 x 8 per thread
    assert alloc is kern.body                            # allocated once, around the body
    assert barriers_in(kern.body) == 0                   # no shared memory: no barrier
    if n == 64:   # an axis of one block has no variable (index 0)
        assert sorted(kern.thread_vars) == ["threadIdx.x", "threadIdx.y"]
    else:
        assert sorted(kern.thread_vars) == ["blockIdx.x", "blockIdx.y", "threadIdx.x",
                                         "threadIdx.y"]
    check_matmul(f, n, orders=("reverse",), k=k)


# ------------------------------------------------------------------ GEMM, shared blocking
@pytest.mark.parametrize("n,k", [(64, 64), (128, 16)])
def test_gemm_shared_blocking_tiles_and_barriers(n, k):
    f = lower_gpu(gemm_shared_program(n, k), "cuda")["main"]
    kern, = f.kernels
    assert (kern.grid, kern.block) == ((n // 64, n // 64, 1), (64, 1, 1))
    a_sh, b_sh = kern.shared
    assert [b.name for b in kern.shared] == ["A_shared", "B_shared"]
    assert a_sh.shape[0].value == 512 and b_sh.shape[0].value == 512   # 64x8, 8x64
    assert kern.shared_bytes == 4096
    alloc, = collect_stmts(kern.body, S.Allocate)
    assert alloc.buffer.name == "C_local" and alloc.buffer.shape[0].value == 64
    # inside k_0: fetch A, fetch B, barrier, compute, barrier (the next k_0 overwrites)
    k0, = [f_ for f_ in collect_stmts(kern.body, S.For) if f_.loop_var.name == "k_0"]
    kinds = ["barrier" if is_barrier(s) else type(s).__name__ for s in k0.body.seq]
    assert kinds == ["For", "For", "barrier", "For", "barrier"]
    assert barriers_in(kern.body) == 2
    # the fetch is vectorized: 4 floats per thread per store
    ramps = []
    pre_order_visit(k0.body.seq[0], lambda x: ramps.append(x) if type(x) is E.Ramp else None)
    assert ramps and all(r.lanes == 4 for r in ramps)
    check_matmul(f, n, orders=("reverse", 3) if n == 64 else ("reverse",), k=k)


def test_gemm_shared_without_the_loop_end_barrier_is_wrong():
    import dataclasses
    f = lower_gpu(gemm_shared_program(64), "cuda")["main"]
    k, = f.kernels
    k0, = [f_ for f_ in collect_stmts(k.body, S.For) if f_.loop_var.name == "k_0"]
    from engine.ir.functor import Mutator

    class DropLast(Mutator):
        def visit_For(self, s):
            if s is k0:
                return s.replace(body=S.seq(*s.body.seq[:-1]))
            return self.generic_visit(s)
    f2 = dataclasses.replace(f, kernels=(dataclasses.replace(k, body=DropLast().visit(k.body)),))
    with pytest.raises(AssertionError):
        check_matmul(f2, 64, orders=("forward",))


# ------------------------------------------------------------------ several kernels
TWO_KERNELS = """
@T.prim_func
def main(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    Tmp = T.alloc_buffer((256,), "float32")
    for i0 in T.thread_binding(2, thread="blockIdx.x"):
        for i1 in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("Tmp"):
                vi = T.axis.spatial(256, i0 * 128 + i1)
                Tmp[vi] = A[vi] * T.float32(2)
    for i1 in T.thread_binding(64, thread="threadIdx.x"):
        for i0 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(256, i0 * 64 + i1)
                C[vi] = Tmp[255 - vi] + T.float32(1)
"""


def test_two_kernels_and_a_global_temporary():
    f = lower_gpu(engine.parse(TWO_KERNELS), "cuda")["main"]
    k0, k1 = f.kernels
    assert [k.name for k in f.kernels] == ["main_kernel0", "main_kernel1"]
    tmp, = f.temporaries
    assert tmp.name == "Tmp" and tmp.scope == "global"
    assert [p.name for p in k0.params] == ["A", "Tmp"]
    assert [p.name for p in k1.params] == ["C", "Tmp"]
    assert k0.params[1] is tmp and k1.params[1] is tmp
    assert (k1.grid, k1.block) == ((1, 1, 1), (64, 1, 1))   # threads only: a grid of one
    a = np.arange(256, dtype=np.float32)
    c = np.zeros(256, np.float32)
    run_function(f, a, c, order="reverse")
    np.testing.assert_array_equal(c, a[::-1] * 2 + 1)


VTHREAD = """
@T.prim_func
def main(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for vx in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(256, bx * 128 + vx * 64 + tx)
                    B[vi] = A[vi] + T.float32(1)
"""


def test_vthread_is_a_serial_loop_in_each_thread():
    k, = lower_gpu(engine.parse(VTHREAD), "cuda")["main"].kernels
    assert (k.grid, k.block) == ((2, 1, 1), (64, 1, 1))
    assert "vthread.x" not in k.thread_vars
    loop, = collect_stmts(k.body, S.For)
    assert loop.kind is S.ForKind.SERIAL and loop.extent.value == 2
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    run_function(lower_gpu(engine.parse(VTHREAD), "cuda")["main"], a, b)
    np.testing.assert_array_equal(b, a + 1)


# ------------------------------------------------------------------ refusals
def refused(text_or_mod, *words, target="cuda"):
    mod = engine.parse(text_or_mod) if isinstance(text_or_mod, str) else text_or_mod
    with pytest.raises(BuildError) as info:
        lower_gpu(mod, target)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    return msg


def test_refuses_an_unbound_block():
    refused(VECTOR_ADD, "block 'C'", "did you forget to bind?")


def test_refuses_a_serial_loop_around_a_kernel():
    refused("""
@T.prim_func
def main(A: T.Buffer((4, 128), "float32")):
    for i in range(4):
        for j in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(0)
""", "loop i", "would run on the host")


def test_refuses_blockidx_inside_threadidx():
    refused("""
@T.prim_func
def main(A: T.Buffer((4, 128), "float32")):
    for j in T.thread_binding(128, thread="threadIdx.x"):
        for i in T.thread_binding(4, thread="blockIdx.x"):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(0)
""", "blockIdx.x", "outermost")


def test_refuses_too_many_threads():
    refused("""
@T.prim_func
def main(A: T.Buffer((2048,), "float32")):
    for j in T.thread_binding(2048, thread="threadIdx.x"):
        with T.block("A"):
            vj = T.axis.spatial(2048, j)
            A[vj] = T.float32(0)
""", "2048 threads per block", "allows 1024")


def test_refuses_two_extents_for_one_axis():
    refused("""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for j in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("A"):
            vj = T.axis.spatial(128, j)
            A[vj] = T.float32(0)
        for j2 in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vj = T.axis.spatial(128, j2)
                B[vj] = T.float32(0)
""", "extents 128 and 64")


def test_refuses_shared_memory_over_the_limit():
    msg = refused("""
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    S = T.alloc_buffer((128, 128), scope="shared")
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        for j in range(128):
            with T.block("S"):
                vi, vj = T.axis.remap("SS", [tx, j])
                S[vi, vj] = A[vi, vj]
        for j in range(128):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [tx, j])
                B[vi, vj] = S[127 - vi, vj]
""", "kernel main_kernel0 needs 64.0 KiB of shared memory per block", "48 KiB (static)")
    assert "H100" in msg


def test_refuses_a_cooperative_fetch_that_depends_on_the_enclosing_thread():
    # compute_at under the thread loop computed a per-thread region (3 elements from i_1)
    refused("""
@T.prim_func
def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
    A_shared = T.alloc_buffer((1027,), scope="shared")
    for i_0 in T.thread_binding(8, thread="blockIdx.x"):
        for i_1 in T.thread_binding(128, thread="threadIdx.x"):
            for ax0_0 in range(1):
                for ax0_1 in T.thread_binding(128, thread="threadIdx.x"):
                    with T.block("A_shared"):
                        v0 = T.axis.spatial(1027, i_0 * 128 + i_1 + ax0_0 * 128 + ax0_1)
                        T.where(ax0_0 * 128 + ax0_1 < 3)
                        A_shared[v0] = A[v0]
            with T.block("C"):
                vi = T.axis.spatial(1024, i_0 * 128 + i_1)
                B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]
""", "loop ax0_1", "uses i_1", "cooperative fetch")


def test_refuses_a_barrier_under_a_thread_condition():
    refused("""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    S = T.alloc_buffer((128,), scope="shared")
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        if tx < 64:
            with T.block("S"):
                vi = T.axis.spatial(128, tx)
                S[vi] = A[vi]
            with T.block("B"):
                vi = T.axis.spatial(128, tx)
                B[vi] = S[127 - vi - 64]
""", "a barrier is needed", "not every thread")


def test_refuses_an_accumulation_run_by_every_thread():
    refused("""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((1,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("A"):
                vi = T.axis.spatial(128, tx)
                A[vi] = T.float32(1)
        for k in range(128):
            with T.block("B"):
                vk = T.axis.reduce(128, k)
                with T.init():
                    B[0] = T.float32(0)
                B[0] = B[0] + A[vk]
""", "block 'B'", "threadIdx.x", "once per thread")


def test_refuses_local_memory_shared_by_two_kernels():
    refused("""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    L = T.alloc_buffer((128,), scope="local")
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("L"):
            vi = T.axis.spatial(128, tx)
            L[vi] = A[vi]
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(128, tx)
            B[vi] = L[vi]
""", "'L'", "main_kernel0 and main_kernel1", "does not outlive a kernel")


def test_refuses_symbolic_shapes():
    refused("""
@T.prim_func
def main(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("A"):
            vi = T.axis.spatial(128, tx)
            A[vi] = T.float32(0)
""", "symbolic shape")


def test_refuses_an_access_out_of_bounds():
    refused("""
@T.prim_func
def main(A: T.Buffer((128,), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("A"):
            vi = T.axis.spatial(129, tx + 1)
            A[vi] = T.float32(0)
""", "A[")


# ------------------------------------------------------------------ the chapter's presets
from engine.presets import gpu_chapter  # noqa: E402


@pytest.mark.parametrize("name,n", [("vector_add", 1024), ("window_sum", 256),
                                    ("gemm_local", 64), ("gemm_shared", 64)])
def test_presets_lower_and_compute(name, n):
    sch = gpu_chapter.PROGRAMS[name][0](n)
    f = lower_gpu(sch.mod, "cuda")["main"]
    k, = f.kernels
    rng = np.random.default_rng(2)
    if name == "vector_add":
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        c = np.zeros(n, np.float32)
        run_function(f, a, b, c)
        np.testing.assert_allclose(c, a + b)
    elif name == "window_sum":
        assert [b.shape[0].value for b in k.shared] == [130]
        a = rng.random(n + 2, dtype=np.float32)
        b = np.zeros(n, np.float32)
        run_function(f, a, b, order="reverse")
        np.testing.assert_allclose(b, a[:n] + a[1:n + 1] + a[2:n + 2], rtol=1e-6)
    else:
        if name == "gemm_shared":
            assert [b.shape[0].value for b in k.shared] == [512, 512]
        check_matmul(f, n, orders=("reverse",))
