"""The GPU back ends: PTX through LLVM's NVPTX target (engine.gpu.nvptx) and CUDA C
(engine.gpu.cuda_source), each kernel compiled for real — the PTX assembled by ptxas, the
CUDA C compiled by NVRTC and its PTX assembled — for sm_60, sm_80 and sm_90. No GPU is
needed; nothing is skipped for a missing tool (it fails, telling how to install it).

The kernels are built by hand (tests/gpu_kernel_samples.py) and, where the GPU lowering
exists, lowered from the course's GPU chapter programs (engine.presets.gpu_chapter).
"""
from __future__ import annotations

import llvmlite.binding as llvm
import pytest

import gpu_kernel_samples as samples
from engine.gpu import assemble_ptx, compile_cuda
from engine.gpu.cuda_source import kernel_to_cuda, kernels_to_cuda, module_to_cuda
from engine.gpu.kernel import Kernel
from engine.gpu.nvptx import compile_ptx, init_nvptx, kernel_to_llvm, llvm_module
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.lower.errors import BuildError

ARCHS = ("sm_60", "sm_80", "sm_90")
KERNELS = {f.__name__: f for f in samples.ALL}


def _check_report(report, kernel: Kernel) -> None:
    res = report.kernel(kernel.name)
    assert res.registers > 0
    assert res.shared_bytes == kernel.shared_bytes
    assert res.spill_stores == 0 and res.spill_loads == 0


# ---------------------------------------------------------------------------------------
# every kernel, both back ends, every arch

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_ptx_from_llvm_assembles(name, arch):
    kernel = KERNELS[name]()
    ptx = compile_ptx(kernel, arch)
    assert f".target {arch}" in ptx
    _check_report(assemble_ptx(ptx, arch), kernel)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_cuda_source_compiles_with_nvrtc(name, arch):
    kernel = KERNELS[name]()
    source = kernel_to_cuda(kernel, header=True)
    assert "#include" not in source
    ptx = compile_cuda(source, arch)
    _check_report(assemble_ptx(ptx, arch), kernel)


def test_several_kernels_in_one_module():
    ks = [samples.vector_add(), samples.window_sum(), samples.local_gemm()]
    for arch in ARCHS:
        report = assemble_ptx(compile_ptx(ks, arch), arch)
        for k in ks:
            _check_report(report, k)
        report = assemble_ptx(compile_cuda(kernels_to_cuda(ks), arch), arch)
        for k in ks:
            _check_report(report, k)


# ---------------------------------------------------------------------------------------
# the LLVM IR

def test_llvm_ir_is_an_nvptx_kernel():
    text = kernel_to_llvm(samples.window_sum(), "sm_80")
    assert 'target triple = "nvptx64-nvidia-cuda"' in text
    init_nvptx()
    mod = llvm.parse_assembly(text)
    mod.verify()
    fn = mod.get_function("window_sum_kernel")
    assert not fn.is_declaration
    if llvm.llvm_version_info[0] >= 20:
        assert "define ptx_kernel void" in text
    else:
        assert '!"kernel", i32 1' in text
    assert "ptr addrspace(1) noalias" in text
    assert "internal addrspace(3) global [130 x float] undef, align 16" in text
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in text and "llvm.nvvm.read.ptx.sreg.ctaid.x" in text
    assert "barrier" in text


def test_block_size_reaches_ptx():
    ptx = compile_ptx(samples.tile_2d(), "sm_80")
    assert ".maxntid 16, 16, 1" in ptx


def test_float4_accesses_are_vector_instructions():
    kernel = samples.vector_add_float4()
    text = kernel_to_llvm(kernel, "sm_80")
    assert "load <4 x float>, ptr addrspace(1)" in text and "align 16" in text
    ptx = compile_ptx(kernel, "sm_80")
    assert ".v4." in ptx
    src = kernel_to_cuda(kernel)
    assert "*(float4*)(A + " in src and "*(float4*)(C + " in src
    assert ".v4." in compile_cuda(kernel_to_cuda(kernel, header=True), "sm_80")


