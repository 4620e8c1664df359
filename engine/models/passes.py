"""A model's graph through Relax passes (the model page's ``passes=``): the pass steps are
:mod:`engine.relax.transform.steps`; here, where a model's sequence starts.

Pure IR work: nothing here compiles or runs a program.
"""
from __future__ import annotations

from typing import Any

from engine.ir.function import IRModule
from engine.relax.course_graphs import GRAPHS, ewise_graph
from engine.relax.transform.steps import (MAX_PASSES, PASS_STEPS, PassStep, PassStepError,
                                          main_calls, parse_passes, run_passes, runnable,
                                          tir_functions)

__all__ = ["PassStep", "PASS_STEPS", "PassStepError", "parse_passes", "start_graph",
           "run_passes", "runnable", "main_calls", "tir_functions", "GRAPHS", "ewise_graph",
           "MAX_PASSES"]


def start_graph(model: Any, batch: int) -> tuple[IRModule, dict]:
    """The model's graph as written (high-level operators) and the weights ``BindParams``
    binds: the MLP with its trained weights as parameters of ``main``; an ONNX model's graph
    as read (its weights constants already: nothing to bind); a name of
    :data:`engine.relax.course_graphs.GRAPHS`, that graph."""
    if isinstance(model, str):
        if model in GRAPHS:
            return GRAPHS[model](batch)
        raise PassStepError(f"no graph named {model[:40]!r}")
    if model.name == "mlp" and isinstance(model.extra, dict):
        from .course import mlp_graph
        return mlp_graph(batch), dict(model.extra)
    return model.build(batch), {}
