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



# --------------------------------------------------------------------------- the attacker
def _token(insts: list, workload: dict | None = None) -> str:
    import base64
    import json
    doc = {"format": "schedule-explorer/trace", "version": 1, "workload": workload,
           "insts": insts}
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def _src(text: str) -> str:
    import base64
    import zlib
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode().rstrip("=")


_ONE_LOOP = '''@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.func_attr({{"global_symbol": "f", "tir.noalias": True}})
    for i in T.serial({n}):
        with T.block("B"):
            vi = T.axis.spatial({n}, i)
            A[0] = A[0] + 1.0
'''


def sampling_link(k: int) -> str:
    """A loop of a huge prime extent and a SamplePerfectTile without a decision (it took 64
    s of trial division in the web process)."""
    primes = [(1 << 61) - 1, (1 << 31) - 1, 4294967291 * 4294967279, (1 << 64) - 59]
    n = primes[k % len(primes)]
    insts = [["GetBlock", [], ["B", "f"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]],
             ["SamplePerfectTile", ["l1"], [2 + k % 3, 16], [f"v{j}" for j in range(2 + k % 3)]]]
    return f"/explore/custom?src={_src(_ONE_LOOP.format(n=n))}&t={_token(insts)}"


def fuse_split_link(k: int, rounds: int = 20) -> str:
    """Rounds of fuse then split of mm_relu's Y (each doubled the loop names: a 220 MB page)."""
    n = 16 * (1 + k % 8)
    insts = [["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
             ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]]
    i, j, c = "l1", "l2", 4
    for _ in range(rounds):
        fused, a, b = f"l{c}", f"l{c + 1}", f"l{c + 2}"
        insts += [["Fuse", [i, j], [True], [fused]],
                  ["Split", [fused, None, n], [True, False], [a, b]]]
        i, j, c = a, b, c + 3
    return f"/explore/mm_relu?n={n}&t={_token(insts, {'name': 'mm_relu', 'params': {'n': n}})}"


def doubling_link(k: int) -> str:
    """A chain of stages each reading its producer twice, every stage inlined: the program
    doubles at every step."""
    stages = 22 + k % 4
    lines = ['@T.prim_func',
             'def f(A: T.Buffer((4,), "float32"), Z: T.Buffer((4,), "float32")):',
             '    T.func_attr({"global_symbol": "f", "tir.noalias": True})']
    lines += [f'    B{s} = T.alloc_buffer((4,))' for s in range(stages)]
    prev = "A"
    for s in range(stages):
        lines += ['    for i in range(4):', f'        with T.block("S{s}"):',
                  '            vi = T.axis.spatial(4, i)',
                  f'            B{s}[vi] = {prev}[vi] + {prev}[vi]']
        prev = f"B{s}"
    lines += ['    for i in range(4):', '        with T.block("Z"):',
              '            vi = T.axis.spatial(4, i)', f'            Z[vi] = {prev}[vi]']
    insts = []
    for s in range(stages):
        insts += [["GetBlock", [], [f"S{s}", "f"], [f"b{s}"]], ["ComputeInline", [f"b{s}"], [], []]]
    return f"/explore/custom?src={_src(chr(10).join(lines))}&t={_token(insts)}"


