"""Large programs: timed (slow steps by their one checked run), not cache-simulated."""
from __future__ import annotations

import re

import pytest

from app.service import timing
from inline_service import make_test_app, settled

HX = {"HX-Request": "true"}


def text_of(resp) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", resp.get_data(as_text=True)))


@pytest.fixture()
def client():
    # mm_relu at n=16 needs 8 KFLOP: make that "large" (over the cache budget) but measured
    app = make_test_app({"EXPLORER_LIMITS": {"max_flops_cache_simulated": 2000.0}})
    return app.test_client()


def test_large_program_is_timed_but_not_cache_simulated(client):
    r = settled(client, "/explore/mm_relu/measure?n=16")
    assert r.status_code == 200
    text = text_of(r)
    assert "Simulate only" not in text
    assert "Large program" in text and "timed by that one run" in text
    assert "matches numpy" in text           # compiled, checked and timed
    r = client.get("/explore/mm_relu/cache?n=16", headers=HX)
    text = text_of(r)
    assert "Not simulated at these sizes" in text and "max_flops_cache_simulated" in text
    assert "runtimes are still measured" in text


def test_a_slow_step_is_timed_by_its_checked_run(client, monkeypatch):
    calls = []
    real = timing.time_kernel

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(timing, "time_kernel", spy)
    monkeypatch.setattr(timing, "SLOW_RUN_S", 0.0)   # every run counts as slow
    r = settled(client, "/explore/mm_relu/measure?n=16")
    page = r.get_data(as_text=True)
    assert 'class="muted one-run"' in page and "(1 run)" in page
    assert not calls                          # no repeated timing runs
    assert "matches numpy" in text_of(r)


def test_small_programs_keep_the_usual_timing(client, monkeypatch):
    r = settled(client, "/explore/mm_relu/measure?n=8")  # 1.1 kFLOP: under the budget
    page = r.get_data(as_text=True)
    assert "Large program" not in page and "(1 run)" not in page
    assert "matches numpy" in text_of(r)
