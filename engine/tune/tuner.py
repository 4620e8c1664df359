"""``engine.tune.tune``: search a space of schedules for the fastest correct one.

::

    import engine
    from engine.tune import tune

    def stochastic_schedule_mm(sch):
        block_Y = sch.get_block("Y", "mm_relu")
        i, j, k = sch.get_loops(block_Y)
        j_0, j_1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
        sch.reorder(i, j_0, k, j_1)
        sch.decompose_reduction(block_Y, k)

    result = tune(("mm_relu", {"n": 512}), space=stochastic_schedule_mm, trials=64)
    result.best_gflops, result.best_trace, result.best_schedule.mod
    for r in result.records: r.trace, r.seconds, r.gflops, r.correct, r.compile_ms, r.error

Each round the strategy (:mod:`.search`) proposes a batch of candidates, the runner
(:mod:`.runner`) compiles, checks and times them, every result goes to the database
(:mod:`.database`) and trains the cost model (:mod:`.cost_model`). A candidate counts only
if it matched numpy. After each round the fastest candidate and the runner-up are timed
again side by side unless that was done already (:func:`settle_best`): one measurement on
a shared machine does not decide the best. ``on_progress(event)`` is called after every
trial; ``should_stop()`` is asked between trials (what was found so far is kept).

**GPU targets.** ``tune(..., target="cuda -model=a100")`` (any string
:class:`engine.gpu.Target` accepts naming a CUDA GPU) tunes for that GPU: ``space="auto"``
is then the GPU rules (:mod:`.auto_gpu`); each candidate is built with
:func:`engine.gpu.build.build_gpu`, run once at full size — on the GPU when this machine
has one, else in the emulator — and compared with the reference, and ranked by its kernel
time measured on the GPU or, without one, by the analytic model's time for the target's
GPU (:mod:`engine.gpu.model`; ``TuneResult.timing`` says "modeled for NVIDIA A100 ...").
A candidate the GPU build refuses (too many threads, too much shared memory for the
target) is a failed candidate, as a CPU candidate that does not compile.

**Another CPU.** ``tune(..., target="llvm -mcpu=haswell")`` samples the ``auto`` space
sized for that CPU's vector ISA (:class:`.space.AutoSpace`). A CPU of another architecture
(``"raspberry-pi-5"``, ``"llvm -mtriple=aarch64-linux-gnu"`` on this x86 machine) cannot
be timed here — no board, and qemu's times are the emulator's — so ``tune`` refuses it
with one sentence before searching (:func:`cpu_target_of`); its space is still built and
sampled with ``space_of("auto", "raspberry-pi-5")`` (NEON: whole 4-lane vectors).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from engine.codegen.isa import VectorISA, host_isa, isa_of
from engine.schedule import Schedule, Trace

from .cost_model import CostModel
from .database import Database, TrialRecord, trace_digest
from .measure import MeasureResult
from .runner import LocalRunner, Runner
from .search import STRATEGIES, Candidate, EvolutionConfig, Sampler, propose, throughput
from .space import Space, is_gpu_target, space_of
from .task import TuneError, TuneTask, task_of

__all__ = ["tune", "TuneResult", "ProgressEvent"]

MAX_TRIALS = 100_000


@dataclass
class ProgressEvent:
    """What ``on_progress`` receives after each trial."""

    done: int
    total: int
    record: TrialRecord
    best: TrialRecord | None
    elapsed: float
    numpy_seconds: float | None

    @property
    def eta(self) -> float | None:
        """Estimated seconds left (from the pace so far)."""
        if self.done <= 0:
            return None
        return self.elapsed / self.done * (self.total - self.done)


@dataclass
class TuneResult:
    """What a search found. ``records``: this run's trials in order; ``prior``: the records
    the database already held; ``best``: the fastest correct one of either."""

    task: TuneTask
    records: list[TrialRecord]
    prior: list[TrialRecord] = field(default_factory=list)
    numpy_seconds: float | None = None
    elapsed: float = 0.0
    stopped: bool = False
    space: str = ""
    strategy: str = ""

    @property
    def target(self) -> str:
        """The target tuned for ("llvm": this machine's CPU)."""
        return self.task.target or "llvm"

    @property
    def timing(self) -> str:
        """How the times were obtained: "measured on this machine's CPU", "measured on
        <GPU>" or "modeled for <GPU> (no GPU on this machine)"."""
        if not self.task.is_gpu:
            return "measured on this machine's CPU"
        for r in [self.best] + self.records:
            if r is not None and r.result.note:
                return r.result.note
        from engine.gpu.target import Target  # noqa: PLC0415
        return f"modeled for {Target(self.task.target).spec.display_name}"

    @property
    def best(self) -> TrialRecord | None:
        ok = [r for r in self.records + self.prior if r.ok]
        return min(ok, key=lambda r: r.seconds) if ok else None

    @property
    def best_trace(self) -> Trace | None:
        b = self.best
        return Trace.from_json(b.trace) if b is not None else None

    @property
    def best_schedule(self) -> Schedule | None:
        b = self.best
        return self.task.replay(b.trace) if b is not None else None

    @property
    def best_gflops(self) -> float | None:
        b = self.best
        return b.gflops if b is not None else None

    @property
    def best_seconds(self) -> float | None:
        b = self.best
        return b.seconds if b is not None else None

    def best_so_far(self) -> list[float | None]:
        """The best GFLOP/s after each trial of this run (the search's curve)."""
        out, best = [], None
        for r in self.records:
            if r.ok and r.gflops is not None and (best is None or r.gflops > best):
                best = r.gflops
            out.append(best)
        return out

    def top(self, k: int = 10) -> list[TrialRecord]:
        ok = [r for r in self.records + self.prior if r.ok]
        return sorted(ok, key=lambda r: r.seconds)[:k]


def tune(mod: Any, space: Any = "auto", trials: int = 64, strategy: str = "evolutionary",
         seed: int = 0, func_name: str | None = None, runner: Runner | None = None,
         database: Database | str | None = None, *, batch_size: int | None = None,
         evolution: EvolutionConfig | None = None,
         on_progress: Callable[[ProgressEvent], None] | None = None,
         should_stop: Callable[[], bool] | None = None,
         target: Any = None) -> TuneResult:
    """Search ``space`` on ``mod`` for ``trials`` measured candidates; see the module
    docstring. ``mod``: a workload name, ``(name, params)``, an ``engine.Schedule`` (its
    steps so far are the fixed prefix), an IRModule or a PrimFunc. ``target``: None or
    ``"llvm"`` for this machine's CPU, another CPU (module docstring), or a CUDA target
    (``"cuda -model=a100"``)."""
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if not isinstance(trials, int) or isinstance(trials, bool) or not 1 <= trials <= MAX_TRIALS:
        raise TuneError(f"trials must be a whole number from 1 to {MAX_TRIALS}, got {trials!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TuneError(f"seed must be an integer, got {seed!r}")
    cpu_target = cpu_target_of(target)
    gpu_target = None if cpu_target is not None else gpu_target_of(target)
    sp: Space = space_of(space, gpu_target or cpu_target)
    task = task_of(mod, func_name, sp.id, target=gpu_target)
    own_db = isinstance(database, str)
    db = Database(database) if own_db else database
    own_runner = runner is None
    run = runner if runner is not None else LocalRunner()
    try:
        return _search(task, sp, trials, strategy, seed, run, db, batch_size,
                       evolution or EvolutionConfig(), on_progress, should_stop)
    finally:
        if own_runner:
            run.close()
        if own_db and db is not None:
            db.close()


def cpu_target_of(target: Any) -> str | None:
    """``target`` when it is a CPU target other than plain ``"llvm"`` (a board name such as
    ``"raspberry-pi-5"``, ``"llvm -mtriple=aarch64-linux-gnu"``, ``"llvm -mcpu=haswell"``):
    the ``auto`` space is then sized for its vector ISA; None otherwise. A CPU of another
    architecture than this machine's is refused, before any search, with the sentence of
    :func:`unmeasurable_reason`."""
    if not isinstance(target, str) or is_gpu_target(target) or target.strip() in ("", "llvm"):
        return None
    try:
        isa = isa_of(target)
    except ValueError:
        return None          # not a CPU target this module reads: gpu_target_of says why
    reason = unmeasurable_reason(target, isa)
    if reason:
        raise TuneError(reason)
    return target.strip()


def unmeasurable_reason(target: str, isa: VectorISA) -> str | None:
    """The sentence saying why candidates for ``target`` cannot be measured here (an
    aarch64 board's code on an x86 machine), or None when this machine runs them."""
    if isa.arch == host_isa().arch:
        return None
    return (f"cannot tune for {target!r} on this machine: its candidates are {isa.arch} "
            f"code and this machine is {host_isa().arch} (no {isa.arch} board to time them "
            "on, and under qemu the times are the emulator's, not the board's); the space "
            f"itself can be built and sampled here: engine.tune.space.space_of('auto', "
            f"{target!r}).")


def gpu_target_of(target: Any) -> str | None:
    """The canonical CUDA target string of ``target``, or None for the CPU (None,
    ``"llvm"`` or an llvm Target); anything else is refused with the target's sentence."""
    if target is None:
        return None
    from engine.gpu.target import Target, TargetError  # noqa: PLC0415
    try:
        t = target if isinstance(target, Target) else Target(str(target))
    except TargetError as e:
        raise TuneError(f"bad target {str(target)!r}: {e}") from None
    if t.kind.name == "llvm":
        return None
    return str(t)


def _search(task: TuneTask, space: Space, trials: int, strategy: str, seed: int,
            runner: Runner, db: Database | None, batch_size: int | None,
            cfg: EvolutionConfig, on_progress, should_stop) -> TuneResult:
    t0 = time.perf_counter()
    _import_in_background()
    sampler = Sampler(task, space, seed)
    model = CostModel(seed=seed)
    measured: dict[str, tuple[Candidate, float]] = {}
    prior = db.records(task) if db is not None else []
    _learn_prior(prior, sampler, model, measured)
    result = TuneResult(task, [], prior, space=space.id, strategy=strategy)
    result.numpy_seconds = runner.numpy_seconds(task) if task.workload is not None else None
    batch = batch_size or max(4, min(16, trials // 4))
    stop = should_stop or (lambda: False)
    while len(result.records) < trials and not stop():
        want = min(batch, trials - len(result.records))
        cands = propose(strategy, sampler, model, want, measured, cfg,
                        replay=lambda jobs: runner.replay(task, jobs, space) or sampler.run(jobs))
        if not cands:
            if not result.records and not prior:
                raise TuneError(f"the search space gave no candidate "
                                f"({sampler.failures} draws refused; last: "
                                f"{sampler.last_error or 'every draw was a duplicate'})")
            break  # every program of the space has been measured
        feats, tps = [], []

        def record(i: int, res, cands=cands) -> None:
            c = cands[i]
            rec = TrialRecord(c.doc, res, trial=len(result.records) + 1, source=c.source)
            result.records.append(rec)
            tp = throughput(res.gflops, res.seconds, res.ok)
            measured[c.digest] = (c, tp)
            feats.append(c.features)
            tps.append(tp)
            if db is not None:
                db.add(task, c.doc, res)
            if on_progress is not None:
                on_progress(ProgressEvent(len(result.records), trials, rec, result.best,
                                          time.perf_counter() - t0, result.numpy_seconds))
        runner.measure(task, [c.doc for c in cands], on_result=record)
        model.update(feats, tps)
        settle_best(runner, task, result, db)
    result.elapsed = time.perf_counter() - t0
    result.stopped = len(result.records) < trials and stop()
    return result


def settle_best(runner: Runner, task: TuneTask, result: "TuneResult",
                db: Database | None = None, tries: int = 3) -> None:
    """Settle the run's best after a round: while the fastest record as measured has not
    been confirmed, it and the runner-up are timed again side by side
    (:meth:`Runner.confirm`) and keep those times (``TrialRecord.confirmed``; at most
    ``tries`` confirmations). ``db``: where the confirmed times are stored too.

    On a shared machine one measurement can be off by a third either way (another process
    takes a core for a while, or leaves one idle); without this a lucky measurement of an
    ordinary candidate would be reported as the best, and stay so.
    """
    for _ in range(tries):
        ranked = sorted((r for r in result.records + result.prior if r.ok),
                        key=lambda r: r.seconds)
        if len(ranked) < 2 or ranked[0].confirmed:
            return
        if (ranked[0].result.note or "").startswith("modeled"):
            return  # the analytic model's times do not vary: nothing to confirm
        best, rival = ranked[0], ranked[1]
        times = runner.confirm(task, [rival.trace, best.trace])
        if len(times) != 2 or None in times:
            return
        for rec, seconds in zip((rival, best), times):
            _retimed(rec.result, seconds)
            rec.confirmed = True
            if db is not None:
                db.add(task, rec.trace, rec.result, confirmed=True)


def _retimed(res: MeasureResult, seconds: float) -> None:
    """``res`` takes a confirmation's time (its GFLOP/s scaled to match)."""
    if res.gflops and res.seconds:
        res.gflops = res.gflops * res.seconds / seconds
    res.seconds = seconds


def _import_in_background() -> None:
    """Import LightGBM (seconds, the first time) while the first round is measured."""
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415
    if "lightgbm" not in sys.modules:
        threading.Thread(target=_import_lightgbm, daemon=True).start()


def _import_lightgbm() -> None:
    try:
        import lightgbm  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001 - the model says so when it trains
        pass


def _learn_prior(prior: list[TrialRecord], sampler: Sampler, model: CostModel,
                 measured: dict) -> None:
    """Records of earlier runs: never measured again, and the model's first lesson."""
    feats, tps = [], []
    for rec in prior:
        f = sampler.features_of(rec.trace)
        if f is None:
            continue
        c = Candidate(rec.trace, trace_digest(rec.trace), f, "database")
        tp = throughput(rec.gflops, rec.seconds, rec.ok)
        measured[c.digest] = (c, tp)
        feats.append(f)
        tps.append(tp)
    if feats:
        model.update(feats, tps)
