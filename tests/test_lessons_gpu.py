"""The GPU chapter's lessons (issue 39): their check kinds validate, and each lesson plays to
completion with every step's checks passing — the IR checks on the program, the result
checks on what a measurement worker answers for it (``measure_gpu_step``: built for the
target, run in the emulator with the race check, compared with numpy, modeled)."""
from __future__ import annotations

import copy

import pytest

from app.service.timing import measure_gpu_step
from engine import lessons
from engine.lessons import LessonError, checks, parse_lesson

GPU_LESSONS = ["gpu_1_vector_add", "gpu_2_window_sum", "gpu_3_gemm_blocking"]

DOC = {
    "format": "schedule-explorer/lesson", "version": 1, "id": "tiny_gpu", "title": "Tiny",
    "workload": {"name": "vector_add", "params": {"n": 256}},
    "target": "cuda -model=a100",
    "steps": [
        {"title": "Split", "text": "Split i.",
         "action": {"primitive": "split", "block": "C", "loop": "i", "factors": [None, 128],
                    "outputs": ["i0", "i1"]}},
        {"title": "Bind", "text": "Bind i0.",
         "action": {"primitive": "bind", "loop": "i0", "thread_axis": "blockIdx.x"},
         "checks": [{"kind": "bound", "block": "C", "thread": "blockIdx.x", "extent": 2}]},
        {"title": "Bind", "text": "Bind i1.",
         "action": {"primitive": "bind", "loop": "i1", "thread_axis": "threadIdx.x"},
         "checks": [{"kind": "correct"}, {"kind": "no_race"},
                    {"kind": "traffic_below", "memory": "dram", "than_step": 1}]},
    ],
}


def _bad(mutate, match):
    doc = copy.deepcopy(DOC)
    mutate(doc)
    with pytest.raises(LessonError, match=match):
        parse_lesson(doc, "tiny_gpu.json")


def test_gpu_lesson_document_parses():
    les = parse_lesson(copy.deepcopy(DOC), "tiny_gpu.json")
    assert les.target == "cuda -model=a100"
    assert les.steps[1].code == "sch.bind(i0, 'blockIdx.x')"
    assert les.check_steps_needed(1) == (False, ())
    assert les.check_steps_needed(2) == (True, (1,))
    assert les.to_dict()["target"] == "cuda -model=a100"
    assert les.to_dict()["steps"][2]["checks"][2]["kind"] == "traffic_below"


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(target="cuda"), r"\"target\" must be one of"),
    (lambda d: d.update(target="llvm -mcpu=x"), r"\"target\" must be one of"),
    (lambda d: d["steps"][1].update(checks={"kind": "bound"}), r"must be a list"),
    (lambda d: d["steps"][1].update(checks=["bound"]), r"a check must be an object"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "fast"}]), r"unknown check kind 'fast'"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "bound", "block": "C"}]),
     r"bound needs 'thread'"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "bound", "block": "C",
                                             "thread": "threadIdx.w"}]),
     r"\"thread\" must be one of"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "bound", "block": "C",
                                             "thread": "threadIdx.x", "extent": 0}]),
     r"positive integer"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "scope", "buffer": "A",
                                             "scope": "texture"}]), r"\"scope\" must be one of"),
    (lambda d: d["steps"][1].update(checks=[{"kind": "no_race", "strict": True}]),
     r"no_race takes no 'strict'"),
    (lambda d: d["steps"][2]["checks"][2].update(than_step=2), r"earlier step's number"),
    (lambda d: d["steps"][2]["checks"][2].update(than_step=True), r"earlier step's number"),
    (lambda d: d["steps"][2]["checks"][2].update(memory="hbm"), r"\"memory\" must be one of"),
    (lambda d: d["steps"][1]["action"].update(thread_axis=3), r"must be a string"),
])
def test_bad_checks_are_named(mutate, match):
    _bad(mutate, match)


@pytest.mark.parametrize("lid", GPU_LESSONS)
def test_gpu_lessons_open_on_a_gpu_and_check_their_bindings(lid):
    les = lessons.get(lid)
    assert les.target == "cuda -model=h100-sxm"
    kinds = {c["kind"] for s in les.steps for c in s.checks}
    assert {"bound", "correct", "no_race"} <= kinds
    if lid != "gpu_1_vector_add":
        assert {"scope", "traffic_below"} <= kinds


