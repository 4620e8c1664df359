"""Saved traces and the results cache live in two files and never share a fate: a damaged
page of the (disposable) results cache loses no saved trace; a damaged page of the saved
traces loses only the traces stored on it (the rest are salvaged, the count is logged and the
damaged file is kept); a zero-length file is kept aside, never silently reused; a store of an
older version (one file holding both) has its saved traces copied over on the first start."""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import sqlite3
import threading

import pytest

from app.store import Store

FP = "test-cpu|2 cores|engine 0|llvmlite 0"
RESULTS = "explorer.sqlite3"
TRACES = "saved-traces.sqlite3"
PAGE = 4096
GARBAGE = b"\xde\xad\xbe\xef" * (PAGE // 4)     # never a valid b-tree page type

#: the one-file store of earlier versions (results and saved traces together)
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE results (program_hash TEXT NOT NULL, fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL, result_json TEXT NOT NULL, created REAL NOT NULL, used REAL NOT NULL,
    PRIMARY KEY (program_hash, fingerprint, kind));
CREATE INDEX results_used ON results(used);
CREATE TABLE traces (id TEXT PRIMARY KEY, name TEXT NOT NULL, workload TEXT NOT NULL,
    params_json TEXT NOT NULL, trace_json TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX traces_name ON traces(name);
CREATE INDEX traces_created ON traces(created);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def a_trace(i: int, size: int) -> dict:
    return {"format": "schedule-explorer/trace", "insts": [["Split", [i], [], []]],
            "pad": "t" * size}


def save_traces(store: Store, n: int, size: int = 300) -> dict[str, tuple]:
    saved = {}
    for i in range(n):
        tid = store.save_trace(f"trace {i}", "mm_relu", {"n": i}, a_trace(i, size))
        assert tid
        saved[tid] = (f"trace {i}", {"n": i}, a_trace(i, size))
    return saved


def as_saved(store: Store) -> dict[str, tuple]:
    return {t.id: (t.name, t.params, t.trace) for t in store.list_traces(limit=100_000)}


def fill_results(store: Store, n: int) -> None:
    for i in range(n):
        assert store.put_result(f"h{i}", FP, "step", {"i": i, "note": "r" * 300})


def checkpoint_and_close(path: str) -> None:
    """Fold the write-ahead log into the file, so damage to the file is damage to the data."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def damage_page(path: str, page_no: int) -> None:
    with open(path, "r+b") as f:
        f.seek((page_no - 1) * PAGE)
        f.write(GARBAGE)


def table_leaf_pages(path: str) -> list[int]:
    """Pages whose header says "table b-tree leaf" (0x0d)."""
    with open(path, "rb") as f:
        data = f.read()
    return [n + 1 for n in range(1, len(data) // PAGE) if data[n * PAGE] == 0x0D]


def in_another_thread(fn):
    """``fn()`` run by another server thread (a connection without this one's page cache)."""
    got = []
    t = threading.Thread(target=lambda: got.append(fn()))
    t.start()
    t.join(60)
    assert got, "the other thread did not answer"
    return got[0]


def sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def aside(path: str, tag: str) -> list[str]:
    return [p for p in glob.glob(f"{path}.{tag}-*") if not p.endswith(("-wal", "-shm"))]


def test_a_damaged_page_of_the_results_cache_keeps_every_saved_trace(tmp_path, caplog):
    path = str(tmp_path / RESULTS)
    s = Store(path)
    saved = save_traces(s, 60)
    fill_results(s, 2000)
    s.close()
    checkpoint_and_close(path)
    pages = os.path.getsize(path) // PAGE
    assert pages > 100
    damage_page(path, pages // 2)
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s2 = Store(path)
        for i in range(0, 2000, 7):              # damage seen on open or on first use
            s2.get_result(f"h{i}", FP, "step")
    assert as_saved(s2) == saved
    assert s2.results.recoveries == 1 and len(aside(path, "corrupt")) == 1
    assert s2.traces.recoveries == 0
    for tid, (name, params, trace) in saved.items():
        t = s2.get_trace(tid)
        assert t is not None and (t.name, t.params, t.trace) == (name, params, trace)
    assert "Saved traces are kept in" in caplog.text
    assert s2.put_result("fresh", FP, "step", {"ok": 1})
    assert s2.get_result("fresh", FP, "step") == {"ok": 1}


def test_the_results_cache_damaged_while_open_keeps_every_saved_trace(tmp_path):
    path = str(tmp_path / RESULTS)
    s = Store(path)
    saved = save_traces(s, 20)
    fill_results(s, 300)
    checkpoint_and_close(path)
    with open(path, "r+b") as f:                  # overwritten in place (same inode)
        f.write(b"this is not sqlite" * 500)
    assert in_another_thread(lambda: s.get_result("h1", FP, "step")) is None
    assert as_saved(s) == saved
    assert s.results.recoveries == 1
    assert s.save_trace("after", "mm_relu", {}, []) and len(as_saved(s)) == 21


@pytest.mark.parametrize("size, pick", [(300, "a table leaf"), (6000, "a middle page")])
def test_a_damaged_page_of_the_saved_traces_is_salvaged(tmp_path, caplog, size, pick):
    path = str(tmp_path / RESULTS)
    traces_path = str(tmp_path / TRACES)
    s = Store(path)
    saved = save_traces(s, 400, size)
    s.close()
    checkpoint_and_close(traces_path)
    if pick == "a table leaf":
        leaves = table_leaf_pages(traces_path)
        page = leaves[len(leaves) // 2]
    else:
        page = os.path.getsize(traces_path) // PAGE // 2
    damage_page(traces_path, page)
    damaged = sha(traces_path)
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s2 = Store(path)
    got = as_saved(s2)
    lost = len(saved) - len(got)
    assert 1 <= lost <= 12, lost                  # only the rows of the damaged page
    assert all(saved[tid] == value for tid, value in got.items())   # nothing garbled
    assert f"recovered {len(got)} of 400 from a damaged file" in caplog.text
    kept = aside(traces_path, "damaged")
    assert len(kept) == 1 and sha(kept[0]) == damaged   # kept exactly as it was found
    assert f"the damaged file is kept as {kept[0]}" in caplog.text
    assert s2.traces.recoveries == 1 and not s2.in_memory
    assert s2.save_trace("after", "mm_relu", {}, []) and len(as_saved(s2)) == len(got) + 1
    conn = sqlite3.connect(traces_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_the_saved_traces_damaged_while_open_are_salvaged_on_next_use(tmp_path, caplog):
    path = str(tmp_path / RESULTS)
    traces_path = str(tmp_path / TRACES)
    s = Store(path)
    saved = save_traces(s, 300)
    s.traces.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    leaves = table_leaf_pages(traces_path)
    damage_page(traces_path, leaves[len(leaves) // 3])
    with caplog.at_level(logging.WARNING, logger="app.store"):
        got = in_another_thread(lambda: as_saved(s))   # the first read finds the damage
    assert s.traces.recoveries == 1 and len(aside(traces_path, "damaged")) == 1
    assert 1 <= len(saved) - len(got) <= 20
    assert re.search(rf"recovered {len(got)} of 300 from a damaged file", caplog.text)


@pytest.mark.parametrize("name", [TRACES, RESULTS])
def test_a_zero_length_store_file_is_kept_aside_not_reused(tmp_path, caplog, name):
    empty = tmp_path / name
    empty.write_bytes(b"")
    (tmp_path / (name + "-wal")).write_bytes(b"w" * 100)   # whatever was beside it goes along
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s = Store(str(tmp_path / RESULTS))
    kept = aside(str(empty), "empty")
    assert len(kept) == 1 and os.path.getsize(kept[0]) == 0
    assert os.path.getsize(kept[0] + "-wal") == 100
    assert "was empty (0 bytes)" in caplog.text and kept[0] in caplog.text
    if name == TRACES:
        assert any(r.levelno >= logging.ERROR for r in caplog.records)
    assert s.save_trace("x", "mm_relu", {}, []) and s.put_result("h", FP, "step", {"v": 1})
    assert os.path.getsize(empty) > 0 and not s.in_memory


def write_old_store(path: str, n_traces: int, n_results: int) -> dict[str, tuple]:
    import json
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    saved = {}
    for i in range(n_traces):
        tid = f"old-id-{i:04d}"
        conn.execute("INSERT INTO traces VALUES (?, ?, ?, ?, ?, ?)",
                     (tid, f"old {i}", "mm_relu", json.dumps({"n": i}),
                      json.dumps(a_trace(i, 200)), 1000.0 + i))
        saved[tid] = (f"old {i}", {"n": i}, a_trace(i, 200))
    for i in range(n_results):
        conn.execute("INSERT INTO results VALUES (?, ?, 'step', ?, 1.0, 1.0)",
                     (f"h{i}", FP, json.dumps({"i": i})))
    conn.commit()
    conn.close()
    return saved


def test_an_old_single_file_store_has_its_traces_copied_once(tmp_path, caplog):
    path = str(tmp_path / RESULTS)
    saved = write_old_store(path, 120, 50)
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s = Store(path)
    assert as_saved(s) == saved
    assert s.get_result("h7", FP, "step") == {"i": 7}      # the cache is still used
    assert "copied 120 of 120 saved traces from the old store file" in caplog.text
    tid = next(iter(saved))
    assert s.delete_trace(tid)
    s.close()
    s2 = Store(path)                                # once: a deleted trace stays deleted
    assert set(as_saved(s2)) == set(saved) - {tid}


def test_traces_of_an_old_store_moved_aside_or_damaged_are_found(tmp_path):
    path = str(tmp_path / RESULTS)
    earlier = write_old_store(path, 40, 0)          # moved aside by an earlier version
    os.replace(path, path + ".corrupt-20240101-000000-abcdef")
    current = write_old_store(str(tmp_path / "tmp.sqlite3"), 0, 1500)
    os.replace(tmp_path / "tmp.sqlite3", path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO traces VALUES ('new-one', 'n', 'mm_relu', '{}', '[]', 5.0)")
    conn.commit()
    conn.close()
    assert current == {}
    damage_page(path, os.path.getsize(path) // PAGE // 2)   # the old file is damaged too
    s = Store(path)
    assert set(as_saved(s)) == set(earlier) | {"new-one"}
    assert s.results.recoveries == 1                # the cache itself is rebuilt
