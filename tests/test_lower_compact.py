"""Buffer placement + compaction in engine.lower (engine/lower/compact.py): allocated
buffers move to the innermost safe loop and shrink to the tile one iteration touches;
results always match numpy (and the uncompacted build)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.ir import collect
from engine.ir.stmt import Allocate, For, ForKind
from engine.lower import lower
from engine.schedule import ScheduleError
from engine.script import parse
from test_schedule_primitives import _OPS, _random_step
from test_schedule_storage_random import _MINE, _my_step
from test_schedule_support import SMALL, fresh, run_and_check


def allocs(func) -> dict:
    """{buffer name: flat size} of the lowered function's allocations."""
    return {a.buffer.name: a.buffer.shape[0].value for a in collect(lower(func).body, Allocate)}


def alloc_loops(func) -> dict:
    """{buffer name: name of the innermost loop around its Allocate (None at top level)}."""
    out = {}

    def walk(s, loop):
        if isinstance(s, Allocate):
            out[s.buffer.name] = loop
            walk(s.body, loop)
        elif isinstance(s, For):
            walk(s.body, s)
        elif hasattr(s, "seq"):
            for x in s.seq:
                walk(x, loop)
        elif hasattr(s, "then_case"):
            walk(s.then_case, loop)
            walk(s.else_case, loop)
        elif hasattr(s, "body"):
            walk(s.body, loop)
    walk(lower(func).body, None)
    return {k: (v.loop_var.name, v.kind) if v is not None else None for k, v in out.items()}


def build_run(mod, name, params, compact=True):
    info = engine.workloads.info(name)
    args = engine.workloads.random_args(name, seed=3, **params)
    low = engine.lower.lower(mod, compact=compact)
    engine.build(low, lowered=True)[info.func_name](*args)
    return args[info.num_inputs:]


def check_both(mod, name, params):
    """Compacted and uncompacted builds agree and match numpy."""
    run_and_check(mod, name, params)
    a = build_run(mod, name, params, True)
    b = build_run(mod, name, params, False)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def micro_kernel(n=32, parallel=True):
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(cl, j0)
    sch.vectorize(j1)
    sch.unroll(i1)
    if parallel:
        sch.parallel(i0)
    return sch


# --------------------------------------------------------------------------- specific
def test_cache_write_local_reverse_compute_at_becomes_a_register_tile():
    sch = micro_kernel(32)
    f = sch.mod["matmul"]
    assert allocs(f) == {"C_local": 4 * 16}
    loop, kind = alloc_loops(f)["C_local"]
    assert loop == "j_0" and kind is ForKind.SERIAL
    # uncompacted it is the whole matrix at the top
    full = {a.buffer.name: a.buffer.shape[0].value
            for a in collect(lower(f, compact=False).body, Allocate)}
    assert full == {"C_local": 32 * 32}
    # the local tile is indexed from 0 (the tile's origin is subtracted)
    text = lower(f).script()
    assert "C_local[ax0 * 16 + ax1]" in text
    check_both(sch.mod, "matmul", {"n": 32})
    # a stack alloca of constant size in the generated code (no heap call)
    ll = engine.build(sch.mod).get_source("ll")
    assert "aligned_alloc" not in ll and "alloca [64 x float]" in ll


def test_compacted_buffer_inside_parallel_loop_is_private_per_task():
    # the tile loop itself is parallel: each task must get its own accumulator
    sch = engine.Schedule(engine.workloads.get("matmul", n=48))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    sch.reorder(i0, k, i1, j)
    sch.reverse_compute_at(cl, i0)
    sch.parallel(i0)
    f = sch.mod["matmul"]
    assert allocs(f) == {"C_local": 4 * 48}  # four rows per task
    assert alloc_loops(f)["C_local"] == ("i_0", ForKind.PARALLEL)
    mod = engine.build(sch.mod)
    ll = mod.get_source("ll")
    # the alloca lives in the outlined worker, not in the launching function
    work = ll[ll.index("_work\"("):]
    work = work[:work.index("\n}\n")]
    assert "alloca [192 x float]" in work
    for seed in range(3):  # several runs: a shared accumulator would race
        args = engine.workloads.random_args("matmul", seed=seed, n=48)
        mod["matmul"](*args)
        np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)


