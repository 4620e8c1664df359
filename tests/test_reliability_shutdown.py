"""Stopping the server stops its measurement workers at once, even mid-job, and even when
the server dies without cleaning up.

The real server (``python -m app``, one worker) is given a step whose kernel runs for
minutes (the step time limit raised to 60 s); once its worker is busy (its CPU time grows),
the server gets SIGTERM, SIGINT, SIGHUP or SIGKILL, and every process it had started (the
worker, the forkserver it was forked from, multiprocessing's resource tracker) must be gone
within :data:`GONE_WITHIN_S` seconds; after a stop signal the server exits with status 0.
Before the fix a busy worker ran on after SIGTERM/SIGHUP/SIGKILL until its job's limit, and
SIGINT waited for the job for 5 s.

The parts on their own: a closing pool kills a busy worker at once; the worker's guard
exits when its pipe to the server closes (:func:`app.service.worker.watch_parent_pipe`); and a
worker is not killed because the server thread that started it has ended (what
``PR_SET_PDEATHSIG`` would do if it were set where that thread forks the worker).
"""
from __future__ import annotations

import contextlib
import http.client
import multiprocessing
import os
import signal
import threading
import time
from urllib.parse import urlencode, urlsplit

import pytest

from live_server import free_port, log_text, start_app, stop_app, wait_until

#: seconds from the signal to the last of the server's processes gone
GONE_WITHIN_S = 3.0

ENDLESS = '''@T.prim_func
def slow(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "slow", "tir.noalias": True})
    for i, j, k in T.grid(100000, 100000, 100000):
        with T.block("B"):
            vi = T.axis.spatial(4, i % 4)
            vj = T.axis.reduce(100000, j)
            vk = T.axis.reduce(100000, k)
            B[vi] = B[vi] + A[vi]
'''

_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- processes
def children(pid: int) -> list[int]:
    """The processes ``pid`` started (any of its threads), from ``/proc``."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: its children, theirs, ..."""
    found, todo = [], children(pid)
    while todo:
        c = todo.pop()
        found.append(c)
        todo += children(c)
    return found


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time ``pid`` has used (0 once it is gone)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def busy_descendant(server: int, window_s: float = 0.5, timeout: float = 60.0) -> int:
    """A process below ``server`` whose CPU time grows by half the window: the worker
    running the endless step."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = {pid: cpu_seconds(pid) for pid in descendants(server)}
        time.sleep(window_s)
        for pid, t0 in before.items():
            if cpu_seconds(pid) - t0 >= window_s / 2:
                return pid
    raise AssertionError(f"no worker became busy within {timeout:.0f} s")


def wait_gone(pids: list[int], timeout: float) -> float | None:
    """Seconds until none of ``pids`` runs; None if some still run after ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not any(running(p) for p in pids):
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


