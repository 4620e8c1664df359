"""Plotly figures (as JSON strings) for the measurement pane.

The runtime figure has one point per trace step: runtime in ms (log scale when the spread
is large; a point's GFLOP/s in its hover label), numpy's time for the same computation as a
dashed reference line, and each point's marker tells correctness (filled circle = matches
numpy, red cross = wrong result, hollow = not checked). The figure JSON is rendered into a
``data-plotly`` attribute and drawn by static/explorer.js with the locally served plotly.js.

The runtime and cache figures' legends are HTML above the plot (:func:`legend`), not
plotly's: a click redraws both plots, and plotly's legend was a sixth of a redraw (the
GFLOP/s line on a second axis was another fifth; the step's GFLOP/s is in the line above the
plot and in the point's hover label, and the roofline tab plots it).
"""
from __future__ import annotations

import json
import math


def layout(title: str, **extra) -> dict:
    out = {
        "title": {"text": title, "font": {"size": 16}, "x": 0.01, "xanchor": "left"} if title else None,
        "margin": {"l": 52, "r": 52, "t": 34, "b": 36},
        "height": 195,
        "font": {"size": 13, "family": "DejaVu Sans, Verdana, sans-serif"},
        "legend": {"orientation": "h", "y": 1.0, "x": 0, "yanchor": "bottom",
                   "font": {"size": 12}},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#fbfcfd",
    }
    out.update(extra)
    if out["title"] is None:
        del out["title"]
    for name, axis in out.items():
        # tick labels are not hidden past the plot's edge: plotly then measures every
        # label of every axis on each redraw (a quarter of a redraw's time); the margins
        # leave them room
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            axis.setdefault("ticklabeloverflow", "allow")
    return out


def runtime_figure(rows: list[dict], current: int | None = None) -> str:
    """``rows``: one dict per step with ``step``, ``time_ms``, ``gflops``, ``numpy_ms``,
    ``correct`` (True/False/None). Returns the figure as a JSON string.

    A GPU step's row carries ``time_label`` ("modeled for H100 SXM (no GPU on this
    machine)", "measured on ..."): its points are a trace of that name and the y axis says
    "modeled ms" — modeled and measured times are never one unlabelled series."""
    labels = {r.get("time_label") for r in rows if r.get("time_ms") is not None}
    if labels - {None}:
        return _labelled_runtime_figure(rows, current, labels)
    xs = [r["step"] for r in rows if r.get("time_ms") is not None]
    ms = [r["time_ms"] for r in rows if r.get("time_ms") is not None]
    gf = [r.get("gflops") for r in rows if r.get("time_ms") is not None]
    corr = [r.get("correct") for r in rows if r.get("time_ms") is not None]
    symbols = ["circle" if c is True else "x" if c is False else "circle-open" for c in corr]
    colors = ["#1f6feb" if c is not False else "#d1242f" for c in corr]
    sizes = [14 if (current is not None and x == current) else 9 for x in xs]
    text = [("correct" if c is True else "WRONG result" if c is False else "not checked")
            for c in corr]
    runtime = {
        "type": "scatter", "mode": "lines+markers", "name": "runtime ms", "x": xs, "y": ms,
        "marker": {"symbol": symbols, "color": colors, "size": sizes},
        "line": {"color": "#1f6feb"}, "text": text,
        "hovertemplate": "step %{x}: %{y:.3f} ms (%{text})<extra></extra>",
    }
    if gf and all(g is not None for g in gf):
        runtime["customdata"] = gf
        runtime["hovertemplate"] = ("step %{x}: %{y:.3f} ms, %{customdata:.2f} GFLOP/s "
                                    "(%{text})<extra></extra>")
    data = [runtime]
    # numpy's time on as many threads as each step's kernel: one line per thread count
    refs: dict[int, float] = {}
    for r in rows:
        if r.get("numpy_ms"):
            refs.setdefault(int(r.get("numpy_threads") or 1), r["numpy_ms"])
    for i, (threads, numpy_ms) in enumerate(sorted(refs.items())):
        if not xs:
            break
        label = f"numpy {numpy_ms:.3f} ms" if len(refs) == 1 else \
            f"numpy, {threads} thread{'s' if threads != 1 else ''}: {numpy_ms:.3g} ms"
        data.append({
            "type": "scatter", "mode": "lines", "name": label,
            "x": [min(xs) - 0.3, max(xs) + 0.3], "y": [numpy_ms, numpy_ms],
            "line": {"color": "#8250df", "dash": "dash" if i == 0 else "dot"},
            "hoverinfo": "skip",
        })
    spread = (max(ms) / max(min(ms), 1e-9)) if ms else 1
    # 150 px tall under its HTML legend (the plot shares the measurement pane with its
    # Runtime/Roofline tabs and must fit it whole at 1280x720) and no x-axis title
    fig_layout = layout(
        "",
        height=150,
        margin={"l": 52, "r": 14, "t": 6, "b": 22},
        showlegend=False,
        # the x axis is the step number (as in the table below): no axis title, so that
        # the tick labels stay in view
        xaxis={"dtick": 1, "zeroline": False},
        yaxis={"title": {"text": "ms"}, "type": "log" if spread > 20 else "linear",
               "rangemode": "tozero"},
    )
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


