"""The SQLite store: WAL mode, persistence across reopen, thread safety, and recovery from a
corrupt or missing file (moved aside with a warning, never a crash)."""
from __future__ import annotations

import glob
import logging
import os
import re
import sqlite3
import threading

import pytest

from app.store import DB_NAME, Store, machine_fingerprint

FP = "test-cpu|2 cores|engine 0|llvmlite 0"


def result(i: int) -> dict:
    return {"status": "ok", "data": {"times": {"median": 1e-3 * i}, "gflops": float(i)},
            "note": "x" * 200}


def fill(store: Store, n: int) -> None:
    for i in range(n):
        assert store.put_result(f"h{i}", FP, "step", result(i))


def test_store_lives_in_the_instance_folder_in_wal_mode(tmp_path):
    from flask import Flask
    app = Flask("t", instance_path=str(tmp_path / "instance"))
    store = Store.for_app(app)
    assert store.path == str(tmp_path / "instance" / DB_NAME)
    assert os.path.exists(store.path)
    assert store.journal_mode() == "wal"
    assert not store.in_memory


def test_results_and_traces_persist_across_reopen(tmp_path):
    path = str(tmp_path / DB_NAME)
    s1 = Store(path)
    fill(s1, 5)
    tid = s1.save_trace("my tiling", "mm_relu", {"n": 128},
                        {"format": "schedule-explorer/trace", "insts": [["Split", [], [], []]]})
    assert tid and len(tid) >= 12
    s1.close()
    s2 = Store(path)
    assert s2.get_result("h3", FP, "step") == result(3)
    assert s2.get_result("h3", "other machine", "step") is None    # keyed by fingerprint
    assert s2.get_result("h3", FP, "cache") is None                # and by kind
    t = s2.get_trace(tid)
    assert t is not None and t.name == "my tiling" and t.workload == "mm_relu"
    assert t.params == {"n": 128} and t.trace["insts"][0][0] == "Split"
    assert [x.id for x in s2.list_traces(workload="mm_relu")] == [tid]
    assert s2.list_traces(workload="conv2d") == []
    assert s2.get_trace("nope") is None
    assert s2.delete_trace(tid) and s2.get_trace(tid) is None


def test_put_replaces_and_prune_keeps_the_newest(tmp_path):
    s = Store(str(tmp_path / DB_NAME), max_results=3)
    fill(s, 6)
    s.put_result("h0", FP, "step", {"v": "new"})
    assert s.get_result("h0", FP, "step") == {"v": "new"}
    assert s.count_results() == 6
    assert s.prune() == 3
    assert s.count_results() == 3
    assert s.get_result("h0", FP, "step") == {"v": "new"}          # most recently used stays


def _aside(path: str) -> list[str]:
    return [p for p in glob.glob(path + ".corrupt-*") if not p.endswith(("-wal", "-shm"))]


def test_garbage_file_is_moved_aside_and_rebuilt(tmp_path, caplog):
    path = str(tmp_path / DB_NAME)
    with open(path, "wb") as f:
        f.write(os.urandom(8192))
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s = Store(path)
    assert s.recoveries == 1 and not s.in_memory
    assert len(_aside(path)) == 1
    assert "moved aside" in caplog.text
    fill(s, 2)
    assert s.get_result("h1", FP, "step") == result(1)
    assert s.journal_mode() == "wal"


def test_truncated_database_is_recovered(tmp_path, caplog):
    path = str(tmp_path / DB_NAME)
    s = Store(path)
    fill(s, 400)                                  # many pages
    s.save_trace("t", "mm_relu", {"n": 8}, {"insts": []})
    conn = s.results.conn()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    size = os.path.getsize(path)
    assert size > 16 * 4096
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s2 = Store(path)
        # Whether the damage is seen on open (quick_check) or on first use, it is recovered.
        for i in range(400):
            s2.get_result(f"h{i}", FP, "step")
        s2.list_traces()
    assert s2.recoveries == 1, caplog.text
    assert len(_aside(path)) == 1
    assert s2.put_result("fresh", FP, "step", {"ok": 1})
    assert s2.get_result("fresh", FP, "step") == {"ok": 1}


