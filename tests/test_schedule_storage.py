"""cache_read, cache_write, set_scope, storage_align: every workload where they apply,
compiled and checked against numpy; the micro-kernel route (cache_write "local" +
reverse_compute_at, cache_read + compute_at); refusals; traces (JSON, Python, TVM)."""
from __future__ import annotations

import json

import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace
from engine.schedule.primitives.storage import aligned_strides
from test_schedule_support import (SMALL, apply_exported, assert_round_trips, fresh, refused,
                                   run_and_check, workload_names)


def _blocks(sch):
    return [b.name_hint for b in sch.index().all_blocks()]


def _refused(sch, action, *needles):
    err = refused(sch, action, *needles)
    assert " refused" in str(err)
    return err


def _reparse_equal(sch):
    assert structural_equal(engine.parse(sch.mod.script()), sch.mod)


@pytest.mark.parametrize("name", workload_names())
def test_cache_read_every_read_buffer(name):
    accepted = 0
    for b in _blocks(fresh(name)):
        n_reads = len(fresh(name).index().find_block(b).reads)
        for r in range(n_reads):
            for scope in ("global", "local"):
                sch = fresh(name)
                try:
                    out = sch.cache_read(sch.get_block(b), r, scope)
                except ScheduleError as e:
                    assert " refused" in str(e)
                    continue
                accepted += 1
                node = sch.get(out)
                assert node.name_hint.endswith("_" + scope)
                run_and_check(sch.mod, name, SMALL[name])
    assert accepted > 0


@pytest.mark.parametrize("name", workload_names())
def test_cache_write_every_block(name):
    accepted = 0
    for b in _blocks(fresh(name)):
        sch = fresh(name)
        try:
            out = sch.cache_write(sch.get_block(b), 0, "local")
        except ScheduleError as e:
            assert " refused" in str(e)
            continue
        accepted += 1
        cache = sch.get(sch.get_block(b)).writes[0].buffer
        assert cache.scope == "local" and sch.get(out).reads[0].buffer is cache
        run_and_check(sch.mod, name, SMALL[name])
        _reparse_equal(sch)
    assert accepted > 0


def test_cache_read_prints_like_tvm():
    sch = fresh("matmul")
    c = sch.get_block("C")
    a = sch.cache_read(c, 0, "local")
    text = sch.mod.script()
    assert 'A_local = T.alloc_buffer((16, 16), scope="local")' in text
    assert 'with T.block("A_local"):' in text
    assert "v0, v1 = T.axis.remap(\"SS\", [ax0, ax1])" in text
    assert "A_local[v0, v1] = A[v0, v1]" in text
    assert "C[vi, vj] = C[vi, vj] + A_local[vi, vk] * B[vk, vj]" in text
    # the stage is placed first (A is an input), and its handle is returned
    assert sch.get(a).name_hint == "A_local"
    assert text.index('T.block("A_local")') < text.index('T.block("C")')
    _reparse_equal(sch)


def test_cache_write_prints_like_tvm_and_goes_before_consumer():
    sch = fresh("mm_relu")
    y = sch.get_block("Y")
    wb = sch.cache_write(y, 0, "global")
    text = sch.mod.script()
    assert "Y_global[vi, vj] = Y_global[vi, vj] + A[vi, vk] * B[vk, vj]" in text
    assert "Y[v0, v1] = Y_global[v0, v1]" in text
    assert text.index('T.block("Y_global")') < text.index('T.block("C")')
    assert sch.get(wb).name_hint == "Y_global"
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    # an output with no consumer: the write-back goes last
    sch = fresh("mm_relu")
    sch.cache_write(sch.get_block("C"), 0, "local")
    text = sch.mod.script()
    assert text.rindex("with T.block(") == text.index('T.block("C_local")') - len("with ")
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])


