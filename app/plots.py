"""Plotly figures (as JSON strings) for the measurement pane.

The runtime figure has one point per trace step: runtime in ms (left axis, log scale when
the spread is large), GFLOP/s (right axis), numpy's time for the same computation as a dashed
reference line, and each point's marker tells correctness (filled circle = matches numpy,
red cross = wrong result, hollow = not checked). The figure JSON is rendered into a
``data-plotly`` attribute and drawn by static/explorer.js with the locally served plotly.js.
"""
from __future__ import annotations

import json
import math


def _layout(title: str, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 16}, "x": 0.01, "xanchor": "left"} if title else None,
        "margin": {"l": 52, "r": 52, "t": 34, "b": 36},
        "height": 195,
        "font": {"size": 13, "family": "DejaVu Sans, Verdana, sans-serif"},
        "legend": {"orientation": "h", "y": 1.0, "x": 0, "yanchor": "bottom",
                   "font": {"size": 12}},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#fbfcfd",
    }
    layout.update(extra)
    if layout["title"] is None:
        del layout["title"]
    return layout


def runtime_figure(rows: list[dict], current: int | None = None) -> str:
    """``rows``: one dict per step with ``step``, ``time_ms``, ``gflops``, ``numpy_ms``,
    ``correct`` (True/False/None). Returns the figure as a JSON string."""
    xs = [r["step"] for r in rows if r.get("time_ms") is not None]
    ms = [r["time_ms"] for r in rows if r.get("time_ms") is not None]
    gf = [r.get("gflops") for r in rows if r.get("time_ms") is not None]
    corr = [r.get("correct") for r in rows if r.get("time_ms") is not None]
    symbols = ["circle" if c is True else "x" if c is False else "circle-open" for c in corr]
    colors = ["#1f6feb" if c is not False else "#d1242f" for c in corr]
    sizes = [14 if (current is not None and x == current) else 9 for x in xs]
    text = [("correct" if c is True else "WRONG result" if c is False else "not checked")
            for c in corr]
    data = [{
        "type": "scatter", "mode": "lines+markers", "name": "runtime ms", "x": xs, "y": ms,
        "marker": {"symbol": symbols, "color": colors, "size": sizes},
        "line": {"color": "#1f6feb"}, "text": text,
        "hovertemplate": "step %{x}: %{y:.3f} ms (%{text})<extra></extra>",
    }]
    if any(g is not None for g in gf):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": "GFLOP/s", "x": xs, "y": gf,
            "yaxis": "y2", "marker": {"size": 7, "color": "#2da44e"},
            "line": {"color": "#2da44e", "dash": "dot"},
            "hovertemplate": "step %{x}: %{y:.2f} GFLOP/s<extra></extra>",
        })
    numpy_ms = next((r.get("numpy_ms") for r in rows if r.get("numpy_ms")), None)
    if numpy_ms and xs:
        data.append({
            "type": "scatter", "mode": "lines",
            "name": f"numpy {numpy_ms:.3f} ms",
            "x": [min(xs) - 0.3, max(xs) + 0.3], "y": [numpy_ms, numpy_ms],
            "line": {"color": "#8250df", "dash": "dash"}, "hoverinfo": "skip",
        })
    spread = (max(ms) / max(min(ms), 1e-9)) if ms else 1
    layout = _layout(
        "",
        xaxis={"title": {"text": "step"}, "dtick": 1, "zeroline": False},
        yaxis={"title": {"text": "ms"}, "type": "log" if spread > 20 else "linear",
               "rangemode": "tozero"},
        yaxis2={"title": {"text": "GFLOP/s"}, "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False},
    )
    return json.dumps({"data": data, "layout": layout}, default=_jsonable)


def _jsonable(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    try:
        return float(v)
    except Exception:  # noqa: BLE001
        return str(v)


LEVEL_COLORS = ["#1f6feb", "#bf8700", "#cf222e", "#8250df"]


def cache_figure(rows: list[dict], current: int | None = None) -> str:
    """Grouped bars: simulated misses per cache level at every step (log scale).

    ``rows``: ``{"step": k, "levels": [{"name", "misses", "accesses", "miss_rate"}, ...]}``.
    """
    names: list[str] = []
    for r in rows:
        for lv in r.get("levels") or []:
            if lv["name"] not in names:
                names.append(lv["name"])
    data = []
    for i, name in enumerate(names):
        xs, ys, text = [], [], []
        for r in rows:
            lv = next((x for x in r.get("levels") or [] if x["name"] == name), None)
            if lv is None:
                continue
            xs.append(r["step"])
            ys.append(max(lv["misses"], 0))
            text.append(f"{lv['miss_rate'] * 100:.2f}% of {lv['accesses']:,} accesses")
        data.append({"type": "bar", "name": f"{name} misses", "x": xs, "y": ys, "text": text,
                     "textposition": "none",
                     "marker": {"color": LEVEL_COLORS[i % len(LEVEL_COLORS)],
                                "line": {"width": [3 if x == current else 0 for x in xs],
                                         "color": "#1b1f24"}},
                     "hovertemplate": f"step %{{x}}: %{{y:,}} {name} misses (%{{text}})<extra></extra>"})
    values = [y for d in data for y in d["y"] if y > 0]
    spread = (max(values) / min(values)) if values else 1
    yaxis = ({"title": {"text": "misses (log)"}, "type": "log"} if spread > 20 else
             {"title": {"text": "misses"}, "rangemode": "tozero"})
    layout = _layout("", barmode="group", xaxis={"title": {"text": "step"}, "dtick": 1},
                     yaxis=yaxis)
    layout["height"] = 190
    return json.dumps({"data": data, "layout": layout}, default=_jsonable)
