"""compute_inline and reverse_compute_inline keep the program's meaning, or refuse.

The cases TVM's own tests define (named in each docstring; the programs here are written
for this engine) where the engine produced a wrong program: a consumer whose T.where reads
the inlined buffer (the predicate kept reading a buffer that no longer existed), and a
consumer that reads less than its producer computes (the guard was dropped: the last row
was written out of bounds). Then a differential property test: random two-stage programs,
each primitive tried; accepted means the interpreter and the compiled code agree with the
interpreter on the original program.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

import engine
from engine.schedule import Schedule, ScheduleError
from semantics import assert_same_meaning


def prog(text: str):
    return engine.parse(text)


PREDICATE_READS_PRODUCER = '''
@T.prim_func
def main(A: T.Buffer((16, 12), "float32"), C: T.Buffer((16, 12), "float32")):
    B = T.alloc_buffer((16, 12))
    for i, j in T.grid(16, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(B[i, j] < 1.0)
            C[vi, vj] = B[vi, vj] + 1.0
'''


def test_inlining_into_a_predicate_puts_the_expression_in_the_predicate():
    """The case of TVM's test_compute_inline_predicate: the consumer's T.where reads the
    producer; after inlining it reads the producer's expression (and the program parses
    back)."""
    mod = prog(PREDICATE_READS_PRODUCER)
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("B"))
    text = sch.mod.script()
    assert "B[" not in text and "T.where(A[i, j] * T.float32(2) < T.float32(1))" in text
    assert engine.structural_equal(engine.parse(text), sch.mod)
    assert_same_meaning(mod, sch.mod)


OVERCOMPUTED = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((15, 13), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(15, 13):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0
'''


def test_reverse_inlining_into_a_producer_that_computes_more_keeps_the_guard():
    """The case of TVM's test_reverse_compute_inline_overcomputed_producer: the producer's
    extra instances must not store into C (they were stored out of bounds)."""
    mod = prog(OVERCOMPUTED)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "T.where(i < 15 and j < 13)" in sch.mod.script()
    assert_same_meaning(mod, sch.mod)


def test_reverse_inlining_into_a_fused_producer_keeps_the_guard():
    """The case of TVM's ..._overcomputed_producer_simplify_predicate: the producer's loop
    is fused; the guard is written over the fused loop."""
    mod = prog(OVERCOMPUTED)
    sch = Schedule(mod)
    sch.fuse(*sch.get_loops(sch.get_block("B")))
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "T.where" in sch.mod.script()
    assert_same_meaning(mod, sch.mod)


SLICE = '''
@T.prim_func
def main(x: T.Buffer((1, 16, 7, 7), "float32"), S: T.Buffer((1, 12, 7, 7), "float32")):
    T_add = T.alloc_buffer((1, 16, 7, 7))
    for a, b, c, d in T.grid(1, 16, 7, 7):
        with T.block("T_add"):
            v0, v1, v2, v3 = T.axis.remap("SSSS", [a, b, c, d])
            T_add[v0, v1, v2, v3] = x[v0, v1, v2, v3] + T.float32(1)
    for a, b, c, d in T.grid(1, 12, 7, 7):
        with T.block("S"):
            v0, v1, v2, v3 = T.axis.remap("SSSS", [a, b, c, d])
            S[v0, v1, v2, v3] = T_add[v0, v1, v2, v3]
'''


def test_reverse_inlining_a_slice_then_caching_the_write_stays_in_bounds():
    """The case of TVM's test_reverse_compute_inline_slicing_then_cachewrite."""
    mod = prog(SLICE)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("S"))
    sch.cache_write(sch.get_block("T_add"), 0, "global")
    assert "T.where(b < 12)" in sch.mod.script()
    assert_same_meaning(mod, sch.mod)


