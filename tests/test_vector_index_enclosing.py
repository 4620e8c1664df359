"""Vector index folds after vectorizing: packed layouts, and ranges of enclosing loops."""
import numpy as np
import pytest

import engine
from engine.ir import BufferStore, collect
from engine.ir import expr as E
from engine.lower import lower


def _packed(n: int, panel: int, mid: int, lanes: int):
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    blk = sch.get_block("C", func_name="matmul")
    pack = sch.cache_read(blk, 1, "global")
    sch.transform_layout(pack, ("write", 0), f"lambda k, j: (j // {panel}, k, j % {panel})")
    _, j = sch.get_loops(pack)
    _, _, j2 = sch.split(j, factors=[None, mid, lanes])
    sch.vectorize(j2)
    return sch


def _packed_store(sch):
    lf = lower(sch.mod["matmul"])
    return [st for st in collect(lf.body, BufferStore) if st.buffer.name == "B_global"][0]


@pytest.mark.parametrize("panel, mid, lanes", [(64, 4, 4), (48, 2, 8), (64, 2, 4), (48, 3, 16)])
def test_panel_index_proved_with_the_middle_loop_range(panel, mid, lanes):
    """j = j0 * (mid * lanes) + j1 * lanes + j2, j2 vectorized: j0 * (mid * lanes) crosses
    panels, so nothing folds before vectorizing; afterwards the base is a multiple of
    lanes and lanes divides the panel, so the vector stays in one panel: one contiguous
    store, and the packed B is right."""
    n = 2 * panel
    sch = _packed(n, panel, mid, lanes)
    idx = _packed_store(sch).indices[0]
    assert isinstance(idx, E.Ramp) and E.as_const_int(idx.stride) == 1
    assert not collect(idx, (E.FloorDiv, E.FloorMod)) or \
        all(E.lanes_of(x.dtype) == 1 for x in collect(idx, (E.FloorDiv, E.FloorMod)))
    a, b, c = [np.random.randint(-4, 5, (n, n)).astype("float32") for _ in range(3)]
    engine.build(sch.mod)["matmul"](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_a_vector_that_crosses_a_panel_is_left_alone():
    """panel 40 with 16-lane vectors: lanes 32..47 straddle 40, no fold, still correct."""
    sch = engine.Schedule(engine.workloads.get("matmul", n=80))
    blk = sch.get_block("C", func_name="matmul")
    pack = sch.cache_read(blk, 1, "global")
    sch.transform_layout(pack, ("write", 0), "lambda k, j: (j // 40, k, j % 40)")
    _, j = sch.get_loops(pack)
    _, j1 = sch.split(j, factors=[None, 16])
    sch.vectorize(j1)
    idx = _packed_store(sch).indices[0]
    assert any(E.lanes_of(x.dtype) > 1 for x in collect(idx, (E.FloorDiv, E.FloorMod)))
    a, b, c = [np.random.randint(-4, 5, (80, 80)).astype("float32") for _ in range(3)]
    engine.build(sch.mod)["matmul"](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_legalize_passes_enclosing_loop_ranges_to_the_vector_folds():
    """for y in range(3): for v in vectorized(4): Out[y * 4 + v] = In[(y + v) // 8]:
    Ramp(y, 1, 4) // 8 is Broadcast(0) only because y < 3 (the enclosing loop's range)."""
    from engine.ir import Buffer, BufferStore, For, ForKind, Var
    from engine.lower.legalize import legalize_loops
    out, inp = Buffer("Out", (12,), "float32"), Buffer("In", (8,), "float32")
    y, v = Var("y"), Var("v")
    i32 = lambda c: E.IntImm("int32", c)  # noqa: E731
    store = BufferStore(out, inp[E.FloorDiv(y + v, i32(8))], (y * i32(4) + v,))
    body = For(y, i32(0), i32(3), ForKind.SERIAL,
               For(v, i32(0), i32(4), ForKind.VECTORIZED, store))
    got = legalize_loops(body)
    st = collect(got, BufferStore)[0]
    idx = st.value.indices[0]
    assert not collect(idx, (E.FloorDiv, E.FloorMod)), idx
    # the same loop with an unknown outer range is left alone (still a vector division)
    n = Var("n")
    body2 = For(y, i32(0), n, ForKind.SERIAL,
                For(v, i32(0), i32(4), ForKind.VECTORIZED, store))
    st2 = collect(legalize_loops(body2), BufferStore)[0]
    assert collect(st2.value, (E.FloorDiv,))
