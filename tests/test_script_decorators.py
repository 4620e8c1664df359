"""@T.prim_func / @I.ir_module on Python code written like the course."""
from __future__ import annotations

import inspect

import pytest

import engine
from engine.ir import IRModule, PrimFunc
from engine.script import ScriptError
from engine.script import ir as I
from engine.script import tir as T

from test_script_irgen import MM_RELU_TEXT, mm_relu


@I.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@engine.script.ir_module
class OldSyntax:
    @T.prim_func
    def mm_relu(A: T.Buffer[(128, 128), "float32"], B: T.Buffer[(128, 128), "float32"],
                C: T.Buffer[(128, 128), "float32"]) -> None:
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer([128, 128], dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(Y[vi, vj])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(Y[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


import engine as tvm  # noqa: E402 - course code spells the module decorator tvm.script.ir_module


@tvm.script.ir_module
class CourseSpelling:
    @T.prim_func
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]


@T.prim_func
def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.grid(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)


def test_ir_module_class_like_the_course():
    assert isinstance(MyModule, IRModule)
    assert MyModule.names() == ["mm_relu"]
    assert engine.structural_equal(MyModule, mm_relu())
    assert MyModule.script() == MM_RELU_TEXT


def test_old_buffer_subscript_syntax_and_engine_script_ir_module():
    assert engine.structural_equal(OldSyntax, mm_relu())


def test_prim_func_alone():
    assert isinstance(add_one, PrimFunc)
    assert add_one.name == "add_one"
    assert add_one.script().startswith('@T.prim_func\ndef add_one(A: T.Buffer((8,), "float32")')


def test_prim_func_with_options_and_alias():
    import engine.script.tir as tx

    @tx.prim_func(private=True)
    def f(A: tx.Buffer((4,), "int32")):
        for i in tx.parallel(4):
            A[i] = i * 2

    assert isinstance(f, PrimFunc)
    assert "for i in T.parallel(4):" in f.script()


def test_errors_point_into_the_python_file():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def bad(A: T.Buffer((4,), "float32")):
            for i in T.serial(4):
                A[i] = T.flaot32(0)

    err = info.value
    _, first = inspect.getsourcelines(test_errors_point_into_the_python_file)
    src = inspect.getsource(test_errors_point_into_the_python_file).splitlines()
    idx = next(k for k, l in enumerate(src) if "T.flaot32(0)" in l)
    assert err.line == first + idx
    assert err.col == src[idx].index("T.flaot32") + 1
    assert "unknown dtype 'flaot32'" in err.message
    assert err.filename and err.filename.endswith("test_script_decorators.py")
    assert str(err).startswith(err.filename)


def test_placeholders_are_harmless():
    assert repr(T.grid) == "T.grid"
    assert T.Buffer((4,), "float32") is not None
    assert T.Buffer[(4,), "float32"] is not None
    assert T.axis.remap("SS", [1, 2]) is not None
    assert I.anything is not None


def test_ir_module_needs_prim_funcs():
    with pytest.raises(ScriptError, match="has no @T.prim_func functions"):
        @I.ir_module
        class Empty:
            x = 1


def test_tvm_script_ir_module_spelling_and_two_functions():
    assert CourseSpelling.names() == ["relu0", "linear0"]
    text = CourseSpelling.script()
    assert "T.reads(X[vi, vk], W[vj, vk])" in text   # inferred, Y excluded (reduction)
    assert "T.reads(Y[vi, vj], B[vj])" in text
    assert engine.structural_equal(engine.parse(text), CourseSpelling)


def test_scalar_constructors_outside_a_prim_func_make_constants():
    """TVM's Python writes ``T.int32(32)`` and ``T.bool(True)`` outside TVMScript (its trace
    tests build instructions with them)."""
    from engine.ir import expr as E
    from engine.script import tir as T
    assert isinstance(T.int32(32), E.IntImm) and T.int32(32).value == 32
    assert T.bool(True).dtype == "bool" and T.bool(True).value == 1
    assert isinstance(T.float32(1.5), E.FloatImm) and T.float32(1.5).value == 1.5
