"""The course's TensorIR walk-through (seeds/004), step by step, through our API.

After every primitive the printed loop structure must be the one in the course notes,
and the compiled program must match numpy.
"""
from __future__ import annotations

import numpy as np

import engine
from engine.schedule import Schedule

from test_script_irgen import DECOMPOSED_LOOPS, RCA_LOOPS

STEP_SPLIT = """
        for i, j_0, j_1, k in T.grid(128, 32, 4, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(Y[vi, vj])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(Y[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""

STEP_REORDER = STEP_SPLIT.replace("for i, j_0, j_1, k in T.grid(128, 32, 4, 128):",
                                  "for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):")

STEP_RCA = RCA_LOOPS

STEP_DECOMPOSE = DECOMPOSED_LOOPS


def _loops_part(mod) -> str:
    lines = mod.script().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("for "))
    return "\n".join(ln.rstrip() for ln in lines[start:]).strip()


def _check(mod):
    a = np.random.default_rng(0).uniform(-1, 1, (128, 128)).astype("float32")
    b = np.random.default_rng(1).uniform(-1, 1, (128, 128)).astype("float32")
    c = np.zeros((128, 128), "float32")
    engine.build(mod)["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_course_walkthrough_verbatim():
    mod = engine.workloads.get("mm_relu", n=128)
    sch = Schedule(mod, workload=("mm_relu", {"n": 128}))
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    assert _loops_part(sch.mod) == STEP_SPLIT.strip()
    _check(sch.mod)
    sch.reorder(j0, k, j1)
    assert _loops_part(sch.mod) == STEP_REORDER.strip()
    _check(sch.mod)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    assert _loops_part(sch.mod) == STEP_RCA.strip()
    _check(sch.mod)
    init = sch.decompose_reduction(block_Y, k)
    assert _loops_part(sch.mod) == STEP_DECOMPOSE.strip()
    _check(sch.mod)
    # handles follow the blocks: block_Y is now the update block
    assert sch.get(block_Y).name_hint == "Y_update"
    assert sch.get(init).name_hint == "Y_init"
    loops = [sch.get(x) for x in sch.get_loops(block_Y)]
    assert [lp.loop_var.name for lp in loops] == ["i", "j_0", "k", "j_1"]
    # the printed program parses back to the same module
    assert engine.structural_equal(engine.parse(sch.mod.script()), sch.mod)


def test_course_trace_python_lines():
    sch = Schedule(engine.workloads.get("mm_relu", n=32), workload=("mm_relu", {"n": 32}))
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(block_Y, k)
    assert sch.trace.as_python().splitlines() == [
        'b0 = sch.get_block("Y", func_name="mm_relu")',
        "l1, l2, l3 = sch.get_loops(b0)",
        "l4, l5 = sch.split(l2, factors=[None, 4])",
        "sch.reorder(l4, l3, l5)",
        'b6 = sch.get_block("C", func_name="mm_relu")',
        "sch.reverse_compute_at(b6, l4)",
        "b7 = sch.decompose_reduction(b0, l3)",
    ]
    tvm = sch.trace.export("tvm")
    assert "def apply_trace(sch: tvm.s_tir.Schedule) -> None:" in tvm
    assert 'b0 = sch.get_sblock(name="Y", func_name="mm_relu")' in tvm
    assert "sch.reverse_compute_at(block=b6, loop=l4, preserve_unit_loops=False, index=-1)" in tvm
    course = sch.trace.export("course")
    assert "def apply_trace(sch: tvm.tir.Schedule) -> None:" in course
    assert 'b0 = sch.get_block(name="Y", func_name="mm_relu")' in course
    assert "index=" not in course
    for text in (tvm, course):
        compile(text, "<export>", "exec")  # valid Python
