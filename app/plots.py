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


MAX_CELLS = 128 * 128


def _downsample(first_touch):
    """(rows of first-touch times, -1 = untouched) -> (2-D float array with NaN for
    untouched, (row block, col block)): at most MAX_CELLS cells, each the earliest touch of
    its block of elements."""
    import numpy as np
    a = np.asarray(first_touch, dtype=float)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a.reshape(1, -1)
    elif a.ndim > 2:
        a = a.reshape(-1, a.shape[-1])
    a[a < 0] = np.nan
    rb = cb = 1
    while (a.shape[0] // rb) * (a.shape[1] // cb) > MAX_CELLS:
        if a.shape[0] // rb >= a.shape[1] // cb:
            rb *= 2
        else:
            cb *= 2
    if rb > 1 or cb > 1:
        rows = -(-a.shape[0] // rb) * rb
        cols = -(-a.shape[1] // cb) * cb
        pad = np.full((rows, cols), np.nan)
        pad[:a.shape[0], :a.shape[1]] = a
        blocks = pad.reshape(rows // rb, rb, cols // cb, cb)
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                a = np.nanmin(np.nanmin(blocks, axis=3), axis=1)
    return a, (rb, cb)


def pattern_figure(name: str, first_touch, events: int) -> tuple[str, tuple[int, int]]:
    """Heatmap of when each element of a buffer is first touched during one iteration
    (dark = early, bright = late, blank = not touched)."""
    import numpy as np
    a, block = _downsample(first_touch)
    z = [[None if np.isnan(v) else int(v) for v in row] for row in a]
    unit = "element" if block == (1, 1) else f"{block[0]}x{block[1]} block"
    data = [{
        "type": "heatmap", "z": z, "colorscale": "Viridis", "reversescale": False,
        "zmin": 0, "zmax": max(events - 1, 1), "hoverongaps": False,
        "colorbar": {"title": {"text": "access #", "side": "right"}, "thickness": 10},
        "hovertemplate": f"{name}[%{{y}}, %{{x}}] ({unit}): first touched at access %{{z}}<extra></extra>",
    }]
    layout = _layout("", height=300, margin={"l": 48, "r": 10, "t": 10, "b": 44},
                     xaxis={"title": {"text": "column" if block[1] == 1 else f"column / {block[1]}"},
                            "constrain": "domain"},
                     yaxis={"autorange": "reversed", "scaleanchor": "x",
                            "title": {"text": "row" if block[0] == 1 else f"row / {block[0]}"}})
    layout.pop("legend", None)
    return json.dumps({"data": data, "layout": layout}, default=_jsonable), block