# --------------------------------------------------------------------------- the server
def request(port: int, method: str, path: str, fields: dict | None = None,
            headers: dict | None = None) -> tuple[int, dict, str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = dict(headers or {})
    body = None
    if fields is not None:
        body = urlencode(fields)
        h["Content-Type"] = "application/x-www-form-urlencoded"
        h.setdefault("Origin", f"http://127.0.0.1:{port}")
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    finally:
        c.close()


def serving_busy_worker(tmp_path) -> tuple:
    """The server with one worker running a step that lasts a minute: (proc, port, worker pid)."""
    port = free_port()
    proc = start_app(["--port", str(port), "--measure-workers", "1",
                      "--instance", str(tmp_path / "instance"),
                      "--limit", "step_time_limit_s=60"], tmp_path)
    try:
        wait_until(proc, lambda: request(port, "GET", "/static/favicon.svg")[0] == 200)
        st, headers, html = request(port, "POST", "/explore/custom", {"program": ENDLESS})
        assert st == 303, html[:300]
        u = urlsplit(headers["Location"])
        st, _, html = request(port, "GET", f"/explore/custom/measure?{u.query}",
                              headers={"HX-Request": "true"})
        assert st == 200, html[:300]
        worker = busy_descendant(proc.pid)
    except BaseException:
        stop_app(proc)
        raise
    return proc, port, worker


def _stopped_by(sig: int, tmp_path) -> tuple:
    """Send ``sig`` to a server whose worker is busy: (seconds until every process it had
    started is gone or None, the server's exit status or None, its log)."""
    proc, _, worker = serving_busy_worker(tmp_path)
    started = descendants(proc.pid)
    assert worker in started
    try:
        proc.send_signal(sig)
        gone = wait_gone(started, GONE_WITHIN_S)
        left = [f"{pid} {_command(pid)}" for pid in started if running(pid)]
        try:
            status = proc.wait(GONE_WITHIN_S)
        except Exception:  # noqa: BLE001 - reported by the assertion
            status = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for pid in started:                  # never leave a spinning worker behind
            if running(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    return gone, status, log_text(proc), left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stop_signal_stops_the_server_and_its_busy_worker_at_once(sig, tmp_path):
    gone, status, log, left = _stopped_by(sig, tmp_path)
    assert gone is not None, (f"still running {GONE_WITHIN_S:g} s after "
                              f"{signal.Signals(sig).name}: {left}\n{log}")
    assert status == 0, f"exit status {status}\n{log}"
    assert "measurement pool:" in log            # the pool was closed, its counts printed


def test_a_killed_server_takes_its_busy_worker_with_it(tmp_path):
    gone, status, log, left = _stopped_by(signal.SIGKILL, tmp_path)
    assert status == -signal.SIGKILL
    assert gone is not None, f"still running {GONE_WITHIN_S:g} s after SIGKILL: {left}\n{log}"


# --------------------------------------------------------------------------- the parts
def test_a_closing_pool_kills_its_busy_worker_at_once():
    from app.service import Job, MeasurePool, PoolConfig
    pool = MeasurePool(PoolConfig(workers=1, allow_debug=True, time_limit_s=60))
    try:
        ticket = pool.submit(Job.debug("spin", 60))
        worker = pool.worker_pids()[0]
        t0 = cpu_seconds(worker)
        deadline = time.monotonic() + 60
        while cpu_seconds(worker) - t0 < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ticket.state == "running"
    finally:
        started = time.monotonic()
        pool.close(5)
        took = time.monotonic() - started
    assert ticket.result(1).status == "shutdown"
    assert not running(worker)
    assert took < 1.5, f"close() took {took:.1f} s"

def test_the_parent_gone_guard_fires_when_the_pipe_closes_at_the_other_end():
    from app.service.worker import watch_parent_pipe
    ours, theirs = multiprocessing.Pipe(duplex=True)
    fired = threading.Event()
    watch_parent_pipe(theirs.fileno(), on_gone=fired.set)
    assert not fired.wait(0.3)                   # the other end open: nothing happens
    ours.send(("job", {}))                       # a message waiting is not a close
    assert not fired.wait(0.3)
    assert theirs.recv() == ("job", {})          # and the guard took nothing from the pipe
    ours.close()
    assert fired.wait(2), "the guard did not notice the other end closed"
    theirs.close()


def _guarded_then_sleep(conn) -> None:        # (in a process of its own: the real os._exit)
    from app.service.worker import PARENT_GONE_EXIT, watch_parent_pipe
    watch_parent_pipe(conn.fileno())
    conn.send(PARENT_GONE_EXIT)
    time.sleep(60)


def test_the_parent_gone_guard_exits_its_process():
    ctx = multiprocessing.get_context("forkserver")
    ours, theirs = ctx.Pipe(duplex=True)
    p = ctx.Process(target=_guarded_then_sleep, args=(theirs,), daemon=True)
    p.start()
    theirs.close()
    try:
        assert ours.poll(60), "the guarded process did not start"
        code = ours.recv()
        ours.close()
        p.join(3)
        assert p.exitcode == code
    finally:
        if p.is_alive():
            p.kill()
            p.join(5)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_worker_outlives_the_thread_that_started_it(method):
    """``PR_SET_PDEATHSIG`` fires when the *thread* that forked a worker ends: a worker
    started for a server thread that has ended since keeps serving (under ``spawn`` that
    thread forked it; under the forkserver, the forkserver's main thread did)."""
    from app.service import Job, MeasurePool, PoolConfig
    made = []

    def start_pool_and_wait_until_its_worker_runs() -> None:
        pool = MeasurePool(PoolConfig(workers=1, allow_debug=True, start_method=method,
                                      time_limit_s=30))
        made.append((pool, pool.run(Job.debug("echo", 1), timeout=120)))

    starter = threading.Thread(target=start_pool_and_wait_until_its_worker_runs)
    starter.start()
    starter.join()
    pool, first = made[0]
    try:
        assert first.ok, first
        time.sleep(0.3)                       # a parent-death signal would have come by now
        again = pool.run(Job.debug("echo", 2), timeout=30)
        assert again.ok, again
        assert again.data["pid"] == first.data["pid"] and running(first.data["pid"])
    finally:
        pool.close()
