"""engine.gpu: the GPUs' specification sheets, ``Target`` parsed as TVM's, and CUDA's
occupancy rules checked on cases worked out by hand."""
from __future__ import annotations

import dataclasses

import pytest

from engine import tvm
from engine.gpu import (ARCH_REPRESENTATIVE, DEFAULT_GPU, GPUS, SUPPORTED_ARCHS, Target,
                        TargetError, get_spec, list_tags, occupancy, spec_for_arch)
from engine.gpu.specs import fp32_peak_gflops

KIB = 1024


# ---------------------------------------------------------------------------------------
# specification sheets

def test_the_required_gpus_are_known():
    assert {"h100-sxm", "a100", "rtx-4090", "tesla-p100"} <= set(GPUS)
    assert get_spec("tesla-p100").arch == "sm_60"
    assert get_spec("A100").arch == "sm_80"
    assert get_spec("rtx-4090").arch == "sm_89"
    assert get_spec("h100-sxm").arch == "sm_90"


@pytest.mark.parametrize("name", sorted(GPUS))
def test_the_derived_fp32_peak_matches_the_vendors_figure(name):
    spec = GPUS[name]
    derived = spec.fp32_peak_gflops
    assert derived == spec.sm_count * spec.fp32_cores_per_sm * 2 * spec.boost_clock_mhz / 1000
    assert derived == pytest.approx(spec.vendor_fp32_tflops * 1000, rel=0.01)


def test_peaks_worked_out_by_hand():
    # H100 SXM5: 132 SMs x 128 cores x 2 x 1.98 GHz = 66 908 GFLOP/s (vendor: 67 TFLOP/s)
    assert get_spec("h100-sxm").fp32_peak_gflops == pytest.approx(66908.16)
    # A100: 108 x 64 x 2 x 1.41 = 19 491 (vendor: 19.5 TFLOP/s)
    assert get_spec("a100").fp32_peak_gflops == pytest.approx(19491.84)
    # P100 SXM2: 56 x 64 x 2 x 1.48 = 10 609 (vendor: 10.6 TFLOP/s)
    assert get_spec("tesla-p100").fp32_peak_gflops == pytest.approx(10608.64)
    assert fp32_peak_gflops(128, 128, 2520) == pytest.approx(82575.36)   # RTX 4090


@pytest.mark.parametrize("name", sorted(GPUS))
def test_sheets_are_consistent(name):
    s = GPUS[name]
    assert dataclasses.is_dataclass(s) and s.__dataclass_params__.frozen
    assert s.registers_per_sm == 65536 and s.max_registers_per_thread == 255
    assert s.warp_size == 32 and s.max_threads_per_block == 1024
    assert s.shared_memory_per_block == 48 * KIB
    assert s.shared_memory_per_block <= s.shared_memory_per_block_optin <= s.shared_memory_per_sm
    assert s.shared_memory_per_sm <= s.l1_shared_per_sm
    assert s.register_allocation_unit == 256 and s.register_allocation_granularity == "warp"
    assert s.shared_memory_allocation_unit == (256 if s.compute_capability[0] < 8 else 128)
    assert s.reserved_shared_memory_per_block == (KIB if s.compute_capability[0] >= 8 else 0)
    assert s.arch in SUPPORTED_ARCHS and s.tvm_tag.startswith("nvidia/")
    assert "whitepaper" in s.source
    assert s.l2_bandwidth_gbs > s.dram_bandwidth_gbs


def test_every_supported_arch_has_a_representative_gpu():
    assert set(ARCH_REPRESENTATIVE) == set(SUPPORTED_ARCHS)
    for arch in SUPPORTED_ARCHS:
        assert spec_for_arch(arch).arch == arch
    with pytest.raises(KeyError, match="sm_61"):
        spec_for_arch("sm_61")
    with pytest.raises(KeyError, match="known GPUs"):
        get_spec("rtx-5090")


# ---------------------------------------------------------------------------------------
# Target

