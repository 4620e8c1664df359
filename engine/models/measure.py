"""Measuring a model's stages (what the measurement workers run for the model page): each
stage compiled, run in the virtual machine, checked against the numpy reference output,
timed end to end and function by function; the model's accuracy on labelled test data
with the last stage.  Returns plain JSON-able data.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from engine.ir.function import IRModule

from engine.relax.transform.steps import main_calls

from .pipeline import profile

__all__ = ["measure_stages", "engine_accuracy"]


def engine_accuracy(mod: IRModule, images: np.ndarray, labels: np.ndarray,
                    batch: int) -> tuple[float, list[int]]:
    """Accuracy of the compiled ``mod`` (input ``(batch, 784)``) over ``images`` in chunks
    of ``batch`` (the last one padded), and the predictions."""
    from engine import relax

    main = relax.VirtualMachine(relax.build(mod, target="llvm"))["main"]
    flat = images.reshape(len(images), -1).astype("float32")
    preds: list[int] = []
    for start in range(0, len(flat), batch):
        chunk = flat[start:start + batch]
        if len(chunk) < batch:
            chunk = np.concatenate([chunk, np.zeros((batch - len(chunk), flat.shape[1]),
                                                    "float32")])
        logits = np.asarray(main(np.ascontiguousarray(chunk)))
        preds.extend(int(p) for p in logits.argmax(axis=1))
    preds = preds[:len(flat)]
    return float((np.asarray(preds) == labels).mean()), preds


def measure_stages(stages: list[tuple[str, IRModule]], x: np.ndarray, reference: np.ndarray,
                   numpy_fn: Callable[[], Any] | None = None, number: int = 10,
                   repeat: int = 3, timing_slot: Callable[[], Any] | None = None,
                   test_images: np.ndarray | None = None,
                   test_labels: np.ndarray | None = None) -> dict[str, Any]:
    """``{"stages": [{"label", "ok", "error", "max_abs_err", "e2e_s", "numpy_s",
    "overhead_per_call_s", "ops": [{"name", "calls", "s"}], "calls": [...]}, ...],
    "accuracy": float|None, "predictions": [...]}``."""
    from engine import relax

    slot = timing_slot or contextlib.nullcontext
    out: dict[str, Any] = {"stages": [], "accuracy": None, "predictions": None}
    for label, mod in stages:
        entry: dict[str, Any] = {"label": label, "ok": False, "error": None,
                                 "calls": [c for _, _, c in main_calls(mod)]}
        try:
            got = np.asarray(relax.VirtualMachine(relax.build(mod, target="llvm"))["main"](x))
        except Exception as e:  # noqa: BLE001 - the page shows the sentence
            entry["error"] = f"{type(e).__name__}: {e}"
            out["stages"].append(entry)
            continue
        err = float(np.max(np.abs(got.astype("float64") - reference))) if got.shape == \
            reference.shape else None
        entry["max_abs_err"] = err
        tol = 1e-3 * max(1.0, float(np.max(np.abs(reference))))
        entry["ok"] = err is not None and err <= tol
        if not entry["ok"]:
            entry["error"] = (f"the result differs from numpy's by {err:.3g}" if err is not None
                              else f"the result has shape {got.shape}, numpy's "
                                   f"{reference.shape}")
        with slot():
            prof = profile(mod, [x], label, number, repeat, numpy_fn=numpy_fn)
        entry.update(e2e_s=prof.e2e_seconds, numpy_s=prof.numpy_seconds,
                     overhead_per_call_s=prof.overhead_per_call,
                     ops=[{"name": o.name, "calls": o.calls, "s": o.seconds} for o in prof.ops])
        out["stages"].append(entry)
    if test_images is not None and test_labels is not None and stages:
        mod = stages[-1][1]
        acc, preds = engine_accuracy(mod, test_images, test_labels, int(x.shape[0]))
        out["accuracy"], out["predictions"] = acc, preds[:64]
    return out
