"""Interactive latency of the explorer: click -> all panes updated, on mm_relu (n=128).

Starts the real server (``python -m app``, waitress) on a free 127.0.0.1 port and drives it
two ways:

* **browser** (Debian's Chromium via Playwright, when present): a learner's clicks — select
  the subject, press the primitive's button — timed from the click until the trace pane shows
  the new step *and* the runtime and cache plots have redrawn with the new point (program,
  diagram, diff, trace, measurement and cache panes all updated);
* **http**: the same steps as raw requests, split into the apply request (replay + primitive
  + print + diagram: every pane but the measurements) and the measurement requests (compile +
  check against numpy + time, then the cache simulation).

Every click produces a program not seen before in the run (split factors vary per round), so
the measurement cache does not hide compile time; a second pass over the same states shows the
cached ("warm") latency. Prints p50/p95 and the ratio of cold to warm.

    python benchmarks/bench_latency.py [--rounds 5] [--n 128] [--no-browser]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"

FACTORS = [4, 8, 2, 16, 32, 64]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/static/favicon.svg", timeout=2)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def steps_for(f: int):
    """The course's four steps with j split by ``f`` (selection id, primitive, form args)."""
    return [("L/mm_relu/1/Y", "split", {"factors": f"None, {f}"}),
            ("L/mm_relu/0/Y", "reorder", {"order": "i, j_0, k, j_1"}),
            ("B/mm_relu/C", "reverse_compute_at", {"loop": "L/mm_relu/1/Y"}),
            ("B/mm_relu/Y", "decompose_reduction", {"loop": "L/mm_relu/2/Y"})]


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


def summary(label: str, xs: list[float]) -> str:
    return (f"{label:<34} n={len(xs):<3} p50 {pct(xs, 50) * 1e3:8.1f} ms   "
            f"p95 {pct(xs, 95) * 1e3:8.1f} ms   mean {statistics.fmean(xs) * 1e3:8.1f} ms")


# ---------------------------------------------------------------------------- http driver
def http_round(base: str, n: int, f: int) -> list[tuple[float, float]]:
    out = []
    query = {"n": str(n)}
    for sel, prim, args in steps_for(f):
        data = urllib.parse.urlencode({**query, "sel": sel, "primitive": prim, **args}).encode()
        req = urllib.request.Request(base + "/explore/mm_relu/apply", data=data,
                                     headers={"HX-Request": "true"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
            push = r.headers["HX-Push-Url"]
        t1 = time.perf_counter()
        qs = urllib.parse.urlsplit(push).query
        with urllib.request.urlopen(base + "/explore/mm_relu/measure?" + qs, timeout=300) as r:
            body = r.read().decode()
        with urllib.request.urlopen(base + "/explore/mm_relu/cache?" + qs, timeout=300) as r:
            r.read()
        t2 = time.perf_counter()
        if "✗" in body or "failed:" in body:
            raise SystemExit(f"a measured step failed or was wrong (split by {f}, {prim})")
        out.append((t1 - t0, t2 - t1))
        query = dict(urllib.parse.parse_qsl(qs))
    return out


# ---------------------------------------------------------------------------- browser driver
def browser_round(page, base: str, n: int, f: int) -> list[float]:
    page.goto(f"{base}/explore/mm_relu?n={n}")
    page.wait_for_selector("#runtime-plot[data-drawn]", timeout=300_000)
    out = []
    for k, (sel, prim, args) in enumerate(steps_for(f), start=1):
        page.locator(f'#program-pane [data-sel="{sel}"]').first.click()
        page.wait_for_selector(f'#toolbar[data-selected="{sel}"] form.prim')
        form = page.locator(f'#toolbar form.prim:has(button[data-prim="{prim}"])')
        for name, value in args.items():
            field = form.locator(f'[name="{name}"]')
            if field.evaluate("e => e.tagName") == "SELECT":
                field.select_option(value)
            else:
                field.fill(value)
        t0 = time.perf_counter()
        form.locator("button").click()
        page.wait_for_function(
            "k => document.querySelectorAll('#trace-pane li.step').length === k + 1 &&"
            " ['#runtime-plot', '#cache-plot'].every(id => {"
            "   const e = document.querySelector(id + '[data-drawn]');"
            "   return e && parseInt(e.dataset.points) === k + 1; })", arg=k, timeout=300_000)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of 4 clicks (max 6)")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--no-browser", action="store_true")
    a = ap.parse_args()
    rounds = max(1, min(a.rounds, len(FACTORS)))
    port = free_port()
    proc = start_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        print(f"mm_relu n={a.n}: {rounds} rounds x 4 clicks (split j by {FACTORS[:rounds]}, reorder, "
              "reverse_compute_at, decompose_reduction)")
        use_browser = not a.no_browser and os.path.exists(CHROMIUM)
        if use_browser:
            from playwright.sync_api import sync_playwright
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
                page = b.new_page(viewport={"width": 1280, "height": 720})
                cold = [t for f in FACTORS[:rounds] for t in browser_round(page, base, a.n, f)]
                warm = [t for f in FACTORS[:rounds] for t in browser_round(page, base, a.n, f)]
                b.close()
            print(summary("browser click->all panes (cold)", cold))
            print(summary("browser click->all panes (cached)", warm))
            print(f"cold/cached p50 ratio: {pct(cold, 50) / pct(warm, 50):.1f}x")
        # a fresh server for the HTTP breakdown, so its first pass is cold too
        proc.terminate()
        proc.wait(timeout=10)
        port = free_port()
        proc = start_server(port)
        base = f"http://127.0.0.1:{port}"
        res = [x for f in FACTORS[:rounds] for x in http_round(base, a.n, f)]
        apply_t = [x[0] for x in res]
        meas_t = [x[1] for x in res]
        tot = [x[0] + x[1] for x in res]
        print(summary("http apply (panes but measurements)", apply_t))
        print(summary("http measure + cache simulation", meas_t))
        print(summary("http apply + measure", tot))
        print(f"measurement share of the click: {statistics.fmean(meas_t) / statistics.fmean(tot):.0%}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
