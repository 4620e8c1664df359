"""The explorer with sampled steps: a link whose trace samples replays (the same program on
every request), the trace pane shows the sampling steps with their decisions, exports carry
the decisions, and a bad decision in a link is a 400 with the reason."""
from __future__ import annotations

import base64
import json

import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, Trace
from inline_service import make_test_app

N = 16


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def sampled(seed=5, decision=None):
    sch = Schedule(engine.workloads.get("mm_relu", n=N), workload=("mm_relu", {"n": N}),
                   seed=seed)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    tile = sch.sample_perfect_tile(j, n=2, decision=decision)
    sch.split(j, factors=tile)
    return sch


def token_of(doc) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def test_a_link_with_sampling_steps_shows_them_with_their_decisions(client):
    sch = sampled(decision=[2, 8])
    page = client.get(f"/explore/mm_relu?n={N}&t={sch.trace.encode()}")
    text = page.get_data(as_text=True)
    assert page.status_code == 200, text
    assert ">v4, v5 = sch.sample_perfect_tile(j, n=2, max_innermost_factor=16, " \
           "decision=[2, 8])</a>" in text  # a step of its own, with its decision
    assert ">sch.split(j, factors=[v4, v5])</a>" in text
    export = client.get(f"/explore/mm_relu/export/tvm?n={N}&t={sch.trace.encode()}")
    assert "decision=[2, 8]" in export.get_data(as_text=True)
    doc = json.loads(client.get(f"/explore/mm_relu/export/json?n={N}&t="
                                f"{sch.trace.encode()}").get_data(as_text=True))
    assert doc["decisions"] == [[2, [2, 8]]]
    assert structural_equal(engine.schedule.replay("mm_relu", {"n": N}, doc).mod, sch.mod)


def test_a_link_without_decisions_replays_to_one_program(client):
    """A sampling step without its decision samples from a fixed seed: the same program
    on every request, and the export writes the decision the page used."""
    doc = sampled().trace.as_json()
    del doc["decisions"]
    t = token_of(doc)
    pages = [client.get(f"/explore/mm_relu?n={N}&t={t}").get_data(as_text=True)
             for _ in range(2)]
    assert pages[0] == pages[1]
    exported = json.loads(client.get(f"/explore/mm_relu/export/json?n={N}&t={t}")
                          .get_data(as_text=True))
    assert len(exported["decisions"]) == 1
    again = Trace.from_json(exported)
    assert again.get_decision(2) in ([1, 16], [2, 8], [4, 4], [8, 2], [16, 1])


def test_a_bad_decision_in_a_link_is_refused_with_the_reason(client):
    doc = sampled().trace.as_json()
    doc["decisions"] = [[2, [3, 5]]]
    page = client.get(f"/explore/mm_relu?n={N}&t={token_of(doc)}")
    text = page.get_data(as_text=True)
    assert page.status_code == 400
    assert "multiplies to 15" in text and "extent is 16" in text


def test_two_decisions_are_two_programs_not_one_cached(client):
    a, b = sampled(decision=[2, 8]), sampled(decision=[4, 4])
    ta = client.get(f"/explore/mm_relu?n={N}&t={a.trace.encode()}").get_data(as_text=True)
    tb = client.get(f"/explore/mm_relu?n={N}&t={b.trace.encode()}").get_data(as_text=True)
    assert ta != tb
    assert "decision=[2, 8]" in ta and "decision=[4, 4]" in tb
