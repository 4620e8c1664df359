"""Vector indices ``Ramp // c`` and ``Ramp % c`` (engine/arith/vector_index.py).

A layout ``(j // c, k, j % c)`` on a buffer written by a vectorized loop must lower to one
contiguous vector store when the lanes provably stay between two multiples of ``c``, and
must be left alone (and stay correct) when they do not.
"""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import engine
from engine.arith.lower_simplify import lower_simplify
from engine.arith.vector_index import lanes_in_one_block, modular_set
from engine.ir import Buffer, BufferStore, For, ForKind, collect
from engine.ir import expr as E
from engine.ir.dtype import lanes_of
from engine.lower import lower
from engine.runtime import check_correctness

I32 = "int32"

TRANSFORMS = [
    "lambda k, j: (j // C, k, j % C)",    # the layout of the task's example
    "lambda k, j: (k, j // C, j % C)",
    "lambda k, j: (j % C, k, j // C)",    # the quotient innermost: never contiguous
    "lambda k, j: (j // C, j % C, k)",    # stride k: a strided ramp, not contiguous
]


# ------------------------------------------------------------------------ helpers
def _schedule(m, n, k, c, f, transform=TRANSFORMS[0], consumer=False):
    """matmul with B cached in layout ``transform``; the copy's j loop split by ``f`` and
    vectorized (and the consumer's j loop too when ``consumer``). A layout that pads (``c``
    not dividing ``n``) is taken with ``assume_injective_transform``: its padding, which
    the matmul never reads, stays unfilled, and the copy keeps its loops over B (with a
    pad_value, TVM's rule rewrites the copy to run over the padded layout instead)."""
    sch = engine.Schedule(engine.workloads.get("matmul", m=m, n=n, k=k))
    b = sch.get_block("C", func_name="matmul")
    p = sch.cache_read(b, 1, "global")
    sch.transform_layout(p, ("write", 0), transform.replace("C", str(c)),
                         assume_injective_transform=True)
    _k, j = sch.get_loops(p)
    _j0, j1 = sch.split(j, factors=[None, f])
    sch.vectorize(j1)
    if consumer:
        _i, j, kr = sch.get_loops(b)
        _j0, j1 = sch.split(j, factors=[None, f])
        sch.reorder(kr, j1)
        sch.vectorize(j1)
    return sch


def _vector_divmods(func):
    return [x for x in collect(func.body, (E.FloorDiv, E.FloorMod)) if lanes_of(x.dtype) > 1]


def _accesses(func, name):
    """Indices of every store to and load from the buffer called ``name``."""
    out = [s.indices[0] for s in collect(func.body, BufferStore) if s.buffer.name == name]
    out += [ld.indices[0] for ld in collect(func.body, E.BufferLoad) if ld.buffer.name == name]
    return out


def _run_exact(sch, m, n, k, seed=0):
    """Compile, run on integer-valued float32 data (sums are exact) and compare with A @ B."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (m, k)).astype("float32")
    b = rng.integers(-4, 5, (k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    engine.build(sch.mod)["matmul"](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def _eval(e, env):
    """Evaluate an integer expression: an int, or a list of ints for a vector."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Ramp):
        b, s = _eval(e.base, env), _eval(e.stride, env)
        return [b + i * s for i in range(e.lanes)]
    if isinstance(e, E.Broadcast):
        return [_eval(e.value, env)] * e.lanes
    ops = {E.Add: lambda x, y: x + y, E.Sub: lambda x, y: x - y, E.Mul: lambda x, y: x * y,
           E.FloorDiv: lambda x, y: x // y, E.FloorMod: lambda x, y: x % y,
           E.Min: min, E.Max: max}
    fn = ops[type(e)]
    a, b = _eval(e.a, env), _eval(e.b, env)
    if isinstance(a, list) or isinstance(b, list):
        n = len(a) if isinstance(a, list) else len(b)
        a = a if isinstance(a, list) else [a] * n
        b = b if isinstance(b, list) else [b] * n
        return [fn(x, y) for x, y in zip(a, b)]
    return fn(a, b)


def _ramp(base, lanes, stride=1):
    return E.Ramp(base, E.IntImm(I32, stride), lanes)


def _div(ramp, c):
    return E.FloorDiv(ramp, E.Broadcast(E.IntImm(I32, c), ramp.lanes))


def _mod(ramp, c):
    return E.FloorMod(ramp, E.Broadcast(E.IntImm(I32, c), ramp.lanes))


