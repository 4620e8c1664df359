"""Interactive latency of the explorer: a click and each pane's update, on mm_relu (n=128).

Starts the real server (``python -m app``, waitress) on a free 127.0.0.1 port with a fresh
results store (a temporary ``--instance`` folder: results stored by an earlier run would hide
every compile) and drives it two ways:

* **browser** (Debian's Chromium via Playwright, when present): a learner's clicks — select
  the subject, press the primitive's button. In the page, a mutation observer notes, from the
  button's click, when each part of the page shows the new step:

  - ``panes``: the program, the loop diagram and the trace (the new step listed);
  - ``runtime``: the runtime plot showing the new step's point (compiled, checked
    against numpy, timed);
  - ``cache``: the cache plot showing the new step's point (simulated);
  - ``all``: the last of them;
  - and the server's own time on the click's request (its ``Server-Timing`` header): the
    rest of ``panes`` is the browser's (sending, receiving, swapping).

  A first pass clicks programs never seen before (cold); a second pass over the same states
  reads the stored results (warm). By default each button is clicked as soon as its form is
  filled; with ``--think-ms`` a learner's pause comes in between, in which the page sends the
  filled form to be measured ahead (``POST /explore/<w>/intent``): the "cold" click then
  shows what a learner who takes that long sees. With ``--press-ms`` the click is a
  person's: the pointer moves onto the button, presses it that long (a mouse click's press
  lasts about 100 ms; the page sends the form on the press) and releases it, every time
  counted from the release (the click event). A plot shows a figure when plotly has drawn it, or when
  the page shows its kept picture of that very figure (a state seen before in the tab: the
  warm pass; ``static/explorer.js``, pictures of drawn figures).
* **lesson** (browser, ``--lesson-rounds``): a learner doing lesson 1 (the same four steps,
  split by 4) with the toolbar, "try it yourself": each click comes ``--reading`` seconds
  after the step's page loaded (reading it, selecting the loop, filling the form), the time
  in which the workers measure the program the step asks for. Each learner gets a server
  of its own (a fresh results store: the lesson's programs are the same every time).
  ``panes`` here is the program and diagram panes with the lesson's check saying the step
  matches (the lesson page has no trace pane).
* **gpu** (browser, ``--gpu-rounds``): clicks on the GPU chapter's first preset's program
  (vector add, n=1024, on the H100 SXM target): split by a factor that varies per round,
  bind blockIdx.x, bind threadIdx.x. ``panes`` as above; ``modeled point``: the runtime
  plot showing the step's point — the step built for CUDA, run in the emulator (race-
  checked), compared with numpy and timed by the GPU model in a worker — for the two
  binding clicks (the split alone is not a kernel: no point). No cache plot on a GPU.
* **http**: the same steps as raw requests: the apply request (replay + primitive + print +
  diagram: every pane but the measurements), then the measurement and the cache requests
  sent side by side (each asked again while it says a step is pending, as the page polls),
  each timed from the end of the apply.

Every click produces a program not seen before in the run (split factors vary per round), so
the results store does not hide compile time. Prints p50/p95 per part.

    python benchmarks/bench_latency.py [--rounds 5] [--n 128] [--no-browser] [--no-http]
                                       [--lesson-rounds 3] [--reading 2] [--think-ms 0]
                                       [--press-ms 0]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"

FACTORS = [4, 8, 2, 16, 32, 64]
#: the issue's targets, p50 in ms (browser)
TARGETS = {"panes": 50, "runtime": 150, "cache": 250, "warm all": 60}
#: issue 39's targets for clicks on a GPU target, p50 in ms (browser)
GPU_TARGETS = {"panes": 50, "runtime": 150}
GPU_FACTORS = [128, 64, 256, 32, 512, 16]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, instance: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port),
                             "--instance", instance], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/static/favicon.svg", timeout=2)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


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


def summary(label: str, xs: list[float], target: float | None = None) -> str:
    line = (f"{label:<40} n={len(xs):<3} p50 {pct(xs, 50) * 1e3:8.1f} ms   "
            f"p95 {pct(xs, 95) * 1e3:8.1f} ms   mean {statistics.fmean(xs) * 1e3:8.1f} ms")
    if target is not None:
        line += f"   (target p50 <= {target} ms: {'met' if pct(xs, 50) * 1e3 <= target else 'NOT met'})"
    return line


# ---------------------------------------------------------------------------- http driver
def _get(url: str, plot_id: str, points: int) -> tuple[str, float]:
    """The pane at ``url`` once its plot has ``points`` points (asked again, as the page
    polls: a pane answers after at most its time budget with what it has); its body and the
    time."""
    while True:
        with urllib.request.urlopen(url, timeout=300) as r:
            body = r.read().decode()
        m = re.search(f'id="{plot_id}" data-plotly="[^"]*" data-points="(\\d+)"', body)
        if m and int(m.group(1)) >= points:
            return body, time.perf_counter()


def http_round(base: str, n: int, f: int, pool) -> list[dict]:
    out = []
    query = {"n": str(n)}
    for k, (sel, prim, args) in enumerate(steps_for(f), start=1):
        data = urllib.parse.urlencode({**query, "sel": sel, "primitive": prim, **args}).encode()
        req = urllib.request.Request(base + "/explore/mm_relu/apply", data=data,
                                     headers={"HX-Request": "true"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
            push = r.headers["HX-Push-Url"]
        t1 = time.perf_counter()
        qs = urllib.parse.urlsplit(push).query
        measure = pool.submit(_get, base + "/explore/mm_relu/measure?" + qs, "runtime-plot", k + 1)
        cache = pool.submit(_get, base + "/explore/mm_relu/cache?" + qs, "cache-plot", k + 1)
        body, t_measure = measure.result()
        _, t_cache = cache.result()
        if "✗" in body or "failed:" in body:
            raise SystemExit(f"a measured step failed or was wrong (split by {f}, {prim})")
        out.append({"apply": t1 - t0, "measure": t_measure - t1, "cache": t_cache - t1,
                    "all": max(t_measure, t_cache) - t0})
        query = dict(urllib.parse.parse_qsl(qs))
    return out


# ---------------------------------------------------------------------------- browser driver
# Installed in the page before each click: notes (performance.now() from the click) when the
# program, diagram and trace panes show step k, and when each plot is drawn with k+1 points.
RECORDER = r"""
([k, formSel, doneSel, doneCount, armed, want, points]) => { const rec = new Promise((resolve, reject) => {
  want = want || ['runtime', 'cache'];
  points = points || k + 1;
  const old = {program: document.getElementById('program-pane'),
               diagram: document.getElementById('diagram-pane')};
  const seen = {};
  let t0 = 0;
  const plotAt = id => { const e = document.querySelector(id + '[data-drawn]');
                         return e && parseInt(e.dataset.points) === points; };
  const check = () => {
    if (t0 === 0) return;               // (armed: not clicked yet)
    const now = performance.now() - t0;
    if (seen.panes === undefined &&
        document.querySelectorAll(doneSel).length === doneCount &&
        document.getElementById('program-pane') !== old.program &&
        document.getElementById('diagram-pane') !== old.diagram) seen.panes = now;
    if (seen.runtime === undefined && want.includes('runtime') && plotAt('#runtime-plot')) seen.runtime = now;
    if (seen.cache === undefined && want.includes('cache') && plotAt('#cache-plot')) seen.cache = now;
    if (seen.panes !== undefined && want.every(w => seen[w] !== undefined)) {
      obs.disconnect();
      clearTimeout(timer);
      seen.all = Math.max(seen.panes, ...want.map(w => seen[w]));
      resolve(seen);
    }
  };
  const obs = new MutationObserver(check);
  obs.observe(document.body, {subtree: true, childList: true, attributes: true});
  const timer = setTimeout(() => { obs.disconnect(); reject(new Error('timeout: ' + JSON.stringify(seen))); }, 300000);
  const button = document.querySelector(formSel + ' button');
  if (armed) {          // a person's click: timed from the click event (the release)
    document.addEventListener('click', ev => { if (button.contains(ev.target)) t0 = performance.now(); },
                              {capture: true, once: true});
  } else {
    t0 = performance.now();
    button.click();
  }
}); if (!armed) return rec; window.__recorded = rec; return null; }
"""


def click_and_record(page, k: int, form_sel: str, done_sel: str, done_count: int,
                     press_s: float = 0.0, want: list | None = None,
                     points: int | None = None) -> dict:
    """Click the form's button and note when each part shows the new step (ms from the
    click, see RECORDER). ``press_s`` 0: the click at once (``button.click()``); else a
    person's click: the pointer moves onto the button, presses it for ``press_s`` seconds
    and releases it (the press sends the form to be measured ahead, as a real press does),
    timed from the release."""
    if not press_s:
        return page.evaluate(RECORDER, [k, form_sel, done_sel, done_count, False, want, points])
    page.evaluate(RECORDER, [k, form_sel, done_sel, done_count, True, want, points])
    box = page.locator(form_sel + " button").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    time.sleep(press_s)
    page.mouse.up()
    return page.evaluate("() => window.__recorded")


def fill_form(page, sel: str, prim: str, args: dict) -> str:
    """Select ``sel`` in the program text and fill the toolbar's form for ``prim``; the
    form's selector (its button is what the recorder clicks)."""
    page.locator(f'#program-pane [data-sel="{sel}"]').first.click()
    page.wait_for_selector(f'#toolbar[data-selected="{sel}"] form.prim')
    form_sel = f'#toolbar form.prim:has(button[data-prim="{prim}"])'
    form = page.locator(form_sel)
    for name, value in args.items():
        field = form.locator(f'[name="{name}"]')
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    return form_sel


