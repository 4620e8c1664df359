"""compute_at and reverse_compute_at: the values each axis takes at the new place (TVM's
algorithm, engine/schedule/primitives/var_domain.py), semantics first.

Every schedule accepted here is run: the scheduled module, interpreted and compiled, must
give exactly what the reference interpreter gives on the original module, on random small
integers (tests/semantics.py). The programs are this project's own; each test says which
kind of region it exercises (and the Apache TVM test of tests/python/s_tir/schedule/
test_tir_schedule_compute_at.py whose case it mirrors, where one does).
"""
from __future__ import annotations

import numpy as np

import engine
from engine.ir.stmt import For
from semantics import assert_computes_exactly, assert_refused


def _sch(src):
    mod = engine.parse("from tvm.script import tir as T\n" + src)
    return mod, engine.Schedule(mod)


def _loops_of(sch, block):
    return [(lp.loop_var.name, lp.extent) for lp in
            (sch.get(x) for x in sch.get_loops(sch.get_block(block)))]


def _extents(sch, block):
    return [int(ext.value) if hasattr(ext, "value") else str(ext)
            for _name, ext in _loops_of(sch, block)]


# ---------------------------------------------------------------------------- tiles
TILED_BLOCK = '''
@T.prim_func
def main(A: T.Buffer((32, 32), "int32"), C: T.Buffer((32, 32), "int32")):
    B = T.alloc_buffer((32, 32), "int32")
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 3 + vi
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - vj
'''


def test_compute_at_of_a_blockized_tile_covers_the_tiles_read():
    """A block writing ``B[vo * 4 : vo * 4 + 4, ...]`` (blockize) computed under a loop of a
    consumer reading 8 x 8 tiles runs 2 x 2 of its instances there, not all 8 x 8
    (mirrors test_compute_at_blockized_2)."""
    mod, sch = _sch(TILED_BLOCK)
    i, j = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, ii, ji)
    outer = sch.blockize(ii)
    ci, cj = sch.get_loops(sch.get_block("C"))
    cio, cii = sch.split(ci, [None, 8])
    cjo, cji = sch.split(cj, [None, 8])
    sch.reorder(cio, cjo, cii, cji)
    sch.compute_at(outer, cjo)
    assert _extents(sch, sch.get(outer).name_hint) == [4, 4, 2, 2]
    assert_computes_exactly(mod, sch.mod)


REVERSED_WRITE = '''
@T.prim_func
def main(X: T.Buffer((6, 5), "int32"), Z: T.Buffer((5, 6), "int32")):
    Y = T.alloc_buffer((6, 5), "int32")
    for i, j in T.grid(6, 5):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[5 - vi, 4 - vj] = X[vi, vj] * 2 + vj
    for i, j in T.grid(5, 6):
        with T.block("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = Y[vj, vi] + 1
'''


def test_compute_at_inverts_a_reversed_write():
    """``Y[5 - vi, 4 - vj]`` is a one-to-one map of the axes: under the consumer's loop
    ``i`` (reading column ``i`` of Y) the producer runs one column, ``vj = 4 - i``
    (mirrors test_compute_at_rev_iter)."""
    mod, sch = _sch(REVERSED_WRITE)
    sch.compute_at(sch.get_block("Y"), sch.get_loops(sch.get_block("Z"))[0])
    text = sch.mod.script()
    assert "vj = T.axis.spatial(5, 4 - i)" in text, text
    assert _extents(sch, "Y") == [5, 6]
    assert_computes_exactly(mod, sch.mod)


SWAPPED_DIGITS = '''
@T.prim_func
def main(X: T.Buffer((16,), "int32"), Z: T.Buffer((2, 16), "int32")):
    Y = T.alloc_buffer((4, 4), "int32")
    for v in range(16):
        with T.block("Y"):
            vv = T.axis.spatial(16, v)
            Y[vv % 4, 3 - vv // 4] = X[vv] * 3 + vv
    for a, b, c in T.grid(2, 4, 4):
        with T.block("Z"):
            va, vb, vc = T.axis.remap("SSS", [a, b, c])
            Z[va, vb * 4 + vc] = Y[vc, va * 2 + vb % 2]
'''