# ------------------------------------------------------------------- the task's example
def test_example_lowers_to_one_contiguous_vector_store():
    n = 256
    sch = _schedule(n, n, n, 64, 16)
    f = lower(sch.mod["matmul"])
    assert not _vector_divmods(f)
    (idx,) = [s.indices[0] for s in collect(f.body, BufferStore) if s.buffer.name == "B_global"]
    assert isinstance(idx, E.Ramp) and E.as_const_int(idx.stride) == 1 and idx.lanes == 16
    assert lanes_of(idx.base.dtype) == 1
    rt = engine.build(sch.mod)
    assert "store <16 x float>" in rt.get_source("ll")
    _run_exact(sch, n, n, n)
    rng = np.random.default_rng(1)
    args = [rng.random((n, n), dtype="float32") for _ in range(2)] + [np.zeros((n, n), "float32")]
    assert check_correctness(sch.mod, "matmul", reference_fn=lambda a, b: a @ b, args=args)


def test_consumer_loads_become_contiguous_with_a_non_power_of_two_block():
    # 8 lanes starting at a multiple of 8 never cross a multiple of 24
    sch = _schedule(4, 48, 8, 24, 8, consumer=True)
    f = lower(sch.mod["matmul"])
    assert not _vector_divmods(f)
    idxs = _accesses(f, "B_global")
    assert len(idxs) == 2 and all(isinstance(i, E.Ramp) and E.as_const_int(i.stride) == 1
                                  for i in idxs)
    _run_exact(sch, 4, 48, 8)


# ------------------------------------------------------------------ must not rewrite
@pytest.mark.parametrize("n,c,f", [(48, 24, 16), (40, 12, 8), (40, 10, 4), (30, 6, 4)])
def test_ramps_crossing_a_multiple_of_c_are_left_alone(n, c, f):
    # e.g. 16 lanes from 16 cover 16..31, across 24: one quotient per lane is needed
    sch = _schedule(3, n, 5, c, f, consumer=True)
    f_low = lower(sch.mod["matmul"])
    assert _vector_divmods(f_low)
    _run_exact(sch, 3, n, 5)


def test_unaligned_and_unknown_bases_are_left_alone():
    x, y = E.Var("x"), E.Var("y")
    for e in [_div(_ramp(x * 16 + 9, 8), 16),     # 9..16 crosses 16
              _mod(_ramp(x * 16 + 9, 8), 16),
              _div(_ramp(x, 4), 8),               # x unknown
              _div(_ramp(x * 8, 8), 12),          # gcd(8, 12) = 4 < 8 lanes
              _div(_ramp(x * 16 + y, 4), 64),     # y unbounded
              _div(_ramp(x * 4, 4, stride=2), 8)]:  # 2 * 3 + 4k spans 7 > 4
        out = lower_simplify(e)
        assert isinstance(out, (E.FloorDiv, E.FloorMod)), out
    # known ranges that still allow a crossing
    out = lower_simplify(_div(_ramp(x, 4), 8), var_ranges={x: (0, 5)})
    assert isinstance(out, E.FloorDiv)


