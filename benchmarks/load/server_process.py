"""The server under load, as a process: start it on 127.0.0.1, stop it, read its memory.

Used by ``load_test.py``.  In classroom mode the server asks for the class link's token: the
link printed in its log gives the cookie the clients send (:func:`class_cookie`).
"""
from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = "127.0.0.1"
SERVER_LOG = os.path.join(tempfile.gettempdir(), "schedule-explorer-load-server.log")


def class_cookie(port: int) -> str | None:
    """The access cookie of the class link in the server's log (classroom mode), if any."""
    try:
        with open(SERVER_LOG) as f:
            m = re.search(r"http://[^\s/]+:%d/\?token=([\w-]+)" % port, f.read())
    except OSError:
        return None
    return f"explorer_access={m.group(1)}" if m else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def tree_rss(pid: int) -> tuple[int | None, int]:
    """(server RSS, total RSS of its child processes — workers, forkserver) in KiB."""
    kids, todo = [], children(pid)
    while todo:
        c = todo.pop()
        kids.append(c)
        todo += children(c)
    return rss_kib(pid), sum(rss_kib(c) or 0 for c in kids)


def start_server(port: int, extra: list[str]) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    log = open(SERVER_LOG, "w")
    cmd = [sys.executable, "-m", "app"]
    proc = subprocess.Popen([*cmd, "--port", str(port), *extra],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited at start (code {proc.returncode}); "
                             f"see {SERVER_LOG}")
        try:
            c = http.client.HTTPConnection(HOST, port, timeout=5)
            cookie = class_cookie(port)
            c.request("GET", "/", headers={"Cookie": cookie} if cookie else {})
            if c.getresponse().status == 200:
                c.close()
                return proc
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    raise SystemExit(f"the server did not answer within 90 s; see {SERVER_LOG}")


def stop_server(proc: subprocess.Popen) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    return proc.returncode