def test_compute_at_with_digits_of_opposite_directions_runs_all_it_needs():
    """``Y[v % 4, 3 - v // 4]``: the axis grows with one index and falls with the other.
    The values of ``v`` a box of Y needs lie between what its corners give only when
    both grow; here the engine takes the hull of the digits (TVM's corner inverse would
    miss some), and the result is exact."""
    mod, sch = _sch(SWAPPED_DIGITS)
    sch.compute_at(sch.get_block("Y"), sch.get_loops(sch.get_block("Z"))[0])
    assert_computes_exactly(mod, sch.mod)


# ---------------------------------------------------------------------------- // and edges
GROUPED = '''
@T.prim_func
def main(X: T.Buffer((36,), "int32"), Y: T.Buffer((36,), "int32")):
    B = T.alloc_buffer((9,), "int32")
    for i in range(9):
        with T.block("B"):
            vi = T.axis.spatial(9, i)
            B[vi] = vi * 5 - 7
    for o, c in T.grid(2, 18):
        with T.block("Y"):
            vc = T.axis.spatial(36, o * 18 + c)
            Y[vc] = X[vc] + B[vc // 4]
'''


def test_compute_at_a_tile_not_aligned_with_the_groups_read():
    """A consumer tile of 18 channels reads the groups ``c // 4`` of 4 channels: tile 0
    reads groups 0..4, tile 1 groups 4..8, so the producer runs 5 per tile, from
    ``o * 4`` (the quotient ``(o * 18) // 4`` folded for ``o`` in [0, 1]; mirrors
    test_compute_at_non_perfect_channel_group)."""
    mod, sch = _sch(GROUPED)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("Y"))[0])
    assert "vi = T.axis.spatial(9, o * 4 + ax0)" in sch.mod.script()
    assert _extents(sch, "B") == [2, 5]
    assert_computes_exactly(mod, sch.mod)


REPEAT = '''
@T.prim_func
def main(X: T.Buffer((4,), "int32"), R: T.Buffer((64,), "int32")):
    B = T.alloc_buffer((4,), "int32")
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = X[vi] * 7 + 1
    for o, k in T.grid(8, 8):
        with T.block("R"):
            v = T.axis.spatial(64, o * 8 + k)
            R[v] = B[v // 16] + v
'''


def test_compute_at_of_a_repeated_element_runs_one_instance():
    """Eight consumers in a row read the same element ``B[v // 16]``: one producer instance,
    ``o // 2``, per iteration of ``o`` (mirrors test_compute_at_tiled_repeat_op)."""
    mod, sch = _sch(REPEAT)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("R"))[0])
    assert "vi = T.axis.spatial(4, o // 2)" in sch.mod.script()
    assert _extents(sch, "B") == [8]
    assert_computes_exactly(mod, sch.mod)


CONCAT = '''
@T.prim_func
def main(X: T.Buffer((6,), "int32"), W: T.Buffer((4,), "int32"), C: T.Buffer((10,), "int32")):
    P = T.alloc_buffer((6,), "int32")
    Q = T.alloc_buffer((4,), "int32")
    for i in range(6):
        with T.block("P"):
            vi = T.axis.spatial(6, i)
            P[vi] = X[vi] + 3
    for i in range(4):
        with T.block("Q"):
            vi = T.axis.spatial(4, i)
            Q[vi] = W[vi] * 2
    for i in range(10):
        with T.block("C"):
            vi = T.axis.spatial(10, i)
            C[vi] = T.if_then_else(6 <= vi, Q[vi - 6], P[vi])
'''


