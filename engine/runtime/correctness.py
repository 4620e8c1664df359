"""Correctness check of a build against a reference (numpy function or the interpreter).

``check_correctness(mod, func_name, reference_fn=None, args=None, rtol=None, atol=None)``

* ``mod`` — an IRModule/PrimFunc (built with :func:`engine.build`, cached) or a built
  :class:`~engine.runtime.module.Module`;
* ``reference_fn`` — either takes all the kernel's arrays (copies) and writes its outputs
  in place (returning None) or returns the expected value(s) of the last parameter(s); or,
  like ``engine.workloads.reference(name)``, takes only the leading input arrays and
  returns the output(s) (a tuple for several). ``None`` uses ``engine.interpret`` on the program itself (the reference
  interpreter), which needs ``mod`` to be the program, not a built Module;
* ``args`` — the arrays (copied, never modified); random ones when omitted;
* tolerances default per dtype (:data:`DEFAULT_TOLERANCES`); integers and bools must match
  exactly.

Returns a :class:`CorrectnessReport` ``(ok, max_abs_err, max_rel_err, message)``; errors of
the build or the arguments are reported with ``ok=False`` and their message rather than
raised, so the explorer can show them.
"""
from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any, Callable

import numpy as np

from .module import ArgumentError, Module, random_arrays

DEFAULT_TOLERANCES = {  # dtype -> (rtol, atol)
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-4),
    "float64": (1e-9, 1e-9),
}


@dataclass(frozen=True)
class CorrectnessReport:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    message: str
    #: seconds the kernel's one run took (None when it did not run); the first run, so it
    #: includes cold caches — callers time slow kernels with it instead of running again
    kernel_seconds: float | None = None

    def __bool__(self) -> bool:
        return self.ok


def _tol(dtype: np.dtype, rtol, atol, scale: float) -> tuple[float, float]:
    r, a = DEFAULT_TOLERANCES.get(dtype.name, (0.0, 0.0))
    if rtol is not None:
        r = rtol[dtype.name] if isinstance(rtol, dict) else rtol
    if atol is not None:
        a = atol[dtype.name] if isinstance(atol, dict) else atol
    elif dtype.kind == "f":
        a = a * max(1.0, scale)
    return r, a


def _positional_arity(fn: Callable) -> int | None:
    """Number of positional parameters of ``fn`` (None when it takes ``*args``)."""
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    n = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def check_correctness(mod: Any, func_name: str | None = None,
                      reference_fn: Callable | None = None, args: list | None = None,
                      rtol: Any = None, atol: Any = None, **build_options: Any
                      ) -> CorrectnessReport:
    """Run the kernel and the reference on the same inputs and compare every array."""
    from .build import build
    program = None
    try:
        if isinstance(mod, Module):
            rt = mod
        else:
            program = mod
            rt = build(mod, **build_options)
        name = func_name or rt.entry_name()
        f = rt[name]
        if args is None:
            scalars = [p.name for p in f.binding.params if not hasattr(p, "buffer")] \
                if f.binding is not None else []
            if scalars:
                raise ArgumentError(f"{name} has scalar parameter(s) {', '.join(scalars)}: "
                                    "pass args=[...] with their values")
            args = random_arrays(f.specs)
        ours = [np.array(a, copy=True) for a in args]
        theirs = [np.array(a, copy=True) for a in args]
        t0 = time.perf_counter()
        f(*ours)
        kernel_seconds = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return CorrectnessReport(False, float("inf"), float("inf"),
                                 f"{type(exc).__name__}: {exc}")
    try:
        if reference_fn is None:
            if program is None:
                return CorrectnessReport(False, float("inf"), float("inf"),
                                         "no reference: pass reference_fn, or the program "
                                         "instead of a built Module to use engine.interpret")
            from engine.interpreter import interpret
            out = interpret(program, name, *theirs)
        else:
            n_in = _positional_arity(reference_fn)
            if n_in is not None and n_in < len(theirs):
                out = reference_fn(*theirs[:n_in])  # workloads' style: f(*inputs) -> outputs
                if out is None:
                    raise TypeError("a reference taking only the inputs must return outputs")
            else:
                out = reference_fn(*theirs)
    except Exception as exc:  # noqa: BLE001
        return CorrectnessReport(False, float("inf"), float("inf"),
                                 f"the reference failed: {type(exc).__name__}: {exc}")
    if out is not None and reference_fn is not None:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        theirs[len(theirs) - len(outs):] = [np.asarray(o) for o in outs]
    max_abs, max_rel = 0.0, 0.0
    problems = []
    # the buffers' places among the arguments (a scalar parameter has no spec)
    places = ([i for i, p in enumerate(f.binding.params) if hasattr(p, "buffer")]
              if f.binding is not None else list(range(len(f.specs))))
    for spec, place in zip(f.specs, places):
        a, b = ours[place], np.asarray(theirs[place])
        if a.shape != b.shape:
            problems.append(f"{spec.name}: reference has shape {b.shape}, kernel {a.shape}")
            continue
        if a.dtype == b.dtype and np.array_equal(a, b):
            continue  # bit for bit the same (an input left alone): nothing to measure

        if a.dtype.kind in "biu":
            bad = np.count_nonzero(a != b.astype(a.dtype))
            if bad:
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
                max_abs = max(max_abs, float(diff.max()))
                problems.append(f"{spec.name}: {bad} of {a.size} elements differ")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if a.size == 0:
            continue
        nan_mismatch = np.count_nonzero(np.isnan(a64) != np.isnan(b64))
        diff = np.abs(a64 - b64)
        diff = np.where(np.isnan(a64) & np.isnan(b64), 0.0, diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(np.abs(b64) > 0, diff / np.abs(b64), diff)
        scale = float(np.nanmax(np.abs(b64))) if np.any(np.isfinite(b64)) else 1.0
        r, at = _tol(a.dtype, rtol, atol, scale)
        ma = float(np.nanmax(diff)) if diff.size else 0.0
        mr = float(np.nanmax(rel)) if rel.size else 0.0
        max_abs, max_rel = max(max_abs, ma), max(max_rel, mr)
        bad = np.count_nonzero(diff > at + r * np.abs(b64)) + nan_mismatch
        if bad:
            idx = np.unravel_index(int(np.nanargmax(diff)), a.shape)
            problems.append(f"{spec.name}: {bad} of {a.size} elements outside rtol={r:g}, "
                            f"atol={at:g}; worst at {tuple(int(i) for i in idx)}: "
                            f"got {a64[idx]:.6g}, expected {b64[idx]:.6g}")
    if problems:
        return CorrectnessReport(False, max_abs, max_rel, "; ".join(problems), kernel_seconds)
    return CorrectnessReport(True, max_abs, max_rel,
                             f"all {len(f.specs)} buffers match (max abs err {max_abs:.3g}, "
                             f"max rel err {max_rel:.3g})", kernel_seconds)