def test_unaligned_vector_access_is_not_claimed_aligned():
    """A float4 whose base is not a multiple of 4 is aligned to its element only, and
    printed element by element in CUDA C (a float4 load there would fault)."""
    A, B = Buffer("A", (260,), "float32"), Buffer("B", (256,), "float32")
    tx = E.Var("threadIdx_x", "int32")
    r_in = E.Ramp(tx * E.IntImm("int32", 4) + E.IntImm("int32", 1), E.IntImm("int32", 1), 4)
    r_out = E.Ramp(tx * E.IntImm("int32", 4), E.IntImm("int32", 1), 4)
    body = S.BufferStore(B, E.BufferLoad(A, (r_in,)), (r_out,))
    k = Kernel("shifted", (A, B), body, (1, 1, 1), (64, 1, 1), {"threadIdx.x": tx})
    text = kernel_to_llvm(k, "sm_80")
    assert "load <4 x float>, ptr addrspace(1) %" in text
    assert [ln for ln in text.splitlines() if "load <4 x float>" in ln][0].endswith("align 4")
    src = kernel_to_cuda(k)
    assert "*(float4*)(A" not in src and "*(float4*)(B + " in src
    for arch in ARCHS:
        assemble_ptx(compile_ptx(k, arch), arch)
        assemble_ptx(compile_cuda(kernel_to_cuda(k, header=True), arch), arch)


def test_masked_vector_access_uses_the_global_address_space():
    text = kernel_to_llvm(samples.masked_copy(), "sm_80")
    assert "llvm.masked.load.v4f32.p1" in text and "llvm.masked.store.v4f32.p1" in text


def test_local_array_and_unrolled_loop():
    kernel = samples.local_gemm()
    text = kernel_to_llvm(kernel, "sm_80")
    assert "alloca [4 x float]" in text
    assert "llvm.loop.unroll.full" in text
    src = kernel_to_cuda(kernel)
    assert "float C_local[4];" in src
    assert src.count("#pragma unroll") == 3
    ptx = compile_ptx(kernel, "sm_80")
    assert ".local" not in ptx          # the local array lives in registers


def test_cuda_source_reads_as_tvm_prints_it():
    src = kernel_to_cuda(samples.window_sum())
    assert src.startswith('extern "C" __global__ void __launch_bounds__(128) '
                          "window_sum_kernel(float* __restrict__ A, float* __restrict__ B) {")
    assert "__shared__ float A_shared[130];" in src
    assert "__syncthreads();" in src
    assert "((int)blockIdx.x)" in src and "((int)threadIdx.x)" in src
    assert "for (int ax0_0 = 0; ax0_0 < 2; ++ax0_0) {" in src
    src = kernel_to_cuda(samples.vector_add_guarded())
    assert "int n)" in src and "if (" in src


def test_header_has_what_nvrtc_needs_and_no_system_include():
    src = kernel_to_cuda(samples.vector_add(), header=True)
    assert "#define int64_t long long" in src and "TVM_ENABLE_L2_PREFETCH" in src
    assert "#include" not in src


def test_floor_division_forms():
    """Non-negative dividends divide with / and %; a power of two shifts; a divisor
    of unknown sign goes through the helper functions of the header."""
    A, B = Buffer("A", (64,), "int32"), Buffer("B", (64,), "int32")
    tx = E.Var("threadIdx_x", "int32")
    d = E.Var("d", "int32")
    x = E.BufferLoad(A, (tx,))
    v = (E.FloorDiv(tx, E.IntImm("int32", 3)) + E.FloorMod(x, E.IntImm("int32", 8))
         + E.FloorDiv(x, d) + E.FloorMod(x, E.IntImm("int32", 5)))
    k = Kernel("floors", (A, B, d), S.BufferStore(B, v, (tx,)), (1, 1, 1), (64, 1, 1),
               {"threadIdx.x": tx})
    src = kernel_to_cuda(k, header=True)
    assert "(((int)threadIdx.x) / 3)" in src
    assert "& 7)" in src
    assert "floordiv_i32(" in src and "floormod_i32(" in src
    for arch in ARCHS:
        assemble_ptx(compile_cuda(src, arch), arch)
        assemble_ptx(compile_ptx(k, arch), arch)


# ---------------------------------------------------------------------------------------
# math and refusals

@pytest.mark.parametrize("op", ["exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt",
                                "sigmoid", "fabs", "floor", "ceil", "round", "trunc", "fma"])
def test_float32_math_compiles_both_ways(op):
    k = samples.call_kernel(op)
    assemble_ptx(compile_ptx(k, "sm_60"), "sm_60")
    assemble_ptx(compile_cuda(kernel_to_cuda(k, header=True), "sm_60"), "sm_60")


def test_math_uses_approximate_instructions_without_libdevice():
    ptx = compile_ptx(samples.call_kernel("exp"), "sm_80")
    assert "ex2.approx" in ptx
    ptx = compile_ptx(samples.call_kernel("sqrt"), "sm_80")
    assert "sqrt.rn.f32" in ptx        # sqrt stays exact


