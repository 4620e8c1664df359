"""The measurement queue is fair between clients: one learner's many slow steps do not make
everyone else wait for all of them (round-robin per client, urgent jobs first), the queue
position the page shows is the order jobs are taken in, and one client's waiting jobs are
capped."""
from __future__ import annotations

import time

import pytest

from app.service import Job, MeasurePool, PoolConfig, QueueFull
from app.service.queue import JobQueue
from app.service.tickets import Ticket

from inline_service import drain, make_test_app, settled


def ticket(queue, client, name=None, urgent=False):
    t = Ticket(queue, Job.debug("echo", name or client, client=client))
    queue.put(t, urgent)
    return t


def take_all(queue):
    order = []
    while queue.waiting():
        order.append(queue.take())
    return order


def test_one_clients_twelve_jobs_make_another_wait_for_at_most_the_running_ones():
    workers = 2
    q = JobQueue(32)
    a = [ticket(q, "A", f"A{i}") for i in range(12)]
    running = [q.take() for _ in range(workers)]            # every worker busy with A's
    b = ticket(q, "B")
    assert running == a[:workers]
    assert b.position() == 1
    order = take_all(q)
    assert order.index(b) == 0            # B's job is next: after the `workers` running ones
    assert order[1:] == a[workers:]


def test_round_robin_between_waiting_clients_and_urgent_jobs_first():
    q = JobQueue(32)
    a = [ticket(q, "A", f"A{i}") for i in range(3)]
    b = [ticket(q, "B", f"B{i}") for i in range(2)]
    c = ticket(q, "C")
    u = ticket(q, "B", "urgent", urgent=True)
    assert take_all(q) == [u, a[0], b[0], c, a[1], b[1], a[2]]


def test_a_client_served_while_no_one_waited_still_goes_behind_a_newcomer():
    q = JobQueue(32)
    ticket(q, "A", "A0")
    q.take()                                          # A's job runs; nothing waits
    a = [ticket(q, "A", f"A{i}") for i in (1, 2)]
    b = ticket(q, "B")
    assert b.position() == 1
    assert take_all(q) == [b, *a]


def test_the_position_shown_is_the_order_jobs_are_taken_in():
    q = JobQueue(64)
    plan = ["A"] * 5 + ["B", "C", "A", "B"] + ["D"] * 3 + ["C"]
    tickets = [ticket(q, c, f"{c}{i}") for i, c in enumerate(plan)]
    first = q.take()                      # A has been served once: it goes behind the others
    tickets.append(ticket(q, "E", urgent=True))
    tickets.append(ticket(q, "A", "late-A"))
    waiting = [t for t in tickets if t is not first]
    predicted = sorted(waiting, key=lambda t: t.position())
    assert [t.position() for t in predicted] == list(range(1, len(waiting) + 1))
    assert take_all(q) == predicted


def test_a_cancelled_job_leaves_the_others_positions_right():
    q = JobQueue(32)
    a = [ticket(q, "A", f"A{i}") for i in range(3)]
    b = [ticket(q, "B", f"B{i}") for i in range(2)]
    assert b[0].cancel() is True
    predicted = sorted([*a, b[1]], key=lambda t: t.position())
    assert [t.position() for t in predicted] == [1, 2, 3, 4]
    assert take_all(q) == predicted == [a[0], b[1], a[1], a[2]]


def test_one_client_may_hold_only_so_many_waiting_jobs():
    q = JobQueue(32, per_client=3)
    for i in range(3):
        ticket(q, "A", f"A{i}")
    with pytest.raises(QueueFull) as e:
        ticket(q, "A", "one too many")
    assert str(e.value).startswith("you have 3 steps waiting; ")
    ticket(q, "B")                                  # others are not refused
    q.take()                                        # one of A's runs: room for one more
    ticket(q, "A", "A3")


def test_the_pool_takes_another_clients_job_before_the_rest_of_a_long_batch():
    with MeasurePool(PoolConfig(workers=2, allow_debug=True, time_limit_s=30,
                                queue_length=32, client_queue_length=16)) as pool:
        a = [pool.submit(Job.debug("sleep", 0.2, client="A")) for _ in range(12)]
        b = pool.submit(Job.debug("echo", "B", client="B"))
        assert b.result(120).status == "ok"
        for t in a:
            t.result(120)
    started = sorted([*a, b], key=lambda t: t.started)
    assert started.index(b) <= 2         # at most the two workers' jobs of A start first


def _started(ticket, polls=1200):
    for _ in range(polls):                  # a hang guard only: the worker starts in ms
        if ticket.position() == 0:
            return True
        time.sleep(0.1)
    return False