# ------------------------------------------------------------------ the rules themselves
def test_rules_and_their_results():
    x, y = E.Var("x"), E.Var("y")
    # divisibility: x * 16 + 3 is 3 modulo 16, 3 + 7 < 16
    d = lower_simplify(_div(_ramp(x * 16 + 3, 8), 16))
    m = lower_simplify(_mod(_ramp(x * 16 + 3, 8), 16))
    assert isinstance(d, E.Broadcast) and isinstance(m, E.Ramp)
    assert engine.structural_equal(d.value, x) and engine.structural_equal(m.base, E.IntImm(I32, 3))
    # (x * 16) // 64 and (x * 16) % 64 lose the common factor 16
    d = lower_simplify(_div(_ramp(x * 16, 16), 64))
    m = lower_simplify(_mod(_ramp(x * 16, 16), 64))
    assert engine.structural_equal(d.value, x // 4)
    assert engine.structural_equal(m.base, x % 4 * 16)
    # ranges: x in [0, 4] keeps x .. x + 3 inside [0, 8)
    d = lower_simplify(_div(_ramp(x, 4), 8), var_ranges={x: (0, 4)})
    assert isinstance(d, E.Broadcast)
    # divisibility and ranges together: x*16 + y with y in [0, 3], 4 lanes, c = 64
    d = lower_simplify(_div(_ramp(x * 16 + y, 4), 64), var_ranges={y: (0, 3)})
    assert isinstance(d, E.Broadcast)
    # a stride that is a multiple of c needs no proof
    d = lower_simplify(_div(_ramp(x, 4, stride=8), 4))
    m = lower_simplify(_mod(_ramp(x, 4, stride=8), 4))
    assert isinstance(d, E.Ramp) and E.as_const_int(d.stride) == 2
    assert isinstance(m, E.Broadcast)
    # c a multiple of L*s and the base a multiple of L*s: Ramp(x*8, 2, 4) spans x*8 .. x*8+6
    d = lower_simplify(_div(_ramp(x * 8, 4, stride=2), 16))
    m = lower_simplify(_mod(_ramp(x * 8, 4, stride=2), 16))
    assert isinstance(d, E.Broadcast) and isinstance(m, E.Ramp) and E.as_const_int(m.stride) == 2
    # 64-bit indices
    w = E.Var("w", "int64")
    r64 = E.Ramp(w * E.IntImm("int64", 16), E.IntImm("int64", 1), 16)
    d = lower_simplify(E.FloorDiv(r64, E.Broadcast(E.IntImm("int64", 64), 16)))
    assert isinstance(d, E.Broadcast) and d.value.dtype == "int64"
    # a negative stride: lanes x*16+15, x*16+14, ..., x*16
    d = lower_simplify(_div(_ramp(x * 16 + 15, 16, stride=-1), 16))
    assert isinstance(d, E.Broadcast) and engine.structural_equal(d.value, x)


def test_whole_affine_index_folds_to_one_ramp():
    x, k = E.Var("x"), E.Var("k")
    r = _ramp(x * 16, 16)
    bc = lambda v: E.Broadcast(E.IntImm(I32, v) if isinstance(v, int) else v, 16)  # noqa: E731
    idx = E.Add(E.Add(E.Mul(_div(r, 64), bc(16384)), bc(k * 64)), _mod(r, 64))
    out = lower_simplify(idx)
    assert isinstance(out, E.Ramp) and E.as_const_int(out.stride) == 1
    assert lanes_of(out.base.dtype) == 1
    for xv in range(-3, 9):
        for kv in range(3):
            env = {x: xv, k: kv}
            assert _eval(out, env) == _eval(idx, env)


def test_ranges_of_enclosing_loops_are_used():
    x, y = E.Var("x"), E.Var("y")
    buf = Buffer("Z", (4096,), I32)
    idx = _div(_ramp(x * 16 + y, 4), 64)
    store = BufferStore(buf, E.Broadcast(E.IntImm(I32, 1), 4), (idx,))
    loop = For(y, E.IntImm(I32, 0), E.IntImm(I32, 4), ForKind.SERIAL, store)
    out = lower_simplify(loop)
    assert isinstance(out.body.indices[0], E.Broadcast)
    wide = For(y, E.IntImm(I32, 0), E.IntImm(I32, 16), ForKind.SERIAL, store)
    assert isinstance(lower_simplify(wide).body.indices[0], E.FloorDiv)


def test_modular_set():
    x, y = E.Var("x"), E.Var("y")
    assert modular_set(x * 16 + 4) == (16, 4)
    assert modular_set((x * 8) % 64) == (8, 0)
    assert modular_set((x * 8 + 2) % 12) == (4, 2)   # only gcd(8, 12) survives the modulo
    assert modular_set((x * 32) // 4) == (8, 0)
    assert modular_set((x * 6 + 3) * (y * 4 + 2)) == (12, 6)
    assert modular_set(E.Min(x * 8 + 2, y * 12 + 6)) == (4, 2)
    assert modular_set(x // 3) == (1, 0)
    assert modular_set(E.Div(x * 8, E.IntImm(I32, 2))) == (1, 0)  # truncating: unknown


@pytest.mark.parametrize("op", [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod])
def test_every_vector_fold_is_exact(op):
    """Ramp/Broadcast operand pairs under each operator keep every lane's value."""
    x, y = E.Var("x"), E.Var("y")
    lanes = 4
    operands = [E.Broadcast(x * 3 + 1, lanes), E.Broadcast(E.IntImm(I32, 6), lanes),
                _ramp(y * 2, lanes, stride=3), _ramp(x + 4, lanes, stride=-2),
                _ramp(y * 8, lanes, stride=1), E.Broadcast(E.IntImm(I32, 8), lanes)]
    for a in operands:
        for b in operands:
            e = op(a, b)
            out = lower_simplify(e)
            for xv in range(-4, 5):
                for yv in range(-3, 4):
                    env = {x: xv, y: yv}
                    try:
                        want = _eval(e, env)
                    except ZeroDivisionError:
                        continue
                    assert _eval(out, env) == want, (e, out, env)


@st.composite
def _int_exprs(draw, depth=3):
    x, y = _XY
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([x, y, E.IntImm(I32, draw(st.integers(-9, 40)))]))
    op = draw(st.sampled_from([E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max]))
    a = draw(_int_exprs(depth - 1))
    if op in (E.FloorDiv, E.FloorMod):
        return op(a, E.IntImm(I32, draw(st.integers(1, 24))))
    if op is E.Mul:
        return op(a, E.IntImm(I32, draw(st.integers(-6, 16))))
    return op(a, draw(_int_exprs(depth - 1)))


_XY = (E.Var("x"), E.Var("y"))


@given(_int_exprs())
def test_modular_set_is_sound(e):
    m, r = modular_set(e)
    x, y = _XY
    for xv in range(-10, 11):
        for yv in range(-6, 7):
            v = _eval(e, {x: xv, y: yv})
            assert (v == r) if m == 0 else ((v - r) % m == 0), (e, m, r, xv, yv, v)


# ------------------------------------------------------------------ properties
@st.composite
def _ramp_cases(draw):
    a = draw(st.integers(-24, 24))
    b = draw(st.integers(-24, 24))
    k = draw(st.integers(-40, 40))
    stride = draw(st.sampled_from([-3, -2, -1, 1, 2, 3, 4, 8, 12]))
    lanes = draw(st.sampled_from([2, 3, 4, 8, 16]))
    c = draw(st.integers(1, 40))
    op = draw(st.sampled_from([E.FloorDiv, E.FloorMod]))
    yr = draw(st.one_of(st.none(), st.tuples(st.integers(-9, 9), st.integers(0, 12))))
    return a, b, k, stride, lanes, c, op, yr


@given(_ramp_cases())
def test_rewrites_are_exact_on_every_value(case):
    """Whatever is rewritten computes the same lanes as the original (incl. negatives)."""
    a, b, k, stride, lanes, c, op, yr = case
    x, y = E.Var("x"), E.Var("y")
    base = x * a + y * b + k
    e = op(_ramp(base, lanes, stride), E.Broadcast(E.IntImm(I32, c), lanes))
    ranges = None if yr is None else {y: (yr[0], yr[0] + yr[1])}
    out = lower_simplify(e, var_ranges=ranges)
    ys = range(-12, 13) if yr is None else range(yr[0], yr[0] + yr[1] + 1)
    for xv in range(-7, 8):
        for yv in ys:
            env = {x: xv, y: yv}
            assert _eval(out, env) == _eval(e, env), (out, env)


@given(a=st.sampled_from([1, 2, 3, 4, 8, 12, 16, 32]), lanes=st.sampled_from([2, 4, 8, 16]),
       c1=st.integers(1, 48), c2=st.integers(1, 48), mul=st.integers(-3, 70),
       ops=st.tuples(st.sampled_from([E.FloorDiv, E.FloorMod]),
                     st.sampled_from([E.FloorDiv, E.FloorMod])),
       combine=st.sampled_from(["add", "sub", "rsub"]))
def test_nested_index_expressions_are_exact(a, lanes, c1, c2, mul, ops, combine):
    """``((Ramp op1 c1) * m +/- Broadcast(y)) op2 c2`` and the layout index ``Ramp // c * m +
    Broadcast(y) + Ramp % c``: every fold keeps every lane's value."""
    x, y = E.Var("x"), E.Var("y")

    def bc(v):
        return E.Broadcast(E.IntImm(I32, v) if isinstance(v, int) else v, lanes)

    r = _ramp(x * a, lanes)
    inner = ops[0](r, bc(c1))
    scaled = E.Mul(inner, bc(mul))
    mixed = {"add": E.Add(scaled, bc(y)), "sub": E.Sub(scaled, bc(y)),
             "rsub": E.Sub(bc(y), scaled)}[combine]
    nested = ops[1](mixed, bc(c2))
    layout = E.Add(E.Add(E.Mul(_div(r, c1), bc(mul)), bc(y * c1)), _mod(r, c1))
    for e in (nested, layout):
        for ranges in (None, {y: (0, 3)}):
            out = lower_simplify(e, var_ranges=ranges)
            for xv in range(-5, 9):
                for yv in range(0, 4):
                    env = {x: xv, y: yv}
                    assert _eval(out, env) == _eval(e, env), (out, env)
    if c1 % lanes == 0 and a % lanes == 0:  # provably one block: the layout is one ramp
        out = lower_simplify(layout)
        assert isinstance(out, E.Ramp) and E.as_const_int(out.stride) == 1


@given(st.integers(-50, 50), st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 64),
       st.integers(-40, 40))
def test_one_block_proof_is_sound(a, lanes, c, k):
    x = E.Var("x")
    if lanes_in_one_block(x * a + k, lanes - 1, c, lambda _e: None):
        for xv in range(-2 * c - 3, 2 * c + 4):
            base = a * xv + k
            assert base // c == (base + lanes - 1) // c


@given(n=st.integers(2, 64), k=st.integers(1, 6), c=st.integers(2, 32),
       f=st.sampled_from([2, 4, 8, 16]), transform=st.sampled_from(TRANSFORMS),
       consumer=st.booleans(), seed=st.integers(0, 2**16))
def test_compiled_layouts_match_numpy(n, k, c, f, transform, consumer, seed):
    assume(f <= n)
    m = 2
    sch = _schedule(m, n, k, c, f, transform, consumer)
    if c % f == 0:  # lanes start at multiples of f, so they never cross a multiple of c
        assert not _vector_divmods(lower(sch.mod["matmul"]))
    _run_exact(sch, m, n, k, seed)
