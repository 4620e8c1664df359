"""rfactor of reductions into two buffers at once (argmax, argmin, a pair of sums), and the
te / topi side that makes them (``te.comm_reducer``, ``topi.argmax``, ``topi.argmin``).

Every accepted schedule is run on small random integers — many ties between values, which
is where an argmax could go wrong — by the interpreter on the original program, the
interpreter on the new one and the compiled new one, which must agree exactly. The
programs are written for these tests (the cases of TVM's
``test_tir_schedule_rfactor.py`` they mirror are named in the docstrings).
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import te, topi
from engine.ir import stmt as S
from engine.ir.function import IRModule
from engine.ir.functor import collect
from engine.schedule import Schedule, ScheduleError, Trace
from semantics import assert_computes_exactly, assert_refused, run_interpreted


def _module(func) -> IRModule:
    return IRModule((("main", func),))


def _refused(sch, action, *needles):
    return assert_refused(sch, action, *needles, prefix="rfactor refused")


# An argmax whose ties keep the pair met first (``>=``), over an index buffer and a value
# buffer, its reduction loop split in two: TVM's ``argmax_split`` in small.
ARGMAX_FIRST = """
@T.prim_func
def main(idx: T.Buffer((3, 12), "int32"), val: T.Buffer((3, 12), "float32"),
         out_i: T.Buffer((3,), "int32"), out_v: T.Buffer((3,), "float32")):
    for i0, k0, k1 in T.grid(3, 3, 4):
        with T.block("argmax"):
            i = T.axis.spatial(3, i0)
            k = T.axis.reduce(12, k0 * 4 + k1)
            T.reads(idx[i, k], val[i, k])
            T.writes(out_i[i], out_v[i])
            with T.init():
                out_i[i] = -1
                out_v[i] = T.min_value("float32")
            v_i: T.int32 = T.Select(out_v[i] >= val[i, k], out_i[i], idx[i, k])
            v_v: T.float32 = T.Select(out_v[i] >= val[i, k], out_v[i], val[i, k])
            out_i[i] = v_i
            out_v[i] = v_v
"""

# An argmin whose init and stores are in the other order than its T.let bindings (TVM's
# ``argmin_split_init_update_reordered``).
ARGMIN_REORDERED = """
@T.prim_func
def main(idx: T.Buffer((3, 12), "int32"), val: T.Buffer((3, 12), "float32"),
         out_i: T.Buffer((3,), "int32"), out_v: T.Buffer((3,), "float32")):
    for i0, k0, k1 in T.grid(3, 3, 4):
        with T.block("argmin"):
            i = T.axis.spatial(3, i0)
            k = T.axis.reduce(12, k0 * 4 + k1)
            T.reads(idx[i, k], val[i, k])
            T.writes(out_i[i], out_v[i])
            with T.init():
                out_v[i] = T.max_value("float32")
                out_i[i] = -1
            v_i: T.int32 = T.Select(out_v[i] <= val[i, k], out_i[i], idx[i, k])
            v_v: T.float32 = T.Select(out_v[i] <= val[i, k], out_v[i], val[i, k])
            out_v[i] = v_v
            out_i[i] = v_i
"""


def _blocks(mod, name):
    return [b for b in collect(mod["main"].body, S.Block) if b.name_hint == name]


def test_argmax_over_the_outer_reduction_loop_keeps_the_first_index_of_a_tie():
    """Factored over k0, the outermost reduction loop, the partial results cover runs of
    consecutive elements and the write-back meets them in order: a tie keeps the first
    index, as in the original. Two rfactor buffers, each with the rfactor loop's axis."""
    mod = engine.parse(ARGMAX_FIRST)
    sch = Schedule(mod)
    _, k0, _ = sch.get_loops(sch.get_block("argmax"))
    rf = sch.rfactor(k0, 1)
    assert sch.get(rf).name_hint == "argmax_rf"
    allocs = sch.mod["main"].body.block.alloc_buffers
    assert [(b.name, tuple(int(s) for s in b.shape)) for b in allocs] == \
        [("out_i_rf", (3, 3)), ("out_v_rf", (3, 3))]
    rf_block = sch.get(rf)
    assert isinstance(rf_block.init, S.SeqStmt) and len(rf_block.init.seq) == 2
    assert isinstance(rf_block.body, S.LetStmt)
    assert [w.buffer.name for w in rf_block.writes] == ["out_i_rf", "out_v_rf"]
    assert assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1, 2), low=-2, high=2)


