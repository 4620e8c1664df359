"""The embedded store: measured results and saved traces in one SQLite file (WAL mode).

Measured results are keyed by (program structural hash, machine fingerprint, kind): a step
that was measured once — by anyone, before a restart — is answered from here at once.  Saved
traces are named sessions (name, workload, params, trace JSON, created) under a short random
id, so a saved link keeps working across restarts.

Robustness rules:

* one file, ``<instance folder>/explorer.sqlite3``; the folder is created if missing;
* WAL journal mode (readers never block the writer; a crash loses at most the last commit);
* one connection per thread (waitress serves from a thread pool), ``busy_timeout`` for
  concurrent writers;
* a corrupt store (garbage bytes, a truncated file, a malformed page found later) is moved
  aside as ``explorer.sqlite3.corrupt-<time>`` with a logged warning and a fresh one is
  created; if even that fails the store runs in memory for the life of the process.  The
  store never raises to the web app for a storage problem: reads answer "not found", writes
  are logged and dropped.

Use::

    store = Store.for_app(app)                       # or Store(path)
    fp = machine_fingerprint()
    store.put_result(program_hash, fp, "step", result_dict)
    store.get_result(program_hash, fp, "step")       # -> dict or None
    tid = store.save_trace("my tiling", "mm_relu", {"n": 128}, trace_json)
    store.get_trace(tid)                             # -> SavedTrace or None
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

log = logging.getLogger(__name__)

__all__ = ["Store", "SavedTrace", "machine_fingerprint", "SCHEMA_VERSION", "DB_NAME"]

SCHEMA_VERSION = 1
DB_NAME = "explorer.sqlite3"
#: the store prunes to ``max_results`` after every this many stored results (counted, not
#: drawn at random: a random prune made the store's own tests fail now and then)
PRUNE_EVERY = 200
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_T = TypeVar("_T")

_SCHEMA = """
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


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def _engine_version() -> str:
    try:
        from importlib.metadata import version
        return version("schedule-explorer")
    except Exception:  # noqa: BLE001
        pass
    try:
        import engine
        return str(getattr(engine, "__version__", "0"))
    except Exception:  # noqa: BLE001
        return "0"


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """A digest of the compiler's and the measurement service's source files (``engine/**``
    and ``app/service/**`` .py/.c): a stored result is only reused by the very code that
    measured it, so a fixed miscompile or a changed timing method never shows a stale figure
    (the package version alone does not change between commits)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        import hashlib
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha1()
        files = []
        for top in (os.path.join(root, "engine"), os.path.join(root, "app", "service")):
            for folder, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                files += [os.path.join(folder, n) for n in sorted(names)
                          if n.endswith((".py", ".c"))]
        for path in files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            h.update(os.path.relpath(path, root).encode() + b"\0" + data + b"\0")
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def machine_fingerprint(engine_version: str | None = None) -> str:
    """``cpu model | cores | engine version | llvmlite version | code digest`` — results are
    only reused on the same kind of machine with the same compiler and measuring code."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        import llvmlite
        llvm = llvmlite.__version__
    except Exception:  # noqa: BLE001
        llvm = "?"
    return (f"{_cpu_model()}|{cores} cores|engine {engine_version or _engine_version()}"
            f"|llvmlite {llvm}|code {code_digest()}")


@dataclass(frozen=True)
class SavedTrace:
    id: str
    name: str
    workload: str
    params: dict[str, Any]
    trace: Any
    created: float


def _is_corruption(e: BaseException) -> bool:
    name = getattr(e, "sqlite_errorname", None)
    if name in _CORRUPT:
        return True
    text = str(e).lower()
    return ("not a database" in text or "malformed" in text or "file is encrypted" in text
            or "disk image" in text)