def test_cuda_alone_is_the_default_gpu():
    t = Target("cuda")
    assert DEFAULT_GPU == "h100-sxm"
    assert t.kind.name == "cuda" and t.arch == "sm_90" and t.spec is get_spec("h100-sxm")
    assert t.keys == ("cuda", "gpu")
    assert t.attrs["max_threads_per_block"] == 1024
    assert t.attrs["max_shared_memory_per_block"] == 48 * KIB
    assert t.attrs["thread_warp_size"] == 32
    assert t.host == Target("llvm") and t.host.kind.name == "llvm"


@pytest.mark.parametrize("text,model", [
    ("cuda -arch=sm_80", "a100"),
    ("cuda -arch=sm_60", "tesla-p100"),
    ("cuda -model=a100", "a100"),
    ("cuda -model=nvidia-a100", "a100"),
    ("cuda -arch=sm_89 -model=rtx-4090", "rtx-4090"),
    ("nvidia/nvidia-a100", "a100"),
    ("nvidia/nvidia-h100", "h100-sxm"),
    ("nvidia/geforce-rtx-4090", "rtx-4090"),
    ("nvidia/tesla-p100", "tesla-p100"),
    ("nvidia/h100-sxm", "h100-sxm"),
    ("nvidia/a100", "a100"),
])
def test_spellings_of_a_cuda_target(text, model):
    t = Target(text)
    spec = get_spec(model)
    assert t.kind.name == "cuda" and t.spec is spec and t.arch == spec.arch
    assert t.attrs["arch"] == spec.arch and t.attrs["model"] == model
    assert Target(str(t)) == t            # the canonical string parses back


def test_options_override_the_sheets_limits():
    t = Target("cuda -arch=sm_80 -max_threads_per_block=512 -max_shared_memory_per_block=98304")
    assert t.max_threads_per_block == 512 and t.max_shared_memory_per_block == 98304
    assert str(t) == ("cuda -arch=sm_80 -model=a100 -max_threads_per_block=512 "
                      "-max_num_threads=1024 -max_shared_memory_per_block=98304 "
                      "-thread_warp_size=32")
    assert Target(str(t)) == t and hash(Target(str(t))) == hash(t)


def test_host():
    t = Target("cuda", host="llvm -mcpu=znver3")
    assert t.host.attrs == {"mcpu": "znver3"} and str(t.host) == "llvm -mcpu=znver3"
    assert Target("cuda", Target("llvm")).host == Target("llvm")
    assert Target(t).host == t.host and Target(t) == t
    assert Target(t, host="llvm") != t
    assert "host='llvm -mcpu=znver3'" in repr(t)
    assert Target("llvm").host is None and Target("llvm").spec is None
    with pytest.raises(AttributeError, match="no arch"):
        Target("llvm").arch
    with pytest.raises(TargetError, match="host of a GPU target must be an llvm"):
        Target("cuda", host="cuda")
    with pytest.raises(TargetError, match="takes no host"):
        Target("llvm", host="llvm")


def test_a_target_is_immutable():
    t = Target("cuda")
    with pytest.raises(AttributeError):
        t.kind = None


@pytest.mark.parametrize("text,why", [
    ("", "empty target string"),
    ("rocm", "unknown target kind 'rocm'"),
    ("cuda -arch=sm_61", "unsupported arch 'sm_61'"),
    ("cuda -arch=sm_80 -model=h100-sxm", "contradicts"),
    ("cuda -model=rtx-5090", "unknown GPU model"),
    ("nvidia/tesla-k80", "unknown GPU model"),
    ("cuda -max_threads_per_block=2048", "exceeds"),
    ("cuda -max_threads_per_block=many", "must be an integer"),
    ("cuda -max_shared_memory_per_block=1000000", "exceeds"),
    ("cuda -thread_warp_size=64", "must be 32"),
    ("cuda -libs=cublas", "unknown cuda option"),
    ("cuda arch=sm_80", "as an option"),
    ("cuda -arch=sm_80 -arch=sm_90", "given twice"),
    ("llvm -arch=sm_80", "unknown llvm option"),
])
def test_bad_targets_are_refused_with_what_is_accepted(text, why):
    with pytest.raises(TargetError, match=why) as err:
        Target(text)
    message = str(err.value)
    assert "accepted targets: 'cuda'" in message
    assert "nvidia/nvidia-a100" in message and "sm_60, sm_70" in message and "'llvm'" in message


