"""Explorer state from a URL: workload + parameters + trace token + cursor -> programs.

The URL is the whole session (``/explore/mm_relu?n=128&t=<token>&at=<k>``):

* ``t`` — the trace token (``engine.Trace.encode()``); it may hold more steps than are
  applied when the learner has undone some (so *redo* works from the link alone);
* ``at`` — how many steps are applied (absent = all);
* the other query parameters are the workload's parameters (``n=128``);
* for a pasted program (``/explore/custom``), ``src`` carries the program text compressed;
* ``dialect`` — how the program pane prints the program: ``course-2022`` (absent, the
  default) or ``tvm-0.27`` (what Apache TVM 0.27 reads);
* ``target`` — what every step is compiled for: absent (or ``cpu``) this machine's CPU, or
  a named GPU (``cuda-h100-sxm``, ``cuda-a100``, ``cuda-rtx-4090``, ``cuda-tesla-p100``;
  :mod:`app.web.targets`): built, run in the emulator (or on a GPU) and modeled by the
  workers.

A *step* is one state-changing schedule instruction; the look-ups recorded before it
(``GetBlock``, ``GetLoops``, ...) belong to it. Every bad part of a URL raises
:class:`~app.errors.AppError` (4xx) with a sentence saying what was wrong.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from engine.ir import IRModule, PrimFunc
from engine.ir.functor import post_order_visit
from engine.ir.size import tree_size
from engine.ir.stmt import Block
from engine.schedule import Schedule, Trace
from engine.schedule.registry import lookup_kind
from engine.script import ScriptError, parse
from engine import workloads
from engine.workloads import WorkloadError

from ..errors import AppError
from ..kept import MiB, Kept, ir_bytes
from ..limits import whole_number
from .budget import budget_error_of, ensure_budget, over_budget_text
from .services import limits
from .targets import CPU, TargetChoice
from .targets import choice as target_choice

RESERVED = {"t", "at", "sel", "src", "dialect", "target"}
#: the program pane's script dialects (``dialect=`` in the URL; the first is the default)
DIALECTS = {"course-2022": "course 2022", "tvm-0.27": "TVM 0.27"}
DEFAULT_DIALECT = "course-2022"
MAX_TOKEN = 16000
MAX_SRC = 24000
CUSTOM = "custom"
LOOKUP_PREFIXES = ("Get", "Sample", "EnterPostproc")
_DECIMAL = re.compile(r"[0-9]{1,18}(\.[0-9]{1,18})?")


# ---------------------------------------------------------------------------- workloads
def workload_names() -> list[str]:
    return list(workloads.names())


def workload_info(name: str) -> dict:
    """``engine.workloads.info(name)`` as a plain dict with the fields the app uses."""
    if name not in workload_names():
        raise AppError(404, "Unknown workload",
                       f"There is no workload called “{name}”. Pick one from the gallery.",
                       back="/", back_label="the gallery")
    info = workloads.info(name)
    return {
        "name": name,
        "title": info.title or name,
        "description": info.description or "",
        "defaults": dict(info.defaults),
        "limits": dict(info.limits),
        "func_name": info.func_name,
        "flops": info.flops,
        "raw": info,
    }


def parse_params(info: dict, args, ignore: frozenset = frozenset()) -> dict:
    """Query arguments -> the workload's full parameter dict.

    Values are typed like the defaults; the engine then fills defaults, applies
    "follows" rules (matmul's m and k follow n) and checks the limits
    (``engine.workloads.resolve_params``); every refusal is a 400 naming the parameter.
    """
    defaults = info["defaults"]
    given: dict[str, Any] = {}
    back = "/"
    for key in args.keys():
        if key in RESERVED or key in ignore:
            continue
        if key not in defaults:
            takes = ", ".join(defaults) or "no parameters"
            raise AppError(400, "Unknown parameter",
                           f"{info['name']} has no parameter “{key[:40]}” (it takes: {takes}).",
                           back=back, back_label="the gallery")
        raw = str(args.get(key, ""))
        want = defaults[key]
        try:
            if isinstance(want, bool):
                if raw.lower() not in ("0", "1", "true", "false"):
                    raise ValueError
                val: Any = raw.lower() in ("1", "true")
            elif isinstance(want, int):
                val = whole_number(raw)
                if val is None:
                    raise ValueError
            elif isinstance(want, float):
                if not _DECIMAL.fullmatch(raw):
                    raise ValueError
                val = float(raw)
            else:
                val = raw
        except ValueError:
            kind = {"int": "a whole number (digits 0-9)", "float": "a number (digits 0-9)",
                    "bool": "true or false"}.get(type(want).__name__, type(want).__name__)
            raise AppError(400, "Bad parameter",
                           f"Parameter “{key}” must be {kind}, got “{raw[:40]}”.",
                           back=back, back_label="the gallery") from None
        lim = info["limits"].get(key)
        if lim is not None and isinstance(val, (int, float)) and not isinstance(val, bool):
            lo, hi = _limits(lim)
            if (lo is not None and val < lo) or (hi is not None and val > hi):
                raise AppError(400, "Parameter out of range",
                               f"Parameter “{key}” of {info['name']} must be from {lo} to {hi}, "
                               f"got {val}.", back=back, back_label="the gallery")
        given[key] = val
    try:
        return dict(workloads.resolve_params(info["name"], **given))
    except WorkloadError as e:
        raise AppError(400, "Bad parameters", str(e), back=back, back_label="the gallery") from None


def _limits(lim) -> tuple[Any, Any]:
    if isinstance(lim, dict):
        return lim.get("min"), lim.get("max")
    if isinstance(lim, (list, tuple)) and len(lim) == 2:
        return lim[0], lim[1]
    return None, None


#: the gallery's programs by workload and sizes
_MOD_CACHE: "Kept[Any]" = Kept(8 * MiB)
#: replayed programs by trace prefix (each weighed with its key: the prefix's text)
_STATE_CACHE: "Kept[Any]" = Kept(32 * MiB)
#: replayed schedules by trace prefix (the same keys): a click applies its primitive to a
#: duplicate of the state's schedule instead of replaying the trace again. Never mutated:
#: every use gets an exact duplicate (``Schedule.duplicate``: same handles, same generator
#: state, so it goes on exactly as a fresh replay would).
_SCHEDULE_CACHE: "Kept[Any]" = Kept(32 * MiB)


def _state_bytes(key: tuple, value: Any) -> int:
    """The weight of a kept state: its program (or schedule) and its key's text."""
    return ir_bytes(value) + sum(len(k) for k in key if isinstance(k, str))


def load_workload(name: str, params: dict):
    """``engine.workloads.get(name, **params)``; a refusal becomes a 400 page."""
    key = (name, tuple(sorted(params.items())))
    got = _MOD_CACHE.get(key)
    if got is not None:
        return got
    try:
        mod = workloads.get(name, **params)
    except WorkloadError as e:
        raise AppError(400, "Bad parameters", str(e), back="/", back_label="the gallery") from None
    except (TypeError, ValueError) as e:
        raise AppError(400, "Bad parameters", f"{name} refused these parameters: {e}",
                       back="/", back_label="the gallery") from None
    _check_limit(limits().check_buffers, name, buffer_bytes(mod),
                 back=f"/explore/{name}", back_label=f"{name} at its default sizes")
    _MOD_CACHE.put(key, mod)
    return mod


def buffer_bytes(mod) -> dict[str, int]:
    """Bytes of every buffer of a program (by name): each function's parameters and the
    buffers its blocks allocate (those with a symbolic shape are not counted)."""
    out: dict[str, int] = {}
    for _, func in mod.items():
        bufs = [p for p in func.params if hasattr(p, "shape")]
        post_order_visit(func.body, lambda n: bufs.extend(n.alloc_buffers)
                         if isinstance(n, Block) else None)
        for b in bufs:
            try:
                out[b.name] = out.get(b.name, 0) + b.nbytes()
            except ValueError:
                continue
    return out


# ---------------------------------------------------------------------------- custom programs
def encode_src(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode().rstrip("=")


def decode_src(token: str) -> str:
    """The program text of a link's ``src=`` (base64url of zlib), refused (400) when the
    link is damaged or the text is over the script limits (``max_script_chars``,
    ``max_script_lines``): the text is inflated with a cap, never beyond the limit."""
    if len(token) > MAX_SRC:
        raise AppError(400, "Program too long",
                       f"The program in this link is longer than {MAX_SRC} characters.",
                       back="/", back_label="the gallery")
    max_chars = limits().max_script_chars
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        text = inflate_text(raw, max_chars)
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError):
        raise AppError(400, "Corrupt link",
                       "The program in this link (the src= part) is damaged; it may have been "
                       "cut when copied. Paste the program again from the gallery.",
                       back="/", back_label="the gallery") from None
    if text is None:
        raise AppError(400, "Over a limit",
                       f"The program text in this link is longer than the limit of "
                       f"{max_chars} characters (max_script_chars). Paste one PrimFunc at a "
                       f"time.", back="/", back_label="the gallery")
    _check_limit(limits().check_script, text)
    return text


def inflate_text(raw: bytes, max_chars: int) -> str | None:
    """zlib-compressed UTF-8 ``raw`` -> its text, or None when the text is longer than
    ``max_chars`` characters. The decompressor is asked for at most ``max_chars + 1`` bytes
    (one byte a character, as in any ASCII program), and only when those hold fewer than
    ``max_chars`` characters (non-ASCII text) for the rest, up to four bytes a character: a
    small link can never inflate to more than the limit. A cut stream is a ``zlib.error``."""
    d = zlib.decompressobj()
    out = d.decompress(raw, max_chars + 1)
    if len(out) > max_chars:
        if len(out.decode("utf-8", "ignore")) > max_chars:
            return None
        out += d.decompress(d.unconsumed_tail, 3 * max_chars + 3)
    if not d.eof:
        if d.decompress(d.unconsumed_tail, 1):
            return None
        raise zlib.error("the compressed program is cut short")
    text = out.decode("utf-8")
    return text if len(text) <= max_chars else None


def parse_program(text: str):
    """TVMScript text -> IRModule; a ScriptError becomes a 400 with line and column."""
    try:
        mod = parse(text)
    except ScriptError as e:
        raise AppError(400, "The program does not parse", str(e), back="/",
                       back_label="the gallery") from None
    except (SyntaxError, ValueError, TypeError, KeyError) as e:
        raise AppError(400, "The program does not parse", f"{type(e).__name__}: {e}", back="/",
                       back_label="the gallery") from None
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_funcs(mod)
    if not isinstance(mod, IRModule) or len(mod) == 0:
        raise AppError(400, "The program does not parse",
                       "The text holds no prim_func to explore.", back="/", back_label="the gallery")
    unsized = _unsized(mod)
    if unsized:
        raise AppError(400, "The program has symbolic sizes",
                       f"The explorer compiles, runs and measures programs of constant sizes; "
                       f"this one has {unsized}. Write the sizes as numbers (bind them) and "
                       "paste it again.", back="/", back_label="the gallery")
    cap = limits().max_program_nodes
    if tree_size(mod, cap) > cap:
        raise AppError(400, "Over a limit", f"The program has more than {cap} IR nodes "
                       "(max_program_nodes); paste a smaller program.", back="/",
                       back_label="the gallery")
    return mod


# ---------------------------------------------------------------------------- traces
def is_lookup(kind: str) -> bool:
    """True for instructions that only look things up (GetBlock, GetLoops, ...); a sampling
    instruction (sample_perfect_tile, ...) is a step of its own, shown with its decision."""
    prim = lookup_kind(kind)
    if prim is not None:
        return not prim.mutates and not prim.has_decision
    return kind.startswith(LOOKUP_PREFIXES)


def trace_json(trace) -> dict:
    j = trace.as_json()
    if isinstance(j, str):
        j = json.loads(j)
    if isinstance(j, list):  # TVM-style bare list
        j = {"insts": j}
    return j


def _check_limit(check, *args, back: str | None = None, back_label: str | None = None) -> None:
    try:
        check(*args)
    except ValueError as e:   # app.limits' InputError/LimitError: one sentence naming the limit
        raise AppError(400, "Over a limit", str(e), back=back or "/",
                       back_label=back_label or "the gallery") from None


def check_size(info: dict, params: dict) -> None:
    """Refuse sizes over the server's FLOP budget (``max_flops``; 400 naming the limit).
    Sizes over the *measurement* budget are accepted in "simulate only" mode
    (see :func:`app.web.measuring.measure_plan`)."""
    f = info.get("flops")
    if f is None:
        return
    _check_limit(limits().measure_plan, float(f(**params)), back=f"/explore/{info['name']}",
                 back_label=f"{info['name']} at its default sizes")


def decode_token(token: str, back: str | None = None, back_label: str | None = None):
    """Trace token -> engine Trace (400 when it is corrupt or over the length limit)."""
    _check_limit(limits().check_token, token, back=back, back_label=back_label)
    if len(token) > MAX_TOKEN:
        raise AppError(400, "Trace too long",
                       f"The trace in this link is longer than {MAX_TOKEN} characters.",
                       back=back or "/", back_label=back_label or "the gallery")
    try:
        return Trace.decode(token, limits().max_trace_insts)
    except Exception as e:  # noqa: BLE001 - any decoding failure is the link's fault
        raise AppError(400, "Corrupt trace in the link",
                       f"The trace (the t= part of the link) cannot be read: {e}. It may have been "
                       "cut when copied; ask for the link again or start from the initial program.",
                       back=back, back_label=back_label) from None


@dataclass
class Session:
    """One explorer state, decoded from a URL."""

    workload: str
    params: dict
    info: dict
    mod0: Any
    src: str | None = None               # custom program text
    token: str = ""
    trace: Any = None                    # engine Trace (full, including undone steps)
    insts: list = field(default_factory=list)
    step_ends: list = field(default_factory=list)   # inst count after each step
    decisions: dict = field(default_factory=dict)   # inst index -> sampling decision
    at: int = 0
    dialect: str = DEFAULT_DIALECT       # the program pane's script dialect
    target: TargetChoice = field(default_factory=lambda: target_choice(None))
    _mods: dict = field(default_factory=dict)

    # -- construction
    @classmethod
    def from_request(cls, workload: str, args, ignore: frozenset = frozenset()) -> "Session":
        """Decode ``args`` (query or form); keys in ``ignore`` are not workload parameters."""
        if workload == CUSTOM:
            src_tok = args.get("src", "")
            if not src_tok:
                raise AppError(400, "No program",
                               "This custom-program link carries no program (src= is missing).",
                               back="/", back_label="the gallery")
            src = decode_src(src_tok)
            mod0 = parse_program(src)
            func_name = mod0.names()[0]
            info = {"name": CUSTOM, "title": f"custom program ({func_name})",
                    "description": "A program pasted as TVMScript.", "defaults": {}, "limits": {},
                    "func_name": func_name, "flops": None, "raw": None}
            params: dict = {}
        else:
            info = workload_info(workload)
            params = parse_params(info, args, ignore)
            check_size(info, params)
            mod0 = load_workload(workload, params)
            src = None
        s = cls(workload, params, info, mod0, src=src)
        dialect = args.get("dialect") or DEFAULT_DIALECT
        if dialect not in DIALECTS:
            raise AppError(400, "Unknown script dialect",
                           f"dialect= must be one of {', '.join(DIALECTS)}, got "
                           f"“{str(dialect)[:30]}”.", back=s.url(at=None))
        s.dialect = dialect
        token = args.get("t", "") or ""
        if token:
            s.set_trace(decode_token(token, s.url(token="", at=None), "the initial program"),
                        token)
        at_raw = args.get("at")
        if at_raw is None or at_raw == "":
            s.at = s.nsteps
        else:
            at = whole_number(at_raw)
            if at is None:
                raise AppError(400, "Bad step number",
                               f"at= must be a step number between 0 and {s.nsteps} (digits "
                               f"0-9), got “{str(at_raw)[:20]}”.", back=s.url(at=None))
            if not 0 <= at <= s.nsteps:
                raise AppError(400, "Bad step number",
                               f"This trace has {s.nsteps} steps; at={at} is outside 0..{s.nsteps}.",
                               back=s.url(at=None))
            s.at = at
        try:
            s.target = target_choice(args.get("target"))
        except ValueError as e:   # the link's state is kept: the way back is it on the CPU
            raise AppError(400, "Unknown target", f"{e}.", back=s.url(),
                           back_label="this state on the CPU") from None
        return s

    def set_trace(self, trace, token: str | None = None) -> None:
        self.trace = trace
        j = trace_json(trace)
        wl = j.get("workload") or {}
        name = wl.get("name") if isinstance(wl, dict) else None
        if name and self.workload != CUSTOM and name != self.workload:
            raise AppError(400, "Trace of another workload",
                           f"This trace was recorded on “{name}”, not on “{self.workload}”.",
                           back=f"/explore/{name}", back_label=f"open it on {name}")
        self.insts = list(j.get("insts", []))
        self.decisions = {n: d for n, d in j.get("decisions", [])}
        _check_limit(limits().check_trace_length, len(self.insts),
                     back=self.url(token="", at=None), back_label="the initial program")
        self.step_ends = [i + 1 for i, inst in enumerate(self.insts)
                          if not is_lookup(str(inst[0]) if inst else "")]
        self.token = token if token is not None else encode_trace(trace)
        self.at = self.nsteps

    # -- facts
    @property
    def nsteps(self) -> int:
        return len(self.step_ends)

    @property
    def func_name(self) -> str:
        fn = self.info.get("func_name")
        if fn and fn in self.mod0:
            return fn
        return self.mod0.names()[0]

    def workload_arg(self):
        return (self.workload, dict(self.params)) if self.workload != CUSTOM else None

    @property
    def job_target(self) -> str | None:
        """The engine's target string the measurement jobs are built for: a GPU's or a
        board's (``"llvm -mtriple=aarch64-linux-gnu"``), None for this machine's CPU."""
        return None if self.target.key == CPU else self.target.engine

    @property
    def gpu(self) -> str | None:
        """The engine's target string of a GPU session (``"cuda -model=h100-sxm"``), None
        for the CPU: what the measurement jobs are built for."""
        return self.target.engine if self.target.is_gpu else None

    # -- URLs
    def query(self, token: str | None = None, at: int | None | str = "keep", **extra) -> dict:
        q: dict[str, Any] = {}
        if self.workload == CUSTOM and self.src is not None:
            q["src"] = encode_src(self.src)
        for k, v in self.params.items():
            if k in self.info["defaults"] and self.info["defaults"][k] == v:
                continue
            q[k] = v
        tok = self.token if token is None else token
        if tok:
            q["t"] = tok
        if at == "keep":
            at = self.at if self.at != self.nsteps else None
        if at is not None and tok:
            q["at"] = at
        if self.dialect != DEFAULT_DIALECT:
            q["dialect"] = self.dialect
        if self.target.key != CPU:
            q["target"] = self.target.key
        q.update({k: v for k, v in extra.items() if v is not None})
        return q

    def url(self, token: str | None = None, at: int | None | str = "keep", path: str = "",
            dialect: str | None = None, target: str | None = None) -> str:
        """This state's link (``dialect`` switches the program pane's dialect, ``target``
        the compile target: a key of :data:`app.web.targets.TARGETS`)."""
        base = f"/explore/{self.workload}{path}"
        q = self.query(token, at)
        if dialect is not None:
            q.pop("dialect", None)
            if dialect != DEFAULT_DIALECT:
                q["dialect"] = dialect
        if target is not None:
            q.pop("target", None)
            if target != CPU:
                q["target"] = target
        return base + ("?" + urlencode(q) if q else "")

    # -- programs
    def prefix_trace(self, k: int):
        """An engine Trace of the first ``k`` steps."""
        n = self.step_ends[k - 1] if k > 0 else 0
        if self.trace is None:
            return Trace((), workload=self.workload_arg())
        return self.trace.truncate(n)

    def prefix_token(self, k: int) -> str:
        """The token of a trace holding only the first ``k`` steps ('' for none)."""
        if k <= 0 or self.trace is None:
            return ""
        return encode_trace(self.prefix_trace(k))

    def insts_key(self, start: int, end: int) -> str:
        """The instructions ``start..end`` with their sampling decisions, as text: equal
        texts replay to equal programs (the same steps with the same decisions)."""
        return json.dumps([self.insts[start:end],
                           [[n - start, d] for n, d in self.decisions.items()
                            if start <= n < end]], sort_keys=True, default=str)

    def new_schedule(self):
        """A schedule of the initial program; its generator has a fixed seed, so that a
        sampling step without a decision replays to the same program on every request."""
        return Schedule(self.mod0, workload=self.workload_arg(), seed=0)

    def bounded(self):
        """A context in which schedule primitives draw on the request's work budget
        (:mod:`app.web.budget`: CPU seconds, program size, index-map points), shared by
        all the replays of the request — or, outside a request, on one of this session's
        own: a link cannot make one request do more than that much work."""
        return ensure_budget(limits())

    def replay(self, trace, sch, what: str, back: str, back_label: str,
               title: str = "The trace does not replay") -> None:
        """Apply ``trace`` to ``sch`` within the request's budget; a trace that does not
        replay is a 400 ``title``, ``"what: reason"``, one over the budget a 400 naming
        the limit."""
        try:
            with self.bounded():
                trace.apply_to_schedule(sch)
        except Exception as e:  # noqa: BLE001 - a trace that does not replay is the link's fault
            over = budget_error_of(e)
            if over is not None:
                raise AppError(400, "Over a limit", over_budget_text(what, over, limits()),
                               back=back, back_label=back_label) from None
            raise AppError(400, title, f"{what}: {e}", back=back,
                           back_label=back_label) from None

    def schedule_at(self, k: int):
        """A Schedule with the first ``k`` steps applied (400 when replay fails): a new
        object the caller may change (a duplicate of the state's schedule when it was
        replayed or applied before, else a replay)."""
        if k == 0 or self.trace is None:
            return self.new_schedule()
        key = self._state_key(k)
        hit = _SCHEDULE_CACHE.get(key)
        if hit is not None:
            return hit.duplicate()
        sch = self.new_schedule()
        self.replay(self.prefix_trace(k), sch,
                    f"Step {k} of this trace cannot be applied to {self.workload}",
                    self.url(token="", at=None), "the initial program")
        changed = changed_parameter(self.mod0, sch.mod)
        if changed:
            raise AppError(400, "The trace does not replay here",
                           f"Step {k} of this trace: {changed}.",
                           back=self.url(token="", at=None), back_label="the initial program")
        _SCHEDULE_CACHE.put(key, sch.duplicate(), _state_bytes(key, sch))
        return sch

    def remember(self, k: int, mod, sch=None, sampled: bool = False) -> None:
        """Record that the program after ``k`` steps is ``mod`` (just computed by the
        caller), so it is not replayed again: not by this request, nor by the requests
        that follow a click (its measurement and cache panes ask for the same state).

        ``sch``: the schedule that made it (from :meth:`schedule_at` and the primitives
        applied since), kept for the next click from this state — unless ``sampled`` (a
        sampling step drew its decision from the generator: a replay, which reads the
        recorded decision instead, would leave the generator elsewhere)."""
        self._mods[k] = mod
        if k > 0:
            key = self._state_key(k)
            _STATE_CACHE.put(key, mod, _state_bytes(key, mod))
            if sch is not None and not sampled:
                _SCHEDULE_CACHE.put(key, sch.duplicate(), _state_bytes(key, sch))

    def _state_key(self, k: int) -> tuple:
        """What the program after ``k`` steps depends on (its key in the replay cache)."""
        return (self.workload, tuple(sorted(self.params.items())), self.src,
                self.insts_key(0, self.step_ends[k - 1]))

    def mod_at(self, k: int):
        """The program after ``k`` steps (replayed once per state, then cached in memory)."""
        if k == 0:
            return self.mod0
        if k not in self._mods:
            key = self._state_key(k)
            hit = _STATE_CACHE.get(key)
            if hit is None:
                hit = self.schedule_at(k).mod
                _STATE_CACHE.put(key, hit, _state_bytes(key, hit))
            self._mods[k] = hit
        return self._mods[k]


def _unsized(mod) -> str | None:
    """What makes ``mod`` a program of symbolic sizes (a scalar parameter, a buffer of a
    symbolic shape), in words; None for a program of constant sizes."""
    for _, func in mod.items():
        if not isinstance(func, PrimFunc):
            continue
        for p in func.params:
            if not hasattr(p, "shape"):
                return f"the scalar parameter {p.name}"
            try:
                p.const_shape()
            except ValueError:
                return f"the buffer {p.name} of a symbolic shape"
    return None


def changed_parameter(mod0, mod) -> str | None:
    """The sentence for a program whose function parameters no longer have the shapes of
    ``mod0``'s (transform_layout of a parameter rewrites the signature: the caller must
    then pass arrays of the new layout), or None. The explorer runs every step on the
    workload's own arrays and checks it against the workload's numpy code, so it keeps the
    parameters' layouts."""
    for name, func in mod.items():
        if name not in mod0 or not hasattr(func, "params"):
            continue
        for before, after in zip(mod0[name].params, func.params):
            # a primitive that keeps the layout keeps the parameter's buffer itself
            # (transform_layout of a parameter makes a new one, even for a square transpose)
            if after is not before:
                return (f"this step changes the layout of the function's parameter "
                        f"{before.name} (the arrays the caller passes); the explorer runs "
                        "every step on the workload's own arrays, so transform a copy "
                        f"instead: cache_read {before.name} first, then transform the cache")
    return None


def encode_trace(trace) -> str:
    return trace.encode()
