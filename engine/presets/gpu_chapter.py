"""The course's GPU chapter (part 1), program by program: the TensorIR it starts from and the
schedule it applies, each made only of schedule primitives, as the course writes them.

* :func:`vector_add` — ``split(i, [None, 128])``, ``bind`` blockIdx.x / threadIdx.x;
* :func:`window_sum` — as vector add, then ``cache_read(C, 0, "shared")``,
  ``compute_at(A_shared, i1)`` and the cooperative fetch (the fetch loop split by the
  thread count, its inner part bound to threadIdx.x);
* :func:`gemm_local` — local blocking: ``cache_write(C, 0, "local")``, 3-level tiles of i
  and j, ``unroll(k1)``, ``reorder``, ``reverse_compute_at(C_local, j1)``, binds of
  blockIdx.y/x and threadIdx.y/x, ``decompose_reduction``;
* :func:`gemm_shared` — shared memory blocking: as local blocking with the thread loops
  fused into threadIdx.x, plus A and B read into "shared" tiles at ``k0`` by cooperative,
  vectorized fetches.

Each returns a :class:`engine.schedule.Schedule` whose trace is what the course's cells
record; ``PROGRAMS`` names them for the command line and the tests. Sizes are parameters
(the course uses 1024) so that tests can run them small.
"""
from __future__ import annotations

from engine.schedule import Schedule
from engine.script import parse

VECTOR_ADD = """
@T.prim_func
def main(A: T.Buffer(({n},), "float32"), B: T.Buffer(({n},), "float32"),
         C: T.Buffer(({n},), "float32")):
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    for i in T.grid({n}):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]
"""

WINDOW_SUM = """
@T.prim_func
def main(A: T.Buffer(({m},), "float32"), B: T.Buffer(({n},), "float32")):
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    for i in T.grid({n}):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + A[vi + 1] + A[vi + 2]
"""

MATMUL = """
@T.prim_func
def main(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"),
         C: T.Buffer(({n}, {n}), "float32")):
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    for i, j, k in T.grid({n}, {n}, {n}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def vector_add_program(n: int = 1024):
    return parse(VECTOR_ADD.format(n=n))


def window_sum_program(n: int = 1024):
    return parse(WINDOW_SUM.format(n=n, m=n + 2))


def matmul_program(n: int = 1024):
    return parse(MATMUL.format(n=n))


def vector_add(n: int = 1024, nthread: int = 128) -> Schedule:
    sch = Schedule(vector_add_program(n))
    apply_vector_add(sch, nthread)
    return sch


def apply_vector_add(sch: Schedule, nthread: int = 128, func_name: str | None = None) -> None:
    block_c = sch.get_block("C", func_name=func_name)
    i, = sch.get_loops(block=block_c)
    i0, i1 = sch.split(i, [None, nthread])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")


def window_sum(n: int = 1024, nthread: int = 128) -> Schedule:
    sch = Schedule(window_sum_program(n))
    apply_window_sum(sch, nthread)
    return sch


def apply_window_sum(sch: Schedule, nthread: int = 128, func_name: str | None = None) -> None:
    block_c = sch.get_block("C", func_name=func_name)
    i, = sch.get_loops(block=block_c)
    i0, i1 = sch.split(i, [None, nthread])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    a_shared = sch.cache_read(block_c, read_buffer_index=0, storage_scope="shared")
    sch.compute_at(a_shared, i1)
    ax = sch.get_loops(a_shared)[-1]
    ax0, ax1 = sch.split(ax, [None, nthread])
    sch.bind(ax1, "threadIdx.x")


def gemm_local(n: int = 1024, tile_local_y: int = 8, tile_local_x: int = 8,
               tile_block_y: int = 8, tile_block_x: int = 8, tile_k: int = 4) -> Schedule:
    """The course's ``blocking(sch, 8, 8, 8, 8, 4)``."""
    sch = Schedule(matmul_program(n))
    apply_gemm_local(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k)
    return sch


def apply_gemm_local(sch: Schedule, tile_local_y: int = 8, tile_local_x: int = 8,
                     tile_block_y: int = 8, tile_block_x: int = 8, tile_k: int = 4,
                     func_name: str | None = None) -> None:
    block_c = sch.get_block("C", func_name=func_name)
    c_local = sch.cache_write(block_c, 0, "local")
    i, j, k = sch.get_loops(block=block_c)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_c, k0)


def _cache_read_and_coop_fetch(sch: Schedule, block, nthread: int, read_idx: int, read_loc):
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx,
                                storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    # vectorized cooperative fetch
    inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
    sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")


def gemm_shared(n: int = 1024, tile_local_y: int = 8, tile_local_x: int = 8,
                tile_block_y: int = 8, tile_block_x: int = 8, tile_k: int = 8) -> Schedule:
    """The course's ``blocking_with_shared(sch, 8, 8, 8, 8, 8)``."""
    sch = Schedule(matmul_program(n))
    apply_gemm_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k)
    return sch


def apply_gemm_shared(sch: Schedule, tile_local_y: int = 8, tile_local_x: int = 8,
                      tile_block_y: int = 8, tile_block_x: int = 8, tile_k: int = 8,
                      func_name: str | None = None) -> None:
    block_c = sch.get_block("C", func_name=func_name)
    c_local = sch.cache_write(block_c, 0, "local")
    i, j, k = sch.get_loops(block=block_c)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    _cache_read_and_coop_fetch(sch, block_c, nthread, 0, k0)   # A
    _cache_read_and_coop_fetch(sch, block_c, nthread, 1, k0)   # B
    sch.decompose_reduction(block_c, k0)


#: name -> (schedule builder, FLOPs at size n)
PROGRAMS = {
    "vector_add": (vector_add, lambda n: n),
    "window_sum": (window_sum, lambda n: 2 * n),
    "gemm_local": (gemm_local, lambda n: 2 * n ** 3),
    "gemm_shared": (gemm_shared, lambda n: 2 * n ** 3),
}
