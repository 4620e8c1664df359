"""The measurement pool survives crashing, hanging and memory-hogging jobs and keeps serving;
its queue is bounded with positions; timings never overlap on one core."""
from __future__ import annotations

import os
import threading
import time

import pytest

from app.service import (Job, JobResult, MeasurePool, PoolClosed, PoolConfig, QueueFull,
                         step_dict)
from app.service.slots import TimingSlots

MiB = 1 << 20


def make_pool(**kw) -> MeasurePool:
    cfg = dict(workers=2, allow_debug=True, time_limit_s=1.0, memory_bytes=768 * MiB,
               queue_length=16)
    cfg.update(kw)
    return MeasurePool(PoolConfig(**cfg))


@pytest.fixture(scope="module")
def pool():
    p = make_pool()
    yield p
    p.close()


def wait_until(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def echo_ok(pool, value="hello"):
    r = pool.run(Job.debug("echo", value), timeout=60)
    assert r.status == "ok", r
    assert r.data["echo"] == value
    return r


def test_jobs_run_in_other_processes(pool):
    r = echo_ok(pool)
    assert r.data["pid"] != os.getpid()
    assert r.worker_pid == r.data["pid"]


def test_segfault_is_reported_and_worker_replaced(pool):
    before = pool.stats().get("crashes", 0)
    r = pool.run(Job.debug("segfault"), timeout=60)
    assert r.status == "crashed"
    assert r.message == ("the compiled program crashed (signal SIGSEGV) — "
                         "the step is kept but not measured")
    assert pool.stats()["crashes"] == before + 1
    assert r.worker_pid not in pool.worker_pids()
    echo_ok(pool)


def test_abort_is_reported(pool):
    r = pool.run(Job.debug("abort"), timeout=60)
    assert r.status == "crashed" and "SIGABRT" in r.message
    echo_ok(pool)


def test_unexpected_exit_is_reported(pool):
    r = pool.run(Job.debug("exit", 7), timeout=60)
    assert r.status == "crashed" and "exit code 7" in r.message
    echo_ok(pool)


def test_timeout_cuts_the_step_and_says_so(pool):
    r = pool.run(Job.debug("sleep", 60), timeout=60)
    assert r.status == "timeout"
    assert r.message == ("this step took longer than 1 s — measurement skipped, "
                         "the trace is kept")
    assert r.worker_pid not in pool.worker_pids()       # killed and replaced
    echo_ok(pool)


def test_cpu_bound_job_is_cut_too(pool):
    r = pool.run(Job.debug("spin", 60, time_limit_s=0.5), timeout=60)
    assert r.status == "timeout" and "longer than 0.5 s" in r.message
    echo_ok(pool)


def test_memory_hog_hits_the_worker_limit(pool):
    r = pool.run(Job.debug("alloc", 3 << 30), timeout=60)
    assert r.status == "out-of-memory"
    assert "768 MiB" in r.message and "measurement skipped" in r.message
    assert r.worker_pid not in pool.worker_pids()       # retired after a MemoryError
    echo_ok(pool)


def test_allocation_within_the_limit_succeeds(pool):
    r = pool.run(Job.debug("alloc", 64 * MiB), timeout=60)
    assert r.status == "ok" and r.data["allocated"] == 64 * MiB


def test_python_error_is_a_message_and_worker_replaced(pool):
    r1 = pool.run(Job.debug("raise", "boom"), timeout=60)
    assert r1.status == "error"
    assert "RuntimeError: boom" in r1.message and r1.failed_action == "debug:raise"
    assert "Traceback" in (r1.detail or "")               # for the log, not the page
    assert "Traceback" not in r1.message
    assert r1.worker_pid not in pool.worker_pids()        # a failed job's worker is replaced
    echo_ok(pool)


def test_partial_results_survive_a_crash(pool):
    r = pool.run(Job(actions=("debug:echo", "debug:segfault"), debug_arg="before"), timeout=60)
    assert r.status == "crashed"
    assert r.data["echo"] == "before"


def test_pool_keeps_serving_a_storm_of_bad_jobs(pool):
    kinds = ["segfault", "echo", "abort", "echo", "raise", "echo", "alloc", "echo"]
    args = {"alloc": 3 << 30, "echo": "x", "raise": "bad"}
    results: list[JobResult] = []
    lock = threading.Lock()

    def client(kind):
        r = pool.run(Job.debug(kind, args.get(kind)), timeout=120)
        with lock:
            results.append((kind, r))
    threads = [threading.Thread(target=client, args=(k,)) for k in kinds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert len(results) == len(kinds)
    expected = {"segfault": "crashed", "abort": "crashed", "echo": "ok", "raise": "error",
                "alloc": "out-of-memory"}
    for kind, r in results:
        assert r.status == expected[kind], (kind, r)
    echo_ok(pool)


def test_debug_jobs_need_allow_debug():
    with MeasurePool(PoolConfig(workers=1)) as p:
        with pytest.raises(ValueError, match="disallowed"):
            p.submit(Job.debug("segfault"))
        with pytest.raises(ValueError, match="unknown"):
            p.submit(Job(actions=("rm -rf",)))


def test_fork_is_refused():
    with pytest.raises(ValueError, match="must not fork"):
        MeasurePool(PoolConfig(start_method="fork"))


def test_queue_is_bounded_and_reports_positions():
    p = make_pool(workers=1, queue_length=2, time_limit_s=30)
    try:
        running = p.submit(Job.debug("sleep", 30))
        assert wait_until(lambda: running.position() == 0)
        assert running.state == "running"
        a = p.submit(Job.debug("echo", "a"))
        b = p.submit(Job.debug("echo", "b"))
        assert (a.position(), b.position()) == (1, 2)
        assert a.state == "queued"
        with pytest.raises(QueueFull) as e:
            p.submit(Job.debug("echo", "c"))
        assert str(e.value) == ("the server is busy, 2 steps are waiting; "
                                "try again in a moment")
        assert p.stats()["refused"] == 1
        assert p.ticket(b.id) is b
        assert a.cancel() is True
        assert a.result(0).status == "cancelled"
        assert b.position() == 1
        assert running.cancel() is False                   # already running
        with pytest.raises(TimeoutError):
            b.result(timeout=0.01)
    finally:
        p.close(timeout=0.2)
    assert running.result(5).status == "shutdown"
    assert b.result(5).status == "shutdown"
    assert b.position() is None
    with pytest.raises(PoolClosed):
        p.submit(Job.debug("echo", "late"))


def test_done_callback_and_lookup(pool):
    got = []
    done = threading.Event()
    t = pool.submit(Job.debug("echo", 42), on_done=lambda r: (got.append(r), done.set()))
    assert done.wait(60)
    assert got[0].data["echo"] == 42 and t.position() is None and t.state == "done"
    late = []
    t.add_done_callback(late.append)                        # already done: called at once
    assert late[0] is got[0]
    assert pool.ticket("no-such-ticket") is None


def _windows(results):
    return sorted(tuple(r.data["timing_window"]) for r in results)


def test_timings_never_overlap_on_one_core():
    p = make_pool(workers=3, timing_cores=[0], time_limit_s=30)
    try:
        tickets = [p.submit(Job.debug("timed", 0.25)) for _ in range(3)]
        results = [t.result(60) for t in tickets]
    finally:
        p.close()
    assert all(r.ok for r in results), results
    w = _windows(results)
    for (s0, e0), (s1, e1) in zip(w, w[1:]):
        assert s1 >= e0, f"timings overlapped: {w}"
    assert all(r.data["cores"] == [0] for r in results)
    if hasattr(os, "sched_getaffinity"):
        assert all(r.data["affinity"] == [0] for r in results)   # pinned while timing


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_two_cores_time_concurrently_but_parallel_code_takes_all():
    # Control: with two slots, two timings do run at the same time (so the test above can fail).
    p = make_pool(workers=3, timing_cores=[0, 1], time_limit_s=30)
    try:
        results = [t.result(60) for t in [p.submit(Job.debug("timed", 1.0)) for _ in range(2)]]
        (s0, e0), (s1, e1) = _windows(results)
        assert s1 < e0, "two slots should let two timings overlap"
        assert sorted(results[0].data["cores"] + results[1].data["cores"]) == [0, 1]
        # A timing that needs every core (parallel code) overlaps no other timing.
        ex = p.submit(Job.debug("timed", 0.3, debug_cores=2))
        singles = [p.submit(Job.debug("timed", 0.3)) for _ in range(2)]
        rex = ex.result(60)
        rs = [t.result(60) for t in singles]
    finally:
        p.close()
    assert rex.data["cores"] == [0, 1]
    # (the one slot the pool may have taken with that job was given back, then both asked for)
    assert rex.data["slot_came_with_job"] is False
    a0, a1 = rex.data["timing_window"]
    for r in rs:
        b0, b1 = r.data["timing_window"]
        assert b1 <= a0 or b0 >= a1, "a single-core timing overlapped a parallel one"


def test_a_free_slot_comes_with_the_job_and_a_taken_one_is_waited_for():
    # A job whose first action takes a core slot is sent with a free one (no round trip
    # through the server); when the only slot is taken, the job asks for it and waits.
    p = make_pool(workers=2, timing_cores=[0], time_limit_s=30)
    try:
        alone = p.run(Job.debug("timed", 0.0), timeout=60)
        tickets = [p.submit(Job.debug("timed", 0.4)) for _ in range(2)]
        both = [t.result(60) for t in tickets]
        after = p.stats()["free_timing_slots"]
    finally:
        p.close()
    assert alone.ok and alone.data["slot_came_with_job"] is True and alone.data["cores"] == [0]
    assert all(r.ok for r in both), both
    assert sorted(r.data["slot_came_with_job"] for r in both) == [False, True]
    (s0, e0), (s1, e1) = _windows(both)
    assert s1 >= e0, "the slot taken with a job was shared"
    assert after == 1                       # every slot is back once the jobs are done


def test_a_slot_taken_for_a_job_that_never_asks_is_released():
    p = make_pool(workers=1, timing_cores=[0], time_limit_s=30)
    try:
        # a step job whose program does not load: it fails before asking for its slot
        r = p.run(Job(actions=("step",), program="this is not TVMScript"), timeout=60)
        free = p.stats()["free_timing_slots"]
        ok = p.run(Job.debug("timed", 0.0), timeout=60)
    finally:
        p.close()
    assert r.status == "error", r
    assert free == 1
    assert ok.ok and ok.data["slot_came_with_job"] is True


def test_try_acquire_never_waits_nor_jumps_the_line():
    slots = TimingSlots([0, 1])
    assert slots.try_acquire(3) == [0, 1]          # clamped to the cores there are
    assert slots.try_acquire(1) is None            # none free: None at once
    slots.release([0, 1])
    first = slots.acquire(1)
    waiter = threading.Thread(target=lambda: slots.release(slots.acquire(2)))
    waiter.start()
    assert wait_until(lambda: len(slots._waiting) == 1)
    assert slots.try_acquire(1) is None            # one is free, but a request waits
    slots.release(first)
    waiter.join(5)
    assert slots.try_acquire(1) == [0]
    slots.close()
    assert slots.try_acquire(1) is None


def test_waiting_for_a_timing_slot_does_not_count_against_the_time_limit():
    p = make_pool(workers=2, timing_cores=[0], time_limit_s=1.0)
    try:
        results = [t.result(60) for t in [p.submit(Job.debug("timed", 0.6)) for _ in range(2)]]
    finally:
        p.close()
    assert [r.status for r in results] == ["ok", "ok"], results


def test_close_stops_every_worker():
    p = make_pool(workers=2)
    echo_ok(p)
    pids = [pid for pid in p.worker_pids() if pid]
    p.close()
    for pid in pids:
        assert wait_until(lambda: not _alive(pid), 10), f"worker {pid} still alive"
    p.close()                                             # idempotent


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped while being read
        return False


def test_timing_slots_are_fifo_fair():
    slots = TimingSlots([0, 1])
    first = slots.acquire(1)
    order = []
    big_started = threading.Event()

    def big():
        big_started.set()
        got = slots.acquire(2)                             # waits for both cores
        order.append("big")
        slots.release(got)

    def small():
        got = slots.acquire(1)
        order.append("small")
        slots.release(got)
    tb = threading.Thread(target=big)
    tb.start()
    big_started.wait()
    assert wait_until(lambda: len(slots._waiting) == 1)
    ts = threading.Thread(target=small)
    ts.start()
    assert wait_until(lambda: len(slots._waiting) == 2)
    assert order == []          # one core is free, but "small" queued behind "big"
    slots.release(first)
    tb.join(5)
    ts.join(5)
    assert order == ["big", "small"]
    assert slots.free == 2


def test_step_dict_for_failures():
    r = JobResult("timeout", "this step took longer than 5 s — measurement skipped, the trace is kept",
                  data={"step": None})
    d = step_dict(r, "abc")
    assert d["ok"] is False and d["hash"] == "abc" and d["status"] == "timeout"
    assert d["error"].startswith("this step took longer than 5 s")
    ok = step_dict(JobResult("ok", data={"step": {"hash": "abc", "ok": True, "stage": "done"}}),
                   "abc")
    assert ok["ok"] is True and ok["stage"] == "done"


def test_worker_killed_while_idle_is_replaced(pool):
    import signal
    r = echo_ok(pool)
    os.kill(r.worker_pid, signal.SIGKILL)
    assert wait_until(lambda: not _alive(r.worker_pid), 10)
    for _ in range(4):                                     # whichever worker gets them
        echo_ok(pool)


def test_workers_are_recycled_after_many_jobs():
    p = make_pool(workers=1, max_jobs_per_worker=2)
    try:
        pids = [p.run(Job.debug("echo", i), timeout=60).data["pid"] for i in range(5)]
    finally:
        p.close()
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
    assert p.stats()["recycled"] == 2


def test_a_worker_that_has_exited_is_not_running_before_its_parent_has_told():
    """A zombie (exited, not yet reaped) counts as gone: under the forkserver, is_alive()
    learns of an exit only when the forkserver reports it, and a job sent in between went
    to a dead worker (it came back "crashed")."""
    import subprocess
    from app.service.supervisor import _exited
    child = subprocess.Popen(["true"])
    assert wait_until(lambda: not _alive(child.pid), 10)   # a zombie: nobody waited yet
    assert _exited(child.pid)
    child.wait()
    assert _exited(child.pid)                              # reaped: gone
    assert not _exited(os.getpid())
    assert not _exited(None)
