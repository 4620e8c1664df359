"""LLVM's loop vectorizer on the loops the schedule leaves unvectorized (as TVM's LLVM
pipeline), the loops it is kept off, and the loops read back as vectorized by LLVM."""
from __future__ import annotations

import re

import numpy as np

import engine
from engine.codegen.loop_lines import vectorized_lines, without_marks

F32 = np.float32


def _matmul_row_inner(n: int = 64, parallel: bool = False):
    """C = A @ B with the output row ``j`` innermost under the reduction ``k``,
    unvectorized: ``for i, k, j: C[i, j] += A[i, k] * B[k, j]``."""
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    sch.reorder(i, k, j)
    if parallel:
        sch.parallel(i)
    sch.decompose_reduction(blk, k)
    return sch


def _run(rt, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, n), dtype=F32), rng.random((n, n), dtype=F32)
    c = np.full((n, n), np.nan, F32)
    rt["matmul"](a, b, c)
    return a, b, c


def _vector_accesses(ll: str) -> int:
    return len(re.findall(r"load <\d+ x float>|store <\d+ x float>", ll))


def test_an_unvectorized_inner_loop_compiles_to_vector_code_and_matches_numpy():
    for parallel in (False, True):
        sch = _matmul_row_inner(64, parallel)
        rt = engine.build(sch.mod, cache=False)
        ll = rt.get_source("ll-opt")
        assert _vector_accesses(ll) > 0
        asm = rt.get_source("asm")
        assert re.search(r"v(fmadd|fmul)\w*ps\s+[^\n]*%[yz]mm", asm), "no vector FMA/mul"
        found = {(d["func"], d["loop"]) for d in rt.compile_stats["llvm_vectorized"]}
        assert ("matmul", "j") in found
        lanes = {d["loop"]: d["lanes"] for d in rt.compile_stats["llvm_vectorized"]}
        assert lanes["j"] >= 4
        a, b, c = _run(rt, 64)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
        # the same order of operations as the scalar loop: bit-exact with the build that
        # leaves the loop to the schedule
        off = engine.build(sch.mod, cache=False, auto_vectorize=False)
        assert _vector_accesses(off.get_source("ll-opt")) == 0
        assert not any(d["loop"] == "j" for d in off.compile_stats["llvm_vectorized"])
        _, _, c_off = _run(off, 64)
        np.testing.assert_array_equal(c, c_off)


def test_a_float_reduction_loop_is_not_reassociated():
    # k innermost: a float sum LLVM may not reorder without fast-math, so it stays scalar
    # and its result is the scalar loop's, bit for bit
    sch = engine.Schedule(engine.workloads.get("matmul", n=48))
    rt = engine.build(sch.mod, cache=False)
    assert not any(d["loop"] == "k" for d in rt.compile_stats["llvm_vectorized"])
    assert "reassoc" not in rt.get_source("ll-opt") and " fast " not in rt.get_source("ll-opt")
    a, b, c = _run(rt, 48)
    _, _, c_off = _run(engine.build(sch.mod, cache=False, auto_vectorize=False), 48)
    np.testing.assert_array_equal(c, c_off)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5)
    ref = np.zeros_like(c)
    engine.interpret(sch.mod, "matmul", a, b, ref)     # the reference semantics
    np.testing.assert_allclose(c, ref, rtol=1e-5)


def _elementwise_split_vectorized(n: int = 64):
    """B = A * 2 with the column loop split by 8 and its inner half vectorized."""
    from engine import te
    a = te.placeholder((n, n), "float32", name="A")
    b = te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="B")
    sch = engine.Schedule(te.create_prim_func([a, b], name="scale"))
    i, j = sch.get_loops(sch.get_block("B", func_name="scale"))
    _, j1 = sch.split(j, factors=[None, 8])
    sch.vectorize(j1)
    return sch


def test_explicit_vectorize_is_kept_as_the_schedule_wrote_it():
    sch = _elementwise_split_vectorized()
    on = engine.build(sch.mod, cache=False)
    off = engine.build(sch.mod, cache=False, auto_vectorize=False)
    # the loops around the schedule's vectors keep LLVM's loop vectorizer off: the same code
    assert '!"llvm.loop.vectorize.enable", i1 0' in on.get_source("ll")
    assert on.get_source("ll-opt") == off.get_source("ll-opt")
    assert on.compile_stats["llvm_vectorized"] == []
    x = np.random.rand(64, 64).astype(F32)
    out = np.zeros_like(x)
    on["scale"](x, out)
    np.testing.assert_array_equal(out, x * 2)


