"""Hand-built IR used by the backend tests (until/besides the script parser and workloads)."""
from __future__ import annotations

from engine.ir import (Block, BlockRealize, Buffer, BufferRegion, BufferStore, For, ForKind,
                       IterType, IterVar, PrimFunc, Range, Var, const)
from engine.ir import expr as E

TRUE = E.IntImm("bool", 1)


def root(body, alloc=()):
    return BlockRealize((), TRUE, Block((), (), (), "root", body, None, tuple(alloc)))


def loop(var, extent, body, kind=ForKind.SERIAL, lo=0, ann=()):
    return For(var, const(lo, var.dtype), const(extent, var.dtype), kind, body, ann)


def block(name, axes, values, body, init=None, pred=TRUE, alloc=(), reads=(), writes=()):
    """axes: list of (Var, extent, "S"/"R")."""
    ivs = tuple(IterVar(v, Range(0, ext), IterType.SPATIAL if t == "S" else IterType.REDUCE)
                for v, ext, t in axes)
    return BlockRealize(tuple(values), pred,
                        Block(ivs, tuple(reads), tuple(writes), name, body, init, tuple(alloc)))


def mm_relu(n=128, m=None, k=None, dtype="float32", schedule="naive", split=4):
    """The course's mm_relu: Y = A @ B; C = max(Y, 0).

    schedule: "naive" | "course" (split j by `split`, reorder j0,k,j1, C under j0,
    decomposed init) | "tiled" (i0 parallel, tile 32x64, inner j vectorized by 8... ).
    """
    m = m or n
    k = k or n
    A = Buffer("A", (n, k), dtype)
    B = Buffer("B", (k, m), dtype)
    C = Buffer("C", (n, m), dtype)
    Y = Buffer("Y", (n, m), dtype)
    zero = E.FloatImm(dtype, 0.0)
    if schedule == "naive":
        i, j, kk = Var("i"), Var("j"), Var("k")
        vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
        yb = block("Y", [(vi, n, "S"), (vj, m, "S"), (vk, k, "R")], (i, j, kk),
                   BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
                   init=BufferStore(Y, zero, (vi, vj)))
        i2, j2, vi2, vj2 = Var("i"), Var("j"), Var("vi"), Var("vj")
        cb = block("C", [(vi2, n, "S"), (vj2, m, "S")], (i2, j2),
                   BufferStore(C, E.Max(Y[vi2, vj2], zero), (vi2, vj2)))
        body = E  # placeholder
        from engine.ir import seq
        body = seq(loop(i, n, loop(j, m, loop(kk, k, yb))),
                   loop(i2, n, loop(j2, m, cb)))
        return PrimFunc("mm_relu", (A, B, C), root(body, (Y,)))
    if schedule == "course":
        from engine.ir import seq
        i, j0, kk, j1, ax = Var("i"), Var("j_0"), Var("k"), Var("j_1"), Var("ax0")
        vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
        f = split
        init = block("Y_init", [(vi, n, "S"), (vj, m, "S")], (i, j0 * f + j1),
                     BufferStore(Y, zero, (vi, vj)))
        vi_, vj_, vk_ = Var("vi"), Var("vj"), Var("vk")
        upd = block("Y_update", [(vi_, n, "S"), (vj_, m, "S"), (vk_, k, "R")],
                    (i, j0 * f + j1, kk),
                    BufferStore(Y, Y[vi_, vj_] + A[vi_, vk_] * B[vk_, vj_], (vi_, vj_)))
        vi2, vj2 = Var("vi"), Var("vj")
        cb = block("C", [(vi2, n, "S"), (vj2, m, "S")], (i, j0 * f + ax),
                   BufferStore(C, E.Max(Y[vi2, vj2], zero), (vi2, vj2)))
        body = loop(i, n, loop(j0, m // f, seq(
            loop(j1, f, init),
            loop(kk, k, loop(j1, f, upd)),
            loop(ax, f, cb))))
        return PrimFunc("mm_relu", (A, B, C), root(body, (Y,)))
    raise ValueError(schedule)
