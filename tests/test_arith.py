"""engine.arith: canonical simplification, range-aware div/mod folding, bounds, affine."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.arith import Analyzer, affine_terms, bound_of, is_quasi_affine, relax, simplify
from engine.ir import expr as E

x, y, z = E.Var("x"), E.Var("y"), E.Var("z")


def text(e) -> str:
    return _fmt(e)


def _fmt(e) -> str:
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return str(e.value)
    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
           E.LT: "<", E.LE: "<=", E.And: "and"}
    if type(e) in ops:
        return f"({_fmt(e.a)} {ops[type(e)]} {_fmt(e.b)})"
    if isinstance(e, (E.Min, E.Max)):
        return f"{type(e).__name__.lower()}({_fmt(e.a)}, {_fmt(e.b)})"
    raise TypeError(type(e))


def evaluate(e, env):
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return e.value
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b,
            E.FloorDiv: lambda: a // b, E.FloorMod: lambda: a % b,
            E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
            E.LT: lambda: int(a < b), E.LE: lambda: int(a <= b)}[type(e)]()


def test_split_and_fuse_patterns_fold():
    rng = {y: (0, 3)}
    assert text(simplify((x * 4 + y) // 4, rng)) == "x"
    assert text(simplify((x * 4 + y) % 4, rng)) == "y"
    assert text(simplify((x * 4 + y) // 2, rng)) == "((x * 2) + (y // 2))"
    assert text(simplify(x * 4 + y - x * 4 + y * 2 + 3 - 1)) == "((y * 3) + 2)"
    assert text(simplify(x * 4 + y)) == "((x * 4) + y)"            # order kept, like TVM
    assert text(simplify(0 + x * 1 + 0)) == "x"
    assert text(simplify((x // 4) // 8)) == "(x // 32)"
    assert text(simplify((x % 16) % 4)) == "(x % 4)"
    assert text(simplify(E.binary(E.Min, x, x + 1))) == "x"
    assert text(simplify((x * 4 + y) < 16, {x: (0, 3), y: (0, 3)})) == "1"
    assert text(simplify((x * 4 + y) < 15, {x: (0, 3), y: (0, 3)})) == "(((x * 4) + y) < 15)"


def test_floor_division_identity_folds_a_fused_pair_of_split_loops():
    # j = j_0 * 3 + j_1 split, then fused: j_0 = f // 3, j_1 = f % 3 -> f (as TVM prints it)
    assert text(simplify(x // 3 * 3 + x % 3)) == "x"
    assert text(simplify((x // 3 * 3 + x % 3) * 2 + y)) == "((x * 2) + y)"
    assert text(simplify(x // 4 * 8 + x % 4 * 2 + 1)) == "((x * 2) + 1)"
    assert text(simplify(x // 4 * 3 + x % 4)) == "(((x // 4) * 3) + (x % 4))"  # not the pair
    assert bound_of(x // 3 * 3 + x % 3, {x: (0, 7)}) == (0, 7)


def test_a_split_then_fused_loop_with_a_tail_compiles_and_matches_numpy():
    # hypothesis found it: split(j, [None, 3]) on extent 8, then fuse(j_0, j_1): the guard
    # j_0_j_1_fused < 8 must bound the index (it did not while the index kept // and %)
    import numpy as np
    from engine import Schedule, build
    sch = Schedule(_add_mod())
    blk = sch.get_block("C")
    i, j = sch.get_loops(blk)
    sch.fuse(*sch.split(j, factors=[None, 3]))
    assert "T.where(j_0_j_1_fused < 8)" in sch.mod.script()
    a, b = np.random.rand(12, 8).astype("float32"), np.random.rand(12, 8).astype("float32")
    c = np.zeros((12, 8), "float32")
    build(sch.mod)["add"](a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def _add_mod():
    from engine import parse
    return parse('''
@T.prim_func
def add(A: T.Buffer((12, 8), "float32"), B: T.Buffer((12, 8), "float32"),
        C: T.Buffer((12, 8), "float32")):
    for i, j in T.grid(12, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]
''')


def test_bounds_and_relax():
    assert bound_of(x * 4 + y, {x: (0, 31), y: (0, 3)}) == (0, 127)
    assert bound_of(x - y, {x: (0, 3), y: (0, 3)}) == (-3, 3)
    assert bound_of(x // 4, {x: (0, 127)}) == (0, 31)
    assert bound_of(x % 8, {x: (0, 127)}) == (0, 7)
    assert bound_of(x % 8, {x: (16, 19)}) == (0, 3)
    assert bound_of(x * y, {x: (-2, 3), y: (1, 4)}) == (-8, 12)
    assert bound_of(x + z, {x: (0, 3)}) == (None, None)
    lo, hi = relax(x * 4 + y, {y: (0, 3)})
    assert (text(lo), text(hi)) == ("(x * 4)", "((x * 4) + 3)")
    lo, hi = relax((x * 4 + y) // 2, {y: (0, 3)})
    assert (text(lo), text(hi)) == ("(x * 2)", "((x * 2) + 1)")
    assert relax(x * y, {y: (0, 3)}) is None


def test_affine_detection():
    assert affine_terms(x * 4 + y * 2 - 3) == ({x: 4, y: 2}, -3)
    assert affine_terms(x * y) is None
    assert affine_terms(x // 4) is None
    assert is_quasi_affine(x // 4 + y % 8)
    assert not is_quasi_affine(x * y)
    assert not is_quasi_affine(x // y)


def _exprs():
    leaves = st.sampled_from([x, y, z]) | st.integers(-6, 9).map(lambda v: E.const(v))

    def extend(children):
        pos = st.integers(1, 8).map(lambda v: E.const(v))
        return (st.tuples(children, children).map(lambda t: t[0] + t[1]) |
                st.tuples(children, children).map(lambda t: t[0] - t[1]) |
                st.tuples(children, st.integers(-3, 5)).map(lambda t: t[0] * t[1]) |
                st.tuples(children, pos).map(lambda t: E.FloorDiv(t[0], t[1])) |
                st.tuples(children, pos).map(lambda t: E.FloorMod(t[0], t[1])) |
                st.tuples(children, children).map(lambda t: E.binary(E.Min, t[0], t[1])) |
                st.tuples(children, children).map(lambda t: E.binary(E.Max, t[0], t[1])))
    ints = st.recursive(leaves, extend, max_leaves=8)
    return ints | st.tuples(ints, ints).map(lambda t: E.binary(E.LT, t[0], t[1]))


@given(e=_exprs(), lo=st.tuples(st.integers(-5, 5), st.integers(-5, 5), st.integers(-5, 5)),
       width=st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)),
       pick=st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100)))
def test_simplify_preserves_value_and_bounds_are_sound(e, lo, width, pick):
    ranges = {v: (a, a + w) for v, a, w in zip((x, y, z), lo, width)}
    env = {v: a + (p % (w + 1)) for v, a, w, p in zip((x, y, z), lo, width, pick)}
    s = simplify(e, ranges)
    assert evaluate(s, env) == evaluate(e, env)
    if e.dtype == "int32":
        blo, bhi = Analyzer(ranges).bound(e)
        val = evaluate(e, env)
        assert blo is None or blo <= val
        assert bhi is None or val <= bhi
        r = relax(e, {y: ranges[y]}, {x: ranges[x], z: ranges[z]})
        if r is not None:
            env_lo = dict(env)
            assert evaluate(r[0], env_lo) <= val <= evaluate(r[1], env_lo)
