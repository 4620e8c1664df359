"""Reading x86 assembly in tests: the loops that do the work."""
from __future__ import annotations

import re


def vector_registers() -> tuple[int, int]:
    """(vector registers, float32 lanes per register) of this machine's CPU as LLVM sees it:
    (32, 16) with AVX-512, (16, 8) with AVX/AVX2, else (16, 4)."""
    from llvmlite import binding as llvm
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 32, 16
    if features.get("avx"):
        return 16, 8
    return 16, 4


def fma_loops(asm: str) -> list[tuple[int, int]]:
    """(FMAs, stores to memory) of every assembly loop (a label with a jump back to it)
    that contains an FMA, module by module (labels are local to a module)."""
    from engine.runtime.module import ASM_UNIT_SEPARATOR
    if ASM_UNIT_SEPARATOR in asm:
        return [loop for part in asm.split(ASM_UNIT_SEPARATOR) for loop in fma_loops(part)]
    lines = asm.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\.LBB\d+_\d+):", line)
        if not m:
            continue
        back = re.compile(r"\bj\w+\s+" + re.escape(m.group(1)) + r"\s*$")
        for j in range(i + 1, len(lines)):
            if back.search(lines[j]):
                body = lines[i:j + 1]
                fmas = sum("vfmadd" in x for x in body)
                stores = sum(bool(re.search(r"\bv?mov\w*\s+%[xyz]mm\d+,\s*-?\w*\(", x))
                             for x in body)
                if fmas:
                    out.append((fmas, stores))
                break
    return out
