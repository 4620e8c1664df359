"""transform_block_layout (and its index map's inverse): compiled results (and the
interpreter's) against numpy, refusals that leave the schedule untouched, traces (JSON,
token, Python, TVM export re-run on our API, TVM's JSON imported)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from engine.ir import expr as E
from engine.schedule.primitives.index_map_check import IndexMapError
from engine.schedule.primitives.index_map_inverse import invert
from engine.schedule.primitives.layout import parse_index_map
from test_schedule_blockize import check_traces
from test_schedule_support import SMALL, fresh, refused, run_and_check

MAPS = [
    ("add", None, "lambda i, j: (j, i)", "for ax0, ax1 in T.grid(8, 12):"),
    ("add", None, "lambda i, j: (i * 8 + j,)", "for ax0 in T.serial(96):"),
    ("matmul", "C", "lambda i, j, k: (j // 4, i, k, j % 4)",
     'v0, v1, v2, v3 = T.axis.remap("SSRS", [ax0, ax1, ax2, ax3])'),
    ("matmul", "C", "lambda i, j, k: (i * 16 + j, k)", 'T.axis.remap("SR", [ax0, ax1])'),
    ("mm_relu", "C", "lambda i, j: ((i * 16 + j) // 32, (i * 16 + j) % 32)",
     "C[v0 * 2 + v1 // 16, v1 % 16]"),
]


@pytest.mark.parametrize("name,block,index_map,expect", MAPS)
def test_transform_block_layout_matches_numpy(name, block, index_map, expect, monkeypatch):
    sch = fresh(name)
    blk = sch.get_block(block or sch.index().all_blocks()[0].name_hint)
    sch.transform_block_layout(blk, index_map)
    assert expect in sch.mod.script()
    run_and_check(sch.mod, name, SMALL[name])
    run_and_check(sch.mod, name, SMALL[name], use_build=False)
    check_traces(sch, name, monkeypatch)
    # the loops are new: get_loops names them ax0, ax1, ...
    assert sch.get(sch.get_loops(blk)[0]).loop_var.name == "ax0"


def test_transform_block_layout_takes_a_callable_and_a_later_split():
    sch = fresh("add")
    blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
    sch.transform_block_layout(blk, lambda i, j: (j, i))
    ax0, ax1 = sch.get_loops(blk)
    sch.split(ax1, [None, 4])
    run_and_check(sch.mod, "add", SMALL["add"])
    assert 'sch.transform_block_layout(b0, "lambda i, j: (j, i)")' in sch.trace.as_python()


def test_transform_block_layout_refusals_leave_the_schedule_untouched():
    sch = fresh("matmul")
    c = sch.get_block("C")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (i, i, k)"),
            "not bijective", "repeats")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (i, k)"),
            "not bijective", "covers 1 of the 16 values of axis j")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (i * 16 + k, j)"),
            "mixes spatial and reduction")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j: (j, i)"),
            "takes 2 index(es) but the block has 3 axes")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (i // 3, j, k)"),
            "not bijective", "3 does not divide")
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (i + 1, j, k)"),
            "not bijective")
    refused(sch, lambda: sch.transform_block_layout(c, "i, j"), "lambda")
    i, j, k = sch.get_loops(c)
    sch.split(j, [None, 4])
    refused(sch, lambda: sch.transform_block_layout(c, "lambda i, j, k: (j, i, k)"),
            "bindings are not the loops above it")
    sch = fresh("mm_relu")
    y, cb = sch.get_block("Y"), sch.get_block("C")
    sch.reverse_compute_at(cb, sch.get_loops(y)[1])
    refused(sch, lambda: sch.transform_block_layout(y, "lambda i, j, k: (j, i, k)"),
            "holds other blocks")


@given(st.sampled_from([(4, 6), (8, 2), (3, 5), (6, 4)]), st.integers(0, 3))
def test_inverse_of_accepted_maps_undoes_them(shape, which):
    """Every accepted map's inverse sends each image point back to its source."""
    n0, n1 = shape
    texts = ["lambda i, j: (j, i)", f"lambda i, j: (i * {n1} + j,)",
             f"lambda i, j: (j, i // 2, i % 2)", f"lambda i, j: ((i * {n1} + j) % {n1}, i)"]
    params, exprs = parse_index_map(texts[which])
    try:
        new_shape, build = invert(params, exprs, [n0, n1])
    except IndexMapError:
        assert which == 2 and n0 % 2
        return
    new_vars = [E.Var(f"n{k}") for k in range(len(new_shape))]
    olds = build(new_vars)
    from engine.schedule.primitives.index_map_check import _np_eval
    import numpy as np
    for a in range(n0):
        for b in range(n1):
            env = {params[0]: np.int64(a), params[1]: np.int64(b)}
            image = [int(_np_eval(x, env)) for x in exprs]
            assert all(0 <= v < s for v, s in zip(image, new_shape))
            back = [int(_np_eval(o, dict(zip(new_vars, map(np.int64, image))))) for o in olds]
            assert back == [a, b]


