"""compute_at under GPU thread axes: TVM's storage-scope rule. A block computed at a loop
for a buffer the threads of a GPU block share ("shared") computes, in each iteration of the
loop, everything all those threads need there: the region is relaxed also over the loops at
and above the loop bound to threadIdx.* and vthread.* (never blockIdx.*: each block has its
own shared memory). "local" (one per thread) and "global" relax nothing more — as TVM, whose
LoopDomainOfSRefTreePath adds no loop for the global rank — and neither does
reverse_compute_at (TVM relaxes by scope for compute_at only). The course's GPU chapter is the
test: the window sum's fetch copies the 130 elements a block of 128 threads reads, the
shared GEMM's fetches the tiles the whole block reads at k_0. A bound loop runs serially in
the interpreter, so every iteration of a relaxed thread loop recomputes the same values and
the programs compute exactly what they did."""
from __future__ import annotations

import pytest

import engine
from engine.ir import For, ForKind
from engine.presets import gpu_chapter
from engine.schedule import Schedule
from engine.script.regions import infer_block_regions
from semantics import assert_computes_exactly
from test_schedule_bind import assert_order_free
from test_schedule_support import refused

WINDOW_SUM = """
@T.prim_func
def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.block("C"):
            vi = T.axis.spatial(1024, i)
            B[vi] = A[vi] + A[vi + 1] + A[vi + 2]
"""


def _window_sum_at_thread():
    before = engine.parse(WINDOW_SUM)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    a_shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(a_shared, i1)
    return before, sch, a_shared


def _nest_reads(sch, loop_rv):
    """What the nest under a loop reads, as T.reads of a block around it would say."""
    reads, _writes = infer_block_regions(sch.get(loop_rv))
    return [str(r) for r in reads]


def test_window_sum_fetch_copies_what_the_whole_thread_block_reads():
    before, sch, a_shared = _window_sum_at_thread()
    text = sch.mod.script()
    assert 'for i_1 in T.thread_binding(128, thread="threadIdx.x"):' in text
    assert "for ax0 in T.serial(130):" in text
    assert "v0 = T.axis.spatial(1027, i_0 * 128 + ax0)" in text
    # not one thread's 3 elements: the nest does not depend on i_1
    assert "i_1 + ax0" not in text
    ax0, = sch.get_loops(a_shared)[2:]
    assert _nest_reads(sch, ax0) == ["A[i_0 * 128:i_0 * 128 + 130]"]
    assert_computes_exactly(before, sch.mod, compiled=False)


def test_window_sum_cooperative_fetch_keeps_the_meaning():
    before, sch, a_shared = _window_sum_at_thread()
    ax = sch.get_loops(a_shared)[-1]
    ax0, ax1 = sch.split(ax, [None, 128])
    sch.bind(ax1, "threadIdx.x")
    text = sch.mod.script()
    assert 'for ax0_1 in T.thread_binding(128, thread="threadIdx.x"):' in text
    assert "T.where(ax0_0 * 128 + ax0_1 < 130)" in text
    assert_order_free(before, sch.mod)


def test_the_course_presets_compute_what_they_did():
    sch = gpu_chapter.window_sum(256)
    assert_order_free(gpu_chapter.window_sum_program(256), sch.mod)


