"""engine.tune — automatic scheduling: search a space of schedules for the fastest one.

::

    from engine.tune import tune, Database, LocalRunner, DaskRunner
    result = tune(("matmul", {"n": 512}), space="auto", trials=64, strategy="evolutionary",
                  seed=0, database=Database("tuning.sqlite3"))
    result.best_gflops, result.best_trace, result.best_schedule, result.records

Modules: :mod:`.task` (what is tuned, as plain data), :mod:`.space` (function, clicked and
``auto`` spaces; :mod:`.auto` the design-space rules), :mod:`.search` (random and
evolutionary strategies), :mod:`.features` and :mod:`.cost_model` (LightGBM on loop-nest
features), :mod:`.measure` (build, check against numpy, time one candidate),
:mod:`.runner` (local worker processes; :mod:`.local_worker` their loop) and
:mod:`.dask_runner` (a Dask cluster), :mod:`.database` (SQLite), :mod:`.tuner` (``tune``),
:mod:`.cli` (``python -m engine tune``).
"""
from __future__ import annotations

from typing import Any

from .database import Database, TrialRecord
from .measure import MeasureResult
from .runner import InlineRunner, LocalRunner, Runner
from .search import EvolutionConfig
from .space import AutoSpace, DirectiveSpace, FunctionSpace, Space, load_space_file
from .task import TuneError, TuneTask
from .tuner import ProgressEvent, TuneResult, tune

__all__ = ["tune", "TuneResult", "ProgressEvent", "TuneError", "TuneTask", "Database",
           "TrialRecord", "MeasureResult", "Runner", "LocalRunner", "InlineRunner",
           "DaskRunner", "EvolutionConfig", "Space", "FunctionSpace", "DirectiveSpace",
           "AutoSpace", "load_space_file"]


def __getattr__(name: str) -> Any:
    if name == "DaskRunner":  # imports dask only when asked for
        from .dask_runner import DaskRunner
        return DaskRunner
    raise AttributeError(f"module 'engine.tune' has no attribute {name!r}")
