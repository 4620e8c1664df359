"""Matrix products: numpy's ``matmul`` and the course's ``linear`` (``X @ W.T + B``)."""
from __future__ import annotations

from engine import te

from .broadcast import TopiError, broadcast_shape, compute_nd

__all__ = ["matmul_shape", "matmul", "linear"]


def matmul_shape(a: tuple, b: tuple) -> tuple[int, ...]:
    """The shape of ``numpy.matmul(a, b)`` (1-D operands promoted then squeezed, batch
    dimensions broadcast), or a :class:`TopiError` saying which dimensions disagree."""
    if not a or not b:
        raise TopiError(f"matmul: operands must have at least one dimension, got shapes "
                        f"{tuple(a)} and {tuple(b)}")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise TopiError(f"matmul: shapes {tuple(a)} and {tuple(b)} do not fit: the first has "
                        f"{a2[-1]} columns, the second {b2[-2]} rows")
    batch = broadcast_shape(a2[:-2], b2[:-2], "matmul (batch dimensions)")
    out = batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)
    return out


def matmul(a: te.Tensor, b: te.Tensor, name: str = "T_matmul") -> te.Tensor:
    """numpy's ``a @ b`` (the Relax ``R.matmul``); for ``(1, 784) @ (784, 128)``::

        for ax0, ax1, k in T.grid(1, 128, 784):
            with T.block("T_matmul"):
                v_ax0, v_ax1, v_k = T.axis.remap("SSR", [ax0, ax1, k])
                with T.init():
                    T_matmul[v_ax0, v_ax1] = T.float32(0)
                T_matmul[v_ax0, v_ax1] = T_matmul[v_ax0, v_ax1] + A[v_ax0, v_k] * B[v_k, v_ax1]
    """
    if a.dtype != b.dtype:
        raise TopiError(f"matmul: operands have dtypes {a.dtype} and {b.dtype}; they must match")
    shape = matmul_shape(a.shape, b.shape)
    kdim = a.shape[-1]
    k = te.reduce_axis((0, kdim), name="k")
    nbatch = len(shape) - (len(a.shape) > 1) - (len(b.shape) > 1)

    def batch_index(t: te.Tensor, batch: tuple) -> tuple:
        tb = t.shape[:-2]
        lead = len(batch) - len(tb)
        return tuple(0 if tb[d] == 1 and shape[lead + d] != 1 else batch[lead + d]
                     for d in range(len(tb)))

    def fcompute(*idx):
        batch, rest = idx[:nbatch], list(idx[nbatch:])
        row = rest.pop(0) if len(a.shape) > 1 else None
        col = rest.pop(0) if len(b.shape) > 1 else None
        ai = (k,) if len(a.shape) == 1 else batch_index(a, batch) + (row, k)
        bi = (k,) if len(b.shape) == 1 else batch_index(b, batch) + (k, col)
        return te.sum(a[ai] * b[bi], axis=k)

    if not shape:  # vector . vector: a scalar, kept as a one-element tensor
        raise TopiError("matmul: the product of two vectors is a scalar; reshape one "
                        "operand to a matrix, e.g. (1, n)")
    return compute_nd(shape, fcompute, name)


def linear(x: te.Tensor, w: te.Tensor, b: te.Tensor | None = None) -> te.Tensor:
    """The course's ``linear0``: ``Y = X @ W.T`` (W is ``(out, in)``, as PyTorch keeps it)
    then ``Z = Y + B``::

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
    """
    if x.ndim != 2 or w.ndim != 2:
        raise TopiError(f"linear: X and W must be matrices, got shapes {x.shape} and {w.shape}")
    (n, kin), (m, kw) = x.shape, w.shape
    if kin != kw:
        raise TopiError(f"linear: X {x.shape} has {kin} columns but W {w.shape} has {kw}; "
                        "W is (out_features, in_features)")
    k = te.reduce_axis((0, kin), name="k")
    y = te.compute((n, m), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="Y")
    if b is None:
        return y
    if b.shape != (m,):
        raise TopiError(f"linear: B must have shape ({m},), got {b.shape}")
    return te.compute((n, m), lambda i, j: y[i, j] + b[j], name="Z")