def _results(les, mods, params):
    out = {}
    fname = les.func_name(mods[0])
    for k, step in enumerate(les.steps):
        needs, _ = les.check_steps_needed(k)
        earlier = any(k in les.check_steps_needed(j)[1] for j in range(len(les.steps)))
        if needs or earlier:
            out[k] = measure_gpu_step(mods[k + 1], les.workload, params, les.target,
                                      func_name=fname)
    return out


@pytest.mark.parametrize("lid", GPU_LESSONS)
def test_gpu_lesson_plays_to_completion_with_every_check_passing(lid):
    les = lessons.get(lid)
    params = les._params(les.test_params)
    mods = les.modules(les.test_params)
    results = _results(les, mods, params)
    for k, step in enumerate(les.steps):
        outs = les.run_checks(k, mods[k + 1], results.get(k), results)
        bad = [o.text for o in outs if not o.ok]
        assert not bad, f"{lid} step {k} ({step.title}): {bad}"
        if step.action:   # the lesson's own program is its step, structurally
            assert les.check_step(k, mods[k + 1], params)[0]
    # the last program is a GPU kernel that matched numpy, race-checked, with a model
    last = results[max(results)]
    assert last["correct"] is True and last["race_checked"] is True
    assert last["time_kind"] == "modeled" and last["model"]["dram_bytes"] > 0


def test_gemm_traffic_falls_between_the_stages():
    les = lessons.get("gpu_3_gemm_blocking")
    params = les._params(les.test_params)
    mods = les.modules(les.test_params)
    r = {k: measure_gpu_step(mods[k + 1], "matmul", params, les.target, func_name="matmul")
         for k in (6, 10, 16, 22)}   # tile in global, local blocking, A shared, B shared
    l2 = [r[k]["model"]["l2_bytes"] for k in (6, 10, 16, 22)]
    assert l2 == sorted(l2, reverse=True) and len(set(l2)) == 4, l2
    assert r[10]["model"]["dram_bytes"] < r[6]["model"]["dram_bytes"]
    assert r[22]["model"]["bottleneck"] == "shared"


def test_checks_fail_or_wait_with_a_sentence():
    les = lessons.get("gpu_1_vector_add")
    params = les._params(les.test_params)
    mods = les.modules(les.test_params)
    # the program after the split, checked as if it were the last step: nothing is bound
    outs = les.run_checks(3, mods[2])
    assert [o.state for o in outs] == ["failed", "failed", "waiting", "waiting"]
    assert "no (loops bound above it: none)" in outs[0].text
    assert "waiting for the workers' result" in outs[2].text
    res = measure_gpu_step(mods[2], "vector_add", params, les.target, func_name="vector_add")
    outs = les.run_checks(3, mods[2], res)
    assert outs[2].state == "failed" and "bind" in outs[2].text     # not a GPU program
    # only blockIdx.x bound: the threadIdx.x check names what is bound
    outs = les.run_checks(3, mods[3])
    assert outs[0].ok and not outs[1].ok and "blockIdx.x" in outs[1].text
    # a program too large for the race check says so; a racing one names the race
    assert not checks.evaluate({"kind": "no_race"}, mods[4], result={
        "race_checked": False, "correct": True}).ok
    out = checks.evaluate({"kind": "no_race"}, mods[4], result={
        "error": "refused by the emulator's race check: A_shared[3] written by thread 1"})
    assert out.state == "failed" and "race check" in out.text
    # traffic: the earlier step's result missing is a wait, a larger figure a failure
    chk = {"kind": "traffic_below", "memory": "dram", "than_step": 0}
    mine = {"model": {"dram_bytes": 3e6}, "stage": "done"}
    assert checks.evaluate(chk, mods[4], result=mine).state == "waiting"
    out = checks.evaluate(chk, mods[4], result=mine,
                          earlier={0: {"model": {"dram_bytes": 2e6}}})
    assert out.state == "failed" and "3 MB vs 2 MB" in out.text
