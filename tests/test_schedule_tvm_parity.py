"""Small points where the engine's result now has TVM's shape, each run against the original
program (interpreter on both, compiled new one) so the shape never changes the meaning:
decompose_reduction keeps the block's annotations on the init block; blockize of int64
loops gives int64 axis domains, and without preserve_unit_iters binds a unit loop's axis to
its minimum."""
from __future__ import annotations

import engine
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.functor import collect
from engine.schedule import Schedule
from semantics import assert_computes_exactly


def _block(mod, name):
    return next(b for b in collect(mod["main"].body, S.Block) if b.name_hint == name)


def _realize(mod, name):
    return next(r for r in collect(mod["main"].body, S.BlockRealize)
                if r.block.name_hint == name)


def test_decompose_reduction_keeps_the_annotations_on_the_init_block():
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((6, 8), "float32"), B: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 8):
        with T.block("B"):
            T.block_attr({"note": 1})
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""")
    sch = Schedule(mod)
    b = sch.get_block("B")
    init = sch.decompose_reduction(b, sch.get_loops(b)[1])
    assert dict(sch.get(init).annotations) == {"note": 1}
    assert dict(sch.get(b).annotations) == {"note": 1}
    assert_computes_exactly(mod, sch.mod, "main")


INT64 = """
@T.prim_func
def main(A: T.Buffer((T.int64(16), T.int64(32)), "float32"),
         B: T.Buffer((T.int64(16), T.int64(32)), "float32")):
    for i0, j0, i1, j1 in T.grid(T.int64(1), T.int64(4), T.int64(16), T.int64(8)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(16), i0 * T.int64(16) + i1)
            vj = T.axis.spatial(T.int64(32), j0 * T.int64(8) + j1)
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""


def test_blockize_of_int64_loops_gives_int64_domains():
    for keep in (True, False):
        mod = engine.parse(INT64)
        sch = Schedule(mod)
        _, _, i1, _ = sch.get_loops(sch.get_block("B"))
        outer = sch.blockize(i1, preserve_unit_iters=keep)
        for blk in (sch.get(outer), _block(sch.mod, "B")):
            for iv in blk.iter_vars:
                assert iv.dom.min.dtype == iv.dom.extent.dtype == "int64", blk.name_hint
        vi_o = _realize(sch.mod, sch.get(outer).name_hint).iter_values[0]
        if keep:
            assert isinstance(vi_o, E.Var) and vi_o.name == "i0"
        else:  # the unit loop i0 is its minimum, as TVM's iterator maps make it
            assert isinstance(vi_o, E.IntImm) and vi_o.value == 0 and vi_o.dtype == "int64"
        assert_computes_exactly(mod, sch.mod, "main")


SYMBOLIC_ROWS = """
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, (n, 8), "float32")
    for i, j in T.grid(n, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
"""


def _rows(mod, name_of_run, rows: int):
    import numpy as np
    a = np.arange(rows * 8, dtype="float32").reshape(rows, 8) - 7
    b = np.zeros_like(a)
    name_of_run(mod, a, b)
    return a, b


def test_perfect_tile_of_a_symbolic_loop_is_trivial_and_splits_as_tvm():
    """A loop of extent n has no perfect tiling to draw: as TVM, the factors are
    [None, 1, 1] (the decision [-1, 1, 1]), and the split they give computes the same."""
    import numpy as np
    from engine.schedule import Trace
    from engine.schedule.python_trace import apply_python_trace
    mod = engine.parse(SYMBOLIC_ROWS)
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_perfect_tile(i, n=3)
    assert factors[0] is None and [sch.get(f) for f in factors[1:]] == [1, 1]
    assert list(sch.trace.decisions[sch.trace.insts[-1]]) == [-1, 1, 1]
    sch.split(i, factors)
    for rows in (1, 5):
        for run in (lambda m, *xs: engine.interpret(m, "main", *xs),
                    lambda m, *xs: engine.build(m)["main"](*xs)):
            a, b = _rows(sch.mod, run, rows)
            np.testing.assert_array_equal(b, a * 3)
    again = Schedule(mod)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)
    again = Schedule(mod)
    apply_python_trace(sch.trace.export("tvm"), again)
    assert engine.structural_equal(again.mod, sch.mod)
    # TVM's own JSON names the None output "_" and passes "None" to split
    tvm_doc = [[["GetSBlock", [], ["B", "main"], ["b0"]],
                ["GetLoops", ["b0"], [], ["l1", "l2"]],
                ["SamplePerfectTile", ["l1"], [3, 16], ["_", "v4", "v5"]],
                ["Split", ["l1", "None", "v4", "v5"], [1, 0], ["l6", "l7", "l8"]]],
               [[2, [-1, 1, 1]]]]
    again = Schedule(mod)
    Trace.from_json(tvm_doc).apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)


def test_a_symbolic_tile_decision_on_a_constant_loop_is_refused():
    from semantics import assert_refused
    sch = Schedule(engine.parse(SYMBOLIC_ROWS))
    _, j = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.sample_perfect_tile(j, n=2, decision=[-1, 8]),
                   "-1 is only for a loop of symbolic extent", prefix="sample_perfect_tile")


def test_fuse_writes_the_innermost_binding_without_a_division_by_one():
    """TVM's fuse binds the innermost loop to ``fused % e`` (its ``// 1`` folded away), in
    the bindings and in what an opaque block around them reads and writes."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4, 6, 8), "float32")):
    for i, j, k in T.grid(4, 6, 8):
        with T.block("opaque"):
            T.reads(A[i, j, k])
            T.writes(B[i, j, k])
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""")
    sch = Schedule(mod)
    sch.fuse(*sch.get_loops(sch.get_block("opaque")))
    text = sch.mod.script()
    assert "// 1]" not in text and "// 1)" not in text, text
    assert "i_j_k_fused % 8" in text
    assert_computes_exactly(mod, sch.mod, "main")


def test_fused_symbolic_extent_multiplies_outermost_first():
    """TVM writes the fused extent ``M * N`` (outermost first), not ``N * M``."""
    mod = engine.parse("""
@T.prim_func
def main(a: T.handle, b: T.handle, M: T.int32, N: T.int32):
    A = T.match_buffer(a, (M, N), "float32")
    B = T.match_buffer(b, (M, N), "float32")
    for i, j in T.grid(M, N):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
""")
    sch = Schedule(mod)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    extent = sch.get(fused).extent
    assert isinstance(extent, E.Mul) and extent.a.name == "M" and extent.b.name == "N"
    import numpy as np
    # interpreted (the bounds proof of the compiled code cannot yet show f // N >= 0 for a
    # loop f over M * N, whatever the order of the product)
    for m, n in ((3, 5), (1, 7)):
        a = np.arange(m * n, dtype="float32").reshape(m, n)
        b = np.zeros_like(a)
        engine.interpret(sch.mod, "main", a, b, m, n)
        np.testing.assert_array_equal(b, a + 1)
