"""Challenges: exercises checked automatically on a learner's own trace.

Two kinds:

* :class:`ReachNest` — "reach this loop nest": the learner's program must be structurally
  equal to a target program (built by applying target actions to the workload), or its
  loop nest must match a pattern (see :mod:`engine.script.nest` for the pattern syntax).
* :class:`BeatTime` — "beat this time / GFLOP/s": the learner's program must be correct and
  at least ``speedup`` times faster than a reference schedule measured *in the same run*
  (same machine, same moment), and optionally reach ``gflops`` GFLOP/s.
* :class:`BeatModel` — "beat this schedule on a named GPU's model": the learner's program,
  built for the challenge's GPU ``target``, must be correct (emulated, race-checked when
  small) and its modeled time below a reference preset's (the course's schedules).

Every check returns a :class:`ChallengeResult` with ``ok``, a plain-language ``message``,
the measured figures and a share ``link`` of the learner's solution::

    from engine import challenges
    ch = challenges.get("mm_relu_course_nest")
    res = ch.check(sch)            # a Schedule, Trace, trace JSON (dict/str) or link token
    print(res.ok, res.message, res.link)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from engine import lessons
from engine.ir import structural_equal
from engine.lessons import ActionError, apply_action, validate_action
from engine.lessons import runner
from engine.notebook import explorer_link
from engine.script.nest import first_difference, match_nest, nest_lines

__all__ = ["Challenge", "ReachNest", "BeatTime", "BeatModel", "ChallengeResult", "ChallengeError", "names",
           "get", "all_challenges"]


class ChallengeError(ValueError):
    """A challenge is defined wrongly, or does not exist."""


@dataclass
class ChallengeResult:
    """Outcome of checking a learner's solution."""

    challenge: str
    ok: bool
    message: str
    details: dict = field(default_factory=dict)
    link: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    def to_dict(self) -> dict:
        return {"challenge": self.challenge, "ok": self.ok, "message": self.message,
                "details": dict(self.details), "link": self.link}


@dataclass
class Challenge:
    """Base: an id, a title, the workload (name + params) and how to judge a solution."""

    id: str
    title: str
    description: str
    workload: str
    params: dict = field(default_factory=dict)
    func: str | None = None

    kind = "challenge"

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "title": self.title,
                "description": self.description, "workload": self.workload,
                "params": dict(self.params)}

    # -- helpers ------------------------------------------------------------------
    def _params(self, params: dict | None) -> dict:
        out = dict(self.params)
        if params:
            out.update(params)
        return out

    def _validate_actions(self, actions: list, field_name: str) -> None:
        """Check every action of ``actions`` (the ``field_name`` list) is well formed."""
        for i, a in enumerate(actions):
            try:
                validate_action(a, f"{field_name}[{i}]")
            except ActionError as exc:
                raise ChallengeError(f"challenge {self.id}: {exc}") from exc

    def _learner(self, solution: Any, params: dict | None):
        """(schedule, None) or (None, failing ChallengeResult)."""
        try:
            sch = runner.schedule_of(solution, self.workload, self._params(params))
        except runner.ReplayError as exc:
            return None, ChallengeResult(self.id, False, f"Your trace does not replay: {exc}")
        return sch, None

    def _link(self, sch: Any) -> str | None:
        try:
            return explorer_link(sch, base="")
        except Exception:  # noqa: BLE001 - a link is a convenience
            return None

    def target_schedule(self, actions: list[dict], params: dict | None = None):
        sch = runner.new_schedule(self.workload, self._params(params))
        env: dict = {}
        for i, action in enumerate(actions):
            try:
                apply_action(sch, action, env)
            except ActionError as exc:
                raise ChallengeError(f"challenge {self.id}: target step {i}: {exc}") from exc
        return sch

    def check(self, solution: Any, params: dict | None = None, **kw: Any) -> ChallengeResult:
        raise NotImplementedError("use ReachNest or BeatTime")


