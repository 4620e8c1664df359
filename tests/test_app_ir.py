"""Hand-built IR used by the app's tests (independent of the workloads/printer parts),
and tests of app.web.selection: loop/block addressing for selection."""
from __future__ import annotations

from engine.ir import (Block, BlockRealize, Buffer, BufferLoad, BufferRegion, BufferStore, For,
                       ForKind, FloatImm, IRModule, IterType, IterVar, Max, PrimFunc, Range, Var,
                       seq)

from app.web.selection import build_tree, loops_of_block, names_to_sels, parse_sel, walk_tree


def _grid(names_extents, body, kinds=None):
    loops = [Var(n) for n, _ in names_extents]
    stmt = body(*loops)
    for idx in reversed(range(len(loops))):
        kind = (kinds or {}).get(names_extents[idx][0], ForKind.SERIAL)
        stmt = For(loops[idx], 0, names_extents[idx][1], kind, stmt)
    return stmt


def mm_relu_module(n: int = 16, j_split: int | None = None, kinds=None) -> IRModule:
    """The course's mm_relu (optionally with j split into j_0, j_1 by ``j_split``)."""
    A = Buffer("A", (n, n))
    B = Buffer("B", (n, n))
    C = Buffer("C", (n, n))
    Y = Buffer("Y", (n, n))

    def y_block(i, j, k):
        vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
        blk = Block(
            (IterVar(vi, Range(0, n), IterType.SPATIAL), IterVar(vj, Range(0, n), IterType.SPATIAL),
             IterVar(vk, Range(0, n), IterType.REDUCE)),
            (BufferRegion(A, (Range(vi, 1), Range(vk, 1))), BufferRegion(B, (Range(vk, 1), Range(vj, 1)))),
            (BufferRegion(Y, (Range(vi, 1), Range(vj, 1))),),
            "Y",
            BufferStore(Y, BufferLoad(Y, (vi, vj)) + BufferLoad(A, (vi, vk)) * BufferLoad(B, (vk, vj)),
                        (vi, vj)),
            init=BufferStore(Y, FloatImm("float32", 0.0), (vi, vj)),
        )
        return BlockRealize((i, j, k), 1, blk)

    def c_block(i, j):
        vi, vj = Var("vi"), Var("vj")
        blk = Block(
            (IterVar(vi, Range(0, n), IterType.SPATIAL), IterVar(vj, Range(0, n), IterType.SPATIAL)),
            (BufferRegion(Y, (Range(vi, 1), Range(vj, 1))),),
            (BufferRegion(C, (Range(vi, 1), Range(vj, 1))),),
            "C",
            BufferStore(C, Max(BufferLoad(Y, (vi, vj)), FloatImm("float32", 0.0)), (vi, vj)),
        )
        return BlockRealize((i, j), 1, blk)

    if j_split:
        f = j_split
        nest1 = _grid([("i", n), ("j_0", n // f), ("k", n), ("j_1", f)],
                      lambda i, j0, k, j1: y_block(i, j0 * f + j1, k), kinds)
    else:
        nest1 = _grid([("i", n), ("j", n), ("k", n)], y_block, kinds)
    nest2 = _grid([("i", n), ("j", n)], c_block)
    root = Block((), (), (), "root", seq(nest1, nest2), alloc_buffers=(Y,))
    func = PrimFunc("mm_relu", (A, B, C), BlockRealize((), 1, root),
                    (("global_symbol", "mm_relu"), ("tir.noalias", True)))
    return IRModule.from_funcs(func)


def test_tree_addresses_loops_through_their_first_block():
    mod = mm_relu_module(8)
    tree = build_tree(mod["mm_relu"])
    sels = [n.sel for n in walk_tree(tree.roots)]
    assert sels == ["L/mm_relu/0/Y", "L/mm_relu/1/Y", "L/mm_relu/2/Y", "B/mm_relu/Y",
                    "L/mm_relu/0/C", "L/mm_relu/1/C", "B/mm_relu/C"]
    assert [l.name for l in loops_of_block(tree, "Y")] == ["i", "j", "k"]
    assert [l.name for l in loops_of_block(tree, "C")] == ["i", "j"]
    assert tree.by_sel["B/mm_relu/Y"].reads == ["A", "B"]
    assert tree.by_sel["B/mm_relu/Y"].has_init and tree.by_sel["B/mm_relu/Y"].iter_kinds == "SSR"
    assert [b.name for b in tree.allocs] == ["Y"]


def test_parse_sel_roundtrip_and_rejects_garbage():
    assert parse_sel("L/mm_relu/2/Y") == {"kind": "loop", "func": "mm_relu", "block": "Y", "index": 2}
    assert parse_sel("B/f/my/block") == {"kind": "block", "func": "f", "block": "my/block", "index": None}
    for bad in [None, "", "X/a", "L/f/x/Y", "L/f/1/", "B/f/", "B//x", "L" * 500]:
        assert parse_sel(bad) is None


def test_names_to_sels_finds_every_loop_with_that_name():
    mod = mm_relu_module(8)
    tree = build_tree(mod["mm_relu"])
    assert names_to_sels([tree], ["j"]) == ["L/mm_relu/1/Y", "L/mm_relu/1/C"]
    assert names_to_sels([tree], ["C", "nope"]) == ["B/mm_relu/C"]