def test_tanh_needs_sm75_in_ptx():
    k = samples.call_kernel("tanh")
    assert "tanh.approx" in compile_ptx(k, "sm_80")
    with pytest.raises(BuildError, match="tanh.*sm_75"):
        compile_ptx(k, "sm_60")
    # the CUDA C back end has tanhf everywhere
    assemble_ptx(compile_cuda(kernel_to_cuda(k, header=True), "sm_60"), "sm_60")


@pytest.mark.parametrize("op,dtype", [("pow", "float32"), ("erf", "float32"),
                                      ("exp", "float64"), ("sin", "float64")])
def test_unlowerable_math_is_refused_by_the_ptx_back_end(op, dtype):
    k = samples.call_kernel(op, dtype)
    with pytest.raises(BuildError, match=op):
        kernel_to_llvm(k, "sm_80")
    # CUDA C has them (NVRTC's device library)
    assemble_ptx(compile_cuda(kernel_to_cuda(k, header=True), "sm_80"), "sm_80")


def test_float64_exact_math_is_fine():
    for op in ("sqrt", "fma", "floor", "fabs"):
        k = samples.call_kernel(op, "float64")
        assemble_ptx(compile_ptx(k, "sm_80"), "sm_80")


def test_host_hooks_are_refused():
    A = Buffer("A", (32,), "int64")
    tx = E.Var("threadIdx_x", "int32")
    call = E.Call("int64", "call_extern", (E.StringImm("clock"),))
    k = Kernel("hook", (A,), S.BufferStore(A, call, (tx,)), (1, 1, 1), (32, 1, 1),
               {"threadIdx.x": tx})
    with pytest.raises(BuildError, match="host-side"):
        kernel_to_llvm(k, "sm_80")
    with pytest.raises(BuildError, match="host-side"):
        kernel_to_cuda(k)


def test_shared_buffer_allocated_in_the_body_is_refused():
    A = Buffer("A", (32,), "float32")
    sh = Buffer("sh", (32,), "float32", scope="shared")
    tx = E.Var("threadIdx_x", "int32")
    body = S.Allocate(sh, S.BufferStore(A, E.FloatImm("float32", 1.0), (tx,)))
    k = Kernel("bad", (A,), body, (1, 1, 1), (32, 1, 1), {"threadIdx.x": tx})
    with pytest.raises(BuildError, match="Kernel.shared"):
        kernel_to_llvm(k, "sm_80")
    with pytest.raises(BuildError, match="Kernel.shared"):
        kernel_to_cuda(k)


def test_unknown_arch_is_refused():
    with pytest.raises(BuildError, match="unsupported GPU arch"):
        compile_ptx(samples.vector_add(), "sm_35")


def test_llvm_module_holds_every_kernel():
    mod = llvm_module([samples.vector_add(), samples.window_sum()], "sm_80")
    names = {f.name for f in mod.functions if not f.name.startswith("llvm.")}
    assert names == {"main_kernel0", "window_sum_kernel"}


# ---------------------------------------------------------------------------------------
# the course's programs through the GPU lowering

from engine.gpu.lower import lower_gpu  # noqa: E402
from engine.presets import gpu_chapter  # noqa: E402


def _lowered(program: str, **kw):
    sch = getattr(gpu_chapter, program)(**kw)
    return lower_gpu(sch.mod, "cuda -arch=sm_80")


@pytest.mark.parametrize("program,kw", [("vector_add", {}), ("window_sum", {}),
                                        ("gemm_local", {"n": 128})])
def test_course_programs_compile_both_ways(program, kw):
    gm = _lowered(program, **kw)
    kernels = [k for f in gm.functions for k in f.kernels]
    assert kernels
    source = module_to_cuda(gm)
    for arch in ARCHS:
        report = assemble_ptx(compile_ptx(kernels, arch), arch)
        for k in kernels:
            _check_report(report, k)
        report = assemble_ptx(compile_cuda(source, arch), arch)
        for k in kernels:
            _check_report(report, k)


def test_course_vector_add_is_the_split_and_bound_kernel():
    gm = _lowered("vector_add")
    (k,) = gm["main"].kernels
    assert k.grid == (8, 1, 1) and k.block == (128, 1, 1)
    src = module_to_cuda(gm)
    assert "__launch_bounds__(128) main_kernel0(" in src
    assert "blockIdx.x" in src and "threadIdx.x" in src


def test_course_window_sum_fetches_into_shared_memory():
    gm = _lowered("window_sum")
    (k,) = gm["main"].kernels
    assert k.shared_bytes == 130 * 4
    src = module_to_cuda(gm)
    assert "__shared__ float A_shared[130];" in src and "__syncthreads();" in src
