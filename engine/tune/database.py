"""The tuning database: every measured candidate, kept in one SQLite file and reused.

::

    db = engine.tune.Database("tuning.sqlite3")
    result = engine.tune.tune(("matmul", {"n": 512}), space="auto", database=db)
    db.best(result.task, k=5)        # the five fastest correct traces so far

Records are keyed by the task (workload + parameters or program text, function, fixed
prefix, search space, and for a GPU task its target: :meth:`TuneTask.key`) and by the
machine (CPU model, cores; for a GPU task the target and the GPU that ran it, or "modeled"
without one: :meth:`Database.machine_of`), and each keeps its target string (``llvm`` for the
CPU), so CPU and GPU records never mix and a
later run of the same search on the same kind of machine starts from what was measured
before — its candidates are not measured again, they train the cost model from the first
round and seed the evolutionary population. A damaged file is set aside (renamed) and a new
one started: the database is a cache of measurements, never the only copy of anything.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass

from .measure import MeasureResult
from .task import TuneTask

__all__ = ["Database", "TrialRecord", "trace_digest", "machine_fingerprint"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    key TEXT NOT NULL, machine TEXT NOT NULL, description TEXT NOT NULL, created REAL,
    PRIMARY KEY (key, machine));
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, machine TEXT NOT NULL,
    digest TEXT NOT NULL, trace TEXT NOT NULL, seconds REAL, gflops REAL,
    correct INTEGER NOT NULL, compile_ms REAL, error TEXT, created REAL,
    target TEXT NOT NULL DEFAULT 'llvm');
CREATE INDEX IF NOT EXISTS records_by_task ON records (key, machine);
CREATE UNIQUE INDEX IF NOT EXISTS records_unique ON records (key, machine, digest);
"""


@dataclass
class TrialRecord:
    """One measured candidate: its trace document (decisions included) and its result.

    ``trial``: its number in this run (0 for one read back from the database);
    ``source``: how it was found ("random", "evolved", "database"); ``confirmed``: its time
    is a confirmation's (timed again side by side with a rival, see
    :func:`engine.tune.tuner.settle_best`).
    """

    trace: dict
    result: MeasureResult
    trial: int = 0
    source: str = "random"
    confirmed: bool = False

    @property
    def seconds(self) -> float | None:
        return self.result.seconds

    @property
    def gflops(self) -> float | None:
        return self.result.gflops

    @property
    def correct(self) -> bool:
        return self.result.correct

    @property
    def compile_ms(self) -> float | None:
        return self.result.compile_ms

    @property
    def error(self) -> str | None:
        return self.result.error

    @property
    def ok(self) -> bool:
        return self.result.ok

    def as_dict(self) -> dict:
        return {"trial": self.trial, "source": self.source, "trace": self.trace,
                "confirmed": self.confirmed, **self.result.as_dict()}

    @staticmethod
    def from_dict(d: dict) -> "TrialRecord":
        return TrialRecord(trace=d["trace"], result=MeasureResult.from_dict(d),
                           trial=int(d.get("trial", 0)), source=str(d.get("source", "random")),
                           confirmed=bool(d.get("confirmed", False)))


