"""``tvm.meta_schedule`` as the course calls it, over the engine's tuner (:mod:`engine.tune`,
its ``auto`` space; for a CUDA target its GPU space, ranked by measured time on a GPU or by
the model without one).

TVM 0.27's form::

    database = ms.tune_tir(mod=MyModule, target="llvm --num-cores=1", max_trials_global=64,
                           num_trials_per_iter=64, work_dir="./tune_tmp")
    sch = ms.tir_integration.compile_tir(database, MyModule, "llvm --num-cores=1")

and the course's 2022 form, which returns the best schedule itself::

    sch = ms.tune_tir(mod=MyModule, target="nvidia/tesla-p100",
                      config=ms.TuneConfig(max_trials_global=64, num_trials_per_iter=64),
                      work_dir="./tune_tmp", task_name="main")

``space=ms.space_generator.ScheduleFn(stochastic_schedule_mm)`` (or the function itself,
as TVM accepts) searches the course's own stochastic schedule function (the engine's
``FunctionSpace``) instead of the default rules (TVM's ``"post-order-apply"``: the engine's
``auto`` space).

``work_dir`` holds the tuning database (``database.sqlite3``): a later run with the same
program and target reuses its measurements, as MetaSchedule's JSON database does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from engine.tune.space import FunctionSpace

__all__ = ["tune_tir", "TuneConfig", "TuneDatabase", "tir_integration", "space_generator"]


class ScheduleFn(FunctionSpace):
    """TVM's ``ms.space_generator.ScheduleFn(sch_fn)``: a search space made by a Python
    function that samples and schedules (the engine's :class:`FunctionSpace`). TVM's
    ``sch_rules``, ``postprocs`` and ``mutator_probs`` are the post-order-apply generator's
    rules; for a schedule function only their defaults are accepted."""

    def __init__(self, sch_fn: Any, sch_rules: Any = "from-target", postprocs: Any = "from-target",
                 mutator_probs: Any = "from-target"):
        for name, value in (("sch_rules", sch_rules), ("postprocs", postprocs),
                            ("mutator_probs", mutator_probs)):
            if value not in (None, "from-target"):
                raise ValueError(f"ScheduleFn's {name} is not supported here: the engine "
                                 "tunes a schedule function by its own sampling and "
                                 "mutations only (leave it at its default)")
        super().__init__(sch_fn)


class _SpaceGenerator:
    """``ms.space_generator``: ``ScheduleFn`` (a function's space); ``PostOrderApply`` is
    the default (``space="post-order-apply"``), the engine's ``auto`` rules."""

    ScheduleFn = ScheduleFn


space_generator = _SpaceGenerator()

#: TVM's names of the default space
_DEFAULT_SPACES = ("post-order-apply", "auto")


def _space(space: Any) -> Any:
    """What ``tune_tir(space=...)`` names, as the engine's tuner takes it."""
    if space is None or (isinstance(space, str) and space in _DEFAULT_SPACES):
        return "auto"
    if isinstance(space, FunctionSpace):
        return space
    if callable(space):   # TVM wraps a bare function in ScheduleFn
        return ScheduleFn(space)
    raise ValueError(f"tune_tir's space must be 'post-order-apply', a ScheduleFn or a "
                     f"schedule function, got {space!r}")


@dataclass(frozen=True)
class TuneConfig:
    """The 2022 API's tuning budget (``ms.TuneConfig``)."""

    max_trials_global: int = 64
    num_trials_per_iter: int = 64
    max_trials_per_task: int | None = None
    strategy: str = "evolutionary"


class TuneDatabase:
    """What ``tune_tir`` returns in TVM 0.27's API: the search's result, read back with
    :func:`tir_integration.compile_tir` (``query_schedule``)."""

    def __init__(self, result: Any, mod: Any, target: Any):
        self.result = result
        self.mod = mod
        self.target = target

    def query_schedule(self, mod: Any = None, target: Any = None, workload_name: str = "main"):
        sch = self.result.best_schedule
        if sch is None:
            raise RuntimeError("the search found no correct schedule (every candidate was "
                               "refused or wrong); tune with more trials")
        return sch

    def __len__(self) -> int:
        return len(self.result.records) + len(self.result.prior)

    def __repr__(self) -> str:
        best = self.result.best_gflops
        return (f"<TuneDatabase {len(self)} records; best "
                f"{'none' if best is None else f'{best:.1f} GFLOP/s'}; {self.result.timing}>")


def _target_string(target: Any) -> Any:
    if target is None:
        return None
    text = str(target)
    return None if text.split(" ", 1)[0] == "llvm" else text


def tune_tir(mod: Any, target: Any = None, work_dir: str | None = None,
             max_trials_global: int | None = None, num_trials_per_iter: int | None = None,
             config: TuneConfig | None = None, task_name: str = "main", seed: int | None = None,
             space: Any = "post-order-apply", **_ignored: Any):
    """Tune ``mod``'s function for ``target`` with the engine's ``auto`` space (or
    ``space``: a :class:`ScheduleFn` or a schedule function). With
    ``config`` (the course's 2022 call) the best :class:`engine.Schedule` is returned; else
    a :class:`TuneDatabase` for :func:`tir_integration.compile_tir`."""
    from engine.ir import IRModule, PrimFunc
    from engine.tune import tune
    trials = (config.max_trials_global if config is not None
              else max_trials_global if max_trials_global is not None else 64)
    func_name = None
    if isinstance(mod, IRModule):
        names = mod.prim_func_names()
        func_name = task_name if task_name in names else names[0]
    elif not isinstance(mod, PrimFunc):
        raise TypeError(f"tune_tir tunes an IRModule or a PrimFunc, got {type(mod).__name__}")
    database = None
    if work_dir is not None:
        os.makedirs(work_dir, exist_ok=True)
        database = os.path.join(work_dir, "database.sqlite3")
    result = tune(mod, space=_space(space), trials=int(trials),
                  strategy=config.strategy if config is not None else "evolutionary",
                  seed=0 if seed is None else seed, func_name=func_name, database=database,
                  target=_target_string(target))
    db = TuneDatabase(result, mod, target)
    return db.query_schedule() if config is not None else db


class _TirIntegration:
    """``ms.tir_integration``: ``compile_tir(database, mod, target)`` -> the best Schedule."""

    @staticmethod
    def compile_tir(database: TuneDatabase, mod: Any = None, target: Any = None):
        if not isinstance(database, TuneDatabase):
            raise TypeError("compile_tir takes the database tune_tir returned")
        return database.query_schedule(mod, target)

    tune_tir = staticmethod(tune_tir)


tir_integration = _TirIntegration()
