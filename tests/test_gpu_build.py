"""The course's GPU chapter through the engine, without a GPU: each program builds for CUDA,
its PTX is assembled by ptxas for sm_60, sm_80 and sm_90, its CUDA C compiles with NVRTC,
it runs in the emulator matching numpy, and time_evaluator says its time is modeled.
``python -m engine gpu-check`` runs the four programs and says there is no GPU."""
from __future__ import annotations

import io

import numpy as np
import pytest

import engine
from engine.gpu import compile_cuda
from engine.gpu.build import GpuTimingResult, build_gpu
from engine.gpu.toolchain import assemble_ptx
from engine.presets import gpu_chapter

SIZES = {"vector_add": 1024, "window_sum": 1024, "gemm_local": 128, "gemm_shared": 128}


def _arrays(name, n, seed=0):
    rng = np.random.default_rng(seed)
    if name == "vector_add":
        a, b = rng.random(n, np.float32), rng.random(n, np.float32)
        return [a, b, np.zeros(n, np.float32)], a + b
    if name == "window_sum":
        a = rng.random(n + 2, np.float32)
        return [a, np.zeros(n, np.float32)], a[:-2] + a[1:-1] + a[2:]
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    return [a, b, np.zeros((n, n), np.float32)], a @ b


@pytest.fixture(scope="module", params=list(SIZES))
def built(request):
    name = request.param
    sch = gpu_chapter.PROGRAMS[name][0](SIZES[name])
    return name, sch, build_gpu(sch.mod, "cuda -arch=sm_80")


def test_the_chapter_runs_in_the_emulator_and_matches_numpy(built):
    name, _sch, rt = built
    arrays, want = _arrays(name, SIZES[name])
    rt["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], want, rtol=1e-5, atol=1e-4)


def test_the_race_checked_emulator_at_o0_matches_numpy(built):
    """The explorer's step compiles a small program's race-checked emulator at LLVM -O0
    (quicker to build); its results are those of -O3's."""
    name, _sch, rt = built
    arrays, want = _arrays(name, SIZES[name])
    emu = rt.emulator("main", check_races=True, opt_level=0)
    assert emu.opt_level == 0 and emu is rt.emulator("main", check_races=True, opt_level=0)
    emu(*arrays)
    np.testing.assert_allclose(arrays[-1], want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_60", "sm_80", "sm_90"])
def test_the_chapter_assembles_and_its_cuda_c_compiles(built, arch):
    name, sch, _ = built
    rt = build_gpu(sch.mod, f"cuda -arch={arch}")
    assert rt.assembly is not None, rt.assembly_error
    for k in rt.kernels:
        res = rt.assembly.kernel(k.name)
        assert res.registers > 0 and res.spill_stores == 0
        assert res.shared_bytes == k.shared_bytes
    ptx = compile_cuda(rt.imported_modules[0].get_source(), arch=arch)
    assert assemble_ptx(ptx, arch=arch).kernels


def test_the_sources_the_course_shows(built):
    name, _sch, rt = built
    cuda = rt.imported_modules[0].get_source()
    assert 'extern "C" __global__' in cuda and "threadIdx.x" in cuda
    assert (("__syncthreads();" in cuda) == (name in ("window_sum", "gemm_shared")))
    assert ".entry main_kernel0" in rt.imported_modules[0].get_source("ptx")
    assert "launch main_kernel0<<<grid=" in rt.get_source()


def test_time_evaluator_without_a_gpu_is_modeled_and_says_so(built):
    name, _sch, rt = built
    arrays, _ = _arrays(name, SIZES[name])
    result = rt.time_evaluator("main", engine.cuda(0), number=3)(*arrays)
    assert isinstance(result, GpuTimingResult) and result.modeled
    assert result.mean > 0
    assert "modeled for NVIDIA A100" in str(result) and "no GPU on this machine" in str(result)


def test_window_sum_shared_stage_is_compacted_to_the_blocks_footprint():
    rt = build_gpu(gpu_chapter.window_sum(1024).mod, "cuda")
    k, = rt.kernels
    assert k.grid == (8, 1, 1) and k.block == (128, 1, 1)
    assert k.shared_bytes == 130 * 4


def test_bad_arguments_are_refused_with_a_sentence():
    rt = build_gpu(gpu_chapter.vector_add(1024).mod, "cuda")
    a = np.zeros(1024, np.float32)
    with pytest.raises(TypeError, match="main takes 3 arguments"):
        rt["main"](a, a)
    with pytest.raises(TypeError, match="dtype float64, expected float32"):
        rt["main"](a, a, np.zeros(1024))
    with pytest.raises(ValueError, match=r"shape \(512,\), expected \(1024,\)"):
        rt["main"](a, a, np.zeros(512, np.float32))


def test_gpu_check_runs_the_chapter_and_says_there_is_no_gpu():
    from engine.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = main(["gpu-check", "--size", "128"], out=out, err=err)
    text = out.getvalue()
    assert code == 0, text + err.getvalue()
    assert text.startswith("no CUDA device:")
    assert text.count("matches numpy") == 4
    assert "modeled" in text and "GFLOP/s" in text
    assert main(["gpu-check", "--size", "100", "--program", "gemm_local"], out=out,
                err=err) == 2
    assert "multiple of 64" in err.getvalue()


@pytest.mark.parametrize("arch", __import__("engine.gpu.specs", fromlist=["x"]).SUPPORTED_ARCHS)
def test_every_supported_arch_builds_and_assembles(arch):
    """LLVM aborts the whole process on a PTX version an arch does not take: each arch is
    built in a child process, which must finish and assemble its kernel."""
    import subprocess
    import sys
    code = ("from engine.presets import gpu_chapter as g; from engine.gpu.build import "
            f"build_gpu; rt = build_gpu(g.gemm_shared(64, 4, 4, 4, 4, 4).mod, 'cuda -arch={arch}'); "
            "print(rt.assembly.kernel('main_kernel0').registers)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) > 0