def _tiled_matmul(n=16, t=4):
    P = {"n": n}
    sch = Schedule(engine.workloads.get("matmul", **P), workload=("matmul", P))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, t])
    j0, j1 = sch.split(j, [None, t])
    sch.reorder(i0, j0, k, i1, j1)
    return sch, c, (i0, j0, k, i1, j1)


def test_micro_kernel_route_cache_write_local_reverse_compute_at():
    sch, c, (i0, j0, k, i1, j1) = _tiled_matmul()
    wb = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(wb, j0)
    ar = sch.cache_read(c, 0, "global")
    sch.compute_at(ar, k)
    sch.decompose_reduction(c, k)
    sch.vectorize(j1)
    sch.unroll(i1)
    text = sch.mod.script()
    assert 'C_local = T.alloc_buffer((16, 16), scope="local")' in text
    assert "v0 = T.axis.spatial(16, i_0 * 4 + ax0)" in text
    run_and_check(sch.mod, "matmul", {"n": 16})
    _reparse_equal(sch)


def test_cache_read_at_common_loop_copies_only_the_producer_region():
    """After compute_at, the writer and its consumer share a loop: the cache is placed in
    that loop, right before the consumer, copying what one iteration produced."""
    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    i, j = sch.get_loops(c)
    sch.compute_at(y, i)
    cr = sch.cache_read(c, 0, "local")
    loops = sch.get_loops(cr)
    assert [sch.get(lp).loop_var.name for lp in loops][:1] == ["i"]
    text = sch.mod.script()  # as TVM prints it: one loop per dimension, unit ones too
    assert "for ax0, ax1 in T.grid(1, 16):" in text
    assert "v0 = T.axis.spatial(16, i + ax0)" in text
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])


def test_cache_read_non_divisible_tile_is_guarded():
    P = {"n": 10}
    sch = Schedule(engine.workloads.get("mm_relu", **P), workload=("mm_relu", P))
    y, c = sch.get_block("Y"), sch.get_block("C")
    i, j = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    sch.compute_at(y, i0)
    sch.cache_read(c, 0, "global")
    run_and_check(sch.mod, "mm_relu", P)


def test_consumer_blocks():
    sch = fresh("softmax")
    es = sch.get_block("T_softmax_expsum")
    sch.cache_read(es, "T_softmax_exp", "global", consumer_blocks=[es])
    text = sch.mod.script()
    assert "T_softmax_expsum[vi] + T_softmax_exp_global[vi, vk]" in text
    assert "T_softmax_norm[vi, vj] = T_softmax_exp[vi, vj]" in text
    run_and_check(sch.mod, "softmax", SMALL["softmax"])
    assert "consumer_blocks=[b" in sch.trace.as_python()

    sch = fresh("mm_relu")
    y, c = sch.get_block("Y"), sch.get_block("C")
    sch.cache_write(y, 0, "local", consumer_blocks=[c])
    text = sch.mod.script()
    assert "T.max(Y_local[vi, vj], T.float32(0))" in text
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])


def test_buffer_given_by_name():
    a = fresh("matmul")
    a.cache_read(a.get_block("C"), "B", "global")
    b = fresh("matmul")
    b.cache_read(b.get_block("C"), 1, "global")
    assert structural_equal(a.mod, b.mod)
    assert a.trace == b.trace  # the trace records the index, as TVM does


def test_refusals_leave_schedule_unchanged():
    sch = fresh("matmul")
    c = sch.get_block("C")
    _refused(sch, lambda: sch.cache_read(c, 5, "global"), "read_buffer_index=5",
             "0: A, 1: B")
    _refused(sch, lambda: sch.cache_read(c, 0, "texture"), "unknown storage scope")
    _refused(sch, lambda: sch.cache_read(c, "Z", "global"), "no buffer named 'Z'")
    _refused(sch, lambda: sch.cache_write(c, 1, "local"), "write_buffer_index=1")
    i, j, k = sch.get_loops(c)
    _refused(sch, lambda: sch.cache_read(i, 0, "global"), "block handle")
    sch.decompose_reduction(c, k)
    e = _refused(sch, lambda: sch.cache_write(c, 0, "local"), "also written by block",
                 "before decompose_reduction")
    assert "C_update" in e.highlight and "C_init" in e.highlight
    init = sch.get_block("C_init")
    _refused(sch, lambda: sch.cache_read(c, "A", "global", consumer_blocks=[init]),
             "does not read A")
    # an update without T.init reads the buffer's old contents
    sch2 = fresh("matmul")
    c2 = sch2.get_block("C")
    sch2.decompose_reduction(c2, sch2.get_loops(c2)[0])
    sch2_upd = sch2.get_block("C_update")
    _refused(sch2, lambda: sch2.cache_write(sch2_upd, 0, "local"), "also written")


