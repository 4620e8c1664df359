"""The store: measured results and saved traces, in two SQLite files (WAL mode) of the
instance folder.

* ``explorer.sqlite3`` — the **results cache** (:mod:`app.store.results`): measured results
  keyed by (program structural hash, machine fingerprint, kind).  Disposable: when damaged it
  is moved aside and rebuilt empty.
* ``saved-traces.sqlite3`` — the **saved traces** (:mod:`app.store.traces`): named sessions
  (name, workload, params, trace JSON, created) under a short random id, so a saved link keeps
  working across restarts.  When damaged, every readable trace is salvaged into a fresh file
  and the damaged one is kept; a zero-length file is kept aside, never reused.

The two files never share a fate: damage to one leaves the other as it is.  A store created
by an older version (one file holding both) has its saved traces copied into the new file on
the first start (once).  Rules for both files (:mod:`app.store.sqlite_file`): the folder is
created if missing; one connection per thread with ``busy_timeout``; a file that cannot be
used at all falls back to memory for the life of the process.  The store never raises to the
web app for a storage problem: reads answer "not found", writes are logged and dropped.

Use::

    store = Store.for_app(app)                       # or Store(path_of_the_results_cache)
    fp = machine_fingerprint()
    store.put_result(program_hash, fp, "step", result_dict)
    store.get_result(program_hash, fp, "step")       # -> dict or None
    tid = store.save_trace("my tiling", "mm_relu", {"n": 128}, trace_json)
    store.get_trace(tid)                             # -> SavedTrace or None
"""
from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any

from .results import DB_NAME, ResultsCache
from .traces import TRACES_NAME, SavedTrace, TracesFile

log = logging.getLogger("app.store")


class Store:
    """Thread-safe store of results and saved traces.  Every public method is safe to call
    from any thread and never raises for a storage problem."""

    def __init__(self, path: str, *, max_results: int = 50_000,
                 traces_path: str | None = None):
        """``path``: the results cache; ``traces_path``: the saved traces (by default
        ``saved-traces.sqlite3`` in the same folder)."""
        path = os.path.abspath(path)
        traces_path = os.path.abspath(traces_path or os.path.join(os.path.dirname(path),
                                                                  TRACES_NAME))
        # The saved traces first: a store of an older version (one file) is read for its
        # traces before the results cache may find it damaged and move it aside.
        self.traces = TracesFile(traces_path)
        self.traces.open()
        try:
            self.traces.migrate_from(path)
        except (sqlite3.Error, OSError) as e:
            log.error("saved traces: copying the saved traces of the old store %s failed (%s); "
                      "they are still in that file.", path, e)
        self.results = ResultsCache(path, max_results=max_results, traces_path=traces_path)
        self.results.open()

    @classmethod
    def for_app(cls, app: Any, filename: str = DB_NAME, **kw: Any) -> "Store":
        """The store in the Flask app's instance folder (``app.instance_path``)."""
        return cls(os.path.join(app.instance_path, filename), **kw)

    # ------------------------------------------------------------------ state
    @property
    def path(self) -> str:
        """The results cache's file."""
        return self.results.path

    @property
    def traces_path(self) -> str:
        """The saved traces' file."""
        return self.traces.path

    @property
    def max_results(self) -> int:
        return self.results.max_results

    @property
    def in_memory(self) -> bool:
        """Whether either file fell back to memory (lost at exit)."""
        return self.results.in_memory or self.traces.in_memory

    @property
    def recoveries(self) -> int:
        """How many times a damaged file was repaired since start (both files)."""
        return self.results.recoveries + self.traces.recoveries

    # ------------------------------------------------------------------ measured results
    def get_result(self, program_hash: str, fingerprint: str, kind: str = "step"
                   ) -> dict[str, Any] | None:
        """The stored result dict for this program on this machine, or None."""
        return self.results.get(program_hash, fingerprint, kind)

    def put_result(self, program_hash: str, fingerprint: str, kind: str,
                   result: dict[str, Any]) -> bool:
        """Store (or replace) a result; returns False if it could not be stored."""
        return self.results.put(program_hash, fingerprint, kind, result)

    def count_results(self) -> int:
        return self.results.count()

    def prune(self, keep: int | None = None) -> int:
        """Drop the least recently used results beyond ``keep`` (default ``max_results``)."""
        return self.results.prune(keep)

    # ------------------------------------------------------------------ saved traces
    def save_trace(self, name: str, workload: str, params: dict[str, Any], trace: Any
                   ) -> str | None:
        """Save a named trace; returns its id (url-safe, unguessable), or None on failure."""
        return self.traces.save(name, workload, params, trace)

    def get_trace(self, trace_id: str) -> SavedTrace | None:
        return self.traces.get(trace_id)

    def list_traces(self, workload: str | None = None, name: str | None = None,
                    limit: int = 100) -> list[SavedTrace]:
        """Newest first; optionally only one workload's or one name's."""
        return self.traces.list(workload, name, limit)

    def delete_trace(self, trace_id: str) -> bool:
        return self.traces.delete(trace_id)

    # ------------------------------------------------------------------ misc
    def journal_mode(self) -> str:
        """The results cache's journal mode (``wal``)."""
        return self.results.do("reading the journal mode",
                               lambda c: str(c.execute("PRAGMA journal_mode").fetchone()[0]),
                               "?")

    def close(self) -> None:
        """Close this thread's connections (others close when their threads end)."""
        self.results.close()
        self.traces.close()
