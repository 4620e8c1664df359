"""A classroom's load on the real server: N simulated learners clicking legal and illegal things.

Starts ``python -m app --port P`` on 127.0.0.1 in a subprocess (the production waitress
server), runs N concurrent learners (threads with their own keep-alive connection) for a
bounded time, stops everything by itself and prints:

* requests/s, p50/p95/max latency overall and per kind of request;
* server errors (5xx answers, dropped connections) — must be 0;
* the server's RSS (and its measurement workers', if any) at start and at the end;
* lost measurements: applied steps whose measurement pane, polled until it settles, shows
  neither a runtime nor a reason (error, refusal, "simulate only").

A learner: opens the gallery, opens a workload (sizes at most ``--max-size``), then repeats:
select a random loop/block, fetch the toolbar, submit one of its primitive forms with its
default arguments (legal, mostly) or with mutated ones (illegal factors, stale selections,
corrupt trace tokens, out-of-range steps, cross-origin posts, garbage imports and programs);
follows the pushed URL, reloads it, looks at the measurements and the code, sometimes undoes.

Scenarios (``--scenario``), each with the learners above:

* ``learners`` (the default): nothing else;
* ``slow-clients``: ``--slow`` sockets (110) trickle a request's headers a line a second and
  never finish, each from its own loopback address (``--slow-addresses`` to use fewer);
* ``noisy-neighbour``: one client keeps ``--noisy-programs`` (12) programs that run past the
  step time limit queued for measurement; the learners' waits for their measurements (from
  the first poll to a settled pane) are reported.
* ``attacker``: two phases on one server. First the learners alone; then learners again
  (another seed) while one attacker (``adversaries.Attacker``) sends the hostile links and
  uploads of the second trust round (huge-prime sampling, fuse+split name doubling, a
  program doubling at every step, a 10,000-step import, hostile ONNX files and their
  pages, bursts of tiny uploads, a 9,000-character trace). Reports the learners' p95 in
  both phases and their ratio (must be at most 1.5), and the server's memory at the start of
  the attack and some seconds after it stops (must be back within 100 MB).

``--classroom`` serves in classroom mode (on 127.0.0.1, with its token, its per-address cap
and timeouts); every learner then connects from its own loopback address, as in a class.

Usage::

    python benchmarks/load/load_test.py                 # 30 learners, 60 s
    python benchmarks/load/load_test.py --learners 5 --duration 20 --seed 1
    python benchmarks/load/load_test.py --classroom --scenario slow-clients

Only ever talks to 127.0.0.1.  Bounds: at most 200 learners, at most 600 s.
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit

from adversaries import Attacker, NoisyNeighbour, SlowClients, loopback_address
from server_process import (HOST, SERVER_LOG, class_cookie, free_port, start_server,
                            stop_server, tree_rss)

MAX_LEARNERS = 200
MAX_DURATION = 600.0


# --------------------------------------------------------------------------- HTML scraping
class FormScraper(HTMLParser):
    """Forms (action/hx-post, inputs, selects, disabled buttons) and data-sel ids of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms: list[dict] = []
        self.sels: list[str] = []
        self.attrs_seen: dict[str, list[str]] = defaultdict(list)
        self._form: dict | None = None
        self._select: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("data-sel", "data-toolbar-url", "data-plotly", "data-points"):
            if k in a and a[k] is not None:
                self.attrs_seen[k].append(a[k])
        if a.get("data-sel"):
            self.sels.append(a["data-sel"])
        if tag == "form":
            self._form = {"action": a.get("hx-post") or a.get("action") or "",
                          "method": "post" if a.get("hx-post") else (a.get("method") or "get"),
                          "fields": {}, "choices": {}, "disabled": False,
                          "cls": a.get("class") or ""}
        elif self._form is not None:
            if tag == "input" and a.get("name"):
                if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                    self._form["fields"][a["name"]] = a.get("value") or ""
            elif tag == "textarea" and a.get("name"):
                self._form["fields"][a["name"]] = ""
            elif tag == "select" and a.get("name"):
                self._select = {"name": a["name"], "options": [], "selected": None}
            elif tag == "option" and self._select is not None:
                v = a.get("value") or ""
                self._select["options"].append(v)
                if "selected" in a:
                    self._select["selected"] = v
            elif tag == "button" and "disabled" in a:
                self._form["disabled"] = True

    def handle_endtag(self, tag):
        if tag == "select" and self._select is not None and self._form is not None:
            s = self._select
            self._form["fields"][s["name"]] = s["selected"] or (s["options"][0] if s["options"] else "")
            self._form["choices"][s["name"]] = s["options"]
            self._select = None
        elif tag == "form" and self._form is not None:
            self.forms.append(self._form)
            self._form = None