def test_not_a_string():
    with pytest.raises(TargetError, match="got int"):
        Target(3)


def test_tags():
    tags = list_tags()
    for tag in ("nvidia/nvidia-a100", "nvidia/geforce-rtx-4090", "nvidia/tesla-p100",
                "nvidia/nvidia-h100", "nvidia/h100-sxm"):
        assert tag in tags and Target(tag).kind.name == "cuda"


def test_the_tvm_namespace():
    t = tvm.target.Target("cuda")
    assert isinstance(t, Target) and t.arch == "sm_90"
    assert tvm.target.Target("cuda -arch=sm_80").attrs["arch"] == "sm_80"
    assert str(tvm.target.Target("llvm")) == "llvm"


# ---------------------------------------------------------------------------------------
# occupancy, worked out by hand from CUDA's occupancy calculator's rules

A100 = get_spec("a100")          # 64 warps/SM, 32 blocks/SM, 164 KiB shared/SM, 4 sub-partitions


def test_a100_256_threads_32_registers_is_full():
    # warps: 256 threads = 8 warps; 64 // 8 = 8 blocks
    # registers: 32 x 32 = 1024 per warp (4 units of 256); 65536 / 4 sub-partitions = 16384
    #   per sub-partition -> 16 warps each -> 64 warps -> 64 // 8 = 8 blocks
    # shared: 0 + 1 KiB reserved = 1024 bytes -> 167936 // 1024 = 164 blocks; blocks: 32
    # -> 8 blocks, 64 warps: 100%, warps and registers both bind
    occ = occupancy(A100, 256, 32, 0)
    assert occ.active_blocks_per_sm == 8 and occ.active_warps_per_sm == 64
    assert occ.occupancy == 1.0
    assert occ.limited_by == ("warps", "registers")
    assert occ.block_limits == {"warps": 8, "registers": 8, "shared_memory": 164, "blocks": 32}
    assert occ.registers_per_block == 8 * 1024 and occ.shared_bytes_per_block == 1024


def test_a100_64_registers_halves_it():
    # 64 x 32 = 2048 per warp; 16384 // 2048 = 8 warps per sub-partition -> 32 warps
    # -> 32 // 8 = 4 blocks = 32 warps of 64: 50%, limited by registers
    occ = occupancy(A100, 256, 64)
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm) == (4, 32)
    assert occ.occupancy == 0.5 and occ.limited_by == ("registers",)
    assert occ.summary() == "4 blocks/SM, 32 of 64 warps (50%), limited by registers"


def test_a100_48_kib_of_shared_memory_gives_3_blocks():
    # 48 KiB + 1 KiB reserved = 50176 bytes (a multiple of 128); the per-block limit is
    # 48 KiB + 1 KiB, so it launches; 164 KiB = 167936 // 50176 = 3 (4 would need 200704)
    # -> 3 blocks x 8 warps = 24 of 64 warps: 37.5%, limited by shared memory
    occ = occupancy(A100, 256, 32, 48 * KIB)
    assert occ.active_blocks_per_sm == 3 and occ.active_warps_per_sm == 24
    assert occ.occupancy == 0.375 and occ.limited_by == ("shared_memory",)
    assert occ.shared_bytes_per_block == 50176


def test_a100_opt_in_shared_memory():
    # 100 KiB is over 48 KiB: the opt-in limit (163 KiB + 1 KiB) applies; 102400 + 1024 =
    # 103424 per block; 167936 // 103424 = 1 block
    assert occupancy(A100, 128, 32, 100 * KIB).active_blocks_per_sm == 1
    # 164 KiB + 1 KiB > 163 KiB + 1 KiB: the block cannot launch
    occ = occupancy(A100, 128, 32, 164 * KIB)
    assert occ.active_blocks_per_sm == 0 and occ.limited_by == ("shared_memory",)


