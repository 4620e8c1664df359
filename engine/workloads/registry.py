"""The workload registry: specs, parameter validation and the public functions.

A workload is registered with :func:`register` from a :class:`Spec` (how to build its
PrimFunc, its numpy reference, FLOP/byte counts and input ranges).  The public API —
:func:`names`, :func:`get`, :func:`reference`, :func:`info`, :func:`random_args` — checks
parameters first and raises :class:`WorkloadError` with the allowed ranges.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import numpy as np

from engine.ir import IRModule, PrimFunc

__all__ = ["WorkloadError", "WorkloadInfo", "Spec", "register", "names", "get", "reference",
           "info", "random_args", "resolve_params"]


class WorkloadError(ValueError):
    """An unknown workload name or a bad parameter (unknown, not an integer, out of range)."""


@dataclasses.dataclass(frozen=True)
class WorkloadInfo:
    """What a workload is and how big it is.

    ``defaults``: every parameter with its default value; ``limits``: param -> (min, max)
    inclusive; ``follows``: params that copy another param when not given (e.g. matmul's
    ``m`` and ``k`` follow ``n``, so ``get("matmul", n=64)`` is square);
    ``flops(**params)`` / ``bytes(**params)``: arithmetic operations and the minimum data
    moved (every input read once, every output written once), for the given params merged
    with the defaults.
    """

    name: str
    title: str
    description: str
    defaults: dict
    limits: dict
    func_name: str
    num_inputs: int
    flops: Callable[..., int]
    bytes: Callable[..., int]
    follows: dict = dataclasses.field(default_factory=dict)
    num_outputs: int = 1


@dataclasses.dataclass(frozen=True)
class Spec:
    """Registration record of one workload (see the module docstring)."""

    name: str
    title: str
    description: str
    defaults: dict
    limits: dict
    func_name: str
    num_inputs: int
    build: Callable[[dict], PrimFunc]               # params -> PrimFunc
    reference: Callable[[dict], Callable]           # params -> f(*inputs) -> output(s)
    flops: Callable[[dict], int]
    bytes: Callable[[dict], int]
    input_ranges: Callable[[dict], list]            # params -> [(low, high)] per input
    follows: dict = dataclasses.field(default_factory=dict)
    check: Callable[[dict], str | None] | None = None  # cross-parameter check: error text
    num_outputs: int = 1


_REGISTRY: dict[str, Spec] = {}


def register(spec: Spec) -> Spec:
    if spec.name in _REGISTRY:
        raise ValueError(f"workload {spec.name!r} is registered twice")
    missing = set(spec.defaults) ^ set(spec.limits)
    if missing:
        raise ValueError(f"workload {spec.name!r}: defaults and limits disagree on {missing}")
    _REGISTRY[spec.name] = spec
    return spec


def _spec(name: Any) -> Spec:
    if not isinstance(name, str) or name not in _REGISTRY:
        raise WorkloadError(f"unknown workload {name!r}; available: {', '.join(names())}")
    return _REGISTRY[name]


_INT_RE = re.compile(r"\s*[+-]?\d+\s*")


def _as_int(spec: Spec, key: str, value: Any) -> int:
    """Accept ints, numpy integers and decimal strings (from web forms); nothing else."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, str) and _INT_RE.fullmatch(value):
        return int(value)
    lo, hi = spec.limits[key]
    raise WorkloadError(f"parameter {key!r} of workload {spec.name!r} must be an integer "
                        f"from {lo} to {hi}, got {value!r}")


def resolve_params(name: str, **params: Any) -> dict:
    """The full parameter dict for ``name``: defaults, followers, then ``params``,
    validated (unknown names, non-integers and values out of range are refused)."""
    spec = _spec(name)
    for key in params:
        if key not in spec.defaults:
            allowed = ", ".join(f"{k} ({lo}..{hi})" for k, (lo, hi) in spec.limits.items())
            raise WorkloadError(f"workload {name!r} has no parameter {key!r}; its parameters "
                                f"are: {allowed}")
    given = {k: _as_int(spec, k, v) for k, v in params.items()}
    out = dict(spec.defaults)
    for key, leader in spec.follows.items():
        if key not in given and leader in given:
            out[key] = given[leader]
    out.update(given)
    for key, value in out.items():
        lo, hi = spec.limits[key]
        if not lo <= value <= hi:
            how = "given" if key in given else f"following {spec.follows.get(key)!r}"
            raise WorkloadError(f"parameter {key!r} of workload {name!r} must be from {lo} to "
                                f"{hi}, got {value} ({how})")
    if spec.check is not None:
        problem = spec.check(out)
        if problem:
            raise WorkloadError(f"workload {name!r}: {problem}")
    return out


def names() -> list[str]:
    """Names of all workloads, in presentation order."""
    return list(_REGISTRY)


def get(name: str, **params: Any) -> IRModule:
    """The workload's program as an IRModule holding one PrimFunc named ``info(name).func_name``.

    The module carries ``(name, params)`` as its ``workload`` (the parameters given, as
    integers), so ``engine.Schedule(mod).trace`` names its workload and replays alone."""
    spec = _spec(name)
    p = resolve_params(name, **params)
    func = spec.build(p)
    return IRModule(((spec.func_name, func),), workload=(name, {k: p[k] for k in params}))


def reference(name: str, **params: Any) -> Callable:
    """A numpy function ``f(*inputs) -> output`` computing what the workload computes
    (a tuple when the workload has several outputs)."""
    spec = _spec(name)
    return spec.reference(resolve_params(name, **params))


def info(name: str) -> WorkloadInfo:
    """Description, parameters and cost model of a workload."""
    spec = _spec(name)

    def flops(**params: Any) -> int:
        return int(spec.flops(resolve_params(name, **params)))

    def nbytes(**params: Any) -> int:
        return int(spec.bytes(resolve_params(name, **params)))

    flops.__doc__ = f"Arithmetic operations of {name} for the given parameters."
    nbytes.__doc__ = f"Minimum bytes moved by {name} for the given parameters."
    return WorkloadInfo(name=spec.name, title=spec.title, description=spec.description,
                        defaults=dict(spec.defaults), limits=dict(spec.limits),
                        func_name=spec.func_name, num_inputs=spec.num_inputs, flops=flops,
                        bytes=nbytes, follows=dict(spec.follows),
                        num_outputs=spec.num_outputs)


def random_args(name: str, seed: int = 0, **params: Any) -> list[np.ndarray]:
    """Arrays for every parameter of the PrimFunc, in order: inputs random in a
    numerically safe range (reproducible from ``seed``), outputs zero-filled."""
    spec = _spec(name)
    p = resolve_params(name, **params)
    func = spec.build(p)
    ranges = spec.input_ranges(p)
    rng = np.random.default_rng(seed)
    out = []
    for i, buf in enumerate(func.params):
        shape = buf.const_shape()
        dtype = np.dtype(buf.dtype)
        if i < spec.num_inputs:
            lo, hi = ranges[i]
            if dtype.kind == "f":
                arr = rng.uniform(lo, hi, size=shape).astype(dtype)
            else:
                arr = rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
        else:
            arr = np.zeros(shape, dtype=dtype)
        out.append(arr)
    return out