def test_argmax_over_an_inner_reduction_loop_is_refused_ties_would_change():
    """Factored over k1 (inside k0), a tie between k = 1 and k = 4 would be decided by k1
    first: the partial result of k1 = 0 holds k = 4 and comes first in the write-back. TVM
    accepts it; the engine refuses, naming the reducer and the loop to factor instead."""
    sch = Schedule(engine.parse(ARGMAX_FIRST))
    _, _, k1 = sch.get_loops(sch.get_block("argmax"))
    e = _refused(sch, lambda: sch.rfactor(k1, 1), "a tie keeps the index met first",
                 "inside the reduction loop k0", "outermost reduction loop (k0)")
    assert "k0" in e.highlight


# What TVM's rfactor(k1) of ARGMAX_FIRST makes (its argmax_split_rfactor, in small).
ARGMAX_FIRST_TVM_RF = """
@T.prim_func
def main(idx: T.Buffer((3, 12), "int32"), val: T.Buffer((3, 12), "float32"),
         out_i: T.Buffer((3,), "int32"), out_v: T.Buffer((3,), "float32")):
    out_i_rf = T.alloc_buffer((3, 4), "int32")
    out_v_rf = T.alloc_buffer((3, 4), "float32")
    for i0, k0, k1 in T.grid(3, 3, 4):
        with T.block("argmax_rf"):
            vk1, i, vk0 = T.axis.remap("SSR", [k1, i0, k0])
            with T.init():
                out_i_rf[i, vk1] = -1
                out_v_rf[i, vk1] = T.min_value("float32")
            v_i: T.int32 = T.Select(out_v_rf[i, vk1] >= val[i, vk0 * 4 + vk1],
                                    out_i_rf[i, vk1], idx[i, vk0 * 4 + vk1])
            v_v: T.float32 = T.Select(out_v_rf[i, vk1] >= val[i, vk0 * 4 + vk1],
                                      out_v_rf[i, vk1], val[i, vk0 * 4 + vk1])
            out_i_rf[i, vk1] = v_i
            out_v_rf[i, vk1] = v_v
    for i0, k1 in T.grid(3, 4):
        with T.block("argmax"):
            vk1, i = T.axis.remap("RS", [k1, i0])
            with T.init():
                out_i[i] = -1
                out_v[i] = T.min_value("float32")
            v_i: T.int32 = T.Select(out_v[i] >= out_v_rf[i, vk1], out_i[i], out_i_rf[i, vk1])
            v_v: T.float32 = T.Select(out_v[i] >= out_v_rf[i, vk1], out_v[i], out_v_rf[i, vk1])
            out_i[i] = v_i
            out_v[i] = v_v
"""


def test_the_refused_factoring_would_give_another_index_on_a_tie():
    """Why the refusal above: the program TVM makes from rfactor(k1) answers another index
    than the original when the largest value ties between k = 1 and k = 4."""
    original, factored = engine.parse(ARGMAX_FIRST), engine.parse(ARGMAX_FIRST_TVM_RF)
    idx = np.arange(36, dtype="int32").reshape(3, 12)
    val = np.zeros((3, 12), "float32")
    val[:, 1] = val[:, 4] = 5.0
    args = [idx, val, np.zeros(3, "int32"), np.zeros(3, "float32")]
    want = run_interpreted(original, "main", args)
    got = run_interpreted(factored, "main", args)
    np.testing.assert_array_equal(want[2], idx[:, 1])
    np.testing.assert_array_equal(got[2], idx[:, 4])
    np.testing.assert_array_equal(got[3], want[3])


def test_argmin_with_init_and_stores_in_another_order_factors_in_the_let_order():
    """TVM's order of the reduced buffers is the order of the T.let bindings (out_i, then
    out_v), whatever the order of the init's and the update's stores."""
    mod = engine.parse(ARGMIN_REORDERED)
    sch = Schedule(mod)
    _, k0, _ = sch.get_loops(sch.get_block("argmin"))
    rf = sch.rfactor(k0, 0)
    rf_block = sch.get(rf)
    assert [s.buffer.name for s in rf_block.init.seq] == ["out_i_rf", "out_v_rf"]
    assert [b.name for b in sch.mod["main"].body.block.alloc_buffers] == \
        ["out_i_rf", "out_v_rf"]
    wb = _blocks(sch.mod, "argmin")[0]
    assert [s.buffer.name for s in wb.init.seq] == ["out_i", "out_v"]
    assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1, 2), low=-2, high=2)


def test_argmax_over_its_only_reduction_loop_keeps_the_order():
    """rfactor of the only reduction loop: each partial result is one element (no init in
    the rfactor block), met in the original order by the write-back."""
    mod = engine.parse(_variant(_INIT, _LETS + "\n            out_i[i] = v_i\n"
                                "            out_v[i] = v_v"))
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("argmax"))
    rf = sch.rfactor(k, 1)
    assert sch.get(rf).init is None
    assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1), low=-2, high=2)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("factor_axis", [0, 1, -1])