def test_compute_at_into_a_concatenation_guards_each_part():
    """The concatenation's loop reads ``P[i]`` and ``Q[i - 6]``: each producer runs one
    instance per iteration, kept inside its own buffer by a ``T.where`` in TVM's form
    (mirrors test_compute_at_concat)."""
    mod, sch = _sch(CONCAT)
    loop = sch.get_loops(sch.get_block("C"))[0]
    sch.compute_at(sch.get_block("P"), loop)
    sch.compute_at(sch.get_block("Q"), loop)
    text = sch.mod.script()
    assert "T.where(i < 6)" in text and "T.where(6 <= i)" in text, text
    assert_computes_exactly(mod, sch.mod)


SLICE = '''
@T.prim_func
def main(X: T.Buffer((4,), "int32"), Z: T.Buffer((12,), "int32"), S: T.Buffer((11,), "int32")):
    P = T.alloc_buffer((4,), "int32")
    Cat = T.alloc_buffer((14,), "int32")
    for i in range(4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            P[vi] = X[vi] * 5
    for i in range(14):
        with T.block("Cat"):
            vi = T.axis.spatial(14, i)
            Cat[vi] = T.if_then_else(10 <= vi, P[vi - 10], Z[T.min(vi, 11)])
    for o, i in T.grid(1, 11):
        with T.block("S"):
            vo = T.axis.spatial(1, o)
            vi = T.axis.spatial(11, i)
            S[vi] = Cat[vi] + vo
'''


def test_compute_at_keeps_only_what_lies_inside_the_buffer():
    """The slice reads ``Cat[0:11]``, whose part from P is ``P[vi - 10]`` for ``vi`` in
    [0, 10]: the index runs over [-10, 0], of which only 0 is inside P — one instance
    (mirrors test_compute_at_sliced_concatenate); the unit loop's value is 0."""
    mod, sch = _sch(SLICE)
    loop = sch.get_loops(sch.get_block("S"))[0]
    sch.compute_at(sch.get_block("Cat"), loop)
    sch.compute_at(sch.get_block("P"), loop)
    text = sch.mod.script()
    assert "vi = T.axis.spatial(4, 0)" in text, text
    assert _extents(sch, "Cat") == [1, 11]
    assert_computes_exactly(mod, sch.mod)


POOL = '''
@T.prim_func
def main(X: T.Buffer((12, 12), "int32"), Y: T.Buffer((12, 12), "int32")):
    cache = T.alloc_buffer((12, 12), "int32")
    for h, w in T.grid(12, 12):
        with T.block("cache"):
            vh, vw = T.axis.remap("SS", [h, w])
            cache[vh, vw] = X[vh, vw]
    for ho, wo, hi, wi, kh, kw in T.grid(3, 3, 4, 4, 3, 3):
        with T.block("pool"):
            vh = T.axis.spatial(12, ho * 4 + hi)
            vw = T.axis.spatial(12, wo * 4 + wi)
            rh, rw = T.axis.remap("RR", [kh, kw])
            with T.init():
                Y[vh, vw] = 0
            Y[vh, vw] = Y[vh, vw] + T.if_then_else(
                1 <= vh + rh and vh + rh < 13 and 1 <= vw + rw and vw + rw < 13,
                cache[T.max(vh + rh - 1, 0), T.max(vw + rw - 1, 0)], 0)
'''


def test_compute_at_of_a_padded_window_keeps_the_halo_inside_the_buffer():
    """A 3 x 3 window around each 4 x 4 tile reads a 6 x 6 halo, one row and column
    outside the buffer at the edges: the producer runs 6 x 6 per tile from
    ``ho * 4 - 1``, the edges cut by a ``T.where`` in TVM's form (mirrors
    test_compute_at_tiled_pooling_read_cache)."""
    mod, sch = _sch(POOL.replace("T.max(vh + rh - 1, 0), T.max(vw + rw - 1, 0)",
                                 "vh + rh - 1, vw + rw - 1"))
    sch.compute_at(sch.get_block("cache"), sch.get_loops(sch.get_block("pool"))[1])
    text = sch.mod.script()
    assert "vh = T.axis.spatial(12, ho * 4 - 1 + ax0)" in text, text
    assert "T.where(1 <= ho * 4 + ax0 and ho * 4 + ax0 < 13 and 1 <= wo * 4 + ax1 and " \
           "wo * 4 + ax1 < 13)" in text, text
    assert_computes_exactly(mod, sch.mod)


