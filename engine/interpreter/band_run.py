"""The numpy band evaluator at run time: a band's lanes (one per iteration of its loop
nest) are evaluated as whole arrays; a store writes all of them at once, a reduction
combines them in the serial order."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.ir.buffer import Buffer

from .errors import out_of_bounds
from .values import Fn


def take_lanes(env: list, saved: list, n: int, sel: np.ndarray) -> None:
    """Restrict every per-lane slot (arrays of length ``n``) to the lanes ``sel``."""
    for sl, v in saved:
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.shape[0] == n:
            env[sl] = v[sel]


def eval_on_lanes(env: list, vslots: list, n: int, sel: np.ndarray, fn: Fn) -> Any:
    """``fn(env)`` evaluated with every per-lane slot restricted to the lanes ``sel``;
    the slots get their full values back afterwards."""
    saved = [(sl, env[sl]) for sl in vslots]
    try:
        take_lanes(env, saved, n, sel)
        return fn(env)
    finally:
        for sl, v in saved:
            env[sl] = v


def band_if_then_else(fc: Fn, fa: Fn, fb: Fn, dt: np.dtype, vslots: list) -> Fn:
    """``if_then_else`` over band lanes: each branch is evaluated only on its lanes."""
    def ite(env):
        c = fc(env)
        if not isinstance(c, np.ndarray):
            return fa(env) if c else fb(env)
        if c.all():
            return fa(env)
        if not c.any():
            return fb(env)
        n = c.shape[0]
        on, off = np.flatnonzero(c), np.flatnonzero(~c)
        a = eval_on_lanes(env, vslots, n, on, fa)
        b = eval_on_lanes(env, vslots, n, off, fb)
        out = np.empty(n, dtype=dt)
        out[on] = a
        out[off] = b
        return out
    return ite


def _lane_index(idx: tuple, n: int, shape: tuple, buf: Buffer, what: str, where: str
                ) -> tuple:
    out = []
    for d, v in enumerate(idx):
        if isinstance(v, np.ndarray):
            if v.size and (v.min() < 0 or v.max() >= shape[d]):
                bad = (v < 0) | (v >= shape[d])
                k = int(np.argmax(bad))
                out_of_bounds(buf, tuple(int(x[k]) if isinstance(x, np.ndarray) else x
                                         for x in idx), what, where)
        elif not 0 <= v < shape[d]:
            out_of_bounds(buf, idx, what, where)
        out.append(v)
    return tuple(np.broadcast_to(v, (n,)) for v in out)


def band_elementwise(env, arr, idx, n, shape, buf, where, mask, init_val, fval,
                     vslots) -> bool:
    """Store ``fval`` of every lane at its own element (after ``init_val`` on the lanes of
    ``mask``); False, storing nothing, when two lanes would write the same element."""
    idx = _lane_index(idx, n, shape, buf, "write", where)
    flat = np.ravel_multi_index(idx, shape) if shape else np.zeros(n, dtype=np.int64)
    if np.unique(flat).size != n:
        return False  # two lanes write the same element: keep the serial order
    if mask is not None:
        if isinstance(mask, np.ndarray):
            on = np.flatnonzero(mask)
            if on.size:
                iv = eval_on_lanes(env, vslots, n, on, init_val)
                arr[tuple(x[on] for x in idx)] = iv
        elif mask:
            arr[idx] = init_val(env)
    arr[idx] = fval(env)
    return True


def band_reduce(env, arr, idx, n, buf, where, mask, init_val, term, op, dt,
                vslots) -> bool:
    """``arr[idx] = arr[idx] op term`` for every lane in order (+ rounds like the loop);
    the accumulator restarts from ``init_val`` at the last lane of ``mask``."""
    shape = arr.shape
    if any(isinstance(v, np.ndarray) for v in idx):
        return False  # pragma: no cover - the plan guarantees a lane-invariant index
    for d, v in enumerate(idx):
        if not 0 <= v < shape[d]:
            out_of_bounds(buf, idx, "write", where)
    terms = term(env)
    terms = np.broadcast_to(np.asarray(terms, dtype=dt), (n,))
    start = None
    last = None  # the last lane that initialises the accumulator, if any
    if isinstance(mask, np.ndarray):
        on = np.flatnonzero(mask)
        if on.size:
            last = on[-1:]
    elif mask is not None and mask:
        last = np.array([n - 1])
    if last is not None:
        start = eval_on_lanes(env, vslots, n, last, init_val)
        if isinstance(start, np.ndarray):
            start = start[0]
        terms = terms[int(last[0]):]
    if start is None:
        start = arr[idx]
    seq_ = np.concatenate((np.asarray([start], dtype=dt), terms))
    if op == "Add":
        if dt.kind == "f":
            acc = np.add.accumulate(seq_)[-1]  # serial order: rounds like the loop
        else:
            acc = seq_.astype(np.int64).sum(dtype=np.int64) if dt.kind != "b" else seq_.any()
            acc = np.asarray(acc).astype(dt)[()]
    elif op == "Max":
        acc = np.maximum.reduce(seq_)
    else:
        acc = np.minimum.reduce(seq_)
    arr[idx] = acc
    return True
