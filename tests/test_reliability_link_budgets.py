"""A link's cost in the web process is bounded by counts: the one-to-one check of
transform_layout's index maps (replayed from a link) stops at the request's budget of
points, and the server keeps answering while such links are replayed."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import engine
from engine.schedule import Schedule, Trace
from inline_service import make_test_app

BIG = {"m": 2048, "n": 2048, "k": 2048}
BUDGET = 1 << 21     # the default max_index_map_points (checked at the end of each test)
#: non-separable (each new row index uses both old indices) yet one-to-one: the check
#: must enumerate every point of the 2048 x 2048 cache
MAPS = [f"lambda a, b: ((a + {c} * b) % {{n}}, b)" for c in (1, 3, 5, 7)]


def attack_token(n: int, maps=MAPS) -> str:
    """A link's trace: cache_read of matmul's B, then transform_layouts whose check
    enumerates n*n points each (distinct maps, so no verdict is reused). Written as JSON,
    as an attacker would, without running the checks."""
    insts = [["GetBlock", [], ["C", "matmul"], ["b0"]],
             ["CacheRead", ["b0", []], [1, "global"], ["b1"]]]
    insts += [["TransformLayout", ["b1"], [0, 1, m.format(n=n), None], []] for m in maps]
    doc = {"format": "schedule-explorer/trace", "version": 1,
           "workload": {"name": "matmul", "params": {"m": n, "n": n, "k": n}}, "insts": insts}
    return Trace.from_json(doc).encode()


@pytest.fixture()
def points(monkeypatch):
    """Index points enumerated by the one-to-one check (every grid numpy builds)."""
    seen = []
    real = np.meshgrid

    def counting(*axes, **kw):
        grids = real(*axes, **kw)
        seen.append(int(grids[0].size))
        return grids
    monkeypatch.setattr(np, "meshgrid", counting)
    return seen


def test_the_index_map_check_refuses_over_its_budget_before_enumerating(points):
    from engine.schedule.primitives.layout import CheckBudget, check_budget
    P = {"m": 64, "n": 64, "k": 64}
    sch = Schedule(engine.workloads.get("matmul", **P), workload=("matmul", P))
    bg = sch.cache_read(sch.get_block("C"), 1, "global")
    budget = CheckBudget(64 * 64 + 100)
    with check_budget(budget):
        sch.transform_layout(bg, ("write", 0), MAPS[0].format(n=64))    # 4096 points
        with pytest.raises(engine.ScheduleError, match="cannot be checked") as e:
            sch.transform_layout(bg, ("write", 0), MAPS[1].format(n=64))
    assert "(j // 16, k, j % 16)" in str(e.value)
    assert budget.used == 64 * 64 and sum(points) == 64 * 64
    # a verdict already known costs nothing (replays of the same link)
    again = Schedule(engine.workloads.get("matmul", **P), workload=("matmul", P))
    bg = again.cache_read(again.get_block("C"), 1, "global")
    with check_budget(CheckBudget(0)):
        again.transform_layout(bg, ("write", 0), MAPS[0].format(n=64))


def test_separable_maps_are_checked_in_points_linear_in_the_extents(points):
    from engine.schedule.primitives.layout import CheckBudget, check_budget
    sch = Schedule(engine.workloads.get("matmul", **BIG), workload=("matmul", BIG))
    bg = sch.cache_read(sch.get_block("C"), 1, "global")
    budget = CheckBudget(2 * 2048)
    with check_budget(budget):
        sch.transform_layout(bg, ("write", 0), "lambda k, j: (j // 64, k, j % 64)")
    assert budget.used <= 2 * 2048 and not points


def test_a_link_of_costly_index_maps_is_refused_after_bounded_work(points):
    app = make_test_app()
    client = app.test_client()
    r = client.get("/explore/matmul?m=2048&n=2048&k=2048&t=" + attack_token(2048))
    text = r.get_data(as_text=True)
    assert sum(points) <= BUDGET
    assert r.status_code == 400
    assert "cannot be checked to be one-to-one" in text and "max_index_map_points" in text
    assert app.extensions["limits"].max_index_map_points == BUDGET


def test_the_budget_is_shared_by_all_the_replays_of_one_request(points, monkeypatch):
    # 1024 x 1024: each check fits the budget, four of them (and the replays of every
    # prefix the panes ask for) do not. Each request starts with no verdict known (they
    # are remembered across requests: a later request would go further)
    import engine.schedule.primitives as prims
    app = make_test_app()
    client = app.test_client()
    tok = attack_token(1024)
    for path in ("", "/measure", "/code", "/toolbar"):
        points.clear()
        if hasattr(prims, "index_map_check"):    # a fresh server: no verdict known
            monkeypatch.setattr(prims.index_map_check, "_VERDICTS", {})
        r = client.get(f"/explore/matmul{path}?m=1024&n=1024&k=1024&t={tok}")
        assert sum(points) <= BUDGET, path
        assert r.status_code == 400, path
        assert "max_index_map_points" in r.get_data(as_text=True)
    assert 1024 * 1024 <= app.extensions["limits"].max_index_map_points < 4 * 1024 * 1024


def test_an_imported_trace_is_replayed_within_the_budget(points):
    app = make_test_app()
    doc = Trace.decode(attack_token(2048)).as_json()
    r = app.test_client().post("/import", data={"text": json.dumps(doc)})
    assert sum(points) <= BUDGET
    assert r.status_code == 400
    assert "max_index_map_points" in r.get_data(as_text=True)


def test_a_challenge_solution_is_replayed_within_the_budget(points):
    # mm_relu's Y at n=1024 (the size the pasted link asks for): 1M points per map
    maps = [f"lambda a, b: ((a + {c} * b) % 1024, b)" for c in range(4)]
    insts = [["GetBlock", [], ["Y", "mm_relu"], ["b0"]]]
    insts += [["TransformLayout", ["b0"], [0, 1, m, None], []] for m in maps]
    tok = Trace.from_json({"format": "schedule-explorer/trace", "version": 1,
                           "workload": {"name": "mm_relu", "params": {"n": 1024}},
                           "insts": insts}).encode()
    client = make_test_app().test_client()
    r = client.get("/challenges/mm_relu_course_nest",
                   query_string={"solution": f"/explore/mm_relu?n=1024&t={tok}"})
    assert sum(points) <= BUDGET
    assert r.status_code == 200
    assert "cannot be checked to be one-to-one" in " ".join(r.get_data(as_text=True).split())


def test_the_gallery_answers_while_costly_links_are_replayed():
    """A hang guard only (no time is measured): GET / answers while several requests
    replay costly links in parallel threads."""
    app = make_test_app()
    tokens = [attack_token(1024, [m.replace("b) %", f"b + {i}) %") for m in MAPS])
              for i in range(6)]
    statuses: list[int] = []

    def replay(tok):
        r = app.test_client().get(f"/explore/matmul?m=1024&n=1024&k=1024&t={tok}")
        statuses.append(r.status_code)
    threads = [threading.Thread(target=replay, args=(t,), daemon=True) for t in tokens]
    for t in threads:
        t.start()
    got: list[int] = []
    gallery = threading.Thread(target=lambda: got.append(app.test_client().get("/").status_code),
                               daemon=True)
    gallery.start()
    gallery.join(timeout=120)
    assert got == [200], "GET / did not answer while links were replayed"
    for t in threads:
        t.join(timeout=300)
    assert statuses == [400] * len(tokens)