_SERIES_COLORS = ("#1f6feb", "#bf3989", "#1a7f37", "#9a6700")


def _labelled_runtime_figure(rows: list[dict], current: int | None, labels: set) -> str:
    """The runtime figure of steps whose times are labelled (GPU steps: modeled or
    measured): one named trace per label, no numpy line (numpy runs on this CPU)."""
    order = sorted(labels, key=lambda x: (x is None, str(x)))
    data = []
    for i, label in enumerate(order):
        pts = [r for r in rows if r.get("time_ms") is not None and r.get("time_label") == label]
        corr = [r.get("correct") for r in pts]
        color = _SERIES_COLORS[i % len(_SERIES_COLORS)]
        data.append({
            "type": "scatter", "mode": "lines+markers",
            "name": label or "measured on this machine's CPU",
            "x": [r["step"] for r in pts], "y": [r["time_ms"] for r in pts],
            "marker": {"symbol": ["circle" if c is True else "x" if c is False
                                  else "circle-open" for c in corr],
                       "color": color,
                       "size": [14 if current is not None and r["step"] == current else 9
                                for r in pts]},
            "line": {"color": color},
            "text": ["correct" if c is True else "WRONG result" if c is False
                     else "not checked" for c in corr],
            "customdata": [[r.get("gflops") or 0.0, (r.get("model") or {}).get("bottleneck")
                            or "-"] for r in pts],
            "hovertemplate": ("step %{x}: %{y:.4f} ms, %{customdata[0]:.1f} GFLOP/s, bound by "
                              "%{customdata[1]} (%{text})<extra>" + (label or "") + "</extra>"),
        })
    ms = [r["time_ms"] for r in rows if r.get("time_ms") is not None]
    spread = (max(ms) / max(min(ms), 1e-12)) if ms else 1
    all_modeled = all(str(label or "").startswith("modeled") for label in order)
    fig_layout = layout(
        "", height=150, margin={"l": 52, "r": 14, "t": 6, "b": 22}, showlegend=False,
        xaxis={"dtick": 1, "zeroline": False},
        yaxis={"title": {"text": "modeled ms" if all_modeled else "ms (see legend)"},
               "type": "log" if spread > 20 else "linear", "rangemode": "tozero"},
    )
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


def legend(fig_text: str | None) -> list[dict]:
    """The legend the page draws above a figure drawn without plotly's own: one entry per
    named trace, ``{"name", "color", "kind"}`` with ``kind`` "bar", "line", "line+marker"
    or "dash" (a dashed or dotted line)."""
    if not fig_text:
        return []
    out = []
    for t in json.loads(fig_text).get("data", []):
        name = t.get("name")
        if not name:
            continue
        marker, line = t.get("marker") or {}, t.get("line") or {}
        color = marker.get("color") if isinstance(marker.get("color"), str) else None
        color = color or line.get("color") or "#57606a"
        if t.get("type") == "bar":
            kind = "bar"
        elif line.get("dash") not in (None, "solid"):
            kind = "dash"
        else:
            kind = "line+marker" if "markers" in (t.get("mode") or "") else "line"
        out.append({"name": name, "color": color, "kind": kind})
    return out