def test_compute_at_cache_read_becomes_a_small_buffer():
    sch = engine.Schedule(engine.workloads.get("matmul", n=32))
    c = sch.get_block("C")
    bp = sch.cache_read(c, 1, "global")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, i, k, j1)
    sch.compute_at(bp, j0)
    sch.parallel(j0)
    f = sch.mod["matmul"]
    assert allocs(f) == {"B_global": 32 * 8}  # one 32x8 panel of B per j0
    assert alloc_loops(f)["B_global"] == ("j_0", ForKind.PARALLEL)
    check_both(sch.mod, "matmul", {"n": 32})


def test_course_schedule_compacts_y_to_the_j0_tile():
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=16))
    y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
    f = sch.mod["mm_relu"]
    assert allocs(f) == {"Y": 4}
    check_both(sch.mod, "mm_relu", {"n": 16})
    sch.decompose_reduction(y, k)
    assert allocs(sch.mod["mm_relu"]) == {"Y": 4}
    check_both(sch.mod, "mm_relu", {"n": 16})


def test_unscheduled_buffers_stay_whole():
    f = engine.workloads.get("mm_relu", n=16)["mm_relu"]
    assert allocs(f) == {"Y": 256}
    assert alloc_loops(f)["Y"] is None


def test_accumulator_never_moves_inside_its_reduction_loop():
    # the writeback sits inside the reduction loop k: each k iteration reads the partial
    # sums, which must survive from one k iteration to the next
    text = '''
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    acc = T.alloc_buffer((4,))
    for i in range(4):
        for k in range(8):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    acc[vi] = T.float32(0)
                acc[vi] = acc[vi] + A[vi, vk]
            with T.block("W"):
                vi, vk = T.axis.remap("SS", [i, k])
                C[vi, vk] = acc[vi]
'''
    f = parse(text)["f"]
    # never per k (the safety rule also keeps it out of i: S and W share the loop k)
    assert alloc_loops(f)["acc"] in (None, ("i", ForKind.SERIAL))
    a = np.random.rand(4, 8).astype("float32")
    c = np.zeros((4, 8), "float32")
    engine.build(f)["f"](a, c)
    np.testing.assert_allclose(c, np.cumsum(a, axis=1), rtol=1e-5)


def test_values_carried_between_iterations_keep_the_buffer_outside():
    # iteration i reads what iteration i - 1 wrote: the buffer may not become per-iteration
    text = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    t = T.alloc_buffer((9,))
    for i in range(8):
        with T.block("P"):
            vi = T.axis.spatial(8, i)
            t[vi + 1] = A[vi]
        with T.block("Q"):
            vi = T.axis.spatial(8, i)
            C[vi] = t[vi] + t[vi + 1]
    for i in range(1):
        with T.block("Z"):
            vi = T.axis.spatial(1, i)
            t[vi] = T.float32(0)
'''
    f = parse(text)["f"]
    assert alloc_loops(f)["t"] is None
    a = np.random.rand(8).astype("float32")
    c = np.zeros(8, "float32")
    engine.build(f)["f"](a, c)
    want = a + np.concatenate([[0], a[:-1]])
    np.testing.assert_allclose(c, want, rtol=1e-6)


def test_interleaved_producer_and_consumer_do_not_move():
    # P writes t[k] and Q reads t[(k + 1) % 4] in the same k loop: the element Q reads
    # was written in the previous iteration of i, so t stays outside i
    text = '''
