"""Trust, round two: small inputs refused before any work is spent on them.

* a 470 KB trace of 10,000 steps sent to ``/import`` was read instruction by instruction
  (3.8 s) before the 300-step refusal: the count is now checked first;
* a full-width digit ("５") passed the Tune tab's trial-count check (``str.isdigit``);
* a number of 10,000 digits in ``from=`` reached ``int()`` (a 500).
"""
from __future__ import annotations

import io
import json

import pytest

import engine.schedule.recorded_trace as recorded
from engine.schedule import Trace, TraceError
from inline_service import make_test_app

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def long_trace(steps: int) -> dict:
    insts = [["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]]
    insts += [["Annotate", ["l1", f'"v{k}"'], ["note"], []] for k in range(steps)]
    return {"format": "schedule-explorer/trace", "version": 1,
            "workload": {"name": "mm_relu", "params": {"n": 16}}, "insts": insts}


@pytest.fixture()
def reads(monkeypatch):
    """The instructions read one by one (engine.schedule.instruction.check_insts)."""
    seen = []
    real = recorded.check_insts

    def counted(insts, tvm):
        seen.append(len(insts))
        return real(insts, tvm)
    monkeypatch.setattr(recorded, "check_insts", counted)
    return seen


def test_a_trace_over_the_step_limit_is_refused_before_it_is_read(client, reads):
    doc = long_trace(10_000)
    text = json.dumps(doc)
    assert len(text) < 512 * 1024
    r = client.post("/import", data={"file": (io.BytesIO(text.encode()), "trace.json")},
                    content_type="multipart/form-data")
    assert r.status_code == 400
    page = r.get_data(as_text=True)
    assert "10002 instructions" in page and "300" in page
    assert reads == []                      # not one instruction was read


def test_the_engine_refuses_by_count_first_in_both_formats(reads):
    doc = long_trace(50)
    with pytest.raises(TraceError, match="52 instructions, more than the 10"):
        Trace.from_json(doc, max_insts=10)
    with pytest.raises(TraceError, match="52 instructions"):
        Trace.from_json([doc["insts"], []], max_insts=10)
    token = Trace.from_json(doc).encode()
    reads.clear()
    with pytest.raises(TraceError, match="52 instructions"):
        Trace.decode(token, max_insts=10)
    assert reads == []


@pytest.mark.parametrize("trials", ["５", "٣", "1_0", "+4", "4.0", "9" * 5000])
def test_a_trial_count_is_ascii_digits_only(client, trials):
    r = client.post("/explore/mm_relu/tune?n=16",
                    data={"trials": trials, "space": "auto"}, headers=HX)
    assert r.status_code == 400 and "whole number" in r.get_data(as_text=True)


@pytest.mark.parametrize("trials", ["５", "9" * 5000])
def test_a_model_trial_count_is_ascii_digits_only(client, trials):
    r = client.post("/model/mlp/tune?batch=1", data={"trials": trials}, headers=HX)
    assert r.status_code == 400 and "whole number" in r.get_data(as_text=True)


@pytest.mark.parametrize("step", ["１", "9" * 5000])
def test_a_fork_step_is_ascii_digits_only(client, step):
    from engine import Schedule, workloads
    sch = Schedule(workloads.get("mm_relu", n=16), workload=("mm_relu", {"n": 16}))
    sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[None, 4])
    sch.split(sch.get_loops(sch.get_block("Y"))[0], factors=[None, 4])
    r = client.get(f"/explore/mm_relu/fork?n=16&t={sch.trace.encode()}&from={step}")
    assert r.status_code == 400 and "from= must be a step number" in r.get_data(as_text=True)


@pytest.mark.parametrize("call", ["print(1)", "__import__('os').getpid()", "(lambda: 1)()",
                                  "open('/etc/hostname')", "f(1)(2)", "A.data.__class__()"])
def test_a_pasted_program_never_calls_python(call):
    """Only a ``@T.prim_func`` decorating Python code may call that code's own helpers
    (TVM's macros); text to parse (a paste, a link) has no surroundings: every Python call
    is refused by name, nothing runs."""
    import engine
    from engine.script.errors import ScriptError
    src = f'''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = {call}
'''
    with pytest.raises(ScriptError):
        engine.parse(src)
