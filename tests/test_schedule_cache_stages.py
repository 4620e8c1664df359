"""cache_read / cache_write: the region a cache holds and the rules that keep a program's
meaning when the accesses move to it.

A stage placed in a block (the scope) gets a cache of just its region, the accesses
shifted (TVM's compact cache); the region follows nested blocks' T.where (the union of
sibling blocks' boxes); readers must read only what the stage copied; cache_write's
writer must write every element it copies back, and may read its buffer only where it
wrote it first. Every accepted schedule is compiled and interpreted against the original
on random small integers; every refusal leaves the schedule unchanged.
"""
from __future__ import annotations

import pytest

import engine
from engine.schedule import Schedule
from semantics import assert_computes_exactly, assert_refused


def _sch(src: str) -> Schedule:
    return Schedule(engine.parse(src))


def _alloc_shape(sch: Schedule, name: str) -> tuple:
    func = sch.mod[sch.mod.prim_func_names()[0]]
    found = []

    def visit(s):
        from engine.ir.functor import post_order_visit
        from engine.ir.stmt import Block

        def fn(x):
            if isinstance(x, Block):
                found.extend(b for b in x.alloc_buffers if b.name == name)
        post_order_visit(s, fn)
    visit(func.body)
    assert len(found) == 1, [b.name for b in found]
    return tuple(int(s) for s in found[0].shape)


# a scope block per tile: its first block writes a tile of A, its second reads it
TILES = '''
@T.prim_func
def main(B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32"),
         D: T.Buffer((32, 32), "float32")):
    A = T.alloc_buffer((32, 32))
    for i0, j0 in T.grid(4, 4):
        with T.block("scope"):
            i, j = T.axis.remap("SS", [i0, j0])
            for x, y in T.grid(8, 8):
                with T.block("A"):
                    vi = T.axis.spatial(32, i * 8 + x)
                    vj = T.axis.spatial(32, j * 8 + y)
                    A[vi, vj] = B[vi, vj] * T.float32(3)
            for x, y in T.grid(8, 8):
                with T.block("C"):
                    vi = T.axis.spatial(32, i * 8 + x)
                    vj = T.axis.spatial(32, j * 8 + y)
                    C[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(32, 32):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = A[vi, vj] * T.float32(2)
'''


def test_cache_read_in_a_scope_holds_one_tile_at_an_offset():
    sch = _sch(TILES)
    before = sch.mod
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert _alloc_shape(sch, "A_local") == (8, 8)
    text = sch.mod.script()
    assert "A_local[v0, v1] = A[i * 8 + v0, j * 8 + v1]" in text
    assert "C[vi, vj] = A_local[vi - i * 8, vj - j * 8] + T.float32(1)" in text
    assert_computes_exactly(before, sch.mod)
    # the read at the top level copies the scope's whole writes: the buffer's shape
    sch.cache_read(sch.get_block("D"), 0, "global")
    assert _alloc_shape(sch, "A_global") == (32, 32)
    assert_computes_exactly(before, sch.mod)


def test_cache_write_in_a_scope_then_of_the_scope_block():
    sch = _sch(TILES)
    before = sch.mod
    sch.cache_write(sch.get_block("A"), 0, "local")
    assert _alloc_shape(sch, "A_local") == (8, 8)
    assert "A_local[vi - i * 8, vj - j * 8] = B[vi, vj] * T.float32(3)" in sch.mod.script()
    assert_computes_exactly(before, sch.mod)
    # the scope block writes A (through its first block) before reading it: it updates
    # A without a T.init, but reads only what it wrote first, so its cache is right
    sch.cache_write(sch.get_block("scope"), 0, "global")
    assert _alloc_shape(sch, "A_global") == (32, 32)
    assert_computes_exactly(before, sch.mod)


SCOPE_READS_AHEAD = TILES.replace("C[vi, vj] = A[vi, vj] + T.float32(1)",
                                  "C[vi, vj] = A[vi, vj] + A[vi, (vj + 1) % 32]")