def test_the_pool_refuses_a_clients_extra_waiting_jobs():
    with MeasurePool(PoolConfig(workers=1, allow_debug=True, time_limit_s=30,
                                queue_length=32, client_queue_length=2)) as pool:
        running = pool.submit(Job.debug("sleep", 30, client="A"))
        assert _started(running)
        waiting = [pool.submit(Job.debug("echo", i, client="A")) for i in range(2)]
        with pytest.raises(QueueFull, match="^you have 2 steps waiting; "):
            pool.submit(Job.debug("echo", "extra", client="A"))
        other = pool.submit(Job.debug("echo", "B", client="B"))
        assert other.position() == 1 and [t.position() for t in waiting] == [2, 3]
        running.cancel()
        pool.close(timeout=0.2)


def test_the_measurement_pane_names_its_client():
    app = make_test_app()
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "10.1.2.3"
    settled(client, "/explore/mm_relu/measure?n=16")
    pool = app.extensions["measurer"].pool
    steps = [j for j in pool.jobs if j.actions == ("step",)]
    assert steps and {j.client for j in steps} == {"10.1.2.3"}


def test_every_pane_names_its_client():
    """The code listing and the access pattern are jobs of the requesting client too."""
    app = make_test_app({"PREFETCH_MEASUREMENTS": False})
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "10.4.5.6"
    assert client.get("/explore/mm_relu/code?n=16").status_code == 200
    assert client.get("/explore/mm_relu/pattern?n=16&sel=L/mm_relu/1/Y&iteration=1"
                      ).status_code == 200
    drain(app)
    jobs = app.extensions["measurer"].pool.jobs
    kinds = {j.actions[-1] for j in jobs}
    assert {"source", "pattern"} <= kinds, kinds
    assert {j.client for j in jobs if j.actions[-1] in ("source", "pattern")} == {"10.4.5.6"}


# ---------------------------------------------------------------------- background jobs
def step_ticket(queue, client="A"):
    t = Ticket(queue, Job(actions=("step",), client=client))
    queue.put(t)
    return t


def background_ticket(queue, client="A"):
    t = Ticket(queue, Job(actions=("cache",), client=client, background=True))
    queue.put(t)
    return t


def test_a_background_job_waits_while_a_step_compiles_then_runs():
    q = JobQueue(32)
    step = step_ticket(q)
    cache = background_ticket(q)
    assert q.take() is step and step.compiling
    assert q._next_eligible() is None                 # held: the step is compiling
    step.note({"compiled": True})                     # the worker said so
    assert not step.compiling
    assert q.take() is cache


def test_a_held_background_job_lets_a_later_job_go_ahead_and_a_finished_step_frees_it():
    q = JobQueue(32)
    step = step_ticket(q, "A")
    cache = background_ticket(q, "A")
    other = step_ticket(q, "A")
    assert q.take() is step
    assert q.take() is other                          # the held cache job is passed over
    from app.service.protocol import JobResult
    q.done(step, JobResult("ok", data={}))
    assert other.compiling                            # still compiling: cache still held
    q.done(other, JobResult("ok", data={}))
    assert q.take() is cache


def test_a_background_job_is_not_held_for_ever(monkeypatch):
    q = JobQueue(32)
    monkeypatch.setattr(JobQueue, "BACKGROUND_MAX_HOLD_S", 0.05)
    step = step_ticket(q)
    cache = background_ticket(q)
    assert q.take() is step
    t0 = time.monotonic()
    assert q.take() is cache                          # waits out the hold, then runs
    assert time.monotonic() - t0 >= 0.03
    assert step.compiling


def test_background_jobs_run_at_once_when_nothing_compiles():
    q = JobQueue(32)
    cache = background_ticket(q)
    echo = ticket(q, "B")
    assert q.take() is cache and q.take() is echo


def test_the_pool_starts_a_steps_cache_simulation_once_its_compile_has_ended():
    """With the real workers: the step's worker says when its compile has ended; the cache
    job (background) starts after that, not beside the compile."""
    import engine
    from app.service import step_job
    mod = engine.workloads.get("mm_relu", n=64)
    pool = MeasurePool(PoolConfig(workers=2, time_limit_s=60, memory_bytes=2 << 30))
    try:
        step = pool.submit(step_job(mod, "mm_relu", {"n": 64}))
        cache = pool.submit(Job(actions=("cache",), workload="mm_relu", params={"n": 64},
                                background=True))
        r = step.result(120)
        assert r.status == "ok" and cache.result(120).status == "ok"
        compile_s = r.data["step"]["compile_ms"] / 1e3
        assert r.data.get("compiled") is True
        assert cache.started - step.started >= 0.9 * compile_s
    finally:
        pool.close()