def jsonable(v):
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
    fig_layout = layout("", barmode="group", xaxis={"title": {"text": "step"}, "dtick": 1},
                        yaxis=yaxis, showlegend=False)
    # under its HTML legend (:func:`legend`): the legend's top margin is not needed
    fig_layout["height"] = 166
    fig_layout["margin"] = dict(fig_layout["margin"], t=8)
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


GPU_TRAFFIC_COLORS = {"DRAM": "#cf222e", "L2": "#bf8700", "shared": "#1a7f37"}


def gpu_memory_figure(rows: list[dict], current: int | None = None) -> str:
    """A GPU session's memory traffic over the steps, modeled (``engine.gpu.model``):
    grouped bars of the bytes each step moves from DRAM and through L2 (log scale when the
    spread is large) and a line of its shared-memory wavefronts on a second axis.

    ``rows``: ``{"step", "dram_bytes", "l2_bytes", "shared_wavefronts"}`` per modeled step
    (:func:`app.web.panes.gpu_memory.traffic`)."""
    data = []
    for name, key in (("DRAM", "dram_bytes"), ("L2", "l2_bytes")):
        pts = [r for r in rows if r.get(key) is not None]
        xs = [r["step"] for r in pts]
        data.append({"type": "bar", "name": f"{name} bytes (modeled)", "x": xs,
                     "y": [max(float(r[key]), 0.0) for r in pts],
                     "marker": {"color": GPU_TRAFFIC_COLORS[name],
                                "line": {"width": [3 if x == current else 0 for x in xs],
                                         "color": "#1b1f24"}},
                     "hovertemplate": f"step %{{x}}: %{{y:.3s}}B from {name} "
                                      f"(modeled)<extra></extra>"})
    wf = [r for r in rows if r.get("shared_wavefronts")]
    if wf:
        data.append({"type": "scatter", "mode": "lines+markers",
                     "name": "shared wavefronts (modeled)", "yaxis": "y2",
                     "x": [r["step"] for r in wf], "y": [float(r["shared_wavefronts"]) for r in wf],
                     "line": {"color": GPU_TRAFFIC_COLORS["shared"]},
                     "marker": {"color": GPU_TRAFFIC_COLORS["shared"],
                                "size": [12 if r["step"] == current else 7 for r in wf]},
                     "hovertemplate": "step %{x}: %{y:.3s} shared-memory wavefronts "
                                      "(modeled)<extra></extra>"})
    values = [y for d in data if d["type"] == "bar" for y in d["y"] if y > 0]
    spread = (max(values) / min(values)) if values else 1
    yaxis = ({"title": {"text": "bytes (log)"}, "type": "log"} if spread > 20 else
             {"title": {"text": "bytes"}, "rangemode": "tozero"})
    extra = {}
    if wf:
        extra["yaxis2"] = {"title": {"text": "wavefronts"}, "overlaying": "y", "side": "right",
                           "rangemode": "tozero", "showgrid": False}
    fig_layout = layout("", barmode="group", xaxis={"title": {"text": "step"}, "dtick": 1},
                        yaxis=yaxis, showlegend=False, **extra)
    fig_layout["height"] = 166
    fig_layout["margin"] = dict(fig_layout["margin"], t=8)
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


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
    fig_layout = layout("", height=300, margin={"l": 48, "r": 10, "t": 10, "b": 44},
                     xaxis={"title": {"text": "column" if block[1] == 1 else f"column / {block[1]}"},
                            "constrain": "domain"},
                     yaxis={"autorange": "reversed", "scaleanchor": "x",
                            "title": {"text": "row" if block[0] == 1 else f"row / {block[0]}"}})
    fig_layout.pop("legend", None)
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable), block


