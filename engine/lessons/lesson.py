"""Schedule lessons: a lesson file read and validated into a :class:`Lesson` (its
workload and ordered steps, each applying one schedule primitive), replayed, and a
learner's step checked; the shipped lessons by id. See the package docstring
(:mod:`engine.lessons`) for the public API."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import workloads
from engine.ir import structural_equal
from engine.notebook import explorer_link as _explorer_link
from engine.schedule import Schedule
from engine.script.nest import first_difference, nest_lines

from . import checks as step_checks
from .actions import ActionError, action_python, apply_action, describe_action, validate_action
from .markup import to_html, to_text

__all__ = ["Lesson", "Step", "Question", "LessonError", "names", "get", "all_lessons", "load",
           "parse_lesson", "DATA_DIR", "LOOK_AT", "FORMAT", "VERSION", "GPU_TARGETS"]

DATA_DIR = Path(__file__).with_name("data")
ALIASES = ("aliases",)  # env key: names of earlier steps' outputs, see Lesson.apply_step
FORMAT = "schedule-explorer/lesson"
VERSION = 1
#: panes a step can point the learner at
LOOK_AT = ("program", "diagram", "runtime", "cache", "code", "trace", "diff", "tune")
#: the GPU targets a lesson may open with (engine.gpu.specs' named GPUs the explorer offers)
GPU_TARGETS = ("cuda -model=h100-sxm", "cuda -model=a100", "cuda -model=rtx-4090",
               "cuda -model=tesla-p100")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")


class LessonError(ValueError):
    """A lesson file is malformed, or a lesson step cannot be applied.

    ``source`` is the file (or id), ``where`` the place inside it (e.g. ``steps[3].action``).
    """

    def __init__(self, message: str, source: str = "", where: str = "", step: int | None = None):
        self.source, self.where, self.step = source, where, step
        prefix = f"lesson {source}" if source else "lesson"
        if where:
            prefix += f", {where}"
        super().__init__(f"{prefix}: {message}")


@dataclass(frozen=True)
class Question:
    """A question shown with a step; ``choices`` make it multiple choice."""

    text: str
    answer: str
    choices: tuple[str, ...] = ()
    explanation: str = ""

    def to_dict(self) -> dict:
        d = {"text": self.text, "answer": self.answer}
        if self.choices:
            d["choices"] = list(self.choices)
        if self.explanation:
            d["explanation"] = self.explanation
        return d


@dataclass(frozen=True)
class Step:
    """One step: narrative, the action it applies (or None), where to look, a question."""

    index: int
    title: str
    text: str
    action: dict | None
    look_at: str
    question: Question | None = None
    expect: tuple[str, ...] = ()      # loop-nest pattern the program matches after the step
    note: str = ""                    # what to notice after applying (markdown-light)
    checks: tuple = ()                # what the program after the step must show (.checks)

    @property
    def code(self) -> str:
        """The step as course-style Python (empty for narrative-only steps)."""
        return action_python(self.action) if self.action else ""

    @property
    def label(self) -> str:
        return describe_action(self.action) if self.action else "(read)"

    def html(self) -> str:
        return to_html(self.text)

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"index": self.index, "title": self.title, "text": self.text,
                             "html": self.html(), "action": self.action, "code": self.code,
                             "look_at": self.look_at}
        if self.question:
            d["question"] = self.question.to_dict()
        if self.expect:
            d["expect"] = list(self.expect)
        if self.note:
            d["note"] = self.note
            d["note_html"] = to_html(self.note)
        if self.checks:
            d["checks"] = [dict(c) for c in self.checks]
        return d


def _params_key(params: dict) -> tuple:
    return tuple(sorted(params.items()))


@dataclass
class Lesson:
    """A guided lesson (see the module docstring)."""

    id: str
    title: str
    summary: str
    workload: str
    params: dict
    steps: tuple[Step, ...]
    test_params: dict = field(default_factory=dict)
    func: str | None = None
    order: int = 0
    source: str = ""
    #: what the lesson compiles for: None for this machine's CPU, or a GPU target string
    #: (``"cuda -model=h100-sxm"``; the player opens with that target)
    target: str | None = None
    _mods: dict = field(default_factory=dict, repr=False, compare=False)

    # -- building -------------------------------------------------------------------
    def _params(self, params: dict | None) -> dict:
        """The lesson's params overridden by ``params``, completed with the workload's
        defaults (so links and traces carry every parameter)."""
        out = dict(self.params)
        if params:
            out.update(params)
        try:
            return dict(workloads.resolve_params(self.workload, **out))
        except Exception:  # noqa: BLE001 - bad params/workload: reported when building
            return out

    def initial_module(self, params: dict | None = None):
        return workloads.get(self.workload, **self._params(params))

    def new_schedule(self, params: dict | None = None):
        """A Schedule of the lesson's workload before any step, recording a trace."""
        p = self._params(params)
        return Schedule(workloads.get(self.workload, **p), workload=(self.workload, p))

    def _check_k(self, k: int, upto: int) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= upto:
            raise LessonError(f"step number must be between 0 and {upto}, got {k!r}",
                              self.id)

    def apply_step(self, sch: Any, k: int, env: dict | None = None) -> Any:
        """Apply step ``k``'s action to ``sch`` ("apply for me"); returns the schedule.

        ``env`` carries the handles earlier steps bound with ``outputs``; pass the same dict
        when applying steps in order. Without it (e.g. on a learner's schedule rebuilt from
        a link), names such as ``j0`` are translated to the loops/blocks they denote after
        the lesson's first ``k`` steps (``j0`` -> loop ``j_0`` of block ``Y``).
        """
        self._check_k(k, len(self.steps) - 1)
        step = self.steps[k]
        if step.action is None:
            return sch
        if env is None:
            env = {ALIASES: self._aliases(k)}
        try:
            apply_action(sch, step.action, env)
        except ActionError as exc:
            raise LessonError(str(exc), self.id, f"step {k} ({step.title})", k) from exc
        except Exception as exc:  # ScheduleError and friends: say which step broke
            if type(exc).__name__ == "ScheduleError":
                raise LessonError(f"the engine refused `{step.code}`: {exc}", self.id,
                                  f"step {k} ({step.title})", k) from exc
            raise
        return sch

    def _aliases(self, k: int) -> dict:
        """``outputs`` names bound by steps ``0..k-1`` -> (kind, node name, owner block)."""
        key = ("aliases", k)
        cached = self._mods.get(key)
        if cached is not None:
            return cached
        from engine.ir import Block, For, collect  # noqa: PLC0415
        sch = self.new_schedule(self.test_params or None)
        env: dict = {}
        for i in range(k):
            self.apply_step(sch, i, env)
        out = {}
        for name, rv in env.items():
            if not isinstance(name, str):
                continue
            try:
                node = sch.get(rv)
            except Exception:  # noqa: BLE001 - the handle died in a later step
                continue
            if isinstance(node, For):
                inner = collect(node.body, Block)
                out[name] = ("loop", node.loop_var.name,
                             inner[0].name_hint if inner else None)
            elif isinstance(node, Block):
                out[name] = ("block", node.name_hint, None)
        self._mods[key] = out
        return out

    def schedule_at(self, k: int, params: dict | None = None):
        """A fresh Schedule with steps ``0 .. k-1`` applied (``k = 0``: the original)."""
        self._check_k(k, len(self.steps))
        sch = self.new_schedule(params)
        env: dict = {}
        for i in range(k):
            self.apply_step(sch, i, env)
        return sch

    def modules(self, params: dict | None = None) -> list:
        """The program before step 0 and after every step (``len(steps) + 1`` IRModules)."""
        key = ("modules", _params_key(self._params(params)))
        mods = self._mods.get(key)
        if mods is None:
            sch = self.new_schedule(params)
            env: dict = {}
            mods = [sch.mod]
            for i in range(len(self.steps)):
                self.apply_step(sch, i, env)
                mods.append(sch.mod)
            self._mods[key] = mods
        return list(mods)

    def trace_at(self, k: int, params: dict | None = None):
        """The engine Trace of the first ``k`` steps (for links and exports)."""
        return self.schedule_at(k, params).trace

    def explorer_link(self, k: int, params: dict | None = None, base: str = "") -> str:
        """The explorer URL of the program before step ``k`` (``/explore/...&t=...``)."""
        return _explorer_link(self.schedule_at(k, params), base=base)

    def func_name(self, mod: Any = None) -> str | None:
        if self.func:
            return self.func
        if mod is not None:
            names = mod.names()
            return names[0] if len(names) == 1 else None
        return None

    # -- checking a learner ---------------------------------------------------------
    def check_step(self, k: int, learner: Any, params: dict | None = None) -> tuple[bool, str]:
        """Did the learner's own step ``k`` reach the lesson's program after step ``k``?

        ``learner`` is the learner's Schedule (or its IRModule). The check is structural
        equality of the whole module with ``schedule_at(k + 1)`` (loop variable names do
        not matter; block and buffer names, extents, loop kinds and bodies do). When it
        fails, the message says what differs and shows the expected call.
        """
        self._check_k(k, len(self.steps) - 1)
        step = self.steps[k]
        mod = getattr(learner, "mod", learner)
        if not hasattr(mod, "functions"):
            raise LessonError("check_step needs the learner's Schedule or IRModule, got "
                              f"{type(learner).__name__}", self.id)
        if params is None:
            params = _trace_params(learner, self.workload)
        mods = self.modules(params)
        before, after = mods[k], mods[k + 1]
        if structural_equal(mod, after):
            msg = f"Correct: step {k} ({step.title}) done."
            if step.note:
                msg += " " + to_text(step.note)
            return True, msg
        hint = f" Try `{step.code}`." if step.code else ""
        if structural_equal(mod, before):
            return False, f"The program has not changed yet.{hint}"
        last = _last_primitive(learner)
        if step.action and last and _norm(last) != _norm(step.action["primitive"]):
            lead = (f"Your last step was {last}, but this step asks for "
                    f"{step.action['primitive']}.")
        else:
            lead = "Not quite: your program differs from the lesson's after this step."
        fname = self.func_name(after)
        exp, got = nest_lines(after, fname), nest_lines(mod, fname)
        diff = first_difference(exp, got)
        if diff is None:
            diff = ("the loops are the same, so the difference is inside the blocks "
                    "(their bindings, buffers or annotations)")
        elif mods[k] is not None and structural_equal(mod, mods[0]) and k > 0:
            diff += "; you may need to replay the earlier steps first"
        return False, f"{lead} In the loop nest, {diff}.{hint}"

    def run_checks(self, k: int, mod: Any, result: dict | None = None,
                   earlier: dict | None = None) -> list:
        """Step ``k``'s checks on ``mod`` (the program after the learner's step): a list of
        :class:`checks.Outcome`. ``result`` is the measurement worker's step dict of ``mod``
        and ``earlier`` maps a step number to the worker's step dict of the lesson's own
        program after that step (:meth:`check_steps_needed`); both are passed in — nothing
        here compiles or runs a program."""
        self._check_k(k, len(self.steps) - 1)
        fname = self.func_name(mod)
        return [step_checks.evaluate(c, mod, fname, result, earlier)
                for c in self.steps[k].checks]

    def check_steps_needed(self, k: int) -> tuple[bool, tuple[int, ...]]:
        """(whether step ``k``'s checks read the worker's result of the learner's program,
        the lesson's steps whose programs' results they compare with)."""
        cs = self.steps[k].checks
        return (any(step_checks.needs_result(c) for c in cs),
                tuple(sorted({c["than_step"] for c in cs if "than_step" in c})))

    # -- serialisation ----------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"id": self.id, "title": self.title, "summary": self.summary,
                "summary_html": to_html(self.summary), "workload": self.workload,
                "params": dict(self.params), "steps": [s.to_dict() for s in self.steps]}
        if self.target:
            d["target"] = self.target
        return d

    def python(self, upto: int | None = None, params: dict | None = None) -> str:
        """The first ``upto`` steps (all by default) as runnable engine Python."""
        n = len(self.steps) if upto is None else upto
        return self.trace_at(n, params).as_python()


