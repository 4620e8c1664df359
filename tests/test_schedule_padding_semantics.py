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


# ---------------------------------------------------------------------------- transform_layout
# padding a buffer whose writer traverses it row-major: the writer is rewritten to traverse
# the new shape and stores the pad value in the padding (TVM's replacement), else a block
# after the last write fills it (TVM's epilogue)
ROWSUM = '''
@T.prim_func
def rowsum(A: T.Buffer((14, 8), "int32"), B: T.Buffer((14,), "int32")):
    for i, k in T.grid(14, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0
            B[vi] = B[vi] + A[vi, vk]
'''

OPAQUE = '''
@T.prim_func
def rowsum(A: T.Buffer((14, 8), "int32"), B: T.Buffer((14,), "int32")):
    for i in T.serial(14):
        B[i] = 0
        for k in T.serial(8):
            with T.block("B"):
                B[i] = B[i] + A[i, k]
'''


def _run_both(mod, *arrays):
    """The interpreter's and the compiled code's results (they must agree)."""
    import numpy as np
    got = []
    for run in (lambda m, a: engine.interpret(m, "rowsum", *a),
                lambda m, a: engine.build(m)["rowsum"](*a)):
        copies = [a.copy() for a in arrays]
        run(mod, copies)
        got.append(copies)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    return got[0]