def test_an_outer_loop_around_a_short_loop_keeps_the_vectorizer_off():
    # ow_0 around ow_1 (8, unrolled completely by LLVM): vectorizing ow_0 across the copies
    # made strided accesses and shuffles (16x slower in TVM 0.27): it stays off
    sch = engine.Schedule(engine.workloads.get("matmul", n=32))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, k, j0, j1)
    sch.decompose_reduction(blk, k)
    rt = engine.build(sch.mod, cache=False)
    ll = rt.get_source("ll")
    off_ids = set(re.findall(r'^(!\d+) = !\{ *!"llvm\.loop\.vectorize\.enable", i1 0 *\}', ll, re.M))
    assert off_ids
    latch = re.search(r'br label %"for_j_0", .*!llvm\.loop (!\d+)', ll)
    assert latch is not None
    loop_node = re.search(rf"^{latch.group(1)} = distinct !\{{(.*)\}}$", ll, re.M).group(1)
    assert any(x.strip() in off_ids for x in loop_node.split(","))
    a, b, c = _run(rt, 32)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_loop_marks_do_not_reach_the_machine_code_and_can_be_hidden():
    rt = engine.build(_matmul_row_inner(32).mod, cache=False)
    asm = rt.get_source("asm")
    assert ".loc" not in asm and ".debug_info" not in asm
    ll = rt.get_source("ll-opt")
    assert "!dbg" in ll
    plain = without_marks(ll)
    assert "!dbg" not in plain and "!DI" not in plain and "define" in plain
    import llvmlite.binding as llvm
    from engine.codegen.target import init_llvm
    init_llvm()
    llvm.parse_assembly(plain).verify()     # (one module: no parallel loop)


def test_vectorized_lines_reads_loads_stores_and_masked_calls():
    text = "\n".join([
        "  %a = load <8 x float>, ptr %p, align 4, !dbg !7",
        "  store <16 x float> %v, ptr %q, align 4, !dbg !8",
        "  %m = call <4 x float> @llvm.masked.load.v4f32.p0(ptr %r, i32 4, <4 x i1> %k, "
        "<4 x float> poison), !dbg !9",
        "  %s = load float, ptr %p, align 4, !dbg !10",
        "  %i = add <8 x i64> %x, %y, !dbg !10",
        "!7 = !DILocation(line: 3, column: 0, scope: !5)",
        "!8 = !DILocation(line: 3, column: 0, scope: !5)",
        "!9 = !DILocation(line: 2, column: 0, scope: !5, inlinedAt: !6)",
        "!10 = !DILocation(line: 4, column: 0, scope: !5)",
    ])
    assert vectorized_lines(text) == {3: 16, 2: 4}


def _loop_options(ll: str) -> dict[str, str]:
    """{loop header block: its loop ID's options} of the generated (unoptimised) IR."""
    nodes = dict(re.findall(r"^(!\d+) = (?:distinct )?!\{(.*)\}$", ll, re.M))
    out = {}
    for m in re.finditer(r'br label %"(for_[^"]+)"(?:, !dbg !\d+)?, !llvm.loop (!\d+)', ll):
        out[m.group(1)] = " ".join(nodes.get(x.strip(), "") for x in
                                   nodes[m.group(2)].split(",")[1:])
    return out


def test_a_window_around_a_vectorizable_row_is_left_to_llvm_to_unroll():
    # conv2d's 3 x 3 window around its 56-wide output row (unvectorized): the row is a few
    # vector iterations once LLVM vectorizes it, so the window is not kept a loop (TVM's
    # build unrolls it: the row's accumulators stay in registers across the window)
    params = dict(batch=1, in_channels=2, out_channels=2, size=56, kernel=3, pad=1, stride=1)
    sch = engine.Schedule(engine.workloads.get("conv2d", **params))
    conv = sch.get_block("conv", func_name="conv2d")
    n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
    sch.reorder(n, co, oh, ci, kh, kw, ow)
    sch.decompose_reduction(conv, ci)
    rt = engine.build(sch.mod, cache=False)
    md = _loop_options(rt.get_source("ll"))
    assert "unroll.disable" not in md.get("for_kw", "") and \
        "unroll.disable" not in md.get("for_kh", "")
    assert any(d["loop"] == "ow" for d in rt.compile_stats["llvm_vectorized"])
    args = engine.workloads.random_args("conv2d", **params)
    expected = engine.workloads.reference("conv2d", **params)(*args[:2])
    rt["conv2d"](*args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-4, atol=1e-4)


def test_a_short_float_sum_still_counts_every_iteration():
    # k (56, a float sum into C[i, j]) cannot be vectorized: j's 3 x 56 copies are too many,
    # j stays a loop as before
    sch = engine.Schedule(engine.workloads.get("matmul", m=3, n=3, k=56))
    md = _loop_options(engine.build(sch.mod, cache=False).get_source("ll"))
    assert "llvm.loop.unroll.disable" in md["for_j"]
