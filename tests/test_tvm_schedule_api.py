"""TVM's schedule internals the engine answers to: ``sch.state.mod``, ``work_on`` /
``func_working_on`` (a ``GlobalVar``), ``remove_rv``, and ``error_render_level`` (how a
refusal is written: ``detail``, ``fast``, ``none``)."""
from __future__ import annotations

import pytest

import engine
from engine import tvm
from engine.schedule import Schedule, ScheduleError, Trace
from engine.schedule.error import UnknownHandleError

TWO_FUNCS = """
@I.ir_module
class Module:
    @T.prim_func
    def scale(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("scale"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(2)

    @T.prim_func
    def shift(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("shift"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(1)
"""

ONE_FUNC = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""


def test_state_mod_is_the_module_the_schedule_is_at():
    mod = engine.parse(ONE_FUNC)
    sch = tvm.s_tir.Schedule(mod)
    assert sch.state.mod is sch.mod
    sch.split(sch.get_loops(sch.get_sblock("B"))[0], [2, 4])
    assert sch.state.mod is sch.mod and sch.mod is not mod


def test_func_working_on_follows_work_on():
    sch = Schedule(engine.parse(TWO_FUNCS))
    assert sch.func_working_on is None
    with pytest.raises(ScheduleError, match="does not know which function to be working on"):
        sch.get_block("shift")
    sch.work_on("shift")
    assert sch.func_working_on == sch.mod.get_global_var("shift")
    assert sch.func_working_on != sch.mod.get_global_var("scale")
    assert sch.mod[sch.func_working_on] is sch.mod["shift"]
    assert sch.get(sch.get_block("shift")).name_hint == "shift"
    with pytest.raises(ValueError, match="no function named 'other'"):
        sch.mod.get_global_var("other")


def test_func_working_on_of_a_module_of_one_function_is_that_function():
    sch = Schedule(engine.parse(ONE_FUNC))
    assert sch.func_working_on.name_hint == "main"


@pytest.mark.parametrize("what", ["block", "loop", "value"])
def test_a_removed_handle_cannot_be_used_again(what):
    """remove_rv forgets the handle only: the program and the trace stay, and using the
    handle is refused with a sentence saying it was removed (an IndexError, as TVM's)."""
    mod = engine.parse(ONE_FUNC)
    sch = Schedule(mod)
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    rv = {"block": block, "loop": i,
          "value": sch.sample_categorical([1, 2], [0.5, 0.5])}[what]
    before, steps = sch.mod, len(sch.trace.insts)
    sch.remove_rv(rv)
    assert sch.mod is before and len(sch.trace.insts) == steps
    with pytest.raises(UnknownHandleError, match="was removed from the schedule with "
                                                 "remove_rv") as info:
        sch.get(rv)
    assert isinstance(info.value, IndexError) and isinstance(info.value, ScheduleError)
    if what == "loop":
        with pytest.raises(UnknownHandleError):
            sch.split(rv, [2, 4])
        sch.split(j, [2, 4])  # the other handles still work
    if what == "block":
        assert sch.get(sch.get_block("B")).name_hint == "B"  # a new handle of the block
    with pytest.raises(UnknownHandleError):
        sch.remove_rv(rv)
    again = Schedule(mod)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert engine.structural_equal(again.mod, sch.mod)


def test_a_handle_of_another_schedule_is_an_index_error_too():
    mod = engine.parse(ONE_FUNC)
    other = Schedule(mod).get_block("B")
    with pytest.raises(IndexError, match="belongs to another schedule"):
        Schedule(mod).get(other)


def test_error_render_levels_write_tvms_sentences():
    mod = engine.parse(ONE_FUNC)
    detail = tvm.s_tir.Schedule(mod)
    with pytest.raises(tvm.s_tir.ScheduleError) as info:
        detail.get_sblock("wrong_name")
    (msg,) = info.value.args
    assert "no block named 'wrong_name'" in msg  # the engine's sentence, kept
    assert "Cannot find a block with the name: wrong_name" in msg
    fast = tvm.s_tir.Schedule(mod, error_render_level="fast")
    with pytest.raises(ScheduleError) as info:
        fast.get_block("wrong_name")
    assert info.value.args == ("ScheduleError: Cannot find a block with the specified name",)
    assert "no block named" in info.value.rule  # the parts stay
    none = tvm.s_tir.Schedule(mod, error_render_level="none")
    with pytest.raises(ScheduleError) as info:
        none.get_block("wrong_name")
    assert info.value.args == ("ScheduleError: (not rendered)",)


def test_render_levels_apply_to_every_primitive_and_to_copies():
    mod = engine.parse(ONE_FUNC)
    sch = tvm.s_tir.Schedule(mod, error_render_level="none")
    b = sch.get_sblock("B")
    with pytest.raises(ScheduleError, match=r"\(not rendered\)") as info:
        sch.compute_inline(b)  # B writes the function's output
    assert info.value.rule
    copy = sch.copy()
    assert isinstance(copy, tvm.s_tir.Schedule) and copy.error_render_level == "none"
    with pytest.raises(ScheduleError, match=r"\(not rendered\)"):
        copy.compute_inline(b)
    detail = tvm.s_tir.Schedule(mod)
    with pytest.raises(ScheduleError) as info:
        detail.compute_inline(detail.get_sblock("B"))
    assert str(info.value) == info.value._message()  # the engine's own sentence
    with pytest.raises(ValueError, match="error_render_level must be one of"):
        tvm.s_tir.Schedule(mod, error_render_level="loud")
