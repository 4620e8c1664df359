"""Unit tests of the app's pure parts: SVG diagram, diff view, plots, toolbar input parsing,
custom-program links. They use hand-built IR (tests/test_app_ir.py), not the workloads."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from engine.ir import ForKind

from app.errors import AppError
from app.web import plots
from app.web.panes import diagram
from app.web.panes import diff as diffview
from app.web.selection import build_tree
from app.web.session import decode_src, encode_src
from app.web.toolbar import InputError, block_prims, loop_prims, parse_factors
from test_app_ir import mm_relu_module

SVG_NS = "{http://www.w3.org/2000/svg}"


def _svg(mod):
    tree = build_tree(mod["mm_relu"])
    return tree, str(diagram.render_svg(tree))


def test_diagram_is_well_formed_svg_with_one_box_per_loop_and_block():
    tree, svg = _svg(mm_relu_module(16))
    root = ET.fromstring(svg)
    groups = [g for g in root.iter(f"{SVG_NS}g") if "dnode" in g.get("class", "")]
    assert [g.get("data-sel") for g in groups] == [
        "L/mm_relu/0/Y", "L/mm_relu/1/Y", "L/mm_relu/2/Y", "B/mm_relu/Y",
        "L/mm_relu/0/C", "L/mm_relu/1/C", "B/mm_relu/C"]
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "for k in 16" in texts
    assert 'block "Y"  [SSR]' in texts
    assert "reads A, B" in texts and "writes Y" in texts
    assert "init" in texts
    # loops are nested: the k box lies inside the j box, which lies inside the i box
    rects = {g.get("data-sel"): g.find(f"{SVG_NS}rect") for g in groups}

    def box(sel):
        r = rects[sel]
        return (float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))

    for outer, inner in [("L/mm_relu/0/Y", "L/mm_relu/1/Y"), ("L/mm_relu/1/Y", "L/mm_relu/2/Y"),
                         ("L/mm_relu/2/Y", "B/mm_relu/Y")]:
        ox, oy, ow, oh = box(outer)
        ix, iy, iw, ih = box(inner)
        assert ox < ix and oy < iy and ix + iw < ox + ow and iy + ih < oy + oh
    # the second nest is below the first
    assert box("L/mm_relu/0/C")[1] > box("L/mm_relu/0/Y")[1] + box("L/mm_relu/0/Y")[3]


def test_diagram_marks_loop_kinds_by_word_and_style():
    mod = mm_relu_module(16, j_split=4, kinds={"i": ForKind.PARALLEL, "j_1": ForKind.VECTORIZED,
                                                "k": ForKind.UNROLLED})
    tree, svg = _svg(mod)
    root = ET.fromstring(svg)
    by_sel = {g.get("data-sel"): g for g in root.iter(f"{SVG_NS}g") if g.get("data-sel")}
    par = by_sel["L/mm_relu/0/Y"]
    assert "kind-parallel" in par.get("class")
    assert "parallel" in [t.text for t in par.iter(f"{SVG_NS}text")]
    vec = by_sel["L/mm_relu/3/Y"]
    assert vec.find(f"{SVG_NS}rect").get("fill") == "url(#stripes)"
    unr = by_sel["L/mm_relu/2/Y"]
    assert unr.find(f"{SVG_NS}rect").get("stroke-dasharray")
    assert "for j_1 in 4" in [t.text for t in vec.iter(f"{SVG_NS}text")]


def test_diagram_escapes_names():
    mod = mm_relu_module(8)
    func = mod["mm_relu"]
    from engine.ir import Var
    # a loop variable whose name is markup must come out as text, not as an element
    loop = func.body.block.body.seq[0]
    evil = loop.replace(loop_var=Var("<script>alert(1)</script>"))
    func2 = func.with_body(func.body.replace(block=func.body.block.replace(
        body=func.body.block.body.replace(seq=(evil,) + func.body.block.body.seq[1:]))))
    svg = str(diagram.render_svg(build_tree(func2)))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)  # still well-formed


def test_diff_rows_mark_changed_lines():
    old = "a\nb\nc\nd\n"
    new = "a\nB\nc\nd\ne\n"
    rows = diffview.diff_rows(old, new)
    kinds = [(r.kind, r.old, r.new, r.text) for r in rows]
    assert kinds == [("same", 1, 1, "a"), ("del", 2, None, "b"), ("add", None, 2, "B"),
                     ("same", 3, 3, "c"), ("same", 4, 4, "d"), ("add", None, 5, "e")]
    assert diffview.changed_new_lines(old, new) == {2, 5}
    assert diffview.summary(rows) == "2 lines added, 1 removed"
    assert diffview.summary(diffview.diff_rows(old, old)) == "no textual change"


def test_runtime_figure_has_a_point_per_step_and_a_numpy_line():
    rows = [{"step": 0, "time_ms": 4.0, "gflops": 1.0, "numpy_ms": 0.5, "correct": True},
            {"step": 1, "time_ms": 2.0, "gflops": 2.0, "numpy_ms": 0.5, "correct": True},
            {"step": 2, "time_ms": None, "correct": None},
            {"step": 3, "time_ms": 1.0, "gflops": 4.0, "numpy_ms": 0.5, "correct": False}]
    text = plots.runtime_figure(rows, current=3)
    fig = json.loads(text)
    runtime, numpy_line = fig["data"]
    assert runtime["x"] == [0, 1, 3] and runtime["y"] == [4.0, 2.0, 1.0]
    assert runtime["marker"]["symbol"] == ["circle", "circle", "x"]
    assert runtime["marker"]["size"][-1] > runtime["marker"]["size"][0]
    # each point's GFLOP/s is in its hover label (no second axis)
    assert runtime["customdata"] == [1.0, 2.0, 4.0] and "GFLOP/s" in runtime["hovertemplate"]
    assert "yaxis2" not in fig["layout"]
    assert numpy_line["y"] == [0.5, 0.5] and "numpy" in numpy_line["name"]
    # the legend is the page's, above the plot: one entry per trace, drawn as the trace is
    assert fig["layout"]["showlegend"] is False
    assert plots.legend(text) == [
        {"name": "runtime ms", "color": "#1f6feb", "kind": "line+marker"},
        {"name": "numpy 0.500 ms", "color": "#8250df", "kind": "dash"}]
    assert plots.legend(None) == []


def test_parse_factors():
    assert parse_factors("None, 4") == [None, 4]
    assert parse_factors("[None, 8, 4]") == [None, 8, 4]
    assert parse_factors("_,2") == [None, 2]
    for bad, word in [("", "needs factors"), ("4", "at least two"), ("x, 4", "not a whole number"),
                      ("1,2,3,4,5,6,7,8,9", "at most 8")]:
        with pytest.raises(InputError, match=word):
            parse_factors(bad)


def test_toolbar_offers_primitives_by_selection_kind():
    tree = build_tree(mm_relu_module(8)["mm_relu"])
    j = tree.by_sel["L/mm_relu/1/Y"]
    prims = {p.name: p for p in loop_prims(tree, j)}
    assert {"split", "reorder", "fuse", "parallel", "vectorize", "unroll"} <= set(prims)
    assert prims["reorder"].args[0].default == "i, j, k"
    assert prims["fuse"].disabled == ""                    # j's body is the single loop k
    k = tree.by_sel["L/mm_relu/2/Y"]
    assert {p.name: p for p in loop_prims(tree, k)}["fuse"].disabled  # k's body is a block
    bprims = {p.name: p for p in block_prims(tree, "C")}
    targets = [v for v, _ in bprims["reverse_compute_at"].args[0].choices]
    assert targets == ["L/mm_relu/0/Y", "L/mm_relu/1/Y", "L/mm_relu/2/Y"]   # loops of Y only
    assert [v for v, _ in bprims["decompose_reduction"].args[0].choices] == ["L/mm_relu/0/C",
                                                                             "L/mm_relu/1/C"]
    assert [lab for _, lab in bprims["cache_read"].args[0].choices] == ["Y"]
    # decompose_reduction proposes the reduction loop k by default
    yprims = {p.name: p for p in block_prims(tree, "Y")}
    assert yprims["decompose_reduction"].args[0].default == "L/mm_relu/2/Y"
    assert tree.by_sel["B/mm_relu/Y"].reduce_loop_vars[0].name == "k"


def test_custom_program_links_roundtrip_and_refuse_damage():
    text = "@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    pass\n" * 5
    tok = encode_src(text)
    assert decode_src(tok) == text
    assert len(tok) < len(text)
    with pytest.raises(AppError) as e:
        decode_src(tok[:-7] + "@@@")
    assert e.value.status == 400 and "damaged" in e.value.message


def test_format_ms_picks_readable_units():
    from app import format_ms
    assert format_ms(None) == "–"
    assert format_ms(250.4) == "250 ms"
    assert format_ms(1.234) == "1.23 ms"
    assert format_ms(0.0871) == "0.087 ms"
    assert format_ms(0.0032) == "3.2 µs"


def test_diagram_shows_loop_footprints_against_cache_levels():
    tree = build_tree(mm_relu_module(16)["mm_relu"])
    loops = [n for n in tree.by_node.values() if getattr(n, "is_loop", False)]
    i_loop = next(n for n in loops if n.sel == "L/mm_relu/0/Y")
    k_loop = next(n for n in loops if n.sel == "L/mm_relu/2/Y")
    fps = {id(i_loop.node): (66560, "L2"), id(k_loop.node): (192, "L1")}
    root = ET.fromstring(str(diagram.render_svg(tree, footprints=fps)))
    by_sel = {g.get("data-sel"): g for g in root.iter(f"{SVG_NS}g") if g.get("data-sel")}
    tags = lambda sel: [t.text for t in by_sel[sel].iter(f"{SVG_NS}text") if t.get("class") == "fp"]
    assert tags("L/mm_relu/0/Y") == ["65.0 KiB → L2"]
    assert tags("L/mm_relu/2/Y") == ["192 B → L1"]
    assert tags("L/mm_relu/1/Y") == []            # no footprint given: no tag
    assert "fits in L2" in by_sel["L/mm_relu/0/Y"].get("aria-label")
    assert diagram.human_bytes(1023) == "1023 B" and diagram.human_bytes(3 << 20) == "3.0 MiB"


def test_cache_figure_groups_levels_per_step():
    rows = [{"step": 0, "levels": [{"name": "L1", "misses": 2_000_000, "accesses": 8_000_000, "miss_rate": 0.25},
                                   {"name": "L2", "misses": 4000, "accesses": 2_000_000, "miss_rate": 0.002}]},
            {"step": 1, "levels": [{"name": "L1", "misses": 500_000, "accesses": 8_000_000, "miss_rate": 0.06},
                                   {"name": "L2", "misses": 4000, "accesses": 500_000, "miss_rate": 0.008}]}]
    fig = json.loads(plots.cache_figure(rows, current=1))
    l1, l2 = fig["data"]
    assert l1["name"] == "L1 misses" and l1["x"] == [0, 1] and l1["y"] == [2_000_000, 500_000]
    assert l2["y"] == [4000, 4000]
    assert l1["marker"]["line"]["width"] == [0, 3]          # the current step is outlined
    assert fig["layout"]["yaxis"]["type"] == "log"          # a 500x spread needs a log axis
    assert fig["layout"]["showlegend"] is False
    assert [(e["name"], e["kind"]) for e in plots.legend(plots.cache_figure(rows))] == \
        [("L1 misses", "bar"), ("L2 misses", "bar")]
    flat = json.loads(plots.cache_figure(rows[:1][:1] and [{"step": 0, "levels": rows[0]["levels"][:1]}]))
    assert flat["layout"]["yaxis"].get("type") != "log"


def test_toolbar_offers_pad_einsum_and_decompose_padding_on_a_block():
    from app.web.toolbar import parse_padding
    tree = build_tree(mm_relu_module(8)["mm_relu"])
    prims = {p.name: p for p in block_prims(tree, "Y")}
    assert prims["pad_einsum"].args[0].default == "16, 16, 16"   # one factor per axis
    assert prims["pad_einsum"].disabled == ""
    assert [v for v, _ in prims["reindex"].args[0].choices] == ["r0", "r1", "w0"]
    assert [v for v, _ in prims["decompose_padding"].args[0].choices][0] == "L/mm_relu/0/Y"
    assert parse_padding("16, 16, 1") == [16, 16, 1]
    assert parse_padding("[4,4]") == [4, 4]
    for bad in ("", "0, 4", "x", "4, 5000", ",".join(["2"] * 17)):
        with pytest.raises(InputError):
            parse_padding(bad)


def test_toolbar_offers_the_partition_layout_and_buffer_access_primitives():
    from app.web.toolbar import index_map_text, parse_lengths, parse_positions
    tree = build_tree(mm_relu_module(8)["mm_relu"])
    lp = {p.name: p for p in loop_prims(tree, tree.by_sel["L/mm_relu/1/Y"])}
    assert lp["loop_partition"].args[0].default == "None, 4"
    assert [v for v, _ in lp["merge"].args[0].choices] == ["L/mm_relu/0/C", "L/mm_relu/1/C"]
    bp = {p.name: p for p in block_prims(tree, "Y")}
    assert bp["transform_block_layout"].args[0].default == "lambda vi, vj, vk: (vk, vj, vi)"
    assert bp["reorder_block_iter_var"].args[0].default == "2, 1, 0"
    assert bp["annotate_buffer_access"].args[1].default == \
        "lambda vi, vj, vk: [(vi, vi + 1), (vk, vk + 1)]"
    assert [v for v, _ in bp["unsafe_set_dtype"].args[0].choices] == ["0"]
    assert bp["reindex_cache_read"].disabled == "" and bp["reindex_cache_write"].disabled == ""
    assert parse_lengths("None, 4") == [None, 4] and parse_lengths("[3]") == [3]
    assert parse_positions("2, 0, 1") == [2, 0, 1]
    for bad, fn in (("x", parse_lengths), (",".join(["1"] * 9), parse_lengths),
                    ("a, 1", parse_positions)):
        with pytest.raises(InputError):
            fn(bad)
    assert index_map_text({"index_map": "lambda i, j: (j, i)"}, "transform_block_layout")
    for bad, word in (("", "needs an index map"), ("lambda i: os.system(i)", "not allowed"),
                      ("x" * 500, "too long"), ("lambda i: (i ** 2,)", "not allowed")):
        with pytest.raises(InputError, match=word):
            index_map_text({"index_map": bad}, "transform_block_layout")