def test_cache_write_of_a_scope_reading_what_it_has_not_written_is_refused():
    # each tile reads one column of the next tile, written by a later scope instance
    sch = _sch(SCOPE_READS_AHEAD)
    scope = sch.get_block("scope")
    assert_refused(sch, lambda: sch.cache_write(scope, 0, "global"), "old contents of A",
                   "without a T.init")


def test_cache_read_of_a_tile_the_readers_overrun_is_refused():
    sch = _sch(SCOPE_READS_AHEAD)
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_read(c, 0, "local"), "block C may read elements "
                   "of A that block A does not write")


SPARSE = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi * 2] = A[vi] + T.float32(1)
'''


def test_cache_write_of_a_strided_store_is_refused():
    # the copy back would write the odd elements, which the block never writes
    sch = _sch(SPARSE)
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_write(c, 0, "global"), "writes every element")


PARTIAL = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"),
         C: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] * T.float32(2)
'''


def test_cache_read_of_a_buffer_written_in_part_is_refused():
    # C reads B[8:16], which keeps its old contents: a cache of what B writes lacks them
    sch = _sch(PARTIAL)
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_read(c, 0, "global"), "block C may read elements "
                   "of B that block B does not write")


NESTED = '''
@T.prim_func
def main(A: T.Buffer((12, 24), "float32"), C: T.Buffer((12, 24), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("compute"):
            vi, vj = T.axis.remap("SS", [i, j])
            with T.block("inner"):
                T.where(vi < 10 and vj < 20)
                C[vi, vj] = A[vi, vj] * T.float32(2)
'''

SIBLINGS = '''
@T.prim_func
def main(A: T.Buffer((12, 24), "float32"), C: T.Buffer((12, 24), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("compute"):
            vi, vj = T.axis.remap("SS", [i, j])
            with T.block("left"):
                T.where(vi < 8)
                C[vi, vj] = A[vi, vj] * T.float32(2)
            with T.block("top"):
                T.where(vj < 16)
                C[vi, vj] = A[vi, vj] + T.float32(3)
'''


@pytest.mark.parametrize("method", ["cache_read", "cache_write"])
def test_a_nested_blocks_predicate_bounds_the_cache(method):
    sch = _sch(NESTED)
    before = sch.mod
    getattr(sch, method)(sch.get_block("compute"), 0, "local")
    name = "A_local" if method == "cache_read" else "C_local"
    assert _alloc_shape(sch, name) == (10, 20)
    assert "for ax0, ax1 in T.grid(10, 20):" in sch.mod.script()
    assert_computes_exactly(before, sch.mod)


def test_sibling_blocks_predicates_give_the_union_of_their_reads():
    sch = _sch(SIBLINGS)
    before = sch.mod
    sch.cache_read(sch.get_block("compute"), 0, "local")
    assert _alloc_shape(sch, "A_local") == (12, 24)
    assert_computes_exactly(before, sch.mod)


def test_sibling_blocks_that_leave_a_corner_unwritten_refuse_cache_write():
    # rows 8..11 of columns 16..23 are written by neither block: copying the whole box
    # back would overwrite them with what the cache holds there
    sch = _sch(SIBLINGS)
    compute = sch.get_block("compute")
    assert_refused(sch, lambda: sch.cache_write(compute, 0, "local"), "writes every element")


GUARDED = '''
@T.prim_func
def main(A: T.Buffer((120,), "float32"), B: T.Buffer((120,), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            v = T.axis.spatial(120, i * 8 + j)
            T.where(i * 8 + j < 120)
            B[v] = A[v] + T.float32(1)
'''


def test_cache_write_under_a_where_that_cuts_the_last_tile():
    sch = _sch(GUARDED)
    before = sch.mod
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert _alloc_shape(sch, "B_local") == (120,)
    assert_computes_exactly(before, sch.mod)


IN_PLACE = '''
@T.prim_func
def main(D: T.Buffer((16,), "float32"), E: T.Buffer((16,), "float32")):
    T1 = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("copy_in"):
            v = T.axis.spatial(16, i)
            T1[v] = D[v] * T.float32(2)
    for i in range(16):
        with T.block("copy_out"):
            v = T.axis.spatial(16, i)
            D[v] = T1[v] + T.float32(1)
    for i in range(16):
        with T.block("use"):
            v = T.axis.spatial(16, i)
            E[v] = D[v]
'''