def _loop_refs(a: dict) -> list:
    refs = []
    if "loop" in a:
        refs.append(a["loop"])
    refs.extend(a.get("loops") or [])
    return refs


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def _last_primitive(learner: Any) -> str | None:
    trace = getattr(learner, "trace", None)
    if trace is None:
        return None
    try:
        insts = trace.as_json()["insts"]
    except Exception:  # noqa: BLE001 - a trace we cannot read gives no hint
        return None
    for inst in reversed(insts):
        kind = inst[0] if isinstance(inst, (list, tuple)) else None
        if isinstance(kind, str) and _norm(kind) not in ("getblock", "getloops",
                                                          "getchildblocks", "enterpostproc"):
            return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    return None


def _trace_params(learner: Any, workload: str) -> dict | None:
    trace = getattr(learner, "trace", None)
    if trace is None:
        return None
    try:
        wl = trace.as_json().get("workload") or {}
    except Exception:  # noqa: BLE001
        return None
    if wl.get("name") == workload and isinstance(wl.get("params"), dict):
        return dict(wl["params"])
    return None


# ---------------------------------------------------------------------------
# loading and validation
def _text(v: Any, where: str, source: str, required: bool = True) -> str:
    if v is None and not required:
        return ""
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return "\n".join(v)
    if isinstance(v, str) and (v.strip() or not required):
        return v
    raise LessonError("must be text (a string, or a list of lines)"
                      + ("" if v is not None else " and is missing"), source, where)


