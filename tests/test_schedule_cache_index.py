"""cache_index and the bounds rule it relies on (integer buffers a function allocates are
zero-filled, so an index read from one is bounded by the values stored into it): programs
as TVM 0.27 prints them, results against numpy (compiled and interpreted), refusals that
leave the schedule unchanged, and traces (JSON, URL, Python, TVM export and TVM JSON
import)."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import structural_equal
from engine.lower.bounds_check import AccessBoundsError
from engine.schedule import Schedule, Trace
from test_schedule_support import (apply_exported, assert_round_trips, fresh, refused,
                                   run_and_check)

GATHER = '''
@T.prim_func
def gather(A: T.Buffer((128,), "float32"), B: T.Buffer((32, 4), "float32")):
    idx = T.alloc_buffer((32, 4), "int32")
    for i, j in T.grid(32, 4):
        with T.block("I"):
            vi, vj = T.axis.remap("SS", [i, j])
            idx[vi, vj] = vi * 4 + vj
    for i, j in T.grid(32, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[idx[vi, vj]] + T.float32(1)
'''

PARAM_INDEX = '''
@T.prim_func
def gather(A: T.Buffer((128,), "float32"), idx: T.Buffer((32, 4), "int32"),
           B: T.Buffer((32, 4), "float32")):
    for i, j in T.grid(32, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[idx[vi, vj]] + T.float32(1)
'''

INDEXED = '''
@T.prim_func
def indexed(A: T.Buffer((128,), "float32"), B: T.Buffer((32, 4), "float32")):
    for i, j in T.grid(32, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi * 4 + vj] + A[vj * 32 + vi] + A[vi * 4 + vj]
'''


def _gather_ref(a):
    return a.reshape(32, 4) + 1


def test_an_index_read_from_an_allocated_int_buffer_is_proven_and_matches_numpy():
    mod = engine.parse(GATHER)
    a = np.random.default_rng(0).random(128).astype("float32")
    b = np.zeros((32, 4), "float32")
    engine.build(mod)["gather"](a, b)
    np.testing.assert_allclose(b, _gather_ref(a))
    b2 = np.zeros((32, 4), "float32")
    engine.interpret(mod, "gather", a, b2)
    np.testing.assert_array_equal(b2, b)


def test_a_stored_index_that_can_pass_the_end_is_refused():
    with pytest.raises(AccessBoundsError) as e:
        engine.build(engine.parse(GATHER.replace("vi * 4 + vj", "vi * 4 + vj + 1")))
    msg = str(e.value)
    assert "A[idx[i, j]] may read past the end of A" in msg and "reaches 128" in msg
    with pytest.raises(AccessBoundsError):   # negative values too
        engine.build(engine.parse(GATHER.replace("vi * 4 + vj", "vi * 4 + vj - 1")))


def test_an_index_buffer_passed_as_a_parameter_stays_refused():
    with pytest.raises(AccessBoundsError) as e:
        engine.build(engine.parse(PARAM_INDEX))
    assert "is read from idx and nothing bounds it" in str(e.value)


def test_integer_buffers_start_as_zeros_when_compiled_and_interpreted():
    """Elements never stored are 0 (the bounds rule counts on it): a gather that stores only
    half of its index buffer reads A[0] for the rest."""
    text = GATHER.replace("idx[vi, vj] = vi * 4 + vj",
                          "if vj < 2:\n                idx[vi, vj] = vi * 4 + vj")
    mod = engine.parse(text)
    a = np.arange(128, dtype="float32")
    b = np.zeros((32, 4), "float32")
    engine.build(mod)["gather"](a, b)
    want = _gather_ref(a)
    want[:, 2:] = a[0] + 1
    np.testing.assert_array_equal(b, want)
    b2 = np.zeros((32, 4), "float32")
    engine.interpret(mod, "gather", a, b2)
    np.testing.assert_array_equal(b2, want)


def test_cache_index_prints_as_tvm_and_runs():
    sch = Schedule(engine.parse(INDEXED))
    stages = sch.cache_index(sch.get_block("B"), "global")
    assert [sch.get(s).name_hint for s in stages] == ["index_0", "index_1"]
    text = sch.mod.script()
    assert "index_var_0[v0, v1] = v0 * 4 + v1" in text
    assert "index_var_1[v0, v1] = v0 * 32 + v1" in text
    assert ("B[vi, vj] = A[index_var_0[vi, vj]] + A[index_var_1[vj, vi]] + "
            "A[index_var_0[vi, vj]]") in text
    a = np.random.default_rng(1).random(128).astype("float32")
    for run in ("build", "interpret"):
        b = np.zeros((32, 4), "float32")
        if run == "build":
            engine.build(sch.mod)["indexed"](a, b)
        else:
            engine.interpret(sch.mod, "indexed", a, b)
        np.testing.assert_allclose(b, a.reshape(32, 4) * 2 + a.reshape(4, 32).T, rtol=1e-6)


def test_cse_thresh_caches_only_repeated_expressions():
    sch = Schedule(engine.parse(INDEXED))
    stages = sch.cache_index(sch.get_block("B"), "global", 2)
    assert len(stages) == 1
    assert "A[index_var_0[vi, vj]] + A[vj * 32 + vi] + A[index_var_0[vi, vj]]" in \
        sch.mod.script()


@pytest.mark.parametrize("name,block", [("conv2d", "conv"), ("conv2d_relu", "conv"),
                                        ("window_sum", "C")])
def test_cache_index_on_workloads_with_split_loops_matches_numpy(name, block):
    sch = fresh(name)
    blocks = [block]
    done = 0
    for bname in blocks:
        try:
            blk = sch.get_block(bname)
        except Exception:
            continue
        loops = sch.get_loops(blk)
        if len(loops) > 1 and sch.get(loops[-1]).extent.value % 2 == 0:
            sch.split(loops[-1], factors=[None, 2])
        try:
            sch.cache_index(sch.get_block(bname), "global")
        except engine.schedule.ScheduleError:
            continue
        done += 1
    assert done, f"no block of {name} has index arithmetic"
    run_and_check(sch.mod, name, sch.workload[1])
    run_and_check(sch.mod, name, sch.workload[1], use_build=False)


def test_cache_index_refusals_leave_the_schedule_unchanged():
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.cache_index(c, "global"), "no index expression",
            "requirement 3")
    refused(sch, lambda: sch.cache_index(c, "texture"), "unknown storage scope")
    sch = Schedule(engine.parse(INDEXED))
    b = sch.get_block("B")
    refused(sch, lambda: sch.cache_index(b, "global", -1), "requirement 2")
    refused(sch, lambda: sch.cache_index(b, "global", 3), "requirement 3")


def test_cache_index_traces(monkeypatch):
    make = lambda: Schedule(engine.parse(INDEXED))  # noqa: E731
    sch = make()
    sch.cache_index(sch.get_block("B"), "global")
    doc = sch.trace.as_json()
    assert doc["insts"][-1] == ["CacheIndex", ["b0"], ["global", 0], ["b1", "b2"]]
    tvm = sch.trace.export("tvm")
    assert 'b1, b2 = sch.cache_index(block=b0, storage_scope="global", cse_thresh=0)' in tvm
    assert_round_trips(sch, make)
    target = apply_exported(tvm, make(), monkeypatch)
    assert structural_equal(target.mod, sch.mod)
    tvm_doc = [[["GetSBlock", [], ["B", "indexed"], ["b0"]],
                ["CacheIndex", ["b0"], ["global", 0], ["b1", "b2"]]], []]
    target = make()
    Trace.from_json(tvm_doc).apply_to_schedule(target)
    assert structural_equal(target.mod, sch.mod)


def test_a_padding_guard_does_not_bound_a_cached_index():
    """The proof knows the values stored into an index buffer, not which one a guarded
    access reads: padding's ``data[h - 1]`` under ``1 <= h`` is refused once cached."""
    sch = fresh("conv2d")
    sch.cache_index(sch.get_block("pad"), "global")
    assert "index_var" in sch.mod.script()
    with pytest.raises(AccessBoundsError) as e:
        engine.build(sch.mod)
    assert "may read before the start of data" in str(e.value) or \
        "may read past the end of data" in str(e.value)