def test_topi_reductions_factor_over_an_inner_loop(kind, factor_axis):
    """topi's argmax/argmin break ties by the smaller index: the best pair of a total
    order, the same whatever the order — so an inner loop may be factored, and the rfactor
    loop then parallelised. Exact on ties, and numpy's first index."""
    A = te.placeholder((3, 24), dtype="int32")
    B = getattr(topi, kind)(A, axis=1)
    mod = _module(te.create_prim_func([A, B]))
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("placeholder_red_temp"))
    _, ki = sch.split(k, [None, 8])
    rf = sch.rfactor(ki, factor_axis)
    sch.parallel(sch.get_loops(rf)[0])
    ref = getattr(np, kind)
    assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1, 2), low=-2, high=2,
                            reference=lambda a: ref(a, axis=1).astype("int32"))


def test_topi_argmax_over_two_axes_is_the_row_major_position():
    """Over several axes the index is the position within them, row-major (numpy's argmax
    of the flattened axes), and the fused-then-split reduction still factors."""
    A = te.placeholder((2, 3, 4), dtype="int32")
    B = topi.argmax(A, axis=[1, 2])
    mod = _module(te.create_prim_func([A, B]))
    sch = Schedule(mod)
    _, k1, k2 = sch.get_loops(sch.get_block("placeholder_red_temp"))
    f = sch.fuse(k1, k2)
    _, fi = sch.split(f, [None, 4])
    sch.rfactor(fi, 0)
    assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1), low=-2, high=2,
                            reference=lambda a: a.reshape(2, 12).argmax(1).astype("int32"))


def test_topi_argmax_with_the_last_index_is_no_reducer_rfactor_knows():
    """``select_last_index=True`` (ties take the larger index) is not one of TVM's
    registered reducers: refused, as TVM does."""
    A = te.placeholder((2, 16), dtype="int32")
    B = topi.argmax(A, axis=1, select_last_index=True)
    func = te.create_prim_func([A, B])
    a = np.random.default_rng(0).integers(-2, 2, (2, 16)).astype("int32")
    out = run_interpreted(_module(func), "main", [a, np.zeros(2, "int32")])[1]
    np.testing.assert_array_equal(out, 15 - a[:, ::-1].argmax(1))
    sch = Schedule(_module(func))
    _, k = sch.get_loops(sch.get_block("placeholder_red_temp"))
    _refused(sch, lambda: sch.rfactor(k, 0), "no reducer rfactor knows")


def test_a_pair_of_sums_factors():
    """TVM's two-buffer sum: both buffers summed at once."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 16), "int32"), B: T.Buffer((4, 16), "int32"),
         S: T.Buffer((4,), "int32"), R: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 16):
        with T.block("pair"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = 0
                R[vi] = 0
            v_s: T.int32 = S[vi] + A[vi, vk]
            v_r: T.int32 = R[vi] + B[vi, vk] * A[vi, vk]
            S[vi] = v_s
            R[vi] = v_r
""")
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("pair"))
    _, ki = sch.split(k, [None, 4])
    sch.rfactor(ki, 1)
    assert_computes_exactly(mod, sch.mod, "main", seeds=(0, 1))


def _variant(init: str, update: str, shapes=("(3,)", "(3,)")) -> str:
    return f"""
@T.prim_func
def main(idx: T.Buffer((3, 12), "int32"), val: T.Buffer((3, 12), "float32"),
         out_i: T.Buffer({shapes[0]}, "int32"), out_v: T.Buffer({shapes[1]}, "float32")):
    for i0, k in T.grid(3, 12):
        with T.block("argmax"):
            i, vk = T.axis.remap("SR", [i0, k])
            T.reads(idx[i, vk], val[i, vk])
            T.writes(out_i[i], out_v[i])
            with T.init():
{init}
{update}
"""


_INIT = """                out_i[i] = -1
                out_v[i] = T.min_value("float32")"""
_LETS = """            v_i: T.int32 = T.Select(out_v[i] >= val[i, vk], out_i[i], idx[i, vk])
            v_v: T.float32 = T.Select(out_v[i] >= val[i, vk], out_v[i], val[i, vk])"""


