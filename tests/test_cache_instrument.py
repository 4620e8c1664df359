"""engine.cache internals: instrumentation order, sampling plan, footprints, counters."""
import numpy as np
import pytest

from engine.cache import hwcounters, simulate
from engine.cache.examples import mm_relu_course, mm_relu_naive
from engine.cache.footprint import box_lines, loop_footprints
from engine.cache.geometry import validate_levels
from engine.cache.instrument import _windows, instrument, mark_blocks, plan_sampling
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import collect
from engine.lower import lower


def _lowered(params, body):
    f = PrimFunc("f", params, body, (("global_symbol", "f"),))
    return f.with_attr("lowered_params", tuple(params)).with_attr("lowered", True)


def _calls(func):
    """[(symbol, buffer name, index expr, nbytes)] of the simulator calls, in order."""
    out = []
    for c in collect(getattr(func, "body", func), E.Call):
        if c.op == "call_extern" and c.args[0].value.startswith("__cachesim_access"):
            ld = c.args[1].args[0]
            out.append((ld.buffer.name, ld.indices[0], c.args[2].value))
    return out


def test_loads_reported_in_evaluation_order_before_the_store():
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    i = E.Var("i")
    body = S.For(i, 0, 8, S.ForKind.SERIAL, S.BufferStore(B, A[i] + A[i + 1] * B[i], (i,)))
    ins = instrument(_lowered((A, B), body))
    names = [n for n, _, _ in _calls(ins.func)]
    assert names == ["A", "A", "B", "B"]
    seq = ins.func.body.seq[-1].body.seq  # base records first, then the loop body
    assert isinstance(seq[-1], S.BufferStore)


def test_if_then_else_loads_are_reported_only_on_the_taken_branch():
    A, C, B = (Buffer(n, (16,), "float32") for n in "ACB")
    i = E.Var("i")
    val = E.Call("float32", "if_then_else", (i < 4, A[i], C[i]))
    ins = instrument(_lowered((A, C, B), S.For(i, 0, 8, S.ForKind.SERIAL,
                                                S.BufferStore(B, val, (i,)))))
    ifs = collect(ins.func.body, S.IfThenElse)
    assert len(ifs) == 1
    assert [n for n, _, _ in _calls(ifs[0].then_case)] == ["A"]
    assert [n for n, _, _ in _calls(ifs[0].else_case)] == ["C"]


def test_vector_accesses_cover_their_bytes_or_split_per_lane():
    A, B = Buffer("A", (256,), "float32"), Buffer("B", (256,), "float32")
    i = E.Var("i")
    contiguous = S.BufferStore(B, A[E.Ramp(i * 8, E.IntImm("int32", 1), 8)],
                               (E.Ramp(i * 8, E.IntImm("int32", 1), 8),))
    ins = instrument(_lowered((A, B), S.For(i, 0, 4, S.ForKind.SERIAL, contiguous)))
    assert [(n, nb) for n, _, nb in _calls(ins.func)] == [("A", 32), ("B", 32)]
    # a stride of 32 elements (128 B) puts every lane on its own line: one access per lane
    strided = S.BufferStore(B, A[E.Ramp(i, E.IntImm("int32", 32), 4)], (E.Broadcast(i, 4),))
    ins = instrument(_lowered((A, B), S.For(i, 0, 4, S.ForKind.SERIAL, strided)))
    assert [(n, nb) for n, _, nb in _calls(ins.func)] == [("A", 4)] * 4 + [("B", 4)]


def test_block_markers_survive_lowering_and_attribute_accesses():
    marked, names = mark_blocks(mm_relu_course(16)["mm_relu"])
    assert set(names) == {"Y_init", "Y_update", "C", "root"}
    ins = instrument(lower(marked), len(names))
    slots = set()
    for c in collect(ins.func.body, E.Call):
        if c.op == "call_extern" and c.args[0].value.startswith("__cachesim_access"):
            slots.add(names[c.args[4].value])
    assert slots == {"Y_init", "Y_update", "C"}
    assert not any(isinstance(x, S.Evaluate) and isinstance(x.value, E.IntImm)
                   and x.value.value > 2**60 for x in collect(ins.func.body, S.Evaluate))


def test_sampling_plan_picks_the_outer_loop_and_fits_the_budget():
    low = lower(mark_blocks(mm_relu_naive(64)["mm_relu"])[0])
    assert not plan_sampling(low, 10**9, 64).loops
    plan = plan_sampling(low, 200_000, 64)
    (sl,) = plan.loops
    assert sl.name == "i" and sl.n == 64 and 8 <= sl.k < 64
    assert sum(m for _, _, m in sl.windows) == sl.k
    assert plan.estimated_simulated <= 200_000 * 1.05


@pytest.mark.parametrize("n, k, w", [(64, 8, 4), (100, 37, 4), (10, 10, 4), (9, 3, 4)])
def test_windows_are_ordered_and_disjoint(n, k, w):
    ws = _windows(n, k, w)
    assert sum(m for _, _, m in ws) == k
    end = 0
    for warm, start, m in ws:
        assert end <= warm <= start and start + m <= n
        end = start + m
    assert ws[0][0] == ws[0][1] == 0  # the first window is the program's cold start


