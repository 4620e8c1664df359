"""The two hostile classmates of ``load_test.py``'s scenarios, run beside the learners.

* :class:`SlowClients` ("slow clients"): N sockets, each from its own loopback address (or
  spread over fewer), that send a request's headers a line at a time and never finish; a
  socket the server drops is counted and opened again, so the pressure lasts.
* :class:`NoisyNeighbour` ("noisy neighbour"): one client keeps K programs that run far
  past the step time limit submitted for measurement (a new one as soon as one settles).

Both only ever talk to 127.0.0.1's port of the server under test; ``stop()`` ends them.
"""
from __future__ import annotations

import http.client
import socket
import threading
from urllib.parse import urlencode, urlsplit

HOST = "127.0.0.1"

ENDLESS = '''@T.prim_func
def slow{k}(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({{"global_symbol": "slow{k}", "tir.noalias": True}})
    for i, j, k in T.grid(100000, 100000, {n}):
        with T.block("B"):
            vi = T.axis.spatial(4, i % 4)
            vj = T.axis.reduce(100000, j)
            vk = T.axis.reduce({n}, k)
            B[vi] = B[vi] + A[vi]
'''


def loopback_address(block: int, i: int) -> str:
    """A distinct loopback address per client (Linux routes all of 127/8 to this machine)."""
    return f"127.{block}.{i // 250}.{i % 250 + 2}"


class SlowClients:
    """``count`` trickling sockets over ``addresses`` source addresses, one line per ``pace``."""

    def __init__(self, port: int, count: int, addresses: int, pace: float = 1.0):
        self.port = port
        self.count = count
        self.addresses = max(1, min(addresses, count))
        self.pace = pace
        self.opened = 0
        self.dropped = 0
        self.refused_connect = 0
        self.max_open = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def start(self) -> "SlowClients":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _connect(self, i: int) -> socket.socket | None:
        try:
            s = socket.socket()
            s.bind((loopback_address(1, i % self.addresses), 0))
            s.settimeout(5)
            s.connect((HOST, self.port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: %s:%d\r\n" % (HOST.encode(), self.port))
            s.setblocking(False)
            self.opened += 1
            return s
        except OSError:
            self.refused_connect += 1
            return None

    def _run(self) -> None:
        socks: list[socket.socket | None] = [None] * self.count
        line = 0
        try:
            while not self._stop.is_set():
                for i in range(self.count):
                    if socks[i] is None:
                        socks[i] = self._connect(i)
                        continue
                    if not self._alive(socks[i], line):
                        socks[i].close()
                        socks[i] = None
                        self.dropped += 1
                self.max_open = max(self.max_open, sum(s is not None for s in socks))
                line += 1
                self._stop.wait(self.pace)
        finally:
            for s in socks:
                if s is not None:
                    s.close()

    @staticmethod
    def _alive(s: socket.socket, line: int) -> bool:
        try:
            if s.recv(1 << 16) == b"":      # closed (or answered, then closed) by the server
                return False
        except BlockingIOError:
            pass
        except OSError:
            return False
        try:
            s.send(b"X-Trickle-%d: %d\r\n" % (line, line))
            return True
        except BlockingIOError:
            return True
        except OSError:
            return False

    def report(self) -> str:
        return (f"slow clients: {self.count} sockets from {self.addresses} address(es); opened "
                f"{self.opened}, dropped by the server {self.dropped}, connects refused "
                f"{self.refused_connect}, at most {self.max_open} open at once")


class NoisyNeighbour:
    """One client keeping ``programs`` endless programs in the measurement queue."""

    def __init__(self, port: int, programs: int, cookie: str | None = None):
        self.port = port
        self.programs = programs
        self.cookie = cookie
        self.submitted = 0
        self.settled = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="noisy-neighbour", daemon=True)

    def start(self) -> "NoisyNeighbour":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _request(self, method: str, path: str, body: dict | None = None):
        c = http.client.HTTPConnection(HOST, self.port, timeout=120,
                                       source_address=(loopback_address(2, 0), 0))
        h = {"Host": f"{HOST}:{self.port}", "Origin": f"http://{HOST}:{self.port}",
             "HX-Request": "true"}
        if self.cookie:
            h["Cookie"] = self.cookie
        data = None
        if body is not None:
            data = urlencode(body)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, r.getheader("Location") or "", r.read().decode("utf-8", "replace")
        finally:
            c.close()

    def _submit(self) -> str | None:
        k = self.submitted
        self.submitted += 1
        program = ENDLESS.format(k=k, n=100000 + k)
        try:
            st, loc, _ = self._request("POST", "/explore/custom", {"program": program})
            if st != 303:
                self.errors += 1
                return None
            u = urlsplit(loc)
            path = u.path.replace("/explore/custom", "/explore/custom/measure") + "?" + u.query
            self._request("GET", path)                # asks for the measurement: queued
            return path
        except OSError:
            self.errors += 1
            return None

    def _run(self) -> None:
        pending: list[str] = []
        while not self._stop.is_set():
            while len(pending) < self.programs and not self._stop.is_set():
                path = self._submit()
                if path:
                    pending.append(path)
            still = []
            for path in pending:
                try:
                    st, _, html = self._request("GET", path)
                except OSError:
                    self.errors += 1
                    continue
                if st == 200 and 'id="measure-pending"' in html:
                    still.append(path)
                else:
                    self.settled += 1
            pending = still
            self._stop.wait(1.0)

    def report(self) -> str:
        return (f"noisy neighbour: {self.programs} endless programs kept queued; submitted "
                f"{self.submitted}, settled (over the time limit) {self.settled}, "
                f"errors {self.errors}")

