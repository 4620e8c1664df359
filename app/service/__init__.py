"""The measurement service: everything that compiles, checks, times or simulates a program.

The web server never compiles or runs generated code itself; it asks one interface,
:class:`~app.service.measurer.StepMeasurer` (``app.extensions["measurer"]``), which answers
from the store or runs a job on the pool of worker processes.

==========================  =============================================================
``measurer.py``             the web app's one measurement interface (store first, then one
                            shared job per program; non-blocking ``submit_*`` + polling)
``protocol.py``             the wire protocol: ``Job``, ``JobResult``, the pipe messages,
                            the step dict, naming a loop across processes
``pool.py``                 ``MeasurePool``: worker processes behind a bounded queue
``supervisor.py``           one worker process seen from the pool: time limit, crashes,
                            memory, recycling
``tickets.py``              ``Ticket``: a submitted job's queue position and result
``slots.py``                ``TimingSlots``: one slot per core, held by every CPU-heavy phase
``worker.py``               *in the worker process*: its main loop, one job at a time
``actions.py``              *in the worker process*: what a job can ask (compile, check,
                            time, step, source, cache, pattern, roofline, run)
``timing.py``               *in the worker process*: how a step is compiled, checked against
                            numpy and timed (and numpy's own time for the same computation)
==========================  =============================================================

:func:`install` wires the service into a Flask app.
"""
from __future__ import annotations

import atexit
import os
from typing import Any

from ..limits import Limits
from ..store import DB_NAME, Store
from .measurer import StepMeasurer
from .pool import MeasurePool, PoolConfig
from .protocol import (Job, JobResult, PoolClosed, PoolUnavailable, QueueFull, step_dict,
                       step_job)
from .tickets import Ticket

__all__ = ["install", "StepMeasurer", "MeasurePool", "PoolConfig", "Job", "JobResult",
           "Ticket", "QueueFull", "PoolClosed", "PoolUnavailable", "step_job", "step_dict"]


def install(app: Any) -> StepMeasurer:
    """Wire the measurement service into a Flask app; returns its :class:`StepMeasurer`.

    * ``app.extensions["limits"]``   — :class:`app.limits.Limits` from ``EXPLORER_LIMITS``;
    * ``app.extensions["store"]``    — :class:`app.store.Store` in the instance folder
      (``EXPLORER_INSTANCE`` names another folder; ``EXPLORER_STORE=False`` disables it);
    * ``app.extensions["measurer"]`` — a :class:`StepMeasurer` whose pool starts on first
      use (so an app that never measures starts no process). ``EXPLORER_POOL`` (a dict of
      :class:`PoolConfig` fields) overrides the pool settings; ``MEASURE_POOL`` (a callable
      taking the :class:`PoolConfig`, default :class:`MeasurePool`) makes the pool — tests
      give one that runs jobs in their own process.

    A pool of worker processes is closed at interpreter exit.
    """
    limits = Limits.from_config(app.config)
    store = None
    if app.config.get("EXPLORER_STORE", True):
        folder = app.config.get("EXPLORER_INSTANCE") or app.instance_path
        store = Store(os.path.join(folder, DB_NAME))
    config = PoolConfig.from_limits(limits, **dict(app.config.get("EXPLORER_POOL") or {}))
    make = app.config.get("MEASURE_POOL") or MeasurePool

    def make_pool():
        pool = make(config)
        atexit.register(pool.close, 5.0)
        return pool

    measurer = StepMeasurer(make_pool, store)
    app.extensions.update(limits=limits, store=store, measurer=measurer)
    return measurer
