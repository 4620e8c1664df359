"""The saved-traces file (``saved-traces.sqlite3``): named sessions under a short random id.

Saved traces are what users cannot measure again, so this file is kept apart from the
disposable results cache and is never replaced by an empty one:

* **damaged** (found on open or while in use): the file is renamed to
  ``saved-traces.sqlite3.damaged-<time>`` and kept; every saved trace still readable in it is
  copied into a fresh file (:mod:`app.store.salvage`), and the log says how many of how many;
* **zero-length**: renamed (with any ``-wal`` beside it) to ``.empty-<time>`` with a logged
  error, never filled in place (the rule is the same for every file of the store, see
  :mod:`app.store.sqlite_file`; for this one the log line is an error);
* **the old single-file store** (``explorer.sqlite3`` before the split, which held results
  and traces together): the first time a saved-traces file is created, the traces of that
  file and of any ``explorer.sqlite3.corrupt-*`` it was moved aside as are copied in.  The
  file records that it did (``meta.migrated``), so it happens once; the old table is left
  as it was (an older version of the app still finds its traces there).
"""
from __future__ import annotations

import glob
import json
import logging
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from .salvage import COLUMNS, Salvage, read_traces, read_traces_copy
from .sqlite_file import SqliteFile, is_empty_file, set_aside

log = logging.getLogger("app.store")

TRACES_NAME = "saved-traces.sqlite3"
_MIGRATED = "migrated"

TRACES_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS traces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    workload    TEXT NOT NULL,
    params_json TEXT NOT NULL,
    trace_json  TEXT NOT NULL,
    created     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_name ON traces(name);
CREATE INDEX IF NOT EXISTS traces_created ON traces(created);
"""


@dataclass(frozen=True)
class SavedTrace:
    id: str
    name: str
    workload: str
    params: dict[str, Any]
    trace: Any
    created: float


def _row_to_trace(row) -> SavedTrace | None:
    """The saved trace of a row (None for a row whose parameters are not a JSON object)."""
    tid, name, workload, params_json, trace_json, created = row
    try:
        params = json.loads(params_json)
    except (TypeError, ValueError):
        return None
    try:
        trace = json.loads(trace_json)
    except (TypeError, ValueError):
        trace = trace_json
    return SavedTrace(tid, name, workload, params, trace, created) if isinstance(
        params, dict) else None


def _insert(conn: sqlite3.Connection, rows: list[tuple]) -> int:
    """Insert saved-trace rows (ids already present are kept as they are); how many were new."""
    before = conn.total_changes
    conn.executemany(f"INSERT OR IGNORE INTO traces({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                     rows)
    return conn.total_changes - before


class TracesFile(SqliteFile):
    """The saved traces, in a file of their own."""

    what = "saved traces"

    def __init__(self, path: str):
        super().__init__(path, TRACES_SCHEMA)

    # ------------------------------------------------------------------ damage
    def empty_file_set_aside(self, aside: str) -> None:
        log.error("saved traces: the file %s was empty (0 bytes) where saved traces are kept; "
                  "it was not reused: it is kept as %s and a new, empty file is created. If "
                  "traces had been saved, restore the file from a backup.", self.path, aside)

    def repair(self, reason: str) -> None:
        """Keep the damaged file aside and copy every readable trace into a fresh one."""
        aside = set_aside(self.path, "damaged")
        found = read_traces_copy(aside, os.path.dirname(self.path))
        self.init_file()
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _insert(conn, list(found.rows.values()))
            self._mark_migrated(conn, f"salvaged from {os.path.basename(aside)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        of = (f"{found.expected:,}" if found.exact else
              f"at least {found.expected:,}" if found.expected else "an unknown number")
        log.error("saved traces: recovered %s of %s from a damaged file (%s); the damaged file "
                  "is kept as %s", f"{len(found.rows):,}", of, reason, aside)

    # ------------------------------------------------------------------ migration
    @staticmethod
    def _mark_migrated(conn: sqlite3.Connection, note: str) -> None:
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (_MIGRATED, note))

    def migrate_from(self, old_path: str) -> None:
        """Once per file: copy the saved traces of the old single-file store at ``old_path``
        (and of the copies of it that were moved aside as damaged) into this file."""
        if self.in_memory:
            return
        conn = self.conn()
        if conn.execute("SELECT 1 FROM meta WHERE key=?", (_MIGRATED,)).fetchone():
            return
        # (a zero-length old file holds nothing, and is left for the results cache to set aside)
        sources = [old_path] if os.path.exists(old_path) and not is_empty_file(old_path) else []
        sources += sorted(p for p in glob.glob(glob.escape(old_path) + ".corrupt-*")
                          if not p.endswith(("-wal", "-shm")))
        copied: list[tuple[str, int, Salvage]] = []
        rows: dict[str, tuple] = {}
        for source in sources:
            found = (read_traces(source) if source == old_path
                     else read_traces_copy(source, os.path.dirname(self.path)))
            for row in found.rows.values():
                rows.setdefault(row[0], row)
            copied.append((source, len(found.rows), found))
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM meta WHERE key=?", (_MIGRATED,)).fetchone():
                conn.execute("ROLLBACK")           # another process got here first
                return
            added = _insert(conn, list(rows.values()))
            self._mark_migrated(conn, f"from {os.path.basename(old_path)} at {time.time():.0f}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for source, n, found in copied:
            if found.expected:
                log.warning("saved traces: copied %s of %s saved traces from the old store "
                            "file %s into %s", f"{n:,}", f"{found.expected:,}", source,
                            self.path)
        if added:
            log.warning("saved traces: %s saved traces are now kept in %s", f"{added:,}",
                        self.path)

    # ------------------------------------------------------------------ traces
    def save(self, name: str, workload: str, params: dict[str, Any], trace: Any) -> str | None:
        """Save a named trace; returns its id (url-safe, unguessable), or None on failure."""
        tid = secrets.token_urlsafe(9)
        params_text = json.dumps(params, sort_keys=True)
        trace_text = trace if isinstance(trace, str) else json.dumps(trace)

        def q(conn: sqlite3.Connection):
            conn.execute(f"INSERT INTO traces({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                         (tid, name, workload, params_text, trace_text, time.time()))
            return tid
        return self.do("saving a trace", q, None)

    def get(self, trace_id: str) -> SavedTrace | None:
        def q(conn: sqlite3.Connection):
            row = conn.execute(f"SELECT {COLUMNS} FROM traces WHERE id=?",
                               (trace_id,)).fetchone()
            return None if row is None else _row_to_trace(row)
        return self.do("reading a trace", q, None)

    def list(self, workload: str | None = None, name: str | None = None,
             limit: int = 100) -> list[SavedTrace]:
        """Newest first; optionally only one workload's or one name's."""
        sql = f"SELECT {COLUMNS} FROM traces"
        where, args = [], []
        if workload is not None:
            where.append("workload=?")
            args.append(workload)
        if name is not None:
            where.append("name=?")
            args.append(name)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC LIMIT ?"
        args.append(int(limit))

        def q(conn: sqlite3.Connection):
            return [t for t in map(_row_to_trace, conn.execute(sql, args)) if t is not None]
        return self.do("listing traces", q, [])

    def delete(self, trace_id: str) -> bool:
        return self.do("deleting a trace", lambda c: c.execute(
            "DELETE FROM traces WHERE id=?", (trace_id,)).rowcount > 0, False)
