"""decompose_padding, rolling_buffer and pad_einsum: semantics first.

Every accepted schedule here is compiled and interpreted and compared with the original
program on small random integers (tests/semantics.py); each case is one that the primitive
used to refuse or to get subtly wrong (a padding block with a ``T.where``, a loop of extent
1, int64 loops, a loop that holds another block beside the padding block, ...).
"""
from __future__ import annotations

import engine
from engine.schedule import Schedule
from semantics import assert_computes_exactly, assert_refused

# ---------------------------------------------------------------------------- decompose_padding
# a 2-d "same" box filter over a padded copy: the padding block is computed at a tile loop
# that does not divide the image (a T.where on the padding block's instances)
BOX = '''
@T.prim_func
def box(x: T.Buffer((1, 3, 10, 10), "int32"), y: T.Buffer((1, 3, 10, 10), "int32")):
    p = T.alloc_buffer((1, 3, 12, 12), "int32")
    for n, c, h, w in T.grid(1, 3, 12, 12):
        with T.block("p"):
            vn, vc, vh, vw = T.axis.remap("SSSS", [n, c, h, w])
            p[vn, vc, vh, vw] = T.if_then_else(1 <= vh and vh < 11 and 1 <= vw and vw < 11,
                                               x[vn, vc, vh - 1, vw - 1], 0)
    for n, c, h, w, r, s in T.grid(1, 3, 10, 10, 3, 3):
        with T.block("y"):
            vn, vc, vh, vw, vr, vs = T.axis.remap("SSSSRR", [n, c, h, w, r, s])
            with T.init():
                y[vn, vc, vh, vw] = 0
            y[vn, vc, vh, vw] = y[vn, vc, vh, vw] + p[vn, vc, vh + vr, vw + vs]
'''


def _box_tiled(factor):
    sch = Schedule(engine.parse(BOX))
    y = sch.get_block("y")
    n, c, h, w, r, s = sch.get_loops(y)
    ho, hi = sch.split(h, [None, factor])
    wo, wi = sch.split(w, [None, factor])
    sch.reorder(n, ho, wo, c, hi, wi, r, s)
    sch.compute_at(sch.get_block("p"), wo)
    return sch


def test_decompose_padding_of_a_block_with_a_where():
    # 4 does not divide 10: the padding block's tiles overlap the end of p (a T.where)
    for at in range(6):
        sch = _box_tiled(4)
        p = sch.get_block("p")
        assert "T.where" in sch.mod.script()
        loop = sch.get_loops(p)[at]
        assert sch.can_decompose_padding(p, loop)
        sch.decompose_padding(p, loop)
        text = sch.mod.script()
        assert "T.if_then_else" not in text
        # the fill block keeps the padding block's T.where (it fills what it wrote)
        fill = text.split('T.block("p_pad_const")')[1].split("T.reads")[0]
        assert "T.where" in fill
        assert_computes_exactly(engine.parse(BOX), sch.mod)


def test_decompose_padding_of_perfect_tiles_and_a_unit_loop():
    sch = _box_tiled(5)
    p = sch.get_block("p")
    sch.decompose_padding(p, sch.get_loops(p)[3])
    text = sch.mod.script()
    # the loop n of extent 1 above the decomposition point is its value, 0
    assert "vn = T.axis.spatial(1, 0)" in text
    assert_computes_exactly(engine.parse(BOX), sch.mod)


SIBLING = '''
@T.prim_func
def sib(x: T.Buffer((4, 6), "int32"), y: T.Buffer((4, 8), "int32"), z: T.Buffer((4, 8), "int32")):
    for i, j in T.grid(4, 8):
        with T.block("pad"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = T.if_then_else(1 <= vj and vj < 7, x[vi, vj - 1], 0)
        with T.block("other"):
            vi, vj = T.axis.remap("SS", [i, j])
            z[vi, vj] = vi * 8 + vj
'''


def test_decompose_padding_keeps_a_loop_shared_with_another_block():
    # the loop j also runs block "other": it keeps its 8 iterations, the in-bound part of
    # "pad" is guarded by a T.where instead of shrinking the loop
    for at in (0, 1):
        sch = Schedule(engine.parse(SIBLING))
        pad = sch.get_block("pad")
        sch.decompose_padding(pad, sch.get_loops(pad)[at])
        text = sch.mod.script()
        assert "T.where(1 <= j and j < 7)" in text
        assert_computes_exactly(engine.parse(SIBLING), sch.mod)