def test_parallel_loop_is_simulated_serially_with_a_note():
    A, B = Buffer("A", (4096,), "float32"), Buffer("B", (4096,), "float32")
    i = E.Var("i")
    vi = S.IterVar(E.Var("vi"), __import__("engine").ir.Range(0, 4096), S.IterType.SPATIAL)
    blk = S.Block((vi,), (), (), "copy", S.BufferStore(B, A[vi.var], (vi.var,)))
    loop = S.For(i, 0, 4096, S.ForKind.PARALLEL, S.BlockRealize((i,), E.IntImm("bool", 1), blk))
    root = S.Block((), (), (), "root", loop)
    f = PrimFunc("copy", (A, B), S.BlockRealize((), E.IntImm("bool", 1), root),
                 (("global_symbol", "copy"),))
    r = simulate(IRModule.from_funcs(f), "copy", hardware=False,
                 levels=[{"name": "L1", "size": 4096, "ways": 4, "line": 64}])
    assert r.level("L1").accesses == 8192 and r.level("L1").misses == 2 * 4096 * 4 // 64
    assert any("serially" in n for n in r.notes)


def test_footprint_lines_of_a_column_and_of_a_tile():
    B = Buffer("B", (128, 128), "float32")
    assert box_lines(B, [[0, 127], [5, 5]], 64) == 128      # a column: one line per row
    assert box_lines(B, [[0, 127], [0, 3]], 64) == 128      # 4 floats of each row: one line
    assert box_lines(B, [[0, 1], [0, 127]], 64) == 16       # two full rows, contiguous
    assert box_lines(B, [[0, 0], [14, 17]], 64) == 2        # straddles a line boundary


def test_footprints_of_the_naive_nest():
    levels = validate_levels([{"name": "L1", "size": 49152, "ways": 12, "line": 64},
                              {"name": "L2", "size": 1 << 20, "ways": 16, "line": 64}])
    fps = loop_footprints(mm_relu_naive(128)["mm_relu"], levels)
    assert [fp.path for fp in fps] == ["i", "i/j", "i/j/k", "i", "i/j"]  # pre-order, 2 nests
    assert [fp.index for fp in fps] == [0, 1, 2, 3, 4]
    fps = {"i": fps[0], "i/j": fps[1]}
    # one iteration of j: Y[i, j] (1 line), row i of A (8 lines), column j of B (128 lines)
    assert fps["i/j"].line_bytes == (1 + 8 + 128) * 64
    assert fps["i/j"].fits_in == "L1"
    # one iteration of i: all of B (64 KiB) does not fit a 48 KiB L1
    assert fps["i"].fits == {"L1": False, "L2": True}


def test_hardware_counters_report_counts_or_a_reason():
    pr = hwcounters.probe()
    assert isinstance(pr.available, bool)
    if not pr.available:
        assert pr.reason and "not available" in pr.describe()
        return
    a = np.ones(2 << 20, dtype=np.float32)  # 8 MiB = 131072 lines
    res = hwcounters.measure(lambda: a.sum())
    assert res.available and res.counts["L1D read misses"] > 131072 // 2


# -- access patterns -----------------------------------------------------------------------
def test_access_pattern_of_one_outer_iteration():
    from engine.cache import access_pattern
    n = 8
    p = access_pattern(mm_relu_naive(n), "mm_relu")  # first loop: i of the Y nest, i = 0
    assert p.loop == "i" and p.iteration == 0 and not p.truncated
    assert p.events == n * (1 + 4 * n)  # per j: init store, then 4 accesses per k
    B = p.buffers["B"].first_touch
    assert (B >= 0).all()  # one iteration of i reads all of B ...
    assert (np.diff(B[:, 0]) > 0).all() and B[n - 1, 0] < B[0, 1]  # ... column by column
    assert (p.buffers["A"].first_touch[1:] == -1).all()  # only row 0 of A
    assert (p.buffers["C"].first_touch == -1).all()  # the C nest is not part of it
    assert p.buffers["Y"].touches[0].tolist() == [1 + 2 * n] * n
    d = p.to_dict()
    assert d["buffers"]["B"]["shape"] == [n, n] and d["buffers"]["B"]["touched"] == n * n


def test_access_pattern_of_a_tile_iteration_and_bad_choices():
    from engine.cache import AccessPatternError, access_pattern
    p = access_pattern(mm_relu_course(8), "mm_relu", loop="i/j_0", iteration=1)
    B = p.buffers["B"].first_touch
    assert (B[:, :4] == -1).all() and (B[:, 4:] >= 0).all()  # columns 4..7 of B only
    assert (np.diff(B[0, 4:]) > 0).all() and B[0, 7] < B[1, 4]  # row by row
    with pytest.raises(AccessPatternError, match="its loops are"):
        access_pattern(mm_relu_course(8), "mm_relu", loop="nope")
    with pytest.raises(AccessPatternError, match="iteration must be in 0..1"):
        access_pattern(mm_relu_course(8), "mm_relu", loop="i/j_0", iteration=2)


def test_access_pattern_plain_data_is_tiled_above_max_cells():
    from engine.cache.pattern import BufferPattern
    first = np.arange(64, dtype=np.int64).reshape(8, 8)
    first[0, 0] = -1
    bp = BufferPattern("X", (8, 8), first, np.ones((8, 8), dtype=np.int32))
    d = bp.to_dict(max_cells=16)
    assert d["tile"] == [2, 2] and np.array(d["first_touch"]).shape == (4, 4)
    assert d["first_touch"][0][0] == 1 and d["first_touch"][3][3] == 54  # earliest in tile
    assert d["touches"][0][0] == 4 and d["touched"] == 63
    assert bp.to_dict()["tile"] == [1, 1]