def trace_digest(trace_doc: dict) -> str:
    """The identity of a candidate: its instructions and decisions (not the metadata)."""
    body = {k: v for k, v in trace_doc.items() if k not in ("workload", "format", "version")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def machine_fingerprint() -> str:
    """CPU model and core count: timings are only comparable on the same kind of machine."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} x{os.cpu_count()}"


class Database:
    """A tuning database in the SQLite file ``path`` (``":memory:"`` for none on disk)."""

    def __init__(self, path: str, machine: str | None = None):
        self.path = path if path == ":memory:" else os.path.abspath(path)
        self.machine = machine or machine_fingerprint()
        self._lock = threading.Lock()
        self._gpu: str | None = None
        #: why writing stopped (None while it works)
        self.failed: str | None = None
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            folder = os.path.dirname(self.path)
            if folder:
                os.makedirs(folder, exist_ok=True)
        try:
            return self._connect()
        except sqlite3.DatabaseError as e:
            if self.path == ":memory:":
                raise
            aside = f"{self.path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.replace(self.path + suffix, aside + suffix)
            warnings.warn(f"the tuning database {self.path} was damaged ({e}); it was moved "
                          f"to {aside} and a new one started", RuntimeWarning, stacklevel=3)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            cols = {row[1] for row in conn.execute("PRAGMA table_info(records)")}
            if "target" not in cols:  # a file from before GPU targets: its records are CPU's
                conn.execute("ALTER TABLE records ADD COLUMN target TEXT NOT NULL "
                             "DEFAULT 'llvm'")
            conn.execute("SELECT count(*) FROM records").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def machine_of(self, task: TuneTask) -> str:
        """Where ``task``'s times come from: this machine for a CPU task; for a GPU task
        its target and the GPU here (``"cuda -model=a100 on NVIDIA A100 ..."``) or
        ``"... modeled"`` without one (the analytic model's times)."""
        if not task.is_gpu:
            return self.machine
        if self._gpu is None:
            from engine.gpu.driver import cuda_available  # noqa: PLC0415
            ok, why = cuda_available()
            self._gpu = why if ok else "modeled"
        return f"{task.target} on {self._gpu}"

    # ------------------------------------------------------------------ writing
    def add(self, task: TuneTask, trace_doc: dict, result: MeasureResult,
            confirmed: bool = False) -> None:
        """Store one measured candidate (a candidate measured again keeps its best time;
        ``confirmed``: the time of a confirmation, which replaces the stored one)."""
        if self.failed is not None:
            return
        try:
            self._add(task, trace_doc, result, confirmed)
        except sqlite3.Error as e:  # a full disk, a file-size limit: tune on, unrecorded
            self.failed = str(e)
            warnings.warn(f"the tuning database {self.path} cannot be written ({e}); later "
                          "trials are not recorded", RuntimeWarning, stacklevel=2)

    def _add(self, task: TuneTask, trace_doc: dict, result: MeasureResult,
             confirmed: bool = False) -> None:
        key, digest = task.key(), trace_digest(trace_doc)
        machine, target = self.machine_of(task), task.target or "llvm"
        now = time.time()
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR IGNORE INTO tasks (key, machine, description, created) "
                "VALUES (?, ?, ?, ?)",
                (key, machine, json.dumps(task.describe(), sort_keys=True), now))
            row = self._conn.execute(
                "SELECT seconds FROM records WHERE key=? AND machine=? AND digest=?",
                (key, machine, digest)).fetchone()
            values = (json.dumps(trace_doc), result.seconds, result.gflops,
                      int(bool(result.correct)), result.compile_ms, result.error, now)
            if row is None:
                self._conn.execute(
                    "INSERT INTO records (key, machine, digest, trace, seconds, gflops, "
                    "correct, compile_ms, error, created, target) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (key, machine, digest) + values + (target,))
            elif result.ok and (confirmed or row[0] is None or result.seconds < row[0]):
                self._conn.execute(
                    "UPDATE records SET trace=?, seconds=?, gflops=?, correct=?, "
                    "compile_ms=?, error=?, created=? WHERE key=? AND machine=? AND digest=?",
                    values + (key, machine, digest))

    # ------------------------------------------------------------------ reading
    def records(self, task: TuneTask) -> list[TrialRecord]:
        """Every stored candidate of ``task`` on this machine, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT trace, seconds, gflops, correct, compile_ms, error FROM records "
                "WHERE key=? AND machine=? AND target=? ORDER BY id",
                (task.key(), self.machine_of(task), task.target or "llvm")).fetchall()
        out = []
        for trace, seconds, gflops, correct, compile_ms, error in rows:
            try:
                doc = json.loads(trace)
            except ValueError:
                continue
            out.append(TrialRecord(doc, MeasureResult(seconds, gflops, bool(correct),
                                                      compile_ms, error), 0, "database"))
        return out

    def best(self, task: TuneTask, k: int = 1) -> list[TrialRecord]:
        """The ``k`` fastest correct candidates of ``task``."""
        ok = [r for r in self.records(task) if r.ok]
        return sorted(ok, key=lambda r: r.seconds)[:k]

    def count(self, task: TuneTask | None = None) -> int:
        with self._lock:
            if task is None:
                return self._conn.execute("SELECT count(*) FROM records").fetchone()[0]
            return self._conn.execute(
                "SELECT count(*) FROM records WHERE key=? AND machine=? AND target=?",
                (task.key(), self.machine_of(task), task.target or "llvm")).fetchone()[0]
