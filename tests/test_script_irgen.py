"""Shared helpers for the script tests: hand-built IR (the course's mm_relu) and hypothesis
strategies producing random, well-typed programs.  (No tests in this module.)"""
from __future__ import annotations

from hypothesis import strategies as st

from engine.ir import (Add, And, Block, BlockRealize, Buffer, BufferLoad, BufferRegion,
                       BufferStore, Cast, Call, Div, EQ, FloatImm, FloorDiv, FloorMod, For,
                       ForKind, GE, GT, IfThenElse, IntImm, IRModule, IterType, IterVar, LE,
                       LT, Max, Min, Mod, Mul, NE, Not, Or, PrimFunc, Range, Select, Sub, Var,
                       binary, seq)

TRUE = IntImm("bool", 1)


def full(buf: Buffer) -> BufferRegion:
    return BufferRegion.full(buf)


def point(buf: Buffer, *idx) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(i, IntImm(i.dtype, 1)) for i in idx))


def mm_relu(n: int = 128) -> IRModule:
    """The course's mm_relu, built node by node (as TVM's parser would build it)."""
    A = Buffer("A", (n, n), "float32")
    B = Buffer("B", (n, n), "float32")
    C = Buffer("C", (n, n), "float32")
    Y = Buffer("Y", (n, n), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    dom = Range(0, n)
    y_block = Block(
        iter_vars=(IterVar(vi, dom, IterType.SPATIAL), IterVar(vj, dom, IterType.SPATIAL),
                   IterVar(vk, dom, IterType.REDUCE)),
        reads=(point(A, vi, vk), point(B, vk, vj)),
        writes=(point(Y, vi, vj),),
        name_hint="Y",
        body=BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(Y, FloatImm("float32", 0), (vi, vj)))
    loop_y = For(i, 0, n, ForKind.SERIAL, For(j, 0, n, ForKind.SERIAL, For(
        k, 0, n, ForKind.SERIAL, BlockRealize((i, j, k), TRUE, y_block))))
    i2, j2 = Var("i"), Var("j")
    vi2, vj2 = Var("vi"), Var("vj")
    c_block = Block(
        iter_vars=(IterVar(vi2, dom, IterType.SPATIAL), IterVar(vj2, dom, IterType.SPATIAL)),
        reads=(point(Y, vi2, vj2),), writes=(point(C, vi2, vj2),), name_hint="C",
        body=BufferStore(C, Max(Y[vi2, vj2], FloatImm("float32", 0)), (vi2, vj2)))
    loop_c = For(i2, 0, n, ForKind.SERIAL, For(j2, 0, n, ForKind.SERIAL,
                                               BlockRealize((i2, j2), TRUE, c_block)))
    root = Block((), (), (), "root", seq(loop_y, loop_c), None, (Y,), ())
    func = PrimFunc("mm_relu", (A, B, C), BlockRealize((), TRUE, root),
                    (("global_symbol", "mm_relu"), ("tir.noalias", True)))
    return IRModule((("mm_relu", func),))


MM_RELU_TEXT = '''# from tvm.script import tir as T
@tvm.script.ir_module
class Module:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        # with T.block("root"):
        Y = T.alloc_buffer((128, 128))
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
'''
