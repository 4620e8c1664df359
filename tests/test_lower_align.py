"""storage_align in engine.lower: the ``buffer_dim_align`` block annotation pads the strides
of the (compacted) buffer it names; results stay correct."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import collect
from engine.ir.stmt import Allocate
from engine.lower import BuildError, lower
from engine.lower.compact import aligned_strides
from engine.schedule.primitives.storage import aligned_strides as schedule_strides
from engine.script import parse
from test_schedule_support import SMALL, fresh, run_and_check


def alloc_sizes(func) -> dict:
    return {a.buffer.name: a.buffer.shape[0].value for a in collect(lower(func).body, Allocate)}


def test_stride_formula():
    assert aligned_strides((16, 16), {0: (16, 1)}) == [17, 1]
    assert aligned_strides((4, 6, 5), {1: (8, 0)}) == [48, 8, 1]
    assert aligned_strides((4, 6, 5), {0: (16, 3), 1: (8, 0)}) == [51, 8, 1]
    assert aligned_strides((3, 5), {1: (4, 2)}) == [10, 2]  # innermost aligned too
    for shape, al in [((7, 9), {0: (4, 1)}), ((2, 3, 4), {0: (8, 5), 2: (2, 1)})]:
        assert aligned_strides(shape, al) == schedule_strides(
            shape, [(a, f, o) for a, (f, o) in al.items()])


def test_cache_read_rows_padded_in_lowered_ir():
    sch = fresh("matmul")  # n = 16
    bg = sch.cache_read(sch.get_block("C"), 1, "global")
    sch.storage_align(bg, 0, axis=0, factor=16, offset=1)
    f = sch.mod["matmul"]
    assert alloc_sizes(f) == {"B_global": 15 * 17 + 16}
    text = lower(f).script()
    assert "B_global[v0 * 17" in text or "* 17" in text  # rows 17 elements apart
    run_and_check(sch.mod, "matmul", SMALL["matmul"])


def test_align_applies_to_the_compacted_tile():
    sch = engine.Schedule(engine.workloads.get("matmul", n=32))
    c = sch.get_block("C")
    cl = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(cl, j0)
    sch.storage_align(c, 0, axis=0, factor=16, offset=4)
    # the 4x8 tile, rows 20 elements apart (8 -> 20: 20 % 16 == 4)
    assert alloc_sizes(sch.mod["matmul"]) == {"C_local": 3 * 20 + 8}
    run_and_check(sch.mod, "matmul", {"n": 32})


@pytest.mark.parametrize("axis,factor,offset", [(0, 4, 1), (1, 8, 3), (2, 2, 1), (0, 32, 0)])
def test_three_dim_buffer_aligned_and_correct(axis, factor, offset):
    text = f'''
@T.prim_func
def f(A: T.Buffer((3, 5, 6), "float32"), C: T.Buffer((3, 5, 6), "float32")):
    t = T.alloc_buffer((3, 5, 6))
    for i, j, k in T.grid(3, 5, 6):
        with T.block("P"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            T.reads(A[vi, vj, vk])
            T.writes(t[vi, vj, vk])
            T.block_attr({{"buffer_dim_align": [[0, {axis}, {factor}, {offset}]]}})
            t[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
    for i, j, k in T.grid(3, 5, 6):
        with T.block("Q"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            C[vi, vj, vk] = t[vi, vj, vk] + T.float32(1)
'''
    f = parse(text)["f"]
    st = aligned_strides((3, 5, 6), {axis: (factor, offset)})
    assert st[axis] % factor == offset
    assert alloc_sizes(f) == {"t": 1 + sum((n - 1) * s for n, s in zip((3, 5, 6), st))}
    a = np.random.rand(3, 5, 6).astype("float32")
    c = np.zeros_like(a)
    engine.build(f)["f"](a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("ann,msg", [
    ("[[0, 0, 16]]", "four integers"),
    ("[[3, 0, 16, 1]]", "writes 1 buffer"),
    ("[[0, 5, 16, 1]]", "not a dimension"),
    ("[[0, 0, 4, 4]]", "0 <= offset < factor"),
])
def test_malformed_annotation_is_a_clear_build_error(ann, msg):
    text = f'''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    t = T.alloc_buffer((4, 4))
    for i, j in T.grid(4, 4):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(t[vi, vj])
            T.block_attr({{"buffer_dim_align": {ann}}})
            t[vi, vj] = A[vi, vj]
    for i, j in T.grid(4, 4):
        with T.block("Q"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = t[vi, vj]
'''
    with pytest.raises(BuildError, match=msg):
        lower(parse(text)["f"])
