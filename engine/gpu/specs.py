"""Named NVIDIA GPUs and their specification sheets (:class:`GPUSpec`, frozen).

Look-ups: :func:`get_spec` (by our short name, case-insensitive), :data:`GPUS` (every sheet
by short name), :func:`spec_for_arch` (the representative GPU of an ``sm_xx``: the sheet a
target given only by its arch assumes), :data:`DEFAULT_GPU` (the GPU of ``Target("cuda")``).

Sources, per GPU (NVIDIA's public documents):

* ``tesla-p100``: "NVIDIA Tesla P100" whitepaper (GP100, 2016) and the P100 SXM2 datasheet;
* ``v100-sxm2``: "NVIDIA Tesla V100 GPU Architecture" whitepaper (GV100, 2017);
* ``tesla-t4``: "NVIDIA Turing GPU Architecture" whitepaper (TU104, 2018), T4 datasheet;
* ``a100``: "NVIDIA A100 Tensor Core GPU Architecture" whitepaper (GA100, 2020) and the
  A100 80GB datasheet;
* ``rtx-3090``: "NVIDIA Ampere GA102 GPU Architecture" whitepaper (2020);
* ``rtx-4090``: "NVIDIA Ada GPU Architecture" whitepaper (AD102, 2022);
* ``h100-sxm``: "NVIDIA H100 Tensor Core GPU Architecture" whitepaper (GH100, 2022) and the
  H100 datasheet.

Per-SM limits (threads, blocks, shared memory, register and shared-memory allocation
units) are those of the CUDA C++ Programming Guide's table of compute capabilities and
of CUDA's occupancy calculator (``cuda_occupancy.h``), which :mod:`engine.gpu.occupancy`
follows.

How exact the figures are: SM counts, FP32 cores, clocks, DRAM bandwidth, L2 size and the
per-SM limits are the vendor's figures. ``fp32_peak_gflops`` is *derived* (SMs x FP32 cores
per SM x 2 (an FMA is two FLOPs) x boost clock) and a test checks it against the vendor's
figure quoted in each sheet's ``vendor_fp32_tflops``. The L2 bandwidth is approximate: the
V100 and A100 whitepapers give L2 bytes per clock (2048 and 5120), multiplied here by the
boost clock; for the other GPUs NVIDIA publishes no figure and the value is an estimate of
the same kind (``l2_bandwidth_is_estimate``), good for a rough roofline ceiling only.
"""
from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * 1024

