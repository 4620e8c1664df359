"""What a click sends to the measurement workers: its program pickled once (the step job and
the cache simulation's job carry the same bytes) with the server's structural hash, which
the worker's step dict reports instead of hashing the program again."""
from __future__ import annotations

import pickle

from app.service import timing
from app.service.protocol import module_bytes, step_job
from engine import Schedule, workloads
from engine.ir import structural_hash

from inline_service import drain, make_test_app

HX = {"HX-Request": "true"}


def split_mm_relu(n: int = 16):
    sch = Schedule(workloads.get("mm_relu", n=n))
    j = sch.get_loops(sch.get_block("Y"))[1]
    sch.split(j, factors=[None, 4])
    return sch.mod


def test_a_module_is_pickled_once_and_unpickles_to_the_same_program():
    mod = split_mm_relu()
    data = module_bytes(mod)
    assert module_bytes(mod) is data
    assert structural_hash(pickle.loads(data)) == structural_hash(mod)
    # another module object of the same program is pickled for itself
    other = split_mm_relu()
    assert module_bytes(other) is not data
    assert module_bytes(other) == data


def test_a_step_job_carries_the_hash_it_is_given():
    mod = split_mm_relu()
    job = step_job(mod, "mm_relu", {"n": 16}, program_hash="abc")
    assert job.program_hash == "abc"
    assert job.to_wire()["program_hash"] == "abc"
    assert step_job(mod, "mm_relu", {"n": 16}).program_hash is None


def test_measure_step_reports_the_given_hash_or_hashes_the_program():
    mod = split_mm_relu()
    given = timing.measure_step(mod, "mm_relu", {"n": 16}, program_hash="from-the-server")
    assert given["hash"] == "from-the-server" and given["correct"] is True
    own = timing.measure_step(mod, "mm_relu", {"n": 16})
    assert own["hash"] == structural_hash(mod) and own["correct"] is True


def test_a_click_sends_its_program_once_with_the_servers_hash():
    app = make_test_app()
    c = app.test_client()
    r = c.post("/explore/mm_relu/apply", headers=HX,
               data={"n": "16", "sel": "L/mm_relu/1/Y", "primitive": "split",
                     "factors": "None, 4"})
    assert r.status_code == 200, r.data[:300]
    drain(app)
    jobs = app.extensions["measurer"].pool.jobs
    step = next(j for j in jobs if j.actions == ("step",))
    cache = next(j for j in jobs if j.actions == ("cache",))
    assert step.module is cache.module                   # pickled once
    mod = pickle.loads(step.module)
    assert step.program_hash == structural_hash(mod)
    # the stored step is the program's, checked right
    with app.app_context():
        stored = app.extensions["measurer"].cached(mod, "mm_relu", {"n": 16}, "mm_relu")
    assert stored["hash"] == structural_hash(mod) and stored["correct"] is True