def test_transform_layout_pads_a_reduction_where_it_is_written():
    import numpy as np
    for src in (ROWSUM, OPAQUE):
        sch = Schedule(engine.parse(src))
        sch.transform_layout("B", "B", lambda i: (i // 4, i % 4), pad_value=-7)
        text = sch.mod.script()
        assert "padding" not in text
        assert "T.if_then_else(" in text and "== 3 and 2 <= " in text
        a = np.random.default_rng(0).integers(-4, 5, (14, 8)).astype("int32")
        _a, b = _run_both(sch.mod, a, np.full((4, 4), 99, "int32"))
        want = np.concatenate([a.sum(axis=1), [-7, -7]]).astype("int32").reshape(4, 4)
        np.testing.assert_array_equal(b, want)


SCAN = '''
@T.prim_func
def scan(A: T.Buffer((10,), "int32"), C: T.Buffer((10,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.if_then_else(vi > 0, B[T.max(vi - 1, 0)], 0)
    for i in T.serial(10):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
'''

SIDE = '''
@T.prim_func
def side(A: T.Buffer((10,), "int32"), C: T.Buffer((10,), "int32"), D: T.Buffer((10,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * 2
            D[vi] = A[vi] + 1
    for i in T.serial(10):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] - A[vi]
'''


def test_transform_layout_keeps_the_epilogue_where_replacing_the_writer_is_unsafe():
    # the writer reads another element of B (a scan), or also writes D, or is tiled with
    # a T.where: a block after the last write fills the padding instead
    tiled = Schedule(engine.parse(SIDE.replace("D[vi] = A[vi] + 1", "")
                                  .replace(', D: T.Buffer((10,), "int32")', "")))
    i, = tiled.get_loops(tiled.get_block("B"))
    tiled.split(i, [None, 4])
    for src, sch in ((SCAN, None), (SIDE, None), (None, tiled)):
        sch = sch or Schedule(engine.parse(src))
        before = sch.mod
        sch.transform_layout("B", "B", lambda i: (i // 4, i % 4), pad_value=5)
        text = sch.mod.script()
        assert 'T.block("buffer_B_padding")' in text and "T.if_then_else(vi_0" not in text
        assert_computes_exactly(before, sch.mod)


PERMUTED = '''
@T.prim_func
def perm(A: T.Buffer((3, 5), "int32"), C: T.Buffer((3, 5), "int32")):
    B = T.alloc_buffer((3, 5), "int32")
    for i, j in T.grid(3, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 3 + vi
    for i, j in T.grid(3, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - vj
'''


def test_transform_layout_replaces_a_writer_under_a_permuting_padded_map():
    sch = Schedule(engine.parse(PERMUTED))
    sch.transform_layout("B", "B", lambda i, j: (j // 2, i, j % 2), pad_value=0)
    text = sch.mod.script()
    assert 'B = T.alloc_buffer((3, 3, 2), dtype="int32")' in text
    assert "B[v0, v1, v2] = T.if_then_else(v0 == 2 and 1 <= v2, 0, A[v1, v0 * 2 + v2]" in text
    assert "for ax0, ax1, ax2 in T.grid(3, 3, 2):" in text and "padding" not in text
    assert_computes_exactly(engine.parse(PERMUTED), sch.mod)


# ---------------------------------------------------------------------------- pad_einsum
SYM_MATMUL = '''
@T.prim_func
def mm(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (6, 5), "int32")
    B = T.match_buffer(b, (n, 5), "int32")
    C = T.match_buffer(c, (6, n), "int32")
    for i, j, k in T.grid(6, n, 5):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''


def _run_sizes(before, after, name, shapes_of_n, sizes=(1, 4, 7)):
    """``after`` computes exactly what ``before`` computes at each size ``n``
    (interpreted and compiled), on small random integers."""
    import numpy as np
    rng = np.random.default_rng(0)
    built = engine.build(after)
    for n in sizes:
        args = [rng.integers(-4, 5, s).astype("int32") for s in shapes_of_n(n)]
        want = [a.copy() for a in args]
        engine.interpret(before, name, *want)
        for run in (lambda xs: engine.interpret(after, name, *xs),
                    lambda xs: built[name](*xs)):
            got = [a.copy() for a in args]
            run(got)
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g, w)


def test_pad_einsum_of_a_symbolic_extent():
    before = engine.parse(SYM_MATMUL)
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    text = sch.mod.script()
    assert "B_pad = T.alloc_buffer(((n + 3) // 4 * 4, 8)" in text
    assert "C_pad = T.alloc_buffer((8, (n + 3) // 4 * 4)" in text
    assert "T.if_then_else(v0 < n and v1 < 5, B[v0, v1], 0)" in text
    assert "for i, j, k in T.grid(8, (n + 3) // 4 * 4, 8):" in text
    _run_sizes(before, sch.mod, "mm", lambda n: [(6, 5), (n, 5), (6, n)])
    # the padded loops split by the factor (evenly: whether split proves it is its own
    # business; the meaning is kept either way)
    j = sch.get_loops(sch.get_block("C"))[1]
    sch.split(j, [None, 4])
    _run_sizes(before, sch.mod, "mm", lambda n: [(6, 5), (n, 5), (6, n)], sizes=(3, 8))


def test_pad_einsum_of_a_symbolic_extent_the_loop_does_not_span():
    # the loop of j runs to n - 1 only... here bound to vj through an offset: refused
    src = SYM_MATMUL.replace("for i, j, k in T.grid(6, n, 5):",
                             "for i, j, k in T.grid(6, n - 1, 5):").replace(
        'vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
        'vi = T.axis.spatial(6, i)\n            vj = T.axis.spatial(n, j + 1)\n'
        '            vk = T.axis.reduce(5, k)')
    sch = Schedule(engine.parse(src))
    assert_refused(sch, lambda: sch.pad_einsum(sch.get_block("C"), [1, 4, 1]),
                   "does not write all of C", "requirement 5")


def test_pad_einsum_refuses_an_output_its_loops_do_not_cover():
    # vj = j + 1 never takes 0: the copy back would write C[:, 0] from an element the
    # padded block never computed (the engine accepted this and changed C[:, 0])
    src = '''
@T.prim_func
def mm(A: T.Buffer((6, 5), "int32"), B: T.Buffer((7, 5), "int32"), C: T.Buffer((6, 7), "int32")):
    for i, j, k in T.grid(6, 6, 5):
        with T.block("C"):
            vi = T.axis.spatial(6, i)
            vj = T.axis.spatial(7, j + 1)
            vk = T.axis.reduce(5, k)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''
    sch = Schedule(engine.parse(src))
    assert_refused(sch, lambda: sch.pad_einsum(sch.get_block("C"), [4, 4, 4]),
                   "does not write all of C (index 1)", "requirement 5")
    # the same block over all of C pads and keeps its meaning
    whole = src.replace("T.grid(6, 6, 5)", "T.grid(6, 7, 5)").replace("j + 1", "j")
    sch = Schedule(engine.parse(whole))
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    assert_computes_exactly(engine.parse(whole), sch.mod)


def test_transform_layout_replaces_a_writer_padded_along_two_axes():
    # two padded axes: the padding is an `or` of two conditions, the bounds proof of the
    # writer's read A[v0 * 2 + v2, v1 * 4 + v3] splits both into cases
    src = PERMUTED.replace("(3, 5)", "(5, 6)").replace("T.grid(3, 5)", "T.grid(5, 6)")
    sch = Schedule(engine.parse(src))
    sch.transform_layout("B", "B", lambda i, j: (i // 2, j // 4, i % 2, j % 4), pad_value=0)
    text = sch.mod.script()
    assert "T.if_then_else(v0 == 2 and 1 <= v2 or v1 == 1 and 2 <= v3, 0, " in text
    assert_computes_exactly(engine.parse(src), sch.mod)


def test_transform_layout_pads_before_the_first_element_of_a_shifted_map():
    # i -> (0, (i + 3) // 4, (i + 3) % 4): three places of padding before element 0 and
    # three after element 9, filled where B is written (an output: the caller sees them)
    import numpy as np
    src = '''
@T.prim_func
def shifted(A: T.Buffer((10,), "int32"), B: T.Buffer((10,), "int32")):
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * 2
'''
    for split in (False, True):
        sch = Schedule(engine.parse(src))
        if split:       # no row-major writer any more: the epilogue block fills it
            sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 3])
        sch.transform_layout("B", "B", lambda i: (0, (i + 3) // 4, (i + 3) % 4), pad_value=-1)
        text = sch.mod.script()
        assert ("buffer_B_padding" in text) == split
        a = np.random.default_rng(1).integers(-4, 5, 10).astype("int32")
        want = np.concatenate([[-1] * 3, a * 2, [-1] * 3]).reshape(1, 4, 4)
        for run in (lambda m, *x: engine.interpret(m, "shifted", *x),
                    lambda m, *x: engine.build(m)["shifted"](*x)):
            b = np.full((1, 4, 4), 77, "int32")
            run(sch.mod, a, b)
            np.testing.assert_array_equal(b, want)


# ---------------------------------------------------------------------------- symbolic layouts
SYM_CHAIN = '''
@T.prim_func
def chain(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (3, n), "int32")
    C = T.match_buffer(c, (3, n), "int32")
    B = T.alloc_buffer((3, n), "int32")
    for i, j in T.grid(3, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2 + vj
    for i, j in T.grid(3, n):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - vi
'''


def test_transform_layout_of_a_symbolic_buffer():
    before = engine.parse(SYM_CHAIN)
    n = before["chain"].params[0].shape[1]
    for index_map, shape, access in (
            (lambda i, j: (i * n + j,), "B = T.alloc_buffer((n * 3,)", "B[vi * n + vj]"),
            ("lambda i, j: (j, i)", "B = T.alloc_buffer((n, 3)", "B[vj, vi]")):
        sch = Schedule(before)
        sch.transform_layout("B", "B", index_map)
        text = sch.mod.script()
        assert shape in text and access in text
        _run_sizes(before, sch.mod, "chain", lambda n: [(3, n), (3, n)], sizes=(1, 5))
    # a split of the symbolic axis may pad (n % 4 != 0): refused, as an unknown name
    sch = Schedule(before)
    assert_refused(sch, lambda: sch.transform_layout("B", "B", "lambda i, j: (i, j // 4, j % 4)"),
                   "symbolic shape", "cut by //")
    assert_refused(sch, lambda: sch.transform_layout("B", "B", "lambda i, j: (i * m + j,)"),
                   "unknown name 'm'", "the function's sizes n")


def test_transform_block_layout_of_a_symbolic_block():
    before = engine.parse(SYM_CHAIN)
    n = before["chain"].params[0].shape[1]
    for index_map, loops, body in (
            (lambda i, j: (i * n + j,), "for ax0 in T.serial(n * 3):",
             "B[v0 // n, v0 % n] = A[v0 // n, v0 % n] * 2 + v0 % n"),
            ("lambda i, j: (j, i)", "for ax0, ax1 in T.grid(n, 3):",
             "B[v1, v0] = A[v1, v0] * 2 + v0")):
        sch = Schedule(before)
        sch.transform_block_layout("B", index_map)
        text = sch.mod.script()
        assert loops in text and body in text, text
        _run_sizes(before, sch.mod, "chain", lambda n: [(3, n), (3, n)], sizes=(1, 5))
    sch = Schedule(before)
    assert_refused(sch, lambda: sch.transform_block_layout("B", "lambda i, j: (i, j // 2, j % 2)"),
                   "not bijective affine", "cut by //")


def test_transform_layout_refuses_a_split_by_a_scalar_parameter():
    # 16 split by a parameter n: the new shape ceil(16 / n) and its padding depend on n
    src = '''
@T.prim_func
def split_by(A: T.Buffer((16,), "int32"), n: T.int32):
    B = T.alloc_buffer((16,), "int32")
    for i in T.serial(16):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
'''
    sch = Schedule(engine.parse(src))
    n = sch.mod["split_by"].params[1]
    assert_refused(sch, lambda: sch.transform_layout("block", "B", lambda i: (i // n, i % n),
                                                     pad_value=0),
                   "cannot bound new index 0 (i // n) of B", "depends on the size n")


def test_transform_layout_keeps_the_epilogue_when_another_axis_follows_the_loop():
    # vx = i * 2 is bound to the writer's loop too: over the padding it would leave its
    # domain, so the writer is left alone and a block fills the padding
    src = '''
@T.prim_func
def two_axes(A: T.Buffer((20,), "int32"), C: T.Buffer((10,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            vx = T.axis.spatial(20, i * 2)
            B[vi] = A[vx] + 1
    for i in T.serial(10):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
'''
    sch = Schedule(engine.parse(src))
    sch.transform_layout("B", "B", lambda i: (i // 4, i % 4), pad_value=0)
    assert 'T.block("buffer_B_padding")' in sch.mod.script()
    assert_computes_exactly(engine.parse(src), sch.mod)


PEEK = '''
@T.prim_func
def peek(x: T.Buffer((3,), "int32"), z: T.Buffer((2, 3), "int32")):
    p = T.alloc_buffer((5,), "int32")
    for o, t in T.grid(2, 3):
        with T.block("peek"):
            vo, vt = T.axis.remap("SS", [o, t])
            z[vo, vt] = p[vt + 1]
        for i in range(5):
            with T.block("p"):
                vo = T.axis.spatial(2, o)
                vi = T.axis.spatial(5, i)
                p[vi] = T.if_then_else(1 <= vi and vi < 4, x[vi - 1] + vo * 10, 0)
'''


def test_decompose_padding_refuses_a_fill_that_a_reader_before_the_block_would_see():
    # decomposed at t, the fill runs before t's loop in each iteration of o and would
    # replace p[1] that "peek" reads at o = 1, t = 0 (written by the block at o = 0)
    sch = Schedule(engine.parse(PEEK))
    p = sch.get_block("p")
    o, t, i = sch.get_loops(p)
    assert not sch.can_decompose_padding(p, t)
    assert_refused(sch, lambda: sch.decompose_padding(p, t),
                   "block peek under loop t accesses p before block p writes it",
                   "requirement 2")
    sch.decompose_padding(p, i)      # inside i the block is alone
    assert_computes_exactly(engine.parse(PEEK), sch.mod)
