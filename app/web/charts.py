"""The measurement pane's small charts as SVG drawn on the server: no script draws them.

The runtime chart and the cache-miss chart change with every click. Drawn in the browser
by plotly.js they cost tens of milliseconds per chart and per click, after the pane had
arrived; drawn here they come with the pane's HTML and show in the same frame. Their
content is the figure :mod:`app.web.plots` builds (one description of each chart, also
what the tests read); :func:`svg_chart` draws the part of plotly's figure format those
figures use:

* ``scatter`` traces (``lines``, ``markers`` or both; marker ``symbol`` circle /
  circle-open / x, ``color`` and ``size`` per point or for all; ``line.color``,
  ``line.dash`` dash / dot; ``yaxis: "y2"``), and grouped ``bar`` traces (``marker.color``,
  ``marker.line.width`` per bar: the current step's bars are outlined);
* ``layout``: ``height``, ``margin``, ``xaxis`` (``dtick``, ``title``), ``yaxis`` and
  ``yaxis2`` (``type`` linear or log, ``title``), the legend in the top margin;
* each point's or bar's ``hovertemplate`` (with ``%{x}``, ``%{y}``, ``%{y:.3f}``,
  ``%{y:,}``, ``%{text}``) becomes its tooltip (an SVG ``<title>``).

Every text is escaped: no figure text is ever markup.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from markupsafe import Markup, escape

#: the chart's width in SVG units (it is scaled to the pane's width, text with it)
WIDTH = 520
FONT = 12
GRID = "#e6e9ed"
AXIS_TEXT = "#444"
DASHES = {"dash": "6,4", "dot": "2,3", "dashdot": "6,3,2,3"}


def svg_chart(figure: str | dict, label: str = "") -> Markup:
    """The figure (a plotly figure of the subset above, as JSON or a dict) as an ``<svg>``;
    ``label`` is its accessible name."""
    fig = json.loads(figure) if isinstance(figure, str) else figure
    lay = fig.get("layout") or {}
    traces = [t for t in fig.get("data") or [] if t.get("type") in ("scatter", "bar")]
    height = int(lay.get("height") or 190)
    m = {"l": 52, "r": 52, "t": 24, "b": 36, **(lay.get("margin") or {})}
    box = (m["l"], m["t"], WIDTH - m["r"], height - m["b"])        # x0, y0, x1, y1
    xaxis = _x_axis(traces, box, lay.get("xaxis") or {})
    yaxes = {key: _y_axis([t for t in traces if (t.get("yaxis") or "y") == key], box,
                          lay.get("yaxis" if key == "y" else "yaxis2") or {})
             for key in ("y", "y2") if any((t.get("yaxis") or "y") == key for t in traces)}
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
           f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg" '
           f'font-size="{FONT}" font-family="DejaVu Sans, Verdana, sans-serif">',
           f'<rect x="{box[0]}" y="{box[1]}" width="{box[2] - box[0]}" '
           f'height="{box[3] - box[1]}" fill="{lay.get("plot_bgcolor") or "#fbfcfd"}"/>']
    if "y" in yaxes:
        out += _y_ticks(yaxes["y"], box, left=True, grid=True)
    if "y2" in yaxes:
        out += _y_ticks(yaxes["y2"], box, left=False, grid="y" not in yaxes)
    out += _x_ticks(xaxis, box, height)
    bars = [t for t in traces if t["type"] == "bar"]
    if bars and "y" in yaxes:
        out += _bars(bars, xaxis, yaxes["y"], box)
    for t in traces:
        if t["type"] == "scatter":
            out += _scatter(t, xaxis, yaxes[t.get("yaxis") or "y"], box)
    out += _legend(traces, box)
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------------------- axes
class _Axis:
    """A linear or log axis mapping data values onto [p0, p1] (SVG units)."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float, log: bool = False,
                 ticks: list[float] | None = None, title: str = ""):
        self.lo, self.hi, self.p0, self.p1, self.log = lo, hi, p0, p1, log
        self.ticks = ticks or []
        self.title = title

    def __call__(self, v: float) -> float:
        if self.log:
            v = math.log10(max(v, 1e-300))
        f = (v - self.lo) / ((self.hi - self.lo) or 1.0)
        return round(self.p0 + f * (self.p1 - self.p0), 1)