@dataclass
class ReachNest(Challenge):
    """Reach a target loop nest.

    Give ``target`` (a list of actions applied to the workload: the learner must reach a
    structurally equal program — any order of steps that gets there counts) and/or
    ``pattern`` (loop-nest pattern lines the learner's program must match).
    """

    target: list = field(default_factory=list)
    pattern: list = field(default_factory=list)

    kind = "reach_nest"

    def __post_init__(self) -> None:
        if not self.target and not self.pattern:
            raise ChallengeError(f"challenge {self.id}: give a target (actions) or a pattern")
        self._validate_actions(self.target, "target")

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.pattern:
            d["pattern"] = list(self.pattern)
        if self.target:
            d["target_nest"] = nest_lines(self.target_schedule(self.target).mod, self.func)
        return d

    def check(self, solution: Any, params: dict | None = None, **kw: Any) -> ChallengeResult:
        sch, fail = self._learner(solution, params)
        if fail is not None:
            return fail
        mod = sch.mod
        link = self._link(sch)
        details: dict = {"nest": nest_lines(mod, self.func)}
        if self.target:
            target = self.target_schedule(self.target, params).mod
            details["target_nest"] = nest_lines(target, self.func)
            if not structural_equal(mod, target):
                diff = first_difference(details["target_nest"], details["nest"])
                if diff is None:
                    diff = ("the loops match but the blocks differ (bindings, buffers or "
                            "annotations)")
                return ChallengeResult(self.id, False, f"Not yet: {diff}.", details, link)
        if self.pattern and not match_nest(mod, self.pattern, self.func):
            return ChallengeResult(
                self.id, False,
                "Not yet: the loop nest does not have the required shape:\n  "
                + "\n  ".join(self.pattern), details, link)
        return ChallengeResult(self.id, True, f"Solved: {self.title}.", details, link)


@dataclass
class BeatTime(Challenge):
    """Beat a reference schedule's time (``speedup`` x faster) and/or reach ``gflops``.

    The reference (``reference`` actions applied to the workload; [] = the unscheduled
    program) and the learner's program are built and timed in the same call, alternating,
    so the comparison does not depend on the machine. The learner's program must also be
    correct against numpy.
    """

    reference: list = field(default_factory=list)
    speedup: float = 1.0
    gflops: float | None = None
    number: int = 5
    repeat: int = 3

    kind = "beat_time"

    def __post_init__(self) -> None:
        if not (isinstance(self.speedup, (int, float)) and self.speedup > 0
                and math.isfinite(self.speedup)):
            raise ChallengeError(f"challenge {self.id}: speedup must be a positive number")
        if self.gflops is not None and not self.gflops > 0:
            raise ChallengeError(f"challenge {self.id}: gflops must be positive")
        self._validate_actions(self.reference, "reference")

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(speedup=self.speedup, gflops=self.gflops)
        return d

    def check(self, solution: Any, params: dict | None = None,
              timer: Callable[[Any, str], float] | None = None, **kw: Any) -> ChallengeResult:
        """Check ``solution``; ``timer(mod, label)`` -> seconds replaces real timing (tests)."""
        sch, fail = self._learner(solution, params)
        if fail is not None:
            return fail
        p = self._params(params)
        link = self._link(sch)
        ref = self.target_schedule(self.reference, params)
        check = runner.check_module(sch.mod, self.workload, p)
        details: dict = {"correct": check.correct}
        if not check.correct:
            return ChallengeResult(self.id, False,
                                   f"Your program is not correct: {check.message}", details,
                                   link)
        if timer is None:
            times = runner.time_pair(ref.mod, sch.mod, self.workload, p, number=self.number,
                                     repeat=self.repeat)
        else:
            times = (timer(ref.mod, "reference"), timer(sch.mod, "learner"))
        t_ref, t_you = times
        flops = runner.flops(self.workload, p)
        details.update(reference_seconds=t_ref, seconds=t_you,
                       speedup=(t_ref / t_you) if t_you > 0 else math.inf)
        if flops:
            details["gflops"] = flops / t_you / 1e9 if t_you > 0 else math.inf
            details["reference_gflops"] = flops / t_ref / 1e9 if t_ref > 0 else math.inf
        figures = (f"yours {t_you * 1e3:.3f} ms vs reference {t_ref * 1e3:.3f} ms "
                   f"({details['speedup']:.2f}x)")
        if "gflops" in details:
            figures += f", {details['gflops']:.2f} GFLOP/s"
        if details["speedup"] < self.speedup:
            return ChallengeResult(self.id, False,
                                   f"Not fast enough yet: {figures}; the goal is "
                                   f"{self.speedup:g}x the reference.", details, link)
        if self.gflops is not None and details.get("gflops", 0.0) < self.gflops:
            return ChallengeResult(self.id, False,
                                   f"Not fast enough yet: {figures}; the goal is "
                                   f"{self.gflops:g} GFLOP/s.", details, link)
        return ChallengeResult(self.id, True, f"Solved: {figures}.", details, link)