def browser_round(page, base: str, n: int, f: int, think_s: float = 0.0,
                  press_s: float = 0.0) -> list[dict]:
    page.goto(f"{base}/explore/mm_relu?n={n}")
    page.wait_for_selector("#runtime-plot[data-drawn]", timeout=300_000)
    page.wait_for_selector("#cache-plot[data-drawn]", timeout=300_000)
    out = []
    for k, (sel, prim, args) in enumerate(steps_for(f), start=1):
        form_sel = fill_form(page, sel, prim, args)
        if think_s:
            time.sleep(think_s)
        seen = click_and_record(page, k, form_sel, "#trace-pane li.step", k + 1, press_s)
        seen["server"] = page.evaluate(SERVER_TIME)
        out.append({key: v / 1e3 for key, v in seen.items() if v is not None})
        if page.locator("#measure-now .bad, td .bad").count():
            raise SystemExit(f"a measured step failed or was wrong (split by {f}, {prim})")
    return out


# the server's own time on the click's apply request (its Server-Timing header), in ms
SERVER_TIME = r"""
() => { const e = performance.getEntriesByType('resource').filter(r => r.name.includes('/apply'));
        performance.clearResourceTimings();
        const t = e.length && e[e.length - 1].serverTiming.find(x => x.name === 'app');
        return t ? t.duration : null; }
"""