# ---------------------------------------------------------------------------- positions
TWO_PRODUCERS = '''
@T.prim_func
def main(A: T.Buffer((4, 6), "int32"), W: T.Buffer((6,), "int32"), C: T.Buffer((4, 6), "int32")):
    P = T.alloc_buffer((4, 6), "int32")
    Q = T.alloc_buffer((6,), "int32")
    for i, j in T.grid(4, 6):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = A[vi, vj] + vi
    for i in range(1):
        for k in range(6):
            with T.block("Q"):
                vk = T.axis.spatial(6, k)
                Q[vk] = W[vk] * 2
        for a, b in T.grid(4, 6):
            with T.block("C"):
                va, vb, vi = T.axis.remap("SSS", [a, b, i])
                C[va, vb] = P[va, vb] * Q[vb] + vi
'''


def test_compute_at_index_minus_two_goes_first():
    """``index=-2`` puts the block at the first place allowed (after its producers: here
    none under the loop, so first), ``-1`` at the last (before the first consumer);
    mirrors test_compute_at_to_index."""
    for index, first in ((-2, "P"), (-1, "Q")):
        mod, sch = _sch(TWO_PRODUCERS)
        sch.compute_at(sch.get_block("P"), sch.get_loops(sch.get_block("C"))[0], index=index)
        loop = sch.get(sch.get_loops(sch.get_block("C"))[0])
        names = [b.name_hint for b in _blocks_in_order(loop)]
        assert names[0] == first, names
        assert_computes_exactly(mod, sch.mod)


def _blocks_in_order(stmt):
    from engine.ir.functor import collect_stmts
    from engine.ir.stmt import Block
    return [b for b in collect_stmts(stmt, Block)]


PRODUCER_AND_OTHER = '''
@T.prim_func
def main(A: T.Buffer((4, 6), "int32"), W: T.Buffer((4,), "int32"), C: T.Buffer((4, 6), "int32"),
         D: T.Buffer((4,), "int32")):
    B = T.alloc_buffer((4, 6), "int32")
    for i in range(4):
        for j in range(6):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * 2
        with T.block("D"):
            vi = T.axis.spatial(4, i)
            D[vi] = W[vi] + 1
    for i, j in T.grid(4, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + vj
'''


def test_reverse_compute_at_goes_last_in_the_loop_body():
    """reverse_compute_at puts the block at the end of the loop's body by default (TVM's
    index -1: no consumer under the loop), after an unrelated block too; ``index=-2``
    right after its last producer."""
    for index, order in ((-1, ["B", "D", "C"]), (-2, ["B", "C", "D"])):
        mod, sch = _sch(PRODUCER_AND_OTHER)
        sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0],
                               index=index)
        loop = sch.get(sch.get_loops(sch.get_block("B"))[0])
        assert [b.name_hint for b in _blocks_in_order(loop)] == order
        assert_computes_exactly(mod, sch.mod)


def test_an_index_outside_the_places_allowed_is_refused():
    mod, sch = _sch(PRODUCER_AND_OTHER)
    loop = sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.reverse_compute_at(sch.get_block("C"), loop, index=0),
                   "positions allowed are 1 to 2")


# ---------------------------------------------------------------------------- reverse
LAYOUT = '''
@T.prim_func
def main(A: T.Buffer((3, 2, 8), "int32"), C: T.Buffer((6, 2, 4), "int32")):
    B = T.alloc_buffer((3, 2, 8), "int32")
    for i, j, k in T.grid(3, 2, 8):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * 3 + vk
    for a, b, c in T.grid(6, 2, 4):
        with T.block("C"):
            va, vb, vc = T.axis.remap("SSS", [a, b, c])
            C[va, vb, vc] = B[(va * 4 + vc) // 8, vb, (va * 4 + vc) % 8] + va
'''


