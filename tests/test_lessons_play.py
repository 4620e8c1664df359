"""Every shipped lesson plays end to end in the engine.

For each lesson, at its small ``test_params``: every step applies, the program after every
step compiles and matches numpy, each step's ``expect`` pattern holds, and the effect the
lesson teaches is visible in something deterministic (loop structure, buffer layout,
simulated cache misses) — never in a wall-clock time.
"""
import pytest

import engine
from engine import lessons
from engine.lessons import LessonError, match_nest, nest_lines
from engine.lessons.runner import check_module

LESSONS = lessons.names()


def _mods(les):
    return les.modules(les.test_params)


@pytest.mark.parametrize("lid", LESSONS)
def test_lesson_plays_and_stays_correct(lid):
    les = lessons.get(lid)
    params = les._params(les.test_params)
    mods = _mods(les)
    assert len(mods) == len(les.steps) + 1
    for k, step in enumerate(les.steps):
        after = mods[k + 1]
        if step.action is None:
            assert engine.structural_equal(after, mods[k]), f"{lid} step {k} changed the program"
        else:
            assert not engine.structural_equal(after, mods[k]), \
                f"{lid} step {k} ({step.title}) did not change the program"
        if step.expect:
            assert match_nest(after, step.expect, les.func), (
                f"{lid} step {k}: nest\n" + "\n".join(nest_lines(after, les.func))
                + "\ndoes not match\n" + "\n".join(step.expect))
        if les.target:   # a GPU lesson: the interpreter's meaning (the GPU build and the
            # emulator's race check are in test_lessons_gpu.py)
            assert _interpreted_matches(after, les, params), f"{lid} step {k} ({step.title})"
            continue
        chk = check_module(after, les.workload, params)
        assert chk.correct, f"{lid} step {k} ({step.title}): {chk.message}"


def _interpreted_matches(mod, les, params) -> bool:
    import numpy as np
    args = engine.workloads.random_args(les.workload, **params)
    n_in = engine.workloads.info(les.workload).num_inputs
    want = engine.workloads.reference(les.workload, **params)(*[a.copy() for a in args[:n_in]])
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    engine.interpret(mod, les.func_name(mod), *args)
    return all(np.allclose(got, exp, rtol=1e-4, atol=1e-4)
               for got, exp in zip(args[n_in:], wants))


@pytest.mark.parametrize("lid", LESSONS)
def test_lesson_default_params_replay_and_export(lid):
    # the default (presentation) size replays too, and its trace round-trips via JSON
    les = lessons.get(lid)
    sch = les.schedule_at(len(les.steps))
    trace = engine.Trace.from_json(sch.trace.as_json())
    again = engine.Schedule(engine.workloads.get(les.workload, **les.params),
                            workload=(les.workload, les.params))
    trace.apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)
    assert "sch." in les.python()


def test_check_step_accepts_the_learners_own_step_and_explains_mistakes():
    les = lessons.get("01_tensorir_mm_relu")
    p = les.test_params
    n = p["n"]

    def fresh():
        return engine.Schedule(engine.workloads.get("mm_relu", n=n),
                               workload=("mm_relu", {"n": n}))

    sch = fresh()
    ok, msg = les.check_step(0, sch)          # narrative step: nothing to do
    assert ok, msg
    block = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block)
    ok, msg = les.check_step(1, sch)
    assert not ok and "has not changed yet" in msg and "sch.split(j, factors=[None, 4])" in msg
    j0, j1 = sch.split(j, factors=[None, 4])
    ok, msg = les.check_step(1, sch)
    assert ok and msg.startswith("Correct")
    # a wrong factor: the message says which line of the nest differs and what to call
    wrong = fresh()
    b = wrong.get_block("Y", func_name="mm_relu")
    wrong.split(wrong.get_loops(b)[1], factors=[None, 8])
    ok, msg = les.check_step(1, wrong)
    assert not ok and "serial(4)" in msg and "Try `" in msg
    # the wrong primitive is named
    other = fresh()
    b = other.get_block("Y", func_name="mm_relu")
    lp = other.get_loops(b)
    other.reorder(lp[0], lp[2], lp[1])
    ok, msg = les.check_step(1, other)
    assert not ok and "Your last step was reorder" in msg
    # a learner may reach the same program in their own way: structure is what counts
    sch.reorder(j0, k, j1)
    assert les.check_step(2, sch)[0]
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
    assert les.check_step(3, sch)[0]
    sch.decompose_reduction(block, k)
    ok, msg = les.check_step(4, sch)
    assert ok, msg
    assert les.check_step(5, sch)[0]           # narrative step after the last action
    with pytest.raises(LessonError, match="Schedule or IRModule"):
        les.check_step(1, "not a schedule")