def _fmt_num(v: float) -> str:
    """3 significant figures, no exponent for the sizes a roofline shows (0.0123 .. 12300)."""
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def roofline_figure(rows: list[dict], peaks: dict, current: int | None = None,
                    reference: dict | None = None, modeled: str | None = None) -> str:
    """The roofline of this machine with one marker per measured trace step (log-log).

    ``peaks``: ``engine.roofline.machine_peaks()`` (``peak_gflops``, ``bandwidth_gbs``,
    ``ridge_intensity``, ``threads``). ``rows``: one dict per measured step with ``step``,
    ``intensity`` (flop/byte), ``gflops`` (achieved) and optionally ``correct``,
    ``attainable_gflops``, ``fraction_of_roof``, ``bound`` (what ``engine.roofline.point``
    returns). ``reference``: numpy's point for the same computation (``intensity``,
    ``gflops``), drawn as a separate marker. Returns the figure as a JSON string.

    The roof is ``min(peak, bandwidth x intensity)``: two straight segments on log-log axes
    that meet at the ridge (drawn exactly with three points); when the peak was measured on
    several threads, a dotted line shows one thread's share of it (a step without parallel
    loops runs on one core). Step markers are labelled with the step number, the current
    step is larger and outlined, a wrong result is a red cross.

    ``modeled``: the points are a model's, not measurements (a GPU target's: "modeled for
    H100 SXM (no GPU on this machine)"): the roofs are the GPU's sheet (``peaks``' ``gpu``
    names it: "FP32 peak", "DRAM"), every hover and the y axis say "modeled".
    """
    peak = float(peaks["peak_gflops"])
    bw = float(peaks["bandwidth_gbs"])
    ridge = float(peaks.get("ridge_intensity") or peak / bw)
    threads = int(peaks.get("threads") or 1)
    pts = [r for r in rows if r.get("intensity") and r.get("gflops")]
    xs_all = [ridge] + [r["intensity"] for r in pts]
    ys_all = [r["gflops"] for r in pts]
    if reference and reference.get("intensity") and reference.get("gflops"):
        xs_all.append(reference["intensity"])
        ys_all.append(reference["gflops"])
    lo = 10 ** math.floor(math.log10(min(xs_all) / 3))
    hi = 10 ** math.ceil(math.log10(max(xs_all) * 3))
    y_lo = 10 ** math.floor(math.log10(min(ys_all + [bw * lo, peak / threads]) / 2))
    y_hi = 10 ** (math.log10(peak) + 0.45)      # room above the roof for its label
    data: list[dict] = [{
        "type": "scatter", "mode": "lines", "name": "roof",
        "x": [lo, ridge, hi], "y": [bw * lo, peak, peak],
        "line": {"color": "#57606a", "width": 3}, "showlegend": False,
        "hovertemplate": "roof at %{x:.3g} flop/byte: %{y:.3g} GFLOP/s<extra></extra>",
    }, {
        "type": "scatter", "mode": "markers", "name": "ridge", "x": [ridge], "y": [peak],
        "marker": {"symbol": "diamond", "size": 11, "color": "#57606a"}, "showlegend": False,
        "hovertemplate": (f"ridge: {_fmt_num(ridge)} flop/byte — below it memory bandwidth "
                          f"bounds the speed, above it the FMA peak<extra></extra>"),
    }]
    annotations = [
        {"x": math.log10(hi), "y": math.log10(peak), "xanchor": "right", "yanchor": "bottom",
         "text": (f"FP32 peak {_fmt_num(peak)} GFLOP/s" if modeled else
                  f"peak {_fmt_num(peak)} GFLOP/s"), "showarrow": False,
         "font": {"size": 12, "color": "#24292f"}},
        {"x": math.log10(lo), "y": math.log10(bw * lo), "xanchor": "left", "yanchor": "bottom",
         "text": f"{'DRAM ' if modeled else ''}{_fmt_num(bw)} GB/s", "showarrow": False,
         "xshift": 4, "yshift": 2,
         "font": {"size": 12, "color": "#24292f"}},
        {"x": math.log10(ridge), "y": math.log10(peak), "xanchor": "center", "yanchor": "bottom",
         "text": f"ridge {_fmt_num(ridge)}", "showarrow": False, "yshift": 6,
         "font": {"size": 11, "color": "#57606a"}},
    ]
    if threads > 1:
        one = peak / threads
        data.append({
            "type": "scatter", "mode": "lines", "name": "1 thread",
            "x": [one / bw, hi], "y": [one, one], "showlegend": False,
            "line": {"color": "#8c959f", "width": 1.5, "dash": "dot"},
            "hovertemplate": (f"one thread's share of the peak: {_fmt_num(one)} GFLOP/s "
                              f"(steps without parallel loops run on one core)<extra></extra>"),
        })
        annotations.append({
            "x": math.log10(hi), "y": math.log10(one), "xanchor": "right", "yanchor": "top",
            "text": f"1 thread {_fmt_num(one)}", "showarrow": False, "yshift": -1,
            "font": {"size": 11, "color": "#6e7781"}})
    if reference and reference.get("intensity") and reference.get("gflops"):
        data.append({
            "type": "scatter", "mode": "markers+text", "name": "numpy",
            "x": [reference["intensity"]], "y": [reference["gflops"]],
            "text": ["numpy"], "textposition": "middle left",
            "textfont": {"size": 12, "color": "#8250df"},
            "marker": {"symbol": "star", "size": 13, "color": "#8250df"}, "showlegend": False,
            "hovertemplate": ("numpy: %{y:.3g} GFLOP/s at %{x:.3g} flop/byte"
                              + (f" ({reference['note']})" if reference.get("note") else "")
                              + "<extra></extra>"),
        })
    if pts:
        # Every step of a trace computes the same thing: same flops, same compulsory bytes,
        # so the markers stand on one vertical line. The current step is a large outlined
        # marker labelled on the right, drawn first so that a step with nearly the same
        # speed stays visible on top of it; the other steps are labelled on the left, and a
        # label close to the previous one (in GFLOP/s) moves above or below it.
        def hover(r: dict) -> str:
            extra = ""
            if r.get("fraction_of_roof") is not None:
                extra = (f" — {r['fraction_of_roof'] * 100:.1f}% of the roof "
                         f"({_fmt_num(r['attainable_gflops'])} GFLOP/s, "
                         f"{r.get('bound', '?')}-bound)")
            if r.get("correct") is False:
                extra += " — WRONG result"
            return extra

        def trace(sel: list[dict], name: str, positions: list[str], current_step: bool) -> dict:
            return {
                "type": "scatter", "mode": "markers+text", "name": name,
                "x": [r["intensity"] for r in sel], "y": [r["gflops"] for r in sel],
                "text": [str(r["step"]) for r in sel], "textposition": positions,
                "textfont": {"size": 15 if current_step else 12,
                             "color": "#9a3412" if current_step else "#0b3d91"},
                "customdata": [hover(r) for r in sel],
                "marker": {
                    "symbol": ["x" if r.get("correct") is False else "circle" for r in sel],
                    "size": 16 if current_step else 9,
                    "color": ["#d1242f" if r.get("correct") is False
                              else "#fb8500" if current_step else "#1f6feb" for r in sel],
                    "line": {"width": 2 if current_step else 0, "color": "#1b1f24"}},
                "showlegend": False,
                "hovertemplate": ("step %{text}: " + ("modeled " if modeled else "")
                                  + "%{y:.3g} GFLOP/s at %{x:.3g} flop/byte"
                                  "%{customdata}<extra>" + (modeled or "") + "</extra>"),
            }
        cur = [r for r in pts if r["step"] == current]
        others = sorted((r for r in pts if r["step"] != current), key=lambda r: r["gflops"])
        if cur:
            data.append(trace(cur, "current step", ["middle right"], True))
        positions, prev, flip = [], None, False
        for r in others:
            y = math.log10(r["gflops"])
            if prev is not None and abs(y - prev) < 0.08:
                flip = not flip
                positions.append("top left" if flip else "bottom left")
            else:
                flip = False
                positions.append("middle left")
            prev = y
        if others:
            data.append(trace(others, "steps", positions, False))
    fig_layout = layout(
        "",
        height=230,
        margin={"l": 56, "r": 14, "t": 10, "b": 40},
        showlegend=False,
        xaxis={"title": {"text": "arithmetic intensity (flop/byte)", "standoff": 4},
               "type": "log", "range": [math.log10(lo), math.log10(hi)],
               "dtick": 1, "zeroline": False},
        yaxis={"title": {"text": "modeled GFLOP/s" if modeled else "GFLOP/s"}, "type": "log",
               "range": [math.log10(y_lo), math.log10(y_hi)], "dtick": 1, "zeroline": False},
        annotations=annotations,
    )
    if modeled:
        fig_layout["xaxis"]["title"]["text"] = "flop per modeled DRAM byte"
    fig_layout.pop("legend", None)
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


