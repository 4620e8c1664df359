"""The web app's one measurement interface: stored results first, then one job per program.

:class:`StepMeasurer` is what every pane, route and teaching page asks for a measurement
(``app.extensions["measurer"]``; see :func:`app.service.install`). Behind it, jobs run on a
pool — :class:`app.service.pool.MeasurePool`'s worker processes in the server; any object
with the same ``submit(job, urgent=...) -> Ticket`` (tests use one that runs jobs in their
own process) — and results are kept in :class:`app.store.Store`.
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import json
import logging
import pickle
import threading
import time
from typing import Any, Callable

from engine.ir import structural_hash

from ..kept import MiB, KeptByIdentity
from ..store import machine_fingerprint
from .protocol import (Job, JobResult, PoolClosed, PoolUnavailable, QueueFull, loop_index,
                       module_bytes, step_dict, step_job)
from .tickets import Ticket

log = logging.getLogger(__name__)

__all__ = ["StepMeasurer"]

#: who the jobs submitted in this context are for (see :meth:`StepMeasurer.on_behalf_of`)
_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("measurement_client",
                                                                     default=None)


class TuneBusy(RuntimeError):
    """The client already has a tuning job queued or running."""


class StepMeasurer:
    """The web app's measurement service: stored results first, then one job per program.

    * a step measured before — by anyone, before a restart — comes from the store at once;
    * concurrent requests for the same step share one job (a class clicking the course's
      steps in the same order measures each program once);
    * finished results are stored, except transient failures (timeout, crash, out-of-memory,
      shutdown, cancelled), which are retried the next time the step is asked for.

    ``pool`` is a pool (anything with ``submit(job, urgent=...) -> Ticket``) or a
    function that makes one on first use (so an app that never measures starts no process).

    The services (each blocking, or non-blocking as ``submit_*`` + ``*_result_of`` +
    ``cached_*``; ``prefetch`` starts a step without waiting):

    ========================================  ==============================================
    ``measure(mod, workload, params, ...)``   the step dict: compile + check + time
                                              (:func:`app.service.timing.measure_step`)
    ``cache(mod, func_name)``                 ``CacheReport.to_dict()`` or
                                              ``{"error": sentence}``
    ``pattern(mod, func_name, loop, it)``     ``AccessPattern.to_dict()`` (or ValueError)
    ``source(mod, kind)``                     the code pane: ``(text, None)`` or
                                              ``(None, sentence)``
    ``roofline()``                            the machine's measured roofs (one stored
                                              value per machine)
    ========================================  ==============================================

    Non-blocking use (the page shows "queued (position k)" and polls)::

        d, ticket = measurer.submit(mod, "mm_relu", {"n": 128})
        if d is None: position = ticket.position()       # later: measurer.result_of(ticket)

    ``submit`` raises :class:`QueueFull` when the queue is full (``measure`` turns that into
    an ``ok: False`` dict carrying the sentence).

    The jobs submitted inside ``with measurer.on_behalf_of(client):`` carry that client's
    key (``Job.client``): the pool's queue takes turns between clients and caps how many
    jobs one client has waiting.
    """

    _TRANSIENT = {"timeout", "crashed", "out-of-memory", "shutdown", "cancelled", "busy",
                  "pending", "unavailable"}
    _REMEMBER = {"timeout", "crashed", "out-of-memory"}
    #: How long a crash or out-of-memory result is answered from memory before the step is
    #: tried again; a timeout (which a busy machine can cause) is retried sooner.
    failure_ttl_s = 600.0
    timeout_ttl_s = 120.0

    def __init__(self, pool: Any, store: Any = None,
                 fingerprint: str | None = None, kind: str = "step",
                 wait_s: float | None = 120.0):
        self._pool = pool
        self.store = store
        self._fp = fingerprint
        self.kind = kind
        self.wait_s = wait_s
        self._lock = threading.RLock()
        self._inflight: dict[tuple, Ticket] = {}
        self._tunes: "collections.OrderedDict[str, Ticket]" = collections.OrderedDict()
        self._failed: "collections.OrderedDict[tuple, tuple[float, Any]]" = \
            collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def pool(self) -> Any:
        """The pool, started on first use; :class:`PoolUnavailable` if it cannot start
        (tried again on the next call).

        A pool started here begins with measuring the machine's peaks for the roofline view
        (:meth:`submit_roofline`) unless the store already has them: the first job, so the
        roofline is ready by the time a learner looks at it, and it never competes with a
        page's own request for the peaks."""
        made = False
        if not self.started:
            with self._lock:
                if not self.started:
                    try:
                        self._pool = self._pool()
                    except Exception as e:  # noqa: BLE001
                        log.exception("the measurement workers could not be started")
                        raise PoolUnavailable(
                            f"the measurement workers could not be started ({e}) — the "
                            f"step is kept but not measured") from e
                    made = True
        if made:
            try:
                with self.on_behalf_of(None):      # the server's own job, nobody's turn
                    self.submit_roofline()
            except Exception:  # noqa: BLE001 - the roofline pane asks again and reports it
                log.exception("could not queue the measurement of the machine's peaks")
        return self._pool  # type: ignore[return-value]

    @staticmethod
    @contextlib.contextmanager
    def on_behalf_of(client: str | None):
        """Jobs submitted in this block (this thread) are ``client``'s: the queue is fair
        between clients (``client`` is e.g. the request's remote address)."""
        token = _CLIENT.set(client)
        try:
            yield
        finally:
            _CLIENT.reset(token)

    # ------------------------------------------------------------------ tuning
    #: seconds a tuning job may take per trial (compile, check, time), and at most
    TUNE_S_PER_TRIAL = 6.0
    TUNE_MAX_S = 1800.0

    def submit_tune(self, workload: str, params: dict[str, Any], trace: Any,
                    spec: dict[str, Any], owner: str | None = None) -> Ticket:
        """Queue a tuning job (the current client's: it takes its turns in the fair queue;
        ``owner``'s, the learner who may stop it) searching from ``trace`` (a fixed prefix)
        with ``spec`` (space, trials, strategy, seed, database); its trials arrive as the
        ticket's partial results."""
        limit = min(self.TUNE_MAX_S, 60.0 + self.TUNE_S_PER_TRIAL * int(spec.get("trials", 16)))
        return self._submit_tune(Job(actions=("tune",), workload=workload, params=dict(params),
                                     trace=trace, tune=dict(spec), time_limit_s=limit,
                                     owner=owner))

    def submit_tune_functions(self, doc: dict[str, Any], spec: dict[str, Any],
                              owner: str | None = None) -> Ticket:
        """Queue a model's "tune every function": one tuning job (the current client's, one
        search at a time like the Tune tab's) searching each of ``doc["functions"]`` in turn
        (see :func:`app.service.actions.act_tune`); its per-function progress arrives as the
        ticket's partial results (``f<i>``)."""
        n = len(doc.get("functions") or ())
        limit = min(self.TUNE_MAX_S, 60.0 + n * (
            10.0 + self.TUNE_S_PER_TRIAL * int(spec.get("trials", 16))))
        return self._submit_tune(Job(actions=("tune",), tune=dict(spec), time_limit_s=limit,
                                     module=pickle.dumps(doc, pickle.HIGHEST_PROTOCOL),
                                     owner=owner))

    #: searches running at once from one address (each learner: one at a time)
    TUNES_PER_ADDRESS = 4

    def _submit_tune(self, job: Job) -> Ticket:
        """Queue ``job`` for the current client (address) and ``job.owner`` (the learner):
        one running search per learner, at most :data:`TUNES_PER_ADDRESS` per address."""
        client = _CLIENT.get()
        owner = job.owner if job.owner is not None else client
        with self._lock:
            running = [t for t in self._tunes.values() if not t.done()]
        if any(t.owner == owner for t in running):
            raise TuneBusy("you already have a search running (one at a time per learner); "
                           "stop it or wait for it to finish")
        if client is not None and \
                sum(t.client == client for t in running) >= self.TUNES_PER_ADDRESS:
            raise TuneBusy(f"{self.TUNES_PER_ADDRESS} searches are already running from your "
                           "network address; wait for one of them to finish")
        ticket = self._submit(self.pool, dataclasses.replace(job, owner=owner))
        with self._lock:
            self._tunes[ticket.id] = ticket
            while len(self._tunes) > self.KEEP_TUNES:
                self._tunes.popitem(last=False)
        return ticket

    #: tuning jobs remembered (running or finished) for their pages
    KEEP_TUNES = 64

    def tune_ticket(self, ticket_id: str) -> Ticket | None:
        """A tuning job by its id (None when unknown or forgotten)."""
        if not isinstance(ticket_id, str) or len(ticket_id) > 64:
            return None
        with self._lock:
            return self._tunes.get(ticket_id)

    def _submit(self, pool: Any, job: Job, urgent: bool = False) -> Ticket:
        """``pool.submit`` with the job marked as the current client's."""
        client = _CLIENT.get()
        if client is not None and job.client is None:
            job = dataclasses.replace(job, client=client)
        return pool.submit(job, urgent=urgent)

    @property
    def started(self) -> bool:
        """True once there is a pool (given, or made on first use)."""
        return hasattr(self._pool, "submit")

    @property
    def fingerprint(self) -> str:
        if self._fp is None:
            self._fp = machine_fingerprint()
        return self._fp

    #: the hashes of the last programs hashed, by identity: a click asks for its program's
    #: hash several times (its prefetched step and cache jobs, the stored results the
    #: answer may carry), and the modules are immutable
    _HASHES: "KeptByIdentity[str]" = KeptByIdentity(4 * MiB)

    @classmethod
    def program_hash(cls, mod: Any) -> str:
        return cls._HASHES.get(mod, lambda: structural_hash(mod))

    def _kind(self, workload: str | None, params: dict[str, Any], func_name: str | None,
              target: str | None = None) -> str:
        """The store's kind of a step result; a GPU ``target``'s results are kept apart
        from the CPU's (and from another GPU's) by naming it (the CPU's kind is unchanged,
        so results stored before GPU targets existed stay valid)."""
        kind = (f"{self.kind}:{workload or '-'}:{func_name or '-'}:"
                f"{json.dumps(params, sort_keys=True, default=str)}")
        return kind if not target else f"{kind}:{target}"

    # generic: stored value, or one shared job ------------------------------------------------
    def _lookup_or_submit(self, h: str, kind: str, make_job: Callable[[], Job],
                          to_value: Callable[[JobResult], Any], urgent: bool = False
                          ) -> tuple[Any, Ticket | None]:
        if self.store is not None:
            got = self.store.get_result(h, self.fingerprint, kind)
            if got is not None:
                with self._lock:
                    self.hits += 1
                return got, None
        key = (h, kind)
        with self._lock:
            failed = self._failed.get(key)
            if failed is not None:
                until, value = failed
                if time.monotonic() < until:
                    self.hits += 1
                    return value, None
                del self._failed[key]
        pool = self.pool                      # (starts the pool on first use)
        with self._lock:
            t = self._inflight.get(key)
            if t is not None and (not t.done() or t.result(0).status not in self._TRANSIENT):
                self.hits += 1                 # running, or finished and being stored
                return None, t
            self.misses += 1
            ticket = self._submit(pool, make_job(), urgent=urgent)
            ticket.program_hash = h  # type: ignore[attr-defined]
            self._inflight[key] = ticket
        ticket.add_done_callback(
            lambda r, key=key: self._done(key, to_value, r))
        return None, ticket

    def _stored(self, h: str, kind: str) -> Any:
        """The remembered failure or the stored value of ``(h, kind)``, or None; never
        submits (what the ``cached*`` methods answer)."""
        with self._lock:
            failed = self._failed.get((h, kind))
        if failed is not None and time.monotonic() < failed[0]:
            return failed[1]
        if self.store is None:
            return None
        return self.store.get_result(h, self.fingerprint, kind)

    def _done(self, key: tuple, to_value: Callable[[JobResult], Any], result: JobResult) -> None:
        try:
            if result.status in self._REMEMBER:
                # A crash, a timeout or running out of memory would happen again: remember
                # the sentence for a while (in memory only — a restart tries again) instead
                # of re-running the program every time its page asks.
                ttl = (self.timeout_ttl_s if result.status == "timeout"
                       else self.failure_ttl_s)
                with self._lock:
                    self._failed[key] = (time.monotonic() + ttl, to_value(result))
                    while len(self._failed) > 1000:
                        self._failed.popitem(last=False)
                return
            if self.store is None or result.status in self._TRANSIENT:
                return
            value = to_value(result)
            if isinstance(value, dict) and value.get("stage") == "unavailable":
                return
            h, kind = key
            self.store.put_result(h, self.fingerprint, kind, value)
        finally:
            # Only now: until the store has it, requests for this key use the ticket.
            with self._lock:
                self._inflight.pop(key, None)

    def _wait(self, ticket: Ticket, timeout: float | None) -> JobResult:
        try:
            return ticket.result(self.wait_s if timeout is None else timeout)
        except TimeoutError:
            pos = ticket.position()
            where = f"queued (position {pos})" if pos else "still running"
            return JobResult("pending", f"the measurement is {where}; reload to see it")

    # measure_step -----------------------------------------------------------------------------
    def submit(self, mod: Any, workload: str | None, params: dict[str, Any], *,
               func_name: str | None = None, baseline: Any = None,
               time_limit_s: float | None = None, target: str | None = None
               ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored result, None) or (None, ticket of the job measuring it); ``target``: a
        GPU target string (None: this machine's CPU)."""
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, self._kind(workload, params, func_name, target),
            lambda: step_job(mod, workload, params, func_name=func_name, baseline=baseline,
                             time_limit_s=time_limit_s, program_hash=h, target=target),
            lambda r: step_dict(r, h))

    def cached(self, mod: Any, workload: str | None, params: dict[str, Any],
               func_name: str | None = None, program_hash: str | None = None,
               target: str | None = None) -> dict[str, Any] | None:
        """The stored (or remembered failed) step dict, or None; never submits."""
        return self._stored(program_hash or self.program_hash(mod),
                            self._kind(workload, params, func_name, target))

    def result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        """The step dict of a finished (or, with ``timeout``, awaited) ticket."""
        return step_dict(ticket.result(timeout), getattr(ticket, "program_hash", ""))

    def measure(self, mod: Any, workload: str | None, params: dict[str, Any], *,
                func_name: str | None = None, baseline: Any = None,
                timeout: float | None = None, target: str | None = None) -> dict[str, Any]:
        """Blocking: the step dict, from the store or from a worker (``target``: a GPU
        target string, None: the CPU).  Never raises for a bad program or a busy server:
        those come back as ``ok: False`` with the sentence."""
        try:
            got, ticket = self.submit(mod, workload, params, func_name=func_name,
                                      baseline=baseline, target=target)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            status = {QueueFull: "busy", PoolClosed: "shutdown"}.get(type(e), "unavailable")
            return step_dict(JobResult(status, str(e)), self.program_hash(mod))
        if got is not None:
            return got
        assert ticket is not None
        return step_dict(self._wait(ticket, timeout), ticket.program_hash)  # type: ignore[attr-defined]

    def prefetch(self, mod: Any, workload: str | None, params: dict[str, Any], *,
                 func_name: str | None = None, baseline: Any = None,
                 cache: bool = True, target: str | None = None) -> None:
        """Start measuring (and cache-simulating) a step without waiting; never raises.

        Called right after a step is applied: the pane's own request then finds the job
        running (it shares the ticket) or the result stored. A GPU ``target``'s step is
        not cache-simulated (the simulation models this CPU's caches)."""
        try:
            self.submit(mod, workload, params, func_name=func_name, baseline=baseline,
                        target=target)
            if cache and not target:
                self._submit_cache(mod, func_name)
        except (QueueFull, PoolClosed, PoolUnavailable):
            pass
        except Exception:  # noqa: BLE001 - the pane's request will report any failure
            log.exception("prefetching a measurement failed")

    # cache_step -------------------------------------------------------------------------------
    @staticmethod
    def _cache_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("cache"), dict):
            return r.data["cache"]
        return {"error": f"cache simulation failed: {r.message or r.status}"}

    def _submit_cache(self, mod: Any, func_name: str | None):
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, f"cache:{func_name or '-'}",
            lambda: Job(actions=("cache",), module=module_bytes(mod),
                        func_name=func_name, background=True), self._cache_value)

    def submit_cache(self, mod: Any, func_name: str | None = None
                     ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored cache report, None) or (None, ticket); :meth:`cache_result_of` reads a
        finished ticket.  Raises :class:`QueueFull` when the queue is full."""
        return self._submit_cache(mod, func_name)

    def cache_result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        return self._cache_value(ticket.result(timeout))

    def cached_cache(self, mod: Any, func_name: str | None = None) -> dict[str, Any] | None:
        """The stored (or remembered failed) cache report, or None; never submits."""
        return self._stored(self.program_hash(mod), f"cache:{func_name or '-'}")

    def pattern(self, mod: Any, func_name: str, loop: Any, iteration: int,
                timeout: float | None = None) -> dict[str, Any]:
        """``engine.cache.access_pattern(mod, func_name, loop, iteration).to_dict()``
        computed by a worker (it builds and runs instrumented code); ``loop`` is a ``For``
        node of ``mod[func_name]``.  Raises ``ValueError`` with a sentence when the worker
        could not compute it (the engine's refusal, a crash, a timeout, a busy queue)."""
        index = loop_index(mod[func_name], loop)
        if index is None:
            raise ValueError("the loop is not part of this program")
        job = Job(actions=("pattern",), module=module_bytes(mod),
                  func_name=func_name, loop_index=index, iteration=int(iteration))
        try:
            r = self._wait(self._submit(self.pool, job, urgent=True), timeout)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            raise ValueError(str(e)) from None
        if r.ok and isinstance(r.data.get("pattern"), dict):
            return r.data["pattern"]
        raise ValueError(r.message or f"the access pattern could not be computed ({r.status})")

    def cache(self, mod: Any, func_name: str | None = None,
              timeout: float | None = None) -> dict[str, Any]:
        """``engine.cache.simulate(mod, func_name).to_dict()`` from a worker (or the store);
        ``{"error": sentence}`` when it cannot be simulated."""
        try:
            got, ticket = self._submit_cache(mod, func_name)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return {"error": str(e)}
        if got is not None:
            return got
        return self._cache_value(self._wait(ticket, timeout))  # type: ignore[arg-type]

    # roofline ---------------------------------------------------------------------------------
    #: The store key of the machine's peaks: one value per machine fingerprint (the
    #: fingerprint already names the CPU, the core count and the compiler's code).
    ROOFLINE_KEY = ("machine", "roofline")
    #: The peak kernels take about a second on an idle machine; a loaded one may need more
    #: than a step's time limit.
    roofline_time_limit_s = 60.0

    @staticmethod
    def _roofline_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("roofline"), dict):
            return r.data["roofline"]
        return {"error": f"the machine's peaks could not be measured: "
                         f"{r.message or r.status}"}

    def submit_roofline(self) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored peaks, None) or (None, ticket of the job measuring them).

        The value is ``engine.roofline.machine_peaks()`` as measured in a worker (see
        :func:`app.service.actions.act_roofline`), or ``{"error": sentence}``; it is stored under
        :data:`ROOFLINE_KEY` for this machine's fingerprint, so the peaks are measured once
        per machine and compiler, not once per server start. Concurrent requests share one
        job. Raises :class:`QueueFull` when the queue is full."""
        h, kind = self.ROOFLINE_KEY
        return self._lookup_or_submit(
            h, kind, lambda: Job(actions=("roofline",), time_limit_s=self.roofline_time_limit_s),
            self._roofline_value)

    def roofline_result_of(self, ticket: Ticket, timeout: float | None = None
                           ) -> dict[str, Any]:
        """The peaks (or ``{"error": sentence}``) of a finished roofline ticket."""
        return self._roofline_value(ticket.result(timeout))

    def cached_roofline(self) -> dict[str, Any] | None:
        """The stored (or remembered failed) peaks, or None; never submits."""
        return self._stored(*self.ROOFLINE_KEY)

    def roofline(self, timeout: float | None = None) -> dict[str, Any]:
        """Blocking: the machine's peaks from the store or from a worker, or
        ``{"error": sentence}`` (a busy queue, a timeout, a failed kernel)."""
        try:
            got, ticket = self.submit_roofline()
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return {"error": str(e)}
        if got is not None:
            return got
        return self._roofline_value(self._wait(ticket, timeout))  # type: ignore[arg-type]

    # model page -------------------------------------------------------------------------------
    model_time_limit_s = 120.0

    @staticmethod
    def _model_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("model"), dict):
            return r.data["model"]
        if r.status == "pending":
            return {"pending": r.message}
        return {"error": f"the model could not be measured: {r.message or r.status}"}

    def submit_model(self, key: str, doc: dict[str, Any]
                     ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored model measurement, None) or (None, ticket).  ``key`` names the model,
        its batch and every stage's program (the caller hashes them); ``doc`` is what
        :func:`app.service.actions.act_model` reads (stages, input, reference output, test
        data).  Raises :class:`QueueFull` when the queue is full."""
        return self._lookup_or_submit(
            key, "model", lambda: Job(actions=("model",),
                                      module=pickle.dumps(doc, pickle.HIGHEST_PROTOCOL),
                                      time_limit_s=self.model_time_limit_s),
            self._model_value)

    def model_result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        return self._model_value(self._wait(ticket, timeout))

    # model import ---------------------------------------------------------------------------
    #: seconds a worker may take to read, fold and run an uploaded model once
    import_time_limit_s = 60.0

    @staticmethod
    def _import_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("model_import"), dict):
            return r.data["model_import"]
        if r.status == "pending":
            return {"pending": r.message}
        return {"error": r.message or f"the model could not be read ({r.status})"}

    def submit_model_import(self, key: str, data: bytes, limits: dict[str, Any]
                            ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored import, None) or (None, ticket): an uploaded ONNX file read, folded and
        run once in numpy by a worker (:func:`app.service.actions.act_model_import`), within
        ``limits`` (OnnxLimits fields). The value is ``{"graph": doc, "reference": array
        doc}`` — data from a worker, for the caller to check — or ``{"error": sentence}``
        (a model that cannot be read; stored, so it is not read again) or
        ``{"pending": sentence}``. ``key`` names the file and the limits."""
        return self._lookup_or_submit(
            key, "model_import",
            lambda: Job(actions=("model_import",), time_limit_s=self.import_time_limit_s,
                        module=pickle.dumps({"onnx": bytes(data), "limits": dict(limits)},
                                            pickle.HIGHEST_PROTOCOL)),
            self._import_value)

    def import_result_of(self, ticket: Ticket, timeout: float | None = None
                         ) -> dict[str, Any]:
        return self._import_value(self._wait(ticket, timeout))

    # model export -------------------------------------------------------------------------
    #: seconds a worker may take to build a model's library (compile, link)
    export_time_limit_s = 180.0

    def submit_export(self, key: str, doc: dict[str, Any]) -> Ticket:
        """Queue building a model's deployable library (one shared job per ``key``, which
        names the program and the target): :func:`app.service.actions.act_export` reads
        ``doc`` (``module``: the runnable Relax module, ``target``, ``prefix``).  Nothing is
        stored: the files are megabytes, the web layer keeps them in memory (bounded)."""
        with self._lock:
            t = self._inflight.get(("export", key))
            if t is not None and not t.done():
                return t
        job = Job(actions=("export",), module=pickle.dumps(doc, pickle.HIGHEST_PROTOCOL),
                  time_limit_s=self.export_time_limit_s)
        ticket = self._submit(self.pool, job)
        with self._lock:
            self._inflight[("export", key)] = ticket
        ticket.add_done_callback(
            lambda r, k=("export", key): self._forget_inflight(k))
        return ticket

    def _forget_inflight(self, key: tuple) -> None:
        with self._lock:
            self._inflight.pop(key, None)

    def export_result_of(self, ticket: Ticket, timeout: float | None = None
                         ) -> dict[str, Any]:
        """``{"files": {name: base64}, ...}`` (a worker's data, for the caller to check),
        ``{"pending": sentence}`` or ``{"error": sentence}``."""
        r = self._wait(ticket, timeout)
        if r.ok and isinstance(r.data.get("export"), dict):
            return r.data["export"]
        if r.status == "pending":
            return {"pending": r.message}
        return {"error": r.message or f"the library could not be built ({r.status})"}

    # code pane --------------------------------------------------------------------------------
    @staticmethod
    def _source_value(r: JobResult) -> dict[str, Any]:
        if r.ok and isinstance(r.data.get("source"), dict):
            return {"source": r.data["source"]}
        return {"error": f"compile failed: {r.message or r.status}"}

    @staticmethod
    def source_text(d: dict[str, Any], kind: str) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, sentence)`` from a stored/finished source value."""
        if "source" in d:
            text = d["source"].get(kind)
            return (text, None) if text is not None else (None, f"no {kind} text")
        return None, d.get("error") or "no code"

    def submit_source(self, mod: Any, target: str | None = None
                      ) -> tuple[dict[str, Any] | None, Ticket | None]:
        """(stored source value, None) or (None, ticket) — an urgent job (it only
        compiles); read with :meth:`source_text` (``source_result_of`` for a ticket). For a
        GPU ``target`` the kinds are ``cuda``, ``ptx`` and ``resources`` (ptxas's report
        and the host's launches)."""
        h = self.program_hash(mod)
        return self._lookup_or_submit(
            h, "source" if not target else f"source:{target}",
            lambda: Job(actions=("compile", "source"), module=module_bytes(mod),
                        target=target),
            self._source_value, urgent=True)

    def source_result_of(self, ticket: Ticket, timeout: float | None = None) -> dict[str, Any]:
        return self._source_value(ticket.result(timeout))

    def source(self, mod: Any, kind: str = "ll-opt",
               timeout: float | None = None) -> tuple[str | None, str | None]:
        """(LLVM IR or assembly text, None) or (None, the sentence saying why not)."""
        try:
            got, ticket = self.submit_source(mod)
        except (QueueFull, PoolClosed, PoolUnavailable) as e:
            return None, str(e)
        d = got if got is not None else self._source_value(self._wait(ticket, timeout))  # type: ignore[arg-type]
        return self.source_text(d, kind)
