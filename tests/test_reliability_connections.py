"""The real server in classroom mode (``python -m app --classroom`` on 127.0.0.1): the class
link's token, clients that trickle their headers (dropped after ``--client-timeout``), and
the cap on connections per client address (``--per-client-connections``), while the server
keeps answering everyone else.  Timeouts here are hang guards only."""
from __future__ import annotations

import http.client
import os
import re
import socket
import time

import pytest

from live_server import free_port, log_text, start_app, stop_app, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAP = 6                 # --per-client-connections
HANG_GUARD_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(port, token) of a classroom server on 127.0.0.1 with a 1 s header timeout."""
    port = free_port()
    proc = start_app(["--classroom", "--host", "127.0.0.1", "--port", str(port),
                      "--measure-workers", "1",
                      "--instance", str(tmp_path_factory.mktemp("instance")),
                      "--client-timeout", "1", "--per-client-connections", str(CAP)],
                     tmp_path_factory.mktemp("log"))

    def class_link_token():
        m = re.search(r"class link: http://127\.0\.0\.1:%d/\?token=([\w-]+)" % port,
                      log_text(proc))
        if m and get(port, "/static/favicon.svg", token=m.group(1))[0] == 200:
            return m.group(1)
        return None

    try:
        token = wait_until(proc, class_link_token)
    except RuntimeError as e:
        pytest.fail(str(e))
    yield port, token
    stop_app(proc)


def get(port: int, path: str, token: str | None = None, conn=None,
        headers: dict | None = None) -> tuple[int, dict, str]:
    """One GET (on ``conn`` if given, kept open), with the access cookie if ``token``."""
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD_S)
    h = dict(headers or {})
    if token:
        h["Cookie"] = f"explorer_access={token}"
    c.request("GET", path, headers=h)
    r = c.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    if conn is None:
        c.close()
    return out


def is_refused(sock: socket.socket) -> bool:
    """Whether the server answered this fresh connection "503" or closed it unanswered."""
    sock.settimeout(HANG_GUARD_S)
    try:
        sock.sendall(b"GET /static/favicon.svg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = sock.recv(200)
    except OSError:           # reset: closed before our request was read
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 503")


def test_the_class_link_token_is_asked_on_the_real_server(server):
    port, token = server
    st, _, page = get(port, "/")
    assert st == 403 and "ask your teacher for the class link" in page
    st, headers, _ = get(port, f"/?token={token}")
    assert st == 200
    assert headers["set-cookie"].startswith(f"explorer_access={token};")
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
    assert get(port, "/explore/mm_relu?n=16", token=token)[0] == 200
    assert get(port, "/?token=wrong")[0] == 403
    st, _, page = get(port, "/", token=token, headers={"Host": "evil.example"})
    assert st == 400 and "does not answer to the name" in page


def test_a_connection_beyond_the_cap_of_one_address_is_refused(server):
    port, token = server
    held = [http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD_S)
            for _ in range(CAP)]
    try:
        for c in held:                       # each kept alive after one answered request
            assert get(port, "/static/favicon.svg", token=token, conn=c)[0] == 200
        extra = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
        try:
            assert is_refused(extra)
        finally:
            extra.close()
        # the connections already open are still served
        assert get(port, "/", token=token, conn=held[0])[0] == 200
        held.pop().close()
        # a closed one frees its place (the server notices the close within moments)
        for _ in range(int(HANG_GUARD_S / 0.2)):
            try:
                if get(port, "/static/favicon.svg", token=token)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("a place freed by a closed connection was never given again")
    finally:
        for c in held:
            c.close()


def test_slow_clients_are_dropped_while_others_are_served(server):
    port, token = server
    slow = [socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
            for _ in range(CAP - 2)]
    open_ = set(range(len(slow)))
    try:
        for s in slow:
            s.sendall(b"GET / HTTP/1.1\r\n")
            s.setblocking(False)
        served_meanwhile = False
        deadline = time.monotonic() + HANG_GUARD_S
        lines = 0
        while open_ and time.monotonic() < deadline:
            for i in sorted(open_):          # one more header line each, a line at a time
                try:
                    if slow[i].recv(1 << 16) == b"":
                        open_.discard(i)
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    open_.discard(i)
                    continue
                try:
                    slow[i].send(b"X-Slow-%d: %d\r\n" % (i, lines))
                except OSError:
                    open_.discard(i)
            lines += 1
            if not served_meanwhile and open_:
                # a fresh client is answered while the slow ones hold their connections
                served_meanwhile = get(port, "/static/favicon.svg", token=token)[0] == 200
            time.sleep(0.2)
        assert not open_, f"{len(open_)} trickling clients were still connected after " \
                          f"{HANG_GUARD_S:g} s ({lines} header lines each)"
        assert served_meanwhile
        # their places are free again: a whole browser's worth of connections is served
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD_S)
                 for _ in range(CAP)]
        try:
            assert all(get(port, "/static/favicon.svg", token=token, conn=c)[0] == 200
                       for c in conns)
        finally:
            for c in conns:
                c.close()
    finally:
        for s in slow:
            s.close()
