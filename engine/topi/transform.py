"""Layout operators: ``permute_dims`` (transpose) and ``reshape``."""
from __future__ import annotations

import math
from typing import Sequence

from engine import te

from .broadcast import TopiError, compute_nd

__all__ = ["permute_dims", "reshape_shape", "reshape", "transpose"]


def permute_dims(x: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """``numpy.transpose(x, axes)`` (``R.permute_dims``; no axes: reversed)::

        T_transpose[v_ax0, v_ax1] = W[v_ax1, v_ax0]
    """
    nd = x.ndim
    if axes is None:
        axes = tuple(reversed(range(nd)))
    axes = tuple(axes)
    if (len(axes) != nd or any(not isinstance(a, int) or isinstance(a, bool) for a in axes)
            or sorted(a % nd for a in axes if -nd <= a < nd) != list(range(nd))):
        raise TopiError(f"permute_dims: axes {axes!r} are not a permutation of the "
                        f"{nd} dimension(s) of {x.shape}")
    axes = tuple(a % nd for a in axes)
    shape = tuple(x.shape[a] for a in axes)

    def fcompute(*idx):
        src = [None] * nd
        for out_dim, a in enumerate(axes):
            src[a] = idx[out_dim]
        return x[tuple(src)]

    return compute_nd(shape, fcompute, "T_transpose")


def reshape_shape(shape: Sequence[int], new_shape: Sequence[int]) -> tuple[int, ...]:
    """``new_shape`` with its one ``-1`` (if any) worked out; a :class:`TopiError` unless
    it holds as many elements as ``shape`` (numpy's rules, plus ONNX's ``0`` = keep)."""
    size = math.prod(shape)
    out = []
    for d, s in enumerate(new_shape):
        if isinstance(s, bool) or not isinstance(s, int) or s < -1:
            raise TopiError(f"reshape: {tuple(new_shape)} is not a shape (dimension {d} "
                            f"is {s!r})")
        out.append(s)
    if out.count(-1) > 1:
        raise TopiError(f"reshape: {tuple(new_shape)} has more than one -1")
    known = math.prod(s for s in out if s != -1)
    if -1 in out:
        if known == 0 or size % known:
            raise TopiError(f"reshape: {size} elements of {tuple(shape)} do not fill "
                            f"{tuple(new_shape)}")
        out[out.index(-1)] = size // known
    if math.prod(out) != size or 0 in out:
        raise TopiError(f"reshape: {tuple(shape)} has {size} elements but {tuple(new_shape)} "
                        f"holds {math.prod(out)}")
    return tuple(out)


def reshape(x: te.Tensor, new_shape: Sequence[int]) -> te.Tensor:
    """``numpy.reshape`` (row-major): the output's flat index read back in ``x``'s shape::

        T_reshape[v_ax0, v_ax1] = A[0, (v_ax1 // 28) % 28 ...]
    """
    shape = reshape_shape(x.shape, new_shape)

    def fcompute(*idx):
        flat = None
        for d, i in enumerate(idx):
            flat = i if flat is None else flat * shape[d] + i
        src = []
        for s in reversed(x.shape):
            src.append(flat % s if s != 1 else 0)
            flat = flat // s
        return x[tuple(reversed(src))]

    return compute_nd(shape, fcompute, "T_reshape")


def transpose(a: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """TVM's ``topi.transpose``: :func:`permute_dims` (the dimensions reversed by default)."""
    return permute_dims(a, axes)