def test_corruption_while_open_is_recovered_on_next_use(tmp_path, caplog):
    path = str(tmp_path / DB_NAME)
    s = Store(path)
    fill(s, 3)
    s.results.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(path, "r+b") as f:                    # overwrite in place (same inode)
        f.write(b"this is not sqlite" * 500)
    got = []
    # Another server thread (a fresh connection) is the first to read the damaged file.
    with caplog.at_level(logging.WARNING, logger="app.store"):
        t = threading.Thread(target=lambda: got.append(s.get_result("h1", FP, "step")))
        t.start()
        t.join(30)
    assert got == [None]                             # old data is gone, but no exception
    assert s.recoveries == 1 and "moved aside" in caplog.text
    # This thread's old connection is retired too (it still pointed at the moved file).
    assert s.put_result("h9", FP, "step", {"v": 9}) and s.get_result("h9", FP, "step") == {"v": 9}


def test_missing_folder_is_created(tmp_path):
    s = Store(str(tmp_path / "a" / "b" / DB_NAME))
    fill(s, 1)
    assert os.path.exists(tmp_path / "a" / "b" / DB_NAME)


def test_unusable_location_falls_back_to_memory(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    with caplog.at_level(logging.WARNING, logger="app.store"):
        s = Store(str(blocker / DB_NAME))
    assert s.in_memory and "in memory" in caplog.text
    fill(s, 3)
    assert s.get_result("h2", FP, "step") == result(2)
    tid = s.save_trace("x", "mm_relu", {}, [])
    assert s.get_trace(tid).name == "x"


def test_foreign_schema_version_is_moved_aside(tmp_path):
    path = str(tmp_path / DB_NAME)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '999')")
    conn.commit()
    conn.close()
    s = Store(path)
    assert s.recoveries == 1 and len(_aside(path)) == 1
    fill(s, 1)


def test_many_threads_read_and_write(tmp_path):
    s = Store(str(tmp_path / DB_NAME))
    errors = []

    def worker(k: int):
        try:
            for i in range(40):
                s.put_result(f"t{k}-{i}", FP, "step", {"k": k, "i": i})
                assert s.get_result(f"t{k}-{i}", FP, "step") == {"k": k, "i": i}
                if i % 10 == 0:
                    s.save_trace(f"n{k}", "mm_relu", {"n": i}, {"insts": [i]})
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert s.count_results() == 8 * 40
    assert len(s.list_traces(limit=1000)) == 8 * 4
    assert len(s.list_traces(name="n3")) == 4


def test_two_store_objects_share_one_file(tmp_path):
    path = str(tmp_path / DB_NAME)
    a, b = Store(path), Store(path)
    a.put_result("x", FP, "step", {"from": "a"})
    assert b.get_result("x", FP, "step") == {"from": "a"}


def test_machine_fingerprint_names_cpu_cores_and_versions():
    fp = machine_fingerprint("1.2.3")
    cpu, cores, eng, llvm, code = fp.split("|")
    assert cpu and cores.endswith("cores") and int(cores.split()[0]) >= 1
    assert eng == "engine 1.2.3" and llvm.startswith("llvmlite ")
    assert re.fullmatch(r"code [0-9a-f]{16}", code)
    assert machine_fingerprint("1.2.3") == fp and machine_fingerprint("1.2.4") != fp


def test_the_fingerprint_changes_with_the_engine_sources(monkeypatch):
    import app.store.fingerprint as store_mod
    before = store_mod.code_digest()
    monkeypatch.setattr(store_mod, "_CODE_DIGEST", None)
    real_open = open

    def edited(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        if str(path).endswith(os.path.join("engine", "codegen", "__init__.py")) and "b" in mode:
            import io
            return io.BytesIO(f.read() + b"# edited\n")
        return f
    monkeypatch.setattr("builtins.open", edited)
    assert store_mod.code_digest() != before


def test_results_must_be_json(tmp_path):
    s = Store(str(tmp_path / DB_NAME))
    with pytest.raises(ValueError):
        s.put_result("nan", FP, "step", {"x": float("nan")})


def test_pruning_happens_every_prune_every_results(tmp_path):
    from app.store import PRUNE_EVERY
    s = Store(str(tmp_path / DB_NAME), max_results=3)
    fill(s, PRUNE_EVERY - 1)
    assert s.count_results() == PRUNE_EVERY - 1          # never before the PRUNE_EVERY-th
    s.put_result("last", FP, "step", {"v": 1})
    assert s.count_results() == 3 and s.get_result("last", FP, "step") == {"v": 1}
