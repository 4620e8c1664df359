"""Server-rendered SVG of a loop nest: nested loop boxes, blocks inside with their buffers.

Each loop is a box whose header says ``for <name> in <extent>``; its kind is shown by colour
*and* by a word and a border style (so it survives a black-and-white projector):

* serial — blue, solid border
* parallel — orange, thick border, "parallel"
* vectorized — green, diagonal stripes, "vectorized"
* unroll — purple, dashed border, "unrolled"

Blocks are white boxes with their name, axis kinds (S/R), the buffers they read and write,
and an "init" badge for reductions. Every loop/block carries ``data-sel`` (its selection id,
see :mod:`app.web.selection`) so a click selects it and the page highlights the same node in the
program text. All text goes through :func:`markupsafe.escape` (names are user-controlled).
"""
from __future__ import annotations

import functools

from markupsafe import Markup, escape

from engine.cache import host_geometry, loop_footprints

from ...kept import Kept, MiB
from ..selection import FuncTree, LoopNode

WIDTH = 560
PAD = 12           # inset of children inside a loop box
HEAD = 28          # loop header height
GAP = 8            # vertical gap between siblings
BLOCK_LINE = 20
FONT = 15

KIND_STYLE = {
    "serial": ("#e6effb", "#3f6aa8", "", ""),
    "parallel": ("#fde3c4", "#c26a12", "parallel", ""),
    "vectorized": ("url(#stripes)", "#23804f", "vectorized", ""),
    "unroll": ("#eee2fa", "#7446a8", "unrolled", "6 4"),
}

_DEFS = """<defs>
<pattern id="stripes" patternUnits="userSpaceOnUse" width="10" height="10" patternTransform="rotate(45)">
<rect width="10" height="10" fill="#dcf3e3"/><line x1="0" y1="0" x2="0" y2="10" stroke="#a5dbb7" stroke-width="5"/>
</pattern>
</defs>"""


def _height(n) -> int:
    if isinstance(n, LoopNode):
        inner = sum(_height(c) for c in n.children) + GAP * max(0, len(n.children) - 1)
        return HEAD + (inner + PAD if n.children else 6)
    lines = 1 + (1 if n.reads else 0) + (1 if n.writes else 0)
    inner = sum(_height(c) for c in n.children) + GAP * max(0, len(n.children) - 1)
    return lines * BLOCK_LINE + 8 + (inner + PAD if n.children else 0)


def _text(x, y, s, *, size=FONT, weight="normal", fill="#1b1f24", anchor="start", cls="") -> str:
    c = f' class="{cls}"' if cls else ""
    return (f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" fill="{fill}" '
            f'text-anchor="{anchor}"{c}>{escape(s)}</text>')


FIT_COLORS = {"L1": "#2da44e", "L2": "#d4a72c", "L3": "#e16f24", None: "#cf222e"}


def human_bytes(b: int) -> str:
    if b < 1024:
        return f"{b} B"
    if b < 1024 * 1024:
        return f"{b / 1024:.1f} KiB"
    return f"{b / (1024 * 1024):.1f} MiB"


def _render(n, x: int, y: int, w: int, out: list[str], fps: dict | None = None) -> int:
    h = _height(n)
    if isinstance(n, LoopNode):
        fill, stroke, word, dash = KIND_STYLE.get(n.kind, KIND_STYLE["serial"])
        sw = 3 if n.kind == "parallel" else 1.5
        attrs = f' data-sel="{escape(n.sel)}" tabindex="0" role="button"' if n.sel else ""
        label = f"loop {n.name}, extent {n.extent_text}" + (f", {word}" if word else "")
        fp = (fps or {}).get(id(n.node))
        if fp is not None:
            nbytes, fits_in = fp
            where = f"fits in {fits_in}" if fits_in else "fits in no cache level"
            label += f"; one iteration touches {human_bytes(nbytes)} ({where})"
        out.append(f'<g class="dnode dloop kind-{escape(n.kind)}"{attrs} aria-label="{escape(label)}">')
        out.append(f"<title>{escape(label)}</title>")
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<rect class="box" x="{x}" y="{y}" width="{w}" height="{h}" rx="6" '
                   f'fill="{fill}" stroke="{stroke}" stroke-width="{sw}"{d}/>')
        out.append(_text(x + 8, y + 19, f"for {n.name} in {n.extent_text}", weight="bold",
                         fill=stroke))
        right = x + w - 8
        if fp is not None:
            nbytes, fits_in = fp
            color = FIT_COLORS.get(fits_in, FIT_COLORS[None])
            tag = f"{human_bytes(nbytes)} → {fits_in or 'RAM'}"
            out.append(_text(right, y + 19, tag, size=12, fill=color, anchor="end",
                             weight="bold", cls="fp"))
            out.append(f'<rect class="fpbar" x="{x + 1.5}" y="{y + 4}" width="4" height="{HEAD - 8}" '
                       f'fill="{color}"/>')
            right -= 8 + 7 * len(tag)
        if word:
            out.append(_text(right, y + 19, word, size=13, fill=stroke, anchor="end",
                             weight="bold"))
        out.append("</g>")
        cy = y + HEAD
        for c in n.children:
            cy = _render(c, x + PAD, cy, w - 2 * PAD, out, fps) + GAP
        return y + h
    # block
    attrs = f' data-sel="{escape(n.sel)}" tabindex="0" role="button"'
    label = f"block {n.name}"
    out.append(f'<g class="dnode dblock"{attrs} aria-label="{escape(label)}">')
    out.append(f"<title>{escape(label)}: reads {', '.join(n.reads) or 'nothing'}; "
               f"writes {', '.join(n.writes) or 'nothing'}</title>")
    out.append(f'<rect class="box" x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="#ffffff" '
               f'stroke="#444c56" stroke-width="1.5"/>')
    ty = y + 17
    title = f'block "{n.name}"'
    if n.iter_kinds:
        title += f"  [{n.iter_kinds}]"
    out.append(_text(x + 8, ty, title, weight="bold"))
    badges = []
    if n.has_init:
        badges.append("init")
    if n.predicate:
        badges.append("where")
    if badges:
        out.append(_text(x + w - 8, ty, " ".join(badges), size=13, fill="#9a3412", anchor="end",
                         weight="bold"))
    if n.reads:
        ty += BLOCK_LINE
        out.append(_text(x + 8, ty, "reads " + ", ".join(n.reads), size=14, fill="#1f5f99"))
    if n.writes:
        ty += BLOCK_LINE
        out.append(_text(x + 8, ty, "writes " + ", ".join(n.writes), size=14, fill="#a0340f"))
    out.append("</g>")
    cy = ty + 12
    for c in n.children:
        cy = _render(c, x + PAD, cy, w - 2 * PAD, out, fps) + GAP
    return y + h


