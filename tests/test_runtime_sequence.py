"""engine.runtime.sequence: kernels called back to back by one compiled function — its
input checks send anything not exactly right back to Python before any kernel runs, and a
failing kernel's position and code come back in the return code."""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

import engine
from engine.codegen.target import JIT_LOCK, new_target_machine, set_host_target
from engine.runtime.fastcall import NEEDS_FULL_CHECK
from engine.runtime.sequence import Operand, Step, compile_sequence, failure

ADD = '''
@T.prim_func
def add(A: T.Buffer((3, 4), "float32"), B: T.Buffer((3, 4), "float32"),
        C: T.Buffer((3, 4), "float32")):
    for i, j in T.grid(3, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]
'''


@pytest.fixture(scope="module")
def add():
    return engine.build(engine.parse(ADD))["add"]


@pytest.fixture(scope="module")
def failing():
    """A compiled function of two pointers that returns -7 (a kernel that failed)."""
    text = "define i32 @fails(ptr %a, ptr %b) {\n  ret i32 -7\n}\n"
    with JIT_LOCK:
        mod = llvm.parse_assembly(text)
        set_host_target(mod, 0)
        ee = llvm.create_mcjit_compiler(mod, new_target_machine(0))
        ee.finalize_object()
        address = ee.get_function_address("fails")
    return ee, address


def _frame(args, outs, arena):
    return (tuple(args), *outs, arena)


def test_kernels_run_in_order_on_inputs_outputs_and_the_arena(add):
    # t = a + b (in the arena, at byte 64); out = t + a
    seq = compile_sequence([("float32", (3, 4))] * 2, 1, [
        Step(add.address, (Operand("input", 0), Operand("input", 1), Operand("arena", 64))),
        Step(add.address, (Operand("arena", 64), Operand("input", 0), Operand("output", 0))),
    ])
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 4)).astype("float32") for _ in range(2))
    out = np.zeros((3, 4), np.float32)
    arena = np.zeros(64 + 48, np.uint8)
    frame = _frame([a, engine.nd.array(b)], [out], arena)
    assert seq.call(id(frame)) == 0
    np.testing.assert_array_equal(out, (a + b) + a)
    np.testing.assert_array_equal(arena[64:].view(np.float32).reshape(3, 4), a + b)


@pytest.mark.parametrize("bad", ["dtype", "shape", "strided", "count", "list", "misaligned"])
def test_inputs_not_exactly_right_run_no_kernel(add, bad):
    seq = compile_sequence([("float32", (3, 4))] * 2, 1, [
        Step(add.address, (Operand("input", 0), Operand("input", 1), Operand("output", 0)))])
    a = np.ones((3, 4), np.float32)
    b = np.ones((3, 4), np.float32)
    args = {"dtype": [a, b.astype("float64")], "shape": [a, b.reshape(4, 3)],
            "strided": [a, np.ones((3, 8), np.float32)[:, ::2]], "count": [a],
            "list": [a, b.tolist()],
            "misaligned": [a, np.frombuffer(bytearray(49), np.uint8)[1:].view(np.float32)
                           .reshape(3, 4)]}[bad]
    out = np.full((3, 4), -1, np.float32)
    frame = _frame(args, [out], np.zeros(1, np.uint8))
    assert seq.call(id(frame)) == NEEDS_FULL_CHECK
    assert (out == -1).all()


def test_a_failing_kernel_says_where_and_its_code(add, failing):
    _, fails = failing
    seq = compile_sequence([("float32", (3, 4))] * 2, 1, [
        Step(add.address, (Operand("input", 0), Operand("input", 1), Operand("output", 0))),
        Step(fails, (Operand("input", 0), Operand("output", 0))),
        Step(add.address, (Operand("input", 0), Operand("input", 0), Operand("output", 0)))])
    a = np.full((3, 4), 2, np.float32)
    out = np.zeros((3, 4), np.float32)
    frame = _frame([a, a], [out], np.zeros(1, np.uint8))      # alive during the call
    code = seq.call(id(frame))
    assert code not in (0, NEEDS_FULL_CHECK)
    assert failure(code) == (1, -7)
    assert (out == 4).all()              # the first ran, the third did not
