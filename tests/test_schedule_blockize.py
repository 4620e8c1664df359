"""blockize, tensorize (+ TensorIntrin), get_output_blocks, add_unit_loop: compiled results
against numpy, refusals that leave the schedule untouched, traces (JSON, token, Python, TVM
export re-run on our API, TVM's JSON imported), and the course's tensorization example."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace
from engine.schedule.tensor_intrin import TensorIntrin, builtin_source, names
from test_schedule_support import (SMALL, apply_exported, assert_round_trips, fresh, refused,
                                   run_and_check)


def has_fma() -> bool:
    from llvmlite import binding as llvm
    return bool(llvm.get_host_cpu_features().get("fma"))


def tvm_doc(sch: Schedule) -> list:
    """Our trace as TVM 0.27's ``trace.as_json()`` writes it (GetSBlock, "None")."""
    insts = []
    for kind, ins, attrs, outs in sch.trace.as_json()["insts"]:
        kind = {"GetBlock": "GetSBlock"}.get(kind, kind)
        insts.append([kind, ["None" if x is None else x for x in ins],
                      [int(a) if isinstance(a, bool) else a for a in attrs], outs])
    return [insts, []]


def check_traces(sch: Schedule, name: str, monkeypatch) -> None:
    """JSON/token/Python round trips, the TVM export re-run on our API, TVM JSON imported:
    each rebuilds the same program."""
    assert_round_trips(sch, lambda: fresh(name))
    target = apply_exported(sch.trace.export("tvm"), fresh(name), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    target = fresh(name)
    Trace.from_json(tvm_doc(sch)).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


def tiled_matmul(n=32, t=16, name="matmul"):
    P = {"n": n}
    sch = Schedule(engine.workloads.get(name, **P), workload=(name, P))
    blk = sch.get_block("C" if name == "matmul" else "Y")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, t])
    j0, j1 = sch.split(j, [None, t])
    k0, k1 = sch.split(k, [None, t])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, blk, (i0, j0, k0, i1, j1, k1)


# ------------------------------------------------------------------ blockize
def test_blockize_matmul_tile_matches_numpy_and_tvm_shape(monkeypatch):
    sch, blk, (i0, j0, k0, i1, j1, k1) = tiled_matmul(16, 8)
    outer = sch.blockize(i1)
    text = sch.mod.script()
    assert 'with T.block("C_o"):' in text and 'with T.block("C_init"):' in text
    assert 'vi_o, vj_o, vk_o = T.axis.remap("SSR", [i_0, j_0, k_0])' in text
    assert "T.reads(A[vi_o * 8:vi_o * 8 + 8, vk_o * 8:vk_o * 8 + 8]" in text
    assert sch.get(blk).name_hint == "C" and sch.get(outer).name_hint == "C_o"
    # get_loops stops at the enclosing block, as in TVM
    assert [sch.get(x).loop_var.name for x in sch.get_loops(blk)] == ["i_1", "j_1", "k_1"]
    assert [sch.get(x).loop_var.name for x in sch.get_loops(outer)] == ["i_0", "j_0", "k_0"]
    run_and_check(sch.mod, "matmul", {"n": 16})
    run_and_check(sch.mod, "matmul", {"n": 16}, use_build=False)
    check_traces(sch, "matmul", monkeypatch)


def test_blockize_elementwise_and_unit_iters(monkeypatch):
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    i, j = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 4])
    sch.blockize(j1, preserve_unit_iters=False)
    run_and_check(sch.mod, "add", SMALL["add"])
    check_traces(sch, "add", monkeypatch)
    assert "preserve_unit_iters=False" in sch.trace.as_python()


def test_blockize_whole_nest_and_again_inside(monkeypatch):
    sch, blk, (i0, j0, k0, i1, j1, k1) = tiled_matmul(16, 8)
    sch.blockize(j1)   # i_1 stays outside: its axis is wholly outer
    sch.blockize(k1)   # a block inside a block
    run_and_check(sch.mod, "matmul", {"n": 16})
    check_traces(sch, "matmul", monkeypatch)