@dataclass
class BeatModel(Challenge):
    """Be faster than a reference preset on the model of a named GPU (``target``, e.g.
    ``"cuda -model=a100"``): ``speedup`` times the preset's modeled speed, with a correct
    result (run in the emulator without a GPU, checked against numpy).

    The figures come from ``measure(mod)`` -> a step dict with ``correct``, ``time_ms``
    (``time_kind`` "modeled" without a GPU), ``error``/``detail``/``not_gpu`` — what the
    explorer's measurement workers answer for a GPU step (the web app passes theirs; the
    web process compiles nothing). Without ``measure`` the engine builds, emulates and
    models the program itself (:meth:`engine_measure`: the command line, tests).
    """

    target: str = "cuda -model=a100"
    reference_preset: str = "gpu-gemm-shared"
    speedup: float = 1.0

    kind = "beat_model"

    def __post_init__(self) -> None:
        from engine import presets  # noqa: PLC0415
        from engine.gpu.target import Target  # noqa: PLC0415
        if not (isinstance(self.speedup, (int, float)) and self.speedup > 0
                and math.isfinite(self.speedup)):
            raise ChallengeError(f"challenge {self.id}: speedup must be a positive number")
        try:
            Target(self.target)
        except Exception as exc:  # noqa: BLE001
            raise ChallengeError(f"challenge {self.id}: bad target {self.target!r}: {exc}") \
                from None
        if self.reference_preset not in presets.names():
            raise ChallengeError(f"challenge {self.id}: no preset {self.reference_preset!r}")
        if presets.info(self.reference_preset).workload != self.workload:
            raise ChallengeError(f"challenge {self.id}: preset {self.reference_preset!r} is "
                                 f"not a {self.workload} schedule")

    @property
    def gpu_name(self) -> str:
        from engine.gpu.target import Target  # noqa: PLC0415
        return Target(self.target).spec.display_name

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(target=self.target, gpu=self.gpu_name, speedup=self.speedup,
                 reference_preset=self.reference_preset)
        return d

    def _link(self, sch: Any) -> str | None:
        from engine.presets.registry import target_key  # noqa: PLC0415
        link = super()._link(sch)
        return f"{link}&target={target_key(self.target)}" if link else link

    def start_link(self) -> str:
        """The explorer link of the unscheduled workload on the challenge's GPU."""
        from urllib.parse import urlencode  # noqa: PLC0415
        from engine.presets.registry import target_key  # noqa: PLC0415
        return (f"/explore/{self.workload}?"
                + urlencode({**self.params, "target": target_key(self.target)}))

    def reference_schedule(self, params: dict | None = None):
        from engine import presets  # noqa: PLC0415
        return presets.get(self.reference_preset, **self._params(params))

    def engine_measure(self, mod: Any, params: dict) -> dict:
        """The step dict of ``mod`` built here (no worker): build for the target, run in the
        emulator (or on a GPU), compare with numpy, the model's time."""
        import numpy as np  # noqa: PLC0415
        from engine import workloads  # noqa: PLC0415
        from engine.gpu.build import build_gpu  # noqa: PLC0415
        from engine.gpu.target import Target  # noqa: PLC0415
        fname = runner.main_func(mod, self.workload)
        try:
            rt = build_gpu(mod, Target(self.target))
        except Exception as exc:  # noqa: BLE001
            return {"error": f"refused at build: {exc}"}
        args = workloads.random_args(self.workload, **params)
        n_in = workloads.info(self.workload).num_inputs
        want = workloads.reference(self.workload, **params)(*[a.copy() for a in args[:n_in]])
        wants = list(want) if isinstance(want, (tuple, list)) else [want]
        rt[fname](*args)
        ok = all(np.allclose(g, w, rtol=1e-4, atol=1e-4) for g, w in zip(args[n_in:], wants))
        return {"correct": ok, "time_ms": rt.model(fname).time_s * 1e3, "time_kind": "modeled"}

    def check(self, solution: Any, params: dict | None = None,
              measure: Callable[[Any], dict] | None = None, **kw: Any) -> ChallengeResult:
        sch, fail = self._learner(solution, params)
        if fail is not None:
            return fail
        p = self._params(params)
        link = self._link(sch)
        measure = measure or (lambda mod: self.engine_measure(mod, p))
        you = measure(sch.mod)
        details: dict = {"correct": you.get("correct"), "gpu": self.gpu_name}
        gpu = self.gpu_name
        if you.get("not_gpu"):
            return ChallengeResult(self.id, False, f"Your program is not a GPU kernel yet: "
                                   f"{you['not_gpu']}", details, link)
        if you.get("error") or not you.get("time_ms"):
            return ChallengeResult(self.id, False, "Your program could not be built and run "
                                   f"for the {gpu}: {you.get('error') or 'no time'}",
                                   details, link)
        if you.get("correct") is not True:
            return ChallengeResult(self.id, False, "Your program is not correct: "
                                   f"{you.get('detail') or 'its result differs from numpy'}",
                                   details, link)
        base = measure(self.reference_schedule(params).mod)
        if base.get("error") or not base.get("time_ms"):
            return ChallengeResult(self.id, False, "The reference schedule could not be "
                                   f"modeled: {base.get('error') or 'no time'}", details, link)
        t_ref, t_you = base["time_ms"] / 1e3, you["time_ms"] / 1e3
        kind = you.get("time_kind", "modeled")
        details.update(reference_seconds=t_ref, seconds=t_you, speedup=t_ref / t_you,
                       time_kind=kind)
        figures = (f"yours {t_you * 1e3:.4f} ms vs the chapter's {t_ref * 1e3:.4f} ms "
                   f"({details['speedup']:.2f}x), {kind} for the {gpu}")
        if not t_you * self.speedup < t_ref:
            goal = "faster than" if self.speedup == 1 else f"{self.speedup:g}x as fast as"
            return ChallengeResult(self.id, False, f"Not fast enough yet: {figures}; the goal "
                                   f"is {goal} the reference.", details, link)
        return ChallengeResult(self.id, True, f"Solved: {figures}.", details, link)


