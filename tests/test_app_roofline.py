"""The roofline tab of the measurement pane (Flask test client).

* ``app.web.plots.roofline_figure``: log-log roof ``min(peak, bandwidth x intensity)`` with the
  ridge, the roofs' labels, one numbered marker per step (the current one apart) and numpy's
  reference point;
* the pane (its jobs run in this process, ``inline_service.InlinePool``): every measured step of the
  course's trace sits at the workload's intensity with its achieved GFLOP/s; a pasted program
  says why it has no roofline point; a failed peak measurement is reported, not raised;
* the worker side: the ``roofline`` action holds every timing slot and emits the peaks; the
  :class:`app.service.StepMeasurer` stores them under one fixed key (a restart reuses them),
  queues them as the first job of a freshly started pool, and the pooled pane says
  "measuring the machine's peaks" and polls until they are there.

``engine.roofline.machine_peaks`` is replaced by a fixed dict: no test runs the peak kernels.
"""
from __future__ import annotations

import html
import json
import math
import re

import pytest

import engine
import engine.roofline
from app.service import Job, JobResult, StepMeasurer, Ticket, worker
from app.service.queue import JobQueue
from app.store import Store
from app.web import plots
from app.web.panes import measurement
from inline_service import InlineChannel, make_test_app, run_in_this_process, settled

N = 16
HX = {"HX-Request": "true"}
PEAKS = {"peak_gflops": 564.0, "bandwidth_gbs": 44.0, "ridge_intensity": 564.0 / 44.0,
         "threads": 2, "cpu": "testcpu", "measured_at": 0.0}


@pytest.fixture()
def fixed_peaks(monkeypatch):
    calls = []

    def fake(refresh=False):
        calls.append(refresh)
        return dict(PEAKS)
    monkeypatch.setattr(engine.roofline, "machine_peaks", fake)
    return calls


@pytest.fixture()
def client():
    return make_test_app().test_client()      # (a fresh store: peaks are stored once)


def figure(page: str, plot_id: str) -> tuple[dict, int]:
    m = re.search(rf'id="{plot_id}" data-plotly="([^"]+)" data-points="(\d+)"', page)
    assert m, f"no {plot_id} in the page"
    return json.loads(html.unescape(m.group(1))), int(m.group(2))


def by_name(fig: dict, name: str) -> dict:
    return next(d for d in fig["data"] if d["name"] == name)


def step_points(fig: dict) -> dict[int, tuple[float, float]]:
    """{step: (intensity, gflops)} from the 'current step' and 'steps' traces."""
    out = {}
    for d in fig["data"]:
        if d["name"] in ("steps", "current step"):
            for t, x, y in zip(d["text"], d["x"], d["y"]):
                out[int(t)] = (x, y)
    return out


def course_query(client) -> dict:
    q = {"n": str(N)}
    steps = [("L/mm_relu/1/Y", "split", {"factors": "None, 4"}),
             ("L/mm_relu/0/Y", "reorder", {"order": "i, j_0, k, j_1"}),
             ("B/mm_relu/C", "reverse_compute_at", {"loop": "L/mm_relu/1/Y"}),
             ("B/mm_relu/Y", "decompose_reduction", {"loop": "L/mm_relu/2/Y"})]
    from urllib.parse import parse_qs, urlsplit
    for sel, prim, args in steps:
        r = client.post("/explore/mm_relu/apply", data={**q, "sel": sel, "primitive": prim,
                                                        **args}, headers=HX)
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
        q = {k: v[0] for k, v in parse_qs(urlsplit(r.headers["HX-Push-Url"]).query).items()}
    return q