def test_blockize_refusals_leave_the_schedule_untouched():
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    i, j, k = sch.get_loops(y)
    sch.reverse_compute_at(c, j)
    j_now = sch.get_loops(y)[1]
    refused(sch, lambda: sch.blockize(j_now), "exactly one block", "2 blocks")
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    f = sch.fuse(*sch.get_loops(blk))
    f0, f1 = sch.split(f, [None, 3])
    refused(sch, lambda: sch.blockize(f1), "cannot be split", "outer * E + inner")
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    i, j = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 3])  # 8 = 3 * 3 - 1: a guard mixing j_0 and j_1
    refused(sch, lambda: sch.blockize(j1), "T.where guard")
    refused(sch, lambda: sch.blockize(blk), "must be a loop")


# ------------------------------------------------------------------ tensorize
def _tile_block(n=32):
    sch, blk, (i0, j0, k0, i1, j1, k1) = tiled_matmul(n, 16)
    outer = sch.blockize(i1)
    sch.decompose_reduction(outer, k0)
    return sch, outer


def test_tensorize_builtin_fma_matches_numpy_and_emits_vfmadd(monkeypatch):
    sch, outer = _tile_block(32)
    sch.tensorize(outer, "vfma_f32_16x16x16")
    text = sch.mod.script()
    assert "T.vectorized(16)" in text and 'with T.block("C")' not in text
    run_and_check(sch.mod, "matmul", {"n": 32})
    run_and_check(sch.mod, "matmul", {"n": 32}, use_build=False)
    asm = engine.build(sch.mod).get_source("asm")
    if has_fma():
        assert "vfmadd" in asm
    check_traces_n(sch, monkeypatch)