def model_figure(result: dict) -> str:
    """Stacked bars: per stage of a model, each TensorIR function's share of the end-to-end
    time (µs: calls x time of one call) and the rest (the virtual machine's own work)."""
    stages = [s for s in result.get("stages", []) if s.get("e2e_s")]
    labels = [s["label"] for s in stages]
    names: list[str] = []
    for s in stages:
        for o in s.get("ops", []):
            if o["name"] not in names:
                names.append(o["name"])
    data = []
    for n in names:
        ys = []
        for s in stages:
            ys.append(sum(o["calls"] * o["s"] for o in s.get("ops", []) if o["name"] == n) * 1e6)
        data.append({"type": "bar", "name": n, "x": labels, "y": ys,
                     "hovertemplate": n + ": %{y:.1f} µs<extra></extra>"})
    data.append({"type": "bar", "name": "VM (rest of end to end)", "x": labels,
                 "y": [max(0.0, s["e2e_s"] - sum(o["calls"] * o["s"] for o in s.get("ops", [])))
                       * 1e6 for s in stages],
                 "marker": {"color": "#c9ced6"},
                 "hovertemplate": "virtual machine: %{y:.1f} µs<extra></extra>"})
    numpy = [s.get("numpy_s") for s in stages]
    if any(v for v in numpy):
        data.append({"type": "scatter", "mode": "lines+markers", "name": "numpy (same code)",
                     "x": labels, "y": [v * 1e6 if v else None for v in numpy],
                     "line": {"dash": "dash", "color": "#333"}})
    fig = {"data": data, "layout": layout("end-to-end time by operator (µs)", barmode="stack",
                                          height=300, yaxis={"title": {"text": "µs"}})}
    return json.dumps(fig)


