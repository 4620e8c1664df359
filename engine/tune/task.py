"""What is being tuned: a :class:`TuneTask` (plain data, sent to measuring processes).

A task names the program — a gallery workload with its parameters, or the TVMScript text of
any other module — the function to tune, the fixed prefix of schedule instructions every
candidate starts with ("search from this step"), and the search space's identity. It holds
no code: a worker process (local or on a cluster) rebuilds the program from it, replays a
candidate's trace on it and measures the result, without needing the search space itself.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine import workloads
from engine.ir import IRModule, PrimFunc
from engine.schedule import Schedule, Trace

__all__ = ["TuneTask", "TuneError", "task_of"]


class TuneError(ValueError):
    """A bad argument to the tuner (what was wrong and what to pass instead)."""


@dataclass(frozen=True)
class TuneTask:
    """A program to tune (see the module docstring).

    ``workload``/``params``: a gallery workload (its numpy reference checks every
    candidate); else ``script`` is the module's TVMScript and the unscheduled program,
    compiled, is the reference. ``prefix``: the trace document of the fixed steps.
    """

    func_name: str
    workload: str | None = None
    params: dict = field(default_factory=dict)
    script: str | None = None
    prefix: dict | None = None
    space_id: str = ""
    #: the target string (None: the host CPU, "llvm"); a CUDA target ("cuda -model=a100")
    #: makes the candidates GPU builds, checked in the emulator or on a GPU
    target: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.target is not None

    # ------------------------------------------------------------------ programs
    def module(self) -> IRModule:
        """The unscheduled program."""
        if self.workload is not None:
            return workloads.get(self.workload, **self.params)
        from engine.script import parse  # noqa: PLC0415 - only custom programs need the parser
        mod = parse(self.script or "")
        return mod if isinstance(mod, IRModule) else IRModule.from_funcs(mod)

    def workload_meta(self) -> tuple[str, dict] | None:
        return (self.workload, dict(self.params)) if self.workload is not None else None

    def new_schedule(self, seed: int | None = None, mod: IRModule | None = None) -> Schedule:
        """A fresh schedule of the program with the fixed prefix applied."""
        sch = _schedule(mod if mod is not None else self.module(), self.workload_meta(),
                        self.func_name, seed)
        if self.prefix:
            Trace.from_json(self.prefix).apply_to_schedule(sch)
        return sch

    def replay(self, trace_doc: dict, mod: IRModule | None = None,
               seed: int | None = None) -> Schedule:
        """The schedule a candidate's trace (prefix included) gives on the program; a
        sampling instruction without a decision draws from the generator seeded ``seed``."""
        sch = _schedule(mod if mod is not None else self.module(), self.workload_meta(),
                        self.func_name, seed)
        Trace.from_json(trace_doc).apply_to_schedule(sch)
        return sch

    def prefix_length(self) -> int:
        return len(self.prefix.get("insts", [])) if self.prefix else 0

    # ------------------------------------------------------------------ identity
    def flops(self, mod: IRModule | None = None) -> int | None:
        """The workload's FLOP count; outside the gallery, the estimate of the unscheduled
        function (:func:`engine.tune.flops.estimate_flops`); None when it is zero."""
        if self.workload is None:
            from .flops import estimate_flops  # noqa: PLC0415
            func = (mod if mod is not None else self.module())[self.func_name]
            return estimate_flops(func) or None
        return workloads.info(self.workload).flops(**self.params) or None

    def describe(self) -> dict:
        """The task as JSON-ready data (the database stores it next to its key)."""
        d = {"workload": self.workload, "params": dict(self.params),
             "script_sha": _sha(self.script) if self.script is not None else None,
             "func_name": self.func_name,
             "prefix": (self.prefix or {}).get("insts", []), "space": self.space_id}
        if self.target is not None:  # a CPU task's key is what it always was
            d["target"] = self.target
        return d

    def key(self) -> str:
        """The database key: workload + parameters (or program text) + prefix + space (+ the
        target, for a GPU task: CPU and GPU records never share a key)."""
        return _sha(json.dumps(self.describe(), sort_keys=True, default=str))

    def as_dict(self) -> dict:
        return {"func_name": self.func_name, "workload": self.workload,
                "params": dict(self.params), "script": self.script, "prefix": self.prefix,
                "space_id": self.space_id, "target": self.target}

    @staticmethod
    def from_dict(d: dict) -> "TuneTask":
        return TuneTask(func_name=d["func_name"], workload=d.get("workload"),
                        params=dict(d.get("params") or {}), script=d.get("script"),
                        prefix=d.get("prefix"), space_id=d.get("space_id", ""),
                        target=d.get("target"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _schedule(mod: IRModule, workload, func_name: str, seed: int | None) -> Schedule:
    kwargs: dict[str, Any] = {"workload": workload, "func_name": func_name}
    if seed is not None:
        kwargs["seed"] = seed
    return Schedule(mod, **kwargs)


def task_of(program: Any, func_name: str | None, space_id: str,
            workload: Any = None, target: str | None = None) -> TuneTask:
    """The :class:`TuneTask` of what :func:`engine.tune.tune` was given.

    ``program``: a workload name, ``(name, params)``, an ``engine.Schedule`` (its workload
    and its steps so far, which become the fixed prefix), an IRModule or a PrimFunc.
    """
    prefix = None
    if isinstance(program, Schedule):
        if program.trace.insts:
            prefix = program.trace.as_json()
        workload = workload or program.workload
        mod = program.original_mod
    elif isinstance(program, str):
        workload, mod = (program, {}), None
    elif isinstance(program, tuple) and len(program) == 2 and isinstance(program[0], str):
        workload, mod = (program[0], dict(program[1] or {})), None
    elif isinstance(program, (IRModule, PrimFunc)):
        mod = program if isinstance(program, IRModule) else IRModule.from_funcs(program)
    else:
        raise TuneError(f"tune() needs a workload name, (name, params), an engine.Schedule, "
                        f"an IRModule or a PrimFunc, got {type(program).__name__}")
    if workload is not None:
        name, params = workload
        try:
            params = workloads.resolve_params(name, **dict(params))
            wl_mod = workloads.get(name, **params)
        except workloads.WorkloadError as e:
            raise TuneError(str(e)) from None
        if mod is not None and not _same_program(mod, wl_mod):
            workload = None  # a changed program: its own unscheduled self is the reference
        else:
            mod = wl_mod
            workload = (name, params)
    names = mod.names()
    if func_name is None:
        if len(names) != 1:
            raise TuneError(f"the module has several functions ({', '.join(names)}); "
                            "pass func_name=... to say which one to tune")
        func_name = names[0]
    elif func_name not in names:
        raise TuneError(f"the module has no function {func_name!r}; it has "
                        f"{', '.join(names)}")
    if workload is not None:
        return TuneTask(func_name=func_name, workload=workload[0], params=dict(workload[1]),
                        prefix=prefix, space_id=space_id, target=target)
    return TuneTask(func_name=func_name, script=mod.script(), prefix=prefix, space_id=space_id,
                    target=target)


def _same_program(a: IRModule, b: IRModule) -> bool:
    from engine.ir import structural_equal  # noqa: PLC0415
    return structural_equal(a, b)