def check_traces_n(sch, monkeypatch):
    name, params = sch.workload
    assert_round_trips(sch, lambda: Schedule(engine.workloads.get(name, **params),
                                             workload=(name, params)))
    target = apply_exported(sch.trace.export("tvm"),
                            Schedule(engine.workloads.get(name, **params)), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    target = Schedule(engine.workloads.get(name, **params))
    Trace.from_json(tvm_doc(sch)).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


def test_tensorize_a_loop_blockizes_first_with_the_8_lane_intrinsic():
    sch, blk, (i0, j0, k0, i1, j1, k1) = tiled_matmul(16, 8)
    sch.decompose_reduction(blk, k0)
    # the update block's loops below k_0: tensorize the tile under i_1
    upd = sch.get_block("C_update")
    sch.tensorize(sch.get_loops(upd)[3], "vfma_f32_8x8x8")
    assert 'with T.block("C_update_o")' in sch.mod.script()
    run_and_check(sch.mod, "matmul", {"n": 16})
    doc = sch.trace.as_json()["insts"][-1]
    assert doc[0] == "Tensorize" and doc[2] == ["vfma_f32_8x8x8", True]


def test_tensorize_refusals_name_the_mismatch():
    sch, outer = _tile_block(32)
    refused(sch, lambda: sch.tensorize(outer, "no_such_intrin"),
            "no tensor intrinsic is registered", "vfma_f32_16x16x16")
    refused(sch, lambda: sch.tensorize(outer, "vfma_f32_8x8x8"),
            "does not match tensor intrinsic 'vfma_f32_8x8x8'", "16 elements")
    refused(sch, lambda: sch.tensorize(outer, "vdot_f32_16x16x16_bt"),
            "does not match", "B")
    sch2, blk, loops = tiled_matmul(32, 16)
    o2 = sch2.blockize(loops[3])   # still has its init: the description has none
    refused(sch2, lambda: sch2.tensorize(o2, "vfma_f32_16x16x16"), "does not match")


def test_tensor_intrin_register_checks_its_arguments():
    with pytest.raises(engine.ScheduleError, match="already"):
        TensorIntrin.register("vfma_f32_16x16x16", builtin_source("vfma_f32_16x16x16", "desc"),
                              builtin_source("vfma_f32_16x16x16", "impl"))
    with pytest.raises(engine.ScheduleError, match="differ in shape"):
        TensorIntrin.register("bad_pair", builtin_source("vfma_f32_16x16x16", "desc"),
                              builtin_source("vfma_f32_8x8x8", "impl"))
    with pytest.raises(engine.ScheduleError, match="short string"):
        TensorIntrin.register("bad name!", builtin_source("vfma_f32_8x8x8", "desc"),
                              builtin_source("vfma_f32_8x8x8", "impl"))
    assert "bad_pair" not in names()
    assert engine.TensorIntrin is TensorIntrin


COURSE = '''
@tvm.script.ir_module
class MatmulModule:
    @T.prim_func
    def main(A: T.Buffer[(64, 64), "float32"], B: T.Buffer[(64, 64), "float32"],
             C: T.Buffer[(64, 64), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(64, 64, 64):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] += A[vi, vk] * B[vj, vk]
'''
HEAD = '''
@T.prim_func
def tmm16_{part}(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
'''
DESC = HEAD.format(part="desc") + '''
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]
'''
IMPL = HEAD.format(part="impl") + '''
        for i, k in T.grid(16, 16):
            for j in T.vectorized(16):
                C[i, j] = C[i, j] + A[i, k] * B[j, k]
'''


def test_course_tensorization_example_runs():
    """The MLC course's example: tiles, register caches, accumulator, blockize,
    decompose_reduction, TensorIntrin.register("tmm16", desc, impl), tensorize."""
    sch = Schedule(engine.parse(COURSE))
    block_mm = sch.get_block("matmul")
    i, j, k = sch.get_loops(block_mm)
    i, ii = sch.split(i, [None, 16])
    j, ji = sch.split(j, [None, 16])
    k, ki = sch.split(k, [None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    A_reg = sch.cache_read(block_mm, 0, storage_scope="global.A_reg")
    B_reg = sch.cache_read(block_mm, 1, storage_scope="global.B_reg")
    sch.compute_at(A_reg, k)
    sch.compute_at(B_reg, k)
    write_back_block = sch.cache_write(block_mm, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(write_back_block, j)
    block_mm = sch.blockize(ii)
    sch.decompose_reduction(block_mm, k)
    TensorIntrin.register("tmm16", DESC, IMPL, override=True)
    sch.tensorize(block_mm, "tmm16")
    assert 'tensor_intrin="tmm16"' in sch.trace.export("tvm")
    rng = np.random.default_rng(0)
    A, B = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    C = np.zeros((64, 64), np.float32)
    rt = engine.build(sch.mod)
    rt["main"](A, B, C)
    np.testing.assert_allclose(C, A @ B.T, rtol=1e-4, atol=1e-4)
    if has_fma():
        assert "vfmadd" in rt.get_source("asm")


# ------------------------------------------------------------------ small queries/loops
def test_get_output_blocks_and_add_unit_loop(monkeypatch):
    sch = fresh("mm_relu")
    root = sch.get_block("root")
    (out,) = sch.get_output_blocks(root)
    assert sch.get(out).name_hint == "C"
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    u = sch.add_unit_loop(k)
    u2 = sch.add_unit_loop(sch.get_block("C"))
    assert [sch.get(x).loop_var.name for x in sch.get_loops(y)] == ["i", "j", "u", "k"]
    assert sch.get(u).loop_var.name == "u" and sch.get(u2).loop_var.name == "u_1"
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    check_traces(sch, "mm_relu", monkeypatch)
    refused(sch, lambda: sch.add_unit_loop(root), "root")
    refused(sch, lambda: sch.get_loops(root), "root")


# ------------------------------------------------------------------ block axes and dtypes
def test_reorder_block_iter_var_and_unsafe_set_dtype(monkeypatch):
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    sch.reorder_block_iter_var(y, [2, 0, 1])
    sch.unsafe_set_dtype(y, 0, "float64")
    text = sch.mod.script()
    assert 'vk, vi, vj = T.axis.remap("RSS", [k, i, j])' in text
    assert 'Y = T.alloc_buffer((16, 16), dtype="float64")' in text
    assert 'T.Cast("float64", T.Cast("float32", Y[vi, vj])' in text
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"], use_build=False)
    check_traces(sch, "mm_relu", monkeypatch)
    assert sch.trace.as_json()["insts"][1:] == [
        ["ReorderBlockIterVar", ["b0", [2, 0, 1]], [], []],
        ["UnsafeSetDType", ["b0"], ["0", "float64"], []]]   # TVM's own encoding
    for bad in ([0, 0, 1], [0, 1], [0, 1, 3]):
        refused(sch, lambda bad=bad: sch.reorder_block_iter_var(y, bad), "not a permutation")
    c = sch.get_block("C")
    refused(sch, lambda: sch.unsafe_set_dtype(c, 0, "float16"), "parameter")
    refused(sch, lambda: sch.unsafe_set_dtype(y, 0, "float7"), "not a scalar type")
    with pytest.raises(engine.TraceError, match="integers"):
        Trace.from_json([[["GetSBlock", [], ["Y", "mm_relu"], ["b0"]],
                          ["ReorderBlockIterVar", ["b0", ["b0"]], [], []]], []])


def test_blockize_a_list_of_sibling_blocks():
    """The case of TVM's test_blockize_blocks: consecutive sibling loop nests wrapped in one
    block (unit axes per axis of the first block, the union of their regions); the same
    results, and the trace replays from JSON and TVM's Python."""
    import sys
    sys.path.insert(0, "tests")
    from semantics import assert_same_meaning

    import engine
    from engine.schedule import Trace
    from engine.schedule.python_trace import apply_python_trace
    mod = engine.parse('''
@T.prim_func
def f(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for m in T.serial(2):
        for i, j in T.grid(3, 1):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * 2.0
        for i, j in T.grid(16, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 8] = A[vi, vj + 8] * 3.0
''')
    sch = engine.Schedule(mod)
    outer = sch.blockize(["B", "C"], preserve_unit_iters=False)
    text = sch.mod.script()
    assert 'with T.block("outer_B_C_")' in text and "T.writes(B[0:16, 0:16])" in text
    assert sch.get(outer).name_hint == "outer_B_C_"
    assert_same_meaning(mod, sch.mod)
    for replay in (lambda s: Trace.from_json(sch.trace.as_json()).apply_to_schedule(s),
                   lambda s: apply_python_trace(sch.trace.export("tvm"), s)):
        again = engine.Schedule(mod)
        replay(again)
        assert engine.structural_equal(again.mod, sch.mod)


def test_blockize_refuses_blocks_that_are_not_consecutive_siblings():
    import engine
    sch = engine.Schedule(engine.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
    for i in range(8):
        with T.block("Y"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi]
    for i in range(8):
        with T.block("Z"):
            vi = T.axis.spatial(8, i)
            A[vi] = C[vi]
'''))
    before = sch.mod
    with pytest.raises(engine.ScheduleError, match="follow one another"):
        sch.blockize(["X", "Z"])
    assert sch.mod is before


_GUARDED_SUM = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
         C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce(16, BINDING)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


@pytest.mark.parametrize("outer", [0, 1])
def test_blockize_over_a_guarded_split_reduction_keeps_the_init(outer):
    """A reduction split by 3 (a tail guard k_0 * 3 + k_1 < 16) blockized above it: the
    init's nest drops the reduction loops, and its guard is the guard at their first
    iteration (true), not a guard naming loops that no longer enclose it."""
    from semantics import assert_computes_exactly
    mod = engine.parse(_GUARDED_SUM.replace("BINDING", "k"))
    sch = engine.Schedule(mod)
    loops = sch.get_loops(sch.get_block("C"))
    sch.split(loops[2], [None, 3])
    sch.blockize(loops[outer])
    assert_computes_exactly(mod, sch.mod)


def test_blockize_refuses_an_init_guard_it_cannot_place():
    """Reversed reduction (vk = 15 - k): at the loops' first iteration vk is at its
    maximum, where the original runs no init, so the init's guard cannot be read there."""
    from semantics import assert_refused
    mod = engine.parse(_GUARDED_SUM.replace("BINDING", "15 - k"))
    sch = engine.Schedule(mod)
    loops = sch.get_loops(sch.get_block("C"))
    sch.split(loops[2], [None, 3])
    assert_refused(sch, lambda: sch.blockize(loops[0]), "not at its minimum",
                   prefix="blockize refused")
