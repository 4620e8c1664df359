"""The measurement workers are a sandbox: a worker is replaced after any failed job, has no
network, runs under CPU-time and file-size limits with no inherited descriptors, and its
replies are plain JSON that the server checks (never a pickle from a process that ran
untrusted code)."""
from __future__ import annotations

import os
import socket

import pytest

from app.service import Job, MeasurePool, PoolConfig

MiB = 1 << 20


@pytest.fixture(scope="module")
def pool():
    p = MeasurePool(PoolConfig(workers=2, allow_debug=True, time_limit_s=20.0,
                               memory_bytes=768 * MiB, queue_length=16,
                               reply_max_bytes=1 * MiB))
    yield p
    p.close()


def echo_ok(pool):
    r = pool.run(Job.debug("echo", "still serving"), timeout=120)
    assert r.status == "ok", r
    return r


@pytest.mark.parametrize("job", [Job.debug("raise", "boom"),
                                 Job.for_program("this is not TVMScript",
                                                 actions=("compile",))],
                         ids=["python-error", "refused-program"])
def test_a_failed_job_is_followed_by_a_new_worker(pool, job):
    r = pool.run(job, timeout=120)
    assert r.status == "error", r
    assert r.worker_pid not in pool.worker_pids()
    assert echo_ok(pool).worker_pid != r.worker_pid


def test_a_worker_has_no_network(pool):
    reason = pool.network_warning(timeout=120)
    if reason:
        pytest.skip(reason)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.setblocking(False)
        r = pool.run(Job.debug("connect", srv.getsockname()[1]), timeout=120)
        assert r.status == "ok", r
        assert r.data["connected"] is False
        assert "unreachable" in r.data["error"] or "refused" in r.data["error"]
        with pytest.raises(BlockingIOError):
            srv.accept()                         # nothing ever reached the listener


def test_a_worker_runs_under_cpu_time_and_file_size_limits(pool):
    r = pool.run(Job.debug("limits"), timeout=120)
    assert r.status == "ok", r
    cpu_soft, _ = r.data["rlimits"]["CPU"]
    fsize_soft, _ = r.data["rlimits"]["FSIZE"]
    assert cpu_soft != -1 and cpu_soft >= pool.config.time_limit_s   # generous, but set
    assert fsize_soft == pool.config.file_size_bytes
    w = pool.run(Job.debug("write", 2 * fsize_soft), timeout=120)
    assert w.data["written"] is None and "File too large" in w.data["error"], w


def test_a_worker_runs_below_the_server_s_priority(pool):
    """Interactive work first: a worker's niceness is the server's plus ``nice``."""
    r = pool.run(Job.debug("limits"), timeout=120)
    assert r.status == "ok", r
    assert pool.config.nice > 0
    assert r.data["nice"] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + pool.config.nice)


def test_a_worker_holds_only_stdio_and_its_pipe(pool):
    r = pool.run(Job.debug("limits"), timeout=120)
    assert r.status == "ok", r
    fds = r.data["fds"]
    assert set(fds) == {"0", "1", "2", str(r.data["pipe"])}, fds
    assert fds["0"] == os.devnull


@pytest.mark.parametrize("kind", ["pickle", "garbage", "shape", "huge"])
def test_a_reply_that_is_not_the_protocols_json_is_a_failed_job(pool, kind, tmp_path):
    marker = tmp_path / "unpickled-by-the-server"
    arg = {"pickle": ["pickle", str(marker)], "huge": ["huge", 2 * MiB]}.get(kind, [kind])
    r = pool.run(Job.debug("reply", arg), timeout=120)
    assert not marker.exists(), "the server unpickled bytes from a worker"
    assert r.status == "crashed", r
    assert "malformed reply" in r.message
    assert r.worker_pid not in pool.worker_pids()
    echo_ok(pool)


def _as_nobody(body) -> str:
    """``body()``'s text, run in a forked child that has dropped to uid/gid 65534 (an
    ordinary user); the child's own failure is reported, not hidden."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, body().encode())
        except BaseException as e:  # noqa: BLE001 - the parent reports it
            os.write(w, f"child failed: {e!r}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    assert not got.startswith("child failed"), got
    return got


needs_root = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                                reason="needs root to drop to an unprivileged user")


@needs_root
def test_an_unprivileged_worker_gets_a_network_namespace_through_a_user_namespace():
    import encodings.idna  # noqa: F401 - imported here: the child may not read the library
    from app.service.worker import isolate_network

    def isolate_then_connect() -> str:
        reason = isolate_network()
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=2).close()
            outcome = "connected"
        except OSError as e:
            outcome = f"{type(e).__name__}"
        return f"{reason}|{outcome}"

    reason, outcome = _as_nobody(isolate_then_connect).split("|")
    if reason != "None":
        pytest.skip(reason)
    assert outcome == "OSError"


@needs_root
def test_when_no_namespace_is_allowed_the_worker_says_why():
    """An unprivileged process with a second thread may create neither namespace (the
    user-namespace route needs a single thread): the reason is a sentence, not a crash."""
    import threading
    from app.service.worker import isolate_network

    def isolate_with_a_second_thread() -> str:
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        return str(isolate_network())

    reason = _as_nobody(isolate_with_a_second_thread)
    assert reason.startswith("this kernel does not allow new network namespaces ("), reason
    assert "nor user namespaces (" in reason


def test_the_pool_logs_once_that_workers_have_network_access(caplog):
    with MeasurePool(PoolConfig(workers=1, allow_debug=True)) as p:
        p.network_warning(timeout=120)                       # the real worker's report
        caplog.clear()
        reason = "this kernel does not allow new network namespaces (Operation not permitted)"
        p.worker_ready(None, {"network": reason})
        p.worker_ready(None, {"network": reason})
        assert p.network_warning(0) == f"measurement workers have network access: {reason}"
    said = [r for r in caplog.records if "have network access" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
