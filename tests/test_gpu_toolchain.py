"""engine.gpu.toolchain: ptxas and NVRTC from the CUDA 12 wheels (``pyproject.toml``'s
``gpu`` extra, installed by scripts/setup.sh). Nothing here is skipped: a missing tool fails
with the sentence telling how to install it. No GPU is needed."""
from __future__ import annotations

import pytest

from gpu_kernel_samples import vector_add_ptx
from engine.gpu import (SUPPORTED_ARCHS, AssemblyReport, ToolchainError, assemble_ptx,
                        compile_cuda, parse_ptxas_info, toolchain_status)
from engine.gpu import toolchain

#: c[i] = a[i] + b[i] for i < n, by hand; ``.target`` filled in per arch (PTX ISA 7.8, the
#: first to know sm_90, CUDA 11.8)

#: a kernel with a static shared array: 256 floats = 1024 bytes of smem
SHARED_CUDA = r"""
extern "C" __global__ void reverse(float* out, const float* in) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    out[blockIdx.x * 256 + t] = tile[255 - t];
}
"""

ADD_CUDA = r"""
extern "C" __global__ void add(float* a, const float* b, const float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + c[i];
}
"""


@pytest.mark.parametrize("arch", ["sm_60", "sm_80", "sm_90"])
def test_a_hand_written_ptx_kernel_assembles(arch):
    report = assemble_ptx(vector_add_ptx(arch), arch=arch)
    assert isinstance(report, AssemblyReport) and report.arch == arch
    assert report.cubin[:4] == b"\x7fELF"                  # a cubin is an ELF file
    (kernel,) = report.kernels
    assert kernel.name == "vector_add" and kernel.arch == arch
    assert kernel.registers > 0 and report.registers == kernel.registers
    assert (report.shared_bytes, report.spill_stores, report.spill_loads) == (0, 0, 0)
    assert report.kernel("vector_add") is kernel
    assert "Used" in report.log


def test_broken_ptx_gives_ptxas_own_line():
    bad = vector_add_ptx("sm_80").replace("add.f32 %f3, %f1, %f2;",
                                                      "add.f32 %f3, %f1, %f9;")
    with pytest.raises(ToolchainError) as err:
        assemble_ptx(bad, arch="sm_80")
    message = str(err.value)
    assert "ptxas refused the PTX for sm_80" in message
    assert "kernel.ptx, line 31; error" in message and "%f9" in message


def test_ptx_for_a_newer_arch_is_refused():
    with pytest.raises(ToolchainError, match="ptxas refused"):
        assemble_ptx(vector_add_ptx("sm_90"), arch="sm_80")