# ---------------------------------------------------------------------------
# the shipped challenges
def _course_steps() -> list[dict]:
    """The TensorIR chapter's four steps, taken from lesson 1 (one source of truth)."""
    return [dict(s.action) for s in lessons.get("01_tensorir_mm_relu").steps if s.action]


def _catalogue() -> list[Challenge]:
    return [
        ReachNest(
            id="mm_relu_course_nest",
            title="Reach the course's mm_relu loop nest",
            description=("Transform mm_relu into the program the course's TensorIR chapter "
                         "ends with: j split by 4 with k between the halves, C computed under "
                         "j_0, and the initialisation of Y separated from its update."),
            workload="mm_relu", params={"n": 128}, target=_course_steps()),
        ReachNest(
            id="mm_relu_vectorized_inner",
            title="Vectorize the innermost loop of mm_relu's matmul",
            description=("Make the innermost loop around the matmul update vectorized "
                         "(split a spatial loop, move it innermost, decompose the reduction "
                         "if needed, then vectorize)."),
            workload="mm_relu", params={"n": 128},
            pattern=["for * in vectorized(*)", "  block Y*"]),
        ReachNest(
            id="mm_relu_parallel_outer",
            title="Run mm_relu's rows in parallel",
            description="Make an outermost loop of mm_relu a parallel loop.",
            workload="mm_relu", params={"n": 128},
            pattern=["for * in parallel(*)", "..."]),
        ReachNest(
            id="softmax_one_row_at_a_time",
            title="Softmax one row at a time",
            description=("Move softmax's max, exp and sum stages into the row loop of the "
                         "final division (compute_at), so each row is finished while it is "
                         "still in cache: one outer loop with the four stages inside."),
            workload="softmax", params={"m": 128, "n": 128},
            pattern=["for * in *",
                     "  for * in *", "    block T_softmax_maxelem",
                     "  for * in *", "    block T_softmax_exp",
                     "  for * in *", "    block T_softmax_expsum",
                     "  for * in *", "    block T_softmax_norm"]),
        ReachNest(
            id="sum_vectorized_reduction",
            title="Vectorize a reduction",
            description=("B[i] = sum over k of A[i, k]: make the sum use vector instructions. "
                         "The reduction loop itself cannot be vectorized; rfactor gives you "
                         "partial sums that can."),
            workload="sum", params={"m": 128, "n": 1024},
            pattern=["for * in vectorized(*)", "  block B_rf*"]),
        BeatTime(
            id="mm_relu_beat_naive",
            title="Make mm_relu 2x faster than the original",
            description=("Schedule mm_relu so that it runs at least twice as fast as the "
                         "unscheduled program, measured in the same run."),
            workload="mm_relu", params={"n": 128}, reference=[], speedup=2.0),
        BeatTime(
            id="mm_relu_beat_course",
            title="Beat the course's schedule",
            description=("Go beyond the TensorIR chapter: be at least 1.5x faster than the "
                         "course's split/reorder/reverse_compute_at/decompose_reduction "
                         "schedule (try vectorize and parallel)."),
            workload="mm_relu", params={"n": 128}, reference=_course_steps(), speedup=1.5),
        BeatModel(
            id="gpu_gemm_beat_shared_a100",
            title="Beat the shared-blocking GEMM on the A100's model",
            description=("The GPU chapter ends with shared-memory blocking (8, 8, 8, 8, 8). "
                         "On the A100 target, schedule the 512x512 matmul so the GPU model "
                         "says it runs faster — bigger thread blocks, another tile per "
                         "thread, a deeper k tile... It must still match numpy (run in the "
                         "emulator and race-checked)."),
            workload="matmul", params={"n": 512}, target="cuda -model=a100",
            reference_preset="gpu-gemm-shared"),
    ]


_CHALLENGES: dict[str, Challenge] = {}


def all_challenges() -> list[Challenge]:
    if not _CHALLENGES:
        for ch in _catalogue():
            _CHALLENGES[ch.id] = ch
    return list(_CHALLENGES.values())


def names() -> list[str]:
    return [c.id for c in all_challenges()]


def get(challenge_id: str) -> Challenge:
    all_challenges()
    try:
        return _CHALLENGES[challenge_id]
    except KeyError:
        raise ChallengeError(f"no challenge named {challenge_id!r}; available: "
                             f"{', '.join(_CHALLENGES)}") from None