GPU_TARGET = "cuda-h100-sxm"


def gpu_steps(f: int):
    """Vector add's GPU steps with i split by ``f``: (selection, primitive, args, the
    runtime plot's points after it — None: not a kernel yet, no point)."""
    return [("L/vector_add/0/C", "split", {"factors": f"None, {f}"}, None),
            ("L/vector_add/0/C", "bind", {"thread_axis": "blockIdx.x"}, 1),
            ("L/vector_add/1/C", "bind", {"thread_axis": "threadIdx.x"}, 2)]


def gpu_round(page, base: str, f: int) -> list[dict]:
    page.goto(f"{base}/explore/vector_add?n=1024&target={GPU_TARGET}")
    page.wait_for_selector("#program-pane")
    out = []
    for k, (sel, prim, args, points) in enumerate(gpu_steps(f), start=1):
        form_sel = fill_form(page, sel, prim, args)
        want = ["runtime"] if points else []
        seen = click_and_record(page, k, form_sel, "#trace-pane li.step", k + 1,
                                want=want, points=points)
        seen["server"] = page.evaluate(SERVER_TIME)
        out.append({key: v / 1e3 for key, v in seen.items() if v is not None})
        if page.locator("#measure-now .bad, td .bad").count():
            raise SystemExit(f"a GPU step failed or was wrong (split by {f}, {prim})")
    return out