def test_unsupported_archs_are_refused_before_running_anything():
    with pytest.raises(ToolchainError, match="unsupported arch 'sm_100'.*sm_60, sm_70"):
        assemble_ptx(vector_add_ptx("sm_80"), arch="sm_100")
    with pytest.raises(ToolchainError, match="unsupported arch 'sm_52'"):
        compile_cuda(ADD_CUDA, arch="sm_52")
    assert SUPPORTED_ARCHS == ("sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


@pytest.mark.parametrize("arch", ["sm_60", "sm_80", "sm_90"])
def test_nvrtc_compiles_cuda_that_ptxas_assembles(arch):
    ptx = compile_cuda(ADD_CUDA, arch=arch)
    assert f".target {arch}" in ptx and ".visible .entry add(" in ptx   # extern "C": unmangled
    report = assemble_ptx(ptx, arch=arch)
    assert report.kernel("add").registers > 0 and report.cubin


def test_shared_memory_is_reported():
    report = assemble_ptx(compile_cuda(SHARED_CUDA, arch="sm_80"), arch="sm_80")
    kernel = report.kernel("reverse")
    assert kernel.shared_bytes == 256 * 4 and report.shared_bytes == 1024
    assert kernel.barriers == 1                        # __syncthreads


def test_a_cuda_syntax_error_gives_nvrtcs_log():
    # the missing ";" of line 2 is found at the "}" of line 3
    source = 'extern "C" __global__ void add(float* a) {\n    a[0] = 1.0f\n}\n'
    with pytest.raises(ToolchainError) as err:
        compile_cuda(source, arch="sm_80", name="broken.cu")
    message = str(err.value)
    assert "NVRTC could not compile broken.cu for sm_80" in message
    assert "broken.cu(3): error" in message and 'expected a ";"' in message


def test_nvrtc_options_are_passed():
    source = "extern \"C\" __global__ void f(float* a) { a[0] = SCALE; }"
    with pytest.raises(ToolchainError, match="identifier \"SCALE\" is undefined"):
        compile_cuda(source)
    # 2.5f is stored as its bits: 0x40200000 = 1075838976
    assert "1075838976" in compile_cuda(source, options=("-DSCALE=2.5f",))


def test_a_tool_that_runs_too_long_is_stopped():
    with pytest.raises(ToolchainError, match="did not finish within"):
        assemble_ptx(vector_add_ptx("sm_80"), arch="sm_80", timeout=1e-6)


def test_missing_tools_name_the_package_to_install(monkeypatch):
    monkeypatch.setattr(toolchain, "_package_dir", lambda module: None)
    with pytest.raises(ToolchainError, match="ptxas was not found.*nvidia-cuda-nvcc-cu12"
                                             ".*pip install"):
        assemble_ptx(vector_add_ptx("sm_80"))
    with pytest.raises(ToolchainError, match="NVRTC .* was not found.*nvidia-cuda-nvrtc-cu12"
                                             ".*pip install"):
        compile_cuda(ADD_CUDA)
    status = toolchain_status()
    assert not status.ready and status.ptxas.path is None
    assert "nvidia-cuda-nvcc-cu12>=12.4,<13" in status.ptxas.problem


def test_the_toolchain_is_installed():
    status = toolchain_status()
    for tool in (status.ptxas, status.nvrtc, status.cuda_bindings):
        assert tool.available, tool.problem
    assert status.ready
    assert status.ptxas.version.startswith("12.") and status.nvrtc.version.startswith("12.")
    assert status.cuda_bindings.version.startswith("12.")
    assert "ptxas: 12." in status.summary()


def test_the_driver_bindings_import_without_a_gpu():
    from cuda.bindings import driver, nvrtc
    assert hasattr(driver, "cuInit") and hasattr(nvrtc, "nvrtcCompileProgram")


def test_parse_ptxas_info_reads_every_kernel():
    log = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'first' for 'sm_80'
ptxas info    : Function properties for first
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'second' for 'sm_80'
ptxas info    : Function properties for second
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
"""
    first, second = parse_ptxas_info(log)
    assert (first.name, first.registers, first.shared_bytes, first.stack_bytes) == \
        ("first", 255, 4096, 16)
    assert (first.spill_stores, first.spill_loads, first.constant_bytes, first.barriers) == \
        (12, 8, 380, 1)
    assert (second.name, second.registers, second.shared_bytes, second.constant_bytes) == \
        ("second", 10, 0, 0)
    assert parse_ptxas_info("") == ()


def test_started_assembly_gives_what_assemble_ptx_gives():
    """start_assembly runs ptxas in the background (build_gpu's way): the same report, the
    same refusals, and the same timeout."""
    ptx = vector_add_ptx("sm_80")
    pending = toolchain.start_assembly(ptx, arch="sm_80")
    report = pending.result()
    assert pending.done() and pending.result() is report
    direct = assemble_ptx(ptx, arch="sm_80")
    assert report.kernels == direct.kernels and report.cubin[:4] == b"\x7fELF"
    bad = ptx.replace("add.f32 %f3, %f1, %f2;", "add.f32 %f3, %f1, %f9;")
    with pytest.raises(ToolchainError, match="kernel.ptx, line 31; error"):
        toolchain.start_assembly(bad, arch="sm_80").result()
    with pytest.raises(ToolchainError, match="did not finish within"):
        toolchain.start_assembly(ptx, arch="sm_80", timeout=1e-6).result()
    with pytest.raises(ToolchainError, match="unsupported arch"):
        toolchain.start_assembly(ptx, arch="sm_10")
