"""The course's mm_relu, naive and scheduled, built directly in IR.

Used by the cache tests and benchmarks so they do not depend on the schedule module:
:func:`mm_relu_naive` is the course program (block ``Y`` with an init, block ``C``);
:func:`mm_relu_course` is the result of the course schedule (split j by 4, reorder
j0, k, j1, reverse_compute_at C under j0, decompose_reduction of Y at k)::

    for i, j_0 in T.grid(n, n // 4):
        for j_1_init in T.serial(4):
            with T.block("Y_init"): Y[vi, vj] = 0
        for k, j_1 in T.grid(n, 4):
            with T.block("Y_update"): Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0 in T.serial(4):
            with T.block("C"): C[vi, vj] = T.max(Y[vi, vj], 0)
"""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.function import IRModule, PrimFunc

_ATTRS = (("global_symbol", "mm_relu"), ("tir.noalias", True))


def _iv(name: str, n: int, kind: S.IterType) -> S.IterVar:
    return S.IterVar(E.Var(name), Range(0, n), kind)


def _region(buf: Buffer, *idx) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def _loop(var: E.Var, n: int, body: S.Stmt) -> S.For:
    return S.For(var, 0, n, S.ForKind.SERIAL, body)


def _buffers(n: int):
    A = Buffer("A", (n, n), "float32")
    B = Buffer("B", (n, n), "float32")
    C = Buffer("C", (n, n), "float32")
    Y = Buffer("Y", (n, n), "float32")
    return A, B, C, Y


def _y_block(A, B, Y, n, name="Y", with_init=True):
    vi, vj, vk = (_iv("vi", n, S.IterType.SPATIAL), _iv("vj", n, S.IterType.SPATIAL),
                  _iv("vk", n, S.IterType.REDUCE))
    i, j, k = vi.var, vj.var, vk.var
    body = S.BufferStore(Y, Y[i, j] + A[i, k] * B[k, j], (i, j))
    init = S.BufferStore(Y, E.FloatImm("float32", 0.0), (i, j)) if with_init else None
    reads = ((_region(Y, i, j),) if not with_init else ()) + (_region(A, i, k), _region(B, k, j))
    return S.Block((vi, vj, vk), reads, (_region(Y, i, j),), name, body, init)


def _c_block(C, Y, n):
    vi, vj = _iv("vi", n, S.IterType.SPATIAL), _iv("vj", n, S.IterType.SPATIAL)
    i, j = vi.var, vj.var
    body = S.BufferStore(C, E.Max(Y[i, j], E.FloatImm("float32", 0.0)), (i, j))
    return S.Block((vi, vj), (_region(Y, i, j),), (_region(C, i, j),), "C", body)


def _root(body: S.Stmt, Y: Buffer) -> S.BlockRealize:
    root = S.Block((), (), (), "root", body, None, (Y,))
    return S.BlockRealize((), E.IntImm("bool", 1), root)


def mm_relu_naive(n: int = 128) -> IRModule:
    A, B, C, Y = _buffers(n)
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    y = S.BlockRealize((i, j, k), E.IntImm("bool", 1), _y_block(A, B, Y, n))
    nest1 = _loop(i, n, _loop(j, n, _loop(k, n, y)))
    i2, j2 = E.Var("i"), E.Var("j")
    c = S.BlockRealize((i2, j2), E.IntImm("bool", 1), _c_block(C, Y, n))
    nest2 = _loop(i2, n, _loop(j2, n, c))
    f = PrimFunc("mm_relu", (A, B, C), _root(S.seq(nest1, nest2), Y), _ATTRS)
    return IRModule.from_funcs(f)


def mm_relu_course(n: int = 128, factor: int = 4) -> IRModule:
    if n % factor:
        raise ValueError(f"n={n} must be a multiple of the split factor {factor}")
    A, B, C, Y = _buffers(n)
    i, j0, j1i, k, j1, ax0 = (E.Var("i"), E.Var("j_0"), E.Var("j_1_init"), E.Var("k"),
                              E.Var("j_1"), E.Var("ax0"))
    # Y_init
    vi, vj = _iv("vi", n, S.IterType.SPATIAL), _iv("vj", n, S.IterType.SPATIAL)
    init_blk = S.Block((vi, vj), (), (_region(Y, vi.var, vj.var),), "Y_init",
                       S.BufferStore(Y, E.FloatImm("float32", 0.0), (vi.var, vj.var)))
    init = _loop(j1i, factor, S.BlockRealize((i, j0 * factor + j1i), E.IntImm("bool", 1),
                                             init_blk))
    upd_blk = _y_block(A, B, Y, n, name="Y_update", with_init=False)
    upd = _loop(k, n, _loop(j1, factor, S.BlockRealize((i, j0 * factor + j1, k),
                                                        E.IntImm("bool", 1), upd_blk)))
    cblk = _c_block(C, Y, n)
    cst = _loop(ax0, factor, S.BlockRealize((i, j0 * factor + ax0), E.IntImm("bool", 1), cblk))
    nest = _loop(i, n, _loop(j0, n // factor, S.seq(init, upd, cst)))
    f = PrimFunc("mm_relu", (A, B, C), _root(nest, Y), _ATTRS)
    return IRModule.from_funcs(f)
