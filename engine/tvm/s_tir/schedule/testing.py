"""``tvm.s_tir.schedule.testing``: TVM's two helpers for schedule tests, composed of the
engine's trace export/replay and :func:`engine.tvm.ir.assert_structural_equal`.

* :func:`verify_trace_roundtrip` — the schedule's trace, written as JSON and as Python
  (the ``tvm`` export: TVM 0.27's spelling), replayed on a new schedule of ``mod`` gives the
  same program and writes the same Python;
* :func:`assert_structural_equal_ignore_global_symbol` — two PrimFuncs equal but for their
  names (the engine's counterpart of TVM's ``global_symbol`` attribute).
"""
from __future__ import annotations

from typing import Any

from engine.ir.function import PrimFunc
from engine.schedule.python_trace import apply_python_trace
from engine.tvm.ir import assert_structural_equal

from .schedule import Schedule
from .trace import Trace

__all__ = ["verify_trace_roundtrip", "assert_structural_equal_ignore_global_symbol"]


def verify_trace_roundtrip(sch: Any, mod: Any, *, debug_mask: Any = "all",
                           text_format: Any = ("json", "python")) -> Schedule:
    """Replay ``sch.trace`` on a new ``Schedule(mod)`` through each text format and check the
    replay builds the same program and records the same trace; returns the new schedule."""
    if not isinstance(text_format, str):
        new_sch = None
        for fmt in text_format:
            new_sch = verify_trace_roundtrip(sch, mod, debug_mask=debug_mask, text_format=fmt)
        return new_sch
    trace = sch.trace
    new_sch = Schedule(mod, debug_mask=debug_mask)
    if text_format == "json":
        Trace.from_json(trace.as_json()).apply_to_schedule(new_sch)
    elif text_format == "python":      # read as a trace, never run (engine.schedule.python_trace)
        apply_python_trace(trace.export("tvm"), new_sch)
    else:
        raise ValueError(f"Unknown text format: {text_format!r} (use 'json' or 'python')")
    assert_structural_equal(new_sch.mod, sch.mod)
    assert trace.as_python() == new_sch.trace.as_python(), (
        "the replayed schedule records a different trace:\n"
        f"{trace.as_python()}\n--- replayed ---\n{new_sch.trace.as_python()}")
    return new_sch


def _unnamed(func: Any, name: str) -> Any:
    if not isinstance(func, PrimFunc):
        raise TypeError(f"expected a PrimFunc, got {type(func).__name__}")
    return func.replace(name=name, attrs=tuple((k, v) for k, v in func.attrs
                                               if k != "global_symbol"))


def assert_structural_equal_ignore_global_symbol(func1: Any, func2: Any, *args: Any,
                                                 **kwargs: Any) -> None:
    """:func:`engine.tvm.ir.assert_structural_equal` of two PrimFuncs, their names aside."""
    assert_structural_equal(_unnamed(func1, "main"), _unnamed(func2, "main"), *args, **kwargs)
