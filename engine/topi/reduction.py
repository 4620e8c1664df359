"""Index reductions: ``argmax`` and ``argmin`` (TVM's ``topi.argmax`` / ``topi.argmin``).

Each is a :func:`engine.te.comm_reducer` over a pair — the index and the value — in one
stage of two outputs, ``<data>_red_temp`` (buffers ``<data>_red_temp_v0``, the indices,
and ``_v1``, the values), then a stage ``<data>_red`` copying the indices. For
``argmax(A, axis=1)`` on a ``(1, 32)`` int32 placeholder::

    for ax0, k1 in T.grid(1, 32):
        with T.block("placeholder_red_temp"):
            v_ax0, v_k1 = T.axis.remap("SR", [ax0, k1])
            with T.init():
                placeholder_red_temp_v0[v_ax0] = -1
                placeholder_red_temp_v1[v_ax0] = -2147483648
            v_placeholder_red_temp_v0: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] > placeholder[v_ax0, v_k1]
                or placeholder_red_temp_v1[v_ax0] == placeholder[v_ax0, v_k1]
                and placeholder_red_temp_v0[v_ax0] < v_k1,
                placeholder_red_temp_v0[v_ax0], v_k1)
            v_placeholder_red_temp_v1: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] > placeholder[v_ax0, v_k1],
                placeholder_red_temp_v1[v_ax0], placeholder[v_ax0, v_k1])
            placeholder_red_temp_v0[v_ax0] = v_placeholder_red_temp_v0
            placeholder_red_temp_v1[v_ax0] = v_placeholder_red_temp_v1

A tie between equal values takes the smaller index (``select_last_index=True``: the
larger), as numpy's ``argmax`` does: the result is the best pair of a total order, whatever
the order the elements are met in. The index over several reduced axes is the row-major
position within them.
"""
from __future__ import annotations

from engine import te
from engine.ir import expr as E

from .broadcast import TopiError, compute_nd

__all__ = ["argmax", "argmin"]


def _axes(ndim: int, axis) -> list[int]:
    if axis is None:
        return list(range(ndim))
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = []
    for a in items:
        if not isinstance(a, int) or isinstance(a, bool) or not -ndim <= a < ndim:
            raise TopiError(f"axis {a!r} is out of range for a tensor of {ndim} dimension(s)")
        a = a + ndim if a < 0 else a
        if a in out:
            raise TopiError(f"axis {a} is listed twice")
        out.append(a)
    return sorted(out)


def _reducer(kind: str, select_last_index: bool):
    better = E.GT if kind == "argmax" else E.LT

    def fcombine(x, y):
        pick = E.Or(better(x[1], y[1]), E.And(E.EQ(x[1], y[1]),
                                               (E.GT if select_last_index else E.LT)(x[0], y[0])))
        return (E.Select(pick, x[0], y[0]), E.Select(better(x[1], y[1]), x[1], y[1]))

    def fidentity(t0, t1):
        start = te.min_value(t1) if kind == "argmax" else te.max_value(t1)
        return (E.const(-1, t0), start)

    return te.comm_reducer(fcombine, fidentity, name=kind)


def _arg_reduce(kind: str, data: te.Tensor, axis, keepdims: bool,
                select_last_index: bool) -> te.Tensor:
    if not isinstance(data, te.Tensor):
        raise TopiError(f"{kind}: data must be a te tensor, got {data!r}")
    ndim = len(data.shape)
    if ndim == 0:
        raise TopiError(f"{kind}: cannot reduce a tensor of no dimension")
    real = _axes(ndim, axis)
    if not real:
        raise TopiError(f"{kind}: no axis to reduce")
    red = {a: te.reduce_axis((0, data.shape[a]), f"k{a}") for a in real}
    shape = tuple(1 if d in red else n for d, n in enumerate(data.shape)) if keepdims else \
        tuple(n for d, n in enumerate(data.shape) if d not in red)
    reducer = _reducer(kind, select_last_index)

    def fcompute(*idx):
        it = iter(idx)
        where = []
        for d in range(ndim):
            if d in red:
                where.append(red[d])
                if keepdims:
                    next(it)
            else:
                where.append(next(it))
        flat = None
        for a in real:
            flat = red[a] if flat is None else flat * data.shape[a] + red[a]
        return reducer((flat, data[tuple(where)]), axis=[red[a] for a in real])

    temp_idx, _ = compute_nd(shape, fcompute, f"{data.name}_red_temp")
    return compute_nd(shape, lambda *i: temp_idx[i], f"{data.name}_red")


def argmax(data: te.Tensor, axis=None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """The indices of the largest values along ``axis`` (an int, a list, or None: all)."""
    return _arg_reduce("argmax", data, axis, keepdims, select_last_index)


def argmin(data: te.Tensor, axis=None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """The indices of the smallest values along ``axis`` (an int, a list, or None: all)."""
    return _arg_reduce("argmin", data, axis, keepdims, select_last_index)
