"""Hand-built GPU kernels (:class:`engine.gpu.kernel.Kernel`) for the GPU back ends' tests:
what the lowering makes of the course's programs, written with the IR's constructors.

* :func:`vector_add` — ``C[bx*128 + tx] = A[..] + B[..]`` (1024 elements, 8 blocks of 128);
* :func:`vector_add_guarded` — the same for a scalar size ``n``, ``if i < n``;
* :func:`window_sum` — ``B[i] = A[i] + A[i+1] + A[i+2]`` through a shared ``A_shared[130]``
  filled cooperatively, a barrier between the fetch and the compute;
* :func:`vector_add_float4` — float32x4 loads and stores (``Ramp`` indices);
* :func:`local_gemm` — a 4-wide row of C per thread in a local array, unrolled loops;
* :func:`math_kernel` — exp, sqrt, fma, max, min, floor, sigmoid on float32;
* :func:`tile_2d` — a 2-D block (threadIdx.x/y, blockIdx.x/y) transposing a matrix
  through a shared tile;
* :func:`vector_add_ptx` — a hand-written PTX vector add (``c[i] = a[i] + b[i]`` for
  ``i < n``) for the toolchain's and the driver's tests.
"""
from __future__ import annotations

from engine.gpu.kernel import Kernel, barrier
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

I32 = "int32"


def _i(v: int) -> E.IntImm:
    return E.IntImm(I32, v)


def _thread(axis: str) -> E.Var:
    return E.Var(axis.replace(".", "_"), I32)


def _load(buf: Buffer, idx) -> E.BufferLoad:
    return E.BufferLoad(buf, (idx,))


def _store(buf: Buffer, idx, value) -> S.BufferStore:
    return S.BufferStore(buf, value, (idx,))