def test_apply_step_matches_schedule_at_and_names_failures():
    les = lessons.get("01_tensorir_mm_relu")
    sch = les.schedule_at(0, les.test_params)
    env = {}
    for k in range(len(les.steps)):
        les.apply_step(sch, k, env)
        assert engine.structural_equal(sch.mod, les.schedule_at(k + 1, les.test_params).mod)
    # applying step 2 (reorder j0, k, j1) to the original program: j0 does not exist
    with pytest.raises(LessonError, match=r"step 2 \(Reorder"):
        les.apply_step(les.schedule_at(0, les.test_params), 2)


def test_lesson1_effect_structure_and_cache():
    """The course's point: j_1 walks B along a row, and C is computed next to Y."""
    les = lessons.get("01_tensorir_mm_relu")
    mods = _mods(les)
    first, last = mods[0], mods[-1]
    lines = [ln.strip() for ln in nest_lines(last)]
    # innermost loop of the update is the 4-wide j_1, and C sits inside j_0
    upd = lines.index("block Y_update")
    assert lines[upd - 1].endswith("serial(4)")
    assert match_nest(last, ["for * in serial(*)", "  for * in serial(4)", "    block Y_init",
                             "  ...", "  for * in serial(4)", "    block C"])
    # the course's size with a fixed, typical L1 (32 KiB, 8-way, 64-byte lines), so the
    # figure does not depend on this machine; the simulation is deterministic
    levels = [{"name": "L1", "size": 32768, "ways": 8, "line": 64}]
    mods = les.modules({"n": 128})
    before = engine.cache.simulate(mods[0], "mm_relu", levels=levels, hardware=False)
    after = engine.cache.simulate(mods[-1], "mm_relu", levels=levels, hardware=False)
    assert before.level("L1").accesses > 0
    # j_1 walks rows of B: about 4x fewer L1 misses (at least 2x asserted)
    assert 2 * after.level("L1").misses < before.level("L1").misses, (
        before.level("L1").misses, after.level("L1").misses)


def test_lesson2_misses_fall_per_level():
    """Interchange cuts L1 misses many times over; the strip loop then cuts L2 misses."""
    les = lessons.get("02_tiling_and_cache")
    mods = les.modules({"n": 256})
    levels = [{"name": "L1", "size": 32768, "ways": 8, "line": 64},
              {"name": "L2", "size": 262144, "ways": 8, "line": 64}]

    def misses(mod):
        rep = engine.cache.simulate(mod, "mm_relu", levels=levels, hardware=False)
        return rep.level("L1").misses, rep.level("L2").misses

    naive, swapped, tiled = misses(mods[0]), misses(mods[2]), misses(mods[4])
    assert 4 * swapped[0] < naive[0], (naive, swapped)       # about 16x in practice
    assert 2 * swapped[1] < naive[1], (naive, swapped)       # about 7x
    assert tiled[1] < swapped[1], (swapped, tiled)           # about 17% fewer L2 misses


def test_lesson3_vector_and_parallel_kinds():
    les = lessons.get("03_vectorize_parallel")
    last = les.modules(les.test_params)[-1]
    kinds = {ln.strip().split(" in ")[1].split("(")[0] for ln in nest_lines(last)
             if ln.strip().startswith("for")}
    assert {"vectorized", "parallel"} <= kinds


def _alloc_names(mod):
    func = mod.functions[0][1]
    return [b.name for b in func.body.block.alloc_buffers]