#: the compute capabilities this engine knows (CUDA 12 still compiles for all of them)
SUPPORTED_ARCHS = ("sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's specification sheet. Sizes are in bytes, clocks in MHz, rates in GB/s or
    GFLOP/s (10**9 per second)."""

    name: str                          # our short name: "a100"
    display_name: str                  # "NVIDIA A100 SXM4 80GB"
    tvm_tag: str                       # Apache TVM's target tag: "nvidia/nvidia-a100"
    arch: str                          # compute capability as ptxas spells it: "sm_80"
    sm_count: int
    fp32_cores_per_sm: int
    boost_clock_mhz: int
    vendor_fp32_tflops: float          # the vendor's FP32 peak, as printed (non-tensor)
    # per-SM and per-block execution limits
    registers_per_sm: int              # 32-bit registers
    registers_per_block: int
    max_registers_per_thread: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    warp_size: int
    # shared memory
    shared_memory_per_sm: int          # the largest carveout a kernel can get
    shared_memory_per_block: int       # static limit (48 KiB)
    shared_memory_per_block_optin: int  # dynamic shared memory after opting in
    reserved_shared_memory_per_block: int  # what the driver keeps per block (1 KiB from sm_80)
    # allocation units (CUDA's occupancy calculator)
    register_allocation_unit: int      # registers are given to a warp in units of this many
    register_allocation_granularity: str  # "warp": registers are allocated per warp
    warp_allocation_granularity: int   # sub-partitions a block's warps are spread over
    shared_memory_allocation_unit: int  # bytes
    # memory system
    dram_bandwidth_gbs: float
    dram: str                          # "80 GB HBM2e"
    l2_size: int
    l2_bandwidth_gbs: float            # approximate: see the module docstring
    l2_bandwidth_is_estimate: bool
    l1_shared_per_sm: int              # L1 data cache + shared memory storage per SM
    source: str                        # the documents the figures come from

    @property
    def compute_capability(self) -> tuple[int, int]:
        """``(8, 0)`` for ``sm_80``."""
        digits = self.arch.removeprefix("sm_")
        return int(digits[:-1]), int(digits[-1])

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def fp32_peak_gflops(self) -> float:
        """SMs x FP32 cores per SM x 2 FLOPs per FMA x boost clock, in GFLOP/s."""
        return fp32_peak_gflops(self.sm_count, self.fp32_cores_per_sm, self.boost_clock_mhz)

    @property
    def ridge_point(self) -> float:
        """FLOPs per DRAM byte where the roofline turns: peak FP32 / DRAM bandwidth."""
        return self.fp32_peak_gflops / self.dram_bandwidth_gbs


def fp32_peak_gflops(sm_count: int, fp32_cores_per_sm: int, boost_clock_mhz: float) -> float:
    """Peak FP32 rate in GFLOP/s: every FP32 core retires one FMA (2 FLOPs) per clock."""
    return sm_count * fp32_cores_per_sm * 2 * boost_clock_mhz / 1000.0


def _l2_rate(bytes_per_clock: int, clock_mhz: int) -> float:
    """An L2 bandwidth in GB/s from bytes per clock at a clock."""
    return bytes_per_clock * clock_mhz / 1000.0


#: the limits every sheet shares (CUDA C++ Programming Guide, compute capabilities 6.0-9.0)
_COMMON = dict(registers_per_sm=65536, registers_per_block=65536, max_registers_per_thread=255,
               max_threads_per_block=1024, warp_size=32, shared_memory_per_block=48 * KIB,
               register_allocation_unit=256, register_allocation_granularity="warp")

TESLA_P100 = GPUSpec(
    # SXM2 (NVLink) version. The PCIe card has the same chip and memory at a lower boost
    # clock: 1303 MHz, 9.3 TFLOP/s FP32. GP100 is the one Pascal chip with 2 processing
    # blocks per SM (the occupancy rules' sub-partitions) and 64 KiB of dedicated shared
    # memory beside a 24 KiB L1/texture cache.
    name="tesla-p100", display_name="NVIDIA Tesla P100 SXM2 16GB", tvm_tag="nvidia/tesla-p100",
    arch="sm_60", sm_count=56, fp32_cores_per_sm=64, boost_clock_mhz=1480,
    vendor_fp32_tflops=10.6, max_threads_per_sm=2048, max_blocks_per_sm=32,
    shared_memory_per_sm=64 * KIB, shared_memory_per_block_optin=48 * KIB,
    reserved_shared_memory_per_block=0, warp_allocation_granularity=2,
    shared_memory_allocation_unit=256, dram_bandwidth_gbs=732.0, dram="16 GB HBM2",
    l2_size=4 * MIB, l2_bandwidth_gbs=_l2_rate(1024, 1480), l2_bandwidth_is_estimate=True,
    l1_shared_per_sm=(64 + 24) * KIB,
    source="NVIDIA Tesla P100 whitepaper (GP100); Tesla P100 SXM2 datasheet", **_COMMON)

V100_SXM2 = GPUSpec(
    name="v100-sxm2", display_name="NVIDIA Tesla V100 SXM2", tvm_tag="nvidia/tesla-v100",
    arch="sm_70", sm_count=80, fp32_cores_per_sm=64, boost_clock_mhz=1530,
    vendor_fp32_tflops=15.7, max_threads_per_sm=2048, max_blocks_per_sm=32,
    shared_memory_per_sm=96 * KIB, shared_memory_per_block_optin=96 * KIB,
    reserved_shared_memory_per_block=0, warp_allocation_granularity=4,
    shared_memory_allocation_unit=256, dram_bandwidth_gbs=900.0, dram="16/32 GB HBM2",
    l2_size=6 * MIB, l2_bandwidth_gbs=_l2_rate(2048, 1530), l2_bandwidth_is_estimate=False,
    l1_shared_per_sm=128 * KIB,
    source="NVIDIA Tesla V100 GPU Architecture whitepaper (GV100)", **_COMMON)

TESLA_T4 = GPUSpec(
    name="tesla-t4", display_name="NVIDIA T4", tvm_tag="nvidia/nvidia-t4",
    arch="sm_75", sm_count=40, fp32_cores_per_sm=64, boost_clock_mhz=1590,
    vendor_fp32_tflops=8.1, max_threads_per_sm=1024, max_blocks_per_sm=16,
    shared_memory_per_sm=64 * KIB, shared_memory_per_block_optin=64 * KIB,
    reserved_shared_memory_per_block=0, warp_allocation_granularity=4,
    shared_memory_allocation_unit=256, dram_bandwidth_gbs=320.0, dram="16 GB GDDR6",
    l2_size=4 * MIB, l2_bandwidth_gbs=_l2_rate(1024, 1590), l2_bandwidth_is_estimate=True,
    l1_shared_per_sm=96 * KIB,
    source="NVIDIA Turing GPU Architecture whitepaper (TU104); NVIDIA T4 datasheet", **_COMMON)

A100 = GPUSpec(
    # the 80 GB SXM4 module (the 40 GB one: 1555 GB/s of HBM2, same chip and clocks)
    name="a100", display_name="NVIDIA A100 SXM4 80GB", tvm_tag="nvidia/nvidia-a100",
    arch="sm_80", sm_count=108, fp32_cores_per_sm=64, boost_clock_mhz=1410,
    vendor_fp32_tflops=19.5, max_threads_per_sm=2048, max_blocks_per_sm=32,
    shared_memory_per_sm=164 * KIB, shared_memory_per_block_optin=163 * KIB,
    reserved_shared_memory_per_block=1 * KIB, warp_allocation_granularity=4,
    shared_memory_allocation_unit=128, dram_bandwidth_gbs=2039.0, dram="80 GB HBM2e",
    l2_size=40 * MIB, l2_bandwidth_gbs=_l2_rate(5120, 1410), l2_bandwidth_is_estimate=False,
    l1_shared_per_sm=192 * KIB,
    source="NVIDIA A100 Tensor Core GPU Architecture whitepaper (GA100); A100 80GB datasheet",
    **_COMMON)

RTX_3090 = GPUSpec(
    name="rtx-3090", display_name="NVIDIA GeForce RTX 3090", tvm_tag="nvidia/geforce-rtx-3090",
    arch="sm_86", sm_count=82, fp32_cores_per_sm=128, boost_clock_mhz=1695,
    vendor_fp32_tflops=35.6, max_threads_per_sm=1536, max_blocks_per_sm=16,
    shared_memory_per_sm=100 * KIB, shared_memory_per_block_optin=99 * KIB,
    reserved_shared_memory_per_block=1 * KIB, warp_allocation_granularity=4,
    shared_memory_allocation_unit=128, dram_bandwidth_gbs=936.0, dram="24 GB GDDR6X",
    l2_size=6 * MIB, l2_bandwidth_gbs=_l2_rate(2048, 1695), l2_bandwidth_is_estimate=True,
    l1_shared_per_sm=128 * KIB,
    source="NVIDIA Ampere GA102 GPU Architecture whitepaper", **_COMMON)

RTX_4090 = GPUSpec(
    name="rtx-4090", display_name="NVIDIA GeForce RTX 4090", tvm_tag="nvidia/geforce-rtx-4090",
    arch="sm_89", sm_count=128, fp32_cores_per_sm=128, boost_clock_mhz=2520,
    vendor_fp32_tflops=82.6, max_threads_per_sm=1536, max_blocks_per_sm=24,
    shared_memory_per_sm=100 * KIB, shared_memory_per_block_optin=99 * KIB,
    reserved_shared_memory_per_block=1 * KIB, warp_allocation_granularity=4,
    shared_memory_allocation_unit=128, dram_bandwidth_gbs=1008.0, dram="24 GB GDDR6X",
    l2_size=72 * MIB, l2_bandwidth_gbs=_l2_rate(2048, 2520), l2_bandwidth_is_estimate=True,
    l1_shared_per_sm=128 * KIB,
    source="NVIDIA Ada GPU Architecture whitepaper (AD102)", **_COMMON)

H100_SXM = GPUSpec(
    # H100 SXM5 80GB; the vendor prints 67 TFLOP/s FP32 (non-tensor)
    name="h100-sxm", display_name="NVIDIA H100 SXM5 80GB", tvm_tag="nvidia/nvidia-h100",
    arch="sm_90", sm_count=132, fp32_cores_per_sm=128, boost_clock_mhz=1980,
    vendor_fp32_tflops=67.0, max_threads_per_sm=2048, max_blocks_per_sm=32,
    shared_memory_per_sm=228 * KIB, shared_memory_per_block_optin=227 * KIB,
    reserved_shared_memory_per_block=1 * KIB, warp_allocation_granularity=4,
    shared_memory_allocation_unit=128, dram_bandwidth_gbs=3350.0, dram="80 GB HBM3",
    l2_size=50 * MIB, l2_bandwidth_gbs=_l2_rate(5120, 1980), l2_bandwidth_is_estimate=True,
    l1_shared_per_sm=256 * KIB,
    source="NVIDIA H100 Tensor Core GPU Architecture whitepaper (GH100); H100 datasheet",
    **_COMMON)

#: every known GPU by short name
GPUS: dict[str, GPUSpec] = {s.name: s for s in (
    TESLA_P100, V100_SXM2, TESLA_T4, A100, RTX_3090, RTX_4090, H100_SXM)}

#: the GPU of ``Target("cuda")`` when no arch or model is given
DEFAULT_GPU = "h100-sxm"

#: the sheet a target given only by its arch assumes: one representative GPU per arch
ARCH_REPRESENTATIVE: dict[str, str] = {
    "sm_60": "tesla-p100", "sm_70": "v100-sxm2", "sm_75": "tesla-t4", "sm_80": "a100",
    "sm_86": "rtx-3090", "sm_89": "rtx-4090", "sm_90": "h100-sxm"}


def get_spec(name: str) -> GPUSpec:
    """The sheet of a GPU by short name (``"a100"``), case-insensitive; a ``KeyError``
    naming the known ones otherwise."""
    spec = GPUS.get(name.strip().lower())
    if spec is None:
        raise KeyError(f"unknown GPU {name!r}; known GPUs: {', '.join(sorted(GPUS))}")
    return spec


def spec_for_arch(arch: str) -> GPUSpec:
    """The representative GPU of an arch (``"sm_80"`` -> A100); ``KeyError`` otherwise."""
    name = ARCH_REPRESENTATIVE.get(arch)
    if name is None:
        raise KeyError(f"unknown arch {arch!r}; supported: {', '.join(SUPPORTED_ARCHS)}")
    return GPUS[name]
