"""Reading every readable saved trace out of a damaged SQLite file.

The sqlite3 module has no ``.recover``; this does what can be done with plain SELECTs: the
traces table is read by ranges of rowids, and a range that fails is read again one row at a
time, so a damaged page costs only the rows stored on it.  The table's indexes are separate
b-trees: their rowids say how far to look and how many rows the file held.

A damaged file is never read in place: :func:`read_traces_copy` reads a copy (SQLite may
write to a file it opens, e.g. to fold its write-ahead log back in), so the file kept aside
stays exactly as it was found.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field

COLUMNS = "id, name, workload, params_json, trace_json, created"
#: rows read per range query; a failing range is read again row by row
CHUNK = 256
#: when no index says how many rows there were: rows per page assumed at most (a saved
#: trace row is at least ~60 bytes), bounding the search
ROWS_PER_PAGE = 70
#: when no index says how many rows there were: stop after this many empty ranges in a row
EMPTY_RANGES_TO_STOP = 64


@dataclass
class Salvage:
    """What was read: ``rows`` (``COLUMNS`` tuples by rowid) and the rowids the file's
    indexes list; ``exact`` when one index was read whole (then ``expected`` is exact)."""
    rows: dict[int, tuple] = field(default_factory=dict)
    indexed: set[int] = field(default_factory=set)
    exact: bool = False

    @property
    def expected(self) -> int:
        """How many saved traces the file held (a lower bound unless ``exact``)."""
        return len(self.indexed | set(self.rows))


def _valid(row: tuple) -> bool:
    """A row whose values have the types saving gives them (garbage read from a damaged page
    that still parses is dropped)."""
    tid, name, workload, params_json, trace_json, created = row
    if not all(isinstance(v, str) for v in (tid, name, workload, params_json, trace_json)):
        return False
    if not isinstance(created, (int, float)) or not tid:
        return False
    try:
        return isinstance(json.loads(params_json), dict)
    except ValueError:
        return False


def _has_traces_table(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute(f"SELECT {COLUMNS} FROM traces LIMIT 0").fetchall()
        return True
    except sqlite3.DatabaseError:
        return False


def _read_indexes(conn: sqlite3.Connection, out: Salvage) -> None:
    """The rowids each index of the traces table lists (covering scans: no table page)."""
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='traces'")]
    except sqlite3.DatabaseError:
        return
    for name in names:
        seen: set[int] = set()
        try:
            quoted = name.replace('"', '""')
            for (rowid,) in conn.execute(f'SELECT rowid FROM traces INDEXED BY "{quoted}"'):
                seen.add(rowid)
            out.exact = True
        except sqlite3.DatabaseError:
            pass
        out.indexed |= seen


def _ceiling(conn: sqlite3.Connection, out: Salvage) -> tuple[int, bool]:
    """The highest rowid to look at, and whether it is known (else an upper bound)."""
    known = set(out.indexed)
    try:
        top = conn.execute("SELECT max(rowid) FROM traces").fetchone()[0]
        if isinstance(top, int):
            known.add(top)
    except sqlite3.DatabaseError:
        pass
    if known:
        return max(known), True
    try:
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
    except (sqlite3.DatabaseError, TypeError, ValueError):
        pages = 1
    return max(pages, 1) * ROWS_PER_PAGE, False


def _read_range(conn: sqlite3.Connection, lo: int, hi: int) -> tuple[list[tuple], bool]:
    """The rows with rowid in [lo, hi]; whether any of them could not be read."""
    sql = f"SELECT rowid, {COLUMNS} FROM traces WHERE rowid "
    try:
        return conn.execute(sql + "BETWEEN ? AND ?", (lo, hi)).fetchall(), False
    except sqlite3.DatabaseError:
        pass
    rows, damaged = [], True
    for rowid in range(lo, hi + 1):
        try:
            row = conn.execute(sql + "= ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            rows.append(row)
    return rows, damaged


def _read_rows(conn: sqlite3.Connection, out: Salvage) -> None:
    top, known = _ceiling(conn, out)
    lo = min(out.indexed | {1})
    empty_in_a_row = 0
    while lo <= top:
        rows, damaged = _read_range(conn, lo, lo + CHUNK - 1)
        for rowid, *row in rows:
            if _valid(tuple(row)):
                out.rows[rowid] = tuple(row)
        empty_in_a_row = 0 if rows or damaged else empty_in_a_row + 1
        if not known and empty_in_a_row >= EMPTY_RANGES_TO_STOP and lo > max(out.rows, default=0):
            break
        lo += CHUNK


def read_traces(path: str) -> Salvage:
    """Every readable saved trace of the SQLite file at ``path`` (opened as it is)."""
    out = Salvage()
    try:
        conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    except sqlite3.Error:
        return out
    try:
        if _has_traces_table(conn):
            _read_indexes(conn, out)
            _read_rows(conn, out)
    except sqlite3.Error:
        pass
    finally:
        conn.close()
    return out


def read_traces_copy(path: str, scratch_folder: str) -> Salvage:
    """:func:`read_traces` on a copy of ``path`` (and its ``-wal``), leaving it untouched."""
    with tempfile.TemporaryDirectory(prefix=".salvage-", dir=scratch_folder) as tmp:
        copy = os.path.join(tmp, "copy.sqlite3")
        try:
            shutil.copyfile(path, copy)
            if os.path.exists(path + "-wal"):
                shutil.copyfile(path + "-wal", copy + "-wal")
        except OSError:
            return Salvage()
        return read_traces(copy)
