"""engine.build for an ARM board: target strings, NEON code, AArch64 object files.

(Running the code is tests/test_deploy_aarch64.py's: exported, under qemu-aarch64.)
"""
from __future__ import annotations

import struct

import pytest

from aarch64_samples import mm_relu_neon

import engine
from engine import workloads
from engine.codegen.machine import NAMED_MACHINES, TargetStringError, parse_machine
from engine.lower.errors import BuildError
from engine.runtime.cross import CrossModule

EM_AARCH64 = 183


def _elf_machine(obj: bytes) -> int:
    assert obj[:4] == b"\x7fELF", "not an ELF object"
    return struct.unpack_from("<H", obj, 18)[0]


def test_target_strings():
    assert parse_machine("llvm") is None
    assert parse_machine("llvm -mcpu=haswell") is None          # the host, as before
    m = parse_machine("llvm -mtriple=aarch64-linux-gnu")
    assert (m.triple, m.cpu, m.arch) == ("aarch64-linux-gnu", "generic", "aarch64")
    assert "+neon" in m.features
    pi = parse_machine("raspberry-pi-5")
    assert pi is NAMED_MACHINES["raspberry-pi-5"] and pi.cpu == "cortex-a76"
    assert parse_machine("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76").cpu == "cortex-a76"
    with pytest.raises(TargetStringError, match="aarch64"):
        parse_machine("llvm -mtriple=riscv64-linux-gnu")


@pytest.mark.parametrize("target", ["llvm -mtriple=aarch64-linux-gnu", "raspberry-pi-5"])
def test_build_emits_neon_aarch64_objects(target):
    rt = engine.build(mm_relu_neon(), target=target)
    assert isinstance(rt, CrossModule)
    assert rt.names() == ["mm_relu"]
    # the kernel and its parallel loop body, each an AArch64 ELF object
    assert len(rt.objects) == 2
    assert all(_elf_machine(o) == EM_AARCH64 for o in rt.objects)
    asm = rt.get_source("asm")
    assert "fmla\tv" in asm and ".4s" in asm          # NEON fused multiply-add, 4 lanes
    assert "engine_parallel_launch" in asm
    assert "aarch64" in rt.get_source("ll")
    spec = [(s.name, s.shape, s.written) for s in rt["mm_relu"].specs]
    assert spec == [("A", (32, 32), False), ("B", (32, 32), False), ("C", (32, 32), True)]


def test_cross_kernel_is_not_called_here():
    rt = engine.build(mm_relu_neon(8), target="llvm -mtriple=aarch64-linux-gnu")
    with pytest.raises(BuildError, match="qemu-aarch64"):
        rt["mm_relu"]()


def test_unknown_architecture_is_refused_with_a_sentence():
    with pytest.raises(BuildError, match="compiles for this CPU and for aarch64"):
        engine.build(workloads.get("vector_add", n=8), target="llvm -mtriple=riscv64-linux-gnu")
