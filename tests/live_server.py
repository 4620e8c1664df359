"""The real server (``python -m app``: waitress, worker processes, the store) in a subprocess,
for tests that talk to it over HTTP or drive it with Chromium.

    proc = start_app(["--port", str(port), "--measure-workers", "1"], log_dir)
    ...               # wait_until(proc, lambda: ...) for what "ready" means to the test
    stop_app(proc)

The server writes to a log file (never a pipe nobody reads: a full pipe would block it);
``log_text(proc)`` reads it, and every failure to start quotes it.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(args: list[str], log_dir: str | os.PathLike) -> subprocess.Popen:
    """``python -m app *args`` from the repository root, its output in ``log_dir/server.log``,
    in a session of its own (so a SIGINT reaches only it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    log_path = os.path.join(os.fspath(log_dir), "server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def log_text(proc: subprocess.Popen) -> str:
    with open(proc.log_path, errors="replace") as f:  # type: ignore[attr-defined]
        return f.read()


def wait_until(proc: subprocess.Popen, ready: Callable[[], object], timeout: float = 90.0,
               poll: float = 0.1):
    """``ready()``'s first true value (an ``OSError`` counts as "not yet"); raises
    ``RuntimeError`` quoting the server's log if it exits or is not ready in ``timeout``
    seconds (a hang guard, not a measurement)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited at start:\n{log_text(proc)}")
        try:
            got = ready()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(poll)
    stop_app(proc)
    raise RuntimeError(f"the server was not ready within {timeout:.0f} s:\n{log_text(proc)}")


def stop_app(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Ask the server to stop (SIGINT, as Ctrl-C does); kill it if it does not."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