def test_set_scope():
    sch = fresh("mm_relu")
    sch.set_scope(sch.get_block("Y"), 0, "local")
    assert 'Y = T.alloc_buffer((16, 16), scope="local")' in sch.mod.script()
    run_and_check(sch.mod, "mm_relu", SMALL["mm_relu"])
    _reparse_equal(sch)
    yb, cb = sch.get_block("Y"), sch.get_block("C")
    _refused(sch, lambda: sch.set_scope(cb, 0, "local"),
             "parameter of the function", "cache_write")
    _refused(sch, lambda: sch.set_scope(yb, 0, "register"),
             "unknown storage scope")
    assert "sch.set_scope(b" in sch.trace.as_python()


def test_storage_align_annotation_and_strides():
    sch = fresh("matmul")
    c = sch.get_block("C")
    bg = sch.cache_read(c, 1, "global")
    sch.storage_align(bg, 0, axis=0, factor=16, offset=1)
    text = sch.mod.script()
    assert 'T.block_attr({"buffer_dim_align": [[0, 0, 16, 1]]})' in text
    _reparse_equal(sch)
    run_and_check(sch.mod, "matmul", SMALL["matmul"])
    # a second call on the same axis replaces the entry, another axis adds one
    sch.storage_align(bg, 0, axis=0, factor=8, offset=2)
    sch.storage_align(bg, 0, axis=-1, factor=4, offset=0)
    assert '[[0, 0, 8, 2], [0, 1, 4, 0]]' in sch.mod.script()
    _refused(sch, lambda: sch.storage_align(bg, 0, axis=2, factor=16, offset=0),
             "axis=2 is not a dimension")
    _refused(sch, lambda: sch.storage_align(bg, 0, axis=0, factor=0, offset=0),
             "factor must be a positive integer")
    _refused(sch, lambda: sch.storage_align(bg, 0, axis=0, factor=16, offset=16),
             "0 <= offset < factor")
    _refused(sch, lambda: sch.storage_align(c, 0, axis=0, factor=16, offset=1),
             "parameter of the function")
    assert aligned_strides((16, 16), [(0, 16, 1)]) == [17, 1]
    assert aligned_strides((4, 8, 8), [(1, 16, 4)]) == [160, 20, 1]
    assert aligned_strides((4, 8), []) == [8, 1]
    for shape, al in [((5, 7, 3), [(0, 8, 3), (1, 4, 1)]), ((6, 6), [(1, 5, 2)])]:
        st = aligned_strides(shape, al)
        for axis, f, o in al:
            assert st[axis] % f == o


def _storage_schedule():
    sch, c, (i0, j0, k, i1, j1) = _tiled_matmul()
    wb = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(wb, j0)
    ar = sch.cache_read(c, "A", "global", consumer_blocks=[c])
    sch.compute_at(ar, k)
    bg = sch.cache_read(c, 1, "global")
    sch.storage_align(bg, 0, axis=0, factor=16, offset=1)
    return sch