def tune_figure(trials: list[dict], best_so_far: list, numpy_gflops: float | None) -> str:
    """The Tune tab's scatter: every candidate's GFLOP/s by trial (red crosses at 0 for
    the failed or wrong ones), the best-so-far line and numpy's line."""
    xs = [t["trial"] for t in trials]
    ok = [t for t in trials if t.get("ok")]
    bad = [t for t in trials if not t.get("ok")]
    data = [{
        "type": "scatter", "mode": "markers", "name": "candidate",
        "x": [t["trial"] for t in ok], "y": [t["gflops"] for t in ok],
        "marker": {"size": 8, "color": ["#2da44e" if t.get("source") == "evolved" else "#1f6feb"
                                        for t in ok]},
        "text": [t.get("source") or "" for t in ok],
        "hovertemplate": "trial %{x}: %{y:.2f} GFLOP/s (%{text})<extra></extra>",
    }, {
        "type": "scatter", "mode": "lines", "name": "best so far", "x": xs, "y": best_so_far,
        "line": {"color": "#1a7f37", "shape": "hv"}, "hoverinfo": "skip",
    }]
    if bad:
        data.append({"type": "scatter", "mode": "markers", "name": "failed / wrong",
                     "x": [t["trial"] for t in bad], "y": [0] * len(bad),
                     "marker": {"symbol": "x", "color": "#d1242f", "size": 8},
                     "text": [(t.get("error") or "")[:120] for t in bad],
                     "hovertemplate": "trial %{x}: %{text}<extra></extra>"})
    if numpy_gflops and xs:
        data.append({"type": "scatter", "mode": "lines", "name": f"numpy {numpy_gflops:.1f}",
                     "x": [min(xs), max(xs)], "y": [numpy_gflops, numpy_gflops],
                     "line": {"color": "#8250df", "dash": "dash"}, "hoverinfo": "skip"})
    fig_layout = layout("", height=230, margin={"l": 52, "r": 16, "t": 24, "b": 36},
                        legend={"orientation": "h", "x": 0, "xanchor": "left",
                                "yref": "container", "y": 1, "yanchor": "top",
                                "font": {"size": 12}},
                        xaxis={"title": {"text": "trial"}, "zeroline": False},
                        yaxis={"title": {"text": "GFLOP/s"}, "rangemode": "tozero"})
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)
