"""Graph lessons: a course graph (or model) and ordered steps that each run one Relax pass,
with checks on the graph after the step — the integration and graph-optimisation
chapters, as the schedule lessons are the TensorIR ones.

Files in ``data/graph/<id>.json`` (format in ``FORMAT.md``, "Graph lessons")::

    from engine.lessons import graph
    graph.names()                           # ['10_integration_pipeline', ...]
    les = graph.get("11_graph_optimization")
    mods = les.modules()                    # the graph before step 0 and after each step
    les.run_checks(2, mods[3])              # [Outcome("ok", "..."), ...]

The passes are named from :data:`engine.relax.transform.steps.PASS_STEPS` only, the start
graph from :data:`engine.relax.course_graphs.GRAPHS`.  Nothing here compiles or runs a
program: the checks read the graph.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.ir.function import IRModule, PrimFunc
from engine.relax.course_graphs import GRAPHS
from engine.relax.expr import Function
from engine.relax.transform.steps import PASS_STEPS, main_calls, run_passes

from .checks import Outcome

__all__ = ["GraphLesson", "GraphStep", "GRAPH_CHECKS", "names", "get", "all_lessons", "load",
           "parse", "evaluate", "describe", "DATA_DIR", "FORMAT", "MODELS"]

DATA_DIR = Path(__file__).with_name("data") / "graph"
FORMAT = "schedule-explorer/graph-lesson"
#: graph -> the model page that shows the same graph with its own weights
MODELS = {"mlp": "mlp"}
FORMS = ("relax", "tir", "op")
#: kind -> (required keys, optional keys)
GRAPH_CHECKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "has_function": (("prefix",), ("form", "calls")),
    "lacks_function": (("prefix",), ()),
    "main_calls": (("callee",), ("form",)),
    "main_lacks": (("callee",), ()),
    "main_only_tir": ((), ()),
}


def _err(source: str, where: str, msg: str) -> ValueError:
    from .lesson import LessonError
    return LessonError(msg, source, where)


@dataclass(frozen=True)
class GraphStep:
    index: int
    title: str
    text: str
    pass_key: str | None
    checks: tuple = ()
    question: Any = None

    @property
    def label(self) -> str:
        return PASS_STEPS[self.pass_key].label if self.pass_key else "(read)"

    @property
    def code(self) -> str:
        return PASS_STEPS[self.pass_key].python if self.pass_key else ""


@dataclass
class GraphLesson:
    id: str
    title: str
    summary: str
    graph: str
    batch: int
    steps: tuple
    order: int = 0
    source: str = ""
    _mods: list = field(default_factory=list, repr=False, compare=False)

    @property
    def model(self) -> str | None:
        return MODELS.get(self.graph)

    @property
    def passes(self) -> list[str]:
        return [s.pass_key for s in self.steps if s.pass_key]

    def passes_before(self, k: int) -> list[str]:
        """The passes of steps ``0 .. k-1``."""
        return [s.pass_key for s in self.steps[:k] if s.pass_key]

    def modules(self) -> list[IRModule]:
        """The graph before step 0 and after every step (``len(steps) + 1`` modules)."""
        if not self._mods:
            start, weights = GRAPHS[self.graph](self.batch)
            out = [start]
            for s in self.steps:
                out.append(run_passes(out[-1], [s.pass_key], weights)[-1] if s.pass_key
                           else out[-1])
            self._mods[:] = out
        return list(self._mods)

    def run_checks(self, k: int, mod: IRModule) -> list[Outcome]:
        return [evaluate(c, mod) for c in self.steps[k].checks]


# ---------------------------------------------------------------------------- checks
def describe(check: dict) -> str:
    kind = check["kind"]
    form = {"relax": "a Relax function", "tir": "a TensorIR function",
            "op": "a high-level operator"}.get(check.get("form", ""), "")
    if kind == "has_function":
        what = f"the graph has {form or 'a function'} named {check['prefix']}…"
        if check.get("calls"):
            what += " grouping " + " → ".join(check["calls"])
        return what
    if kind == "lacks_function":
        return f"the graph has no function named {check['prefix']}…"
    if kind == "main_calls":
        return f"main calls {check['callee']}" + (f" ({form})" if form else "")
    if kind == "main_lacks":
        return f"main no longer calls {check['callee']}"
    return "main calls TensorIR functions only"


def _inner(f: Function) -> list[str]:
    from engine.relax.expr import Call, Op
    from engine.relax.transform.fuse_ops import call_tir_callee

    out = []
    for b in f.bindings():
        c = call_tir_callee(b.value)
        if c is not None:
            out.append(c)
        elif isinstance(b.value, Call) and isinstance(b.value.op, Op):
            out.append("R." + b.value.op.name.removeprefix("relax."))
    return out


def evaluate(check: dict, mod: IRModule) -> Outcome:
    """One check on the graph ``mod`` (the module after a step)."""
    kind = check["kind"]
    text = describe(check)
    calls = main_calls(mod)
    if kind in ("has_function", "lacks_function"):
        found = [(n, f) for n, f in mod.items() if n != "main"
                 and n.startswith(check["prefix"])]
        if kind == "lacks_function":
            return Outcome("ok" if not found else "failed", text + (
                "" if not found else f": {found[0][0]} is still there"))
        form = check.get("form")
        if form == "relax":
            found = [(n, f) for n, f in found if isinstance(f, Function)]
        elif form == "tir":
            found = [(n, f) for n, f in found if isinstance(f, PrimFunc)]
        want = check.get("calls")
        if want:
            found = [(n, f) for n, f in found if isinstance(f, Function) and _inner(f) == want]
        return Outcome("ok" if found else "failed", text + (
            f": {found[0][0]}" if found else ": none in the graph"))
    if kind == "main_calls":
        hit = [c for _, k, c in calls if c == check["callee"]
               and check.get("form") in (None, k)]
        return Outcome("ok" if hit else "failed", text + (
            "" if hit else ": main calls " + ", ".join(c for _, _, c in calls)))
    if kind == "main_lacks":
        hit = [c for _, _, c in calls if c == check["callee"]]
        return Outcome("ok" if not hit else "failed", text)
    rest = [c for _, k, c in calls if k != "tir"]
    return Outcome("ok" if not rest else "failed", text + (
        "" if not rest else ": it still calls " + ", ".join(rest)))


def _checks(raw: Any, where: str, source: str) -> tuple:
    if not isinstance(raw, list):
        raise _err(source, where, "\"checks\" must be a list of checks")
    out = []
    for i, c in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(c, dict) or c.get("kind") not in GRAPH_CHECKS:
            raise _err(source, at, f"a graph check is {{\"kind\": ...}} with a kind among "
                       f"{', '.join(GRAPH_CHECKS)}")
        need, opt = GRAPH_CHECKS[c["kind"]]
        extra = set(c) - {"kind"} - set(need) - set(opt)
        if extra:
            raise _err(source, at, f"unknown key(s) {sorted(extra)}")
        for k in need:
            if not isinstance(c.get(k), str) or not c[k]:
                raise _err(source, at, f"{c['kind']} needs \"{k}\" (a name)")
        if "form" in c and c["form"] not in FORMS:
            raise _err(source, at, f"\"form\" is one of {', '.join(FORMS)}")
        if "calls" in c and not (isinstance(c["calls"], list) and c["calls"]
                                 and all(isinstance(x, str) for x in c["calls"])):
            raise _err(source, at, "\"calls\" is a list of names (R.matmul, ...)")
        out.append(dict(c))
    return tuple(out)


# ---------------------------------------------------------------------------- loading
def parse(data: Any, source: str = "<data>") -> GraphLesson:
    from .lesson import Question, _text

    if not isinstance(data, dict):
        raise _err(source, "", "the file must hold one JSON object")
    if data.get("format") != FORMAT:
        raise _err(source, "format", f"\"format\" must be {FORMAT!r}")
    if data.get("version", 1) != 1:
        raise _err(source, "version", "unsupported graph-lesson version")
    known = {"format", "version", "id", "order", "title", "summary", "graph", "steps"}
    extra = set(data) - known
    if extra:
        raise _err(source, "", f"unknown key(s) {sorted(extra)}")
    lid = data.get("id")
    if not isinstance(lid, str) or not lid.replace("_", "").isalnum() or lid.lower() != lid:
        raise _err(source, "id", "\"id\" must be lower-case letters, digits and underscores")
    g = data.get("graph")
    if not (isinstance(g, dict) and g.get("name") in GRAPHS and set(g) <= {"name", "batch"}):
        raise _err(source, "graph", f"\"graph\" is {{\"name\": one of {', '.join(GRAPHS)}, "
                   "\"batch\": 1..64}")
    batch = g.get("batch", 1)
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 64:
        raise _err(source, "graph.batch", "\"batch\" is a whole number from 1 to 64")
    order = data.get("order", 0)
    if not isinstance(order, int) or isinstance(order, bool):
        raise _err(source, "order", "\"order\" must be an integer")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _err(source, "steps", "\"steps\" must be a non-empty list")
    steps = []
    for i, raw in enumerate(raw_steps):
        where = f"steps[{i}]"
        if not isinstance(raw, dict):
            raise _err(source, where, "each step must be an object")
        extra = set(raw) - {"title", "text", "pass", "checks", "question"}
        if extra:
            raise _err(source, where, f"unknown key(s) {sorted(extra)}")
        key = raw.get("pass")
        if key is not None and key not in PASS_STEPS:
            raise _err(source, f"{where}.pass", f"no pass named {str(key)[:40]!r}; the "
                       f"passes are: {', '.join(PASS_STEPS)}")
        q = raw.get("question")
        question = None
        if q is not None:
            if not (isinstance(q, dict) and isinstance(q.get("answer"), str)
                    and set(q) <= {"text", "answer", "choices", "explanation"}):
                raise _err(source, f"{where}.question", "a question is {\"text\", \"answer\","
                           " \"choices\", \"explanation\"}")
            choices = tuple(q.get("choices") or ())
            if choices and q["answer"] not in choices:
                raise _err(source, f"{where}.question", "the answer is not one of the choices")
            question = Question(_text(q.get("text"), f"{where}.question.text", source),
                                q["answer"], choices,
                                _text(q.get("explanation"), f"{where}.question.explanation",
                                      source, required=False))
        steps.append(GraphStep(i, _text(raw.get("title"), f"{where}.title", source),
                               _text(raw.get("text"), f"{where}.text", source), key,
                               _checks(raw.get("checks", []), f"{where}.checks", source),
                               question))
    if not any(s.pass_key for s in steps):
        raise _err(source, "steps", "a graph lesson needs at least one step with a pass")
    return GraphLesson(lid, _text(data.get("title"), "title", source),
                       _text(data.get("summary"), "summary", source, required=False),
                       g["name"], batch, tuple(steps), order, source)


def load(path: str | Path) -> GraphLesson:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise _err(p.name, "", f"cannot read the file: {exc}") from None
    les = parse(data, p.name)
    if les.id != p.stem:
        raise _err(p.name, "id", f"the id {les.id!r} must match the file name {p.stem!r}")
    return les


_CACHE: dict[str, GraphLesson] = {}


def all_lessons() -> list[GraphLesson]:
    if not _CACHE:
        found = [load(p) for p in sorted(DATA_DIR.glob("*.json"))]
        for les in sorted(found, key=lambda x: (x.order, x.id)):
            _CACHE[les.id] = les
    return list(_CACHE.values())


def names() -> list[str]:
    return [les.id for les in all_lessons()]


def get(lesson_id: str) -> GraphLesson:
    all_lessons()
    try:
        return _CACHE[lesson_id]
    except KeyError:
        raise _err("", "", f"no graph lesson named {str(lesson_id)[:40]!r}; available: "
                   f"{', '.join(_CACHE)}") from None
