"""engine.codegen.isa: the vector ISA of the host and of target strings."""
import pytest

from engine.codegen.isa import AVX2, AVX512, NEON, VectorISA, _parse_size, isa_of


def test_host_isa_matches_llvm_features():
    from engine.codegen.target import host_cpu
    isa = isa_of()
    feats = host_cpu()[1]
    if "+avx512f" in feats:
        assert (isa.lanes, isa.registers) == (16, 32)
    elif "+avx2" in feats:
        assert (isa.lanes, isa.registers) == (8, 16)
    assert isa.l1d >= 16 * 1024 and isa.l2 >= isa.l1d
    assert isa_of("llvm") == isa


@pytest.mark.parametrize("target,lanes,regs,arch", [
    ("llvm -mcpu=skylake-avx512", 16, 32, "x86_64"),
    ("llvm -mcpu=znver4", 16, 32, "x86_64"),
    ("llvm -mcpu=haswell", 8, 16, "x86_64"),
    ("llvm -mattr=+avx2,+fma", 8, 16, "x86_64"),
    ("llvm -mattr=+avx512f", 16, 32, "x86_64"),
    ("llvm -mtriple=aarch64-linux-gnu", 4, 32, "aarch64"),
    ("raspberry-pi-5", 4, 32, "aarch64"),
    ("avx2", 8, 16, "x86_64"),
])
def test_target_strings(target, lanes, regs, arch):
    isa = isa_of(target)
    assert (isa.lanes, isa.registers, isa.arch) == (lanes, regs, arch)
    assert isa.vector_bytes == 4 * lanes


def test_isa_passes_through_and_is_frozen():
    assert isa_of(AVX2) is AVX2
    with pytest.raises(Exception):
        AVX512.lanes = 4  # type: ignore[misc]
    assert "16 float32 lanes x 32 registers" in AVX512.describe()
    assert isinstance(NEON, VectorISA)


@pytest.mark.parametrize("bad", ["cuda", "llvm -mcpu=nosuchcpu", "llvm -mtriple=riscv64"])
def test_bad_targets_say_what_to_write(bad):
    with pytest.raises(ValueError, match="llvm|x86|CPU"):
        isa_of(bad)


def test_parse_size():
    assert _parse_size("32K") == 32768
    assert _parse_size("32M") == 32 * 1024 * 1024
    assert _parse_size("junk") is None
