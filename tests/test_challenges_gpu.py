"""The GPU challenge (issue 39): beat the chapter's shared-blocking GEMM on the A100's model.
Solved by a better schedule (bigger thread blocks, a deeper k tile), not by the preset
itself; checked in the engine and through the app's workers (inline here)."""
from __future__ import annotations

import re
from html import unescape

import pytest

from engine import challenges, workloads
from engine.challenges import BeatModel, ChallengeError
from engine.presets import gpu_chapter
from engine.schedule import Schedule
from inline_service import make_test_app

CID = "gpu_gemm_beat_shared_a100"
N = 128      # small: the emulator runs every candidate


def _shared(n, *tiles):
    sch = Schedule(workloads.get("matmul", n=n), workload=("matmul", {"n": n}))
    gpu_chapter.apply_gemm_shared(sch, *tiles, func_name="matmul")
    return sch


def test_the_challenge_names_its_gpu_and_reference():
    ch = challenges.get(CID)
    d = ch.to_dict()
    assert d["kind"] == "beat_model" and d["target"] == "cuda -model=a100"
    assert "A100" in d["gpu"] and d["reference_preset"] == "gpu-gemm-shared"
    assert ch.start_link() == "/explore/matmul?n=512&target=cuda-a100"
    with pytest.raises(ChallengeError, match="bad target"):
        BeatModel("x", "x", "x", "matmul", target="cuda -model=nope")
    with pytest.raises(ChallengeError, match="not a matmul schedule"):
        BeatModel("x", "x", "x", "matmul", reference_preset="gpu-vector-add")


def test_the_preset_itself_does_not_solve_it():
    ch = challenges.get(CID)
    res = ch.check(ch.reference_schedule({"n": N}), {"n": N})
    assert not res.ok and "Not fast enough yet" in res.message
    assert res.details["speedup"] == pytest.approx(1.0)
    assert "&target=cuda-a100" in res.link


def test_a_better_schedule_solves_it():
    ch = challenges.get(CID)
    res = ch.check(_shared(N, 4, 4, 16, 16, 16), {"n": N})
    assert res.ok, res.message
    assert res.details["speedup"] > 1.5 and res.details["time_kind"] == "modeled"
    assert "modeled for the NVIDIA A100" in res.message


def test_unbound_and_wrong_programs_are_refused_with_a_sentence():
    ch = challenges.get(CID)
    plain = Schedule(workloads.get("matmul", n=N), workload=("matmul", {"n": N}))
    fake = {"not_gpu": "no loop is bound to a GPU thread axis: did you forget to bind?"}
    res = ch.check(plain, {"n": N}, measure=lambda mod: fake)
    assert not res.ok and "not a GPU kernel yet" in res.message
    res = ch.check(plain, {"n": N}, measure=lambda mod: {"correct": False, "time_ms": 0.01,
                                                         "detail": "C: 5 elements differ"})
    assert not res.ok and "not correct: C: 5 elements differ" in res.message
    res = ch.check("not a token", {"n": N})
    assert not res.ok and "does not replay" in res.message


@pytest.fixture(scope="module")
def client():
    return make_test_app({"PREFETCH_MEASUREMENTS": False}).test_client()


def _result(page: str) -> str:
    m = re.search(r'<section id="challenge-result".*?</section>', page, re.S)
    assert m, page[:2000]
    return unescape(re.sub(r"<[^>]+>", " ", m.group(0)))


def test_the_page_checks_a_pasted_link_with_the_workers(client):
    page = client.get(f"/challenges/{CID}").get_data(as_text=True)
    assert "beat it on a GPU model" in page and 'id="gpu-goal"' in page
    assert 'href="/explore/matmul?n=512&amp;target=cuda-a100"' in page
    better = _shared(N, 4, 4, 16, 16, 16)
    link = f"/explore/matmul?n={N}&target=cuda-a100&t={better.trace.encode()}"
    r = client.get(f"/challenges/{CID}", query_string={"solution": link})
    assert r.status_code == 200
    text = _result(r.get_data(as_text=True))
    assert "✓" in text and "Solved" in text and "modeled for the NVIDIA A100" in text
    same = gpu_chapter_preset_link(N)
    text = _result(client.get(f"/challenges/{CID}",
                              query_string={"solution": same}).get_data(as_text=True))
    assert "✗" in text and "Not fast enough yet" in text


def gpu_chapter_preset_link(n):
    sch = challenges.get(CID).reference_schedule({"n": n})
    return f"/explore/matmul?n={n}&target=cuda-a100&t={sch.trace.encode()}"
