"""The results cache (``explorer.sqlite3``): measured results by (program structural hash,
machine fingerprint, kind).  A step that was measured once — by anyone, before a restart — is
answered from here at once.

The cache is disposable: a damaged file is moved aside as ``explorer.sqlite3.corrupt-<time>``
and an empty one is created (the steps are measured again as they are asked for); the saved
traces live in a file of their own and are never touched by this.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import time
from typing import Any

from .sqlite_file import SqliteFile, set_aside

log = logging.getLogger("app.store")

DB_NAME = "explorer.sqlite3"
#: the store prunes to ``max_results`` after every this many stored results (counted, not
#: drawn at random: a random prune made the store's own tests fail now and then)
PRUNE_EVERY = 200

RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    program_hash TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    kind         TEXT NOT NULL,
    result_json  TEXT NOT NULL,
    created      REAL NOT NULL,
    used         REAL NOT NULL,
    PRIMARY KEY (program_hash, fingerprint, kind)
);
CREATE INDEX IF NOT EXISTS results_used ON results(used);
"""


class ResultsCache(SqliteFile):
    """Measured results, least recently used pruned beyond ``max_results``."""

    what = "results cache"

    def __init__(self, path: str, *, max_results: int = 50_000, traces_path: str = ""):
        super().__init__(path, RESULTS_SCHEMA)
        self.max_results = max_results
        self.traces_path = traces_path
        self._puts = 0  # results stored since start: every PRUNE_EVERY-th one prunes

    def repair(self, reason: str) -> None:
        """Move the damaged cache aside and start an empty one (results are re-measured)."""
        aside = set_aside(self.path, "corrupt")
        self.init_file()
        log.warning("The results cache %s was unreadable (%s); it was moved aside to %s and a "
                    "new, empty cache was created (steps are measured again when asked for). "
                    "Saved traces are kept in %s and were not touched.", self.path, reason,
                    aside, self.traces_path or "their own file")

    def get(self, program_hash: str, fingerprint: str, kind: str = "step"
            ) -> dict[str, Any] | None:
        """The stored result dict for this program on this machine, or None."""
        def q(conn: sqlite3.Connection):
            row = conn.execute(
                "SELECT result_json, used FROM results WHERE program_hash=? AND fingerprint=? "
                "AND kind=?", (program_hash, fingerprint, kind)).fetchone()
            if row is None:
                return None
            if time.time() - row[1] > 60:       # keep reads mostly read-only
                conn.execute("UPDATE results SET used=? WHERE program_hash=? AND fingerprint=? "
                             "AND kind=?", (time.time(), program_hash, fingerprint, kind))
            return json.loads(row[0])
        return self.do("reading a result", q, None)

    def put(self, program_hash: str, fingerprint: str, kind: str,
            result: dict[str, Any]) -> bool:
        """Store (or replace) a result; returns False if it could not be stored."""
        text = json.dumps(result, allow_nan=False, default=str)
        now = time.time()

        def q(conn: sqlite3.Connection):
            conn.execute(
                "INSERT OR REPLACE INTO results(program_hash, fingerprint, kind, result_json, "
                "created, used) VALUES (?, ?, ?, ?, ?, ?)",
                (program_hash, fingerprint, kind, text, now, now))
            return True
        ok = self.do("storing a result", q, False)
        if ok:
            self._puts += 1
            if self.max_results and self._puts % PRUNE_EVERY == 0:
                self.prune()
        return ok

    def count(self) -> int:
        return self.do("counting results",
                       lambda c: c.execute("SELECT COUNT(*) FROM results").fetchone()[0], 0)

    def prune(self, keep: int | None = None) -> int:
        """Drop the least recently used results beyond ``keep`` (default ``max_results``)."""
        keep = self.max_results if keep is None else keep

        def q(conn: sqlite3.Connection):
            cur = conn.execute(
                "DELETE FROM results WHERE rowid IN (SELECT rowid FROM results ORDER BY used "
                "DESC LIMIT -1 OFFSET ?)", (keep,))
            return cur.rowcount
        return self.do("pruning results", q, 0)
