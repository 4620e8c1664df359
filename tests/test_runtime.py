"""Runtime: argument checking, timing, compile cache, parallel runtime, correctness check."""
import threading

import numpy as np
import pytest

import engine
from engine.ir import (Buffer, BufferStore, Call, For, ForKind, PrimFunc, StringImm, Var, const)
from engine.ir import expr as E
from engine.lower import BuildError
from engine.runtime import (ArgumentError, CorrectnessReport, TimingResult, cache_info,
                            check_correctness, runtime_info, set_num_threads)

from test_lower_ir_helpers import elementwise, mm_relu, mm_relu_tiled

F32 = "float32"


@pytest.fixture(scope="module")
def mm():
    return engine.build(mm_relu(8))


def arrays(n=8):
    return (np.random.rand(n, n).astype(F32), np.random.rand(n, n).astype(F32),
            np.zeros((n, n), F32))


# ---------------------------------------------------------------------------- arguments
def test_wrong_count(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match=r"takes 3 arrays \(A, B, C\), got 2"):
        mm["mm_relu"](a, b)


def test_wrong_dtype_names_buffer(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match=r"buffer 'B'.*float32.*float64"):
        mm["mm_relu"](a, b.astype("float64"), c)


def test_wrong_shape(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match=r"buffer 'C'.*shape \(8, 8\)"):
        mm["mm_relu"](a, b, np.zeros((8, 9), F32))


def test_not_contiguous(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match="C-contiguous"):
        mm["mm_relu"](np.asfortranarray(a), b, c)
    big = np.zeros((8, 16), F32)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        mm["mm_relu"](a, b, big[:, ::2])


def test_not_an_array(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match="numpy.ndarray"):
        mm["mm_relu"](a.tolist(), b, c)


def test_readonly_output(mm):
    a, b, c = arrays()
    c.setflags(write=False)
    with pytest.raises(ArgumentError, match="read-only"):
        mm["mm_relu"](a, b, c)
    a.setflags(write=False)  # read-only inputs are fine
    mm["mm_relu"](a, b, np.zeros((8, 8), F32))


def test_overlapping_arrays(mm):
    a, b, c = arrays()
    with pytest.raises(ArgumentError, match="overlap"):
        mm["mm_relu"](a, b, a)


def test_misaligned_array(mm):
    a, b, c = arrays()
    raw = np.zeros(8 * 8 * 4 + 1, np.uint8)
    mis = raw[1:].view(F32).reshape(8, 8)
    assert not mis.flags.aligned
    with pytest.raises(ArgumentError, match="aligned"):
        mm["mm_relu"](a, b, mis)


def test_unknown_function(mm):
    with pytest.raises(KeyError, match="mm_relu"):
        mm["nope"]


