"""compute_inline and reverse_compute_inline keep the program's meaning, or refuse.

The cases TVM's own tests define (named in each docstring; the programs here are written
for this engine) where the engine produced a wrong program: a consumer whose T.where reads
the inlined buffer (the predicate kept reading a buffer that no longer existed), and a
consumer that reads less than its producer computes (the guard was dropped: the last row
was written out of bounds). Then a differential property test: random two-stage programs,
each primitive tried; accepted means the interpreter and the compiled code agree with the
interpreter on the original program. Then reverse_compute_inline's newer cases: axes
rebuilt through a map written as TVM writes them (and that inverse checked on random
maps), a copy of a reduction's result taken into the reduction, and the refusals of a
store that would move past an access of the same data (each a wrong result before).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import engine
from engine.schedule import Schedule, ScheduleError
from semantics import assert_computes_exactly, assert_refused, assert_same_meaning


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


# ---------------------------------------------------------------------------- TVM's form
def test_reverse_inlining_through_a_fused_read_writes_the_fused_index_as_tvm():
    """A consumer reading B[f // 12, f % 12] of its fused axes f: the store's indices are
    the fused producer index cut again, as TVM's inverse writes them (not simplified), the
    T.writes line the same; the program parses back equal and computes the same."""
    from engine.ir import structural_equal
    mod = prog('''
@T.prim_func
def main(A: T.Buffer((4, 12), "float32"), C: T.Buffer((2, 4, 6), "float32")):
    B = T.alloc_buffer((4, 12))
    for i, j in T.grid(4, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k in T.grid(2, 4, 6):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            C[vi, vj, vk] = B[(vi * 24 + vj * 6 + vk) // 12, (vi * 24 + vj * 6 + vk) % 12]
''')
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    text = sch.mod.script()
    idx = "(vj + vi * 12) // 24, (vj + vi * 12) // 6 % 4, (vj + vi * 12) % 6"
    assert f"T.writes(C[{idx}])" in text and f"C[{idx}] = A[vi, vj]" in text, text
    assert structural_equal(engine.parse(text), sch.mod)
    assert_computes_exactly(mod, sch.mod, "main")


def test_reverse_inlining_a_tiled_read_writes_each_axis_as_tvm():
    """Each consumer axis rebuilt from its digits, the lower digit first (TVM's
    ``vm + vi * 8``); the guard of the padded axes stays simplified."""
    text = TILED.replace("CR", "15").replace("CC", "16").replace(
        "LOAD", "ci // 8, cj // 8, ci % 8, cj % 8")
    mod = prog(text)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    out = sch.mod.script()
    assert "C[vm + vi * 8, vn + vj * 8] = A[vi * 8 + vm, vj * 8 + vn]" in out, out
    assert "T.where(i0 * 8 + i1 < 15)" in out, out
    assert_computes_exactly(mod, sch.mod, "main")


def _value(e, env: dict) -> int:
    from engine.arith import simplify
    from engine.ir import expr as E
    from engine.ir.functor import substitute
    got = simplify(substitute(e, {v: E.const(x, v.dtype) for v, x in env.items()}))
    assert isinstance(got, E.IntImm), got
    return got.value


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_tvm_shaped_inverse_undoes_random_one_to_one_reads(data):
    """The inverse written as TVM writes it (inline_inverse.tvm_inverse) is the inverse:
    random maps of 2-3 axes — each axis either cut into digits spread over the buffer's
    dimensions, or all of them fused and the fused number cut into the buffer's
    dimensions — every element of the buffer taken back to the axes that read it."""
    import itertools
    import math

    from engine.ir import expr as E
    from engine.schedule.primitives.inline_inverse import tvm_inverse
    exts = data.draw(st.lists(st.sampled_from([2, 3, 4, 6]), min_size=2, max_size=3))
    axes = [E.Var(f"u{k}", "int32") for k in range(len(exts))]
    if data.draw(st.booleans()):        # fused, in a random order, cut into dimensions
        order = data.draw(st.permutations(range(len(axes))))
        fused, scale = None, 1
        for k in reversed(order):
            term = axes[k] if scale == 1 else axes[k] * E.const(scale, "int32")
            fused = term if fused is None else term + fused
            scale *= exts[k]
        total = scale
        dims, rest = [], total
        while rest > 1:
            d = data.draw(st.sampled_from([c for c in range(2, rest + 1) if rest % c == 0]))
            dims.append(d)
            rest //= d
        indices, below = [], total
        for d in dims:
            below //= d
            e = fused if below == 1 else E.FloorDiv(fused, E.const(below, "int32"))
            indices.append(e if below * d == total else E.FloorMod(e, E.const(d, "int32")))
    else:                               # every axis cut into two digits (or kept)
        pieces = []
        for a, n in zip(axes, exts):
            low = data.draw(st.sampled_from([c for c in range(1, n + 1) if n % c == 0]))
            if low in (1, n):
                pieces.append((a, n))
            else:
                pieces += [(E.FloorDiv(a, E.const(low, "int32")), n // low),
                           (E.FloorMod(a, E.const(low, "int32")), low)]
        pieces = data.draw(st.permutations(pieces))
        indices, dims = [p for p, _ in pieces], [n for _, n in pieces]
    outs = [E.Var(f"o{k}", "int32") for k in range(len(indices))]
    inv = tvm_inverse(axes, exts, indices, outs)
    assert inv is not None and set(inv) == set(axes)
    assert math.prod(dims) == math.prod(exts)
    for point in itertools.product(*(range(d) for d in dims)):
        env = dict(zip(outs, point))
        at = {a: _value(inv[a], env) for a in axes}
        assert all(0 <= at[a] < n for a, n in zip(axes, exts))
        assert tuple(_value(i, at) for i in indices) == point


# ---------------------------------------------------------------------------- reductions
MATMUL_COPY = '''
@T.prim_func
def main(A: T.Buffer((6, 5), "float32"), W: T.Buffer((5, 4), "float32"),
         C: T.Buffer((CR, CC), "float32")):
    B = T.alloc_buffer((6, 4))
    for i, j, k in T.grid(6, 4, 5):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                B[vi, vj] = T.float32(0)
            B[vi, vj] = B[vi, vj] + A[vi, vk] * W[vk, vj]
    for i, j in T.grid(CI, CJ):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[STORE] = VALUE
'''


def _matmul_copy(store="vi, vj", value="B[vi, vj]", c="6, 4", loops="6, 4"):
    cr, cc = c.split(", ")
    ci, cj = loops.split(", ")
    return prog(MATMUL_COPY.replace("CR", cr).replace("CC", cc).replace("CI", ci)
                .replace("CJ", cj).replace("STORE", store).replace("VALUE", value))


@pytest.mark.parametrize("store,c,loops,reorder", [
    ("vi, vj", "6, 4", "6, 4", False),
    ("vj, vi", "4, 6", "6, 4", False),        # transposed
    ("vi, vj", "5, 3", "5, 3", False),        # a part of the result: guarded
    ("vj, vi", "3, 5", "5, 3", True),         # the reduction loop outermost
])
def test_a_copy_of_a_reduction_is_reverse_inlined_into_it(store, c, loops, reorder):
    """TVM's test_inline_with_reduction, and more: a block copying a reduction's result
    (unchanged, any one-to-one placement) becomes the reduction's output: its init and
    every step store the output element. The same results, interpreted and compiled,
    whatever the loop order."""
    mod = _matmul_copy(store=store, c=c, loops=loops)
    sch = Schedule(mod)
    if reorder:
        i, j, k = sch.get_loops(sch.get_block("B"))
        sch.reorder(k, i, j)
    sch.reverse_compute_inline(sch.get_block("C"))
    text = sch.mod.script()
    out = "C[vi, vj]" if store == "vi, vj" else "C[vj, vi]"
    assert f"with T.init():\n                    {out} = T.float32(0)" in text, text
    assert f"{out} = {out} + A[vi, vk] * W[vk, vj]" in text, text
    assert [b.name_hint for b in sch.index().all_blocks()] == ["B"]
    assert_computes_exactly(mod, sch.mod, "main")


def test_a_reduction_with_an_init_and_no_reduction_axis_takes_in_its_copy():
    """TVM's case exactly: the producer has an init but only spatial axes (each instance
    initialises, then adds once), and a unit dimension indexed by a constant."""
    mod = prog('''
@T.prim_func
def main(S: T.Buffer((T.int64(3), T.int64(1)), "float32"),
         R: T.Buffer((T.int64(3), T.int64(1), T.int64(4)), "float32"),
         C: T.Buffer((T.int64(1), T.int64(3), T.int64(4)), "float32")):
    B = T.alloc_buffer((T.int64(3), T.int64(1), T.int64(4)))
    for a0, a1 in T.grid(T.int64(3), T.int64(4)):
        with T.block("bmm"):
            v0, v1 = T.axis.remap("SS", [a0, a1])
            T.reads(S[v0, T.int64(0)], R[v0, T.int64(0), v1])
            T.writes(B[v0, T.int64(0), v1])
            with T.init():
                B[v0, T.int64(0), v1] = T.float32(0)
            B[v0, T.int64(0), v1] = B[v0, T.int64(0), v1] + S[v0, T.int64(0)] * R[v0, T.int64(0), v1]
    for a0, a1 in T.grid(T.int64(3), T.int64(4)):
        with T.block("t"):
            v0, v1 = T.axis.remap("SS", [a0, a1])
            C[T.int64(0), v0, v1] = B[v0, T.int64(0), v1]
''')
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("t"))
    text = sch.mod.script()
    assert "T.writes(C[T.int64(0), v0, v1])" in text, text
    assert_computes_exactly(mod, sch.mod, "main")


@pytest.mark.parametrize("value,needle", [
    ("B[vi, vj] + T.float32(1)", "only a block copying B unchanged"),
    ("B[vi, vj] * B[vi, vj]", "only a block copying B unchanged"),
])
def test_a_block_computing_on_a_reduction_result_is_not_reverse_inlined(value, needle):
    """Put into the reduction, the block would be applied to the init and to every
    partial sum (TVM does so; its result then differs)."""
    sch = Schedule(_matmul_copy(value=value))
    assert_refused(sch, lambda: sch.reverse_compute_inline(sch.get_block("C")),
                   "producer B is a reduction block", needle)


def test_a_copy_of_a_reduction_without_an_init_is_not_reverse_inlined():
    """Without an init the reduction adds onto B's contents, which C's are not."""
    text = MATMUL_COPY.replace("            with T.init():\n"
                               "                B[vi, vj] = T.float32(0)\n", "")
    sch = Schedule(prog(text.replace("CR", "6").replace("CC", "4").replace("CI", "6")
                        .replace("CJ", "4").replace("STORE", "vi, vj")
                        .replace("VALUE", "B[vi, vj]")))
    assert_refused(sch, lambda: sch.reverse_compute_inline(sch.get_block("C")),
                   "must initialise B with one store")


# ---------------------------------------------------------------------------- moved stores
HAZARD = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32"),
         C: T.Buffer((8,), "float32"), E: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = PRODUCED
MIDDLE    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = CONSUMED
LAST'''


def _hazard(produced="A[vi] * T.float32(2)", consumed="B[vi] + T.float32(1)", middle="",
            last=""):
    block = '''    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            {}
'''
    return prog(HAZARD.replace("PRODUCED", produced).replace("CONSUMED", consumed)
                .replace("MIDDLE", block.format(middle) if middle else "")
                .replace("LAST", block.format(last) if last else ""))


@pytest.mark.parametrize("kw,needle", [
    ({"produced": "C[(vi + 7) % 8] * T.float32(2)"}, "producer B reads C"),
    ({"middle": "E[vi] = C[vi] + T.float32(1)"}, "block X runs between producer B and "
                                                  "block C and accesses C"),
    ({"middle": "C[vi] = T.float32(5)"}, "accesses C"),
    ({"consumed": "B[vi] + D[vi]", "middle": "D[vi] = A[vi] + T.float32(1)"},
     "writes D, which block C reads"),
    ({"consumed": "B[vi] + C[(vi + 1) % 8]"}, "reads C elsewhere than the element"),
])
def test_reverse_inlining_that_would_reorder_accesses_is_refused(kw, needle):
    """The store moves to where the producer runs: refused when the producer reads the
    output, a block in between reads or writes it or writes what the block reads, or the
    block reads other elements of its output (each one a wrong result if accepted)."""
    sch = Schedule(_hazard(**kw))
    assert_refused(sch, lambda: sch.reverse_compute_inline(sch.get_block("C")), needle)


@pytest.mark.parametrize("kw", [
    {"consumed": "B[vi] + C[vi]"},                                   # its own element
    {"consumed": "B[vi] + D[vi]", "middle": "E[vi] = D[vi] + A[vi]"},  # reads only
    {"consumed": "B[vi] + D[vi]", "last": "D[vi] = C[vi] + T.float32(1)"},  # after
])
def test_reverse_inlining_past_harmless_blocks_keeps_the_meaning(kw):
    mod = _hazard(**kw)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_computes_exactly(mod, sch.mod, "main")


INPUT_OVERWRITTEN = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
         D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            MIDDLE
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            CONSUMER
'''


@pytest.mark.parametrize("middle,consumer,needle", [
    ("A[vi] = T.float32(3)", "C[vi] = B[vi] + A[vi]",
     "block X runs between it and its consumers and writes A"),
    ("D[vi] = A[vi]", "A[vi] = B[(vi + 1) % 8] + T.float32(1)",
     "block C reads its result and writes A"),
])
def test_inlining_a_block_whose_input_is_overwritten_before_its_use_is_refused(
        middle, consumer, needle):
    """compute_inline moves the block's reads of A to where its consumers run: refused
    when A is written in between (each was a wrong result)."""
    sch = Schedule(prog(INPUT_OVERWRITTEN.replace("MIDDLE", middle)
                        .replace("CONSUMER", consumer)))
    assert_refused(sch, lambda: sch.compute_inline(sch.get_block("B")), needle)


def test_inlining_past_a_block_that_only_reads_the_input_keeps_the_meaning():
    mod = prog(INPUT_OVERWRITTEN.replace("MIDDLE", "D[vi] = A[vi] + T.float32(1)")
               .replace("CONSUMER", "C[vi] = B[vi] + A[vi]"))
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("B"))
    assert_computes_exactly(mod, sch.mod, "main")


OPAQUE = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
         D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)
    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(D[vi])
            T.evaluate(B.access_ptr("r", extent=8))
            D[vi] = A[vi]
'''


@pytest.mark.parametrize("how", ["compute", "reverse"])
def test_a_buffer_whose_address_is_taken_is_not_inlined_away(how):
    """Block X takes B's address (an opaque read it does not declare): B cannot disappear."""
    sch = Schedule(prog(OPAQUE))
    if how == "compute":
        act = lambda: sch.compute_inline(sch.get_block("B"))   # noqa: E731
    else:
        act = lambda: sch.reverse_compute_inline(sch.get_block("C"))   # noqa: E731
    assert_refused(sch, act, "block X accesses B opaquely")