@T.prim_func
def f(A: T.Buffer((3, 4), "float32"), C: T.Buffer((3, 4), "float32")):
    t = T.alloc_buffer((4,))
    for i in range(3):
        for k in range(4):
            with T.block("P"):
                vi, vk = T.axis.remap("SS", [i, k])
                t[vk] = A[vi, vk]
            with T.block("Q"):
                vi, vk = T.axis.remap("SS", [i, k])
                C[vi, vk] = t[(vk + 1) % 4]
'''
    f = parse(text)["f"]
    assert alloc_loops(f)["t"] is None
    a = np.random.rand(3, 4).astype("float32")
    c = np.zeros((3, 4), "float32")
    engine.build(f)["f"](a, c)
    ref = np.zeros((3, 4), "float32")
    t = np.zeros(4, "float32")
    for i in range(3):
        for k in range(4):
            t[k] = a[i, k]
            ref[i, k] = t[(k + 1) % 4]
    np.testing.assert_allclose(c[1:], ref[1:], rtol=1e-6)  # row 0 reads unwritten t[k+1]


def test_non_affine_index_keeps_the_full_buffer():
    text = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    t = T.alloc_buffer((16,))
    for i in range(4):
        for j in range(4):
            with T.block("P"):
                vi, vj = T.axis.remap("SS", [i, j])
                t[(vi * 4 + vj) * (vi * 4 + vj) % 16] = A[vi * 4 + vj]
        for j in range(4):
            with T.block("Q"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi * 4 + vj] = t[(vi * 4 + vj) * (vi * 4 + vj) % 16]
'''
    f = parse(text)["f"]
    assert allocs(f) == {"t": 16}
    a = np.random.rand(16).astype("float32")
    c = np.zeros(16, "float32")
    engine.build(f)["f"](a, c)
    np.testing.assert_allclose(c, a, rtol=1e-6)


def test_predicated_producer_of_a_non_divisible_split_is_not_moved():
    sch = engine.Schedule(engine.workloads.get("matmul", n=10))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(cl, j0)
    check_both(sch.mod, "matmul", {"n": 10})


# --------------------------------------------------------------------------- random
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=st.sampled_from(sorted(SMALL)),
       steps=st.lists(st.tuples(st.sampled_from(_MINE + ["compute_at", "reverse_compute_at"]
                                                * 2 + _OPS),
                                st.tuples(st.integers(0, 50), st.integers(0, 50),
                                          st.integers(0, 50))), min_size=1, max_size=6))
def test_random_schedules_compacted_match_numpy_and_uncompacted(name, steps):
    sch = fresh(name)
    for op, picks in steps:
        step = _my_step(sch, op, picks) if op in _MINE else _random_step(sch, op, picks)
        try:
            step()
        except ScheduleError:
            pass
    check_both(sch.mod, name, SMALL[name])
    # compaction never makes an allocation bigger (storage_align padding aside)
    info = engine.workloads.info(name)
    f = sch.mod[info.func_name]
    if "buffer_dim_align" not in sch.mod.script():
        big = {a.buffer.name: a.buffer.shape[0].value
               for a in collect(lower(f, compact=False).body, Allocate)}
        for k, v in allocs(f).items():
            assert v <= big[k]


def test_k_tiled_micro_kernel_accumulator_is_the_j0_tile():
    # the preset's shape: reduction split, k0 outside the register block, C_local written
    # back per j0 tile, init decomposed before k0: the tile is ti x tj, allocated in j0
    n = 64
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, 4, 4])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1, i2, j2)
    sch.reverse_compute_at(cl, j0)
    sch.vectorize(j2)
    sch.unroll(i2)
    sch.parallel(i0)
    sch.decompose_reduction(c, k0)
    f = sch.mod["matmul"]
    assert allocs(f) == {"C_local": 16 * 32}
    assert alloc_loops(f)["C_local"] == ("j_0", ForKind.SERIAL)
    check_both(sch.mod, "matmul", {"n": n})


