"""Search spaces written as the course writes them (a Python function over a schedule).

* :func:`stochastic_schedule_mm` — the course's own (its automatic-optimisation chapter),
  on mm_relu's matmul block ``Y``: only the column loop's two factors are sampled;
* :func:`stochastic_mm_relu` — the same idea carried through: tiles of all three loops
  sampled, the ReLU moved into each tile, the inner columns vectorized, the tile rows in
  parallel. Still a handful of lines, but its space holds fast programs.
"""
from __future__ import annotations

__all__ = ["stochastic_schedule_mm", "stochastic_mm_relu"]


def stochastic_schedule_mm(sch) -> None:
    """The course's stochastic schedule (block ``Y`` of mm_relu)."""
    block_Y = sch.get_block("Y", "mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j_factors = sch.sample_perfect_tile(j, n=2)
    j_0, j_1 = sch.split(j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_Y, k)


def stochastic_mm_relu(sch) -> None:
    """Sampled tiles for i, j and k; ReLU fused per tile; vectorized, unrolled, parallel."""
    block_Y = sch.get_block("Y", "mm_relu")
    i, j, k = sch.get_loops(block_Y)
    i_0, i_1, i_2 = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=8))
    j_0, j_1, j_2 = sch.split(j, factors=sch.sample_perfect_tile(j, n=3,
                                                                 max_innermost_factor=64))
    k_0, k_1 = sch.split(k, factors=sch.sample_perfect_tile(k, n=2, max_innermost_factor=64))
    sch.reorder(i_0, j_0, k_0, i_1, j_1, k_1, i_2, j_2)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j_0)
    sch.vectorize(j_2)
    sch.unroll(i_2)
    sch.parallel(i_0)
    block_C = sch.get_block("C", "mm_relu")
    sch.vectorize(sch.get_loops(block_C)[-1])
    sch.decompose_reduction(block_Y, k_0)