def test_build_errors():
    with pytest.raises(BuildError, match="unsupported target 'opencl'.*'llvm'.*'cuda'"):
        engine.build(mm_relu(8), target="opencl")
    with pytest.raises(BuildError, match="did you forget to bind"):   # a CPU program on a GPU
        engine.build(mm_relu(8), target="cuda")
    with pytest.raises(BuildError, match="unknown build option"):
        engine.build(mm_relu(8), fastmath=True)
    with pytest.raises(BuildError, match="IRModule or a PrimFunc"):
        engine.build("not a module")
    with pytest.raises(BuildError, match="opt_level"):
        engine.build(mm_relu(8), opt_level=7)


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_opt_levels(opt_level):
    rt = engine.build(mm_relu(8, schedule="course"), opt_level=opt_level)
    a, b, c = arrays()
    rt["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5)


# ---------------------------------------------------------------------------- timing
def test_time_evaluator(mm):
    a, b, c = arrays()
    t = mm.time_evaluator("mm_relu", number=3, repeat=4)(a, b, c)
    assert isinstance(t, TimingResult)
    assert len(t.results) == 4
    assert t.min <= t.median <= t.max and t.min <= t.mean <= t.max and t.std >= 0
    t2 = mm.time_evaluator("mm_relu", number=1, repeat=2, min_repeat_ms=2)(a, b, c)
    assert len(t2.results) == 2
    with pytest.raises(ArgumentError):
        mm.time_evaluator("mm_relu")(a, b)
    with pytest.raises(ValueError, match="repeat"):
        mm.time_evaluator("mm_relu", repeat=0)


# ---------------------------------------------------------------------------- cache
def test_compile_cache_hits_structurally_equal_program():
    before = cache_info()
    r1 = engine.build(mm_relu(12, schedule="course"))
    r2 = engine.build(mm_relu(12, schedule="course"))  # new IR objects, same structure
    after = cache_info()
    assert r1 is r2
    assert after["hits"] >= before["hits"] + 1
    r3 = engine.build(mm_relu(12, schedule="course"), fast_math=True)
    assert r3 is not r1
    r4 = engine.build(mm_relu(12, schedule="course"), cache=False)
    assert r4 is not r1


# ---------------------------------------------------------------------------- parallel
def thread_index_kernel(n=64, work=20000):
    """Out[i] = index of the pool thread that ran iteration i of a parallel loop; each
    iteration calls the runtime `work` times so that chunks take long enough for every
    thread to wake up and claim some."""
    Out = Buffer("Out", (n,), "int32")
    i, r = Var("i"), Var("r")
    tid = Call("int32", "call_extern", (StringImm("engine_runtime_thread_index"),))
    body = For(i, const(0), const(n), ForKind.PARALLEL,
               For(r, const(0), const(work), ForKind.SERIAL, BufferStore(Out, tid, (i,))))
    return PrimFunc("tid", (Out,), body, (("lowered", True),))


def test_parallel_loop_runs_on_several_threads():
    info = runtime_info()
    if info["pool_size"] < 2:
        pytest.skip("single-core machine")
    set_num_threads(2)
    rt = engine.build(thread_index_kernel(), lowered=True)
    out = np.full(64, -1, "int32")
    seen = set()
    for _ in range(50):  # the OS decides when the worker runs; it must join at some point
        out[:] = -1
        rt["tid"](out)
        assert set(out.tolist()) <= {0, 1}
        seen |= set(out.tolist())
        if seen == {0, 1}:
            break
    assert seen == {0, 1}
    set_num_threads(1)
    out[:] = -1
    rt["tid"](out)
    assert set(out.tolist()) == {0}
    set_num_threads(info["pool_size"])


def test_parallel_stats_count_tasks_per_thread():
    info = runtime_info()
    if info["pool_size"] < 2:
        pytest.skip("single-core machine")
    set_num_threads(2)
    rt = engine.build(mm_relu_tiled(64, ti=16, tj=32))
    before = runtime_info()
    a, b, c = arrays(64)
    rt["mm_relu"](a, b, c)
    after = runtime_info()
    assert after["launches"] == before["launches"] + 1
    # 4 chunks (the i0 loop has extent 4), claimed by whichever threads are running
    assert sum(after["tasks_per_thread"]) == sum(before["tasks_per_thread"]) + 4
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


def test_nested_parallel_loops_are_correct():
    f = elementwise((6, 10), [F32], F32, lambda x: x * E.FloatImm(F32, 3.0),
                    kinds=[ForKind.PARALLEL, ForKind.PARALLEL])
    x = np.random.rand(6, 10).astype(F32)
    y = np.zeros((6, 10), F32)
    rt = engine.build(f)
    rt["ew"](x, y)
    np.testing.assert_allclose(y, x * 3, rtol=1e-6)
    assert "nested parallel loop" in rt.get_source("ll")


@pytest.mark.parametrize("extent", [1, 2, 3, 7])
def test_parallel_small_extents(extent):
    f = elementwise((extent, 3), ["int32"], "int32", lambda x: x + 1,
                    kinds=[ForKind.PARALLEL, ForKind.SERIAL])
    x = np.arange(extent * 3, dtype="int32").reshape(extent, 3)
    y = np.zeros_like(x)
    engine.build(f)["ew"](x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_concurrent_launches_from_python_threads():
    rt = engine.build(mm_relu_tiled(64, ti=16, tj=32))
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(5):
            a = rng.random((64, 64), dtype=np.float32)
            b = rng.random((64, 64), dtype=np.float32)
            c = np.zeros((64, 64), F32)
            rt["mm_relu"](a, b, c)
            if not np.allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors


def test_set_num_threads_validation():
    with pytest.raises(ValueError):
        set_num_threads(0)
    n = runtime_info()["pool_size"]
    assert set_num_threads(10_000) == n  # clamped to the pool


# ---------------------------------------------------------------------------- correctness
def test_check_correctness_with_numpy_reference():
    f = mm_relu(8, schedule="course")

    def ref(a, b, c):
        c[...] = np.maximum(a @ b, 0)

    rep = check_correctness(f, "mm_relu", ref)
    assert isinstance(rep, CorrectnessReport) and rep.ok, rep.message
    rep2 = check_correctness(f, "mm_relu", lambda a, b, c: np.maximum(a @ b, 0) + 1)
    assert not rep2.ok and "C" in rep2.message and rep2.max_abs_err > 0.5


def test_check_correctness_reports_errors_instead_of_raising():
    f = mm_relu(8)
    rep = check_correctness(f, "mm_relu", lambda *a: None, args=[np.zeros(3)])
    assert not rep.ok and "ArgumentError" in rep.message
    rep = check_correctness(engine.build(f), "mm_relu", None)
    assert not rep.ok and "reference" in rep.message


def test_check_correctness_integer_exact():
    f = elementwise((5,), ["int32"], "int32", lambda x: x * 3)
    assert check_correctness(f, "ew", lambda x, y: x * 3).ok
    assert not check_correctness(f, "ew", lambda x, y: x * 3 + 1).ok


def test_aligned_arrays_work_and_are_aligned(mm):
    from engine.runtime import aligned_empty, as_aligned
    a, b, c = arrays()
    a2, b2 = as_aligned(a), as_aligned(b)
    c2 = aligned_empty((8, 8), F32)
    assert all(x.ctypes.data % 64 == 0 for x in (a2, b2, c2))
    np.testing.assert_array_equal(a2, a)
    mm["mm_relu"](a2, b2, c2)
    np.testing.assert_allclose(c2, np.maximum(a @ b, 0), rtol=1e-5)
    assert as_aligned(a2) is a2


def test_parallel_runtime_survives_fork():
    import os
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    rt = engine.build(mm_relu_tiled(64, ti=16, tj=32))
    a, b, c = arrays(64)
    rt["mm_relu"](a, b, c)  # the pool is running in the parent
    pool = runtime_info()["pool_size"]
    pid = os.fork()
    if pid == 0:  # child: parallel loops must still work (fresh pool), then exit
        code = 1
        try:
            c2 = np.zeros((64, 64), F32)
            rt["mm_relu"](a, b, c2)
            code = 0 if np.allclose(c2, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5) else 2
            if code == 0 and runtime_info()["pool_size"] != pool:
                code = 3  # the child must have started its own pool
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_engine_num_threads_environment_variable(tmp_path):
    import os
    import subprocess
    import sys
    code = ("import engine, numpy as np\n"
            "from engine.runtime import runtime_info\n"
            "from test_lower_ir_helpers import mm_relu_tiled\n"
            "rt = engine.build(mm_relu_tiled(64, ti=16, tj=32))\n"
            "a = np.random.rand(64, 64).astype('float32'); b = a.copy(); c = np.zeros_like(a)\n"
            "rt['mm_relu'](a, b, c)\n"
            "assert np.allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)\n"
            "print(runtime_info()['pool_size'])\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, ENGINE_NUM_THREADS="3",
               PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


def test_handle_buffer_parameter_is_refused():
    from engine.ir import Evaluate
    H = Buffer("H", (2,), "handle")
    f = PrimFunc("h", (H,), Evaluate(const(0)), (("lowered", True),))
    with pytest.raises(BuildError, match="buffer 'H' has dtype handle"):
        engine.build(f, lowered=True)


def test_serial_fallback_without_c_compiler(tmp_path):
    import os
    import subprocess
    import sys
    code = ("import warnings, engine, numpy as np\n"
            "from engine.runtime import runtime_info\n"
            "from test_lower_ir_helpers import mm_relu_tiled\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    rt = engine.build(mm_relu_tiled(64, ti=16, tj=32))\n"
            "assert any('parallel runtime unavailable' in str(x.message) for x in w)\n"
            "a = np.random.rand(64, 64).astype('float32'); b = a.copy(); c = np.zeros_like(a)\n"
            "rt['mm_relu'](a, b, c)\n"
            "assert np.allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)\n"
            "print(runtime_info()['native'])\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CC=str(tmp_path / "no-such-cc"), ENGINE_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
