"""The measurement pane's charts drawn on the server (app.web.charts): what they show is
the figure of app.web.plots, drawn as SVG with every text escaped."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from app.web import charts, plots

SVG = "{http://www.w3.org/2000/svg}"

ROWS = [{"step": 0, "time_ms": 4.0, "gflops": 1.0, "numpy_ms": 0.5, "correct": True},
        {"step": 1, "time_ms": 2.0, "gflops": 2.0, "numpy_ms": 0.5, "correct": None},
        {"step": 2, "time_ms": None, "correct": None},
        {"step": 3, "time_ms": 1.0, "gflops": 4.0, "numpy_ms": 0.5, "correct": False}]


def parse(svg) -> ET.Element:
    return ET.fromstring(str(svg))          # well-formed XML, or this raises


def traces(root: ET.Element) -> dict[str, dict]:
    return {g.get("data-name"): json.loads(g.get("data-values"))
            for g in root.iter(f"{SVG}g") if g.get("class") == "trace"}


def test_runtime_chart_draws_every_measured_step_with_its_correctness():
    root = parse(charts.svg_chart(plots.runtime_figure(ROWS, current=3), "runtime"))
    assert root.get("aria-label") == "runtime"
    got = traces(root)
    assert got["runtime ms"] == {"x": [0, 1, 3], "y": [4.0, 2.0, 1.0]}
    assert got["GFLOP/s"]["y"] == [1.0, 2.0, 4.0]
    assert any(name.startswith("numpy") for name in got)
    runtime = next(g for g in root.iter(f"{SVG}g") if g.get("data-name") == "runtime ms")
    points = [g for g in runtime if g.get("class") == "pt"]
    assert [p.find(f"{SVG}title").text for p in points] == [
        "step 0: 4.000 ms (correct)", "step 1: 2.000 ms (not checked)",
        "step 3: 1.000 ms (WRONG result)"]
    # a filled circle, a hollow one (not checked), a cross (wrong); the current step larger
    shapes = [p[1] for p in points]
    assert shapes[0].tag == f"{SVG}circle" and shapes[1].get("fill") == "#fff"
    assert shapes[2].tag == f"{SVG}path"
    # the legend names every trace
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    assert [t.text for t in legend.iter(f"{SVG}text")][:2] == ["runtime ms", "GFLOP/s"]


def test_points_are_placed_by_value_on_a_linear_and_a_log_axis():
    root = parse(charts.svg_chart(plots.runtime_figure(ROWS[:2], current=1)))
    runtime = next(g for g in root.iter(f"{SVG}g") if g.get("data-name") == "runtime ms")
    y0, y1 = (float(g[1].get("cy")) for g in runtime if g.get("class") == "pt")
    bottom = float(root.find(f"{SVG}rect").get("y")) + float(root.find(f"{SVG}rect").get("height"))
    assert abs((bottom - y0) - 2 * (bottom - y1)) < 1.0       # linear from zero: 4 ms, 2 ms
    wide = [dict(r, time_ms=t) for r, t in zip(ROWS[:2], (100.0, 1.0))]
    fig = json.loads(plots.runtime_figure(wide))
    assert fig["layout"]["yaxis"]["type"] == "log"
    svg = str(charts.svg_chart(fig))
    ticks = re.findall(r'text-anchor="end" fill="[^"]+">([^<]+)</text>', svg)
    assert {"1", "10", "100"} <= set(ticks)                      # decades on a log axis


def test_cache_chart_groups_bars_and_outlines_the_current_step():
    rows = [{"step": k, "levels": [
        {"name": "L1", "misses": m1, "accesses": 8_000_000, "miss_rate": m1 / 8e6},
        {"name": "L2", "misses": 4000, "accesses": m1, "miss_rate": 4000 / m1}]}
        for k, m1 in ((0, 2_000_000), (1, 500_000))]
    root = parse(charts.svg_chart(plots.cache_figure(rows, current=1)))
    bars = {g.get("data-name"): [p.find(f"{SVG}rect") for p in g if p.get("class") == "pt"]
            for g in root.iter(f"{SVG}g") if g.get("class") == "trace"}
    assert set(bars) == {"L1 misses", "L2 misses"}
    l1 = bars["L1 misses"]
    assert float(l1[0].get("height")) > float(l1[1].get("height")) > 0
    assert l1[0].get("stroke") is None and l1[1].get("stroke-width") == "3.0"
    assert float(bars["L2 misses"][0].get("x")) > float(l1[0].get("x"))   # side by side
    assert "2,000,000 L1 misses (25.00% of 8,000,000 accesses)" in str(charts.svg_chart(
        plots.cache_figure(rows, current=1)))


def test_no_figure_text_becomes_markup():
    fig = {"data": [{"type": "scatter", "mode": "lines+markers", "name": "<script>x</script>",
                     "x": [0, 1], "y": [1, 2], "text": ["<b>t</b>", "&"],
                     "hovertemplate": "%{text} \" onload=\"x"}],
           "layout": {"yaxis": {"title": {"text": "</svg><img src=x>"}}}}
    svg = str(charts.svg_chart(fig, label='"><script>'))
    assert "<script>" not in svg and "<img" not in svg and "<b>" not in svg
    root = parse(svg)
    assert [t.text for t in root.iter(f"{SVG}title")] == ['<b>t</b> " onload="x', '& " onload="x']