def test_cache_read_for_a_reader_before_the_writer_copies_the_old_contents():
    sch = _sch(IN_PLACE)
    before = sch.mod
    copy_in = sch.get_block("copy_in")
    sch.cache_read(copy_in, 0, "local", consumer_blocks=[copy_in])
    text = sch.mod.script()
    assert text.index('T.block("D_local")') < text.index('T.block("copy_in")')
    assert_computes_exactly(before, sch.mod)


def test_cache_read_for_readers_on_both_sides_of_the_writer_is_refused():
    sch = _sch(IN_PLACE)
    copy_in, use = sch.get_block("copy_in"), sch.get_block("use")
    assert_refused(sch, lambda: sch.cache_read(copy_in, 0, "local",
                                               consumer_blocks=[copy_in, use]),
                   "before block copy_out writes it")


BLOCKED = '''
@T.prim_func
def main(A: T.Buffer((64, 4), "float32"), B: T.Buffer((4, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    for i0, j0 in T.grid(2, 2):
        with T.block("outer"):
            vio, vjo = T.axis.remap("SS", [i0, j0])
            T.reads(A[vio * 32:vio * 32 + 32, 0:4], B[0:4, vjo * 32:vjo * 32 + 32])
            T.writes(C[vio * 32:vio * 32 + 32, vjo * 32:vjo * 32 + 32])
            for i1, j1, k in T.grid(32, 32, 4):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i1, j1, k])
                    with T.init():
                        C[vio * 32 + vi, vjo * 32 + vj] = T.float32(0)
                    C[vio * 32 + vi, vjo * 32 + vj] = C[vio * 32 + vi, vjo * 32 + vj] + \
                        A[vio * 32 + vi, vk] * B[vk, vjo * 32 + vj]
'''


def test_blocked_matmul_caches_hold_one_block():
    sch = _sch(BLOCKED)
    before = sch.mod
    mm = sch.get_block("matmul")
    sch.cache_read(mm, 0, "shared")       # A: read, not written in the scope
    assert _alloc_shape(sch, "A_shared") == (32, 4)
    sch.cache_write(mm, 0, "local")        # C: accumulated with a T.init
    assert _alloc_shape(sch, "C_local") == (32, 32)
    text = sch.mod.script()
    assert "A_shared[v0, v1] = A[vio * 32 + v0, v1]" in text
    assert "C[vio * 32 + v0, vjo * 32 + v1] = C_local[v0, v1]" in text
    assert "T.where" not in text          # in bounds: proven from the axes' domains
    assert_computes_exactly(before, sch.mod)


WIDE_SCOPE_READ = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i0 in range(4):
        with T.block("outer"):
            vo = T.axis.spatial(4, i0)
            T.reads(A[vo * 4 - 1:vo * 4 + 5])
            T.writes(C[vo * 4:vo * 4 + 4])
            for i1 in range(4):
                with T.block("C"):
                    vi = T.axis.spatial(4, i1)
                    C[vo * 4 + vi] = A[vo * 4 + vi] * T.float32(2)
'''


def test_a_cache_region_sticking_out_of_the_buffer_is_guarded():
    # the scope reads a halo (one element each side); at the edges it lies outside A
    sch = _sch(WIDE_SCOPE_READ)
    before = sch.mod
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert _alloc_shape(sch, "A_local") == (6,)
    assert "T.where(" in sch.mod.script()
    assert_computes_exactly(before, sch.mod)


LISTED = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"),
         C: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi + 8] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] * T.float32(2)
'''


def test_cache_write_consumers_reading_the_cache_must_read_what_is_written():
    sch = _sch(LISTED)
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_write(b, 0, "local", consumer_blocks=[c]),
                   "block C may read elements of B that block B does not write")
    # without C reading the cache, the copy back writes B[8:16] only: same meaning
    before = sch.mod
    sch.cache_write(b, 0, "local")
    assert _alloc_shape(sch, "B_local") == (8,)
    assert_computes_exactly(before, sch.mod)