def test_reverse_compute_at_of_a_layout_change_finds_the_fused_axes():
    """The consumer reads ``B[(a * 4 + c) // 8, b, (a * 4 + c) % 8]``: one row ``i`` of B
    is two values of ``a`` (``i * 2 + ax0``) and every ``c`` (mirrors
    test_reverse_compute_at_layout_trans)."""
    mod, sch = _sch(LAYOUT)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
    assert "va = T.axis.spatial(6, i * 2 + ax0)" in sch.mod.script()
    assert _extents(sch, "C") == [3, 2, 2, 4]
    assert_computes_exactly(mod, sch.mod)


SMALL_CONSUMER = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "int32"), D: T.Buffer((1, 2), "int32")):
    B = T.alloc_buffer((8, 8), "int32")
    for i_0, j_0, i_1, j_1 in T.grid(2, 2, 4, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i_0 * 4 + i_1)
            vj = T.axis.spatial(8, j_0 * 4 + j_1)
            B[vi, vj] = A[vi, vj] * 2 + vj
    for a, b in T.grid(1, 2):
        with T.block("D"):
            va, vb = T.axis.remap("SS", [a, b])
            D[va, vb] = B[va, vb] + 1
'''


def test_reverse_compute_at_of_a_block_smaller_than_the_tiles():
    """The consumer reads only ``B[0, 0:2]``: under the producer's row loop it runs where
    the row and the tile hold those, kept there by a ``T.where`` (mirrors
    test_reverse_compute_at_with_unit_loop)."""
    mod, sch = _sch(SMALL_CONSUMER)
    sch.reverse_compute_at(sch.get_block("D"), sch.get_loops(sch.get_block("B"))[2],
                           preserve_unit_loops=True)
    assert "T.where(i_0 * 4 + i_1 < 1 and j_0 * 4 + ax1 < 2)" in sch.mod.script()
    assert_computes_exactly(mod, sch.mod)


OVERLAP_SUM = '''
@T.prim_func
def main(A: T.Buffer((9,), "int32"), S: T.Buffer((), "int32")):
    B = T.alloc_buffer((9,), "int32")
    for i, j in T.grid(8, 2):
        with T.block("B"):
            v = T.axis.spatial(9, i + j)
            B[v] = A[v] * 3
    for k in range(9):
        with T.block("S"):
            vk = T.axis.reduce(9, k)
            with T.init():
                S[()] = 0
            S[()] = S[()] + B[vk]