def _gemm_shared(n=64, tile_local=4, tile_block=4, tile_k=8, fetch=False):
    """The course's blocking_with_shared at a small size (the reads of C are A and B)."""
    before = engine.parse(gpu_chapter.MATMUL.format(n=n))
    sch = Schedule(before)
    c = sch.get_block("C")
    c_local = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, tile_block, tile_local])
    j0, j1, j2 = sch.split(j, [None, tile_block, tile_local])
    k0, k1 = sch.split(k, [None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    stages = []
    for index in (0, 1):
        stage = sch.cache_read(c, index, "shared")
        sch.compute_at(stage, k0)
        stages.append(stage)
        if fetch:
            a, b = sch.get_loops(stage)[-2:]
            _, t, vec = sch.split(sch.fuse(a, b), [None, tile_block * tile_block, 4])
            sch.vectorize(vec)
            sch.bind(t, "threadIdx.x")
    sch.decompose_reduction(c, k0)
    return before, sch, stages


def test_shared_gemm_fetches_the_tiles_of_the_whole_thread_block():
    before, sch, (a_shared, b_shared) = _gemm_shared()
    text = sch.mod.script()
    # 16 x 8 of A and 8 x 16 of B per k_0: the 4 x 4 threads' rows and columns together
    assert "for ax0, ax1 in T.grid(16, 8):" in text
    assert "v0 = T.axis.spatial(64, i_0 * 16 + ax0)" in text
    assert "for ax0, ax1 in T.grid(8, 16):" in text
    assert "v1 = T.axis.spatial(64, j_0 * 16 + ax1)" in text
    assert _nest_reads(sch, sch.get_loops(a_shared)[4]) == [
        "A[i_0 * 16:i_0 * 16 + 16, k_0 * 8:k_0 * 8 + 8]"]
    assert _nest_reads(sch, sch.get_loops(b_shared)[4]) == [
        "B[k_0 * 8:k_0 * 8 + 8, j_0 * 16:j_0 * 16 + 16]"]
    # C_local (local: one per thread) stays the thread's own 4 x 4
    c_local = sch.get(sch.get_block("C_local"))
    assert [str(r) for r in c_local.reads] == ["C_local[v0, v1]"]
    assert ("v0 = T.axis.spatial(64, i_0 * 16 + i_1_j_1_fused // 4 * 4 + ax0)" in text)
    assert_computes_exactly(before, sch.mod, compiled=False)


def test_shared_gemm_with_cooperative_vectorized_fetches():
    before, sch, _stages = _gemm_shared(fetch=True)
    assert sch.mod.script().count('T.thread_binding(16, thread="threadIdx.x")') == 3
    assert_order_free(before, sch.mod)


# ------------------------------------------------------------------------- the scope rules
SCOPES = """
@T.prim_func
def main(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
    X = T.alloc_buffer((32,), scope="SCOPE")
    for i in range(32):
        with T.block("X"):
            vi = T.axis.spatial(32, i)
            X[vi] = A[vi] * T.float32(2)
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for vt in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(4, thread="threadIdx.x"):
                for j in range(2):
                    with T.block("C"):
                        vi = T.axis.spatial(32, bx * 16 + vt * 8 + tx * 2 + j)
                        C[vi] = X[vi] + T.float32(1)
"""


def _scoped(scope: str, serial: bool = False):
    text = SCOPES.replace("SCOPE", scope)
    if serial:
        for tag in ("blockIdx.x", "vthread.x", "threadIdx.x"):
            text = text.replace(f', thread="{tag}")', ")").replace("T.thread_binding(", "range(")
    return engine.parse(text)


@pytest.mark.parametrize("scope, at, extent, binding", [
    # one thread's two elements
    ("local", "tx", 2, "bx * 16 + vt * 8 + tx * 2 + ax0"),
    ("global", "tx", 2, "bx * 16 + vt * 8 + tx * 2 + ax0"),
    ("global.A_reg", "tx", 2, "bx * 16 + vt * 8 + tx * 2 + ax0"),
    # the block's threads and virtual threads share it: relaxed over tx and vt, not bx
    ("shared", "tx", 16, "bx * 16 + ax0"),
    ("shared.dyn", "tx", 16, "bx * 16 + ax0"),
    ("shared", "vt", 16, "bx * 16 + ax0"),
    ("local", "vt", 8, "bx * 16 + vt * 8 + ax0"),
    # at the blockIdx loop: the loops inside are relaxed anyway; bx itself is not
    ("shared", "bx", 16, "bx * 16 + ax0"),
])
def test_storage_scope_decides_the_threads_relaxed(scope, at, extent, binding):
    before = _scoped(scope)
    sch = Schedule(before)
    loops = dict(zip(("bx", "vt", "tx", "j"), sch.get_loops("C")))
    sch.compute_at(sch.get_block("X"), loops[at])
    nest = sch.get(sch.get_loops("X")[-1])
    assert isinstance(nest, For) and nest.kind is ForKind.SERIAL
    assert nest.extent.value == extent
    assert f"vi = T.axis.spatial(32, {binding})" in sch.mod.script()
    assert_order_free(before, sch.mod)


def test_without_thread_axes_nothing_changes():
    sch = Schedule(_scoped("shared", serial=True))
    sch.compute_at(sch.get_block("X"), sch.get_loops("C")[2])
    assert "vi = T.axis.spatial(32, bx * 16 + vt * 8 + tx * 2 + ax0)" in sch.mod.script()
    assert sch.get(sch.get_loops("X")[-1]).extent.value == 2


def test_reverse_compute_at_stays_per_thread():
    """TVM relaxes by scope for compute_at only: the consumer moved under the producer's
    thread loop reads what that thread wrote (relaxed, it would read other threads' elements
    before they are written)."""
    text = """
@T.prim_func
def main(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
    X = T.alloc_buffer((32,), scope="shared")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(4, thread="threadIdx.x"):
            for j in range(4):
                with T.block("X"):
                    vi = T.axis.spatial(32, bx * 16 + tx * 4 + j)
                    X[vi] = A[vi] * T.float32(2)
    for i in range(32):
        with T.block("C"):
            vi = T.axis.spatial(32, i)
            C[vi] = X[vi] + T.float32(1)
"""
    before = engine.parse(text)
    sch = Schedule(before)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops("X")[1])
    assert "vi = T.axis.spatial(32, bx * 16 + tx * 4 + ax0)" in sch.mod.script()
    assert sch.get(sch.get_loops("C")[-1]).extent.value == 4
    assert_order_free(before, sch.mod)


def test_a_reduction_recomputed_per_thread_runs_whole_or_is_refused():
    """A reduction into a shared buffer at a thread loop: each iteration recomputes every
    sum from its init (the meaning kept); one whose reduction would be split across the
    iterations of the loop, now also repeated for each thread, is refused."""
    text = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((8,), scope="shared")
    for i, k in T.grid(8, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        with T.block("C"):
            vi = T.axis.spatial(8, tx)
            C[vi] = S[vi] * T.float32(2)
"""
    before = engine.parse(text)
    sch = Schedule(before)
    tx, = sch.get_loops("C")
    sch.compute_at(sch.get_block("S"), tx)
    assert sch.mod.script().count("T.grid(8, 8)") == 1
    assert_computes_exactly(before, sch.mod, compiled=False)
    # decomposed first: the update alone would add A's rows once per thread
    sch2 = Schedule(before)
    s = sch2.get_block("S")
    sch2.decompose_reduction(s, sch2.get_loops(s)[1])
    tx, = sch2.get_loops("C")
    refused(sch2, lambda: sch2.compute_at(s, tx), "at loop tx some of its elements would be "
            "computed more than once, accumulating twice")
    # a local S is the thread's own: its row, once
    local = engine.parse(text.replace('scope="shared"', 'scope="local"'))
    sch3 = Schedule(local)
    s = sch3.get_block("S")
    sch3.decompose_reduction(s, sch3.get_loops(s)[1])
    sch3.compute_at(s, sch3.get_loops("C")[0])
    assert_computes_exactly(local, sch3.mod, compiled=False)
