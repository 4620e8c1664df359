"""A module from engine.workloads.get carries its workload, so Schedule(mod).trace replays
with ``python -m engine replay`` and no --workload."""
import io
import json

import engine
from engine import cli


def _steps(sch):
    i, _, _ = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 7])
    sch.parallel(i0)


def test_schedule_of_a_workload_module_names_its_workload(tmp_path):
    mod = engine.workloads.get("matmul", n=14)
    assert mod.workload == ("matmul", {"n": 14})
    sch = engine.Schedule(mod)
    _steps(sch)
    doc = sch.trace.as_json()
    assert doc["workload"] == {"name": "matmul", "params": {"n": 14}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["replay", str(path)], out=out, err=err) == 0, err.getvalue()
    assert "workload matmul n=14" in out.getvalue()
    assert "parallel(i_0)" in out.getvalue() and " no" not in out.getvalue()


def test_an_explicit_workload_wins_and_other_modules_have_none():
    mod = engine.workloads.get("matmul", n=14)
    assert engine.Schedule(mod, workload=("matmul", {"n": 14, "m": 14})).workload == \
        ("matmul", {"n": 14, "m": 14})
    parsed = engine.parse(mod.script())
    assert parsed.workload is None and engine.Schedule(parsed).trace.as_json()["workload"] is None
    # metadata, not structure: same program, same hash; a changed module drops it
    assert engine.structural_equal(mod, parsed)
    assert engine.structural_hash(mod) == engine.structural_hash(parsed)
    sch = engine.Schedule(mod)
    _steps(sch)
    assert sch.mod.workload is None and sch.workload == ("matmul", {"n": 14})


def test_string_params_are_recorded_as_integers():
    assert engine.workloads.get("matmul", n="14").workload == ("matmul", {"n": 14})
