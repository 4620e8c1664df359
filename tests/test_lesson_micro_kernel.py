"""Lesson 08 (a BLAS-style micro-kernel) replays the ``matmul-best`` preset step by step.

Played to the end, the lesson must give exactly the preset's program — at its small
``test_params`` (where it is also compiled and compared with numpy) and at its own
n = 1024 (scheduling only: nothing is compiled or run at that size here). The claims its
text makes about the engine (packed layout, the refused parallel reduction loop, the
accumulators leaving memory once the initialisation is separated) are checked as well.
"""
import re

import numpy as np
import pytest

import engine
from engine import lessons, presets
from engine.lessons import match_nest, nest_lines
from engine.presets.library import register_block
from asm_helpers import fma_loops, vector_registers

#: the lesson's steps are the preset's sizes for AVX-512 (16 lanes, 32 registers); on
#: another ISA the preset sizes itself for that one (engine.presets.library.register_block)
pytestmark = pytest.mark.skipif(register_block() != (16, 4, 4),
                                reason="the lesson's numbers are the preset's on AVX-512")

LID = "08_micro_kernel"
PRESET = "matmul-best"


@pytest.fixture(scope="module")
def les():
    return lessons.get(LID)


def _kinds(trace) -> list[str]:
    """The trace's instruction kinds without the lookups (get_block, get_loops)."""
    return [inst[0] for inst in trace.as_json()["insts"]
            if inst[0] not in ("GetBlock", "GetLoops", "GetChildBlocks", "EnterPostproc")]


def test_lesson_is_shipped_after_the_rfactor_lesson(les):
    ids = lessons.names()
    assert ids.index(LID) == ids.index("07_rfactor") + 1
    assert les.order == 8 and les.workload == "matmul"
    assert les.params == presets.info(PRESET).params == {"n": 1024}


def test_test_params_keep_the_presets_structure(les):
    # the preset clamps its factors to the loop extents (_fit): at the lesson's test size
    # they must still be the ones of n = 1024, so the small lesson is the same schedule
    small = presets.info(PRESET).trace(**les.test_params).as_python()
    big = presets.info(PRESET).trace(n=1024).as_python()
    assert small == big
    assert "factors=[None, 1, 4, 16]" in big and "lambda k, j: (j // 64, k, j % 64)" in big


def test_played_to_the_end_it_is_the_preset_at_test_params(les):
    sch = les.schedule_at(len(les.steps), les.test_params)
    want = presets.get(PRESET, **les.test_params)
    assert engine.structural_equal(sch.mod, want.mod)
    assert sch.mod.script() == want.mod.script()
    # and step by step in the preset's order: one lesson action per preset instruction
    assert _kinds(sch.trace) == _kinds(want.trace)
    actions = [s.action["primitive"] for s in les.steps if s.action]
    assert len(actions) == len(_kinds(want.trace)) == 14


def test_at_n1024_the_lesson_schedules_to_the_preset_without_compiling(les):
    mods = les.modules()                       # n = 1024: scheduling only
    assert engine.structural_equal(mods[-1], presets.get(PRESET).mod)
    fn = mods[-1]["matmul"]
    alloc = {b.name: b.const_shape() for b in fn.body.block.alloc_buffers}
    assert alloc == {"B_global": (16, 1024, 64)}   # 16 contiguous 1024 x 64 panels
    # the expect patterns hold at the presentation size too, not only at test_params
    for k, step in enumerate(les.steps):
        if step.expect:
            assert match_nest(mods[k + 1], step.expect, les.func), (
                f"step {k}: " + "\n".join(nest_lines(mods[k + 1])))
    lines = [ln.strip() for ln in nest_lines(mods[-1])]
    # the text's figures: 32 tile rows in parallel, 8 panels of k, 64-column tiles
    assert "for i_0 in parallel(32)" in lines
    assert "for k_0 in serial(8)" in lines and "for j_0 in serial(16)" in lines


def test_compiled_lesson_matches_numpy_at_test_params(les):
    n = les.test_params["n"]
    mod = les.schedule_at(len(les.steps), les.test_params).mod
    rt = engine.build(mod)
    rng = np.random.default_rng(8)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.full((n, n), np.nan, dtype="float32")   # the kernel must zero C itself
    rt["matmul"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_questions_have_their_answer_among_the_choices(les):
    questions = [s.question for s in les.steps if s.question]
    assert 2 <= len(questions) <= 3
    for q in questions:
        assert q.choices and q.answer in q.choices and len(set(q.choices)) == len(q.choices)
        assert q.explanation


def test_parallel_on_the_reduction_panel_loop_is_refused(les):
    # the answer to the "why not parallel k_0?" question is what the engine says
    k = next(i for i, s in enumerate(les.steps) if s.action and s.action["primitive"] == "parallel"
             and s.action["loop"] == "i0")
    sch = les.schedule_at(k, les.test_params)
    loops = sch.get_loops(sch.get_block("C", func_name="matmul"))
    assert sch.get(loops[2]).loop_var.name == "k_0"
    with pytest.raises(engine.ScheduleError, match="reduction"):
        sch.parallel(loops[2])


def test_decompose_reduction_lets_the_accumulators_stay_in_registers(les):
    """The lesson says: after decompose_reduction the innermost loop is loads of B, broadcasts
    and FMAs, with no store (the 16 accumulators live in registers)."""
    mods = les.modules(les.test_params)
    k = next(i for i, s in enumerate(les.steps)
             if s.action and s.action["primitive"] == "decompose_reduction")
    after = engine.build(mods[k + 1]).get_source("asm")
    if "vfmadd" not in after:
        pytest.skip("this CPU's assembly has no vfmadd (not x86 with FMA)")
    if vector_registers() != (32, 16):
        pytest.skip("the lesson's register block (16 vectors of 16 floats) is written for "
                    "AVX-512's 32 registers; this CPU has no AVX-512")
    assert any(st == 0 and f >= 16 for f, st in fma_loops(after)), fma_loops(after)


def test_last_step_names_the_preset_without_machine_figures(les):
    last = les.steps[-1]
    assert last.action is None and PRESET in last.text and "BLAS" in last.text
    assert not re.search(r"GFLOP", " ".join(s.text + s.note for s in les.steps), re.I)


def test_lesson_is_listed_by_the_web_app():
    from inline_service import make_test_app
    client = make_test_app({"PREFETCH_MEASUREMENTS": False}).test_client()
    page = client.get("/lessons").get_data(as_text=True)
    assert f'href="/lessons/{LID}"' in page