# ---------------------------------------------------------------------------
# random sequences: tiles made into blocks (scopes where the caches are compact), caches
# of every block and buffer, moved with compute_at; every accepted program is checked
# ---------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from test_schedule_primitives import _blocks, _random_step  # noqa: E402
from test_schedule_support import SMALL, fresh, run_and_check, try_step  # noqa: E402

_STEPS = ["split", "reorder", "compute_at", "reverse_compute_at", "blockize", "cache_read",
          "cache_write", "cache_read", "cache_write"]


def _step(sch, op, picks):
    if op not in ("blockize", "cache_read", "cache_write"):
        try:
            return _random_step(sch, op, picks)
        except ZeroDivisionError:      # a block with no loop (the inside of a blockize)
            return lambda: None
    blocks = _blocks(sch)
    blk = sch.get_block(blocks[picks[0] % len(blocks)])
    node = sch.get(blk)
    scope = ["global", "local", "shared"][picks[2] % 3]
    if op == "blockize":
        loops = sch.get_loops(blk)
        if not loops:
            return lambda: None
        return lambda: sch.blockize(loops[picks[1] % len(loops)])
    regions = node.reads if op == "cache_read" else node.writes
    n = max(len(regions), 1)
    return lambda: getattr(sch, op)(blk, picks[1] % n, scope)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=60)
@given(name=st.sampled_from(["matmul", "mm_relu", "window_sum", "softmax", "conv2d"]),
       steps=st.lists(st.tuples(st.sampled_from(_STEPS),
                                st.tuples(st.integers(0, 50), st.integers(0, 50),
                                          st.integers(0, 50))), min_size=1, max_size=5))
def test_random_caches_in_blocked_programs_keep_the_meaning(name, steps):
    sch = fresh(name)
    for op, picks in steps:
        try_step(sch, op, _step(sch, op, picks))
    run_and_check(sch.mod, name, SMALL[name], use_build=False)
    run_and_check(sch.mod, name, SMALL[name])


def test_cache_write_after_two_uneven_splits_counts_what_is_stored():
    # i = (i0 * 5 + i1) * 2 + i2 under T.where(i0 * 5 + i1 < 12): every element of B once
    sch = fresh("window_sum")
    before = sch.mod
    c = sch.get_block("C")
    i0, _i1 = sch.split(sch.get_loops(c)[0], factors=[None, 2])
    sch.split(i0, factors=[None, 5])
    sch.cache_write(c, 0, "local")
    assert_computes_exactly(before, sch.mod)


PADDED = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(10):
        with T.block("C"):
            vi = T.axis.spatial(10, i)
            C[vi] = T.if_then_else(1 <= vi and vi < 9, B[vi - 1], T.float32(0))
'''


def test_a_read_under_if_then_else_needs_only_its_branch():
    # C reads B[vi - 1] only where 1 <= vi < 9: inside what B writes
    sch = _sch(PADDED)
    before = sch.mod
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert_computes_exactly(before, sch.mod)


def test_cache_write_of_a_blocked_reduction_reads_after_its_init():
    # the outer block of a blockized matmul: its T.init (a nested block) zeroes a row
    # that its body then accumulates into
    sch = fresh("matmul")
    before = sch.mod
    c = sch.get_block("C")
    outer = sch.blockize(sch.get_loops(c)[1])
    sch.cache_write(outer, 0, "local")
    assert _alloc_shape(sch, "C_local") == (16, 16)
    assert_computes_exactly(before, sch.mod)


CARRIED = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((17,), "float32"),
         C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("R"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] * T.float32(2)
        with T.block("W"):
            vi = T.axis.spatial(16, i)
            B[vi + 1] = A[vi] + C[vi]
'''


def test_a_reader_of_the_previous_iteration_refuses_both_caches():
    # R reads, in iteration i, what W wrote in iteration i - 1
    sch = _sch(CARRIED)
    r, w = sch.get_block("R"), sch.get_block("W")
    assert_refused(sch, lambda: sch.cache_write(w, 0, "global"), "in a loop it shares with "
                   "block W, before it")
    assert_refused(sch, lambda: sch.cache_read(r, 0, "global"), "in a loop it shares with "
                   "block W, before it")
