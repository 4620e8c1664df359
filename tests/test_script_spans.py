"""Span map: every loop and block appears exactly once, on the right lines."""
from __future__ import annotations

import json

from hypothesis import given

from engine.ir import Block, BufferStore, For, collect
from engine.script import Span, parse, script, script_with_spans

from test_script_irgen import SEED_RCA, SYMBOLIC_TEXT, mm_relu, programs


def _check_spans(mod):
    text, spans = script_with_spans(mod)
    assert text == script(mod)
    lines = text.splitlines()
    loops, blocks = [], []
    for _, f in mod.functions:
        loops += collect(f.body, For)
        blocks += collect(f.body, Block)
    by_kind = {"loop": [], "block": [], "stmt": []}
    for s in spans:
        assert isinstance(s, Span)
        assert 1 <= s.start_line <= s.end_line <= len(lines)
        by_kind[s.kind].append(s)
    # each loop / block exactly once (by identity)
    assert sorted(id(s.node) for s in by_kind["loop"]) == sorted(id(l) for l in loops)
    assert sorted(id(s.node) for s in by_kind["block"]) == sorted(id(b) for b in blocks)
    for s in by_kind["loop"]:
        head = lines[s.start_line - 1].strip()
        assert head.startswith("for ") and s.name in head.split(" in ")[0].replace(",", " ").split()
    for s in by_kind["block"]:
        head = lines[s.start_line - 1].strip()
        if head == '# with T.block("root"):':
            assert s.name == "root"
        else:
            assert head == f"with T.block({json.dumps(s.node.name_hint, ensure_ascii=False)}):"
    for s in by_kind["stmt"]:
        if isinstance(s.node, BufferStore):
            assert s.start_line == s.end_line
            assert lines[s.start_line - 1].strip().startswith(f"{s.name}[")
    # nesting: a loop's span contains the spans of the loops/blocks printed inside it
    nodes = by_kind["loop"] + by_kind["block"]
    for outer in by_kind["loop"]:
        inner_ids = {id(x) for x in collect(outer.node.body, (For, Block))}
        for s in nodes:
            if id(s.node) in inner_ids:
                assert outer.start_line <= s.start_line and s.end_line <= outer.end_line
    return text, spans


def test_mm_relu_spans():
    text, spans = _check_spans(mm_relu())
    loops = [(s.name, s.start_line, s.end_line) for s in spans if s.kind == "loop"]
    assert loops == [("i", 9, 16), ("j", 9, 16), ("k", 9, 16), ("i", 17, 22), ("j", 17, 22)]
    blocks = [(s.name, s.start_line, s.end_line) for s in spans if s.kind == "block"]
    assert blocks == [("root", 7, 22), ("Y", 10, 16), ("C", 18, 22)]
    stmts = [(s.name, s.start_line) for s in spans if s.kind == "stmt"]
    assert stmts == [("Y", 15), ("Y", 16), ("C", 22)]


def test_reverse_compute_at_spans():
    text, spans = _check_spans(parse(SEED_RCA))
    got = {(s.kind, s.name): (s.start_line, s.end_line) for s in spans if s.kind != "stmt"}
    lines = text.splitlines()
    assert lines[got[("loop", "ax0")][0] - 1].strip() == "for ax0 in T.serial(4):"
    assert got[("loop", "k")][0] == got[("loop", "j_1")][0]      # one T.grid line
    assert got[("loop", "i")] == got[("loop", "j_0")]
    assert got[("block", "C")][1] == len(lines)


def test_symbolic_declarations_shift_spans():
    text = SYMBOLIC_TEXT
    t, spans = _check_spans(parse(text))
    loop = [s for s in spans if s.kind == "loop"][0]
    assert t.splitlines()[loop.start_line - 1] == "        for i in T.serial(n):"


@given(programs())
def test_random_program_spans(mod):
    _check_spans(mod)
