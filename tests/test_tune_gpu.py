"""engine.tune for a GPU target (no GPU needed): the ``auto`` GPU space's candidates bind
threads and compute what numpy computes in the emulator, a short seeded search on a small
GEMM finds a schedule the model ranks at least as fast as the course's local blocking, the
records keep the target, and a bad target is refused with the target's sentence."""
from __future__ import annotations

import numpy as np
import pytest

from engine import workloads
from engine.gpu.build import build_gpu
from engine.ir.stmt import ForKind
from engine.ir.functor import collect_stmts
from engine.ir.stmt import For
from engine.presets import gpu_chapter
from engine.schedule import Schedule
from engine.tune import Database, InlineRunner, TuneError, tune
from engine.tune.auto_gpu import apply_auto_gpu
from engine.tune.space import AutoGpuSpace, AutoSpace, space_of

TARGET = "cuda -model=a100"
N = 128


def _run(sch, name="matmul", params=None, seed=1):
    params = params or {"n": N}
    args = [np.asarray(a) for a in workloads.random_args(name, seed, **params)]
    n_in = workloads.info(name).num_inputs
    expected = workloads.reference(name, **params)(*[a.copy() for a in args[:n_in]])
    rt = build_gpu(sch.mod, TARGET)
    rt[sch.func_name](*args)
    return rt, args[-1], expected


def _thread_tags(sch):
    return {s.thread_tag for s in collect_stmts(sch.mod[sch.func_name].body, For)
            if s.kind is ForKind.THREAD_BINDING}


@pytest.fixture(scope="module")
def tuned():
    return tune(("matmul", {"n": N}), space="auto", target=TARGET, trials=12, seed=0,
                runner=InlineRunner(), database=Database(":memory:"))


def test_a_short_search_beats_the_chapters_local_blocking(tuned):
    assert tuned.best is not None and tuned.best_trace.decisions
    assert "modeled for NVIDIA A100" in tuned.timing
    sch = tuned.best_schedule
    assert {"blockIdx.x", "threadIdx.x"} <= _thread_tags(sch)
    rt, got, want = _run(sch)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert rt.model("matmul").time_s == pytest.approx(tuned.best_seconds)
    local = build_gpu(gpu_chapter.gemm_local(N, 8, 8, 8, 8, 4).mod, TARGET)
    assert tuned.best_seconds <= local.model("main").time_s
    assert all(r.correct for r in tuned.records if r.seconds is not None)


def test_the_records_keep_the_target_and_never_mix_with_the_cpus():
    db = Database(":memory:")
    res = tune(("matmul", {"n": 64}), space="auto", target=TARGET, trials=3, seed=1,
               strategy="random", runner=InlineRunner(), database=db)
    assert res.task.is_gpu and res.target.startswith("cuda -arch=sm_80 -model=a100")
    assert db.count(res.task) == 3
    rows = db._conn.execute("SELECT DISTINCT target, machine FROM records").fetchall()
    assert rows == [(res.task.target, f"{res.task.target} on modeled")]
    cpu = res.task.__class__.from_dict({**res.task.as_dict(), "target": None})
    assert cpu.key() != res.task.key() and db.records(cpu) == []
    assert "target" not in cpu.describe()  # a CPU task's key is unchanged


def test_the_space_never_gives_a_wrong_result():
    mod = workloads.get("matmul", n=N)
    seen = 0
    for seed in range(6):
        sch = Schedule(mod, workload=("matmul", {"n": N}), func_name="matmul", seed=seed)
        apply_auto_gpu(sch, TARGET)
        decided = [i.kind for i in sch.trace.decisions]
        assert decided.count("SamplePerfectTile") == 3 and "SampleCategorical" in decided
        rt, got, want = _run(sch, seed=seed)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        k, = rt.kernels
        assert 32 <= k.threads_per_block <= 1024 and k.shared_bytes <= 48 * 1024
        seen += 1
    assert seen == 6


def test_element_wise_and_fused_stages():
    for name, params in (("add", {"n": 1000}), ("mm_relu", {"n": 64})):
        mod = workloads.get(name, **params)
        fn = workloads.info(name).func_name
        for seed in range(2):
            sch = Schedule(mod, workload=(name, params), func_name=fn, seed=seed)
            apply_auto_gpu(sch, TARGET)
            _, got, want = _run(sch, name, params, seed)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_smaller_thread_limit_is_respected():
    target = "cuda -arch=sm_80 -max_threads_per_block=128"
    mod = workloads.get("matmul", n=N)
    for seed in range(3):
        sch = Schedule(mod, func_name="matmul", seed=seed)
        apply_auto_gpu(sch, target)
        k, = build_gpu(sch.mod, target).kernels
        assert k.threads_per_block <= 128


def test_targets_and_spaces():
    assert isinstance(space_of("auto"), AutoSpace)
    assert isinstance(space_of("auto", TARGET), AutoGpuSpace)
    with pytest.raises(TuneError, match="unknown GPU model 'zz'; accepted targets"):
        tune(("matmul", {"n": 32}), target="cuda -model=zz", trials=1, runner=InlineRunner())
    with pytest.raises(TuneError, match="bad target"):
        tune(("matmul", {"n": 32}), target="opencl", trials=1, runner=InlineRunner())


def test_a_refused_candidate_counts_as_failed():
    # a mutated trace can ask for more shared memory than the target has: BuildError
    from engine.tune.measure import TaskContext
    from engine.tune.task import TuneTask
    task = TuneTask(func_name="main", script=gpu_chapter.matmul_program(N).script(),
                    target="cuda -arch=sm_80 -max_shared_memory_per_block=1024")
    doc = gpu_chapter.gemm_shared(N).trace.as_json()
    res = TaskContext(task).build(doc).result
    assert not res.ok and res.error.startswith("compile failed") and "shared memory" in res.error


def test_the_command_line_takes_a_target(capsys):
    from engine.cli import main
    import io
    out, err = io.StringIO(), io.StringIO()
    code = main(["tune", "matmul", "--param", "n=64", "--target", TARGET, "--trials", "3",
                 "--workers", "1", "--strategy", "random"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert "modeled for NVIDIA A100" in out.getvalue()
    assert main(["tune", "matmul", "--target", "cuda -model=zz"], out=out, err=err) == 2
    assert "accepted targets" in err.getvalue()
