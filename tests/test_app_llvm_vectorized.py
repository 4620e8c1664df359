"""The explorer says which loops LLVM vectorized on its own (issue 41, goal 4): the worker's
step result lists them (from the optimised IR), the measurement body carries the list and
the program pane's loop lines carry the names the page's badges find them by. Through the
test app with the inline measurement service."""
from __future__ import annotations

import html
import json
import re

import pytest

from inline_service import make_test_app

import engine
from engine.schedule import Schedule

N = 64


def _row_inner_matmul(vectorize: bool = False) -> Schedule:
    """matmul with the output row ``j`` innermost under the reduction ``k``; vectorized by
    the schedule only with ``vectorize``."""
    sch = Schedule(engine.workloads.get("matmul", n=N), workload=("matmul", {"n": N}))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    sch.reorder(i, k, j)
    if vectorize:
        sch.vectorize(j)
    return sch


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def _settled_measure(client, token: str) -> str:
    q = {"n": str(N), "t": token}
    for _ in range(300):
        body = client.get("/explore/matmul/measure", query_string=q).get_data(as_text=True)
        if 'id="measure-now"' in body and "queued" not in body.split('id="measure-now"')[0][-40:] \
                and "-pending" not in body and "measuring" not in body:
            return body
    raise AssertionError(body)


def _vectorized(body: str) -> list[dict] | None:
    m = re.search(r"id=\"llvm-vectorized\" data-loops='([^']*)'", body)
    return json.loads(html.unescape(m.group(1))) if m else None


def test_a_loop_llvm_vectorized_is_named_in_the_step_and_findable_in_the_program(client):
    sch = _row_inner_matmul()
    token = sch.trace.encode()
    page = client.get(f"/explore/matmul?n={N}&t={token}").get_data(as_text=True)
    program = re.search(r'<div id="program-pane".*?</pre>', page, re.S).group(0)
    assert 'data-loop="j"' in program and 'data-loop="k"' in program
    body = _settled_measure(client, token)
    assert "matches numpy" in body
    found = _vectorized(body)
    assert found is not None, body
    by_loop = {v["loop"]: v["lanes"] for v in found}
    assert by_loop.get("j", 0) >= 4 and "k" not in by_loop
    assert re.search(r"LLVM vectorized on its own: .*loop <code>j</code> \(width \d+\)", body)


def test_the_schedules_own_vectorize_is_not_credited_to_llvm(client):
    token = _row_inner_matmul(vectorize=True).trace.encode()
    body = _settled_measure(client, token)
    assert "matches numpy" in body
    found = _vectorized(body) or []
    assert not any(v["loop"] in ("j", "k") for v in found)


def test_step_zero_says_nothing_of_a_reduction_innermost(client):
    # the unscheduled matmul: k (a float sum) innermost, not vectorized by LLVM
    token = Schedule(engine.workloads.get("matmul", n=N),
                     workload=("matmul", {"n": N})).trace.encode()
    body = _settled_measure(client, token)
    assert not any(v["loop"] == "k" for v in (_vectorized(body) or []))


def test_the_code_pane_shows_the_ir_without_the_loop_marks(client):
    token = _row_inner_matmul().trace.encode()
    for _ in range(300):
        body = html.unescape(client.get("/explore/matmul/code", query_string={
            "n": str(N), "t": token, "kind": "ll-opt"}).get_data(as_text=True))
        if "define" in body:
            break
    assert "define" in body and re.search(r"<\d+ x float>", body)
    assert "!dbg" not in body and "DILocation" not in body and "DISubprogram" not in body
