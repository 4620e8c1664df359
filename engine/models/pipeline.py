"""A model's stages and their timings: what the model page, ``python -m engine run-model``
and ``benchmarks/bench_model.py`` show.

Stages, each an IRModule whose ``main`` calls TensorIR functions only:

* ``unscheduled`` — the model as written (high-level operators legalized by
  ``LegalizeOps``: the course's ``linear0`` reads its weight as ``W[j, k]``);
* ``scheduled`` — every TensorIR function with its default schedule
  (:mod:`.schedules`; its first steps store the constant weights read as ``W[j, k]``
  transposed, once at build time: :mod:`.layouts`);
* ``fused`` — ``FuseOps`` + ``FuseTIR`` + ``DeadCodeElimination`` of the unscheduled one;
* ``fused+scheduled`` — the fused functions with their default schedules.

:func:`profile` runs ``main`` in the virtual machine end to end and times each TensorIR
function called, alone, on arrays of its shapes: the per-operator table, and what is left
of the end-to-end time (the virtual machine's own work per ``call_tir``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from engine.ir.function import IRModule, PrimFunc
from engine.runtime.timing import time_until_stable
from engine.relax.transform import DeadCodeElimination, FuseOps, FuseTIR, LegalizeOps
from engine.relax.transform.fuse_ops import call_tir_callee

from .schedules import schedule_module

__all__ = ["STAGES", "stage_module", "all_stages", "OpTime", "Profile", "profile",
           "call_sequence", "time_call", "time_binding"]

STAGES = ("unscheduled", "scheduled", "fused", "fused+scheduled")


def _legal(mod: IRModule) -> IRModule:
    """Legalized, as written (the weights in the course's layout)."""
    return DeadCodeElimination()(LegalizeOps()(mod))


def _fused(mod: IRModule) -> IRModule:
    return DeadCodeElimination()(FuseTIR()(FuseOps()(_legal(mod))))


def stage_module(mod: IRModule, stage: str, isa=None) -> tuple[IRModule, dict]:
    """The module of one stage and the traces of its scheduled functions (name -> Trace);
    the default recipe sized for ``isa`` (a VectorISA or a target string; None: this
    machine)."""
    if stage == "unscheduled":
        return _legal(mod), {}
    if stage == "scheduled":
        return schedule_module(_legal(mod), isa)
    if stage == "fused":
        return _fused(mod), {}
    if stage == "fused+scheduled":
        return schedule_module(_fused(mod), isa)
    raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")


def all_stages(mod: IRModule) -> dict[str, tuple[IRModule, dict]]:
    return {s: stage_module(mod, s) for s in STAGES}


def call_sequence(mod: IRModule, func: str = "main") -> list[tuple[str, str]]:
    """(binding name, TensorIR function) of each ``call_tir`` of ``func``, in order."""
    f = mod[func]
    out = []
    for b in f.bindings():
        callee = call_tir_callee(b.value)
        if callee is not None:
            out.append((b.var.name_hint, callee))
    return out


@dataclass
class OpTime:
    """One TensorIR function of the model: how often ``main`` calls it and its time."""

    name: str
    calls: int
    seconds: float          # one call, median

    @property
    def total(self) -> float:
        return self.calls * self.seconds


@dataclass
class Profile:
    """End-to-end time of ``main`` in the virtual machine and the per-function times."""

    stage: str
    batch: int
    e2e_seconds: float
    ops: list[OpTime] = field(default_factory=list)
    numpy_seconds: float | None = None

    @property
    def op_seconds(self) -> float:
        return sum(o.total for o in self.ops)

    @property
    def n_calls(self) -> int:
        return sum(o.calls for o in self.ops)

    @property
    def overhead_per_call(self) -> float:
        """What the end-to-end time spends besides the functions, per ``call_tir``."""
        return max(0.0, self.e2e_seconds - self.op_seconds) / max(1, self.n_calls)

    def to_dict(self) -> dict:
        return {"stage": self.stage, "batch": self.batch, "e2e_s": self.e2e_seconds,
                "numpy_s": self.numpy_seconds, "overhead_per_call_s": self.overhead_per_call,
                "ops": [{"name": o.name, "calls": o.calls, "s": o.seconds} for o in self.ops]}


#: seconds of repeats at most per figure (a quiet machine stops after three or four)
TIMING_BUDGET = 0.1


def _best_of(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best seconds per call of ``fn`` by the engine's one timing function
    (:func:`engine.runtime.timing.time_until_stable`: repeats of ~2 ms until the best three
    agree), at least ``repeat`` repeats; ``number`` is kept for the callers (a repeat
    batches its calls itself)."""
    return time_until_stable(fn, min_repeats=max(3, repeat), budget=TIMING_BUDGET)


def time_call(prim: PrimFunc, number: int = 10, repeat: int = 3, seed: int = 0) -> float:
    """Seconds of one call of a TensorIR function on random arrays of its shapes (the
    kernel alone: its arguments checked once, as :func:`_best_of` times)."""
    from engine.runtime import build, random_arrays

    rt = build(IRModule(((prim.name, prim),)))
    fn = rt[prim.name]
    arrays = tuple(random_arrays(fn.specs, seed))
    ptrs = fn.pointers(arrays)
    call = fn.call_pointers
    return time_until_stable(lambda: call(ptrs), min_repeats=max(3, repeat),
                             budget=TIMING_BUDGET)


def time_binding(mod: IRModule, binding, number: int = 10, repeat: int = 3,
                 seed: int = 0) -> float:
    """Seconds of one call ``main`` makes that is not ``R.call_tir``: a high-level operator
    (run by the virtual machine in numpy) or a Relax function of the module (a Primitive
    function before FuseTIR), alone in the virtual machine on random arrays of its
    operands' shapes."""
    from engine import relax
    from engine.relax.expr import (DataflowBlock, Function, GlobalVar, SeqExpr, Var,
                                   VarBinding)

    call = binding.value
    params, args = [], []
    for a in call.args:
        if isinstance(a, Var):
            p = Var(a.name_hint, a.struct_info)
            params.append(p)
            args.append(p)
        else:
            args.append(a)
    out = Var("out", binding.var.struct_info)
    body = SeqExpr((DataflowBlock((VarBinding(out, call.replace(args=tuple(args))),)),), out)
    funcs = [("main", Function("main", tuple(params), body, out.struct_info,
                               (("global_symbol", "main"),)))]
    if isinstance(call.op, GlobalVar):
        callee = mod[call.op.name_hint]
        funcs.append((call.op.name_hint, callee))
        for _, name in call_sequence(mod, call.op.name_hint):
            funcs.append((name, mod[name]))
    vm = relax.VirtualMachine(relax.build(IRModule(tuple(funcs)), target="llvm"))
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(tuple(int(d) for d in p.struct_info.shape))
              .astype(p.struct_info.dtype) for p in params]
    main = vm["main"]
    return _best_of(lambda: main(*arrays), number, repeat)


def _other_calls(mod: IRModule) -> list:
    """``main``'s bindings calling a high-level operator or a Relax function, with their
    names in the per-operator table (``lv1 = R.matmul``, ``fused_matmul_add0``)."""
    from engine.relax.expr import Call, GlobalVar, Op

    out = []
    for b in mod["main"].bindings():
        v = b.value
        if not isinstance(v, Call) or call_tir_callee(v) is not None:
            continue
        if isinstance(v.op, GlobalVar) and v.op.name_hint in mod:
            out.append((v.op.name_hint, b))
        elif isinstance(v.op, Op) and v.op.name.startswith("relax."):
            out.append((f"{b.var.name_hint} = R.{v.op.name.removeprefix('relax.')}", b))
    return out


def profile(mod: IRModule, inputs: list[np.ndarray], stage: str = "", number: int = 10,
            repeat: int = 3, numpy_fn: Callable[[], object] | None = None) -> Profile:
    """Time ``main`` end to end in the VM and each call it makes: each TensorIR function
    alone (:func:`time_call`), each high-level operator or Relax function call alone in
    the VM (:func:`time_binding`; a module as legalized has none)."""
    from engine import relax

    vm = relax.VirtualMachine(relax.build(mod, target="llvm"))
    main = vm["main"]
    e2e = _best_of(lambda: main(*inputs), number, repeat)
    others = {id(b): name for name, b in _other_calls(mod)}
    ops: list[OpTime] = []
    at: dict[str, int] = {}
    for b in mod["main"].bindings():           # in call order; a function called again
        callee = call_tir_callee(b.value)      # is one more call of its row
        name = callee if callee is not None else others.get(id(b))
        if name is None:
            continue
        if name in at:
            ops[at[name]].calls += 1
            continue
        at[name] = len(ops)
        seconds = (time_call(mod[name], number, repeat) if callee is not None
                   else time_binding(mod, b, number, repeat))
        ops.append(OpTime(name, 1, seconds))
    batch = int(inputs[0].shape[0]) if inputs and inputs[0].ndim else 1
    np_s = _best_of(numpy_fn, number, repeat) if numpy_fn is not None else None
    return Profile(stage, batch, e2e, ops, np_s)