def _numbers(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _x_axis(traces: list[dict], box, spec: dict) -> _Axis:
    xs = _numbers(x for t in traces for x in t.get("x") or [])
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    pad = 0.5 if any(t["type"] == "bar" for t in traces) or lo == hi else 0.35
    ticks = []
    if xs:
        step = float(spec.get("dtick") or 1)
        while (hi - lo) / step > 16:
            step *= 2
        k = math.ceil(lo / step) * step
        while k <= hi + 1e-9:
            ticks.append(k)
            k += step
    return _Axis(lo - pad, hi + pad, box[0], box[2], ticks=ticks, title=_title(spec))


def _y_axis(traces: list[dict], box, spec: dict) -> _Axis:
    ys = _numbers(y for t in traces for y in t.get("y") or [])
    title = _title(spec)
    if spec.get("type") == "log":
        pos = [y for y in ys if y > 0] or [1.0]
        lo, hi = math.log10(min(pos)), math.log10(max(pos))
        span = hi - lo
        lo, hi = (lo - 0.5, hi + 0.5) if span < 1e-9 else (lo - 0.12 * span, hi + 0.06 * span)
        decades = list(range(math.ceil(lo), math.floor(hi) + 1))
        mult = [1, 2, 5] if len(decades) <= 2 else [1]
        ticks = [math.log10(c * 10.0 ** d) for d in range(math.floor(lo), math.ceil(hi) + 1)
                 for c in mult if lo <= math.log10(c * 10.0 ** d) <= hi]
        return _Axis(lo, hi, box[3], box[1], log=True, ticks=ticks, title=title)
    top = max(ys + [0.0])
    step = _nice_step(top / 4 if top > 0 else 0.25)
    hi = max(top * 1.06, step)
    ticks = [i * step for i in range(int(hi / step + 1e-9) + 1)]
    return _Axis(0.0, hi, box[3], box[1], ticks=ticks, title=title)


def _nice_step(raw: float) -> float:
    e = 10.0 ** math.floor(math.log10(raw))
    return next(c * e for c in (1, 2, 2.5, 5, 10) if c * e >= raw)


def _title(spec: dict) -> str:
    t = spec.get("title")
    return str((t.get("text") if isinstance(t, dict) else t) or "")


def _tick_text(v: float) -> str:
    """Plotly's way: 0.5, 2, 10, 2.5k, 1M."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def _y_ticks(ax: _Axis, box, left: bool, grid: bool) -> list[str]:
    out = []
    x = box[0] - 4 if left else box[2] + 4
    anchor = "end" if left else "start"
    for t in ax.ticks:
        y = ax(10.0 ** t if ax.log else t)
        if grid:
            out.append(f'<line x1="{box[0]}" x2="{box[2]}" y1="{y}" y2="{y}" stroke="{GRID}"/>')
        out.append(f'<text x="{x}" y="{y + 4}" text-anchor="{anchor}" fill="{AXIS_TEXT}">'
                   f'{escape(_tick_text(10.0 ** t if ax.log else t))}</text>')
    if ax.title:
        cx = 12 if left else WIDTH - 8
        cy = (box[1] + box[3]) / 2
        out.append(f'<text x="{cx}" y="{cy}" text-anchor="middle" fill="{AXIS_TEXT}" '
                   f'transform="rotate(-90 {cx} {cy})">{escape(ax.title)}</text>')
    return out


def _x_ticks(ax: _Axis, box, height: int) -> list[str]:
    out = [f'<line x1="{box[0]}" x2="{box[2]}" y1="{box[3]}" y2="{box[3]}" stroke="#b8bec6"/>']
    for t in ax.ticks:
        out.append(f'<text x="{ax(t)}" y="{box[3] + 14}" text-anchor="middle" '
                   f'fill="{AXIS_TEXT}">{escape(_tick_text(t))}</text>')
    if ax.title and height - box[3] >= 30:
        out.append(f'<text x="{(box[0] + box[2]) / 2}" y="{box[3] + 29}" '
                   f'text-anchor="middle" fill="{AXIS_TEXT}">{escape(ax.title)}</text>')
    return out


# ---------------------------------------------------------------------------- traces
def _each(v, i: int, default=None):
    """A per-point property: a list's i-th value, or the one value for all."""
    if isinstance(v, list):
        return v[i] if i < len(v) else default
    return default if v is None else v


def _tooltip(t: dict, i: int) -> str:
    tmpl = t.get("hovertemplate")
    x = _each(t.get("x"), i)
    y = _each(t.get("y"), i)
    if not tmpl:
        return f"{t.get('name', '')}: {x}, {y}"

    def field(m: re.Match) -> str:
        name, fmt = m.group(1), m.group(2) or ""
        v = {"x": x, "y": y, "text": _each(t.get("text"), i, "")}.get(name, "")
        if fmt and isinstance(v, (int, float)):
            try:
                return format(v, fmt)
            except ValueError:
                return str(v)
        return str(v)

    text = re.sub(r"%\{(\w+)(?::([^}]*))?\}", field, tmpl)
    return re.sub(r"<extra>.*?</extra>", "", text)


def _trace_group(t: dict) -> str:
    """A trace's group, carrying its name and values (as JSON) for whoever reads the page."""
    values = json.dumps({"x": t.get("x") or [], "y": t.get("y") or []})
    return (f'<g class="trace" data-name="{escape(t.get("name", ""))}" '
            f'data-values="{escape(values)}">')


def _scatter(t: dict, xa: _Axis, ya: _Axis, box) -> list[str]:
    xs, ys = t.get("x") or [], t.get("y") or []
    pts = [(i, xa(x), ya(y)) for i, (x, y) in enumerate(zip(xs, ys))
           if _numbers([x]) and _numbers([y]) and (not ya.log or y > 0)]
    mode = t.get("mode") or "lines+markers"
    line = t.get("line") or {}
    marker = t.get("marker") or {}
    color = line.get("color") or marker.get("color") or "#1f6feb"
    out = [_trace_group(t)]
    if "lines" in mode and len(pts) > 1:
        dash = DASHES.get(line.get("dash") or "")
        out.append(f'<polyline fill="none" stroke="{escape(color)}" stroke-width="2" '
                   + (f'stroke-dasharray="{dash}" ' if dash else "")
                   + 'points="' + " ".join(f"{px},{py}" for _, px, py in pts) + '"/>')
    if "markers" in mode:
        for i, px, py in pts:
            c = escape(_each(marker.get("color"), i, color))
            r = float(_each(marker.get("size"), i, 6)) / 2
            symbol = _each(marker.get("symbol"), i, "circle")
            tip = escape(_tooltip(t, i))
            out.append(f'<g class="pt"><title>{tip}</title>{_marker(symbol, px, py, r, c)}</g>')
    elif t.get("hoverinfo") != "skip" and pts:
        out.append(f'<title>{escape(t.get("name", ""))}</title>')
    out.append("</g>")
    return out


def _marker(symbol: str, x: float, y: float, r: float, color) -> str:
    if symbol == "x":
        d = round(r * 0.8, 1)
        return (f'<path d="M{x - d},{y - d}L{x + d},{y + d}M{x - d},{y + d}L{x + d},{y - d}" '
                f'stroke="{color}" stroke-width="2.5"/>')
    if symbol == "circle-open":
        return f'<circle cx="{x}" cy="{y}" r="{r}" fill="#fff" stroke="{color}" stroke-width="2"/>'
    return f'<circle cx="{x}" cy="{y}" r="{r}" fill="{color}" stroke="#fff" stroke-width="1"/>'


def _bars(bars: list[dict], xa: _Axis, ya: _Axis, box) -> list[str]:
    """Grouped bars: at each x, one bar per trace side by side."""
    slot = (xa(1.0) - xa(0.0)) * 0.8
    width = slot / len(bars)
    base = box[3]
    out = []
    for j, t in enumerate(bars):
        marker = t.get("marker") or {}
        outline = marker.get("line") or {}
        out.append(_trace_group(t))
        for i, (x, y) in enumerate(zip(t.get("x") or [], t.get("y") or [])):
            if not _numbers([x, y]) or (ya.log and y <= 0):
                continue
            x0 = round(xa(x) - slot / 2 + j * width, 1)
            top = max(ya(y), box[1])
            w = float(_each(outline.get("width"), i, 0) or 0)
            stroke = (f' stroke="{escape(outline.get("color") or "#1b1f24")}" stroke-width="{w}"'
                      if w else "")
            out.append(f'<g class="pt"><title>{escape(_tooltip(t, i))}</title>'
                       f'<rect x="{x0}" y="{top}" width="{round(width, 1)}" '
                       f'height="{round(max(base - top, 0.5), 1)}" '
                       f'fill="{escape(_each(marker.get("color"), i, "#1f6feb"))}"{stroke}/></g>')
        out.append("</g>")
    return out


def _legend(traces: list[dict], box) -> list[str]:
    """One row of items above the plot area (the figures keep room for it)."""
    out = ['<g class="legend">']
    x, y = 6, max(box[1] - 10, 10)
    for t in traces:
        name = str(t.get("name") or "")
        if not name:
            continue
        line = t.get("line") or {}
        marker = t.get("marker") or {}
        color = escape(line.get("color") or _each(marker.get("color"), 0, "#1f6feb"))
        if t["type"] == "bar":
            out.append(f'<rect x="{x}" y="{y - 5}" width="14" height="10" fill="{color}"/>')
        else:
            dash = DASHES.get(line.get("dash") or "")
            out.append(f'<line x1="{x}" x2="{x + 26}" y1="{y}" y2="{y}" stroke="{color}" '
                       f'stroke-width="2"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
            if "markers" in (t.get("mode") or ""):
                out.append(f'<circle cx="{x + 13}" cy="{y}" r="3.5" fill="{color}"/>')
        sample = 18 if t["type"] == "bar" else 30
        out.append(f'<text x="{x + sample}" y="{y + 4}" fill="#24292f">{escape(name)}</text>')
        x += sample + _text_width(name) + 16
    out.append("</g>")
    return out


def _text_width(text: str) -> int:
    """The width of ``text`` at the chart's font size, estimated (no font metrics here)."""
    return int(len(text) * FONT * 0.6)