_CONV_NHWC = """
@T.prim_func
def main(X: T.Buffer((1, 6, 6, 2), "float32"), K: T.Buffer((3, 3, 2, 4), "float32"),
         Y: T.Buffer((1, 4, 4, 4), "float32")):
    for n, h, w, co, rh, rw, rc in T.grid(1, 4, 4, 4, 3, 3, 2):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            with T.init():
                Y[vn, vh, vw, vco] = T.float32(0)
            Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + X[vn, vh + vrh, vw + vrw, vrc] * K[vrh, vrw, vrc, vco]
"""


def test_fused_axes_with_nested_scales_and_a_unit_axis():
    """TVM's test_transform_block_layout_conv2d_nhwc: ``n * 4 * 4 + h * 4 + w`` (n of
    extent 1) and ``rh * 3 * 2 + rw * 2 + rc`` are fusions — the constant factors multiply
    through the nested products; the inverse is read as TVM writes it (``v % 6 // 2``)."""
    import engine
    from semantics import assert_same_meaning
    mod = engine.parse(_CONV_NHWC)
    sch = engine.Schedule(mod)
    sch.transform_block_layout(sch.get_block("conv"), lambda n, h, w, co, rh, rw, rc: (
        n * 4 * 4 + h * 4 + w, co, rh * 3 * 2 + rw * 2 + rc))
    text = sch.mod.script()
    assert "for ax0, ax1, ax2 in T.grid(16, 4, 18):" in text
    assert "X[0, v0 // 4 + v2 // 6, v0 % 4 + v2 % 6 // 2, v2 % 2]" in text
    assert "K[v2 // 6, v2 % 6 // 2, v2 % 2, v1]" in text
    assert_same_meaning(mod, sch.mod)
    conv = sch.get_block("conv")
    refused(sch, lambda: sch.transform_block_layout(conv, "lambda a, b, c: (a, b * 18 + c)"),
            "mixes spatial and reduction")


def test_unit_axis_kept_and_int64_axes():
    """TVM's test_transform_block_layout_unit_dim (an axis of extent 1 moved, not folded to
    0) and _int64_extent (the new axes and constants in int64)."""
    import engine
    from semantics import assert_same_meaning
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((1, 8), "float32"), B: T.Buffer((1, 8), "float32")):
    for i, j in T.grid(1, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
""")
    sch = engine.Schedule(mod)
    sch.transform_block_layout(sch.get_block("B"), "lambda i, j: (j, i)")
    assert "B[v1, v0] = A[v1, v0] + T.float32(1)" in sch.mod.script()
    assert_same_meaning(mod, sch.mod)
    mod64 = engine.parse("""
@T.prim_func
def main(A: T.Buffer((T.int64(6), T.int64(4)), "float32"),
         B: T.Buffer((T.int64(6), T.int64(4)), "float32")):
    for i, j in T.grid(T.int64(6), T.int64(4)):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
""")
    sch = engine.Schedule(mod64)
    sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i * 4 + j,))
    text = sch.mod.script()
    assert "B[v0 // T.int64(4), v0 % T.int64(4)] = A[v0 // T.int64(4), v0 % T.int64(4)]" \
        in text
    assert "Cast" not in text
    assert_same_meaning(mod64, sch.mod)