def scrape(html: str) -> FormScraper:
    p = FormScraper()
    try:
        p.feed(html)
    except Exception:  # noqa: BLE001 - a scraping problem is the page's, not a server error
        pass
    return p


# --------------------------------------------------------------------------- statistics
class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.status: Counter = Counter()
        self.server_errors: list[str] = []
        self.unexpected: Counter = Counter()
        self.applied = 0
        self.refused = 0
        self.measure_checked = 0
        self.measure_lost: list[str] = []
        self.measure_wait: list[float] = []
        self.measure_states: Counter = Counter()

    def record(self, kind: str, status: int, dt: float, path: str, body: str = ""):
        with self.lock:
            self.lat[kind].append(dt)
            self.status[(kind, status)] += 1
            if status >= 500 or status == 0:
                snippet = re.sub(r"\s+", " ", body)[:200]
                self.server_errors.append(f"{kind} {status} {path[:120]} :: {snippet}")


# --------------------------------------------------------------------------- a learner
class Learner:
    def __init__(self, idx: int, port: int, stats: Stats, deadline: float, seed: int,
                 max_size: int, workloads: list[tuple[str, dict]], timeout: float,
                 source: str | None = None, cookie: str | None = None):
        self.idx = idx
        self.port = port
        self.stats = stats
        self.deadline = deadline
        self.rng = random.Random(seed * 1000 + idx)
        self.max_size = max_size
        self.workloads = workloads
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None
        self.source = (source, 0) if source else None
        self.cookie = cookie

    # HTTP ----------------------------------------------------------------------------------
    def request(self, kind: str, method: str, path: str, fields: dict | None = None,
                headers: dict | None = None, body: bytes | None = None,
                refused_if_dropped: bool = False):
        """``(status, headers, text)``; ``refused_if_dropped``: a body the server may close
        the connection on before reading it all (over its size limit, as HTTP allows):
        a dropped connection is then its 413, not a server error."""
        h = {"Host": f"{HOST}:{self.port}", "User-Agent": f"load-learner-{self.idx}"}
        if self.cookie:
            h["Cookie"] = self.cookie
        if headers:
            h.update(headers)
        if fields is not None:
            body = urlencode(fields).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout,
                                                       source_address=self.source)
            t0 = time.perf_counter()
            try:
                self.conn.request(method, path, body=body, headers=h)
                r = self.conn.getresponse()
                data = r.read().decode("utf-8", "replace")
                dt = time.perf_counter() - t0
                self.stats.record(kind, r.status, dt, path, data if r.status >= 500 else "")
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, dict(r.getheaders()), data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection closed by the server between requests: retry once.
                self.conn.close()
                self.conn = None
                if refused_if_dropped:
                    self.stats.record(kind, 413, time.perf_counter() - t0, path, "")
                    return 413, {}, ""
                if attempt == 1:
                    self.stats.record(kind, 0, time.perf_counter() - t0, path, "connection dropped")
                    return 0, {}, ""
            except (socket.timeout, OSError) as e:
                self.conn.close()
                self.conn = None
                self.stats.record(kind, 0, time.perf_counter() - t0, path, f"{type(e).__name__}: {e}")
                return 0, {}, ""
        return 0, {}, ""

    def expect(self, kind: str, status: int, allowed: tuple[int, ...]):
        if status and status not in allowed and status < 500:
            with self.stats.lock:
                self.stats.unexpected[(kind, status)] += 1

    # behaviour -------------------------------------------------------------------------------
    def run(self):
        try:
            self.request("gallery", "GET", "/")
            url = self.open_workload()
            while time.monotonic() < self.deadline and url:
                url = self.step(url)
                time.sleep(self.rng.uniform(0.05, 0.4))          # a learner reads a little
        finally:
            if self.conn is not None:
                self.conn.close()

    def open_workload(self) -> str:
        name, params = self.rng.choice(self.workloads)
        q = {}
        for k, v in params.items():
            try:
                q[k] = min(int(v), self.max_size)
            except ValueError:
                q[k] = v
        url = f"/explore/{name}" + ("?" + urlencode(q) if q else "")
        st, _, _ = self.request("page", "GET", url)
        self.expect("page", st, (200,))
        return url if st == 200 else ""

    def step(self, url: str) -> str:
        r = self.rng.random()
        if r < 0.08:
            self.illegal_navigation(url)
            return url
        if r < 0.12:
            self.illegal_posts(url)
            return url
        if r < 0.17:
            return self.undo(url)
        if r < 0.20:
            return self.open_workload() or url
        return self.apply_something(url)

    def toolbar(self, url: str, page_html: str | None = None):
        if page_html is None:
            st, _, page_html = self.request("page", "GET", url)
            if st != 200:
                return None
        sels = scrape(page_html).sels
        if not sels:
            return None
        sel = self.rng.choice(sels)
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query))
        q["sel"] = sel
        st, _, html = self.request("toolbar", "GET", f"{parts.path}/toolbar?{urlencode(q)}",
                                   headers={"HX-Request": "true"})
        self.expect("toolbar", st, (200,))
        if st != 200:
            return None
        forms = [f for f in scrape(html).forms if f["action"].endswith("/apply")]
        return forms

    def apply_something(self, url: str) -> str:
        forms = self.toolbar(url)
        if not forms:
            return url
        form = self.rng.choice(forms)
        fields = dict(form["fields"])
        illegal = form["disabled"] or self.rng.random() < 0.35
        if illegal and not form["disabled"]:
            self.mutate(fields, form)
        headers = {"HX-Request": "true", "HX-Current-URL": f"http://{HOST}:{self.port}{url}",
                   "Origin": f"http://{HOST}:{self.port}"}
        st, hdrs, body = self.request("apply", "POST", form["action"], fields=fields,
                                      headers=headers)
        self.expect("apply", st, (200, 400, 404, 409, 413, 422))
        if st == 200:
            pushed = hdrs.get("HX-Push-Url") or hdrs.get("Hx-Push-Url")
            if pushed and pushed.startswith("/"):
                with self.stats.lock:
                    self.stats.applied += 1
                self.after_apply(pushed)
                return pushed
        elif 400 <= st < 500:
            with self.stats.lock:
                self.stats.refused += 1
        return url

    def mutate(self, fields: dict, form: dict):
        choice = self.rng.randrange(8)
        if choice == 0 and "factors" in fields:
            fields["factors"] = self.rng.choice(["7, 5", "abc", "0, 4", "-1, 4", "None, None",
                                                 "None, 3", "1e9, None", "[[[[", "None," * 20])
        elif choice == 1 and "sel" in fields:
            fields["sel"] = self.rng.choice(["L/main/9/Z", "B/x/y", "garbage", "L/mm_relu/99/Y", ""])
        elif choice == 2 and "t" in fields:
            t = fields["t"]
            fields["t"] = (t[: len(t) // 2] if t and self.rng.random() < 0.5
                           else t[::-1] + "!!" if t else "AAAA####")
        elif choice == 3:
            fields["at"] = self.rng.choice(["999", "-4", "x", ""])
        elif choice == 4:
            fields["primitive"] = self.rng.choice(["eval", "split", "compute_at", "__init__", ""])
        elif choice == 5 and form["choices"]:
            name = self.rng.choice(sorted(form["choices"]))
            fields[name] = self.rng.choice(["l99", "<script>alert(1)</script>", "None"])
        elif choice == 6:
            for k in list(fields):
                if k not in ("t", "at", "sel", "primitive") and self.rng.random() < 0.5:
                    fields[k] = self.rng.choice(["", "0", "2", "1000000", "None", "'; DROP"])
        else:
            fields.pop(self.rng.choice(sorted(fields)), None)

    def after_apply(self, url: str):
        if self.rng.random() < 0.4:
            st, _, _ = self.request("page", "GET", url)             # reload the shared link
            self.expect("page", st, (200,))
        self.check_measurement(url)
        if self.rng.random() < 0.25:
            parts = urlsplit(url)
            q = dict(parse_qsl(parts.query))
            q["kind"] = self.rng.choice(["ll-opt", "asm"])
            st, _, _ = self.request("code", "GET", f"{parts.path}/code?{urlencode(q)}",
                                    headers={"HX-Request": "true"})
            self.expect("code", st, (200,))

    def check_measurement(self, url: str):
        parts = urlsplit(url)
        path = f"{parts.path}/measure" + (f"?{parts.query}" if parts.query else "")
        first = time.monotonic()
        settle = first + 60.0
        state = "lost"
        while True:
            st, _, html = self.request("measure", "GET", path, headers={"HX-Request": "true"})
            if st != 200:
                state = f"http {st}"
                break
            state = classify_measurement(html)
            if state != "pending" or time.monotonic() > settle:
                break
            time.sleep(0.5)
        with self.stats.lock:
            if state not in ("lost", "pending") and not state.startswith("http"):
                self.stats.measure_wait.append(time.monotonic() - first)
            self.stats.measure_checked += 1
            self.stats.measure_states[state] += 1
            if state in ("lost", "pending") or state.startswith("http"):
                self.stats.measure_lost.append(f"{state}: {url[:120]}")

    def undo(self, url: str) -> str:
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query))
        if "t" not in q:
            return url
        at = q.get("at")
        try:
            k = int(at) if at is not None else None
        except ValueError:
            k = None
        # One step back from at=k, or back to the start when the URL is at the last step.
        q["at"] = str(max(0, k - 1)) if k is not None else "0"
        new = f"{parts.path}?{urlencode(q)}"
        st, _, _ = self.request("page", "GET", new, headers={"HX-Request": "true"})
        self.expect("page", st, (200,))
        return new if st == 200 else url

    def illegal_navigation(self, url: str):
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query))
        name = parts.path.rsplit("/", 1)[-1]
        bad = self.rng.choice([
            f"/explore/no_such_workload?{urlencode(q)}",
            f"/explore/{name}?{urlencode({**q, 't': 'not-a-trace!!'})}",
            f"/explore/{name}?{urlencode({**q, 't': 'A' * 9000})}",
            f"/explore/{name}?n=abc",
            f"/explore/{name}?n=99999999",
            f"/explore/{name}?n=-5",
            f"/explore/{name}?{urlencode({**q, 'at': '1000'})}",
            f"/explore/{name}/export/exe?{urlencode(q)}",
            f"/explore/{name}/code?{urlencode({**q, 'kind': '../../etc/passwd'})}",
            "/explore/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            "/static/../app/__init__.py",
        ])
        st, _, _ = self.request("bad-get", "GET", bad)
        self.expect("bad-get", st, (200, 302, 400, 403, 404, 413, 414, 422, 431))

    def illegal_posts(self, url: str):
        parts = urlsplit(url)
        name = parts.path.rsplit("/", 1)[-1]
        choice = self.rng.randrange(5)
        if choice == 0:     # cross-site forgery attempt
            st, _, _ = self.request("bad-post", "POST", f"/explore/{name}/apply",
                                    fields={"primitive": "split", "factors": "None, 4"},
                                    headers={"Origin": "http://evil.example"})
            self.expect("bad-post", st, (403,))
        elif choice == 1:   # deep JSON import
            st, _, _ = self.request("bad-post", "POST", "/import",
                                    fields={"text": "[" * 50000 + "]" * 50000})
            self.expect("bad-post", st, (200, 302, 400, 413, 422))
        elif choice == 2:   # garbage trace import
            st, _, _ = self.request("bad-post", "POST", "/import",
                                    fields={"text": json.dumps({"format": "x", "insts": [[1, 2]]})})
            self.expect("bad-post", st, (200, 302, 400, 413, 422))
        elif choice == 3:   # broken TVMScript
            st, _, _ = self.request("bad-post", "POST", "/explore/custom",
                                    fields={"program": "@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n"
                                                       "    for i in T.grid(1e99):\n        A[i] = __import__('os')\n"})
            self.expect("bad-post", st, (200, 302, 400, 413, 422))
        else:               # oversized body: refused (413), or the connection closed on it
            st, _, _ = self.request("bad-post", "POST", "/import",
                                    fields={"text": "x" * (3 << 20)}, refused_if_dropped=True)
            self.expect("bad-post", st, (400, 413, 422))


