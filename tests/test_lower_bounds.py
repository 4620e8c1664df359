"""The bounds proof: a program whose accesses may leave their buffers is refused at build
time with a sentence naming the access; guarded accesses and every legal program build."""
from __future__ import annotations

import html as htmllib
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import engine
from engine.interpreter import OutOfBoundsError, interpret
from engine.lower import BuildError
from engine.runtime import check_correctness
from engine.script import parse

from inline_service import make_test_app, settled

REFUSAL = re.compile(r"may (read|write) (past the end|before the start) of \w+ \(")

ISSUE_PROGRAM = '''@T.prim_func
def oob(A: T.Buffer((72,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "oob", "tir.noalias": True})
    for i in range(72):
        with T.block("B"):
            vi = T.axis.spatial(72, i)
            B[vi] = A[vi] * T.float32(2)
'''

NEGATIVE = '''@T.prim_func
def before(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "before", "tir.noalias": True})
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi - 3] = A[vi]
'''

GUARDED = '''@T.prim_func
def guarded(A: T.Buffer((72,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "guarded", "tir.noalias": True})
    for i in range(72):
        with T.block("B"):
            vi = T.axis.spatial(72, i)
            if vi < 8:
                B[vi] = A[vi] * T.float32(2)
'''

GATHER = '''@T.prim_func
def gather(I: T.Buffer((4,), "int32"), A: T.Buffer((8,), "float32"),
           B: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "gather", "tir.noalias": True})
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[I[vi]]
'''


def _refusal(text: str) -> str:
    with pytest.raises(BuildError) as info:
        engine.build(parse(text))
    return str(info.value)


def test_the_issue_program_is_refused_with_the_access_named():
    msg = _refusal(ISSUE_PROGRAM)
    assert "B[i] may write past the end of B (i reaches 71, B has 8 elements)" in msg


def test_a_write_before_the_start_is_refused():
    msg = _refusal(NEGATIVE)
    assert "B[i - 3] may write before the start of B (i - 3 reaches -3" in msg


def test_a_program_claiming_to_be_lowered_is_proven_too():
    """``T.func_attr({"lowered": True})`` in a pasted program skips lowering, not the proof."""
    text = '''@T.prim_func
def f(A: T.Buffer((72,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "f", "lowered": True})
    for i in range(72):
        B[i] = A[i]
'''
    assert "B[i] may write past the end of B (i reaches 71, B has 8 elements)" in _refusal(text)


def test_an_index_read_from_a_buffer_is_refused_unless_bounded():
    msg = _refusal(GATHER)
    assert "A[I[i]] may read past the end of A" in msg
    assert "is read from I and nothing bounds it" in msg
    clamped = GATHER.replace("A[I[vi]]", "A[T.max(T.min(I[vi], 7), 0)]")
    engine.build(parse(clamped))


def test_a_guarded_access_in_a_longer_loop_builds_and_is_correct():
    mod = parse(GUARDED)
    rep = check_correctness(mod)            # the interpreter is the reference
    assert rep.ok, rep.message
    a = np.arange(72, dtype="float32")
    b = np.zeros(8, dtype="float32")
    engine.build(mod)["guarded"](a, b)
    np.testing.assert_array_equal(b, a[:8] * 2)


def test_the_correctness_check_never_says_matches_for_an_out_of_bounds_program():
    rep = check_correctness(parse(ISSUE_PROGRAM))
    assert not rep.ok and "may write past the end of B" in rep.message


def test_a_padded_split_keeps_building():
    """An imperfect split guarded by T.where, vectorized: the guard proves the tail."""
    text = ISSUE_PROGRAM.replace("(72,)", "(70,)").replace("(8,)", "(70,)") \
        .replace("range(72)", "range(70)").replace("spatial(72", "spatial(70")
    sch = engine.Schedule(parse(text))
    i, = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, factors=[None, 16])
    sch.vectorize(inner)
    rep = check_correctness(sch.mod)
    assert rep.ok, rep.message


def test_nested_imperfect_splits_are_proven_by_their_guards_together():
    """hypothesis found it: i (12) split [6, 2], i_0 split [3, 2], then both halves split
    again imperfectly; each split adds a guard, and only both guards together bound
    i_0_0_0 * 8 + i_0_0_1 * 4 + i_0_1_0 * 6 + i_0_1_1 * 2 + i_1 by 11."""
    text = GUARDED_ADD
    sch = engine.Schedule(parse(text))
    loops = lambda: sch.get_loops(sch.get_block("C"))  # noqa: E731
    sch.split(loops()[0], factors=[None, 2])
    sch.split(loops()[0], factors=[None, 2])
    sch.split(loops()[1], factors=[None, 3])
    sch.split(loops()[0], factors=[None, 2])
    assert sch.mod.script().count(" < ") == 2        # two guards, one per imperfect split
    rep = check_correctness(sch.mod)
    assert rep.ok, rep.message
    a, b = np.random.rand(12, 8).astype("float32"), np.random.rand(12, 8).astype("float32")
    c = np.zeros((12, 8), "float32")
    engine.build(sch.mod)["add"](a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


GUARDED_ADD = """
@T.prim_func
def add(A: T.Buffer((12, 8), "float32"), B: T.Buffer((12, 8), "float32"),
        C: T.Buffer((12, 8), "float32")):
    for i, j in T.grid(12, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]
"""


# ------------------------------------------------------------------ random programs
def _program(n, m, a_size, b_size, store, load, guard) -> str:
    (s_i, s_j, s_c), (l_i, l_j, l_c) = store, load
    body = f"B[i * {s_i} + j * {s_j} + {s_c}] = A[i * {l_i} + j * {l_j} + {l_c}] + T.float32(1)"
    if guard is not None:
        g_i, g_j, g_c = guard
        body = f"if i * {g_i} + j * {g_j} < {g_c}:\n                {body}"
    return f'''@T.prim_func
def rnd(A: T.Buffer(({a_size},), "float32"), B: T.Buffer(({b_size},), "float32")):
    T.func_attr({{"global_symbol": "rnd", "tir.noalias": True}})
    for i in range({n}):
        for j in range({m}):
            {body}
'''


coef = st.integers(-3, 3)
affine = st.tuples(coef, coef, st.integers(-4, 12))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 4), a_size=st.integers(1, 16),
       b_size=st.integers(1, 16), store=affine, load=affine,
       guard=st.none() | st.tuples(coef, coef, st.integers(-2, 16)))