class Store:
    """Thread-safe SQLite store.  Every public method is safe to call from any thread."""

    def __init__(self, path: str, *, max_results: int = 50_000):
        self.path = os.path.abspath(path)
        self.max_results = max_results
        self._puts = 0  # results stored since start: every PRUNE_EVERY-th one prunes
        self.in_memory = False
        self.recoveries = 0
        self._local = threading.local()
        self._lock = threading.RLock()
        self._generation = 0
        self._memory_conn: sqlite3.Connection | None = None
        self._open()

    @classmethod
    def for_app(cls, app: Any, filename: str = DB_NAME, **kw: Any) -> "Store":
        """The store in the Flask app's instance folder (``app.instance_path``)."""
        return cls(os.path.join(app.instance_path, filename), **kw)

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        if self.in_memory:
            assert self._memory_conn is not None
            return self._memory_conn
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        return conn

    def _conn(self) -> sqlite3.Connection:
        loc = self._local
        if getattr(loc, "gen", None) != self._generation or getattr(loc, "conn", None) is None:
            old = getattr(loc, "conn", None)
            if old is not None and old is not self._memory_conn:
                with contextlib.suppress(Exception):
                    old.close()
            loc.conn, loc.gen = self._connect(), self._generation
        return loc.conn

    def _open(self) -> None:
        """Open (creating if needed), verify, and set up the schema; recover if corrupt."""
        with self._lock:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._init_file()
                return
            except sqlite3.DatabaseError as e:
                if not _is_corruption(e):
                    log.warning("The store %s cannot be opened (%s); keeping results in "
                                "memory for now.", self.path, e)
                    self._use_memory()
                    return
                self._move_aside(str(e))
            except OSError as e:
                log.warning("The store folder for %s cannot be used (%s); keeping results in "
                            "memory for now.", self.path, e)
                self._use_memory()
                return
            try:
                self._init_file()
            except (sqlite3.DatabaseError, OSError) as e:
                log.warning("A fresh store at %s cannot be created (%s); keeping results in "
                            "memory for now.", self.path, e)
                self._use_memory()

    def _init_file(self) -> None:
        self._generation += 1
        conn = self._conn()
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.warning("The store %s is not in WAL mode (%s).", self.path, mode)
        conn.execute("PRAGMA synchronous=NORMAL")
        row = conn.execute("PRAGMA quick_check").fetchone()
        if row is None or row[0] != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({row and row[0]})")
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if version and int(version[0]) != SCHEMA_VERSION:
            # A future or past schema: keep it aside rather than misread it.
            raise sqlite3.DatabaseError(f"file is not a database of schema "
                                        f"{SCHEMA_VERSION} (found {version[0]})")

    def _use_memory(self) -> None:
        self.in_memory = True
        self._memory_conn = sqlite3.connect(":memory:", isolation_level=None,
                                            check_same_thread=False)
        self._generation += 1
        self._memory_conn.executescript(_SCHEMA)
        self._memory_conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),))

    def _move_aside(self, reason: str) -> None:
        """Rename the broken file (and its -wal/-shm) to ``.corrupt-<time>``."""
        self._generation += 1
        with contextlib.suppress(Exception):
            conn = getattr(self._local, "conn", None)
            if conn is not None and conn is not self._memory_conn:
                conn.close()
            self._local.conn = None
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{secrets.token_hex(3)}"
        aside = f"{self.path}.corrupt-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            src = self.path + suffix
            if os.path.exists(src):
                try:
                    os.replace(src, aside + suffix)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(src)
        self.recoveries += 1
        log.warning("The store %s was unreadable (%s); it was moved aside to %s and a new, "
                    "empty store was created. Saved traces and cached measurements in the old "
                    "file are not available.", self.path, reason, aside)

    def _recover(self, e: BaseException) -> None:
        with self._lock:
            if self.in_memory:
                return
            self._move_aside(str(e))
            try:
                self._init_file()
            except (sqlite3.DatabaseError, OSError) as e2:
                log.warning("A fresh store at %s cannot be created (%s); keeping results in "
                            "memory for now.", self.path, e2)
                self._use_memory()

    def _do(self, what: str, fn: Callable[[sqlite3.Connection], _T], default: _T) -> _T:
        """Run ``fn(conn)``; on corruption recover and retry once; never raise."""
        for attempt in range(2):
            try:
                if self.in_memory:
                    with self._lock:
                        return fn(self._conn())
                return fn(self._conn())
            except sqlite3.DatabaseError as e:
                if _is_corruption(e) and attempt == 0:
                    self._recover(e)
                    continue
                log.warning("Store: %s failed (%s); continuing without it.", what, e)
                return default
            except (OSError, ValueError, TypeError) as e:
                log.warning("Store: %s failed (%s); continuing without it.", what, e)
                return default
        return default

    # ------------------------------------------------------------------ measured results
    def get_result(self, program_hash: str, fingerprint: str, kind: str = "step"
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
        return self._do("reading a result", q, None)

    def put_result(self, program_hash: str, fingerprint: str, kind: str,
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
        ok = self._do("storing a result", q, False)
        if ok:
            self._puts += 1
            if self.max_results and self._puts % PRUNE_EVERY == 0:
                self.prune()
        return ok

    def count_results(self) -> int:
        return self._do("counting results",
                        lambda c: c.execute("SELECT COUNT(*) FROM results").fetchone()[0], 0)

    def prune(self, keep: int | None = None) -> int:
        """Drop the least recently used results beyond ``keep`` (default ``max_results``)."""
        keep = self.max_results if keep is None else keep

        def q(conn: sqlite3.Connection):
            cur = conn.execute(
                "DELETE FROM results WHERE rowid IN (SELECT rowid FROM results ORDER BY used "
                "DESC LIMIT -1 OFFSET ?)", (keep,))
            return cur.rowcount
        return self._do("pruning results", q, 0)

    # ------------------------------------------------------------------ saved traces
    def save_trace(self, name: str, workload: str, params: dict[str, Any], trace: Any) -> str | None:
        """Save a named trace; returns its id (url-safe, unguessable), or None on failure."""
        tid = secrets.token_urlsafe(9)
        params_text = json.dumps(params, sort_keys=True)
        trace_text = trace if isinstance(trace, str) else json.dumps(trace)

        def q(conn: sqlite3.Connection):
            conn.execute("INSERT INTO traces(id, name, workload, params_json, trace_json, "
                         "created) VALUES (?, ?, ?, ?, ?, ?)",
                         (tid, name, workload, params_text, trace_text, time.time()))
            return tid
        return self._do("saving a trace", q, None)

    @staticmethod
    def _row_to_trace(row) -> SavedTrace:
        tid, name, workload, params_json, trace_json, created = row
        try:
            trace = json.loads(trace_json)
        except ValueError:
            trace = trace_json
        return SavedTrace(tid, name, workload, json.loads(params_json), trace, created)

    def get_trace(self, trace_id: str) -> SavedTrace | None:
        def q(conn: sqlite3.Connection):
            row = conn.execute("SELECT id, name, workload, params_json, trace_json, created "
                               "FROM traces WHERE id=?", (trace_id,)).fetchone()
            return None if row is None else self._row_to_trace(row)
        return self._do("reading a trace", q, None)

    def list_traces(self, workload: str | None = None, name: str | None = None,
                    limit: int = 100) -> list[SavedTrace]:
        """Newest first; optionally only one workload's or one name's."""
        sql = "SELECT id, name, workload, params_json, trace_json, created FROM traces"
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
        return self._do("listing traces",
                        lambda c: [self._row_to_trace(r) for r in c.execute(sql, args)], [])

    def delete_trace(self, trace_id: str) -> bool:
        return self._do("deleting a trace", lambda c: c.execute(
            "DELETE FROM traces WHERE id=?", (trace_id,)).rowcount > 0, False)

    # ------------------------------------------------------------------ misc
    def journal_mode(self) -> str:
        return self._do("reading the journal mode",
                        lambda c: str(c.execute("PRAGMA journal_mode").fetchone()[0]), "?")

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn is not self._memory_conn:
            with contextlib.suppress(Exception):
                conn.close()
        self._local.conn = None
