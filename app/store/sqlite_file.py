"""One SQLite file of the store, opened, checked and repaired on its own.

:class:`SqliteFile` keeps one connection per thread (waitress serves from a thread pool), in
WAL mode with a ``busy_timeout``, and runs every operation through :meth:`SqliteFile.do`,
which never raises for a storage problem: on corruption it repairs the file once and retries,
otherwise it logs and answers a default.  How a damaged file is repaired is the subclass's
policy (:meth:`SqliteFile.repair`): the results cache is rebuilt empty, the saved traces are
salvaged row by row.

Rules shared by every file of the store:

* on open the file is checked (``PRAGMA quick_check``) and its schema version compared;
* an existing **zero-length** file is never reused in place: it is renamed (with any
  ``-wal``/``-shm`` beside it) to ``<name>.empty-<time>`` with a logged line, then a fresh
  file is created.  A zero-length file is what a crash during a copy, a full disk or a
  careless restore leaves behind; reusing it would silently turn "my data vanished" into
  "there never was any" (and SQLite would overwrite a write-ahead log left beside it);
* a file that cannot be created or opened at all (an unusable folder) falls back to memory
  for the life of the process, with a warning.
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sqlite3
import threading
import time
from typing import Callable, TypeVar

log = logging.getLogger("app.store")

SCHEMA_VERSION = 1
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_T = TypeVar("_T")


def is_corruption(e: BaseException) -> bool:
    """Whether a sqlite3 error says the file is damaged (not merely busy or missing)."""
    name = getattr(e, "sqlite_errorname", None)
    if name in _CORRUPT:
        return True
    text = str(e).lower()
    return ("not a database" in text or "malformed" in text or "file is encrypted" in text
            or "disk image" in text)


def set_aside(path: str, tag: str) -> str:
    """Rename ``path`` and its ``-wal``/``-shm`` to ``<path>.<tag>-<time>``; the new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{secrets.token_hex(3)}"
    aside = f"{path}.{tag}-{stamp}"
    for suffix in ("", "-wal", "-shm"):
        src = path + suffix
        if os.path.exists(src):
            try:
                os.replace(src, aside + suffix)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(src)
    return aside


def is_empty_file(path: str) -> bool:
    """An existing file of zero length (SQLite would take it for a new, empty database and
    ignore, then overwrite, a write-ahead log left beside it)."""
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return False                               # missing: a new file, not an empty one


class SqliteFile:
    """One SQLite file: a connection per thread, checked on open, repaired on corruption."""

    #: what the file holds, for log lines ("results cache", "saved traces")
    what = "store"

    def __init__(self, path: str, schema: str):
        self.path = os.path.abspath(path)
        self.schema = schema
        self.in_memory = False
        self.recoveries = 0
        self._local = threading.local()
        self._lock = threading.RLock()
        self._generation = 0
        self._memory_conn: sqlite3.Connection | None = None

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        if self.in_memory:
            assert self._memory_conn is not None
            return self._memory_conn
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        return conn

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (a new one after the file was repaired)."""
        loc = self._local
        if getattr(loc, "gen", None) != self._generation or getattr(loc, "conn", None) is None:
            old = getattr(loc, "conn", None)
            if old is not None and old is not self._memory_conn:
                with contextlib.suppress(Exception):
                    old.close()
            loc.conn, loc.gen = self._connect(), self._generation
        return loc.conn

    def retire_connections(self) -> None:
        """Close this thread's connection; the other threads' reconnect on their next use."""
        self._generation += 1
        with contextlib.suppress(Exception):
            conn = getattr(self._local, "conn", None)
            if conn is not None and conn is not self._memory_conn:
                conn.close()
            self._local.conn = None

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn is not self._memory_conn:
            with contextlib.suppress(Exception):
                conn.close()
        self._local.conn = None

    # ------------------------------------------------------------------ opening
    def open(self) -> None:
        """Open (creating if needed), verify and set up the schema; repair if damaged."""
        with self._lock:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self.init_file()
                return
            except sqlite3.DatabaseError as e:
                if not is_corruption(e):
                    self._use_memory(f"cannot be opened ({e})")
                    return
                reason = str(e)
            except OSError as e:
                self._use_memory(f"cannot be used ({e})")
                return
            self._repair(reason)

    def init_file(self) -> None:
        """Connect afresh, check the file and create the schema; raises if it is damaged."""
        self._generation += 1
        if is_empty_file(self.path):
            aside = set_aside(self.path, "empty")
            self.empty_file_set_aside(aside)
        conn = self.conn()
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.warning("The %s file %s is not in WAL mode (%s).", self.what, self.path, mode)
        conn.execute("PRAGMA synchronous=NORMAL")
        row = conn.execute("PRAGMA quick_check").fetchone()
        if row is None or row[0] != "ok":
            lines = str(row and row[0]).replace("*** in database main ***", "").split()
            raise sqlite3.DatabaseError(f"database disk image is malformed "
                                        f"({' '.join(lines)[:120]})")
        conn.executescript(self.schema)
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if version and int(version[0]) != SCHEMA_VERSION:
            # A future or past schema: keep it aside rather than misread it.
            raise sqlite3.DatabaseError(f"file is not a database of schema "
                                        f"{SCHEMA_VERSION} (found {version[0]})")

    def empty_file_set_aside(self, aside: str) -> None:
        """Log that a zero-length file was renamed to ``aside`` (subclasses say more)."""
        log.warning("The %s file %s was empty (0 bytes); it is kept as %s and a new one is "
                    "created.", self.what, self.path, aside)

    def _use_memory(self, why: str) -> None:
        log.warning("The %s file %s %s; keeping it in memory for now.", self.what, self.path,
                    why)
        self.in_memory = True
        self._memory_conn = sqlite3.connect(":memory:", isolation_level=None,
                                            check_same_thread=False)
        self._generation += 1
        self._memory_conn.executescript(self.schema)
        self._memory_conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),))

    # ------------------------------------------------------------------ repairing
    def repair(self, reason: str) -> None:
        """Replace the damaged file by a working one (it exists and is open afterwards): the
        policy of each kind of file (raises ``sqlite3.DatabaseError`` or ``OSError`` if it
        cannot, and the file falls back to memory)."""
        raise NotImplementedError

    def _repair(self, reason: str) -> None:
        self.retire_connections()
        try:
            self.repair(reason)
            self.recoveries += 1
        except (sqlite3.DatabaseError, OSError) as e:
            self._use_memory(f"could not be repaired ({e})")

    def _recover(self, e: BaseException) -> None:
        """Corruption seen while in use: repair, unless another thread or process already
        did (the file at our path opens and checks fine again)."""
        with self._lock:
            if self.in_memory:
                return
            self.retire_connections()
            try:
                self.init_file()
                return
            except (sqlite3.DatabaseError, OSError):
                pass
            self._repair(str(e))

    def do(self, what: str, fn: Callable[[sqlite3.Connection], _T], default: _T) -> _T:
        """Run ``fn(conn)``; on corruption repair and retry once; never raise."""
        for attempt in range(2):
            try:
                if self.in_memory:
                    with self._lock:
                        return fn(self.conn())
                return fn(self.conn())
            except sqlite3.DatabaseError as e:
                if is_corruption(e) and attempt == 0:
                    self._recover(e)
                    continue
                log.warning("Store: %s failed (%s); continuing without it.", what, e)
                return default
            except (OSError, ValueError, TypeError) as e:
                log.warning("Store: %s failed (%s); continuing without it.", what, e)
                return default
        return default
