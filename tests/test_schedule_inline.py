"""compute_inline / reverse_compute_inline on small element-wise programs (parsed from
TVMScript), checked against numpy through the compiled code."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.schedule import Schedule, ScheduleError

SRC = '''
# from tvm.script import tir as T
@tvm.script.ir_module
class Module:
    @T.prim_func
    def ew(A: T.Buffer((8, 6), "float32"), C: T.Buffer(CSHAPE, "float32")):
        T.func_attr({"global_symbol": "ew", "tir.noalias": True})
        B = T.alloc_buffer((8, 6))
        for i, j in T.grid(8, 6):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(CGRID):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[BIDX])
                T.writes(C[vi, vj])
                C[vi, vj] = B[BIDX] + T.float32(1)
'''


def program(transposed: bool):
    if transposed:
        src = SRC.replace("CSHAPE", "(6, 8)").replace("CGRID", "6, 8").replace("BIDX", "vj, vi")
    else:
        src = SRC.replace("CSHAPE", "(8, 6)").replace("CGRID", "8, 6").replace("BIDX", "vi, vj")
    return engine.parse(src)


def check(mod, transposed):
    a = np.random.default_rng(0).uniform(-1, 1, (8, 6)).astype("float32")
    c = np.zeros((6, 8) if transposed else (8, 6), "float32")
    engine.build(mod)["ew"](a, c)
    want = a * 2 + 1
    np.testing.assert_allclose(c, want.T if transposed else want, rtol=1e-6)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("prim,block", [("compute_inline", "B"),
                                        ("reverse_compute_inline", "C")])
def test_inline(prim, block, transposed):
    sch = Schedule(program(transposed))
    check(sch.mod, transposed)
    getattr(sch, prim)(sch.get_block(block))
    text = sch.mod.script()
    assert "alloc_buffer" not in text and text.count("T.block(") == 2  # root + one
    check(sch.mod, transposed)
    survivor = "C" if prim == "compute_inline" else "B"
    assert sch.get(sch.get_block(survivor)).name_hint == survivor


def test_inlined_block_handle_is_dead():
    sch = Schedule(program(False))
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    sch.compute_inline(b)
    with pytest.raises(ScheduleError, match=r"block B: this block handle no longer exists "
                                            r"\(it was removed by compute_inline at step 1\)"):
        sch.get(b)
    with pytest.raises(ScheduleError, match="loop handle no longer exists"):
        sch.parallel(i)


def test_inline_refusals():
    sch = Schedule(program(False))
    with pytest.raises(ScheduleError, match="output C"):
        sch.compute_inline(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="exactly one intermediate buffer"):
        sch.reverse_compute_inline(sch.get_block("B"))
    mm = Schedule(engine.workloads.get("mm_relu", n=8))
    with pytest.raises(ScheduleError, match="reduction block"):
        mm.compute_inline(mm.get_block("Y"))
    with pytest.raises(ScheduleError, match="producer Y is a reduction block"):
        mm.reverse_compute_inline(mm.get_block("C"))
