"""parallel after imperfect splits (blocks with a ``T.where``): the legality check reads
the predicate. Properties over random splits and fuses of matmul's loops:

* an accepted ``parallel`` really is race-free (checked by enumerating every block
  instance that exists under the predicate) and the compiled kernel matches numpy;
* a refused one really is racy (two iterations of the loop update the same element) or
  binds the loop to a reduction axis (TVM's rule, which TVM refuses too).

The random schedules fuse spatial loops only: a loop fused from spatial and reduction
loops and split again can give bindings such as ``(f_0 * 12 + f_1) // 8`` beside
``(f_0 * 6 + f_1 // 2) % 4``, two digits of one number that the check does not relate,
so it refuses ``parallel(f_0)`` there although the iterations are disjoint (TVM accepts).
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

import engine
from engine.ir import expr as E
from engine.ir.stmt import IterType
from engine.schedule.tree import FuncIndex

_OPS = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
        E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
        E.Min: min, E.Max: max, E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b,
        E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b, E.EQ: lambda a, b: a == b,
        E.NE: lambda a, b: a != b, E.And: lambda a, b: a and b, E.Or: lambda a, b: a or b}


def _eval(e, env):
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Not):
        return not _eval(e.a, env)
    return _OPS[type(e)](_eval(e.a, env), _eval(e.b, env))


def _race_facts(func, block_name, loop_var_name):
    """(racy, bound_to_reduction) of making that loop parallel, by enumeration."""
    idx = FuncIndex(func)
    block = idx.find_block(block_name)
    realize = idx.realize[id(block)]
    loops = idx.loops_above(realize)
    pos = [lp.loop_var.name for lp in loops].index(loop_var_name)
    lv = loops[pos].loop_var
    bound_to_reduce = any(iv.iter_type is IterType.REDUCE and _uses(val, lv)
                          for iv, val in zip(block.iter_vars, realize.iter_values))
    seen = {}
    for point in itertools.product(*(range(lp.extent.value) for lp in loops)):
        env = {lp.loop_var: v for lp, v in zip(loops, point)}
        if not _eval(realize.predicate, env):
            continue
        spatial = tuple(_eval(val, env) for iv, val in zip(block.iter_vars, realize.iter_values)
                        if iv.iter_type is IterType.SPATIAL)
        key = (point[:pos], spatial)
        if seen.setdefault(key, point[pos]) != point[pos]:
            return True, bound_to_reduce
    return False, bound_to_reduce


def _uses(e, var):
    from engine.ir.functor import uses_var
    return uses_var(e, var)


_step = st.one_of(
    st.tuples(st.just("split"), st.integers(0, 9), st.integers(2, 5), st.booleans()),
    st.tuples(st.just("fuse"), st.integers(0, 9)))


@given(m=st.integers(3, 9), n=st.integers(3, 9), k=st.integers(2, 6),
       steps=st.lists(_step, min_size=1, max_size=3), which=st.integers(0, 9))
def test_parallel_after_imperfect_splits(m, n, k, steps, which):
    sch = engine.Schedule(engine.workloads.get("matmul", m=m, n=n, k=k))
    block = sch.get_block("C")
    for step in steps:
        loops = sch.get_loops(block)
        if step[0] == "split":
            _, at, factor, inner = step
            sch.split(loops[at % len(loops)], [None, factor] if inner else [factor, None])
        elif len(loops) > 1:
            at = step[1] % (len(loops) - 1)
            if not any(sch.get(lp).loop_var.name.startswith("k") for lp in loops[at:at + 2]):
                sch.fuse(loops[at], loops[at + 1])  # spatial loops only (see the docstring)
    loops = sch.get_loops(block)
    loop = loops[which % len(loops)]
    name = sch.get(loop).loop_var.name
    racy, bound_to_reduce = _race_facts(sch.mod["matmul"], "C", name)
    try:
        sch.parallel(loop)
    except engine.ScheduleError as err:
        assert racy or bound_to_reduce, f"refused but race-free: {err}\n{sch.mod.script()}"
        return
    assert not racy and not bound_to_reduce, sch.mod.script()
    args = engine.workloads.random_args("matmul", m=m, n=n, k=k)
    try:
        engine.build(sch.mod)["matmul"](*args)
    except engine.BuildError as err:
        # the build's bounds proof is separate from parallel (it cannot yet prove e.g.
        # ``f_0 + f_1 // 3 < 3`` under ``f_0 * 3 + f_1 < 9`` after split of a fused loop):
        # then the schedule's meaning is checked with the reference interpreter
        assert "may" in str(err) and "past the end" in str(err), err
        engine.interpret(sch.mod, "matmul", *args)
    ref = engine.workloads.reference("matmul", m=m, n=n, k=k)(*args[:2])
    np.testing.assert_allclose(args[2], ref, rtol=1e-4, atol=1e-4)


def test_issue_case_nested_imperfect_split_is_parallel():
    """matmul n=14: split(i, [None, 7]), split(i_1, [None, 4]) (a T.where), parallel(i_0)."""
    sch = engine.Schedule(engine.workloads.get("matmul", n=14))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 7])
    sch.split(i1, [None, 4])
    assert "T.where" in sch.mod.script()
    sch.parallel(i0)
    args = engine.workloads.random_args("matmul", n=14)
    engine.build(sch.mod)["matmul"](*args)
    np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)


def test_a_racy_loop_under_a_predicate_is_still_refused():
    """softmax with its reductions computed at the inner tile loop of an imperfect split of
    the columns: every column tile repeats the row's max, so parallel(j_0) is refused, and
    enumeration agrees that it races."""
    sch = engine.Schedule(engine.workloads.get("softmax", m=4, n=7))
    _, j = sch.get_loops(sch.get_block("T_softmax_norm"))
    j0, _ = sch.split(j, [None, 3])
    for b in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(b), j0)
    assert "T.where" in sch.mod.script()
    racy, _ = _race_facts(sch.mod["softmax"], "T_softmax_maxelem", sch.get(j0).loop_var.name)
    assert racy
    with pytest.raises(engine.ScheduleError, match="update the same elements"):
        sch.parallel(j0)


@pytest.mark.parametrize("preset", ["matmul-tiled", "mm_relu-tiled"])
@pytest.mark.parametrize("n", [5, 7])
def test_tiled_presets_at_small_sizes(preset, n):
    from engine import presets
    sch = presets.get(preset, n=n)
    wl = preset.split("-")[0]
    args = engine.workloads.random_args(wl, n=n)
    engine.build(sch.mod)[wl](*args)
    ref = engine.workloads.reference(wl, n=n)(*args[:2])
    np.testing.assert_allclose(args[2], ref, rtol=1e-4, atol=1e-4)


def test_a_unit_loop_inside_is_a_constant():
    """hypothesis found: m=3, split(i, [2, None]), split(i_1, [None, 3]) leaves i_1_0 of
    extent 1 with coefficient 3 > 2 in ``i_0 * 2 + i_1_0 * 3 + i_1_1``; parallel(i_0) is
    race-free and accepted."""
    sch = engine.Schedule(engine.workloads.get("matmul", m=3, n=3, k=2))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [2, None])
    sch.split(i1, [None, 3])
    sch.parallel(i0)
    args = engine.workloads.random_args("matmul", m=3, n=3, k=2)
    engine.build(sch.mod)["matmul"](*args)
    np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