def vector_add(n: int = 1024, threads: int = 128) -> Kernel:
    A, B, C = (Buffer(x, (n,), "float32") for x in "ABC")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    i = bx * _i(threads) + tx
    body = _store(C, i, _load(A, i) + _load(B, i))
    return Kernel("main_kernel0", (A, B, C), body, grid=(n // threads, 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


def vector_add_guarded(threads: int = 128, blocks: int = 8) -> Kernel:
    n = E.Var("n", I32)
    A, B, C = (Buffer(x, (n,), "float32") for x in "ABC")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    i = bx * _i(threads) + tx
    body = S.IfThenElse(E.LT(i, n), _store(C, i, _load(A, i) + _load(B, i)))
    return Kernel("vadd_n_kernel", (A, B, C, n), body, grid=(blocks, 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


def window_sum(n: int = 1024, threads: int = 128) -> Kernel:
    A = Buffer("A", (n + 2,), "float32")
    B = Buffer("B", (n,), "float32")
    A_shared = Buffer("A_shared", (threads + 2,), "float32", scope="shared")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    ax0 = E.Var("ax0_0", I32)
    j = ax0 * _i(threads) + tx
    fetch = S.For(ax0, _i(0), _i(2), S.ForKind.SERIAL,
                  S.IfThenElse(E.LT(j, _i(threads + 2)),
                               _store(A_shared, j, _load(A, bx * _i(threads) + j))))
    compute = _store(B, bx * _i(threads) + tx,
                     _load(A_shared, tx) + _load(A_shared, tx + _i(1))
                     + _load(A_shared, tx + _i(2)))
    body = S.SeqStmt((fetch, barrier(), compute))
    return Kernel("window_sum_kernel", (A, B), body, grid=(n // threads, 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx},
                  shared=(A_shared,))


def vector_add_float4(n: int = 4096, threads: int = 128) -> Kernel:
    A, B, C = (Buffer(x, (n,), "float32") for x in "ABC")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    base = (bx * _i(threads) + tx) * _i(4)
    r = E.Ramp(base, _i(1), 4)
    body = _store(C, r, _load(A, r) + _load(B, r))
    return Kernel("vadd4_kernel", (A, B, C), body, grid=(n // (threads * 4), 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


def local_gemm(n: int = 64, width: int = 4) -> Kernel:
    """C = A @ B (n x n): thread tx of block bx computes C[bx, tx*4 : tx*4 + 4] in a local
    array ``C_local[4]``, its initialisation, update and write-back unrolled."""
    A, B, C = (Buffer(x, (n * n,), "float32") for x in "ABC")
    C_local = Buffer("C_local", (width,), "float32", scope="local")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    j0, j1, j2, k = (E.Var(x, I32) for x in ("j_init", "j", "j_w", "k"))
    col = tx * _i(width)
    init = S.For(j0, _i(0), _i(width), S.ForKind.UNROLLED,
                 _store(C_local, j0, E.FloatImm("float32", 0.0)))
    update = S.For(k, _i(0), _i(n), S.ForKind.SERIAL,
                   S.For(j1, _i(0), _i(width), S.ForKind.UNROLLED,
                         _store(C_local, j1, _load(C_local, j1)
                                + _load(A, bx * _i(n) + k) * _load(B, k * _i(n) + col + j1))))
    write = S.For(j2, _i(0), _i(width), S.ForKind.UNROLLED,
                  _store(C, bx * _i(n) + col + j2, _load(C_local, j2)))
    body = S.Allocate(C_local, S.SeqStmt((init, update, write)))
    return Kernel("gemm_local_kernel", (A, B, C), body, grid=(n, 1, 1),
                  block=(n // width, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


def math_kernel(n: int = 256, threads: int = 64) -> Kernel:
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    i = bx * _i(threads) + tx
    x = _load(A, i)
    f = "float32"
    e = E.Call(f, "exp", (x,))
    s = E.Call(f, "sqrt", (E.Call(f, "fabs", (x,)),))
    fm = E.Call(f, "fma", (x, s, e))
    v = E.Max(E.Min(fm, E.FloatImm(f, 100.0)), E.Call(f, "floor", (x,)))
    v = v + E.Call(f, "sigmoid", (x,)) + E.Call(f, "log", (s + E.FloatImm(f, 1.0),))
    return Kernel("math_kernel", (A, B), _store(B, i, v), grid=(n // threads, 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


def call_kernel(op: str, dtype: str = "float32") -> Kernel:
    """B[tx] = op(A[tx]) in one block of 32 threads."""
    A, B = Buffer("A", (32,), dtype), Buffer("B", (32,), dtype)
    tx = _thread("threadIdx.x")
    args = (_load(A, tx),) * E.INTRINSICS[op]
    return Kernel(f"{op}_kernel", (A, B), _store(B, tx, E.Call(dtype, op, args)),
                  grid=(1, 1, 1), block=(32, 1, 1), thread_vars={"threadIdx.x": tx})


def tile_2d(n: int = 64, t: int = 16) -> Kernel:
    """B = A transposed (n x n), through a shared t x t tile (t+1 columns: no bank
    conflicts), a 2-D grid of 2-D blocks."""
    A, B = Buffer("A", (n * n,), "float32"), Buffer("B", (n * n,), "float32")
    tile = Buffer("tile", (t * (t + 1),), "float32", scope="shared")
    bx, by, tx, ty = (_thread(a) for a in ("blockIdx.x", "blockIdx.y", "threadIdx.x",
                                             "threadIdx.y"))
    fetch = _store(tile, ty * _i(t + 1) + tx,
                   _load(A, (by * _i(t) + ty) * _i(n) + bx * _i(t) + tx))
    out = _store(B, (bx * _i(t) + ty) * _i(n) + by * _i(t) + tx,
                 _load(tile, tx * _i(t + 1) + ty))
    return Kernel("transpose_kernel", (A, B), S.SeqStmt((fetch, barrier(), out)),
                  grid=(n // t, n // t, 1), block=(t, t, 1),
                  thread_vars={"blockIdx.x": bx, "blockIdx.y": by, "threadIdx.x": tx,
                               "threadIdx.y": ty},
                  shared=(tile,))


def masked_copy(n: int = 1000, threads: int = 64) -> Kernel:
    """B[i:i+4] = A[i:i+4] * 2 for the lanes with i + lane < n: a vector condition (a
    vectorized loop under a ``T.where``), masked vector loads and stores."""
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    bx, tx = _thread("blockIdx.x"), _thread("threadIdx.x")
    r = E.Ramp((bx * _i(threads) + tx) * _i(4), _i(1), 4)
    cond = E.LT(r, E.Broadcast(_i(n), 4))
    two = E.Broadcast(E.FloatImm("float32", 2.0), 4)
    body = S.IfThenElse(cond, _store(B, r, _load(A, r) * two))
    blocks = (n + threads * 4 - 1) // (threads * 4)
    return Kernel("masked_copy_kernel", (A, B), body, grid=(blocks, 1, 1),
                  block=(threads, 1, 1), thread_vars={"blockIdx.x": bx, "threadIdx.x": tx})


ALL = (vector_add, vector_add_guarded, window_sum, vector_add_float4, local_gemm,
       math_kernel, tile_2d, masked_copy)


#: c[i] = a[i] + b[i] for i < n, written by hand in PTX (``.format(arch=...)``)
_VECTOR_ADD_PTX = """\
.version 7.8
.target {arch}
.address_size 64

.visible .entry vector_add(
    .param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.s32 %rd7, %r1, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}}
"""


def vector_add_ptx(arch: str = "sm_60") -> str:
    """The hand-written PTX vector add for ``arch``."""
    return _VECTOR_ADD_PTX.format(arch=arch)
