"""engine.gpu — the GPU (CUDA) target description and NVIDIA's compilers.

Public API::

    from engine.gpu import Target, get_spec, occupancy, assemble_ptx, compile_cuda

    t = Target("cuda -arch=sm_80")        # or "cuda", "nvidia/nvidia-a100", "cuda -model=a100"
    t.arch, t.attrs["max_threads_per_block"], t.spec.fp32_peak_gflops, t.host  # host: llvm
    occupancy(get_spec("a100"), threads_per_block=256, registers_per_thread=64).summary()
    ptx = compile_cuda('extern "C" __global__ void f(float* a) { a[0] = 1; }', arch="sm_80")
    report = assemble_ptx(ptx, arch="sm_80")   # cubin, registers, shared memory, spills
    toolchain_status().summary()               # ptxas / NVRTC / cuda-bindings versions

Modules: :mod:`.specs` (named GPUs' specification sheets), :mod:`.target` (``Target``
parsed from TVM-style strings), :mod:`.occupancy` (CUDA's occupancy rules),
:mod:`.toolchain` (ptxas and NVRTC from the CUDA 12 wheels, in subprocesses),
:mod:`.nvrtc_process` (the NVRTC subprocess). No GPU is needed for any of them.

With a GPU: :mod:`.driver` (the CUDA driver API: ``cuda_available()``, ``load_ptx``,
``launch``, ``DeviceBuffer``, ``time_launches``; without one each says "no CUDA device: ...")
and :mod:`.device` (the GPU memory of ``engine.nd.array(x, engine.cuda(0))``).
"""
from .driver import (CudaError, DeviceBuffer, DriverFunction, DriverModule, NoCudaDevice,
                     cuda_available, launch, load_ptx, time_launches)
from .occupancy import LIMITS, Occupancy, occupancy
from .specs import (ARCH_REPRESENTATIVE, DEFAULT_GPU, GPUS, SUPPORTED_ARCHS, GPUSpec, get_spec,
                    spec_for_arch)
from .target import Target, TargetError, TargetKind, list_tags, spec_by_model
from .toolchain import (AssemblyReport, KernelResources, ToolchainError, ToolchainStatus,
                        ToolStatus, assemble_ptx, compile_cuda, parse_ptxas_info,
                        toolchain_status)

__all__ = ["GPUSpec", "GPUS", "DEFAULT_GPU", "ARCH_REPRESENTATIVE", "SUPPORTED_ARCHS",
           "get_spec", "spec_for_arch", "Target", "TargetKind", "TargetError", "list_tags",
           "spec_by_model", "Occupancy", "LIMITS", "occupancy", "AssemblyReport",
           "KernelResources", "ToolchainError", "ToolchainStatus", "ToolStatus",
           "assemble_ptx", "compile_cuda", "parse_ptxas_info", "toolchain_status",
           "CudaError", "NoCudaDevice", "cuda_available", "DeviceBuffer", "DriverModule",
           "DriverFunction", "load_ptx", "launch", "time_launches"]
