"""engine.arith.substitute_const: what unrolling does per copy gives what simplifying the
substituted copy gives (or declines)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.arith.lower_simplify import lower_simplify
from engine.arith.substitute_const import substitute_const
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.functor import substitute
from engine.ir.structural import structural_equal

VARS = [E.Var(n, "int32") for n in ("i0", "i1", "j0", "k")]
X = VARS[0]


@st.composite
def linear_exprs(draw):
    """A sum of variables times constants plus a constant, in any order (then simplified
    to canonical form, as an unrolled loop's body is)."""
    e = E.const(draw(st.integers(-50, 50)), "int32")
    for _ in range(draw(st.integers(1, 5))):
        v = draw(st.sampled_from(VARS))
        c = draw(st.integers(-9, 9))
        t = v if c == 1 else E.Mul(v, E.const(c, "int32"))
        e = E.Add(e, t) if draw(st.booleans()) else E.Add(t, e)
    return lower_simplify(e)


@settings(max_examples=150, deadline=None)
@given(linear_exprs(), st.integers(-4, 20))
def test_folding_a_constant_into_a_linear_index_equals_simplifying_again(e, value):
    got = substitute_const(e, X, value)
    want = lower_simplify(substitute(e, {X: E.const(value, "int32")}))
    assert got is not None
    assert structural_equal(got, want), (str(e), str(got), str(want))


def test_a_subtree_without_the_variable_is_kept_as_is():
    from engine.ir.buffer import Buffer
    e = lower_simplify(VARS[1] * 4 + VARS[2])
    assert substitute_const(e, X, 3) is e
    store = S.BufferStore(Buffer("A", (64,), "float32"), E.FloatImm("float32", 0.0), (e,))
    assert substitute_const(store, X, 3) is store


def test_loads_stores_and_vectors_are_folded():
    from engine.ir.buffer import Buffer
    a = Buffer("A", (4096,), "float32")
    idx = lower_simplify(VARS[1] * 64 + X * 16 + VARS[2])
    vec = E.Ramp(idx, E.const(1, "int32"), 16)
    store = S.BufferStore(a, E.Add(E.BufferLoad(a, (vec,)), E.Broadcast(
        E.FloatImm("float32", 1.0), 16)), (vec,))
    got = substitute_const(store, X, 2)
    want = lower_simplify(substitute(store, {X: E.const(2, "int32")}))
    assert structural_equal(got, want), (str(got), str(want))
    assert "32" in str(got.indices[0])


@pytest.mark.parametrize("make", [
    lambda: E.FloorDiv(X + 3, E.const(4, "int32")),          # a division of the variable
    lambda: E.Select(E.LT(X, E.const(2, "int32")), X, VARS[1]),  # a condition
    lambda: E.Mul(X, VARS[1]),                                  # not linear
])
def test_the_variable_elsewhere_is_left_to_a_full_simplification(make):
    assert substitute_const(make(), X, 2) is None


@pytest.mark.parametrize("preset", ["matmul-best", "conv2d-best", "mm_relu-best"])
def test_unrolled_lowering_equals_substitute_then_simplify(preset, monkeypatch):
    """The whole lowering of the presets' unrolled micro-kernels (small sizes) is the
    same IR as with every copy substituted and simplified in full."""
    import engine.lower.legalize as lg
    from engine import presets
    from engine.lower import lower
    info = presets.info(preset)
    params = {"n": 64} if "n" in info.params else dict(info.params, size=14)
    sch = engine.Schedule(engine.workloads.get(info.workload, **params))
    info.trace(**params).apply_to_schedule(sch)
    (_, f), = list(sch.mod.functions)
    fast = lower(f)

    def full(loop, simplified=False):
        ext = E.as_const_int(loop.extent)
        copies = [substitute(loop.body, {loop.loop_var: lower_simplify(loop.min + i)})
                  for i in range(ext)]
        return lower_simplify(S.seq(*copies))
    monkeypatch.setattr(lg, "expand_unrolled", full)
    assert structural_equal(fast.body, lower(f).body)