# ---------------------------------------------------------------------------- the figure
def test_roofline_figure_draws_the_roof_the_ridge_and_every_step():
    rows = [{"step": 0, "intensity": 4.0, "gflops": 2.0, "correct": True},
            {"step": 1, "intensity": 4.0, "gflops": 30.0, "correct": True,
             "fraction_of_roof": 30 / 176, "attainable_gflops": 176.0, "bound": "memory"},
            {"step": 2, "intensity": 4.0, "gflops": 31.0, "correct": False}]
    fig = json.loads(plots.roofline_figure(rows, PEAKS, current=1,
                                           reference={"intensity": 4.0, "gflops": 90.0}))
    lay = fig["layout"]
    assert lay["xaxis"]["type"] == "log" and lay["yaxis"]["type"] == "log"
    assert "flop/byte" in lay["xaxis"]["title"]["text"]
    assert lay["yaxis"]["title"]["text"] == "GFLOP/s"
    roof = by_name(fig, "roof")
    ridge = PEAKS["ridge_intensity"]
    assert roof["x"][1] == pytest.approx(ridge)
    for x, y in zip(roof["x"], roof["y"]):      # every vertex lies on min(peak, bw x)
        assert y == pytest.approx(min(564.0, 44.0 * x))
    assert roof["x"][0] < 4.0 < ridge < roof["x"][-1]
    assert by_name(fig, "ridge")["x"] == [pytest.approx(ridge)]
    texts = [a["text"] for a in lay["annotations"]]
    assert "peak 564 GFLOP/s" in texts and "44.0 GB/s" in texts
    assert any(t.startswith("ridge 12.8") for t in texts)
    assert "1 thread 282" in texts                     # two threads measured the peak
    # annotations on log axes are placed in log10 units
    peak_label = next(a for a in lay["annotations"] if a["text"].startswith("peak"))
    assert peak_label["y"] == pytest.approx(math.log10(564.0))
    cur = by_name(fig, "current step")
    assert cur["text"] == ["1"] and cur["y"] == [30.0] and cur["marker"]["size"] == 16
    assert "17.0% of the roof" in cur["customdata"][0]
    others = by_name(fig, "steps")
    assert others["text"] == ["0", "2"] and others["marker"]["size"] < 16
    assert others["marker"]["symbol"] == ["circle", "x"]        # step 2: wrong result
    assert "WRONG" in others["customdata"][1]
    assert by_name(fig, "numpy")["y"] == [90.0]
    # the y range holds every point and the roof
    lo, hi = lay["yaxis"]["range"]
    assert 10 ** lo <= 2.0 and 10 ** hi > 564.0


def test_roofline_figure_without_measured_steps_still_draws_the_roof():
    fig = json.loads(plots.roofline_figure([], PEAKS))
    assert [d["name"] for d in fig["data"]][:2] == ["roof", "ridge"]
    assert not any(d["name"] in ("steps", "current step") for d in fig["data"])


# ---------------------------------------------------------------------------- the pane
def test_every_step_of_the_course_sits_on_the_roofline(client, fixed_peaks):
    q = course_query(client)
    page = settled(client, f"/explore/mm_relu/measure?n={N}&t={q['t']}").get_data(as_text=True)
    runtime, n = figure(page, "runtime-plot")
    roof, npoints = figure(page, "roofline-plot")
    assert n == npoints == 5
    info = engine.workloads.info("mm_relu")
    flops, nbytes = info.flops(n=N), info.bytes(n=N)
    times = dict(zip(runtime["data"][0]["x"], runtime["data"][0]["y"]))
    pts = step_points(roof)
    assert sorted(pts) == [0, 1, 2, 3, 4]
    for k, (x, y) in pts.items():
        assert x == pytest.approx(flops / nbytes)                 # the workload's intensity
        assert y == pytest.approx(flops / (times[k] / 1e3) / 1e9)  # achieved GFLOP/s
    assert by_name(roof, "current step")["text"] == ["4"]
    assert by_name(roof, "roof")["y"][-1] == pytest.approx(564.0)
    numpy_ms = next(d for d in runtime["data"] if d["name"].startswith("numpy"))["y"][0]
    assert by_name(roof, "numpy")["y"][0] == pytest.approx(flops / (numpy_ms / 1e3) / 1e9)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Step 4:" in text and "% of the roof" in text
    assert "measured on this machine (testcpu, 2 threads)" in text
    assert 'id="mtab-roofline"' in page and 'id="measure-pending"' not in page
    assert fixed_peaks                                  # the engine's function was asked


def test_a_pasted_program_says_why_it_has_no_roofline_point(client, monkeypatch):
    def refuse(refresh=False):
        raise AssertionError("no peaks are needed for a pasted program")
    monkeypatch.setattr(engine.roofline, "machine_peaks", refuse)
    text = engine.workloads.get("mm_relu", n=8).script()
    r = client.post("/explore/custom", data={"program": text})
    assert r.status_code == 303
    url = r.headers["Location"].replace("/explore/custom?", "/explore/custom/measure?")
    page = client.get(url, headers=HX).get_data(as_text=True)
    assert 'id="roofline-plot"' not in page
    assert 'id="roofline-note"' in page
    assert html.unescape(page).count(measurement.NO_ROOFLINE_CUSTOM) == 1


def test_a_failed_peak_measurement_is_reported_in_the_tab(client, monkeypatch):
    def broken(refresh=False):
        raise RuntimeError("the FMA peak kernel produced non-finite values")
    monkeypatch.setattr(engine.roofline, "machine_peaks", broken)
    page = settled(client, f"/explore/mm_relu/measure?n={N}").get_data(as_text=True)
    assert r'id="roofline-plot"' not in page
    assert ("the machine&#39;s peaks could not be measured: the FMA peak kernel produced "
            "non-finite values") in page
    assert 'id="runtime-plot"' in page                  # the runtime tab is unaffected


