"""Server-rendered SVG of a loop nest: nested loop boxes, blocks inside with their buffers.

Each loop is a box whose header says ``for <name> in <extent>``; its kind is shown by colour
*and* by a word and a border style (so it survives a black-and-white projector):

* serial — blue, solid border
* parallel — orange, thick border, "parallel"
* vectorized — green, diagonal stripes, "vectorized"
* unroll — purple, dashed border, "unrolled"
* bound to the grid (``blockIdx``) — red, thick double-weight border, "blockIdx.x · grid"
* bound to the thread block (``threadIdx``) — teal, thick border, "threadIdx.x · block";
  a ``threadIdx.x`` loop also draws a warp's slice (its 32 threads, the warp boundaries)
* a virtual thread (``vthread``) — sand, dotted border, "vthread.x"

A program with bound loops also gets a line per kernel (each top-level bound nest): its grid
and block sizes from the bindings, the threads and warps per block. On a GPU target the CPU
cache footprints are not drawn (they describe this machine's caches).

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
    # loops bound to a GPU thread axis (their kind is "thread_binding"; the style by axis)
    "grid": ("#fde2e1", "#b42318", "grid", ""),
    "thread": ("#d5f2ee", "#0f766e", "block", ""),
    "vthread": ("#f6ecd6", "#8a6116", "vthread", "2 3"),
}
#: the height of a threadIdx.x loop's warp row
WARP_ROW = 20
WARP = 32


def _axis_kind(n) -> str:
    """A loop's style key: its kind, or for a bound loop its axis' ("grid", "thread",
    "vthread")."""
    tag = getattr(n.node, "thread_tag", "") if n.kind == "thread_binding" else ""
    if tag.startswith("blockIdx"):
        return "grid"
    if tag.startswith("threadIdx"):
        return "thread"
    if tag.startswith("vthread"):
        return "vthread"
    return n.kind


def _warp_row(n) -> bool:
    return n.kind == "thread_binding" and getattr(n.node, "thread_tag", "") == "threadIdx.x"

_DEFS = """<defs>
<pattern id="stripes" patternUnits="userSpaceOnUse" width="10" height="10" patternTransform="rotate(45)">
<rect width="10" height="10" fill="#dcf3e3"/><line x1="0" y1="0" x2="0" y2="10" stroke="#a5dbb7" stroke-width="5"/>
</pattern>
</defs>"""


def _height(n) -> int:
    if isinstance(n, LoopNode):
        inner = sum(_height(c) for c in n.children) + GAP * max(0, len(n.children) - 1)
        return HEAD + (WARP_ROW if _warp_row(n) else 0) + (inner + PAD if n.children else 6)
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


def _render(n, x: int, y: int, w: int, out: list[str], fps: dict | None = None,
            gpu: dict | None = None) -> int:
    h = _height(n)
    if isinstance(n, LoopNode):
        style = _axis_kind(n)
        fill, stroke, word, dash = KIND_STYLE.get(style, KIND_STYLE["serial"])
        tag = getattr(n.node, "thread_tag", "") if n.kind == "thread_binding" else ""
        if tag:
            word = f"{tag} · {word}"
        sw = 3 if style in ("parallel", "grid", "thread") else 1.5
        attrs = f' data-sel="{escape(n.sel)}" tabindex="0" role="button"' if n.sel else ""
        if tag:
            attrs += f' data-thread="{escape(tag)}"'
        label = f"loop {n.name}, extent {n.extent_text}" + (f", {word}" if word else "")
        if tag.startswith("blockIdx"):
            label += " (the grid: one thread block per iteration)"
        elif tag.startswith("threadIdx"):
            label += " (the threads of a block: one thread per iteration)"
        fp = (fps or {}).get(id(n.node))
        if fp is not None:
            nbytes, fits_in = fp
            where = f"fits in {fits_in}" if fits_in else "fits in no cache level"
            label += f"; one iteration touches {human_bytes(nbytes)} ({where})"
        out.append(f'<g class="dnode dloop kind-{escape(style)}"{attrs} aria-label="{escape(label)}">')
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
        if _warp_row(n):
            _draw_warp(n, x, y + HEAD, w, out, (gpu or {}).get(id(n.node)))
        out.append("</g>")
        cy = y + HEAD + (WARP_ROW if _warp_row(n) else 0)
        for c in n.children:
            cy = _render(c, x + PAD, cy, w - 2 * PAD, out, fps, gpu) + GAP
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
        cy = _render(c, x + PAD, cy, w - 2 * PAD, out, fps, gpu) + GAP
    return y + h


def _draw_warp(n, x: int, y: int, w: int, out: list[str], info: dict | None) -> None:
    """A ``threadIdx.x`` loop's warp row: a bar of its threads, the first warp's shaded and
    the warp boundaries marked, and which threads make warp 0 (32 consecutive threads of the
    block in CUDA's order: threadIdx.x fastest, then y, then z)."""
    extent = n.extent if isinstance(n.extent, int) and n.extent > 0 else None
    bar_w = max(60, min(w - 16, 150))
    bx, by = (info or {}).get("block", (extent or 0, 1, 1))[:2]
    bx = extent or bx
    if extent is None:
        text = "a warp: 32 consecutive threads along threadIdx.x"
    elif extent >= WARP:
        text = (f"warp 0 = threadIdx.x 0–{WARP - 1}"
                + (f"; {-(-extent // WARP)} warps along x" if extent > WARP else ""))
    else:
        rows = max(1, min(by or 1, WARP // extent))
        text = (f"warp 0 = threadIdx.x 0–{extent - 1}"
                + (f" × threadIdx.y 0–{rows - 1}" if (by or 1) > 1 else "")
                + ("" if extent * min(rows, by or 1) >= WARP or (by or 1) > 1
                   else f" ({extent} of 32 lanes active)"))
    x0, y0 = x + 8, y + 3
    out.append(f'<g class="warp" aria-label="{escape(text)}">')
    out.append(f'<rect x="{x0}" y="{y0}" width="{bar_w}" height="12" fill="#ffffff" '
               f'stroke="#0f766e" stroke-width="1"/>')
    if extent:
        cell = bar_w / extent
        first = min(extent, WARP)
        out.append(f'<rect class="warp0" x="{x0}" y="{y0}" width="{cell * first:.1f}" '
                   f'height="12" fill="#0f766e" fill-opacity="0.55"/>')
        for b in range(WARP, extent, WARP):
            if extent // WARP > 48:
                break
            xb = x0 + cell * b
            out.append(f'<line x1="{xb:.1f}" y1="{y0}" x2="{xb:.1f}" y2="{y0 + 12}" '
                       f'stroke="#0f766e" stroke-width="1.5"/>')
    out.append(_text(x0 + bar_w + 8, y0 + 11, text, size=12, fill="#0f766e", cls="warp-text"))
    out.append("</g>")


# ---------------------------------------------------------------------------- kernels
def gpu_kernels(tree: FuncTree) -> list[dict]:
    """The kernels of a function as its bindings say (no lowering, no compiling): each
    top-level bound loop nest, with its grid and block sizes (per axis the extent of the
    loops bound to it; a symbolic extent is None), threads and warps per block, and the
    loops bound in it (``loops``: ``id(For)`` -> the kernel's dict)."""
    out: list[dict] = []

    def walk(n, kernel):
        if n.is_loop and n.kind == "thread_binding":
            if kernel is None:
                kernel = {"index": len(out), "root": n.name, "axes": {}, "symbolic": False}
                out.append(kernel)
            tag = getattr(n.node, "thread_tag", "")
            if isinstance(n.extent, int):
                kernel["axes"][tag] = max(kernel["axes"].get(tag, 0), n.extent)
            else:
                kernel["symbolic"] = True
            kernel.setdefault("nodes", []).append(id(n.node))
        for c in n.children:
            walk(c, kernel)

    for r in tree.roots:
        walk(r, None)
    for k in out:
        ax = k["axes"]
        k["grid"] = tuple(ax.get(f"blockIdx.{a}", 1) for a in "xyz")
        k["block"] = tuple(ax.get(f"threadIdx.{a}", 1) for a in "xyz")
        k["vthreads"] = tuple(ax.get(f"vthread.{a}", 1) for a in "xyz")
        k["blocks"] = k["grid"][0] * k["grid"][1] * k["grid"][2]
        k["threads"] = k["block"][0] * k["block"][1] * k["block"][2]
        k["warps"] = -(-k["threads"] // WARP)
    return out


def _kernel_line(k: dict) -> str:
    def dims(d):
        return "(" + ",".join(str(v) for v in d) + ")"
    line = (f"kernel {k['index']}: grid {dims(k['grid'])} × block {dims(k['block'])} = "
            f"{k['threads']} threads")
    if k["vthreads"] != (1, 1, 1):
        line += f", vthreads {dims(k['vthreads'])}"
    if k["symbolic"]:
        line += ", some extents symbolic"
    return line


def _shape(buf) -> str:
    try:
        return "[" + ", ".join(str(d) for d in buf.const_shape()) + "]"
    except Exception:  # noqa: BLE001 - symbolic shapes print without dims
        return ""


def render_svg(tree: FuncTree, *, title: str | None = None, footprints: dict | None = None,
               kernels: list[dict] | None = None) -> Markup:
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
    by_loop: dict = {}
    for k in kernels or ():
        over = k["threads"] > 1024
        out.append(f'<g class="kernel-line" data-kernel="{k["index"]}" data-grid='
                   f'"{",".join(map(str, k["grid"]))}" data-block="{",".join(map(str, k["block"]))}">')
        out.append(_text(8, y + 12, _kernel_line(k) + (" — over 1024!" if over else ""),
                         size=13, weight="bold", fill="#cf222e" if over else "#0f766e"))
        out.append("</g>")
        y += 20
        for nid in k.get("nodes", ()):
            by_loop[nid] = k
    y += 4
    for n in tree.roots:
        y = _render(n, 8, y, WIDTH - 16, out, footprints, by_loop) + GAP
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


def diagrams(mod, trees: list[FuncTree], label: str = "", text: str | None = None,
             gpu: bool = False) -> list[Markup]:
    """One diagram per function of ``mod``, with its loops' cache footprints (not on a
    ``gpu`` target: they describe this machine's CPU caches) and its kernels' grid and
    block; ``label`` prefixes the titles (the compare page's "A" and "B"). ``text``:
    ``mod`` as printed, when the caller has it: the diagrams are then kept by it, and drawn
    once per program."""
    key = (text, label, gpu) if text is not None else None
    got = _DRAWN.get(key) if key is not None else None
    if got is not None:
        return list(got)
    out = [render_svg(t, title=f"{label}: {t.func_name}" if label else t.func_name,
                      footprints=None if gpu else footprints(mod, t),
                      kernels=gpu_kernels(t)) for t in trees]
    if key is not None:
        _DRAWN.put(key, out)
    return list(out)


# ---------------------------------------------------------------------------- the GPU strip
def gpu_context(session, mod, trees: list[FuncTree], result: dict | None = None) -> dict | None:
    """The line under the diagram of a GPU session (None on the CPU): per kernel its grid
    and block (from the bindings, read here), threads per block against the GPU's limit,
    and — from the worker's result for this step (``result``, else the stored one; never
    submitted nor waited for here: the memory pane asks for it) — shared memory per block
    against the per-block and per-SM limits, ptxas's registers per thread and the
    occupancy they allow."""
    from .gpu_memory import fmt_kib, resources
    from ..services import measurer
    target = session.target
    if not target.is_gpu:
        return None
    fname = session.func_name
    tree = next((t for t in trees if t.func_name == fname), trees[0] if trees else None)
    kernels = gpu_kernels(tree) if tree is not None else []
    spec = None
    try:
        from engine.gpu.specs import get_spec
        spec = get_spec(target.gpu)
    except Exception:  # noqa: BLE001 - no limits shown
        spec = None
    res = result
    if kernels and res is None:
        try:
            wl = session.workload_arg()
            name, params = wl if wl else (None, {})
            res = measurer().cached(mod, name, params, fname, target=session.gpu)
        except Exception:  # noqa: BLE001 - the strip shows the static part only
            res = None
    built = resources(res, target.gpu) if isinstance(res, dict) and res.get("resources") else []
    rows = []
    for i, k in enumerate(kernels):
        r = built[i] if i < len(built) else None
        rows.append({"kernel": k, "res": r})
    return {"label": target.label, "kernels": rows, "spec": spec,
            "max_threads": spec.max_threads_per_block if spec else 1024,
            "error": (res or {}).get("error") if isinstance(res, dict) else None,
            "built": bool(built), "fmt_kib": fmt_kib}