def test_a_consumer_reading_what_the_producer_never_computes_is_refused():
    """The case of TVM's test_reverse_compute_inline_error_producer_not_cover_consumer."""
    text = OVERCOMPUTED.replace("T.grid(15, 13)", "T.grid(15, 13)").replace(
        "(16, 16))\n    for i, j in T.grid(16, 16)", "(16, 16))\n    for i, j in T.grid(14, 16)")
    sch = Schedule(prog(text))
    with pytest.raises(ScheduleError, match="does not compute it"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_a_consumer_with_a_predicate_is_not_reverse_inlined():
    text = OVERCOMPUTED.replace("            C[vi, vj] = B[vi, vj] + 1.0",
                                "            T.where(i + j < 20)\n"
                                "            C[vi, vj] = B[vi, vj] + 1.0")
    sch = Schedule(prog(text))
    with pytest.raises(ScheduleError, match="predicate"):
        sch.reverse_compute_inline(sch.get_block("C"))


# ---------------------------------------------------------------------------- differential
READS = {  # how the consumer reads B (its own axes vi, vj), all within B's 8 x 8
    "same": "B[vi, vj]", "transposed": "B[vj, vi]", "shifted": "B[vi, vj + 1]",
    "twice": "B[vi, vj] * B[vi, vj]", "two places": "B[vi, vj] + B[vj, vi]",
    "row": "B[vi, 0]", "predicate": "B[vi, vj]",
}


def two_stage(read: str, c_rows: int, c_cols: int, p_rows: int, with_where: bool,
              reduction: bool) -> str:
    where = "            T.where(B[i, j] > 0.0)\n" if with_where else ""
    if reduction:
        consumer = f'''    for i, k in T.grid({c_rows}, {c_cols}):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi, 0] = 0.0
            C[vi, 0] = C[vi, 0] + {read.replace("vj", "vk")}
'''
    else:
        consumer = f'''    for i, j in T.grid({c_rows}, {c_cols}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
{where}            C[vi, vj] = {read} + 1.0
'''
    return f'''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid({p_rows}, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0 - 1.0
{consumer}'''


@given(read=st.sampled_from(sorted(READS)), c_rows=st.integers(1, 7), c_cols=st.integers(1, 7),
       extra_rows=st.integers(0, 1), with_where=st.booleans(), reduction=st.booleans(),
       split=st.sampled_from([None, 2, 3]), which=st.sampled_from(["compute", "reverse"]))
def test_inlining_random_two_stage_programs_keeps_their_meaning(read, c_rows, c_cols,
                                                                extra_rows, with_where,
                                                                reduction, split, which):
    # the consumer reads only what the producer computes (rows < p_rows, cols < 8)
    c_cols = min(c_cols, 7)
    p_rows = min(8, c_rows + extra_rows)
    if read == "transposed" or read == "two places":
        c_rows = c_cols = min(c_rows, c_cols, p_rows)
    mod = prog(two_stage(READS[read], c_rows, c_cols, p_rows,
                         with_where or read == "predicate", reduction))
    sch = Schedule(mod)
    if split:
        loop = sch.get_loops(sch.get_block("B"))[0]
        sch.split(loop, factors=[None, split])
    try:
        if which == "compute":
            sch.compute_inline(sch.get_block("B"))
        else:
            sch.reverse_compute_inline(sch.get_block("C"))
    except ScheduleError as e:
        assert str(e)
        return
    assert_same_meaning(mod, sch.mod)


TILED = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((CR, CC), "float32")):
    B = T.alloc_buffer((2, 2, 8, 8))
    for i0, j0, i1, j1 in T.grid(2, 2, 8, 8):
        with T.block("B"):
            vi, vj, vm, vn = T.axis.remap("SSSS", [i0, j0, i1, j1])
            B[vi, vj, vm, vn] = A[vi * 8 + vm, vj * 8 + vn] * 2.0
    for i, j in T.grid(CR, CC):
        with T.block("C"):
            ci, cj = T.axis.remap("SS", [i, j])
            C[ci, cj] = B[LOAD] + 1.0
'''


@pytest.mark.parametrize("rows,cols", [(16, 16), (15, 13), (9, 16)])
def test_reverse_inlining_a_consumer_reading_a_tiled_layout(rows, cols):
    """The case of TVM's test_reverse_compute_inline_overcomputed_producer_injective_load:
    the consumer reads its producer through a bijective affine map of its axes; the
    producer's instances beyond the consumer's domain are guarded away."""
    text = TILED.replace("CR", str(rows)).replace("CC", str(cols)).replace(
        "LOAD", "ci // 8, cj // 8, ci % 8, cj % 8")
    mod = prog(text)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert ("T.where" in sch.mod.script()) == ((rows, cols) != (16, 16))
    assert_same_meaning(mod, sch.mod)


@pytest.mark.parametrize("load", ["ci // 8, cj // 8, ci % 8, ci % 8",     # not one-to-one
                                  "ci // 8, cj // 8, ci % 4, cj % 8",     # skips elements
                                  "ci // 8, 0, ci % 8, cj % 8"])
def test_reverse_inlining_a_consumer_reading_through_a_map_that_is_not_one_to_one_is_refused(
        load):
    text = TILED.replace("CR", "16").replace("CC", "8").replace("LOAD", load)
    sch = Schedule(prog(text))
    with pytest.raises(ScheduleError, match="one-to-one|does not compute"):
        sch.reverse_compute_inline(sch.get_block("C"))


CHAIN = '''
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), D: T.Buffer((1, 4, 4, 8), "float32")):
    B = T.alloc_buffer((16, 8))
    C = T.alloc_buffer((4, 4, 8))
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k in T.grid(4, 4, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            C[vi, vj, vk] = B[vi * 4 + vj, vk] + 1.0
    for i, j, k, l in T.grid(1, 4, 4, 8):
        with T.block("D"):
            vi, vj, vk, vl = T.axis.remap("SSSS", [i, j, k, l])
            D[vi, vj, vk, vl] = C[vj, vk, vl] * 3.0
'''


@pytest.mark.parametrize("order", [("C", "D"), ("D", "C")])
def test_reverse_inlining_a_chain_of_layout_changes(order):
    """The case of TVM's test_reverse_compute_inline_affine_chain: after C is inlined, the
    producer stores C through a map of its axes; D (with a unit axis) inlines onto it."""
    mod = prog(CHAIN)
    sch = Schedule(mod)
    for name in order:
        sch.reverse_compute_inline(sch.get_block(name))
    assert [b.name_hint for b in sch.index().all_blocks()] == ["B"]
    assert_same_meaning(mod, sch.mod)


def test_inlining_into_a_consumer_reading_a_window_reads_the_window():
    """The case of TVM's test_compute_inline_multi_loads: the consumer reads B[vi, vj],
    B[vi, vj + 1], B[vi, vj + 2]; after inlining it reads A[vi, vj:vj + 3], not all of A."""
    mod = prog('''
@T.prim_func
def main(A: T.Buffer((8, 10), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 10))
    for i, j in T.grid(8, 10):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[vi, vj:vj + 3])
            C[vi, vj] = B[vi, vj] + B[vi, vj + 1] + B[vi, vj + 2]
''')
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("B"))
    assert "T.reads(A[vi, vj:vj + 3])" in sch.mod.script()
    assert_same_meaning(mod, sch.mod)