INT64 = '''
@T.prim_func
def pad64(x: T.Buffer((T.int64(2), T.int64(5)), "int32"),
          y: T.Buffer((T.int64(2), T.int64(9)), "int32")):
    for i, j in T.grid(T.int64(2), T.int64(9)):
        with T.block("pad"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = T.if_then_else(T.int64(2) <= vj and vj < T.int64(7), x[vi, vj - T.int64(2)], 0)
'''


def test_decompose_padding_of_int64_loops():
    for at in (0, 1):
        sch = Schedule(engine.parse(INT64))
        pad = sch.get_block("pad")
        sch.decompose_padding(pad, sch.get_loops(pad)[at])
        text = sch.mod.script()
        assert ["for i, j in T.grid(T.int64(2), T.int64(5)):",
                "for j in T.serial(T.int64(5)):"][at] in text
        assert "y[vi, vj + T.int64(2)] = x[vi, vj]" in text
        assert_computes_exactly(engine.parse(INT64), sch.mod)


def test_decompose_padding_refuses_a_trivial_condition():
    src = SIBLING.replace("1 <= vj and vj < 7", "0 <= vj and vj < 8").replace("vj - 1", "vj")
    src = src.replace("(4, 6)", "(4, 8)")
    sch = Schedule(engine.parse(src))
    pad = sch.get_block("pad")
    assert not sch.can_decompose_padding(pad, sch.get_loops(pad)[0])
    assert_refused(sch, lambda: sch.decompose_padding(pad, sch.get_loops(pad)[0]),
                   "condition is trivial", "requirement 3")


# ---------------------------------------------------------------------------- rolling_buffer
POOLS = '''
@T.prim_func
def pools(A: T.Buffer((1, 10, 10, 2), "int32"), C: T.Buffer((1, 6, 6, 2), "int32")):
    B = T.alloc_buffer((1, 8, 8, 2), "int32")
    for n, h, w, c, r, s in T.grid(1, 8, 8, 2, 3, 3):
        with T.block("B"):
            vn, vh, vw, vc, vr, vs = T.axis.remap("SSSSRR", [n, h, w, c, r, s])
            with T.init():
                B[vn, vh, vw, vc] = 0
            B[vn, vh, vw, vc] = B[vn, vh, vw, vc] + A[vn, vh + vr, vw + vs, vc]
    for n, h, w, c, r, s in T.grid(1, 6, 6, 2, 3, 3):
        with T.block("C"):
            vn, vh, vw, vc, vr, vs = T.axis.remap("SSSSRR", [n, h, w, c, r, s])
            with T.init():
                C[vn, vh, vw, vc] = 0
            C[vn, vh, vw, vc] = C[vn, vh, vw, vc] + B[vn, vh + vr, vw + vs, vc] * 3
'''


def _pools_tiled(tile):
    sch = Schedule(engine.parse(POOLS))
    c = sch.get_block("C")
    loops = sch.get_loops(c)
    outer, inner = [], []
    for lp, size in zip(loops, tile):
        o, i = sch.split(lp, [None, size])
        outer.append(o)
        inner.append(i)
    sch.reorder(*outer, *inner)
    sch.compute_at(sch.get_block("B"), outer[-1])
    return sch


def test_rolling_buffer_ignores_a_tile_loop_of_extent_1():
    # h is one tile (its tile loop has extent 1 and slides nothing): the ring is along w
    sch = _pools_tiled([1, 6, 3, 2])
    sch.rolling_buffer(sch.get_block("B"), 0)
    text = sch.mod.script()
    assert "B = T.alloc_buffer((1, 8, 5, 2)" in text
    assert "% 5" in text and "% 8" not in text
    assert_computes_exactly(engine.parse(POOLS), sch.mod)


def test_rolling_buffer_of_tiles_that_overhang():
    # 4 does not divide 6: the last tiles are cut by a T.where, kept and simplified
    sch = _pools_tiled([1, 4, 4, 2])
    sch.rolling_buffer(sch.get_block("B"), 0)
    text = sch.mod.script()
    assert "B = T.alloc_buffer((1, 6, 8, 2)" in text
    assert "< 0 + " not in text and "T.where(h_0 * 4 + ax0 < 8 and w_0 * 4 + ax1 < 8 and" in text
    assert_computes_exactly(engine.parse(POOLS), sch.mod)
