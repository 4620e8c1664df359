"""The GPU emulator: lowered kernels run on the CPU with the GPU's semantics (every thread
of a block reaches a barrier before any goes past it), compiled; race detection."""
from __future__ import annotations

import numpy as np
import pytest

from engine.gpu.emulator import Emulator, EmulatorError, RaceError, emulate, kernel_to_cpu
from engine.gpu.kernel import GpuFunction, Kernel, barrier
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

F32 = "float32"


def c(v):
    return E.IntImm("int32", v)


def tvar(axis):
    return E.Var(axis.replace(".", "_"), "int32")


def seq(*xs):
    return S.seq(*xs)


def loop(v, n, body):
    return S.For(v, c(0), c(n), S.ForKind.SERIAL, body)


def func(name, params, *kernels):
    return GpuFunction(name, tuple(params), tuple(kernels))


# ----------------------------------------------------------------------------- kernels
def vector_add(n=1024, threads=128):
    A, B, C = (Buffer(x, (n,), F32) for x in "ABC")
    bx, tx = tvar("blockIdx.x"), tvar("threadIdx.x")
    i = bx * threads + tx
    body = S.BufferStore(C, E.BufferLoad(A, (i,)) + E.BufferLoad(B, (i,)), (i,))
    k = Kernel("vadd_kernel", (A, B, C), body, (n // threads, 1, 1), (threads, 1, 1),
               {"blockIdx.x": bx, "threadIdx.x": tx})
    return func("vadd", (A, B, C), k)


def window_sum(n=1024, threads=128, with_barrier=True):
    """The course's window sum: B[i] = A[i] + A[i+1] + A[i+2], A's window of each block
    fetched cooperatively into shared memory (130 elements by 128 threads: two rounds)."""
    A = Buffer("A", (n + 2,), F32)
    B = Buffer("B", (n,), F32)
    A_shared = Buffer("A_shared", (threads + 2,), F32, "shared")
    bx, tx = tvar("blockIdx.x"), tvar("threadIdx.x")
    ax0 = E.Var("ax0", "int32")
    j = ax0 * threads + tx
    fetch = loop(ax0, 2, S.IfThenElse(
        j < threads + 2,
        S.BufferStore(A_shared, E.BufferLoad(A, (bx * threads + j,)), (j,))))
    compute = S.BufferStore(
        B, E.BufferLoad(A_shared, (tx,)) + E.BufferLoad(A_shared, (tx + 1,))
        + E.BufferLoad(A_shared, (tx + 2,)), (bx * threads + tx,))
    body = seq(fetch, barrier(), compute) if with_barrier else seq(fetch, compute)
    k = Kernel("window_sum_kernel", (A, B), body, (n // threads, 1, 1), (threads, 1, 1),
               {"blockIdx.x": bx, "threadIdx.x": tx}, (A_shared,))
    return func("window_sum", (A, B), k)


def shared_gemm(n=64, tile=16, tk=8, local=4, vector_fetch=False):
    """C = A @ B.T-free GEMM with shared tiles of A and B per k0 step and a local
    accumulator array per thread (C_local lives across the barriers of the k0 loop), the
    thread's output row offset a let variable used after the loop."""
    A, B, C = (Buffer(x, (n * n,), F32) for x in "ABC")
    A_sh = Buffer("A_shared", (tile * tk,), F32, "shared")
    B_sh = Buffer("B_shared", (tk * tile,), F32, "shared")
    C_local = Buffer("C_local", (local * local,), F32, "local")
    bx, by = tvar("blockIdx.x"), tvar("blockIdx.y")
    tx, ty = tvar("threadIdx.x"), tvar("threadIdx.y")
    th = tile // local
    nthreads = th * th
    k0, k1, i, j, f = (E.Var(x, "int32") for x in ("k0", "k1", "i", "j", "f"))
    row = E.Var("row", "int32")
    tid = ty * th + tx
    zero = E.FloatImm(F32, 0.0)
    init = loop(i, local, loop(j, local, S.BufferStore(C_local, zero, (i * local + j,))))
    per = tile * tk // nthreads
    if vector_fetch:
        # each thread copies `per` consecutive elements as one vector
        e0 = tid * per
        idx = E.Ramp(e0, c(1), per)
        fetch_a = S.BufferStore(
            A_sh, E.BufferLoad(A, (E.Broadcast((by * tile + e0 // tk) * n + k0 * tk, per)
                                   + E.Ramp(e0 % tk, c(1), per),)), (idx,))
    else:
        e = f * nthreads + tid
        fetch_a = loop(f, per, S.BufferStore(
            A_sh, E.BufferLoad(A, ((by * tile + e // tk) * n + k0 * tk + e % tk,)), (e,)))
    e = f * nthreads + tid
    fetch_b = loop(f, per, S.BufferStore(
        B_sh, E.BufferLoad(B, ((k0 * tk + e // tile) * n + bx * tile + e % tile,)), (e,)))
    update = loop(k1, tk, loop(i, local, loop(j, local, S.BufferStore(
        C_local,
        E.BufferLoad(C_local, (i * local + j,))
        + E.BufferLoad(A_sh, ((ty * local + i) * tk + k1,))
        * E.BufferLoad(B_sh, (k1 * tile + tx * local + j,)),
        (i * local + j,)))))
    main = loop(k0, n // tk, seq(fetch_a, fetch_b, barrier(), update, barrier()))
    out = loop(i, local, loop(j, local, S.BufferStore(
        C, E.BufferLoad(C_local, (i * local + j,)),
        ((row + i) * n + bx * tile + tx * local + j,))))
    body = S.Allocate(C_local, S.LetStmt(row, by * tile + ty * local, seq(init, main, out)))
    k = Kernel("gemm_kernel", (A, B, C), body, (n // tile, n // tile, 1), (th, th, 1),
               {"blockIdx.x": bx, "blockIdx.y": by, "threadIdx.x": tx, "threadIdx.y": ty},
               (A_sh, B_sh))
    return func("gemm", (A, B, C), k)


# ----------------------------------------------------------------------------- tests
def test_vector_add():
    f = vector_add()
    a, b = np.random.rand(1024).astype(F32), np.random.rand(1024).astype(F32)
    out = np.zeros(1024, F32)
    emulate(f, a, b, out)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    out2 = np.zeros(1024, F32)
    emulate(f, a, b, out2, check_races=True)
    np.testing.assert_allclose(out2, a + b, rtol=1e-6)


def test_window_sum_with_shared_memory_and_barrier():
    f = window_sum()
    a = np.random.rand(1026).astype(F32)
    b = np.zeros(1024, F32)
    emulate(f, a, b)
    np.testing.assert_allclose(b, a[:-2] + a[1:-1] + a[2:], rtol=1e-5)
    b2 = np.zeros(1024, F32)
    emulate(f, a, b2, check_races=True)
    np.testing.assert_allclose(b2, b)


def test_window_sum_without_barrier_is_a_race():
    f = window_sum(n=256, with_barrier=False)
    a = np.random.rand(258).astype(F32)
    with pytest.raises(RaceError) as info:
        emulate(f, a, np.zeros(256, F32), check_races=True)
    err = info.value
    assert err.buffer == "A_shared" and err.scope == "shared"
    assert set(err.kinds) == {"read", "write"}
    t1, t2 = err.threads
    assert t1 != t2 and err.blocks[0] == err.blocks[1]
    # the reader of element e is thread e - 1 or e - 2; its writer is thread e (or e - 128)
    e = err.element
    writer = t1 if err.kinds[0] == "write" else t2
    reader = t2 if err.kinds[0] == "write" else t1
    assert writer[0] in (e, e - 128) and reader[0] in (e - 1, e - 2)
    assert "A_shared" in str(err) and f"element {e}" in str(err)


def test_local_array_across_barriers_in_a_uniform_loop():
    n = 64
    f = shared_gemm(n)
    a = np.random.rand(n, n).astype(F32)
    b = np.random.rand(n, n).astype(F32)
    out = np.zeros((n, n), F32)
    emu = Emulator(f)
    emu(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)
    out[:] = 0
    emu(a, b, out)              # compiled once, called again
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)
    assert len(emu.kernel_seconds) == 1
    out[:] = 0
    emulate(f, a, b, out, check_races=True)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)


def test_vector_fetch_gemm():
    n = 32
    f = shared_gemm(n, vector_fetch=True)
    a = np.random.rand(n, n).astype(F32)
    b = np.random.rand(n, n).astype(F32)
    out = np.zeros((n, n), F32)
    emulate(f, a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)
    out[:] = 0
    emulate(f, a, b, out, check_races=True)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)


def test_gemm_missing_second_barrier_is_a_race():
    # without the barrier after the update, the next k0's fetch overwrites the tiles
    # other threads are still reading
    n = 32
    f = shared_gemm(n)
    k = f.kernels[0]

    class Strip:
        done = False

    def strip(s):
        if isinstance(s, S.SeqStmt):
            items = list(s.seq)
            from engine.gpu.kernel import is_barrier
            if len(items) == 5 and is_barrier(items[4]):
                return S.seq(*items[:4])
            return S.seq(*[strip(x) for x in items])
        for field in ("body",):
            if hasattr(s, field):
                import dataclasses
                return dataclasses.replace(s, body=strip(s.body))
        return s
    k2 = Kernel(k.name, k.params, strip(k.body), k.grid, k.block, k.thread_vars, k.shared)
    f2 = GpuFunction(f.name, f.params, (k2,))
    a = np.random.rand(n, n).astype(F32)
    b = np.random.rand(n, n).astype(F32)
    with pytest.raises(RaceError) as info:
        emulate(f2, a, b, np.zeros((n, n), F32), check_races=True)
    assert info.value.buffer in ("A_shared", "B_shared")
    assert set(info.value.kinds) == {"read", "write"}


def test_barrier_under_thread_dependent_if_is_refused():
    A = Buffer("A", (64,), F32)
    sh = Buffer("sh", (64,), F32, "shared")
    tx = tvar("threadIdx.x")
    body = seq(S.BufferStore(sh, E.BufferLoad(A, (tx,)), (tx,)),
               S.IfThenElse(tx < 32, seq(barrier(), S.BufferStore(A, E.BufferLoad(sh, (tx + 32,)), (tx,)))))
    k = Kernel("k", (A,), body, (1, 1, 1), (64, 1, 1), {"threadIdx.x": tx}, (sh,))
    with pytest.raises(EmulatorError, match="depends on the thread"):
        emulate(func("f", (A,), k), np.zeros(64, F32))


def test_barrier_in_thread_dependent_loop_is_refused():
    A = Buffer("A", (64,), F32)
    tx = tvar("threadIdx.x")
    i = E.Var("i", "int32")
    body = S.For(i, c(0), tx, S.ForKind.SERIAL, barrier())
    k = Kernel("k", (A,), body, (1, 1, 1), (64, 1, 1), {"threadIdx.x": tx})
    with pytest.raises(EmulatorError, match="loop i"):
        kernel_to_cpu(k)


def test_redundant_identical_writes_are_not_races():
    # threadIdx.y left unbound in the cooperative fetch: every ty writes the same values
    A = Buffer("A", (8,), F32)
    B = Buffer("B", (32,), F32)
    sh = Buffer("sh", (8,), F32, "shared")
    tx, ty = tvar("threadIdx.x"), tvar("threadIdx.y")
    body = seq(S.BufferStore(sh, E.BufferLoad(A, (tx,)), (tx,)), barrier(),
               S.BufferStore(B, E.BufferLoad(sh, ((tx + ty) % 8,)), (ty * 8 + tx,)))
    k = Kernel("k", (A, B), body, (1, 1, 1), (8, 4, 1), {"threadIdx.x": tx, "threadIdx.y": ty},
               (sh,))
    a = np.arange(8, dtype=F32)
    b = np.zeros(32, F32)
    emulate(func("f", (A, B), k), a, b, check_races=True)
    want = np.array([a[(x + y) % 8] for y in range(4) for x in range(8)], F32)
    np.testing.assert_array_equal(b, want)


def test_different_values_written_by_two_threads_is_a_race():
    A = Buffer("A", (8,), F32)
    sh = Buffer("sh", (8,), F32, "shared")
    tx, ty = tvar("threadIdx.x"), tvar("threadIdx.y")
    body = seq(S.BufferStore(sh, E.Cast(F32, ty), (tx,)), barrier(),
               S.BufferStore(A, E.BufferLoad(sh, (tx,)), (tx,)))
    k = Kernel("k", (A,), body, (1, 1, 1), (8, 2, 1), {"threadIdx.x": tx, "threadIdx.y": ty},
               (sh,))
    with pytest.raises(RaceError) as info:
        emulate(func("f", (A,), k), np.zeros(8, F32), check_races=True)
    assert info.value.kinds == ("write", "write") and info.value.buffer == "sh"


def test_global_write_from_two_blocks_is_a_race():
    A = Buffer("A", (4,), F32)
    bx, tx = tvar("blockIdx.x"), tvar("threadIdx.x")
    body = S.BufferStore(A, E.Cast(F32, bx), (tx,))
    k = Kernel("k", (A,), body, (2, 1, 1), (4, 1, 1), {"blockIdx.x": bx, "threadIdx.x": tx})
    with pytest.raises(RaceError) as info:
        emulate(func("f", (A,), k), np.zeros(4, F32), check_races=True)
    err = info.value
    assert err.scope == "global" and err.blocks == ((0, 0, 0), (1, 0, 0))
    assert "different blocks" in str(err)


# ----------------------------------------------------------------------------- lower_gpu
# the course's GPU chapter programs, scheduled as the course does, lowered by lower_gpu

def _lowered(name, n):
    from engine.gpu.lower import lower_gpu
    from engine.presets import gpu_chapter as G
    if name == "gemm_shared":
        sch = _gemm_shared(n)
    else:
        sch = G.PROGRAMS[name][0](n)
    return lower_gpu(sch.mod, "cuda").functions[0]


def _gemm_shared(n):
    """The course's ``blocking_with_shared(sch, 8, 8, 8, 8, 8)``."""
    from engine.presets import gpu_chapter as G
    return G.gemm_shared(n)


@pytest.mark.parametrize("check", [False, True])
def test_lowered_vector_add_and_window_sum(check):
    rng = np.random.default_rng(1)
    f = _lowered("vector_add", 256)
    a, b = rng.random(256, F32), rng.random(256, F32)
    out = np.zeros(256, F32)
    emulate(f, a, b, out, check_races=check)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    f = _lowered("window_sum", 256)
    a = rng.random(258, F32)
    out = np.zeros(256, F32)
    emulate(f, a, out, check_races=check)
    np.testing.assert_allclose(out, a[:-2] + a[1:-1] + a[2:], rtol=1e-5)


@pytest.mark.parametrize("name,check", [("gemm_local", False), ("gemm_local", True),
                                        ("gemm_shared", False), ("gemm_shared", True)])
def test_lowered_gemms(name, check):
    n = 128
    rng = np.random.default_rng(2)
    f = _lowered(name, n)
    a, b = rng.random((n, n), F32), rng.random((n, n), F32)
    out = np.zeros((n, n), F32)
    emulate(f, a, b, out, check_races=check)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)


def _without_barriers(s):
    from engine.gpu.kernel import is_barrier
    from engine.ir.functor import Mutator

    class Strip(Mutator):
        def visit_SeqStmt(self, n):
            return S.seq(*[self.visit(x) for x in n.seq if not is_barrier(x)])
    return Strip().visit(s)


def test_lowered_window_sum_without_its_barrier_is_a_race():
    import dataclasses
    f = _lowered("window_sum", 256)
    (k,) = f.kernels
    stripped = _without_barriers(k.body)
    assert stripped is not k.body            # the lowering placed a barrier
    f2 = dataclasses.replace(f, kernels=(dataclasses.replace(k, body=stripped),))
    a = np.random.rand(258).astype(F32)
    out = np.zeros(256, F32)
    emulate(f2, a, out)                      # runs, without checking
    with pytest.raises(RaceError) as info:
        emulate(f2, a, out, check_races=True)
    err = info.value
    assert err.buffer == "A_shared" and set(err.kinds) == {"read", "write"}
    assert err.threads[0] != err.threads[1] and err.blocks[0] == err.blocks[1]
    assert "A_shared" in str(err) and f"element {err.element}" in str(err)


def test_barrier_under_uniform_if_and_block_dependent_loop():
    # an if on blockIdx and a loop whose extent depends on blockIdx are the same for every
    # thread of a block: their barriers are kept, with thread loops inside them
    A = Buffer("A", (2 * 16,), F32)
    B = Buffer("B", (2 * 16,), F32)
    sh = Buffer("sh", (16,), F32, "shared")
    bx, tx = tvar("blockIdx.x"), tvar("threadIdx.x")
    r = E.Var("r", "int32")
    g = bx * 16
    rounds = S.For(r, c(0), bx + 1, S.ForKind.SERIAL, seq(
        S.BufferStore(sh, E.BufferLoad(B, (g + tx,)), (tx,)), barrier(),
        S.BufferStore(B, E.BufferLoad(sh, ((tx + 1) % 16,)), (g + tx,)), barrier()))
    body = seq(S.BufferStore(B, E.BufferLoad(A, (g + tx,)), (g + tx,)),
               S.IfThenElse(bx < 2, rounds))
    k = Kernel("k", (A, B), body, (2, 1, 1), (16, 1, 1), {"blockIdx.x": bx, "threadIdx.x": tx},
               (sh,))
    a = np.arange(32, dtype=F32)
    for check in (False, True):
        b = np.zeros(32, F32)
        emulate(func("f", (A, B), k), a, b, check_races=check)
        # block 0 rotates its 16 values once, block 1 twice
        np.testing.assert_array_equal(b[:16], np.roll(a[:16], -1))
        np.testing.assert_array_equal(b[16:], np.roll(a[16:], -2))


def test_lowered_fetch_with_thread_y_unbound_writes_redundantly_not_a_race():
    # GEMM local blocking with A read into shared memory at k_0 by a fetch bound to
    # threadIdx.x only: every threadIdx.y writes the same values (TVM emits that)
    from engine.gpu.lower import lower_gpu
    from engine.presets import gpu_chapter as G
    from engine.schedule import Schedule
    n = 64
    sch = Schedule(G.matmul_program(n))
    block_c = sch.get_block("C")
    c_local = sch.cache_write(block_c, 0, "local")
    i, j, k = sch.get_loops(block=block_c)
    i0, i1, i2 = sch.split(loop=i, factors=[None, 8, 4])
    j0, j1, j2 = sch.split(loop=j, factors=[None, 8, 4])
    k0, k1 = sch.split(loop=k, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    rc = sch.cache_read(block_c, "A", "shared")
    sch.compute_at(rc, k0)
    inner = sch.fuse(*sch.get_loops(block=rc)[-2:])
    _, t = sch.split(loop=inner, factors=[None, 8])
    sch.bind(t, "threadIdx.x")
    sch.decompose_reduction(block_c, k0)
    f = lower_gpu(sch.mod, "cuda").functions[0]
    (kern,) = f.kernels
    assert "threadIdx.y" in kern.thread_vars and kern.shared
    rng = np.random.default_rng(3)
    a, b = rng.random((n, n), F32), rng.random((n, n), F32)
    out = np.zeros((n, n), F32)
    emulate(f, a, b, out, check_races=True)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)