def gpu_passes(base: str, factors: list[int]) -> dict:
    from playwright.sync_api import sync_playwright
    res: dict[str, list[dict]] = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = b.new_page(viewport={"width": 1280, "height": 720})
        for name in ("cold", "warm"):
            res[name] = [x for f in factors for x in gpu_round(page, base, f)]
        b.close()
    return res


LESSON = "01_tensorir_mm_relu"   # the course's four steps, split by 4, at n=128


def lesson_round(page, base: str, reading_s: float) -> list[dict]:
    """A learner doing lesson 1's four steps with the toolbar ("try it yourself"), each
    click after ``reading_s`` seconds on the step's page (reading it, selecting the loop,
    filling the form); from each click, when the program and diagram panes show the new
    step (the lesson's check says it matches) and when each plot has its new point."""
    page.goto(f"{base}/lessons/{LESSON}?step=1")
    out = []
    for k, (sel, prim, args) in enumerate(steps_for(4), start=1):
        page.wait_for_selector("#runtime-plot[data-drawn]", timeout=300_000)
        page.wait_for_selector("#cache-plot[data-drawn]", timeout=300_000)
        t_read = time.perf_counter()
        form_sel = fill_form(page, sel, prim, args)
        time.sleep(max(0.0, reading_s - (time.perf_counter() - t_read)))
        seen = click_and_record(page, k, form_sel, "#lesson-check.ok", 1)
        out.append({key: v / 1e3 for key, v in seen.items()})
        if page.locator("#measure-now .bad, td .bad").count():
            raise SystemExit(f"a measured lesson step failed or was wrong ({prim})")
        if k < 4:
            page.click("#lesson-next")
            page.wait_for_url(re.compile(rf"step={k + 1}&t="))
    return out


def lesson_passes(work: str, rounds: int, reading_s: float) -> list[dict]:
    """``rounds`` learners, each on a server of its own (a fresh results store: the
    lesson's programs are the same every time)."""
    from playwright.sync_api import sync_playwright
    out: list[dict] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = b.new_page(viewport={"width": 1280, "height": 720})
        for r in range(rounds):
            port = free_port()
            proc = start_server(port, os.path.join(work, f"lesson-{r}"))
            try:
                out += lesson_round(page, f"http://127.0.0.1:{port}", reading_s)
            finally:
                stop_server(proc)
        b.close()
    return out