def test_strided_producer_does_not_cover_its_box():
    # P writes only the even elements of t; the odd ones Q reads were written by R in the
    # previous iteration of i, so t may not become per-iteration storage
    text = '''
@T.prim_func
def f(A: T.Buffer((3, 5), "float32"), C: T.Buffer((3, 4), "float32")):
    t = T.alloc_buffer((9,))
    for i in range(3):
        for j in range(5):
            with T.block("P"):
                vi, vj = T.axis.remap("SS", [i, j])
                t[vj * 2] = A[vi, vj]
        for j in range(4):
            with T.block("Q"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = t[vj * 2] + t[vj * 2 + 1]
        for j in range(4):
            with T.block("R"):
                vi, vj = T.axis.remap("SS", [i, j])
                t[vj * 2 + 1] = A[vi, vj] * T.float32(10)
'''
    f = parse(text)["f"]
    assert alloc_loops(f)["t"] is None
    a = np.random.rand(3, 5).astype("float32")
    c = np.zeros((3, 4), "float32")
    engine.build(f)["f"](a, c)
    want = a[1:, :4] + 10 * a[:-1, :4]
    np.testing.assert_allclose(c[1:], want, rtol=1e-6)


def test_buffer_of_a_nested_block_shrinks_to_its_row():
    text = '''
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.axis.spatial(4, i)
            t = T.alloc_buffer((4, 8))
            for j in range(8):
                with T.block("P"):
                    vj = T.axis.spatial(8, j)
                    t[vi, vj] = A[vi, vj] * T.float32(3)
            for j in range(8):
                with T.block("Q"):
                    vj = T.axis.spatial(8, j)
                    C[vi, vj] = t[vi, 7 - vj]
'''
    f = parse(text)["f"]
    assert allocs(f) == {"t": 8}  # row vi of t only, indexed from the row's start
    a = np.random.rand(4, 8).astype("float32")
    c = np.zeros_like(a)
    engine.build(f)["f"](a, c)
    np.testing.assert_allclose(c, 3 * a[:, ::-1], rtol=1e-6)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(n=st.sampled_from([12, 16, 18]), ti=st.sampled_from([2, 3, 4]),
       tj=st.sampled_from([4, 5, 8]), tk=st.sampled_from([None, 4, 6]),
       at=st.integers(0, 4), par=st.integers(0, 4), decompose=st.booleans(),
       pack=st.booleans(), pack_at=st.integers(0, 4), wl=st.sampled_from(["matmul",
                                                                           "mm_relu"]))
def test_random_register_blocked_matmuls(n, ti, tj, tk, at, par, decompose, pack, pack_at,
                                         wl):
    """cache_write local + reverse_compute_at / cache_read + compute_at at random loops of a
    tiled matmul (divisible or not): compacted builds match numpy and the full-buffer build."""
    params = {"n": n}
    sch = engine.Schedule(engine.workloads.get(wl, **params))
    func = engine.workloads.info(wl).func_name
    name = "Y" if wl == "mm_relu" else "C"
    c = sch.get_block(name, func_name=func)
    cl = sch.cache_write(c, 0, "local")
    bp = sch.cache_read(c, 1, "global") if pack else None
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    if tk:
        k0, k1 = sch.split(k, [None, tk])
        sch.reorder(i0, j0, k0, i1, k1, j1)
        loops = [i0, j0, k0, i1, k1]
    else:
        sch.reorder(i0, j0, k, i1, j1)
        loops = [i0, j0, k, i1]
    for step in (lambda: sch.reverse_compute_at(cl, loops[at % len(loops)]),
                 lambda: bp is not None and sch.compute_at(bp, loops[pack_at % len(loops)]),
                 lambda: sch.parallel(loops[par % 2]),
                 lambda: decompose and sch.decompose_reduction(c, loops[2])):
        try:
            step()
        except ScheduleError:
            pass
    check_both(sch.mod, wl, params)