@pytest.mark.parametrize("init, update, shapes, rule", [
    # TVM's argmax_split_different_shape
    (_INIT, _LETS + "\n            out_i[i] = v_i\n            out_v[i] = v_v", ("(6,)", "(3,)"),
     "buffers of different shapes"),
    # argmax_split_init_buffer_duplicate
    ("                out_i[i] = -1\n                out_i[i] = -1",
     _LETS + "\n            out_i[i] = v_i\n            out_v[i] = v_v", None,
     "initialises out_i twice"),
    # argmax_split_bind_fewer_than_init
    (_INIT, _LETS.split("\n")[0] + "\n            out_i[i] = v_i\n            out_v[i] = "
     "T.Select(out_v[i] >= val[i, vk], out_v[i], val[i, vk])", None,
     "bind exactly one value per buffer"),
    # argmax_split_body_seq_not_bufferstore
    (_INIT, _LETS + "\n            out_i[i] = v_i\n            T.evaluate(0)", None,
     "is not a store"),
    # argmax_split_init_update_inconsistent_bufferstore_number
    (_INIT, _LETS + "\n            out_i[i] = v_i\n            out_v[i] = v_v\n"
     "            out_v[i] = v_v", None, "3 statement(s) after the T.let bindings"),
    # argmax_split_body_bufferstore_value_not_var
    (_INIT, _LETS + "\n            out_i[i] = T.Select(out_v[i] >= val[i, vk], out_i[i], "
     "idx[i, vk])\n            out_v[i] = v_v", None, "not one of the values bound"),
    # argmax_split_one_let_var_used_multi_times (int values: the same dtype)
    (_INIT, _LETS + "\n            out_i[i] = v_i\n            out_i[i] = v_i", None,
     "stores the value v_i twice"),
    # argmax_split_body_one_buffer_updated_multi_times
    (_INIT, _LETS + "\n            out_i[i] = v_i\n            out_i[i] = T.Cast('int32', v_v)",
     None, "not one of the values bound"),
    # a reducer that is none of TVM's: the value takes the max, the index the min
    (_INIT, _LETS.replace("out_i[i], idx[i, vk])", "idx[i, vk], out_i[i])")
     + "\n            out_i[i] = v_i\n            out_v[i] = v_v", None,
     "no reducer rfactor knows"),
    # a wrong identity (0 instead of -1 for the index)
    (_INIT.replace("-1", "0"), _LETS + "\n            out_i[i] = v_i\n            out_v[i] = v_v",
     None, "no reducer rfactor knows"),
])
def test_malformed_two_buffer_reductions_are_refused(init, update, shapes, rule):
    """TVM's conditions on a reduction block over several buffers, each broken once: the
    engine refuses with the condition in words."""
    mod = engine.parse(_variant(init, update, shapes or ("(3,)", "(3,)")))
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("argmax"))
    _refused(sch, lambda: sch.rfactor(k, 0), "is not a reduction rfactor can factor", rule)


def test_init_and_update_at_different_indices_are_refused():
    """TVM's argmax_split_different_indices: the value buffer at ``i + 1``."""
    mod = engine.parse(_variant(_INIT, _LETS + "\n            out_i[i] = v_i\n"
                                "            out_v[i] = v_v", ("(4,)", "(4,)"))
                       .replace("out_v[i] = T.min", "out_v[i + 1] = T.min")
                       .replace("out_v[i] = v_v", "out_v[i + 1] = v_v")
                       .replace("T.writes(out_i[i], out_v[i])", "T.writes(out_i[i], out_v[i + 1])"))
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("argmax"))
    _refused(sch, lambda: sch.rfactor(k, 0), "at other indices than out_i")


def test_rfactor_of_an_argmax_replays_from_its_trace():
    A = te.placeholder((2, 16), dtype="int32")
    mod = _module(te.create_prim_func([A, topi.argmin(A, axis=1)]))
    sch = Schedule(mod)
    _, k = sch.get_loops(sch.get_block("placeholder_red_temp"))
    _, ki = sch.split(k, [None, 4])
    sch.rfactor(ki, 1)
    again = Schedule(mod)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)


def test_comm_reducer_of_one_value():
    """``te.comm_reducer`` of one value: ``B[i] = combine(B[i], src)`` from its identity
    (here a product, which rfactor does not know: refused)."""
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    A = te.placeholder((3, 5), dtype="int32", name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((3,), lambda i: prod(A[i, k], axis=k), name="B")
    mod = _module(te.create_prim_func([A, B]))
    a = np.random.default_rng(1).integers(-3, 4, (3, 5)).astype("int32")
    out = run_interpreted(mod, "main", [a, np.zeros(3, "int32")])[1]
    np.testing.assert_array_equal(out, a.prod(axis=1))
    sch = Schedule(mod)
    _refused(sch, lambda: sch.rfactor(sch.get_loops(sch.get_block("B"))[1], 0),
             "not a sum, max or min")


def test_multi_output_compute_needs_one_comm_reducer():
    A = te.placeholder((3, 5), dtype="int32", name="A")
    with pytest.raises(te.TeError, match="one te.comm_reducer reduction"):
        te.compute((3,), lambda i: (A[i, 0], A[i, 1]), name="B")


def test_a_schedule_error_is_a_runtime_error_as_tvms():
    """TVM's ScheduleError derives from RuntimeError; code catching that catches ours."""
    sch = Schedule(engine.parse(ARGMAX_FIRST))
    _, _, k1 = sch.get_loops(sch.get_block("argmax"))
    with pytest.raises(RuntimeError):
        sch.rfactor(k1, 1)
    assert issubclass(ScheduleError, ValueError)
