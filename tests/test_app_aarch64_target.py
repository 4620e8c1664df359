"""The explorer on an ARM board (issue 42, Edge): the target in the link and the trace
document, a step built for aarch64, run and checked against numpy under qemu-aarch64 in the
worker and timed there (labelled as the emulator's time), AArch64 assembly in the code pane,
no cache simulation or roofline for an emulated target.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (./run-tests.sh installs them): without
them the worker's step says so and these tests fail, they never skip."""
from __future__ import annotations

import html
import json
import re

from aarch64_samples import ARM as ENGINE_ARM, mm_relu_neon
from inline_service import HX, drain, settled, state_of, text

from app.service import timing
from app.web import targets
from engine import workloads

ARM = {"target": "aarch64", "n": "16"}


def split_j_by_4(client) -> dict:
    """mm_relu (n=16) on the board: j split by 4 (NEON's float lanes), through /apply."""
    r = client.post("/explore/mm_relu/apply", headers=HX,
                    data=dict(ARM, sel="L/mm_relu/1/Y", primitive="split",
                              factors="None, 4"))
    assert r.status_code == 200, text(r)
    return state_of(r.headers["HX-Push-Url"])


def figure_of(pane: str) -> dict:
    raw = re.search(r'data-plotly="([^"]+)"', pane).group(1)
    return json.loads(html.unescape(raw))


def test_targets_table_has_the_board():
    t = targets.choice("aarch64")
    assert t.is_board and not t.is_gpu and t.engine == ENGINE_ARM
    assert targets.from_document(ENGINE_ARM) is t
    assert not targets.choice("cpu").is_board and not targets.choice("cuda-a100").is_board
    assert timing.is_board_target(ENGINE_ARM) and timing.is_board_target("raspberry-pi-5")
    for other in (None, "", "llvm", "cuda -model=a100", "llvm -mtriple=riscv64-linux-gnu"):
        assert not timing.is_board_target(other)


def test_worker_board_step_matches_numpy_under_qemu():
    d = timing.measure_board_step(mm_relu_neon(16, parallel=False), "mm_relu", {"n": 16},
                                  ENGINE_ARM,
                                  func_name="mm_relu")
    assert d["ok"] and d["stage"] == "done" and d["correct"] is True, d
    assert d["time_kind"] == "emulated" and d["time_ms"] > 0 and d["gflops"] > 0
    assert d["emulator"] == "qemu-aarch64" and d["numpy_ms"] is None
    json.dumps(d)                                           # plain data for the store


def test_worker_board_step_of_a_wrong_schedule_is_not_correct():
    # a program whose result differs from mm_relu's reference (no relu): caught under qemu
    d = timing.measure_board_step(workloads.get("matmul", n=8), "mm_relu", {"n": 8},
                                  ENGINE_ARM, func_name="matmul")
    assert d["stage"] == "done" and d["correct"] is False and not d["ok"], d


def test_board_step_measured_in_a_worker_with_the_emulation_label(client, app):
    q = split_j_by_4(client)
    assert q["target"] == "aarch64"
    m = text(settled(client, "/explore/mm_relu/measure?" + "&".join(
        f"{k}={v}" for k, v in q.items())))
    assert "✓ matches numpy" in m, m[:2000]
    assert targets.EMULATION_LABEL in html.unescape(m)
    fig = figure_of(m)
    assert [t["name"] for t in fig["data"]] == [targets.EMULATION_LABEL]
    assert len(fig["data"][0]["x"]) == 2                    # step 0 and step 1, both timed
    assert targets.NO_ROOFLINE_ON_BOARD in html.unescape(m)
    cache = html.unescape(text(client.get("/explore/mm_relu/cache", query_string=q)))
    assert "not available" in cache and "emulated target" in cache
    # the same program on the CPU: another result, measured on this machine
    cpu_q = {k: v for k, v in q.items() if k != "target"}
    cpu = text(settled(client, "/explore/mm_relu/measure?" + "&".join(
        f"{k}={v}" for k, v in cpu_q.items())))
    assert targets.EMULATION_LABEL not in html.unescape(cpu)


def test_board_code_pane_is_aarch64_assembly(client, app):
    q = split_j_by_4(client)
    drain(app)
    asm = text(client.get("/explore/mm_relu/code", query_string=dict(q, kind="asm")))
    for _ in range(20):
        if "queued" not in asm:
            break
        drain(app)
        asm = text(client.get("/explore/mm_relu/code", query_string=dict(q, kind="asm")))
    assert "engine_fn_mm_relu" in asm and "ret" in asm
    assert "fmla" in asm or "fmadd" in asm                       # AArch64 multiply-add
    assert "%rsp" not in asm and "vmovups" not in asm           # not x86


def test_trace_document_carries_the_board(client):
    q = split_j_by_4(client)
    doc = json.loads(text(client.get("/explore/mm_relu/export/json", query_string=q)))
    assert doc["target"] == ENGINE_ARM
    r = client.post("/import", data={"text": json.dumps(doc)})
    assert r.status_code == 303
    assert state_of(r.headers["Location"])["target"] == "aarch64"
    page = text(client.get("/explore/mm_relu", query_string=q))
    assert "Target: ARM board (aarch64, NEON)" in page


def test_tuning_is_not_offered_on_an_emulated_target(client):
    q = split_j_by_4(client)
    tab = html.unescape(text(client.get("/explore/mm_relu/tune", query_string=q)))
    assert "Tuning is not available for an emulated target" in tab and "<form" not in tab
    r = client.post("/explore/mm_relu/tune", query_string=q,
                    data={"trials": "4", "space": "auto"}, headers=HX)
    assert r.status_code == 400
    assert "not available for an emulated target" in html.unescape(text(r))