def parse_lesson(data: Any, source: str = "<data>") -> Lesson:
    """Validate a lesson document (already decoded from JSON) and build a :class:`Lesson`.

    Every problem raises :class:`LessonError` naming the file and the place inside it.
    """
    if not isinstance(data, dict):
        raise LessonError("the file must hold one JSON object", source)
    if data.get("format", FORMAT) != FORMAT:
        raise LessonError(f"\"format\" must be {FORMAT!r}, got {data.get('format')!r}", source)
    version = data.get("version", VERSION)
    if version != VERSION:
        raise LessonError(f"unsupported lesson version {version!r}; this engine reads "
                          f"version {VERSION}", source)
    known = {"format", "version", "id", "title", "summary", "workload", "steps", "test_params",
             "func", "order", "target"}
    for key in data:
        if key not in known:
            raise LessonError(f"unknown key {key!r} (allowed: {', '.join(sorted(known))})",
                              source)
    lid = data.get("id")
    if not isinstance(lid, str) or not _ID_RE.match(lid):
        raise LessonError("\"id\" must be lower-case letters, digits and underscores, "
                          f"got {lid!r}", source)
    title = _text(data.get("title"), "title", source)
    summary = _text(data.get("summary"), "summary", source, required=False)
    wl = data.get("workload")
    if not (isinstance(wl, dict) and isinstance(wl.get("name"), str)):
        raise LessonError('"workload" must be {"name": ..., "params": {...}}', source,
                          "workload")
    params = wl.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise LessonError("\"params\" must be an object of parameter values", source,
                          "workload.params")
    extra = set(wl) - {"name", "params"}
    if extra:
        raise LessonError(f"unknown key(s) {sorted(extra)}", source, "workload")
    _check_workload(wl["name"], params, source)
    test_params = data.get("test_params", {})
    if not isinstance(test_params, dict):
        raise LessonError("\"test_params\" must be an object", source, "test_params")
    func = data.get("func")
    if func is not None and not isinstance(func, str):
        raise LessonError("\"func\" must be a function name", source, "func")
    order = data.get("order", 0)
    if not isinstance(order, int) or isinstance(order, bool):
        raise LessonError("\"order\" must be an integer", source, "order")
    target = data.get("target")
    if target is not None and target not in GPU_TARGETS:
        raise LessonError(f"\"target\" must be one of {', '.join(map(repr, GPU_TARGETS))} "
                          f"(absent: the CPU), got {str(target)[:40]!r}", source, "target")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise LessonError("\"steps\" must be a non-empty list", source, "steps")
    steps = []
    bound: set[str] = set()
    for i, raw in enumerate(raw_steps):
        steps.append(_parse_step(i, raw, source, bound))
    if not any(s.action for s in steps):
        raise LessonError("a lesson needs at least one step with an action", source, "steps")
    return Lesson(id=lid, title=title, summary=summary, workload=wl["name"],
                  params=dict(params), steps=tuple(steps), test_params=dict(test_params),
                  func=func, order=order, source=source, target=target)


