"""Server-rendered SVG of a model's graph: ``main``'s inputs, then one box per
call in order — an ``R.call_tir``: the TensorIR function called (a link into the explorer),
its output shape, its op pattern, "fused" when FuseTIR made it, and how many schedule steps
the link gives it; a high-level operator (``R.matmul``, before LegalizeOps); a call of a
Relax function (``fused_matmul_add0``, a ``Primitive`` function before FuseTIR, with the
calls it groups) — with an arrow from each box to the boxes that read its result.  Weights
(constants) are listed inside the box that reads them.  All text is escaped.
"""
from __future__ import annotations

from markupsafe import Markup, escape

from engine.ir.function import IRModule, PrimFunc
from engine.relax.expr import Call, Constant, Function, GlobalVar, Op, Var
from engine.relax.transform.fuse_ops import call_tir_callee, tir_args
from engine.relax.transform.op_pattern import PATTERN_NAMES, op_pattern

__all__ = ["graph_svg"]

WIDTH = 520
BOX_W = 360
LINE = 16
GAP = 26
X0 = 80


def _shape(si) -> str:
    shape = getattr(si, "shape", None)
    return "(" + ", ".join(map(str, shape)) + ")" if shape is not None else "?"


def _other_call(mod: IRModule, b, members: dict):
    """The node of a binding calling a high-level operator or a Relax function, else None."""
    v = b.value
    if not isinstance(v, Call) or not isinstance(v.op, (Op, GlobalVar)):
        return None
    consts = [_shape(a.struct_info) for a in v.args if isinstance(a, Constant)]
    reads = {id(a) for a in v.args if isinstance(a, Var)}
    if isinstance(v.op, Op):
        title = "R." + v.op.name.removeprefix("relax.")
        lines = [f"{b.var.name_hint} = {_shape(b.var.struct_info)} · high-level operator"]
        kind = "op"
    else:
        title = v.op.name_hint
        f = mod[title] if title in mod else None
        primitive = isinstance(f, Function) and bool(f.attr("Primitive"))
        lines = [f"{b.var.name_hint} = {_shape(b.var.struct_info)} · Relax function"
                 + (" (Primitive)" if primitive else "")]
        if title in members:
            lines.append("fuses " + " → ".join(members[title]))
        kind = "fused" if primitive else "other"
    if consts:
        lines.append("weights " + ", ".join(consts))
    return (kind, title, lines, {id(b.var)}, reads, None)


def graph_svg(mod: IRModule, traces: dict, members: dict | None = None,
              svg_id: str | None = None) -> Markup:
    """The SVG of ``mod``'s ``main``; ``traces``: function -> Trace given by the link;
    ``members``: fused function -> the functions grouped into it; ``svg_id`` the SVG
    element's id (its arrow marker's too)."""
    members = members or {}
    main = mod["main"]
    nodes = []  # (kind, title, lines, var ids produced, var ids read, link func)
    for p in main.params:
        nodes.append(("input", f"input {p.name_hint}", [_shape(p.struct_info)], {id(p)}, set(),
                      None))
    for b in main.bindings():
        callee = call_tir_callee(b.value)
        other = _other_call(mod, b, members) if callee is None else None
        if other is not None:
            nodes.append(other)
            continue
        if callee is None:
            nodes.append(("other", b.var.name_hint, [type(b.value).__name__],
                          {id(b.var)}, {id(a) for a in getattr(b.value, "args", ())
                                        if isinstance(a, Var)}, None))
            continue
        prim = mod[callee] if callee in mod else None
        args = tir_args(b.value)
        consts = [_shape(a.struct_info) for a in args if isinstance(a, Constant)]
        pattern = PATTERN_NAMES.get(op_pattern(prim), "?") if isinstance(prim, PrimFunc) else "?"
        lines = [f"{b.var.name_hint} = {_shape(b.var.struct_info)} · {pattern}"]
        if consts:
            lines.append("weights " + ", ".join(consts))
        if callee in members:
            lines.append("fuses " + " → ".join(members[callee]))
        if callee in traces:
            lines.append(f"scheduled: {len(traces[callee].insts)} steps")
        kind = "fused" if callee.startswith("fused_") else "call"
        nodes.append((kind, callee, lines, {id(b.var)},
                      {id(a) for a in args if isinstance(a, Var)}, callee))
    # layout: one column, top to bottom
    ys, y = [], 10
    for kind, title, lines, *_ in nodes:
        h = LINE * (1 + len(lines)) + 12
        ys.append((y, h))
        y += h + GAP
    height = y
    marker = f"{svg_id}-arrow" if svg_id else "arrow"
    id_attr = f' id="{escape(svg_id)}"' if svg_id else ""
    parts = [f'<svg class="model-graph"{id_attr} xmlns="http://www.w3.org/2000/svg" '
             f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-label="the model\'s graph">',
             f'<defs><marker id="{escape(marker)}" viewBox="0 0 10 10" refX="9" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path '
             'd="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    produced_at = {}
    for i, node in enumerate(nodes):
        for v in node[3]:
            produced_at[v] = i
    side = 0
    for j, node in enumerate(nodes):
        for v in sorted(node[4]):
            i = produced_at.get(v)
            if i is None:
                continue
            y1 = ys[i][0] + ys[i][1]
            y2 = ys[j][0]
            if j == i + 1:
                parts.append(f'<line x1="{X0 + BOX_W // 2}" y1="{y1}" x2="{X0 + BOX_W // 2}" '
                             f'y2="{y2}" stroke="#555" marker-end="url(#{marker})"/>')
            else:
                side += 1
                xr = X0 + BOX_W + 12 + 10 * (side % 6)
                parts.append(f'<path d="M {X0 + BOX_W} {y1 - 8} C {xr} {y1 - 8}, {xr} {y2 + 8},'
                             f' {X0 + BOX_W} {y2 + 8}" fill="none" stroke="#555" '
                             f'marker-end="url(#{marker})"/>')
    for (kind, title, lines, _p, _r, link), (y, h) in zip(nodes, ys):
        cls = f"mg-{kind}"
        title_el = escape(title)
        parts.append(f'<g class="mg-node {cls}" data-func="{escape(link or "")}">')
        parts.append(f'<rect x="{X0}" y="{y}" width="{BOX_W}" height="{h}" rx="6"/>')
        if link:
            parts.append(f'<a href="#fn-{escape(link)}"><text x="{X0 + 10}" y="{y + 18}" '
                         f'class="mg-title">{title_el}</text></a>')
        else:
            parts.append(f'<text x="{X0 + 10}" y="{y + 18}" class="mg-title">{title_el}</text>')
        if kind == "fused" or kind == "op":
            parts.append(f'<text x="{X0 + BOX_W - 10}" y="{y + 18}" text-anchor="end" '
                         f'class="mg-badge">{"fused group" if kind == "fused" else "operator"}'
                         '</text>')
        for k, line in enumerate(lines):
            parts.append(f'<text x="{X0 + 10}" y="{y + 18 + LINE * (k + 1)}" class="mg-line">'
                         f'{escape(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
