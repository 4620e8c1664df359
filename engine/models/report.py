"""``python -m engine run-model mlp``: accuracy, end-to-end time and the per-operator table
of a model, as text."""
from __future__ import annotations

from typing import TextIO

import numpy as np

from .pipeline import profile, stage_module
from .zoo import Model

__all__ = ["accuracy_in_engine", "report"]


def accuracy_in_engine(model: Model, stage: str = "fused+scheduled") -> float | None:
    """Test accuracy of the model compiled by the engine (the whole test set, one batch)."""
    if model.test_labels is None or model.batch_fixed is not None:
        return None
    from engine import relax

    n = len(model.test_labels)
    mod, _ = stage_module(model.build(n), stage)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"))
    logits = np.asarray(vm["main"](model.test_inputs(n)))
    return float((logits.argmax(axis=1) == model.test_labels).mean())


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def report(model: Model, batch: int, stages: tuple[str, ...], out: TextIO, number: int = 10,
           repeat: int = 3) -> dict:
    """Print the model's accuracy (when it has labels), then per stage the end-to-end time
    and each TensorIR function's; returns the figures."""
    figures: dict = {"model": model.name, "batch": batch, "stages": {}}
    acc = accuracy_in_engine(model)
    if acc is not None:
        figures["accuracy"] = acc
        print(f"{model.title}", file=out)
        print(f"test accuracy (engine, {len(model.test_labels)} images): {acc:.2%}"
              f"   (numpy float32: {model.trained_accuracy:.2%})", file=out)
        x = model.test_inputs(min(4, len(model.test_labels)))
        pred = model.numpy_fn(x).argmax(axis=1)
        print("first test images: labels " + " ".join(map(str, model.test_labels[:len(x)]))
              + ", predicted " + " ".join(map(str, pred)), file=out)
    x = model.test_inputs(batch)
    for stage in stages:
        mod, _ = stage_module(model.build(batch), stage)
        prof = profile(mod, [x], stage, number, repeat,
                       numpy_fn=(lambda: model.numpy_fn(x)) if model.numpy_fn else None)
        figures["stages"][stage] = prof.to_dict()
        print(f"\n[{stage}] batch {batch}: end to end {_us(prof.e2e_seconds)} µs"
              + (f", numpy {_us(prof.numpy_seconds)} µs" if prof.numpy_seconds else "")
              + f", {prof.n_calls} call_tir, VM overhead {_us(prof.overhead_per_call)} µs "
                "per call", file=out)
        rows = [[o.name, str(o.calls), _us(o.seconds),
                 f"{o.total / prof.e2e_seconds:.0%}" if prof.e2e_seconds else "-"]
                for o in prof.ops]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in
                  enumerate(["function", "calls", "µs/call", "share"])]
        head = ["function", "calls", "µs/call", "share"]
        print("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                        for i, (h, w) in enumerate(zip(head, widths))), file=out)
        for r in rows:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(r, widths))), file=out)
    return figures