def test_trace_round_trips_and_exports():
    sch = _storage_schedule()
    run_and_check(sch.mod, "matmul", {"n": 16})
    doc = sch.trace.as_json()
    kinds = [i[0] for i in doc["insts"]]
    assert {"CacheRead", "CacheWrite", "StorageAlign"} <= set(kinds)
    cr = [i for i in doc["insts"] if i[0] == "CacheRead"][0]
    assert cr[1][1] == [cr[1][0]] and cr[2] == [0, "global"]
    assert_round_trips(sch, lambda: fresh("matmul"))


@pytest.mark.parametrize("dialect", ["tvm", "course"])
def test_tvm_exports_rerun_on_our_api(dialect, monkeypatch):
    sch = _storage_schedule()
    text = sch.trace.export(dialect)
    assert "cache_write(block=b" in text and 'storage_scope="local"' in text
    target = apply_exported(text, Schedule(engine.workloads.get("matmul", n=16)), monkeypatch)
    assert structural_equal(target.mod, sch.mod)


def test_import_tvm_trace_json_with_cache_stages():
    tvm_doc = [[
        ["GetBlock", [], ["C", "matmul"], ["b0"]],
        ["CacheRead", ["b0", []], [1, "global"], ["b1"]],
        ["CacheWrite", ["b0", []], [0, "local"], ["b2"]],
        ["StorageAlign", ["b1"], [0, 0, 16, 1], []],
        ["GetBlock", [], ["C", "matmul"], ["b3"]],
        ["CacheRead", ["b3", ["b3"]], [0, "global"], ["b4"]],
    ], []]
    s = fresh("matmul")
    Trace.from_json(tvm_doc).apply_to_schedule(s)
    ref = fresh("matmul")
    c = ref.get_block("C")
    bg = ref.cache_read(c, 1, "global")
    ref.cache_write(c, 0, "local")
    ref.storage_align(bg, 0, 0, 16, 1)
    ref.cache_read(c, 0, "global", consumer_blocks=[c])
    assert structural_equal(s.mod, ref.mod)
    run_and_check(s.mod, "matmul", SMALL["matmul"])
    # a consumer list naming an unknown handle is refused before anything is applied
    bad = json.loads(json.dumps(tvm_doc))
    bad[0][5][1][1] = ["b99"]
    from engine.schedule import TraceError
    with pytest.raises(TraceError, match="b99"):
        Trace.from_json(bad)
    bad[0][5][1][1] = [3]
    with pytest.raises(TraceError, match="list of earlier handle names"):
        Trace.from_json(bad)


def test_lowering_pads_strides_for_storage_align():
    from engine.ir import collect
    from engine.ir.stmt import Allocate
    from engine.lower import lower
    sch = fresh("matmul")
    bg = sch.cache_read(sch.get_block("C"), 1, "global")
    sch.storage_align(bg, 0, axis=0, factor=16, offset=1)
    sizes = {a.buffer.name: a.buffer.shape[0].value
             for a in collect(lower(sch.mod["matmul"]).body, Allocate)}
    assert sizes["B_global"] == 15 * 17 + 16  # rows 17 elements apart
    run_and_check(sch.mod, "matmul", SMALL["matmul"])


def test_a_cache_of_an_int64_buffer_is_copied_by_int64_loops():
    """The case of TVM's test_cache_read_non_int32_shape: the copy stage of an int64 buffer
    loops in int64 (no cast of an int32 loop and no guard it cannot prove)."""
    import engine
    src = '''
@T.prim_func
def f(A: T.Buffer((T.int64(8), T.int64(8)), "float32"), C: T.Buffer((T.int64(8), T.int64(8)), "float32")):
    for i, j in T.grid(T.int64(8), T.int64(8)):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * 2.0
'''
    mod = engine.parse(src)
    sch = engine.Schedule(mod)
    sch.cache_read("C", 0, "global")
    text = sch.mod.script()
    assert "T.Cast" not in text and "T.where" not in text
    assert 'v0, v1 = T.axis.remap("SS", [ax0, ax1])' in text and "A[v0, v1]" in text
    import sys
    sys.path.insert(0, "tests")
    from semantics import assert_same_meaning
    assert_same_meaning(mod, sch.mod)