def _check_workload(name: str, params: dict, source: str) -> None:
    known = workloads.names()
    if name not in known:
        raise LessonError(f"unknown workload {name!r} (known: {', '.join(known)})", source,
                          "workload.name")


def _parse_step(i: int, raw: Any, source: str, bound: set[str]) -> Step:
    where = f"steps[{i}]"
    if not isinstance(raw, dict):
        raise LessonError("each step must be an object", source, where)
    known = {"title", "text", "action", "look_at", "question", "expect", "note", "checks"}
    for key in raw:
        if key not in known:
            raise LessonError(f"unknown key {key!r} (allowed: {', '.join(sorted(known))})",
                              source, where)
    title = _text(raw.get("title"), f"{where}.title", source)
    text = _text(raw.get("text"), f"{where}.text", source)
    action = raw.get("action")
    if action is not None:
        try:
            validate_action(action, f"{where}.action")
        except ActionError as exc:
            raise LessonError(str(exc), source) from None
        if not (action.get("block") or action.get("loop_block")):
            for ref in _loop_refs(action):
                if isinstance(ref, str) and ref not in bound:
                    raise LessonError(
                        f"loop {ref!r} is not bound by an earlier step's \"outputs\"; add "
                        "\"block\" (or \"loop_block\") naming the block it belongs to",
                        source, f"{where}.action")
        bound.update(action.get("outputs") or [])
    look_at = raw.get("look_at", "program")
    if look_at not in LOOK_AT:
        raise LessonError(f"\"look_at\" must be one of {', '.join(LOOK_AT)}, got {look_at!r}",
                          source, f"{where}.look_at")
    q = raw.get("question")
    question = None
    if q is not None:
        if not isinstance(q, dict):
            raise LessonError('"question" must be {"text": ..., "answer": ...}', source,
                              f"{where}.question")
        extra = set(q) - {"text", "answer", "choices", "explanation"}
        if extra:
            raise LessonError(f"unknown key(s) {sorted(extra)}", source, f"{where}.question")
        qtext = _text(q.get("text"), f"{where}.question.text", source)
        answer = q.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise LessonError("a question needs an \"answer\" (text)", source,
                              f"{where}.question.answer")
        choices = q.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise LessonError("\"choices\" must be a list of strings", source,
                              f"{where}.question.choices")
        if choices and answer not in choices:
            raise LessonError(f"the answer {answer!r} is not one of the choices", source,
                              f"{where}.question")
        question = Question(qtext, answer, tuple(choices),
                            _text(q.get("explanation"), f"{where}.question.explanation",
                                  source, required=False))
    expect = raw.get("expect", [])
    if isinstance(expect, str):
        expect = expect.splitlines()
    if not isinstance(expect, list) or not all(isinstance(x, str) for x in expect):
        raise LessonError("\"expect\" must be a list of loop-nest pattern lines", source,
                          f"{where}.expect")
    note = _text(raw.get("note"), f"{where}.note", source, required=False)
    checks: tuple = ()
    if "checks" in raw:
        try:
            checks = step_checks.validate(raw["checks"], f"{where}.checks", i)
        except step_checks.CheckError as exc:
            raise LessonError(str(exc), source) from None
    return Step(i, title, text, action, look_at, question, tuple(expect), note, checks)


def load(path: str | Path) -> Lesson:
    """Load and validate one lesson file (JSON)."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise LessonError(f"cannot read the file ({exc.strerror})", str(p)) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LessonError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                          p.name) from None
    lesson = parse_lesson(data, p.name)
    if lesson.id != p.stem:
        raise LessonError(f"the id {lesson.id!r} must match the file name {p.stem!r}", p.name,
                          "id")
    return lesson


_CACHE: dict[str, Lesson] = {}


def all_lessons() -> list[Lesson]:
    """Every shipped lesson, in teaching order."""
    if not _CACHE:
        found = [load(p) for p in sorted(DATA_DIR.glob("*.json"))]
        for les in sorted(found, key=lambda x: (x.order, x.id)):
            _CACHE[les.id] = les
    return list(_CACHE.values())


def names() -> list[str]:
    """Ids of the shipped lessons, in teaching order."""
    return [les.id for les in all_lessons()]


def get(lesson_id: str) -> Lesson:
    """The shipped lesson with this id (LessonError listing the ids if there is none)."""
    all_lessons()
    try:
        return _CACHE[lesson_id]
    except KeyError:
        raise LessonError(f"no lesson named {lesson_id!r}; available: "
                          f"{', '.join(_CACHE)}") from None
