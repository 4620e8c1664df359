"""The register-blocked micro-kernel (T.unroll rows x vectors) keeps its accumulators in
registers across the reduction loop, with or without parallel.

matmul-best's block is 4 rows x 4 vectors of 16 floats: 16 AVX-512 registers of 32. With
AVX2 the same block would need 32 of the 16 ymm registers, so there the block is 4 rows x 1
vector of 16 floats (8 ymm accumulators), which fits."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from asm_helpers import fma_loops, vector_registers

REGISTERS, LANES = vector_registers()
#: vectors of 16 floats per row of the register block: 4 where 16 such accumulators fit
VECTORS = 4 if REGISTERS * LANES >= 2 * 4 * 4 * 16 else 1


def micro_kernel(n: int, parallel: bool):
    """matmul-best's schedule (B packed into 64-wide panels; 32x64 tiles, k panels of
    128; 4 rows x VECTORS vectors of 16 accumulators), with or without ``parallel``."""
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    blk = sch.get_block("C", func_name="matmul")
    pack = sch.cache_read(blk, 1, "global")
    sch.transform_layout(pack, ("write", 0), "lambda k, j: (j // 64, k, j % 64)")
    _, pj = sch.get_loops(pack)
    sch.vectorize(sch.split(pj, factors=[None, 4, 16])[2])
    i, j, k = sch.get_loops(blk)
    k0, k1 = sch.split(k, factors=[None, 128])
    i0, i1, i2 = sch.split(i, factors=[None, 8, 4])
    j0, j1, j2, j3 = sch.split(j, factors=[None, 64 // (16 * VECTORS), VECTORS, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1, i2, j2, j3)
    sch.vectorize(j3)
    sch.unroll(j2)
    sch.unroll(i2)
    if parallel:
        sch.parallel(i0)
    sch.decompose_reduction(blk, k0)
    return sch


@pytest.mark.parametrize("parallel", [False, True])
def test_unrolled_micro_kernel_keeps_accumulators_in_registers(parallel):
    small = engine.build(micro_kernel(128, parallel).mod, cache=False)
    a, b, c = [np.random.rand(128, 128).astype("float32") for _ in range(3)]
    small["matmul"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # at n=1024 (compiled, not run): with the unrolling left to LLVM, a single O3 run left
    # the serial kernel storing its 16 accumulators on every k (100 instead of 240 GFLOP/s)
    asm = engine.build(micro_kernel(1024, parallel).mod, cache=False).get_source("asm")
    if "vfmadd" not in asm:
        pytest.skip("this CPU's assembly has no vfmadd (not x86 with FMA)")
    loops = fma_loops(asm)
    # the k_1 loop: 4 rows x VECTORS vectors of FMAs per k (or a multiple, if LLVM unrolled
    # k_1), and no store: the accumulators live in registers across it
    fmas_per_k = 4 * VECTORS * (16 // LANES)
    assert any(f >= fmas_per_k and st == 0 for f, st in loops), loops