def test_lesson4_fusion_removes_the_pad_buffer_and_nests_relu():
    les = lessons.get("04_fusion")
    mods = _mods(les)
    assert _alloc_names(mods[0]) == ["pad", "conv"]
    assert _alloc_names(mods[-1]) == ["conv"]
    # one loop nest: relu is inside conv's ow loop, next to the reduction
    top = engine.lessons.loop_nest(mods[-1])
    assert len(top) == 1
    assert match_nest(mods[-1], ["for ow in serial(*)", "  for ci in serial(*)", "    ...",
                                 "  block relu"])
    # the compute_at step recomputes padded rows: 3 rows per output row
    assert match_nest(mods[3], ["for oh in serial(*)", "  for * in serial(*)",
                                "    for * in serial(3)", "      for * in serial(*)",
                                "        block pad"])


@pytest.mark.parametrize("lid", LESSONS)
def test_apply_for_me_on_a_schedule_rebuilt_from_a_link(lid):
    """The web app rebuilds the learner's schedule from a link, then "apply for me":
    names bound by earlier steps (j0, k1, ...) must still resolve, without the handles."""
    les = lessons.get(lid)
    p = les._params(les.test_params)
    mods = _mods(les)
    for k in range(len(les.steps)):
        token = les.trace_at(k, les.test_params).encode()
        sch = engine.Schedule(engine.workloads.get(les.workload, **p),
                              workload=(les.workload, p))
        engine.Trace.decode(token).apply_to_schedule(sch)
        les.apply_step(sch, k)                       # no env: aliases are used
        assert engine.structural_equal(sch.mod, mods[k + 1]), f"{lid} step {k}"


def test_lesson5_row_fusion_halves_the_misses():
    les = lessons.get("05_softmax_reductions")
    mods = les.modules()                              # m = 256, n = 1024: 1 MB per matrix
    levels = [{"name": "L1", "size": 32768, "ways": 8, "line": 64},
              {"name": "L2", "size": 262144, "ways": 8, "line": 64}]
    before = engine.cache.simulate(mods[0], "softmax", levels=levels, hardware=False)
    fused = engine.cache.simulate(mods[4], "softmax", levels=levels, hardware=False)
    for lv in ("L1", "L2"):
        assert 3 * fused.level(lv).misses < 2 * before.level(lv).misses, lv   # about half
    # the exp row is read back from cache: its misses fall to the compulsory ones
    assert fused.per_buffer["T_softmax_exp"][0].misses < \
        before.per_buffer["T_softmax_exp"][0].misses


def test_lesson7_rfactor_makes_the_reduction_vectorizable():
    les = lessons.get("07_rfactor")
    p = les._params(les.test_params)
    # the original k cannot be vectorized: the schedule refuses and says why
    sch = les.schedule_at(0, les.test_params)
    k = sch.get_loops(sch.get_block("B", func_name="sum"))[1]
    with pytest.raises(engine.ScheduleError, match="reduction"):
        sch.vectorize(k)
    mods = _mods(les)
    rf = next(b for b in engine.ir.collect(mods[3]["sum"].body, engine.ir.Block)
              if b.name_hint == "B_rf")
    kinds = [iv.iter_type for iv in rf.iter_vars]
    assert kinds.count(engine.ir.IterType.SPATIAL) == 2   # vi and the new vk_1
    alloc = {b.name: b.const_shape() for b in mods[3]["sum"].body.block.alloc_buffers}
    assert alloc == {"B_rf": (p["m"], 8)}
    assert match_nest(mods[-1], ["for * in vectorized(8)", "  block B_rf_update"])


def test_lesson6_packing_removes_the_conflict_misses():
    les = lessons.get("06_packing")
    mods = les.modules()                               # n = 256
    fn = mods[-1]["matmul"]
    alloc = {b.name: b.const_shape() for b in fn.body.block.alloc_buffers}
    assert alloc == {"B_global": (16, 256, 16)}        # the answer to the step's question
    levels = [{"name": "L1", "size": 32768, "ways": 8, "line": 64}]
    strip = engine.cache.simulate(mods[2], "matmul", levels=levels, hardware=False)
    packed = engine.cache.simulate(mods[4], "matmul", levels=levels, hardware=False)
    # the strip of B now lies in consecutive lines: L1 misses fall more than 5x (~14x)
    assert 5 * packed.level("L1").misses < strip.level("L1").misses
    assert 20 * packed.per_buffer["B_global"][0].misses < strip.per_buffer["B"][0].misses
