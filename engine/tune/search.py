"""Search strategies: which candidates to measure next.

* **random** — fresh samples of the space (each a seeded schedule the space function ran
  on), never one measured before;
* **evolutionary** (MetaSchedule's ``EvolutionarySearch``) — a population made of the best
  measured candidates and fresh samples is evolved for a few generations: children are
  *mutations* of parents chosen among the best predicted (one sampling decision changed: a
  tile factor moved to another level, as MetaSchedule's ``MutateTileSize``, or one decision
  drawn again), each child is replayed (an illegal one is dropped) and scored by the cost
  model; the best predicted candidates not yet measured are measured, plus a few random
  ones (epsilon-greedy) so the model keeps seeing the rest of the space. Until the model
  is trained (after the first round) the search samples at random.

:class:`Sampler` makes candidates (sampling, mutating, replaying, features); :func:`propose`
picks the next batch.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from engine.arith.factor import prime_divisors
from engine.schedule import ScheduleError, Trace, TraceError

from .cost_model import CostModel
from .database import trace_digest
from .features import program_features
from .space import Space
from .task import TuneError, TuneTask

__all__ = ["Candidate", "Sampler", "propose", "STRATEGIES", "EvolutionConfig", "Mutation",
           "replay_here"]

STRATEGIES = ("evolutionary", "random")
#: at most this many programs' features are remembered by a sampler
MEMO_LIMIT = 20_000
_SAMPLING = ("SamplePerfectTile", "SampleCategorical", "SampleComputeLocation")


@dataclass
class Candidate:
    """A trace to measure: its document (decisions included), identity and features."""

    doc: dict
    digest: str
    features: list
    source: str = "random"


@dataclass
class EvolutionConfig:
    """The evolutionary search's knobs (MetaSchedule's, scaled to a small machine)."""

    population: int = 32
    generations: int = 2
    init_measured_ratio: float = 0.25
    epsilon: float = 0.15
    tile_move_probability: float = 0.7


class Sampler:
    """Makes candidates of ``space`` for ``task`` from a seeded generator."""

    def __init__(self, task: TuneTask, space: Space, seed: int = 0):
        self.task = task
        self.space = space
        self.mod = task.module()
        self.rng = random.Random(seed)
        self.prefix_len = task.prefix_length()
        self.failures = 0
        self.last_error: str | None = None
        # digest -> features of every program replayed so far: a mutation whose trace is
        # fully decided and already known is not replayed again (a replay is most of the cost
        # of proposing)
        self._features: dict[str, list] = {}

    def _candidate(self, sch, source: str) -> Candidate:
        doc = sch.trace.as_json()
        digest = trace_digest(doc)
        feats = self._features.get(digest)
        if feats is None:
            feats = program_features(sch.mod, self.task.func_name)
            if len(self._features) < MEMO_LIMIT:
                self._features[digest] = feats
        return Candidate(doc, digest, feats, source)

    def random(self) -> Candidate | None:
        """A fresh sample of the space (None if the space refused this draw)."""
        return self.finish_fresh(self.run([self.fresh_job()])[0])

    def run(self, jobs: list[tuple]) -> list[tuple]:
        """Fresh samples and mutated traces run in this process (:func:`replay_here`)."""
        return replay_here(self.task, self.mod, jobs, self.space)

    def fresh_job(self) -> tuple:
        """The job of a fresh sample (its seed drawn here, so a search is reproducible
        however the jobs are spread): ``(None, seed)``, for :func:`replay_here`."""
        return (None, self.rng.randrange(1 << 30))

    def finish_fresh(self, replayed: tuple) -> Candidate | None:
        """The candidate of a fresh sample from its job's result (None if refused)."""
        return self._finish(replayed, "random")

    def _finish(self, replayed: tuple, source: str,
                known: set | None = None) -> Candidate | None:
        """A job's result ``(trace, features, error)`` as a candidate: None when it was
        refused (counted, its reason kept) or its program is in ``known``."""
        doc, feats, error = replayed
        if doc is None:
            self.failures += 1
            self.last_error = error
            return None
        digest = trace_digest(doc)
        if known is not None and digest in known:
            return None
        if len(self._features) < MEMO_LIMIT:
            self._features.setdefault(digest, feats)
        return Candidate(doc, digest, feats, source)

    def features_of(self, doc: dict) -> list | None:
        """The features of a stored trace (None when it no longer replays)."""
        try:
            sch = self.task.replay(doc, mod=self.mod)
        except (ScheduleError, TraceError, TuneError):
            return None
        return program_features(sch.mod, self.task.func_name)

    def mutate(self, doc: dict, cfg: EvolutionConfig,
               known: set | None = None) -> Candidate | None:
        """One sampling decision of ``doc`` changed (after the prefix); None when the
        trace has none to change, the changed trace does not replay, or it gives a program
        whose digest is in ``known`` (its features are then not computed)."""
        plan = self.plan_mutation(doc, cfg, known)
        if plan is None or isinstance(plan, Candidate):
            return plan
        return self.finish_mutation(plan, self.run([plan.job])[0], known)

    def plan_mutation(self, doc: dict, cfg: EvolutionConfig,
                      known: set | None = None) -> "Candidate | Mutation | None":
        """The random part of :meth:`mutate` (every draw from this sampler's generator, so
        a search is reproducible however the replays are spread): a Candidate when the
        child is fully decided and was replayed before, a :class:`Mutation` to replay, or
        None (nothing to change, the change is refused, or the child is ``known``)."""
        decisions = {int(n): d for n, d in doc.get("decisions", [])}
        insts = doc.get("insts", [])
        used = _used_names(insts)
        positions = [n for n in decisions if n >= self.prefix_len and n < len(insts)
                     and insts[n][0] in _SAMPLING
                     and any(o in used for o in insts[n][3])]
        if not positions:
            return None
        n = self.rng.choice(positions)
        new = None
        if insts[n][0] == "SamplePerfectTile" and self.rng.random() < cfg.tile_move_probability:
            new = _move_tile_factor(self.rng, list(decisions[n]), _innermost_bound(insts[n]))
        seed = self.rng.randrange(1 << 30)
        try:
            decided = Trace.from_json(doc).with_decision(n, new).as_json()  # None: drawn again
        except (TraceError, TypeError, ValueError) as e:
            self.failures += 1
            self.last_error = str(e)
            return None
        if new is not None:  # every decision is known: so is the program's identity
            digest = trace_digest(decided)
            if known is not None and digest in known:
                return None
            feats = self._features.get(digest)
            if feats is not None:  # replayed before (so it replays): no need again
                return Candidate(decided, digest, feats, "evolved")
        return Mutation((decided, seed))

    def finish_mutation(self, plan: "Mutation", replayed: tuple,
                        known: set | None = None) -> Candidate | None:
        """The child of ``plan`` from its replay (``(trace, features, error)``)."""
        return self._finish(replayed, "evolved", known)


