"""Jupyter helpers: HTML views of modules and schedules, and links into the running explorer.

In a notebook::

    import engine, engine.notebook as nb
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=128))
    nb.show(sch)                 # script with highlighting + a small loop-nest picture
    nb.open_in_explorer(sch)     # prints http://127.0.0.1:5000/explore/mm_relu?n=128&t=...

:func:`repr_html` is what ``IRModule._repr_html_`` / ``Schedule._repr_html_`` return
(the classes delegate to it), so a bare ``sch`` or ``mod`` at the end of a cell renders.
The loop diagram here is a compact nested-box picture built from the loop nest (the web
app draws the full SVG diagram); nothing here needs Jupyter to be installed.
"""
from __future__ import annotations

import html
import io
import keyword
import token
import tokenize
from typing import Any
from urllib.parse import urlencode

from engine.ir import IRModule, PrimFunc
from engine.schedule import Schedule
from engine.script.nest import NestNode, loop_nest

__all__ = ["highlight", "repr_html", "module_html", "schedule_html", "nest_html",
           "explorer_link", "open_in_explorer", "show", "install"]

_STYLE = {
    "kw": "color:#8959a8;font-weight:bold",
    "str": "color:#718c00",
    "num": "color:#f5871f",
    "com": "color:#8e908c;font-style:italic",
    "t": "color:#4271ae",          # T.grid, T.block, ... (the TVMScript namespace)
    "dec": "color:#c82829",
}
_KIND_COLOUR = {"serial": "#c8d3e0", "parallel": "#e6a23c", "vectorized": "#67c23a",
                "unroll": "#909cf0", "block": "#f2f2f2"}
_PRE = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;"
        "line-height:1.35;background:#fafafa;border:1px solid #e3e3e3;padding:8px;"
        "overflow:auto;white-space:pre")


def highlight(code: str) -> str:
    """HTML (inline styles, every character escaped) for Python/TVMScript text.

    Uses Python's own tokenizer; text it cannot tokenise is shown plain, never dropped.
    """
    out: list[str] = []
    lines = code.splitlines(keepends=True)
    # absolute offsets of each line start, to copy untouched text (whitespace) through
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    pos = 0

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + col if row - 1 < len(starts) else len(code)

    prev_name = ""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return html.escape(code)
    for tok in toks:
        if tok.type in (token.ENDMARKER, token.DEDENT, token.INDENT):
            continue
        a, b = offset(*tok.start), offset(*tok.end)
        if a < pos:
            continue
        out.append(html.escape(code[pos:a]))
        text = code[a:b]
        style = None
        if tok.type == token.NAME:
            if keyword.iskeyword(text):
                style = _STYLE["kw"]
            elif text in ("T", "tir", "I", "R") or prev_name == ".T":
                style = _STYLE["t"]
        elif tok.type == token.STRING:
            style = _STYLE["str"]
        elif tok.type == token.NUMBER:
            style = _STYLE["num"]
        elif tok.type == token.COMMENT:
            style = _STYLE["com"]
        elif tok.type == token.OP and text == "@":
            style = _STYLE["dec"]
        prev_name = ".T" if (tok.type == token.OP and text == "." and prev_name == "T") else (
            text if tok.type == token.NAME else "")
        out.append(f'<span style="{style}">{html.escape(text)}</span>' if style
                   else html.escape(text))
        pos = b
    out.append(html.escape(code[pos:]))
    return "".join(out)


def _node_html(n: NestNode) -> str:
    colour = _KIND_COLOUR.get(n.kind, "#ddd")
    if not n.is_loop:
        inner = "".join(_node_html(c) for c in n.children)
        return (f'<div style="margin:3px;padding:2px 6px;border:1px solid #999;'
                f'background:{colour};border-radius:3px">block <b>{html.escape(n.name)}</b>'
                f'{inner}</div>')
    kind = "" if n.kind == "serial" else f" <i>{html.escape(n.kind)}</i>"
    inner = "".join(_node_html(c) for c in n.children)
    return (f'<div style="margin:3px;padding:2px 6px 4px;border-left:4px solid {colour};'
            f'border-top:1px solid {colour};background:rgba(0,0,0,0.02)">'
            f'for <b>{html.escape(n.name)}</b> &times; {html.escape(str(n.extent))}{kind}'
            f'{inner}</div>')


def nest_html(mod: Any, func_name: str | None = None) -> str:
    """A compact nested-box picture of a function's loop nest (HTML, no script)."""
    nodes = loop_nest(mod, func_name)
    body = "".join(_node_html(n) for n in nodes) or "<i>(no loops)</i>"
    return f'<div style="font-family:sans-serif;font-size:12px">{body}</div>'