def test_random_affine_programs_build_only_when_in_bounds(n, m, a_size, b_size, store, load,
                                                          guard):
    """Built programs match the interpreter (which checks every access); refused ones are
    refused with the sentence; an unguarded program the interpreter runs always builds
    (over a box, the interval of an affine index is exact)."""
    text = _program(n, m, a_size, b_size, store, load, guard)
    mod = parse(text)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_size).astype("float32")
    b = rng.standard_normal(b_size).astype("float32")
    try:
        want_b = b.copy()
        interpret(mod, "rnd", a.copy(), want_b)
        in_bounds = True
    except OutOfBoundsError:
        in_bounds = False
    try:
        rt = engine.build(mod)
    except BuildError as e:
        assert REFUSAL.search(str(e)), str(e)
        assert in_bounds is False or guard is not None, (text, str(e))
        return
    assert in_bounds, f"built a program that leaves its buffers:\n{text}"
    got_b = b.copy()
    rt["rnd"](a.copy(), got_b)
    np.testing.assert_array_equal(got_b, want_b)


# ------------------------------------------------------------------ the app
def test_the_custom_program_page_shows_the_refusal_not_a_match():
    app = make_test_app()
    client = app.test_client()
    r = client.post("/explore/custom", data={"program": ISSUE_PROGRAM})
    assert r.status_code == 303
    url = r.headers["Location"].replace("/explore/custom?", "/explore/custom/measure?")
    page = htmllib.unescape(settled(client, url).get_data(as_text=True))
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "B[i] may write past the end of B (i reaches 71, B has 8 elements)" in text
    assert "matches numpy" not in text


PADDED_ROWS = '''@T.prim_func
def padded(A: T.Buffer((14,), "int32"), B: T.Buffer((4, 4), "int32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(vi == 3 and 2 <= vj, -1, A[vi * 4 + vj])
'''


def test_the_false_branch_of_a_conjunction_is_proven_case_by_case():
    """``not (i == 3 and 2 <= j)``: either i <= 2 (then i * 4 + j <= 11) or j <= 1 (then
    i * 4 + j <= 13) — each case in bounds, so the read of A[i * 4 + j] is."""
    mod = parse(PADDED_ROWS)
    a = np.arange(1, 15, dtype="int32")
    b = np.zeros((4, 4), "int32")
    engine.build(mod)["padded"](a, b)
    np.testing.assert_array_equal(b, np.concatenate([a, [-1, -1]]).reshape(4, 4))
    # one case short: j <= 2 leaves A[14] in reach, refused
    assert "may read past the end of A" in _refusal(PADDED_ROWS.replace("2 <= vj", "3 <= vj"))
    # an or-guard with one unsafe side is refused too
    assert "may read past the end of A" in _refusal(PADDED_ROWS.replace(
        "vi == 3 and 2 <= vj, -1,", "not (vi < 3 or vj < 3), -1,"))


FUSED_SIZES = '''@T.prim_func
def fused(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (3, n), "int32")
    B = T.match_buffer(b, (n * 3,), "int32")
    for i, j in T.grid(3, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi * n + vj] = A[vi, vj]
'''


def test_a_loop_variable_times_a_size_is_bounded_by_its_last_value():
    """``i * n + j`` over i < 3, j < n is below ``n * 3``: ``i * n`` is at most ``2 * n``."""
    mod = parse(FUSED_SIZES)
    a = np.arange(12, dtype="int32").reshape(3, 4)
    b = np.zeros(12, "int32")
    engine.build(mod)["fused"](a, b)
    np.testing.assert_array_equal(b, a.ravel())
    assert "may write past the end of B" in _refusal(FUSED_SIZES.replace("B[vi * n + vj]",
                                                                         "B[vi * n + vj + n]"))
    # a constant axis of a symbolic-shaped buffer read past its end is named with the shape
    assert "A has 3 elements along axis 0 of its shape (3, n)" in _refusal(
        FUSED_SIZES.replace("T.grid(3, n)", "T.grid(4, n)"))


FUSED_READ = '''@T.prim_func
def unfuse(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (3, n), "int32")
    B = T.match_buffer(b, (n * 3,), "int32")
    for f in range(n * 3):
        with T.block("B"):
            vf = T.axis.spatial(n * 3, f)
            B[vf] = A[vf // n, vf % n]
'''


def test_a_fused_index_divided_by_a_size_is_bounded_along_a_constant_axis():
    """``f // n`` for ``f < n * 3`` is at most 2: A's constant axis of 3 holds it."""
    mod = parse(FUSED_READ)
    a = np.arange(15, dtype="int32").reshape(3, 5)
    b = np.zeros(15, "int32")
    engine.build(mod)["unfuse"](a, b)
    np.testing.assert_array_equal(b, a.ravel())
    assert "may read past the end of A" in _refusal(FUSED_READ.replace("range(n * 3)",
                                                                       "range(n * 3 + 1)"))