def browser_passes(base: str, n: int, factors: list[int], passes: list[str],
                   think_s: float = 0.0, press_s: float = 0.0) -> dict:
    from playwright.sync_api import sync_playwright
    res: dict[str, list[dict]] = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = b.new_page(viewport={"width": 1280, "height": 720})
        for name in passes:
            res[name] = [x for f in factors
                         for x in browser_round(page, base, n, f, think_s, press_s)]
        b.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of 4 clicks (max 6)")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--lesson-rounds", type=int, default=3,
                    help="learners doing lesson 1 with the toolbar (0: none)")
    ap.add_argument("--reading", type=float, default=2.0,
                    help="seconds a learner spends on a lesson step before clicking")
    ap.add_argument("--gpu-rounds", type=int, default=5,
                    help="rounds of 3 clicks on vector add on the H100 SXM target (0: none)")
    ap.add_argument("--gpu-only", action="store_true",
                    help="only the GPU round (no CPU browser passes, lesson or http)")
    ap.add_argument("--think-ms", type=float, default=0.0,
                    help="ms between filling the form and clicking its button (default 0: at "
                         "once; a learner takes a few hundred, in which the page sends the "
                         "form to be measured ahead)")
    ap.add_argument("--press-ms", type=float, default=0.0,
                    help="a person's click: the mouse button pressed this long on the button "
                         "(default 0: the button's click() at once, no press)")
    a = ap.parse_args()
    rounds = max(1, min(a.rounds, len(FACTORS)))
    factors = FACTORS[:rounds]
    work = tempfile.mkdtemp(prefix="bench-latency-")
    print(f"mm_relu n={a.n}: {rounds} rounds x 4 clicks (split j by {factors}, reorder, "
          f"reverse_compute_at, decompose_reduction); load average {os.getloadavg()[0]:.2f}"
          + (f"; {a.think_ms:g} ms from filling each form to its click" if a.think_ms else "")
          + (f"; clicks pressed for {a.press_ms:g} ms, timed from the release"
             if a.press_ms else ""))
    try:
        if not a.no_browser and os.path.exists(CHROMIUM) and a.gpu_rounds > 0:
            gf = GPU_FACTORS[:max(1, min(a.gpu_rounds, len(GPU_FACTORS)))]
            port = free_port()
            proc = start_server(port, os.path.join(work, "gpu"))
            try:
                res = gpu_passes(f"http://127.0.0.1:{port}", gf)
            finally:
                stop_server(proc)
            print(f"GPU target (H100 SXM, modeled; no GPU here): vector add n=1024, "
                  f"{len(gf)} rounds x 3 clicks (split i by {gf}, bind blockIdx.x, bind "
                  "threadIdx.x)")
            for name in ("cold", "warm"):
                print(summary(f"gpu {name}: program + diagram + trace",
                              [x["panes"] for x in res[name]],
                              GPU_TARGETS["panes"] if name == "cold" else None))
                print(summary(f"gpu {name}: modeled point (bind clicks)",
                              [x["runtime"] for x in res[name] if "runtime" in x],
                              GPU_TARGETS["runtime"] if name == "cold" else None))
                print(summary(f"gpu {name}: the apply on the server",
                              [x["server"] for x in res[name] if "server" in x]))
        if a.gpu_only:
            return 0
        if not a.no_browser and os.path.exists(CHROMIUM):
            port = free_port()
            proc = start_server(port, os.path.join(work, "browser"))
            try:
                res = browser_passes(f"http://127.0.0.1:{port}", a.n, factors, ["cold", "warm"],
                                     a.think_ms / 1e3, a.press_ms / 1e3)
            finally:
                stop_server(proc)
            for name in ("cold", "warm"):
                for part, label in (("panes", "program + diagram + trace"),
                                    ("runtime", "runtime point"), ("cache", "cache point"),
                                    ("all", "everything")):
                    target = TARGETS.get(part) if name == "cold" else (
                        TARGETS["warm all"] if part == "all" else None)
                    print(summary(f"browser {name}: {label}", [x[part] for x in res[name]],
                                  target))
                served = [x["server"] for x in res[name] if "server" in x]
                if served:
                    print(summary(f"browser {name}: the apply on the server", served))
            if a.lesson_rounds > 0:
                res = lesson_passes(work, a.lesson_rounds, a.reading)
                for part, label in (("panes", "program + diagram + check"),
                                    ("runtime", "runtime point"), ("cache", "cache point"),
                                    ("all", "everything")):
                    print(summary(f"lesson 1, {a.reading:g} s per step: {label}",
                                  [x[part] for x in res]))
        if not a.no_http:
            port = free_port()
            proc = start_server(port, os.path.join(work, "http"))
            try:
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    res = [x for f in factors
                           for x in http_round(f"http://127.0.0.1:{port}", a.n, f, pool)]
            finally:
                stop_server(proc)
            print(summary("http apply (panes but measurements)", [x["apply"] for x in res]))
            print(summary("http measure (after the apply)", [x["measure"] for x in res]))
            print(summary("http cache simulation (after the apply)", [x["cache"] for x in res]))
            print(summary("http apply + measure + cache", [x["all"] for x in res]))
            meas = statistics.fmean(max(x["measure"], x["cache"]) for x in res)
            print(f"measurement share of the click: {meas / statistics.fmean(x['all'] for x in res):.0%}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