def module_html(mod: Any) -> str:
    """HTML for an IRModule (or PrimFunc): highlighted script, then each function's nest."""
    script = mod.script()
    parts = [f'<pre style="{_PRE}">{highlight(script)}</pre>']
    funcs = mod.prim_funcs() if hasattr(mod, "prim_funcs") else [  # TensorIR nests only
        (getattr(mod, "name", "func"), mod)]
    for name, func in funcs:
        parts.append(f'<details><summary style="cursor:pointer;font-family:sans-serif;'
                     f'font-size:12px">loop nest of <code>{html.escape(str(name))}</code>'
                     f'</summary>{nest_html(func)}</details>')
    return "<div>" + "".join(parts) + "</div>"


def _trace_steps(sch: Any) -> list[str]:
    trace = getattr(sch, "trace", None)
    if trace is None:
        return []
    try:
        return [ln for ln in trace.as_python().splitlines() if ln.strip()]
    except Exception:  # noqa: BLE001 - a view must never fail
        return []


def schedule_html(sch: Any) -> str:
    """HTML for a Schedule: its current module plus the trace that produced it."""
    body = module_html(sch.mod)
    steps = _trace_steps(sch)
    trace_html = ""
    if steps:
        trace_html = (f'<details><summary style="cursor:pointer;font-family:sans-serif;'
                      f'font-size:12px">trace ({len(steps)} lines)</summary>'
                      f'<pre style="{_PRE}">{highlight(chr(10).join(steps))}</pre></details>')
    link = ""
    try:
        link = explorer_link(sch)
    except Exception:  # noqa: BLE001 - no workload: no link
        link = ""
    if link:
        link = (f'<div style="font-family:sans-serif;font-size:12px">'
                f'<a href="{html.escape(link)}" target="_blank">open in the explorer</a></div>')
    return f"<div>{body}{trace_html}{link}</div>"


def repr_html(obj: Any) -> str:
    """What ``_repr_html_`` returns for a Schedule, IRModule or PrimFunc."""
    if hasattr(obj, "trace") and hasattr(obj, "mod"):
        return schedule_html(obj)
    return module_html(obj)


def _workload(sch: Any) -> tuple[str, dict]:
    wl = getattr(sch, "workload", None)
    if isinstance(wl, tuple) and len(wl) == 2:
        return wl[0], dict(wl[1] or {})
    if isinstance(wl, dict) and "name" in wl:
        return wl["name"], dict(wl.get("params") or {})
    trace = getattr(sch, "trace", None)
    if trace is not None:
        doc = trace.as_json()
        w = doc.get("workload") if isinstance(doc, dict) else None
        if isinstance(w, dict) and w.get("name"):
            return w["name"], dict(w.get("params") or {})
    raise ValueError("this schedule does not know its workload; create it with "
                     "engine.Schedule(mod, workload=(name, params)) to get an explorer link")


def explorer_link(sch: Any, base: str = "http://127.0.0.1:5000") -> str:
    """The explorer URL of this schedule: ``/explore/<workload>?<params>&t=<trace token>``."""
    name, params = _workload(sch)
    query = dict(params)
    insts = _n_steps(sch)
    if insts:
        query["t"] = sch.trace.encode()
    qs = urlencode(query)
    return f"{base.rstrip('/')}/explore/{name}" + (f"?{qs}" if qs else "")


def _n_steps(sch: Any) -> int:
    trace = getattr(sch, "trace", None)
    if trace is None:
        return 0
    try:
        return len(trace.as_json().get("insts", []))
    except Exception:  # noqa: BLE001
        return 1


def open_in_explorer(sch: Any, base: str = "http://127.0.0.1:5000") -> str:
    """Print (and return) the link that opens ``sch`` in the running web app."""
    link = explorer_link(sch, base)
    print(link)
    return link


class _HTML:
    def __init__(self, markup: str):
        self.markup = markup

    def _repr_html_(self) -> str:
        return self.markup


def show(obj: Any) -> Any:
    """Display ``obj`` as HTML in Jupyter (returns an object with ``_repr_html_``)."""
    view = _HTML(repr_html(obj))
    try:
        from IPython.display import display  # noqa: PLC0415
    except ImportError:
        return view
    display(view)
    return None


def install() -> None:
    """Give IRModule, PrimFunc and Schedule a ``_repr_html_`` if they lack one.

    The classes normally define it themselves (delegating to :func:`repr_html`); this is
    for sessions where they do not.
    """
    for cls in (IRModule, PrimFunc, Schedule):
        if not hasattr(cls, "_repr_html_"):
            cls._repr_html_ = lambda self: repr_html(self)  # type: ignore[attr-defined]