@dataclass
class Mutation:
    """A child to replay: ``job`` is (trace document, seed for a decision drawn again)."""

    job: tuple


#: what a replay of a mutated trace may refuse with (the child is then dropped)
REPLAY_REFUSALS = (ScheduleError, TraceError, TuneError, TypeError, ValueError)
#: what a fresh sample may be refused with (anything else is a bug of the space function)
SAMPLE_REFUSALS = (ScheduleError, TraceError, TuneError)


def replay_here(task: TuneTask, mod, jobs: list[tuple], space: Space | None = None
                ) -> list[tuple]:
    """Run the search's jobs in this process: ``(trace, seed)`` replays a mutated trace (a
    decision left out is drawn from ``seed``), ``(None, seed)`` applies ``space`` to a
    fresh schedule seeded ``seed``. Each gives ``(trace, features, None)``, or ``(None,
    None, reason)`` when refused. Runners run the same function in their worker
    processes (:meth:`engine.tune.runner.Runner.replay`)."""
    out = []
    for doc, seed in jobs:
        try:
            if doc is None:
                sch = task.new_schedule(seed, mod=mod)
                space.apply(sch)
            else:
                sch = task.replay(doc, mod=mod, seed=seed)
        except Exception as e:  # noqa: BLE001 - a bug in a space function is the user's
            refused = isinstance(e, SAMPLE_REFUSALS if doc is None else REPLAY_REFUSALS)
            what = "the space function" if doc is None else "the replay"
            out.append((None, None, str(e) if refused
                        else f"{what} raised {type(e).__name__}: {e}"))
            continue
        out.append((sch.trace.as_json(), program_features(sch.mod, task.func_name), None))
    return out


def _used_names(insts: list) -> set:
    """Handle names some instruction takes as input (a sample whose value no instruction
    uses only steered the space function's Python code: changing it changes nothing)."""
    out: set = set()
    for inst in insts:
        for x in inst[1]:
            if isinstance(x, list):
                out.update(y for y in x if isinstance(y, str))
            elif isinstance(x, str):
                out.add(x)
    return out


def _innermost_bound(inst: list) -> int:
    attrs = inst[2] if len(inst) > 2 else []
    most = attrs[1] if len(attrs) > 1 else 16
    return most if isinstance(most, int) and most > 0 else 1 << 30


