"""Small TVM calls the MLC course makes everywhere, through the engine's ``tvm``
namespace: ``sch.trace.show()``, ``rt_lib.mod.time_evaluator("main", tvm.cpu())``,
``tvm.target.Target("llvm", host="llvm")``, ``tvm.ir.assert_structural_equal`` (ValueError
with a message, as TVM's), ``tvm.testing.assert_allclose``, ``sch.get_loops("matmul")``
with a block name, and ``sch.mod["main"]`` after scheduling a bare PrimFunc."""
from __future__ import annotations

import numpy as np
import pytest

from engine import tvm
from engine.tvm.script import tir as T


@T.prim_func
def mm(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
       C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def scheduled():
    sch = tvm.tir.Schedule(mm)
    i, j, k = sch.get_loops("matmul")
    sch.split(i, factors=[None, 8])
    return sch


def arrays():
    rng = np.random.default_rng(1)
    a = rng.random((64, 64)).astype("float32")
    b = rng.random((64, 64)).astype("float32")
    return a, b


def test_get_loops_takes_a_block_name():
    sch = tvm.tir.Schedule(mm)
    assert [str(sch.get(x).loop_var.name) for x in sch.get_loops("matmul")] == ["i", "j", "k"]
    assert len(sch.get_loops(sch.get_block("matmul"))) == 3


def test_a_bare_prim_func_is_main():
    sch = scheduled()
    assert type(sch.mod["main"]).__name__ == "PrimFunc"
    assert "main" in sch.mod.script()


def test_trace_show_prints_tvm_lines(capsys):
    scheduled().trace.show()
    out = capsys.readouterr().out
    assert "def apply_trace(sch" in out
    assert 'sch.get_loops(block=b0)' in out and "sch.split(loop=l1, factors=[None, 8]" in out


def test_the_executables_mod_times_main():
    rt_lib = tvm.compile(scheduled().mod, target="llvm")
    a, b = arrays()
    a_nd, b_nd = tvm.nd.array(a), tvm.nd.array(b)
    c_nd = tvm.nd.array(np.zeros((64, 64), "float32"))
    f_timer = rt_lib.mod.time_evaluator("main", tvm.cpu())
    res = f_timer(a_nd, b_nd, c_nd)
    assert res.mean > 0
    tvm.testing.assert_allclose(c_nd.numpy(), a @ b, rtol=1e-5)
    rt_lib.mod["main"](a_nd, b_nd, c_nd)


def test_target_llvm_with_an_llvm_host():
    target = tvm.target.Target("llvm", host="llvm")
    assert target.kind.name == "llvm"
    rt_lib = tvm.compile(scheduled().mod, target=target)
    a, b = arrays()
    c = tvm.nd.array(np.zeros((64, 64), "float32"))
    rt_lib["main"](tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_assert_structural_equal_raises_value_error_with_a_message():
    sch = scheduled()
    tvm.ir.assert_structural_equal(mm, tvm.tir.Schedule(mm).mod["main"])
    with pytest.raises(ValueError, match="StructuralEqual") as info:
        tvm.ir.assert_structural_equal(mm, sch.mod["main"])
    assert "for" in str(info.value)


def test_testing_assert_allclose():
    tvm.testing.assert_allclose(np.ones(3, "float32"), np.ones(3, "float32") + 1e-9)
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(np.ones(3), np.zeros(3))
