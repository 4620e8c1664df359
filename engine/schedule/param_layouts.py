"""The parameter layouts a trace gives a function, and arrays re-laid out by them.

``transform_layout`` on a buffer parameter changes the function's signature (TVM's rule:
its caller passes arrays of the new layout). :func:`param_layouts` finds, for a trace
replayed on a function, each parameter it re-lays out and the index map (by replaying the
trace up to and just after each ``transform_layout``); :func:`relaid` gives a numpy array
that layout (``new[map(i)] = old[i]``). A model stores its constant weights so, once
(:func:`engine.models.layouts.with_schedules`); the tuner gives a candidate its random
inputs and expected values so (:class:`engine.tune.measure.TaskContext`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from engine.ir.function import IRModule, PrimFunc

from .primitives.index_map_check import _np_eval
from .primitives.layout import function_sizes, parse_index_map, tvm_index_map_from_json
from .state import Schedule

__all__ = ["ParamLayout", "param_layouts", "relaid", "changes_params"]


class ParamLayout(NamedTuple):
    """One ``transform_layout`` of a buffer parameter: its position among the buffer
    parameters, the index map (parameters and expressions) and the new shape."""

    position: int
    params: list
    exprs: list
    shape: tuple


def changes_params(before: PrimFunc, after: PrimFunc) -> bool:
    """Has a schedule replaced a buffer parameter of ``before`` (a new layout)?"""
    return any(a is not b for a, b in zip(before.buffer_params, after.buffer_params))


def _parsed_map(func: PrimFunc, buf, text) -> tuple[list, list]:
    if isinstance(text, str) and text.lstrip().startswith("{"):
        return tvm_index_map_from_json(text)
    dtype = buf.shape[0].dtype if buf.shape else "int32"
    return parse_index_map(text, free=function_sizes(func), dtype=dtype)


def param_layouts(func: PrimFunc, name: str, trace) -> list[ParamLayout]:
    """Each ``transform_layout`` ``trace`` applies to a buffer parameter of ``func``
    (named ``name``), in the trace's order."""
    out = []
    for k, inst in enumerate(trace.insts):
        if inst.kind != "TransformLayout":
            continue
        before = Schedule(IRModule(((name, func),)))
        trace.truncate(k).apply_to_schedule(before)
        after = Schedule(IRModule(((name, func),)))
        trace.truncate(k + 1).apply_to_schedule(after)
        old_params = before.mod[name].buffer_params
        for pos, (old, new) in enumerate(zip(old_params, after.mod[name].buffer_params)):
            if old is not new:
                params, exprs = _parsed_map(before.mod[name], old, inst.attrs[2])
                out.append(ParamLayout(pos, params, exprs,
                                       tuple(int(s) for s in new.const_shape())))
    return out


def relaid(array: np.ndarray, layout: ParamLayout) -> np.ndarray:
    """``array`` in ``layout`` (``new[map(i)] = old[i]``); ValueError when the map pads
    (the new shape has more elements than the array)."""
    if len(layout.params) != array.ndim or int(np.prod(layout.shape)) != array.size:
        raise ValueError(f"the index map takes {array.ndim}-D {array.shape} to "
                         f"{layout.shape} with padding")
    grid = np.indices(array.shape).reshape(array.ndim, -1)
    env = dict(zip(layout.params, grid))
    where = tuple(np.broadcast_to(np.asarray(_np_eval(x, env), dtype=np.int64),
                                  (array.size,)) for x in layout.exprs)
    out = np.empty(layout.shape, array.dtype)
    out[where] = array.reshape(-1)
    return out