'''


def test_reverse_compute_at_refuses_to_add_a_reduction_step_twice():
    """Each iteration of ``i`` writes ``B[i:i + 2]``: a sum over B moved there would run
    its steps over ``[i, i + 1]`` each time, adding every inner element twice (TVM
    accepts it)."""
    mod, sch = _sch(OVERLAP_SUM)
    i = sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.reverse_compute_at(sch.get_block("S"), i),
                   "reduction axis vk", "exactly once")


ROW_SUM = '''
@T.prim_func
def main(A: T.Buffer((6, 4), "int32"), S: T.Buffer((), "int32")):
    B = T.alloc_buffer((6,), "int32")
    for i, j in T.grid(6, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                B[vi] = 0
            B[vi] = B[vi] + A[vi, vj]
    for k in range(6):
        with T.block("S"):
            vk = T.axis.reduce(6, k)
            with T.init():
                S[()] = 0
            S[()] = S[()] + B[vk] * vk
'''


def test_reverse_compute_at_splits_a_sum_over_the_rows_produced():
    """Each iteration of the rows loop finishes ``B[i]``: the sum over B runs its step
    ``vk = i`` there, each step once and in order, its init at the first."""
    mod, sch = _sch(ROW_SUM)
    sch.reverse_compute_at(sch.get_block("S"), sch.get_loops(sch.get_block("B"))[0])
    assert 'vk = T.axis.remap("R", [i])' in sch.mod.script()
    assert_computes_exactly(mod, sch.mod)


# ---------------------------------------------------------------------------- symbolic sizes
SYM_COPY = '''
@T.prim_func
def main(x: T.handle, y: T.handle, n: T.int32):
    X = T.match_buffer(x, (3, n * 4), "int32")
    Y = T.match_buffer(y, (3, n * 4), "int32")
    for i, k in T.grid(3, n * 4):
        with T.block("Y"):
            vi, vk = T.axis.remap("SS", [i, k])
            Y[vi, vk] = X[vi, vk] * 2 + vk
'''


def _run_sizes(before, after, shapes_of_n, sizes=(1, 3), scalar=False):
    """``after`` computes exactly what ``before`` computes at each size ``n`` (interpreted
    and compiled); ``scalar``: ``n`` is also the function's last parameter."""
    rng = np.random.default_rng(0)
    built = engine.build(after)
    for n in sizes:
        args = [rng.integers(-4, 5, s).astype("int32") for s in shapes_of_n(n)]
        extra = [n] if scalar else []
        want = [a.copy() for a in args]
        engine.interpret(before, "main", *want, *extra)
        for run in (lambda xs: engine.interpret(after, "main", *xs, *extra),
                    lambda xs: built["main"](*xs, *extra)):
            got = [a.copy() for a in args]
            run(got)
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g, w)


def test_compute_at_under_a_loop_of_symbolic_extent_needs_no_guard():
    """A split of ``n * 4`` by 4 leaves no tail, and a cache computed at its outer loop
    runs 4 columns from ``k_0 * 4`` with no ``T.where``: ``k_0 * 4 + ax0 < n * 4`` is proven
    from ``k_0 <= n - 1`` (mirrors test_compute_at_simplify_symbolic_predicate)."""
    mod, sch = _sch(SYM_COPY)
    blk = sch.get_block("Y")
    _i, k = sch.get_loops(blk)
    ko, _ki = sch.split(k, [None, 4])
    cache = sch.cache_read(blk, 0, "global")
    sch.compute_at(cache, ko)
    text = sch.mod.script()
    assert "T.where" not in text, text
    assert _extents(sch, "X_global")[-1] == 4
    _run_sizes(mod, sch.mod, lambda n: [(3, n * 4), (3, n * 4)], scalar=True)


SYM_SUM = '''
@T.prim_func
def main(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (4, n, 8), "int32")
    C = T.match_buffer(c, (4, n), "int32")
    P = T.alloc_buffer((8, 4, n), "int32")
    for f, r in T.grid(n * 4, 8):
        with T.block("P"):
            vr = T.axis.spatial(8, r)
            v0 = T.axis.spatial(4, f // n)
            v1 = T.axis.spatial(n, f % n)
            P[vr, v0, v1] = A[v0, v1, vr] * 2
    for f, r in T.grid(n * 4, 8):
        with T.block("C"):
            vr = T.axis.reduce(8, r)
            v0 = T.axis.spatial(4, f // n)
            v1 = T.axis.spatial(n, f % n)
            with T.init():
                C[v0, v1] = 0
            C[v0, v1] = C[v0, v1] + P[vr, v0, v1]
'''


def test_reverse_compute_at_with_a_symbolic_fused_loop():
    """Both loops run ``f`` over ``n * 4`` with axes ``f // n`` and ``f % n``: the consumer
    moved under the producer's ``f`` keeps its bindings (each instance once), with no
    ``T.where`` — ``f // n <= 3`` is proven for ``f < n * 4`` (mirrors
    test_shape_var_as_bound)."""
    mod, sch = _sch(SYM_SUM)
    f = sch.get_loops(sch.get_block("P"))[0]
    sch.reverse_compute_at(sch.get_block("C"), f, preserve_unit_loops=True)
    text = sch.mod.script()
    assert "v0 = T.axis.spatial(4, f // n + ax1)" in text and "T.where" not in text, text
    _run_sizes(mod, sch.mod, lambda n: [(4, n, 8), (4, n)])
