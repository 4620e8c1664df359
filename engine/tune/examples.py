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
    """Sampled tiles for i, j and k; ReLU fused per tile; vectorized, unrolled, parallel.

    The loop nest is a register-blocked matmul (``i_0 j_0 k_0 i_1 j_1 k_1 i_2 j_2``): the
    innermost ``i_2 x j_2`` block of ``Y`` (at most 8 rows, unrolled, by at most 32
    columns, vectorized) is what stays in registers across ``k_1``. The ReLU of each tile
    is vectorized by the same ``j_2`` (the sampled factor itself is passed to ``split``, so
    a mutation of ``j``'s tiles carries over to it). The course's listing
    (:func:`stochastic_schedule_mm`) samples only ``j``'s two factors; this one samples
    what MetaSchedule's multi-level tiling would, on the same loops.
    """
    block_Y = sch.get_block("Y", "mm_relu")
    i, j, k = sch.get_loops(block_Y)
    i_0, i_1, i_2 = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=8))
    j_factors = sch.sample_perfect_tile(j, n=3, max_innermost_factor=32)
    j_0, j_1, j_2 = sch.split(j, factors=j_factors)
    k_0, k_1 = sch.split(k, factors=sch.sample_perfect_tile(k, n=2, max_innermost_factor=64))
    sch.reorder(i_0, j_0, k_0, i_1, j_1, k_1, i_2, j_2)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j_0)
    sch.vectorize(j_2)
    sch.unroll(i_2)
    sch.parallel(i_0)
    # the ReLU's tile as one loop cut into j_2-wide vectors (two nested constant loops
    # here, at j_0 = 1, make LLVM unroll the tile's 512-column rows: seconds of compile)
    c_tile = sch.fuse(*sch.get_loops(block_C)[-2:])
    _, c_v = sch.split(c_tile, factors=[None, j_factors[2]])
    sch.vectorize(c_v)
    sch.decompose_reduction(block_Y, k_0)
