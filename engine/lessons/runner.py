"""Replaying, checking and timing schedules for the CLI, lessons and challenges.

One place that knows how to go from "something a learner hands us" (a Schedule, a Trace,
a trace JSON document, or a link token) to a Schedule on the right workload, how to
replay a trace one instruction at a time (so an illegal step can be named), and how to
check a program against numpy and time it. Errors are :class:`ReplayError` (the input
is invalid) or :class:`BuildFailure` (the engine could not compile/run a program), both
with plain-language messages.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from engine import workloads
from engine.runtime import build as build_module
from engine.schedule import Schedule, Trace
from engine.schedule.registry import lookup_kind

__all__ = ["ReplayError", "BuildFailure", "ReplayStep", "Check", "new_schedule", "load_trace",
           "trace_workload", "trace_doc", "schedule_of", "replay_steps", "check_module",
           "time_module", "time_pair", "flops", "export", "workload_names", "workload_info",
           "main_func"]


class ReplayError(ValueError):
    """A trace cannot be read or replayed (bad document, unknown primitive, illegal step)."""


class BuildFailure(RuntimeError):
    """The engine failed to compile or run a program that the schedule accepted."""


@dataclass
class ReplayStep:
    """One row of a replay: instruction number (0 = the original program), label, module."""

    index: int
    kind: str
    label: str
    mod: Any


@dataclass
class Check:
    correct: bool
    message: str = ""
    max_error: float = 0.0


# ---------------------------------------------------------------------------
def workload_names() -> list[str]:
    return list(workloads.names())


def _info(name: str) -> Any:
    return workloads.info(name)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def workload_info(name: str) -> tuple[str, dict]:
    """(description, default params) of a preset workload."""
    info = _info(name)
    desc = _get(info, "description", "") or ""
    params = _get(info, "defaults", None)
    if params is None:
        params = _get(info, "params", {}) or {}
    desc = " ".join(str(desc).split())
    return desc, dict(params)


def _check_workload(name: str) -> None:
    names = workload_names()
    if name not in names:
        raise ReplayError(f"unknown workload {name!r} (known: {', '.join(names)})")


def new_schedule(workload: str, params: dict | None = None):
    """A fresh Schedule of a preset workload, recording its trace; its generator has a
    fixed seed, so a sampling instruction without a decision replays the same way on
    every prefix of a trace."""
    _check_workload(workload)
    params = dict(params or {})
    try:
        mod = workloads.get(workload, **params)
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"bad parameters for workload {workload}: {exc}") from None
    return Schedule(mod, workload=(workload, params), seed=0)


def main_func(mod: Any, workload: str | None = None) -> str:
    """The function a workload runs (its only function, or the one named in its info)."""
    names = mod.names()
    if len(names) == 1:
        return names[0]
    if workload is not None:
        try:
            f = _get(_info(workload), "func_name", None)
        except Exception:  # noqa: BLE001
            f = None
        if f in names:
            return f
        if workload in names:
            return workload
    return names[-1]


# ---------------------------------------------------------------------------
def load_trace(source: Any, workload: str | None = None):
    """A Trace from a Trace, a JSON document (dict/list/str) or a link token."""
    if isinstance(source, Trace):
        return source
    doc = source
    if isinstance(source, (bytes, bytearray)):
        source = source.decode("utf-8", "replace")
    if isinstance(source, str):
        text = source.strip()
        if text.startswith(("{", "[")):
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ReplayError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                  f"{exc.msg})") from None
        else:
            try:
                return Trace.decode(text)
            except Exception as exc:  # noqa: BLE001 - token decoding problems
                raise ReplayError(f"not a trace link token: {exc}") from None
    if isinstance(doc, list):  # TVM's own trace.as_json(): needs a workload
        if workload is None:
            raise ReplayError("this is a bare instruction list (TVM's trace.as_json()); "
                              "say which workload it applies to (--workload NAME)")
    elif not isinstance(doc, dict):
        raise ReplayError(f"a trace must be a JSON object, got {type(doc).__name__}")
    try:
        return _from_json(doc, workload)
    except ReplayError:
        raise
    except Exception as exc:  # noqa: BLE001 - TraceError and validation errors
        raise ReplayError(_plain(exc)) from None


def _from_json(doc: Any, workload: str | None):
    trace = Trace.from_json(doc)
    if getattr(trace, "workload", None) is None and workload is not None:
        trace = Trace(trace.insts, (workload, {}), trace.decisions)
    return trace


def trace_doc(trace: Any) -> dict:
    doc = trace.as_json()
    if isinstance(doc, str):
        doc = json.loads(doc)
    return doc


def trace_workload(trace: Any, override: str | None = None) -> tuple[str, dict]:
    """(workload name, params) a trace was recorded on."""
    doc = trace_doc(trace)
    wl = doc.get("workload") or {}
    name = override or wl.get("name")
    if not name:
        raise ReplayError("the trace does not say which workload it belongs to; "
                          "pass --workload NAME")
    _check_workload(name)
    params = wl.get("params") or {}
    if override and wl.get("name") not in (None, override):
        params = {}
    return name, dict(params)


def _plain(exc: BaseException) -> str:
    msg = str(exc).strip() or type(exc).__name__
    return msg


def _kind_label(inst: Any) -> tuple[str, str, bool]:
    """(kind, label, mutates) of a trace instruction."""
    kind = getattr(inst, "kind", None)
    if kind is None:
        kind = inst[0] if isinstance(inst, (list, tuple)) and inst else "?"
    try:
        prim = lookup_kind(kind)
    except Exception:  # noqa: BLE001
        prim = None
    if prim is not None:
        method, mutates = prim.method, prim.mutates
    else:
        method = re.sub(r"(?<!^)(?=[A-Z])", "_", str(kind)).lower()
        mutates = not method.startswith("get_")
    return str(kind), method, mutates


def replay_steps(trace: Any, workload: str | None = None, params: dict | None = None
                 ) -> Iterator[ReplayStep]:
    """Yield the original program, then the program after every mutating instruction.

    Instruction numbers are 1-based positions in the trace (queries such as get_block
    are applied but not yielded). An instruction that fails raises :class:`ReplayError`
    naming its number and primitive.
    """
    name, wl_params = trace_workload(trace, workload)
    if params is not None:
        wl_params = {**wl_params, **params}
    insts = list(trace.insts)
    try:
        lines = list(trace.steps())
    except Exception:  # noqa: BLE001 - labels are cosmetic
        lines = []
    sch = new_schedule(name, wl_params)
    yield ReplayStep(0, "", "(original)", sch.mod)
    prev = sch
    for n, inst in enumerate(insts, start=1):
        kind, method, mutates = _kind_label(inst)
        fresh = new_schedule(name, wl_params)
        try:
            trace.truncate(n).apply_to_schedule(fresh)
        except Exception as exc:  # noqa: BLE001 - ScheduleError / TraceError
            msg = _plain(exc)
            if not msg.startswith("step "):
                msg = f"step {n} ({method}) cannot be applied: {msg}"
            raise ReplayError(msg) from None
        if mutates:
            line = lines[n - 1] if n <= len(lines) else None
            yield ReplayStep(n, kind, _label(line, method, _handle_names(prev)), fresh.mod)
        prev = fresh


def _handle_names(sch: Any) -> dict:
    try:
        return {k: v[2] for k, v in sch.handles().items()}
    except Exception:  # noqa: BLE001 - labels are cosmetic
        return {}


def _label(line: str | None, method: str, names: dict | None = None) -> str:
    """``l4, l5 = sch.split(l2, factors=[None, 4])`` -> ``split(j, factors=[None, 4])``.

    Handle names (``b0``, ``l2``) become the block/loop names they referred to just before
    the step, when the schedule replaying the trace knows them.
    """
    if not line or "sch." not in line:
        return method
    call = line.split("sch.", 1)[1]
    if names:
        call = re.sub(r"\b[bl]\d+\b", lambda m: str(names.get(m.group(0), m.group(0))), call)
    return call


def _resolved(workload: str, params: dict) -> dict:
    try:
        return dict(workloads.resolve_params(workload, **params))
    except Exception:  # noqa: BLE001 - reported when the schedule is built
        return dict(params)


def schedule_of(solution: Any, workload: str, params: dict | None = None):
    """The learner's Schedule from a Schedule, Trace, trace document or link token.

    A trace recorded on another workload is refused. With ``params``, the learner's steps
    are replayed at those parameters (a Schedule built at other sizes included), so a
    solution is always judged at the challenge's size; without, its own params are used.
    """
    if hasattr(solution, "mod") and hasattr(solution, "trace"):
        try:
            wl_name, _ = trace_workload(solution.trace)
        except ReplayError:
            wl_name = None
        if wl_name not in (None, workload):
            raise ReplayError(f"this schedule is of workload {wl_name!r}, not {workload!r}")
        if params is None or wl_name is None:
            return solution
        _, own = trace_workload(solution.trace)
        want = _resolved(workload, params)
        if _resolved(workload, own) == want:
            return solution
        solution = solution.trace  # same steps, replayed at the requested size below
    trace = load_trace(solution, workload=workload)
    doc = trace_doc(trace)
    wl = doc.get("workload") or {}
    if wl.get("name") not in (None, workload):
        raise ReplayError(f"this trace was recorded on workload {wl.get('name')!r}, "
                          f"not {workload!r}")
    p = dict(params) if params is not None else dict(wl.get("params") or {})
    sch = new_schedule(workload, p)
    try:
        trace.apply_to_schedule(sch)
    except Exception as exc:  # noqa: BLE001
        raise ReplayError(_plain(exc)) from None
    return sch


# ---------------------------------------------------------------------------
def _args(workload: str, params: dict):
    return workloads.random_args(workload, **params)


def _build(mod: Any):
    try:
        return build_module(mod, target="llvm")
    except Exception as exc:  # noqa: BLE001 - BuildError and codegen failures
        raise BuildFailure(f"the engine could not compile this program: {_plain(exc)}") from None


def check_module(mod: Any, workload: str, params: dict, rtol: float = 1e-4,
                 atol: float = 1e-4) -> Check:
    """Compile ``mod``, run it on random inputs and compare with the numpy reference."""
    import numpy as np  # noqa: PLC0415
    rt = _build(mod)
    func = main_func(mod, workload)
    args = _args(workload, params)
    n_in = int(_get(_info(workload), "num_inputs", len(args) - 1))
    want = workloads.reference(workload, **params)(*[a.copy() for a in args[:n_in]])
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    try:
        rt[func](*args)
    except Exception as exc:  # noqa: BLE001
        raise BuildFailure(f"running the compiled program failed: {_plain(exc)}") from None
    worst = 0.0
    for got, exp in zip(args[n_in:], wants):
        exp = np.asarray(exp)
        if got.shape != exp.shape:
            return Check(False, f"an output has shape {got.shape}, numpy's has {exp.shape}")
        close = np.isclose(got, exp, rtol=rtol, atol=atol, equal_nan=True)
        diff = np.abs(got.astype("float64") - exp.astype("float64"))
        if not close.all():
            bad = int(close.size - np.count_nonzero(close))
            return Check(False, f"{bad} of {got.size} output elements differ from numpy "
                                f"(largest difference {float(np.nanmax(diff)):.3g})",
                         float(np.nanmax(diff)))
        if diff.size:
            worst = max(worst, float(np.nanmax(diff)))
    return Check(True, "matches numpy", worst)


def _seconds(res: Any) -> float:
    for attr in ("min", "median", "mean"):
        v = getattr(res, attr, None)
        if isinstance(v, (int, float)):
            return float(v)
    if isinstance(res, dict):
        for key in ("min", "median", "mean"):
            if key in res:
                return float(res[key])
    return float(res)


def time_module(mod: Any, workload: str, params: dict, number: int = 5, repeat: int = 3,
                rt: Any = None) -> float:
    """Best-of-``repeat`` seconds per run of the compiled program (``number`` runs each)."""
    rt = rt or _build(mod)
    func = main_func(mod, workload)
    args = _args(workload, params)
    try:
        return _seconds(rt.time_evaluator(func, number=number, repeat=repeat)(*args))
    except Exception as exc:  # noqa: BLE001
        raise BuildFailure(f"timing the compiled program failed: {_plain(exc)}") from None


def time_pair(mod_a: Any, mod_b: Any, workload: str, params: dict, number: int = 5,
              repeat: int = 3) -> tuple[float, float]:
    """Time two programs alternately in the same run; (seconds_a, seconds_b), best of each."""
    rt_a, rt_b = _build(mod_a), _build(mod_b)
    best_a = best_b = float("inf")
    for _ in range(repeat):
        best_a = min(best_a, time_module(mod_a, workload, params, number, 1, rt=rt_a))
        best_b = min(best_b, time_module(mod_b, workload, params, number, 1, rt=rt_b))
    return best_a, best_b


def flops(workload: str, params: dict) -> float | None:
    """Floating-point operations of one run, from the workload's info (None if unknown)."""
    try:
        info = _info(workload)
    except Exception:  # noqa: BLE001
        return None
    f = _get(info, "flops", None)
    if callable(f):
        try:
            f = f(**params)
        except TypeError:
            f = None
    if isinstance(f, (int, float)) and f > 0:
        return float(f)
    return None


def export(trace: Any, fmt: str) -> str:
    """The trace as ``json`` (our document), ``python`` (engine), ``tvm`` or ``course``."""
    if fmt == "json":
        return json.dumps(trace_doc(trace), indent=1)
    if fmt == "python":
        return trace.as_python()
    if fmt in ("tvm", "course"):
        return trace.export(fmt)
    raise ReplayError(f"unknown export format {fmt!r}; use json, python, tvm or course")
