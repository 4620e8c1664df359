"""Hand-built IR used by the backend tests (until/besides the script parser and workloads)."""
from __future__ import annotations

from engine.ir import (Block, BlockRealize, Buffer, BufferStore, For, ForKind,
                       IterType, IterVar, PrimFunc, Range, Var, const)
from engine.ir import expr as E
from engine.ir import substitute

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


def mm_relu_tiled(n=128, dtype="float32", ti=32, tj=64, order="ikj", parallel=True,
                  vectorize=True, relu=True, rows=4):
    """Tiled mm_relu: i0 (parallel) x j0 tiles of ti x tj, decomposed init, inner j1
    vectorized; C computed per tile. Requires n % ti == 0 and n % tj == 0."""
    from engine.ir import seq
    A = Buffer("A", (n, n), dtype)
    B = Buffer("B", (n, n), dtype)
    C = Buffer("C", (n, n), dtype)
    Y = Buffer("Y", (n, n), dtype)
    zero = E.FloatImm(dtype, 0.0)
    i0, j0 = Var("i_0"), Var("j_0")
    vk = ForKind.VECTORIZED if vectorize else ForKind.SERIAL
    pk = ForKind.PARALLEL if parallel else ForKind.SERIAL

    def ij(i1, j1):
        return (i0 * ti + i1, j0 * tj + j1)

    i1, j1 = Var("i_1"), Var("j_1")
    vi, vj = Var("vi"), Var("vj")
    init = loop(i1, ti, loop(j1, tj, block("Y_init", [(vi, n, "S"), (vj, n, "S")], ij(i1, j1),
                                           BufferStore(Y, zero, (vi, vj))), vk))
    i1, j1, k = Var("i_1"), Var("j_1"), Var("k")
    vi, vj, vkk = Var("vi"), Var("vj"), Var("vk")
    upd = block("Y_update", [(vi, n, "S"), (vj, n, "S"), (vkk, n, "R")], ij(i1, j1) + (k,),
                BufferStore(Y, Y[vi, vj] + A[vi, vkk] * B[vkk, vj], (vi, vj)))
    if order == "micro":  # i1 = i1o * rows + i1i; for i1o, k, i1i (unrolled), j1 (vector)
        i1o, i1i = Var("i_1_0"), Var("i_1_1")
        upd = substitute(upd, {i1: i1o * rows + i1i})
        upd_nest = loop(i1o, ti // rows, loop(k, n, loop(i1i, rows, loop(j1, tj, upd, vk),
                                                         ForKind.UNROLLED)))
    elif order == "ikj":
        upd_nest = loop(i1, ti, loop(k, n, loop(j1, tj, upd, vk)))
    else:
        upd_nest = loop(k, n, loop(i1, ti, loop(j1, tj, upd, vk)))
    i1, j1 = Var("i_1"), Var("j_1")
    vi, vj = Var("vi"), Var("vj")
    val = E.Max(Y[vi, vj], zero) if relu else Y[vi, vj]
    cnest = loop(i1, ti, loop(j1, tj, block("C", [(vi, n, "S"), (vj, n, "S")], ij(i1, j1),
                                            BufferStore(C, val, (vi, vj))), vk))
    body = loop(i0, n // ti, loop(j0, n // tj, seq(init, upd_nest, cnest)), pk)
    return PrimFunc("mm_relu", (A, B, C), root(body, (Y,)))


def elementwise(shape, in_dtypes, out_dtype, fn, name="ew", kinds=None, split=None):
    """out[idx] = fn(*[X_k[idx]]) over `shape` as one block.

    kinds: ForKind per loop (default serial). split=(axis, factor): split that loop into
    (outer, inner) with a T.where predicate when the factor does not divide the extent.
    """
    ins = [Buffer(f"X{k}", shape, dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("Out", shape, out_dtype)
    loops = [Var(f"i{d}") for d in range(len(shape))]
    vs = [Var(f"v{d}") for d in range(len(shape))]
    bindings = list(loops)
    pred = TRUE
    outer_inner = None
    if split is not None:
        ax, f = split
        o, i = Var(f"i{ax}_0"), Var(f"i{ax}_1")
        bindings[ax] = o * f + i
        if shape[ax] % f:
            pred = o * f + i < shape[ax]
        outer_inner = (ax, o, i, f)
    val = fn(*[b[tuple(vs)] for b in ins])
    body = block("B", [(v, n, "S") for v, n in zip(vs, shape)], bindings,
                 BufferStore(out, val, tuple(vs)), pred=pred)
    kinds = kinds or [ForKind.SERIAL] * (len(shape) + (1 if split else 0))
    nest_vars, extents = [], []
    for d, n in enumerate(shape):
        if outer_inner is not None and outer_inner[0] == d:
            _, o, i, f = outer_inner
            nest_vars += [o, i]
            extents += [-(-n // f), f]
        else:
            nest_vars.append(loops[d])
            extents.append(n)
    for v, ext, kind in reversed(list(zip(nest_vars, extents, kinds))):
        body = loop(v, ext, body, kind)
    return PrimFunc(name, tuple(ins) + (out,), root(body))


def reduce_sum(n, m, dtype="float32", split_k=None, kinds=None):
    """Out[i] = sum_k X[i, k] with init; optional split of k with predicate."""
    X = Buffer("X", (n, m), dtype)
    out = Buffer("Out", (n,), dtype)
    i, k = Var("i"), Var("k")
    vi, vk = Var("vi"), Var("vk")
    zero = E.FloatImm(dtype, 0.0) if dtype.startswith("float") else E.IntImm(dtype, 0)
    if split_k is None:
        b = block("S", [(vi, n, "S"), (vk, m, "R")], (i, k),
                  BufferStore(out, out[vi] + X[vi, vk], (vi,)),
                  init=BufferStore(out, zero, (vi,)))
        body = loop(i, n, loop(k, m, b))
    else:
        f = split_k
        k0, k1 = Var("k0"), Var("k1")
        pred = (k0 * f + k1 < m) if m % f else TRUE
        b = block("S", [(vi, n, "S"), (vk, m, "R")], (i, k0 * f + k1),
                  BufferStore(out, out[vi] + X[vi, vk], (vi,)),
                  init=BufferStore(out, zero, (vi,)), pred=pred)
        kinds = kinds or [ForKind.SERIAL] * 3
        body = loop(i, n, loop(k0, -(-m // f), loop(k1, f, b, kinds[2]), kinds[1]), kinds[0])
    return PrimFunc("rsum", (X, out), root(body))
