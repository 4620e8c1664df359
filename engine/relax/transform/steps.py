"""A graph through Relax passes, one pass per step: what the model page shows when its link
names a pass sequence (``passes=BindParams,FuseDenseAdd,LowerToTensorIR,FuseTIR``) and what
the graph lessons play.

The passes are the engine's own, offered by name only (:data:`PASS_STEPS`): TVM's
``BindParams``, ``LegalizeOps``, ``AnnotateTIROpPattern``, ``FuseOps``, ``FuseTIR``,
``DeadCodeElimination``, and the course's graph-optimisation chapter's rewrites written
with ``PyExprMutator`` (:mod:`engine.relax.transform.fuse_dense_add`, ``ewise_fma``,
``lower_to_tensor_ir``).  A sequence starts from a graph as written (high-level operators;
``engine.models.passes.start_graph`` a model's, :mod:`engine.relax.course_graphs` the
course's).

Pure IR work: nothing here compiles or runs a program.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.ir.function import IRModule, PrimFunc

__all__ = ["PassStep", "PASS_STEPS", "PassStepError", "parse_passes", "run_passes", "runnable",
           "main_calls", "tir_functions", "MAX_PASSES"]

#: at most this many passes in one sequence
MAX_PASSES = 12


@dataclass(frozen=True)
class PassStep:
    """One pass the page offers: its URL key, its button's label, the course's Python."""

    key: str
    label: str
    python: str
    make: Callable[[dict], Any]       # weights -> the pass object
    what: str


def _transform():
    from engine.relax import transform   # the package this module belongs to, at use
    return transform


PASS_STEPS: dict[str, PassStep] = {s.key: s for s in (
    PassStep("BindParams", "BindParams",
             'relax.transform.BindParams("main", params)',
             lambda w: _transform().BindParams("main", dict(w)),
             "the weights become constants of main"),
    PassStep("LegalizeOps", "LegalizeOps", "relax.transform.LegalizeOps()",
             lambda w: _transform().LegalizeOps(),
             "every high-level operator becomes R.call_tir of a TensorIR function"),
    PassStep("AnnotateTIROpPattern", "AnnotateTIROpPattern",
             "relax.transform.AnnotateTIROpPattern()",
             lambda w: _transform().AnnotateTIROpPattern(),
             "each TensorIR function gets its op pattern (what FuseOps reads)"),
    PassStep("FuseOps", "FuseOps", "relax.transform.FuseOps()",
             lambda w: _transform().FuseOps(),
             "element-wise consumers join their producer in a Primitive function"),
    PassStep("FuseTIR", "FuseTIR", "relax.transform.FuseTIR()",
             lambda w: _transform().FuseTIR(),
             "each Primitive function becomes one TensorIR function"),
    PassStep("DeadCodeElimination", "DeadCodeElimination",
             "relax.transform.DeadCodeElimination()",
             lambda w: _transform().DeadCodeElimination(),
             "unused bindings and functions removed"),
    PassStep("FuseDenseAdd", "fuse matmul + add", "FuseDenseAddPass()",
             lambda w: _transform().FuseDenseAddPass(),
             "the chapter's MatmulAddFusor: R.matmul then R.add -> fused_matmul_add"),
    PassStep("EwiseFMA", "ewise_fma", "EwiseFMARewriter (on every Relax function)",
             lambda w: _transform().EwiseFMA(),
             "the chapter's EwiseFMARewriter: add(multiply(a, b), c) -> R.ewise_fma"),
    PassStep("LowerToTensorIR", "lower to TensorIR", "LowerToTensorIRPass()",
             lambda w: _transform().LowerToTensorIRPass(),
             "the chapter's LowerToTensorIR: operators -> call_te of topi"),
)}


class PassStepError(ValueError):
    """A pass sequence that cannot be read or applied; ``index`` is the step (from 0) it
    names, or None for the sequence as a whole."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


def parse_passes(raw: Any) -> list[str]:
    """The pass keys of a link's ``passes=`` value (comma-separated names of
    :data:`PASS_STEPS`), checked: a :class:`PassStepError` sentence for anything else."""
    if raw is None or raw == "":
        return []
    if not isinstance(raw, str) or not raw.isascii() or len(raw) > 40 * MAX_PASSES:
        raise PassStepError("passes= is a comma-separated list of pass names")
    keys = [k for k in raw.split(",")]
    if len(keys) > MAX_PASSES:
        raise PassStepError(f"the link names {len(keys)} passes; at most {MAX_PASSES}")
    for i, k in enumerate(keys):
        if k not in PASS_STEPS:
            shown = k[:40]
            raise PassStepError(f"there is no pass named {shown!r}; the passes are: "
                                f"{', '.join(PASS_STEPS)}", i)
    return keys


def run_passes(start: IRModule, keys: list[str], weights: dict,
               check: Callable[[int, IRModule], None] | None = None) -> list[IRModule]:
    """``[start, after pass 1, ...]``; ``check(i, mod)`` after each (a budget's check).
    A pass that cannot apply is a :class:`PassStepError` naming it and why."""
    mods = [start]
    for i, key in enumerate(keys):
        step = PASS_STEPS[key]
        try:
            mod = step.make(weights)(mods[-1])
        except PassStepError:
            raise
        except Exception as e:  # noqa: BLE001 - any refusal of a pass is a sentence
            if type(e).__name__ in ("WorkBudgetError", "IndexMapBudgetError"):
                raise
            raise PassStepError(f"step {i + 1}, {step.label}, cannot apply here: "
                                f"{type(e).__name__}: {e}", i) from e
        if check is not None:
            check(i, mod)
        mods.append(mod)
    return mods


def main_calls(mod: IRModule) -> list[tuple[str, str, str]]:
    """(binding name, kind, callee) of each call ``main`` makes, in order: kind ``tir``
    (``R.call_tir``), ``relax`` (a Relax function of the module) or ``op`` (a high-level
    operator, callee its name without ``relax.``)."""
    from engine.relax.expr import Call, GlobalVar, Op
    from engine.relax.transform.fuse_ops import call_tir_callee

    out = []
    for b in mod["main"].bindings():
        v = b.value
        callee = call_tir_callee(v)
        if callee is not None:
            out.append((b.var.name_hint, "tir", callee))
        elif isinstance(v, Call) and isinstance(v.op, GlobalVar):
            out.append((b.var.name_hint, "relax", v.op.name_hint))
        elif isinstance(v, Call) and isinstance(v.op, Op):
            out.append((b.var.name_hint, "op", v.op.name.removeprefix("relax.")))
    return out


def runnable(mod: IRModule, weights: dict) -> IRModule:
    """``mod`` with the weights ``main`` still takes bound (what is measured: the machine
    runs ``main`` on the input alone; the same kernels either way)."""
    from engine.relax.transform import BindParams

    names = {p.name_hint for p in mod["main"].params[1:]}
    bind = {k: v for k, v in weights.items() if k in names}
    return BindParams("main", bind)(mod) if bind else mod


def tir_functions(mod: IRModule) -> list[str]:
    return [n for n, f in mod.items() if isinstance(f, PrimFunc)]