def classify_measurement(html: str) -> str:
    """"measured", "reason" (an error/refusal/simulate-only sentence), "pending" or "lost"."""
    text = re.sub(r"<[^>]+>", " ", html)
    text = re.sub(r"\s+", " ", text)
    low = text.lower()
    if re.search(r"queued|position \d|measuring|waiting for room|pending|in progress", low) and \
            "id=\"measure-now\"" not in html:
        return "pending"
    m = re.search(r'id="measure-now"[^>]*>(.*?)</p>', html, re.S)
    now = re.sub(r"<[^>]+>", " ", m.group(1)) if m else ""
    if re.search(r"queued|position \d|measuring|waiting for room", now.lower()):
        return "pending"
    if re.search(r"\d[\d.]*\s*(ms|µs|μs|us|ns|s)\b", now):
        return "measured"
    if "error-text" in (m.group(1) if m else "") or re.search(
            r"simulate only|not available|longer than|crashed|failed|refused|too large|limit",
            low):
        return "reason"
    return "lost"


def discover_workloads(port: int, cookie: str | None) -> list[tuple[str, dict]]:
    c = http.client.HTTPConnection(HOST, port, timeout=30)
    c.request("GET", "/", headers={"Cookie": cookie} if cookie else {})
    html = c.getresponse().read().decode("utf-8", "replace")
    c.close()
    out = []
    for f in scrape(html).forms:
        m = re.fullmatch(r"/explore/([A-Za-z0-9_]+)", f["action"])
        if m and m.group(1) != "custom" and f["method"].lower() == "get":
            out.append((m.group(1), dict(f["fields"])))
    return out or [("mm_relu", {"n": "64"})]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--learners", type=int, default=30)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of clicking")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-size", type=int, default=128, help="cap on workload sizes")
    ap.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    ap.add_argument("--workloads", default="", help="comma list to restrict to (default: all)")
    ap.add_argument("--warm-store", action="store_true",
                    help="use the server's default store (./instance) instead of a fresh one")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for python -m app (repeatable)")
    ap.add_argument("--classroom", action="store_true",
                    help="serve in classroom mode on 127.0.0.1 (token, per-address cap, "
                         "timeouts); each learner connects from its own loopback address")
    ap.add_argument("--scenario", choices=("learners", "slow-clients", "noisy-neighbour",
                                           "attacker"),
                    default="learners", help="who else is in the class (see above)")
    ap.add_argument("--slow", type=int, default=110, help="slow-clients: trickling sockets")
    ap.add_argument("--slow-addresses", type=int, default=0,
                    help="slow-clients: addresses they come from (default: one each)")
    ap.add_argument("--noisy-programs", type=int, default=12,
                    help="noisy-neighbour: endless programs kept queued")
    ap.add_argument("--settle", type=float, default=20.0,
                    help="attacker: seconds after the attack before the memory is read")
    args = ap.parse_args(argv)
    if args.scenario == "attacker":
        return attacker_scenario(args)
    if not 1 <= args.slow <= 400 or not 1 <= args.noisy_programs <= 64:
        ap.error("--slow must be between 1 and 400, --noisy-programs between 1 and 64")
    if not 1 <= args.learners <= MAX_LEARNERS:
        ap.error(f"--learners must be between 1 and {MAX_LEARNERS}")
    if not 1 <= args.duration <= MAX_DURATION:
        ap.error(f"--duration must be between 1 and {MAX_DURATION:g} s")

    port = free_port()
    t_start = time.monotonic()
    extra = list(args.server_arg)
    if not any(a.startswith("--instance") for a in extra) and not args.warm_store:
        # a fresh store: every step is really compiled and measured, nothing comes from
        # an earlier run
        fresh = tempfile.mkdtemp(prefix="explorer-load-")
        import atexit
        import shutil
        atexit.register(shutil.rmtree, fresh, True)
        extra += ["--instance", fresh]
    if args.classroom:
        extra += ["--classroom", "--host", HOST]
    proc = start_server(port, extra)
    cookie = class_cookie(port)
    what = "python -m app " + " ".join(extra)
    print(f"server: {what} --port {port} (pid {proc.pid}), up in "
          f"{time.monotonic() - t_start:.1f} s")
    stats = Stats()
    others: list = []
    try:
        workloads = discover_workloads(port, cookie)
        if args.workloads:
            keep = set(args.workloads.split(","))
            workloads = [w for w in workloads if w[0] in keep] or workloads
        rss0 = tree_rss(proc.pid)
        print(f"workloads: {', '.join(w for w, _ in workloads)}")
        deadline = time.monotonic() + args.duration
        learners = [Learner(i, port, stats, deadline, args.seed, args.max_size, workloads,
                            args.timeout, loopback_address(3, i) if args.classroom else None,
                            cookie) for i in range(args.learners)]
        if args.scenario == "slow-clients":
            others.append(SlowClients(port, args.slow, args.slow_addresses or args.slow).start())
        elif args.scenario == "noisy-neighbour":
            others.append(NoisyNeighbour(port, args.noisy_programs, cookie).start())
        threads = [threading.Thread(target=lr.run, name=f"learner-{i}", daemon=True)
                   for i, lr in enumerate(learners)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
            time.sleep(0.05)                         # they do not all arrive in one ms
        for t in threads:
            t.join(max(0.0, deadline + args.timeout + 30 - time.monotonic()))
        wall = time.monotonic() - t0
        stuck = sum(t.is_alive() for t in threads)
        for other in others:
            other.stop()
        rss1 = tree_rss(proc.pid)
        alive = proc.poll() is None
    finally:
        for other in others:
            other.stop()
        code = stop_server(proc)

    all_lat = [x for v in stats.lat.values() for x in v]
    n = len(all_lat)
    print(f"\nlearners: {args.learners}, duration: {args.duration:g} s (wall {wall:.1f} s), "
          f"requests: {n}, {n / wall:.1f} requests/s")
    print(f"latency: p50 {pct(all_lat, 50) * 1e3:.0f} ms, p95 {pct(all_lat, 95) * 1e3:.0f} ms, "
          f"max {max(all_lat, default=0) * 1e3:.0f} ms")
    print(f"{'kind':10} {'count':>6} {'p50 ms':>8} {'p95 ms':>8}  statuses")
    for kind in sorted(stats.lat):
        xs = stats.lat[kind]
        sts = ", ".join(f"{s}x{c}" for (k, s), c in sorted(stats.status.items()) if k == kind)
        print(f"{kind:10} {len(xs):6d} {pct(xs, 50) * 1e3:8.0f} {pct(xs, 95) * 1e3:8.0f}  {sts}")
    print(f"steps applied: {stats.applied}, refused with a reason: {stats.refused}")
    waits = stats.measure_wait
    print(f"learners' wait for a settled measurement: p50 {pct(waits, 50):.1f} s, "
          f"p95 {pct(waits, 95):.1f} s, max {max(waits, default=0):.1f} s ({len(waits)} steps)")
    for other in others:
        print(other.report())
    if stats.unexpected:
        print("unexpected (non-5xx) statuses: " +
              ", ".join(f"{k} {s} x{c}" for (k, s), c in sorted(stats.unexpected.items())))
    print(f"server errors (5xx or dropped connections): {len(stats.server_errors)}")
    for e in stats.server_errors[:10]:
        print(f"  {e}")
    mb = lambda k: f"{k / 1024:.0f} MiB" if k else "?"  # noqa: E731
    print(f"server RSS: start {mb(rss0[0])}, end {mb(rss1[0])}; worker processes: start "
          f"{mb(rss0[1])}, end {mb(rss1[1])}")
    print(f"measurements checked: {stats.measure_checked} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(stats.measure_states.items()))}); "
          f"lost: {len(stats.measure_lost)}")
    for e in stats.measure_lost[:5]:
        print(f"  {e}")
    try:
        with open(SERVER_LOG) as f:
            pool_lines = [ln.strip() for ln in f if ln.startswith("measurement pool:")]
    except OSError:
        pool_lines = []
    if pool_lines:
        print(pool_lines[-1])
    print(f"server log: {SERVER_LOG}")
    print(f"server alive at the end: {alive}; exit code after SIGINT: {code}; "
          f"learners still stuck: {stuck}")
    ok = not stats.server_errors and not stats.measure_lost and alive and not stuck
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def _fresh_instance(args) -> list[str]:
    extra = list(args.server_arg)
    if not any(a.startswith("--instance") for a in extra) and not args.warm_store:
        fresh = tempfile.mkdtemp(prefix="explorer-load-")
        import atexit
        import shutil
        atexit.register(shutil.rmtree, fresh, True)
        extra += ["--instance", fresh]
    if args.classroom:
        extra += ["--classroom", "--host", HOST]
    return extra


def _warm(port: int, cookie: str | None, path: str) -> None:
    c = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        c.request("GET", path, headers={"Host": f"{HOST}:{port}",
                                        **({"Cookie": cookie} if cookie else {})})
        c.getresponse().read()
    finally:
        c.close()


def _learners_phase(args, port, cookie, workloads, seed) -> tuple[Stats, float, int]:
    """The learners clicking for ``args.duration`` seconds: (stats, wall seconds, stuck)."""
    stats = Stats()
    deadline = time.monotonic() + args.duration
    learners = [Learner(i, port, stats, deadline, seed, args.max_size, workloads,
                        args.timeout, loopback_address(3, i) if args.classroom else None,
                        cookie) for i in range(args.learners)]
    threads = [threading.Thread(target=lr.run, name=f"learner-{i}", daemon=True)
               for i, lr in enumerate(learners)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(max(0.0, deadline + args.timeout + 30 - time.monotonic()))
    return stats, time.monotonic() - t0, sum(t.is_alive() for t in threads)


def attacker_scenario(args) -> int:
    """See the module docstring (``attacker``)."""
    import gc  # noqa: F401  (the server collects on its own; this process only waits)

    port = free_port()
    extra = _fresh_instance(args)
    proc = start_server(port, extra)
    cookie = class_cookie(port)
    print(f"server: python -m app {' '.join(extra)} --port {port} (pid {proc.pid})")
    attacker = None
    try:
        workloads = discover_workloads(port, cookie)
        if args.workloads:
            keep = set(args.workloads.split(","))
            workloads = [w for w in workloads if w[0] in keep] or workloads
        rss_start = tree_rss(proc.pid)
        # what any visitor loads once (the gallery model, trained or read from the
        # instance folder) is loaded before the phases: it is not the attack's
        _warm(port, cookie, "/model/mlp")
        quiet, wall_q, stuck_q = _learners_phase(args, port, cookie, workloads, args.seed)
        rss_before = tree_rss(proc.pid)
        attacker = Attacker(port, cookie).start()
        loud, wall_l, stuck_l = _learners_phase(args, port, cookie, workloads, args.seed + 1)
        attacker.stop()
        rss_attacked = tree_rss(proc.pid)
        time.sleep(args.settle)
        rss_after = tree_rss(proc.pid)
        alive = proc.poll() is None
    finally:
        if attacker is not None:
            attacker.stop()
        code = stop_server(proc)

    def lat(st: Stats) -> list[float]:
        return [x for v in st.lat.values() for x in v]

    q95, l95 = pct(lat(quiet), 95), pct(lat(loud), 95)
    ratio = l95 / q95 if q95 else float("inf")
    mb = lambda k: f"{k / 1024:.0f} MiB" if k else "?"  # noqa: E731
    print(f"\nlearners: {args.learners}, {args.duration:g} s per phase")
    for label, st, wall in (("without the attacker", quiet, wall_q),
                            ("with the attacker", loud, wall_l)):
        xs = lat(st)
        print(f"{label:22} requests {len(xs):5d} ({len(xs) / wall:.1f}/s), p50 "
              f"{pct(xs, 50) * 1e3:.0f} ms, p95 {pct(xs, 95) * 1e3:.0f} ms, "
              f"5xx/dropped {len(st.server_errors)}, steps applied {st.applied}")
        for kind in sorted(st.lat):
            ys = st.lat[kind]
            print(f"    {kind:10} {len(ys):6d} p50 {pct(ys, 50) * 1e3:6.0f} ms  p95 "
                  f"{pct(ys, 95) * 1e3:6.0f} ms")
    print(f"p95 with / without the attacker: {ratio:.2f} (at most 1.5)")
    print(attacker.report() if attacker else "attacker: not started")
    grown = (rss_after[0] or 0) - (rss_before[0] or 0)
    print(f"server RSS: at start {mb(rss_start[0])}, before the attack {mb(rss_before[0])}, "
          f"when it stopped {mb(rss_attacked[0])}, {args.settle:g} s later {mb(rss_after[0])} "
          f"({grown / 1024:+.0f} MiB since before the attack; at most +100)")
    print(f"worker processes' RSS: before the attack {mb(rss_before[1])}, after "
          f"{mb(rss_after[1])}")
    for e in (quiet.server_errors + loud.server_errors)[:10]:
        print(f"  {e}")
    print(f"server alive at the end: {alive}; exit code after SIGINT: {code}; learners still "
          f"stuck: {stuck_q + stuck_l}")
    ok = (ratio <= 1.5 and grown <= 100 * 1024 and alive and not stuck_q and not stuck_l
          and not quiet.server_errors and not loud.server_errors)
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
