"""fuse writes TVM's bindings: a unit loop binds 0, the outermost ``fused // stride``, the
others ``fused % (stride * extent) // stride``, simplified with the fused loop's range (so
``n_co_fused // 16`` is 0 and ``n_co_fused % 16`` is ``n_co_fused``). The expected lines
are what Apache TVM 0.27 prints for the same fuse (its names are ``v_i0`` for our ``vi0``)."""
import re

import numpy as np
import pytest

import engine
from engine import te


def _bindings(sch):
    return dict(re.findall(r"(\w+) = T\.axis\.\w+\(\d+, (.+)\)", sch.mod.script()))


def _fused(shape, *groups):
    a = te.placeholder(shape, name="A")
    b = te.compute(shape, lambda *ix: a(*ix) * 2.0, name="B")
    sch = engine.Schedule(te.create_prim_func([a, b]))
    loops = sch.get_loops(sch.get_block("B"))
    for g in groups:
        sch.fuse(*[loops[i] for i in g])
    return sch


# (shape, fused loops) -> the bindings TVM 0.27 prints
TVM_PRINTS = [
    ((1, 16, 4, 4), [(0, 1)], {"vi0": "0", "vi1": "i0_i1_fused", "vi2": "i2", "vi3": "i3"}),
    ((1, 16, 4, 4), [(0, 1, 2)], {"vi0": "0", "vi1": "i0_i1_i2_fused // 4",
                                  "vi2": "i0_i1_i2_fused % 4"}),
    ((16, 1, 4, 4), [(1, 2)], {"vi0": "i0", "vi1": "0", "vi2": "i1_i2_fused"}),
    ((4, 1, 1, 4), [(1, 2)], {"vi1": "0", "vi2": "0"}),
    ((4, 1, 1, 4), [(0, 1, 2, 3)], {"vi0": "i0_i1_i2_i3_fused // 4", "vi1": "0", "vi2": "0",
                                    "vi3": "i0_i1_i2_i3_fused % 4"}),
    ((1, 1, 8), [(0, 1, 2)], {"vi0": "0", "vi1": "0", "vi2": "i0_i1_i2_fused"}),
    ((8, 1), [(0, 1)], {"vi0": "i0_i1_fused", "vi1": "0"}),
    ((8, 4, 2), [(0, 1, 2)], {"vi0": "i0_i1_i2_fused // 8", "vi1": "i0_i1_i2_fused % 8 // 2",
                              "vi2": "i0_i1_i2_fused % 2"}),
    ((8, 4, 2), [(1, 2)], {"vi1": "i1_i2_fused // 2", "vi2": "i1_i2_fused % 2"}),
]


@pytest.mark.parametrize("shape,groups,expected", TVM_PRINTS)
def test_fuse_bindings_print_as_tvm(shape, groups, expected):
    sch = _fused(shape, *groups)
    got = _bindings(sch)
    assert {k: got[k] for k in expected} == expected
    a = np.random.default_rng(0).standard_normal(shape).astype("float32")
    out = np.zeros(shape, "float32")
    engine.build(sch.mod)["main" if "main" in sch.mod else next(iter(sch.mod))](a, out)
    np.testing.assert_allclose(out, a * 2)


def test_fusing_the_unit_batch_loop_of_conv2d_prints_and_lowers_simply():
    sch = engine.Schedule(engine.workloads.get("conv2d", size=8))
    n, co, *_ = sch.get_loops(sch.get_block("conv"))
    sch.parallel(sch.fuse(n, co))
    got = _bindings(sch)
    assert got["vn"] == "0" and got["vco"] == "n_co_fused"
    from engine.lower import lower
    lowered = lower(sch.mod["conv2d"]).script()
    assert "n_co_fused //" not in lowered and "n_co_fused %" not in lowered
    args = engine.workloads.random_args("conv2d", size=8)
    engine.build(sch.mod)["conv2d"](*args)
    ref = engine.workloads.reference("conv2d", size=8)(*args[:2])
    np.testing.assert_allclose(args[2], ref, rtol=1e-4, atol=1e-4)
