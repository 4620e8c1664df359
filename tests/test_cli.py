"""The command line: replay/measure/export traces, list workloads, lessons, challenges.

Exit codes: 0 ok, 1 wrong results / challenge not solved, 2 invalid input. Figures are
printed, never asserted against a wall-clock threshold.
"""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
N = 32  # small sizes keep compile+check fast


def _course_trace(n=N):
    """The trace document of the course's four steps (split, reorder, reverse_compute_at,
    decompose_reduction) on mm_relu at size ``n``."""
    return engine.presets.trace_json("mm_relu-course", n=n)


def _run(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, input=stdin, timeout=300)


def _main(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def course_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("traces") / "course.json"
    p.write_text(json.dumps(_course_trace()))
    return p


def test_replay_good_trace_subprocess(course_file, tmp_path):
    out_py = tmp_path / "tvm.py"
    r = _run("replay", str(course_file), "--export", "tvm", str(out_py))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("workload mm_relu") and "n=32" in lines[0]
    header = lines[1].split()
    assert header[:3] == ["step", "primitive", "correct"]
    body = "\n".join(lines[3:])
    for prim in ("(original)", "split", "reorder", "reverse_compute_at",
                 "decompose_reduction"):
        assert prim in body
    rows = [ln for ln in lines[3:] if ln and ln.split()[0].isdigit()]
    assert len(rows) == 5 and all(ln.split()[-1] == "yes" for ln in rows)
    assert "get_block" not in body  # queries are applied but are not table rows
    text = out_py.read_text()
    assert "apply_trace" in text and "s_tir" in text


def test_replay_measure_prints_time_and_gflops(course_file):
    code, out, err = _main("replay", str(course_file), "--measure", "--number", "1",
                           "--repeat", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert "time (ms)" in lines[1] and lines[1].split()[-1] == "GFLOP/s"
    rows = [ln.split() for ln in lines[3:] if ln and ln.split()[0].isdigit()]
    assert len(rows) == 5
    for row in rows:
        ms, gflops = float(row[-2]), float(row[-1])
        assert ms > 0 and gflops > 0


@pytest.mark.parametrize("fmt,needle", [("course", "tvm.tir.Schedule"),
                                        ("python", "sch.split"),
                                        ("json", '"schedule-explorer/trace"')])
def test_replay_exports(course_file, fmt, needle, tmp_path):
    out = tmp_path / f"out.{fmt}"
    code, stdout, err = _main("replay", str(course_file), "--no-check", "--export", fmt,
                              str(out))
    assert code == 0, err
    assert needle in out.read_text()
    assert f"wrote {fmt} export" in stdout
    if fmt == "json":
        again = engine.Trace.from_json(out.read_text())
        assert len(again) == len(engine.Trace.from_json(course_file.read_text()))


def test_replay_param_override(course_file):
    code, out, err = _main("replay", str(course_file), "--param", "n=16")
    assert code == 0, err
    assert "n=16" in out.splitlines()[0]


def _bad(tmp_path, content, name="bad.json"):
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


def test_bad_json_exits_2_with_position(tmp_path):
    r = _run("replay", str(_bad(tmp_path, '{"format": "schedule-explorer/trace",\n "insts": [')))
    assert r.returncode == 2
    assert "not valid JSON (line" in r.stderr and "Traceback" not in r.stderr


def test_unknown_version_exits_2(tmp_path):
    doc = _course_trace()
    doc["version"] = 99
    r = _run("replay", str(_bad(tmp_path, doc)))
    assert r.returncode == 2
    assert "version" in r.stderr and "Traceback" not in r.stderr


def test_unknown_primitive_exits_2(tmp_path):
    doc = _course_trace()
    doc["insts"][3][0] = "Twist"
    code, out, err = _main("replay", str(_bad(tmp_path, doc)))
    assert code == 2
    assert "Twist" in err and err.startswith("error: invalid trace")


def test_illegal_step_names_the_step(tmp_path):
    doc = _course_trace()
    # make the split's factors impossible for this loop: 32 is not 5 * 4
    split = next(n for n, inst in enumerate(doc["insts"], 1) if inst[0] == "Split")
    doc["insts"][split - 1][1][1:] = [5, 4]
    r = _run("replay", str(_bad(tmp_path, doc)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"step {split}" in r.stderr and "Traceback" not in r.stderr
    # the steps before the illegal one were still printed
    assert "(original)" in r.stdout


def test_trace_of_other_shapes_of_bad_input(tmp_path):
    code, _, err = _main("replay", str(tmp_path / "missing.json"))
    assert code == 2 and "no such trace file" in err
    code, _, err = _main("replay", str(_bad(tmp_path, "[1, 2, 3]")))
    assert code == 2 and "error:" in err
    code, _, err = _main("replay", str(_bad(tmp_path, '"just a string"')))
    assert code == 2 and "error:" in err
    doc = _course_trace()
    doc["workload"] = {"name": "no_such_workload", "params": {}}
    code, _, err = _main("replay", str(_bad(tmp_path, doc)))
    assert code == 2 and "no_such_workload" in err
    code, _, err = _main("replay", str(_bad(tmp_path, _course_trace())), "--export", "pdf",
                         str(tmp_path / "x"))
    assert code == 2 and "unknown export format" in err
    code, _, err = _main("replay", str(_bad(tmp_path, _course_trace())), "--param", "n")
    assert code == 2 and "KEY=VALUE" in err


def test_tvm_list_needs_a_workload(tmp_path):
    tvm_doc = [_course_trace()["insts"], []]
    p = _bad(tmp_path, tvm_doc, "tvm.json")
    code, _, err = _main("replay", str(p))
    assert code == 2 and "--workload" in err
    code, out, err = _main("replay", str(p), "--workload", "mm_relu", "--param", f"n={N}")
    assert code == 0, err
    assert "decompose_reduction" in out


def test_stdin_trace():
    r = _run("replay", "-", "--no-check", stdin=json.dumps(_course_trace()))
    assert r.returncode == 0, r.stderr
    assert "reorder" in r.stdout


def test_workloads_lists_presets_with_params():
    r = _run("workloads")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[:3] == ["workload", "default", "params"]
    names = [ln.split()[0] for ln in r.stdout.splitlines()[2:] if ln.strip()]
    assert set(engine.workloads.names()) <= set(names)
    mm = next(ln for ln in r.stdout.splitlines() if ln.startswith("mm_relu"))
    assert "n=128" in mm


def test_lessons_and_challenges_listing():
    code, out, _ = _main("lessons")
    assert code == 0 and "01_tensorir_mm_relu" in out
    code, out, _ = _main("lessons", "01_tensorir_mm_relu")
    assert code == 0 and ">>> j0, j1 = sch.split(j, factors=[None, 4])" in out
    code, _, err = _main("lessons", "nope")
    assert code == 2 and "no lesson named 'nope'" in err
    code, out, _ = _main("challenges")
    assert code == 0 and "mm_relu_course_nest" in out


def test_check_challenge_exit_codes(tmp_path):
    good = _bad(tmp_path, _course_trace(128), "good.json")
    code, out, err = _main("check", "mm_relu_course_nest", str(good))
    assert code == 0, out + err
    assert out.startswith("SOLVED") and "link: /explore/mm_relu?n=128&t=" in out
    doc = _course_trace(128)
    doc["insts"] = doc["insts"][:4]  # stopped after the split
    code, out, _ = _main("check", "mm_relu_course_nest", str(_bad(tmp_path, doc, "half.json")))
    assert code == 1 and out.startswith("NOT SOLVED")
    code, _, err = _main("check", "no_such_challenge", str(good))
    assert code == 2 and "no challenge named" in err


def test_help_and_usage_errors():
    r = _run("--help")
    assert r.returncode == 0 and "replay" in r.stdout and "workloads" in r.stdout
    r = _run("replay", "--help")
    assert r.returncode == 0 and "--measure" in r.stdout and "--export" in r.stdout
    r = _run()
    assert r.returncode == 2 and "COMMAND" in r.stderr


def test_wrong_results_exit_1_and_engine_bugs_exit_3(course_file, monkeypatch):
    from engine.lessons import runner
    real = runner.check_module
    calls = []

    def flaky(mod, workload, params, **kw):
        calls.append(1)
        if len(calls) == 3:  # pretend the reorder step miscompiles
            return runner.Check(False, "5 of 1024 output elements differ from numpy")
        return real(mod, workload, params, **kw)

    monkeypatch.setattr(runner, "check_module", flaky)
    code, out, err = _main("replay", str(course_file))
    assert code == 1
    assert "NO" in out and "step 4 (reorder(j_0, k, j_1)) computes wrong results" in err

    def boom(*a, **k):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(runner, "check_module", boom)
    code, out, err = _main("replay", str(course_file))
    assert code == 3 and "failed unexpectedly" in err and "Traceback" not in err


def test_lessons_play_in_the_terminal():
    code, out, err = _main("lessons", "04_fusion", "--play", "--param", "in_channels=4",
                           "--param", "out_channels=4", "--param", "size=8")
    assert code == 0, err
    assert ">>> sch.compute_inline(block_pad)" in out
    assert out.count("correct: yes") == 3 and "time:" not in out
    code, _, err = _main("lessons", "--play")
    assert code == 2 and "needs a lesson id" in err
