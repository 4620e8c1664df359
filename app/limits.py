"""Input limits: one config object, with defaults, and checks that refuse in plain words.

Everything a visitor sends the server is bounded here, so that a classroom clicking every
wrong thing at once (or one person pasting a 50 MB file) gets a sentence naming the limit
instead of a slow or dead server.  The web app calls the ``check_*`` methods at its edges::

    from app.limits import Limits, LimitError, InputError
    limits = Limits.from_config(app.config)          # defaults, overridable per key
    doc = limits.load_json(request_text)             # size + depth checked before json.loads
    limits.check_token(t)                            # URL trace token length
    limits.check_trace_length(len(doc["insts"]))
    limits.check_script(text)                        # pasted TVMScript
    limits.check_params("mm_relu", {"n": 128}, bounds=info.limits)
    plan = limits.measure_plan(info.flops(**params)) # measure, or "simulate only" with reason

Every refusal is a :class:`LimitError` (a subclass of :class:`InputError`, itself a
``ValueError``) whose message names the limit and its value, says what was received, and
says what to do.  Malformed input that is within the limits (broken JSON, a non-integer
size) raises :class:`InputError`.

The JSON reader never recurses on user data before the depth check: :func:`json_depth`
scans the text iteratively (a counter, not a stack of Python frames), so a document of a
million ``[`` cannot exhaust the interpreter stack.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["InputError", "LimitError", "Limits", "MeasurePlan", "json_depth", "whole_number",
           "DEFAULT_LIMITS"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class InputError(ValueError):
    """Input that cannot be used (malformed, wrong type).  ``str(e)`` is a complete sentence."""


class LimitError(InputError):
    """Input over one of the server's limits.

    Attributes: ``limit`` (the :class:`Limits` field name, e.g. ``"max_json_depth"``),
    ``maximum`` (the limit's value) and ``actual`` (what was received, when known).
    """

    def __init__(self, message: str, *, limit: str, maximum: Any = None, actual: Any = None):
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.actual = actual


#: a step whose correctness-check run takes longer than this is timed by that one run
#: (no repeats): slow schedules of large programs then fit the step time limit
SLOW_RUN_S = 0.5


@dataclass(frozen=True)
class MeasurePlan:
    """What the worker may do for one step.

    ``measure`` is False in "simulate only" mode: the program is still scheduled, printed
    and drawn, but not compiled-and-run for timing; ``reason`` says why, for the page.
    ``simulate_cache`` is False for large programs (above ``max_flops_cache_simulated``):
    they are timed but not cache-simulated (``cache_reason`` says why), and ``note`` tells
    the measurement pane how their slow steps are timed.
    """

    measure: bool
    flops: float
    reason: str | None = None
    simulate_cache: bool = True
    cache_reason: str | None = None
    note: str | None = None

    @property
    def mode(self) -> str:
        return "measure" if self.measure else "simulate-only"


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} bytes"


def _fmt_flops(n: float) -> str:
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} FLOP"


def json_depth(text: str, stop_at: int | None = None) -> int:
    """The maximum nesting depth of ``[``/``{`` in JSON ``text``, scanning iteratively.

    Brackets inside strings (including escaped quotes) are ignored.  The scan is a single
    loop with an integer counter, so it cannot overflow the Python stack whatever the
    input.  With ``stop_at``, returns as soon as the depth exceeds it.  Works on malformed
    text too (it does not validate; :func:`json.loads` does that afterwards).
    """
    depth = best = 0
    in_str = False
    esc = False
    # Fast path: strings are skipped with str.find rather than char by char.
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
        elif c == "[" or c == "{":
            depth += 1
            if depth > best:
                best = depth
                if stop_at is not None and best > stop_at:
                    return best
        elif c == "]" or c == "}":
            depth -= 1
        i += 1
    return best


_DIGITS = re.compile(r"[0-9]{1,18}")


def whole_number(text: Any) -> int | None:
    """``text`` as an int when it is ASCII digits only (1 to 18 of them), else None.

    Python's ``int()`` also accepts a sign, surrounding spaces, ``_`` between digits and
    the digits of other scripts (``"١٢٨"``, full-width ``"１２８"``); a size, a step
    number or an iteration in a request is written with the ten ASCII digits only."""
    if not isinstance(text, str) or not _DIGITS.fullmatch(text):
        return None
    return int(text)


def _reject_constant(name: str) -> Any:
    raise InputError(f"The JSON contains {name}, which is not a JSON number; "
                     f"use a finite number or null.")


@dataclass(frozen=True)
class Limits:
    """All input and resource limits, with defaults.  Override any field by name.

    ``Limits.from_config(app.config)`` reads ``app.config["EXPLORER_LIMITS"]`` (a mapping
    of field name -> value) so tests and ``--classroom`` deployments can tighten them.
    """

    # Workload sizes.
    max_dim: int = 4096                      # any single size parameter (n, m, k, h, w, ...)
    max_buffer_bytes: int = 256 * MiB        # all the workload's buffers together
    max_flops: float = 2e11                  # above: refused outright
    max_flops_measured: float = 4e9          # above: "simulate only" (not compiled or timed)
    max_flops_cache_simulated: float = 1e9   # above: timed, but no cache simulation, and a
                                             # step whose first run is slow is timed by it
    # Traces.
    max_trace_insts: int = 300               # schedule instructions in one trace
    max_token_chars: int = 8000              # the URL's t=<base64url> trace token
    max_index_map_points: int = 1 << 21      # points one request may evaluate to check
                                             # that transform_layout's maps are one-to-one
    # Work one request may do in the web process (app.web.budget).
    max_request_cpu_s: float = 5.0           # CPU seconds of replaying and applying steps
    max_program_nodes: int = 50_000          # IR nodes of a program (counted as a tree)
    max_printed_chars: int = 2_000_000       # a program's printed text
    # JSON (trace import, pasted TVM traces, API bodies).
    max_json_bytes: int = 512 * KiB
    max_json_depth: int = 32
    # Text.
    max_script_chars: int = 200_000          # pasted TVMScript
    max_script_lines: int = 5000
    max_name_chars: int = 100                # names of saved traces, custom workloads
    # Uploads (whole request body; also suggested as Flask's MAX_CONTENT_LENGTH).
    max_upload_bytes: int = 1 * MiB
    # Models (the model page).
    max_model_batch: int = 64                # images per call of a model's main
    max_model_traces: int = 16               # functions scheduled by one model link
    max_model_tune_trials: int = 64          # trials per function of "tune every function"
    # Measurement workers (see app.service.pool.MeasurePool).
    step_time_limit_s: float = 5.0
    worker_memory_bytes: int = 2 * GiB
    queue_length: int = 32

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> "Limits":
        """Defaults, overridden by ``config["EXPLORER_LIMITS"]`` (unknown keys refused)."""
        overrides = dict((config or {}).get("EXPLORER_LIMITS") or {})
        return cls.with_overrides(**overrides)

    @classmethod
    def with_overrides(cls, **overrides: Any) -> "Limits":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValueError(f"Unknown limit(s) {', '.join(unknown)}; "
                             f"known limits are: {', '.join(sorted(names))}.")
        return cls(**overrides)

    def replace(self, **changes: Any) -> "Limits":
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ------------------------------------------------------------------ text and bytes
    def check_json_text(self, text: str | bytes) -> None:
        """Size and nesting depth of a JSON document, before it is parsed."""
        size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
        if size > self.max_json_bytes:
            raise LimitError(
                f"The JSON document is {_fmt_bytes(size)}, over the limit of "
                f"{_fmt_bytes(self.max_json_bytes)} (max_json_bytes). A trace is usually a few "
                f"kilobytes; check that you picked the right file.",
                limit="max_json_bytes", maximum=self.max_json_bytes, actual=size)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        depth = json_depth(text, stop_at=self.max_json_depth)
        if depth > self.max_json_depth:
            raise LimitError(
                f"The JSON document is nested more than {self.max_json_depth} levels deep "
                f"(max_json_depth). A trace needs only a few levels; this does not look like "
                f"a trace.",
                limit="max_json_depth", maximum=self.max_json_depth, actual=depth)

    def load_json(self, text: str | bytes) -> Any:
        """Parse JSON from a user: limits first, then :func:`json.loads`.

        Raises :class:`LimitError` (too big, too deep) or :class:`InputError` (not JSON,
        not UTF-8, NaN/Infinity, integers with too many digits).
        """
        self.check_json_text(text)
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"The file is not UTF-8 text (byte {e.start} cannot be "
                                 f"decoded); export the trace as JSON and try again.") from None
        if text.startswith("\ufeff"):
            text = text[1:]
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except InputError:
            raise
        except json.JSONDecodeError as e:
            raise InputError(f"This is not valid JSON: {e.msg} at line {e.lineno}, column "
                             f"{e.colno}.") from None
        except (ValueError, RecursionError) as e:   # e.g. int with > 4300 digits
            raise InputError(f"This JSON cannot be read: {e}.") from None

    def check_token(self, token: str) -> None:
        """Length of the URL trace token ``t=``."""
        n = len(token)
        if n > self.max_token_chars:
            raise LimitError(
                f"The trace in this link is {n} characters long, over the limit of "
                f"{self.max_token_chars} (max_token_chars). Export the trace as JSON and "
                f"import it instead of sharing it as a link.",
                limit="max_token_chars", maximum=self.max_token_chars, actual=n)

    def check_trace_length(self, n_insts: int) -> None:
        """Number of instructions in a trace (after decoding)."""
        if n_insts > self.max_trace_insts:
            raise LimitError(
                f"The trace has {n_insts} steps, over the limit of {self.max_trace_insts} "
                f"(max_trace_insts). Undo some steps or start a new trace from this program.",
                limit="max_trace_insts", maximum=self.max_trace_insts, actual=n_insts)

    def check_script(self, text: str) -> None:
        """Size of pasted TVMScript text (characters and lines)."""
        n = len(text)
        if n > self.max_script_chars:
            raise LimitError(
                f"The program text is {n} characters long, over the limit of "
                f"{self.max_script_chars} (max_script_chars). Paste one PrimFunc at a time.",
                limit="max_script_chars", maximum=self.max_script_chars, actual=n)
        lines = text.count("\n") + 1
        if lines > self.max_script_lines:
            raise LimitError(
                f"The program text has {lines} lines, over the limit of "
                f"{self.max_script_lines} (max_script_lines). Paste one PrimFunc at a time.",
                limit="max_script_lines", maximum=self.max_script_lines, actual=lines)

    def check_name(self, name: str, what: str = "name") -> str:
        """A user-chosen name (saved trace, custom workload): length and printable chars.

        Returns the name stripped of surrounding whitespace.  (Names are always rendered
        through Jinja's autoescaping; this check keeps them short and single-line.)
        """
        name = name.strip()
        if not name:
            raise InputError(f"The {what} is empty; type a few words.")
        if len(name) > self.max_name_chars:
            raise LimitError(
                f"The {what} is {len(name)} characters long, over the limit of "
                f"{self.max_name_chars} (max_name_chars). Choose a shorter {what}.",
                limit="max_name_chars", maximum=self.max_name_chars, actual=len(name))
        bad = [c for c in name if not c.isprintable()]
        if bad:
            raise InputError(f"The {what} contains a control character ({bad[0]!r}); "
                             f"use letters, digits, spaces and punctuation only.")
        return name

    def check_upload(self, nbytes: int | None) -> None:
        """Size of an uploaded file or request body (``request.content_length``)."""
        if nbytes is not None and nbytes > self.max_upload_bytes:
            raise LimitError(
                f"The upload is {_fmt_bytes(nbytes)}, over the limit of "
                f"{_fmt_bytes(self.max_upload_bytes)} (max_upload_bytes). A trace or a "
                f"program is a few kilobytes; check that you picked the right file.",
                limit="max_upload_bytes", maximum=self.max_upload_bytes, actual=nbytes)

    # ------------------------------------------------------------------ workload sizes
    def check_params(self, workload: str, params: Mapping[str, Any],
                     bounds: Mapping[str, Any] | None = None) -> dict[str, int]:
        """Validate a workload's size parameters; returns them as ints.

        ``bounds`` (e.g. ``engine.workloads.info(name).limits``) may give per-parameter
        ``(low, high)`` pairs; they are applied in addition to ``max_dim``.  Values may be
        strings from a query string ("128").
        """
        out: dict[str, int] = {}
        for key, raw in params.items():
            if isinstance(raw, bool):
                raise InputError(f"The size {key} of {workload} must be a whole number, "
                                 f"not {raw!r}.")
            if isinstance(raw, str):
                parsed = whole_number(raw) if len(raw) <= 12 else None
                if parsed is None:
                    raise InputError(f"The size {key}={raw[:20]!r} of {workload} is not a "
                                     f"whole number written with the digits 0-9; use e.g. "
                                     f"{key}=128.")
                value = parsed
            elif isinstance(raw, int):
                value = raw
            elif isinstance(raw, float) and raw.is_integer():
                value = int(raw)
            else:
                raise InputError(f"The size {key} of {workload} must be a whole number, "
                                 f"not {type(raw).__name__}.")
            low, high = 1, self.max_dim
            limit_name = "max_dim"
            if bounds and key in bounds and bounds[key] is not None:
                b = bounds[key]
                blow, bhigh = (b if isinstance(b, (tuple, list)) else (1, b))
                if blow is not None:
                    low = max(low, int(blow))
                if bhigh is not None and int(bhigh) < high:
                    high, limit_name = int(bhigh), f"{workload}.{key}"
            if value < low:
                raise InputError(f"The size {key}={value} of {workload} is too small; it must "
                                 f"be at least {low}.")
            if value > high:
                raise LimitError(
                    f"The size {key}={value} of {workload} is over the limit of {high} "
                    f"({limit_name}). Choose {key} <= {high}.",
                    limit=limit_name, maximum=high, actual=value)
            out[key] = value
        return out

    def check_buffer_bytes(self, nbytes: int) -> None:
        """Total bytes of a workload's buffers (inputs, outputs, intermediates)."""
        if nbytes > self.max_buffer_bytes:
            raise LimitError(
                f"These sizes need {_fmt_bytes(nbytes)} of buffers, over the limit of "
                f"{_fmt_bytes(self.max_buffer_bytes)} (max_buffer_bytes). Choose smaller sizes.",
                limit="max_buffer_bytes", maximum=self.max_buffer_bytes, actual=nbytes)

    def check_buffers(self, workload: str, buffers: Mapping[str, int]) -> None:
        """Bytes of a workload's buffers at its sizes (``{name: bytes}``: inputs, outputs,
        intermediates); the refusal names the largest buffer."""
        total = sum(buffers.values())
        if total <= self.max_buffer_bytes:
            return
        name, big = max(buffers.items(), key=lambda kv: kv[1])
        raise LimitError(
            f"At these sizes {workload} needs {_fmt_bytes(total)} of buffers (the largest, "
            f"{name}, alone is {_fmt_bytes(big)}), over the limit of "
            f"{_fmt_bytes(self.max_buffer_bytes)} (max_buffer_bytes). Choose smaller sizes.",
            limit="max_buffer_bytes", maximum=self.max_buffer_bytes, actual=total)

    def measure_plan(self, flops: float) -> MeasurePlan:
        """Refuse above ``max_flops``; "simulate only" above ``max_flops_measured``.

        In simulate-only mode the step is scheduled, printed and drawn but not compiled and
        timed; ``plan.reason`` is the sentence the page shows.
        """
        if not isinstance(flops, (int, float)) or math.isnan(flops) or flops < 0:
            raise InputError(f"The FLOP count {flops!r} is not a number of operations.")
        if flops > self.max_flops:
            raise LimitError(
                f"This computation needs {_fmt_flops(flops)}, over the limit of "
                f"{_fmt_flops(self.max_flops)} (max_flops). Choose smaller sizes.",
                limit="max_flops", maximum=self.max_flops, actual=flops)
        if flops > self.max_flops_measured:
            return MeasurePlan(False, float(flops), (
                f"Simulate only: this computation needs {_fmt_flops(flops)} per run, over the "
                f"measurement budget of {_fmt_flops(self.max_flops_measured)} "
                f"(max_flops_measured), so steps are not compiled and timed. Choose smaller "
                f"sizes to see runtimes."))
        if flops > self.max_flops_cache_simulated:
            return MeasurePlan(True, float(flops), None, simulate_cache=False, cache_reason=(
                f"this computation needs {_fmt_flops(flops)} per run, over the cache "
                f"simulation budget of {_fmt_flops(self.max_flops_cache_simulated)} "
                f"(max_flops_cache_simulated). Choose smaller sizes to see cache misses; "
                f"runtimes are still measured."), note=(
                f"Large program ({_fmt_flops(flops)} per run): a step whose first run takes "
                f"over {SLOW_RUN_S:g} s is timed by that one run; a step slower than the "
                f"{self.step_time_limit_s:g} s limit shows as over the time limit."))
        return MeasurePlan(True, float(flops), None)


DEFAULT_LIMITS = Limits()