def long_import(steps: int = 10_000) -> bytes:
    import json
    insts = [["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]]
    insts += [["Annotate", ["l1", f'"v{s}"'], ["note"], []] for s in range(steps)]
    return json.dumps({"format": "schedule-explorer/trace", "version": 1,
                       "workload": {"name": "mm_relu", "params": {"n": 16}},
                       "insts": insts}).encode()


def hostile_models() -> list[tuple[str, bytes]]:
    """The ONNX files of the attack: a folded Conv padded by 16000 (4.5 GB), a forward pass
    of tens of GFLOP in 18 KB (its reference cost 29 s per poll), a Gemm whose alpha is a
    list (a 500), a 74-byte model uploaded again and again (evicted another's upload)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def make(nodes, inputs, outputs, inits=()):
        g = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                         for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            [numpy_helper.from_array(np.asarray(a, dtype="float32"), n) for n, a in inits])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    one = np.ones((1, 1, 1, 1))
    pads = make([helper.make_node("Conv", ["c", "w"], ["k"], pads=[16000] * 4,
                                  strides=[16000, 16000]),
                 helper.make_node("Add", ["x", "k"], ["y"])],
                [("x", [1, 1, 3, 3])], ["y"], [("c", one), ("w", one)])
    chain = [helper.make_node("MatMul", ["a", "b"], ["w"])]       # a 2048 x 2048 weight,
    chain += [helper.make_node("MatMul", ["x" if s == 0 else f"h{s}", "w"],   # folded
                               [f"h{s + 1}" if s < 7 else "y"]) for s in range(8)]
    flops = make(chain, [("x", [2048, 2048])], ["y"],
                 [("a", np.ones((2048, 1))), ("b", np.ones((1, 2048)))])
    alpha = helper.make_node("Gemm", ["x", "w"], ["y"])
    alpha.attribute.append(helper.make_attribute("alpha", [1.0, 2.0]))
    alist = make([alpha], [("x", [1, 4])], ["y"], [("w", np.ones((4, 2)))])
    return [("pads", pads), ("flops", flops), ("alpha-list", alist), ("tiny", tiny_model(0))]


def tiny_model(k: int) -> bytes:
    """A model of one Relu, about 80 bytes; ``k`` varies its input's width (new files)."""
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4 + k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


class Attacker:
    """One client sending the links and uploads of the second trust round, one after the
    other, from one address, with a fresh cookie (or none) each time: sampling on huge
    primes, fuse+split name doubling, a doubling program, a 10,000-step import, hostile
    ONNX uploads (and polls of their pages), a 9,000-character trace on the model page."""

    def __init__(self, port: int, cookie: str | None = None, pause: float = 0.05):
        self.port = port
        self.cookie = cookie
        self.pause = pause
        self.sent = 0
        self.statuses: dict[int, int] = {}
        self.errors = 0
        self.seconds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="attacker", daemon=True)

    def start(self) -> "Attacker":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def _request(self, method: str, path: str, body: bytes | None = None,
                 ctype: str | None = None) -> tuple[int, str, str]:
        import time
        c = http.client.HTTPConnection(HOST, self.port, timeout=120,
                                       source_address=(loopback_address(4, 0), 0))
        h = {"Host": f"{HOST}:{self.port}", "Origin": f"http://{HOST}:{self.port}"}
        if self.cookie:
            h["Cookie"] = self.cookie
        if ctype:
            h["Content-Type"] = ctype
        t0 = time.perf_counter()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            text = r.read().decode("utf-8", "replace")
            self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
            return r.status, r.getheader("Location") or "", text
        except OSError:
            self.errors += 1
            return 0, "", ""
        finally:
            self.seconds.append(time.perf_counter() - t0)
            self.sent += 1
            c.close()

    def _upload(self, name: str, data: bytes, path: str = "/model/onnx") -> str:
        boundary = "----attacker"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        st, loc, _ = self._request("POST", path, body,
                                   f"multipart/form-data; boundary={boundary}")
        return loc if st == 303 else ""

    def _run(self) -> None:
        models = hostile_models()
        k = 0
        while not self._stop.is_set():
            kind = k % 7
            if kind == 0:
                self._request("GET", sampling_link(k))
            elif kind == 1:
                self._request("GET", fuse_split_link(k))
            elif kind == 2:
                self._request("GET", doubling_link(k))
            elif kind == 3:
                self._upload("trace.json", long_import(), "/import")
            elif kind == 4:
                name, data = models[k % len(models)]
                loc = self._upload(name + ".onnx", data)
                if loc:
                    self._request("GET", loc)
                    self._request("GET", loc.replace("?", "/measure?", 1))
            elif kind == 5:
                for j in range(20):                      # a burst of tiny uploads
                    self._upload("tiny.onnx", tiny_model(k * 20 + j))
            else:
                self._request("POST", "/model/mlp/apply?batch=1",
                              b"func=linear0&trace=" + b"z" * 9000,
                              "application/x-www-form-urlencoded")
            k += 1
            self._stop.wait(self.pause)

    def report(self) -> str:
        sts = ", ".join(f"{s}x{c}" for s, c in sorted(self.statuses.items()))
        slow = sorted(self.seconds)[-1] if self.seconds else 0.0
        return (f"attacker: {self.sent} requests ({sts}), connection errors {self.errors}, "
                f"slowest answer {slow:.2f} s")