def _move_tile_factor(rng: random.Random, tile: list[int], most: int) -> list[int] | None:
    """MetaSchedule's MutateTileSize: move a prime factor from one level to another."""
    if len(tile) < 2:
        return None
    sources = [i for i, f in enumerate(tile) if f > 1]
    if not sources:
        return None
    src = rng.choice(sources)
    primes = prime_divisors(tile[src])
    p = rng.choice(primes)
    dst = rng.choice([i for i in range(len(tile)) if i != src])
    out = list(tile)
    out[src] //= p
    out[dst] *= p
    if out[-1] > most:
        return None
    return out


# --------------------------------------------------------------------------- proposing
def _fresh(sampler: Sampler, n: int, seen: set[str], replay: Callable | None = None,
           tries_per: int = 12) -> list[Candidate]:
    """Up to ``n`` fresh samples whose programs are not in ``seen`` (drawn in batches of
    what is still missing, at most ``n * tries_per`` draws)."""
    replay = replay or sampler.run
    out: list[Candidate] = []
    budget = n * tries_per
    while len(out) < n and budget > 0:
        k = min(budget, n - len(out))
        budget -= k
        for res in replay([sampler.fresh_job() for _ in range(k)]):
            c = sampler.finish_fresh(res)
            if c is not None and c.digest not in seen:
                seen.add(c.digest)
                out.append(c)
    return out


def propose(strategy: str, sampler: Sampler, model: CostModel, n: int,
            measured: dict[str, tuple[Candidate, float]], cfg: EvolutionConfig,
            replay: Callable[[list[tuple]], list[tuple]] | None = None) -> list[Candidate]:
    """The next ``n`` candidates to measure (fewer when the space has no more).

    ``measured``: digest -> (candidate, throughput) of everything measured so far;
    ``replay``: runs a batch of fresh samples or mutated traces (:func:`replay_here`'s
    contract), e.g. spread over a runner's idle workers; by default in this process.
    """
    replay = replay or sampler.run
    seen = set(measured)
    if strategy == "random" or not model.trained:
        return _fresh(sampler, n, seen, replay)
    # ---- evolutionary: the population starts from the best measured and fresh samples
    rng = sampler.rng
    best = sorted((v for v in measured.values() if v[1] > 0), key=lambda v: -v[1])
    n_measured = min(len(best), int(cfg.population * cfg.init_measured_ratio))
    population = [c for c, _ in best[:n_measured]]
    randoms = _fresh(sampler, cfg.population - n_measured, set(seen), replay)
    population += randoms
    pool: dict[str, Candidate] = {c.digest: c for c in randoms}
    scores = dict(zip([c.digest for c in population],
                      model.predict([c.features for c in population])))
    for c, t in best[:n_measured]:
        scores[c.digest] = max(scores.get(c.digest, 0.0), t / max(best[0][1], 1e-30))
    for _ in range(cfg.generations):
        ranked = sorted(population, key=lambda c: -scores[c.digest])
        parents = ranked[:max(2, len(ranked) // 2)]
        children = []
        plans = []
        for _ in range(cfg.population):
            plan = sampler.plan_mutation(rng.choice(parents).doc, cfg, known=scores.keys())
            if isinstance(plan, Mutation):
                plans.append(plan)
            elif plan is not None and plan.digest not in scores:
                children.append(plan)
                scores[plan.digest] = 0.0
        results = replay([p.job for p in plans]) if plans else []
        for plan, replayed in zip(plans, results):
            child = sampler.finish_mutation(plan, replayed, known=scores.keys())
            if child is None:
                continue
            children.append(child)
            scores[child.digest] = 0.0
        if children:
            for c, s in zip(children, model.predict([c.features for c in children])):
                scores[c.digest] = float(s)
                if c.digest not in seen:
                    pool[c.digest] = c
        population = sorted(population + children, key=lambda c: -scores[c.digest])
        population = population[:cfg.population]
    unmeasured = sorted((c for c in pool.values() if c.digest not in seen),
                        key=lambda c: -scores[c.digest])
    n_random = int(round(n * cfg.epsilon))
    chosen = unmeasured[:n - n_random]
    rest = [c for c in unmeasured[n - n_random:] if c.source == "random"]
    rng.shuffle(rest)
    chosen += rest[:n - len(chosen)]
    if len(chosen) < n:  # a small space: top up with anything not measured yet
        taken = {c.digest for c in chosen} | seen
        chosen += _fresh(sampler, n - len(chosen), taken, replay)
    return chosen[:n]


def throughput(gflops: float | None, seconds: float | None, ok: bool) -> float:
    """What the model learns: GFLOP/s (or runs per second), 0 for a failed candidate."""
    if not ok or not seconds:
        return 0.0
    return float(gflops) if gflops else 1.0 / float(seconds)

