"""rfactor never produces a wrong program, and refuses what TVM refuses.

Every accepted schedule here is run three ways on random inputs: the reference interpreter
on the ORIGINAL program, the interpreter on the new one, and the compiled new one
(``engine.build``) — they must agree (the inputs are small integers held in float32, so
sums are exact whatever their order) — and, where one is given, with numpy. Every
refusal is a ScheduleError whose message names the rule.

The programs are written for these tests; the docstrings name the case of Apache TVM's
``tests/python/s_tir/schedule/test_tir_schedule_rfactor.py`` each one mirrors.
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import stmt as S
from engine.ir.functor import collect
from engine.lower import lower
from engine.schedule import Schedule, ScheduleError


# ----------------------------------------------------------------------------- helpers
def _args(mod, seed: int = 0) -> list:
    """Random small integers (float32 holds their sums exactly) for every parameter."""
    rng = np.random.default_rng(seed)
    out = []
    for b in mod["main"].params:
        shape = [int(s.value) for s in b.shape]
        out.append(rng.integers(-8, 9, shape).astype(b.dtype))
    return out


def _interpret(mod, args) -> list:
    a = [x.copy() for x in args]
    engine.interpret(mod, "main", *a)
    return a


def _compiled(mod, args) -> list:
    a = [x.copy() for x in args]
    engine.build(mod)["main"](*a)
    return a


def _computes_the_same(original, sch: Schedule, seed: int = 0, reference=None) -> None:
    """The scheduled program computes what the original computes: interpreter on the
    original == interpreter on the new program == compiled new program (== numpy)."""
    args = _args(original, seed)
    want = _interpret(original, args)
    got = _interpret(sch.mod, args)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    for w, c in zip(want, _compiled(sch.mod, args)):
        np.testing.assert_array_equal(c, w)
    if reference is not None:
        np.testing.assert_array_equal(want[-1], reference(*args[:-1]))


def _refused(sch: Schedule, action, *needles) -> ScheduleError:
    """``action()`` raises a ScheduleError naming the rule, and the program is unchanged."""
    mod = sch.mod
    with pytest.raises(ScheduleError) as ei:
        action()
    assert sch.mod is mod
    msg = str(ei.value)
    assert msg.startswith("rfactor refused") and ei.value.rule
    for needle in needles:
        assert needle in msg, msg
    return ei.value


def _loops(sch: Schedule, block: str = "B") -> list:
    return sch.get_loops(sch.get_block(block))


# ----------------------------------------------- item 2: bindings that are not one-to-one
SQUARE_HALF = """
@T.prim_func
def main(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(32, k * k // 2)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def _tvm_init_rule(A: np.ndarray) -> np.ndarray:
    """SQUARE_HALF by TVM's lowering of T.init(): the init runs at every instance whose
    reduction axes are all at their minimum — here where ``k * k // 2 == 0``, i.e. at
    ``k = 0`` and again at ``k = 1``."""
    B = np.zeros(A.shape[0], dtype=A.dtype)
    for i in range(A.shape[0]):
        for k in range(8):
            vk = k * k // 2
            if vk == 0:
                B[i] = 0
            B[i] = B[i] + A[i, vk]
    return B


def test_init_guard_follows_tvms_rule_in_the_interpreter_and_the_compiled_code():
    """The init of SQUARE_HALF runs whenever its reduction axis is at its minimum (TVM's
    lower_init_block.cc): at k = 0 and at k = 1. The compiled code used to hoist the init
    in front of the k loop because the first iteration hits the minimum — which runs it
    only once; the interpreter and the compiled code must both follow TVM's rule."""
    mod = engine.parse(SQUARE_HALF)
    args = _args(mod, 3)
    want = _tvm_init_rule(args[0])
    np.testing.assert_array_equal(_interpret(mod, args)[1], want)
    np.testing.assert_array_equal(_compiled(mod, args)[1], want)


def _init_guards(mod) -> list:
    return [s for s in collect(lower(mod["main"]).body, S.IfThenElse)]


@pytest.mark.parametrize("schedule", ["none", "split", "fuse", "fuse_split", "reorder"])
def test_init_is_still_hoisted_when_only_the_first_iteration_is_at_the_minimum(schedule):
    """The init stays hoisted out of the reduction loops (no ``if`` per iteration) when
    the reduction axes reach their minimum at the first iteration only: plain, split,
    fused (``f // 8``, ``f % 8``), fused then split, reordered reduction loops."""
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k, l in T.grid(4, 6, 8):
        with T.block("B"):
            vi, vk, vl = T.axis.remap("SRR", [i, k, l])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk, vl]
""")
    sch = Schedule(mod)
    i, k, l = _loops(sch)
    if schedule == "split":
        sch.split(l, [None, 4])
    elif schedule == "fuse":
        sch.fuse(k, l)
    elif schedule == "fuse_split":
        sch.split(sch.fuse(k, l), [None, 16])
    elif schedule == "reorder":
        sch.reorder(l, k)
    assert _init_guards(sch.mod) == []
    args = _args(mod)
    want = args[0].sum(axis=(1, 2))
    np.testing.assert_array_equal(_compiled(sch.mod, args)[1], want)
    np.testing.assert_array_equal(_interpret(sch.mod, args)[1], want)