def _shape(buf) -> str:
    try:
        return "[" + ", ".join(str(d) for d in buf.const_shape()) + "]"
    except Exception:  # noqa: BLE001 - symbolic shapes print without dims
        return ""


def render_svg(tree: FuncTree, *, title: str | None = None, footprints: dict | None = None
               ) -> Markup:
    """The whole diagram of one function as an inline ``<svg>`` element.

    ``footprints``: ``id(For) -> (bytes, fits_in)`` — the data one iteration of the loop's
    body touches and the smallest cache level it fits in (None: none); shown as a coloured
    bar and a tag ("66.6 KiB → L2") on each loop, the course's "does the tile fit?" view.
    """
    out: list[str] = []
    y = 8
    header = title or f"{tree.func_name}"
    bufs = ", ".join(f"{b.name}{_shape(b)}" for b in tree.allocs)
    out.append(_text(8, y + 14, header, size=16, weight="bold"))
    y += 24
    if bufs:
        out.append(_text(8, y + 12, f"intermediate buffers: {bufs}", size=13, fill="#57606a"))
        y += 20
    y += 4
    for n in tree.roots:
        y = _render(n, 8, y, WIDTH - 16, out, footprints) + GAP
    height = y + 4
    if not tree.roots:
        out.append(_text(8, y + 14, "(no loops or blocks)", fill="#57606a"))
        height += 24
    svg = (f'<svg class="loop-diagram" xmlns="http://www.w3.org/2000/svg" '
           f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
           f'role="img" aria-label="loop nest of {escape(tree.func_name)}" '
           f'font-family="DejaVu Sans, Verdana, sans-serif">'
           + _DEFS + "".join(out) + "</svg>")
    return Markup(svg)


# ---------------------------------------------------------------------------- cache footprints
def footprints(mod, tree: FuncTree) -> dict | None:
    """``id(For) -> (bytes, fits_in)`` from ``engine.cache.loop_footprints`` (None when the
    analysis cannot handle this program: the diagram then shows none)."""
    try:
        geometry = _geometry()
        out = {}
        for fp in loop_footprints(mod[tree.func_name], tuple(geometry.levels)):
            out[id(fp.loop)] = (int(fp.line_bytes), fp.fits_in)
        return out
    except Exception:  # noqa: BLE001 - the diagram must render without it
        return None


@functools.lru_cache(maxsize=1)
def _geometry():
    """This machine's cache geometry (read once from ``/sys``)."""
    return host_geometry()


#: the last diagrams drawn, by the program's printed text (the diagram shows nothing the
#: text does not say: names, loops, blocks, buffers): a state seen again (an undo, a redo, a
#: step link, the same click again) is not analysed and drawn again
_DRAWN: "Kept[list[Markup]]" = Kept(
    8 * MiB, lambda drawn: 64 + sum(len(svg) for svg in drawn))


def diagrams(mod, trees: list[FuncTree], label: str = "", text: str | None = None
             ) -> list[Markup]:
    """One diagram per function of ``mod``, with its loops' cache footprints; ``label``
    prefixes the titles (the compare page's "A" and "B"). ``text``: ``mod`` as printed, when
    the caller has it: the diagrams are then kept by it, and drawn once per program."""
    key = (text, label) if text is not None else None
    got = _DRAWN.get(key) if key is not None else None
    if got is not None:
        return list(got)
    out = [render_svg(t, title=f"{label}: {t.func_name}" if label else t.func_name,
                      footprints=footprints(mod, t)) for t in trees]
    if key is not None:
        _DRAWN.put(key, out)
    return list(out)