def test_register_counts_round_up_to_whole_units():
    # 33 registers: 33 x 32 = 1056 -> 1280 (5 units); 16384 // 1280 = 12 warps per
    # sub-partition -> 48 warps; 128 threads = 4 warps -> 12 blocks (warps allow 16)
    # -> 48 of 64 warps: 75%
    occ = occupancy(A100, 128, 33)
    assert occ.active_blocks_per_sm == 12 and occ.occupancy == 0.75
    assert occ.limited_by == ("registers",) and occ.block_limits["warps"] == 16


def test_small_blocks_hit_the_block_limit():
    # 32 threads = 1 warp: warps allow 64 blocks, registers (16 x 32 = 512 per warp: 32
    # warps per sub-partition, 128 warps) 128, but an SM holds at most 32 blocks -> 50%
    occ = occupancy(A100, 32, 16)
    assert occ.active_blocks_per_sm == 32 and occ.occupancy == 0.5
    assert occ.limited_by == ("blocks",)


def test_h100_1024_threads():
    # 1024 threads = 32 warps: 64 // 32 = 2 blocks; registers (16: 512 per warp) allow 4
    occ = occupancy(get_spec("h100-sxm"), 1024, 16)
    assert occ.active_blocks_per_sm == 2 and occ.occupancy == 1.0
    assert occ.limited_by == ("warps",)


def test_rtx_4090_has_48_warps_and_24_blocks():
    # sm_89: 1536 threads = 48 warps per SM; 64 threads (2 warps) -> warps allow 24 blocks,
    # the block limit is 24 too; registers (32: 1024 per warp) allow 64 // 2 = 32
    occ = occupancy(get_spec("rtx-4090"), 64, 32)
    assert occ.active_blocks_per_sm == 24 and occ.max_warps_per_sm == 48
    assert occ.occupancy == 1.0 and occ.limited_by == ("warps", "blocks")


def test_p100():
    p100 = get_spec("tesla-p100")   # 2 sub-partitions, no reserved shared memory, 256-byte units
    # 256 threads, 32 registers: 65536 / 2 = 32768 per sub-partition // 1024 = 32 warps
    # each -> 64 warps -> 8 blocks; 0 shared bytes: not limited -> 100%
    occ = occupancy(p100, 256, 32)
    assert occ.active_blocks_per_sm == 8 and occ.occupancy == 1.0
    assert occ.block_limits["shared_memory"] > 10 ** 9
    # 48 KiB of shared memory: 65536 // 49152 = 1 block = 8 warps: 12.5%
    assert occupancy(p100, 256, 32, 48 * KIB).occupancy == 0.125
    # GP100 refuses what GP10x (4 sub-partitions) could not run: 288 threads = 9 warps of
    # 176 x 32 = 5632 registers; 9 rounded up to 2 partitions = 10 x 5632 = 56320 fits in
    # 65536, but rounded up to 4 = 12 x 5632 = 67584 does not -> 0 blocks
    occ = occupancy(p100, 288, 176)
    assert occ.active_blocks_per_sm == 0 and occ.limited_by == ("registers",)


def test_blocks_that_cannot_launch():
    occ = occupancy(A100, 1025, 16)           # more threads than a block may have
    assert occ.active_blocks_per_sm == 0 and "warps" in occ.limited_by
    occ = occupancy(A100, 32, 256)            # more than 255 registers per thread
    assert occ.active_blocks_per_sm == 0 and occ.limited_by == ("registers",)
    # 1024 threads x 128 registers = 131072 > 65536 registers per block
    assert occupancy(A100, 1024, 128).active_blocks_per_sm == 0


def test_a_kernel_without_registers_is_not_register_limited():
    assert occupancy(A100, 256, 0).limited_by == ("warps",)


@pytest.mark.parametrize("args", [(0, 32, 0), (256, -1, 0), (256, 32, -5), (256.0, 32, 0),
                                  (True, 32, 0)])
def test_bad_occupancy_inputs(args):
    with pytest.raises(ValueError, match="must be an integer"):
        occupancy(A100, *args)


def test_attrs_are_read_only():
    t = Target("cuda")
    with pytest.raises(TypeError):
        t.attrs["arch"] = "sm_80"
    assert dict(t.attrs)["arch"] == "sm_90"