# ---------------------------------------------------------------------------- worker side
class FakePool:
    """A pool without processes: roofline jobs run here at once (or are held back, running,
    until :meth:`release`), step jobs answer a fixed measurement. Records every job."""

    def __init__(self, hold_roofline: bool = False):
        self.queue = JobQueue(32)
        self.jobs: list[Job] = []
        self.held: list[Ticket] = []
        self.hold_roofline = hold_roofline

    def submit(self, job, on_done=None, *, urgent=False):
        self.jobs.append(job)
        t = Ticket(self.queue, job)
        if job.actions == ("roofline",):
            if self.hold_roofline:
                self.queue.put(t)
                assert self.queue.take() is t          # running now
                self.held.append(t)
                return t
            t._finish(run_in_this_process(job))
        elif job.actions == ("step",):
            t._finish(JobResult("ok", data={"step": {
                "hash": "h", "ok": True, "stage": "done", "error": None, "compile_ms": 1.0,
                "time_ms": 0.5, "gflops": None, "numpy_ms": 0.25, "correct": True,
                "max_abs_err": 0.0, "detail": ""}}))
        else:
            t._finish(JobResult("ok", data={"cache": {"levels": []}}))
        return t

    def release(self):
        for t in self.held:
            self.queue.done(t, run_in_this_process(t.job))
        self.held.clear()


def test_the_roofline_action_holds_every_timing_slot_and_emits_the_peaks(fixed_peaks):
    import os
    conn = InlineChannel()
    worker.run_job(conn, Job(actions=("roofline",)).to_wire(), {})
    kinds = [m[0] for m in conn.sent]
    assert kinds == ["action", "need_timing", "timing_done", "data", "result"]
    assert conn.sent[1] == ("need_timing", os.cpu_count() or 1)
    assert conn.sent[3][1]["roofline"] == PEAKS
    assert conn.sent[-1][1]["status"] == "ok"


def test_the_peaks_are_measured_once_and_stored_under_a_fixed_key(tmp_path, fixed_peaks):
    store = Store(str(tmp_path / "s.sqlite3"))
    pools: list[FakePool] = []

    def make():
        pools.append(FakePool())
        return pools[-1]
    m = StepMeasurer(make, store, fingerprint="fp")
    assert m.cached_roofline() is None
    m.pool                                   # a freshly started pool measures the peaks first
    assert [j.actions for j in pools[0].jobs] == [("roofline",)]
    assert store.get_result(*StepMeasurer.ROOFLINE_KEY[:1], "fp",
                            StepMeasurer.ROOFLINE_KEY[1]) == PEAKS
    assert m.roofline() == PEAKS and m.cached_roofline() == PEAKS
    assert len(pools[0].jobs) == 1           # answered from the store
    # after a restart: the store answers, a new pool does not measure them again
    m2 = StepMeasurer(make, store, fingerprint="fp")
    assert m2.roofline() == PEAKS
    assert not m2.started                    # no pool was started for it
    m2.pool
    assert pools[1].jobs == []
    # another machine (fingerprint) measures its own
    assert StepMeasurer(make, store, fingerprint="other").cached_roofline() is None
    assert len(fixed_peaks) == 1


def test_a_failed_peak_job_becomes_a_sentence(tmp_path, monkeypatch):
    def broken(refresh=False):
        raise RuntimeError("no C compiler")
    monkeypatch.setattr(engine.roofline, "machine_peaks", broken)
    m = StepMeasurer(FakePool(), None, fingerprint="fp")
    got = m.roofline()
    assert got["error"].startswith("the machine's peaks could not be measured:")
    assert "no C compiler" in got["error"]


def test_the_pooled_pane_polls_while_the_peaks_are_measured(fixed_peaks):
    app = make_test_app()
    m = app.extensions["measurer"]
    pool = FakePool(hold_roofline=True)
    m._pool = lambda: pool                     # started on first use, like the real one
    c = app.test_client()
    page = c.get(f"/explore/mm_relu/measure?n={N}", headers=HX).get_data(as_text=True)
    assert [j.actions for j in pool.jobs] == [("roofline",), ("step",)]
    assert "Measuring the machine" in page and 'id="measure-pending"' in page
    assert "measuring the machine's peaks for the roofline…" in page
    assert 'id="runtime-plot"' in page      # the step itself is shown meanwhile
    # the poll shares the running job
    c.get(f"/explore/mm_relu/measure?n={N}", headers=HX)
    assert [j.actions for j in pool.jobs].count(("roofline",)) == 1
    pool.release()
    page = c.get(f"/explore/mm_relu/measure?n={N}", headers=HX).get_data(as_text=True)
    fig, npoints = figure(page, "roofline-plot")
    assert npoints == 1 and 'id="measure-pending"' not in page
    assert by_name(fig, "current step")["y"][0] == pytest.approx(
        engine.workloads.info("mm_relu").flops(n=N) / 0.5e-3 / 1e9)
    assert [j.actions for j in pool.jobs].count(("roofline",)) == 1
