"""An inference request of the serving endpoint, checked against an exported library's
functions: what ``POST /v1/<function>`` may carry, and how its answer is laid out.

The functions come from the library's metadata (the header's names, shapes and dtypes):
:func:`function_specs`.  A request body is a JSON object with

* ``"inputs"``: the function's inputs, a list in order (``[x]``) or an object by name
  (``{"x": ...}``); each array has the function's shape (``(1, 784)``), or that shape
  without its leading 1 (``(784,)``), or carries a leading batch dimension of ``n`` copies
  (``(n, 784)`` or ``(n, 1, 784)``): ``n`` inputs in one request, run one after another;
* or ``"batch"``: a list of such input sets, each of the function's own shape.

:func:`read_request` checks all of it (one :class:`RequestError` sentence for whatever is
wrong: not JSON, a missing or unknown input, a shape, non-numbers, over the batch limit)
and returns a :class:`Batch`: the input sets to run and how to lay out their outputs
(:func:`outputs_doc`) the way the inputs came.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TensorSpec", "FunctionSpec", "RequestError", "Batch", "function_specs",
           "read_request", "outputs_doc", "shape_text"]

#: the dtypes an endpoint takes and the numpy dtype of each
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
          "bool": np.bool_}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of an exported function: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def doc(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class FunctionSpec:
    """An exported function: its inputs and outputs, in the order of its C entry point."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def doc(self) -> dict[str, Any]:
        return {"inputs": [t.doc() for t in self.inputs],
                "outputs": [t.doc() for t in self.outputs]}


class RequestError(ValueError):
    """A request the endpoint refuses: ``status`` (400, 404, 413) and one sentence."""

    def __init__(self, status: int, sentence: str):
        super().__init__(sentence)
        self.status = status


def shape_text(shape: tuple[int, ...]) -> str:
    """A shape as Python writes a tuple: ``(1, 784)``, ``(10,)``, ``()``."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# ---------------------------------------------------------------------------- metadata
def _tensor(doc: Any, where: str) -> TensorSpec:
    if not isinstance(doc, dict):
        raise ValueError(f"{where} is not an object with name, shape and dtype")
    name, shape, dtype = doc.get("name"), doc.get("shape"), doc.get("dtype")
    if not isinstance(name, str) or not isinstance(shape, list) or \
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"{where} has no name or no shape of whole numbers")
    if dtype not in DTYPES:
        raise ValueError(f"{where} has dtype {dtype!r}; the endpoint serves "
                         f"{', '.join(DTYPES)}")
    return TensorSpec(name, tuple(shape), dtype)


def function_specs(metadata: dict[str, Any]) -> dict[str, FunctionSpec]:
    """The functions a library's metadata describes: ``{"functions": [{"name": ..,
    "inputs": [{"name", "shape", "dtype"}, ...], "outputs": [...]}, ...]}`` (a dict by
    function name is read too).  ``ValueError`` with a sentence when it is not that."""
    funcs = metadata.get("functions") if isinstance(metadata, dict) else None
    if isinstance(funcs, dict):
        funcs = [{"name": k, **v} for k, v in funcs.items() if isinstance(v, dict)]
    if not isinstance(funcs, list) or not funcs:
        raise ValueError("the library's metadata lists no functions")
    out: dict[str, FunctionSpec] = {}
    for i, f in enumerate(funcs):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise ValueError(f"function {i} of the library's metadata has no name")
        name = f["name"]
        ins = [_tensor(t, f"input {k} of {name}") for k, t in enumerate(f.get("inputs") or [])]
        outs = [_tensor(t, f"output {k} of {name}")
                for k, t in enumerate(f.get("outputs") or [])]
        if not outs:
            raise ValueError(f"{name} in the library's metadata has no outputs")
        out[name] = FunctionSpec(name, tuple(ins), tuple(outs))
    return out


# ---------------------------------------------------------------------------- requests
@dataclass
class Batch:
    """A checked request: ``items`` the input sets to run (each a list of arrays in the
    function's order, of its exact shapes), and how the answer is laid out: ``by_name``
    (outputs as an object by name, as the inputs came), ``layout`` one of ``"one"`` (one
    input set of the function's shape), ``"one-squeezed"`` (one, given without its leading
    1), ``"stacked"`` (a leading batch dimension over the function's shape),
    ``"stacked-squeezed"`` (the batch dimension in place of the leading 1) or ``"list"``
    (the ``"batch"`` list form)."""

    items: list[list[np.ndarray]]
    by_name: bool
    layout: str


def _json(body: bytes) -> Any:
    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(body.decode("utf-8"), parse_constant=refuse_constant)
    except UnicodeDecodeError:
        raise RequestError(400, "The request body is not UTF-8 text; send JSON such as "
                                '{"inputs": [...]}.') from None
    except RecursionError:
        raise RequestError(400, "The request body nests too deeply to be read as JSON.") \
            from None
    except ValueError as e:
        raise RequestError(400, f"The request body is not JSON ({e}); send an object such "
                                'as {"inputs": [...]}.') from None


def _numbers(value: Any, t: TensorSpec, fname: str) -> np.ndarray:
    """``value`` as an array of ``t``'s dtype, or a sentence naming the input."""
    try:
        a = np.asarray(value)
    except ValueError:
        raise RequestError(400, f"Input {t.name!r} of {fname} is not a rectangular array "
                                f"(its rows have different lengths).") from None
    if t.dtype == "bool" and a.dtype.kind in "biu" and (a.dtype.kind == "b" or not a.size
                                                        or set(np.unique(a)) <= {0, 1}):
        return np.asarray(a, dtype=np.bool_, order="C")
    if t.dtype == "bool":
        raise RequestError(400, f"Input {t.name!r} of {fname} takes true/false (or 0/1) "
                                f"values.")
    if a.dtype.kind not in "iuf":
        what = {"b": "true/false values", "U": "strings", "O": "values that are not numbers "
                "(null, objects or rows of different lengths)"}.get(a.dtype.kind, "values")
        raise RequestError(400, f"Input {t.name!r} of {fname} holds {what}; it takes "
                                f"numbers ({t.dtype}).")
    dt = np.dtype(DTYPES[t.dtype])
    if dt.kind in "iu":
        if a.dtype.kind == "f" and a.size and not np.array_equal(a, np.trunc(a)):
            raise RequestError(400, f"Input {t.name!r} of {fname} holds fractions; it takes "
                                    f"whole numbers ({t.dtype}).")
        info = np.iinfo(dt)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise RequestError(400, f"Input {t.name!r} of {fname} holds values outside "
                                    f"{t.dtype}'s range {info.min}..{info.max}.")
        return np.asarray(a, dtype=dt, order="C")
    with np.errstate(over="ignore"):
        out = np.asarray(a, dtype=dt, order="C")
    if out.size and not np.isfinite(out).all():
        raise RequestError(400, f"Input {t.name!r} of {fname} holds values too large for "
                                f"{t.dtype}.")
    return out


def _form(a: np.ndarray, t: TensorSpec, fname: str, max_batch: int,
          stacking: bool) -> tuple[str, int]:
    """How array ``a`` carries input ``t``: (layout, how many input sets)."""
    s = t.shape
    if a.shape == s:
        return "one", 1
    if s and s[0] == 1 and a.shape == s[1:]:
        return "one-squeezed", 1
    if stacking and a.ndim == len(s) + 1 and a.shape[1:] == s:
        return "stacked", a.shape[0]
    if stacking and s and s[0] == 1 and a.ndim == len(s) and a.shape[1:] == s[1:]:
        return "stacked-squeezed", a.shape[0]
    more = ""
    if stacking:
        lead = f"(n, {', '.join(str(d) for d in s[1:])})" if s and s[0] == 1 and len(s) > 1 \
            else f"(n, {', '.join(str(d) for d in s)})"
        more = f", or {lead} for n inputs at once (n up to {max_batch})"
    raise RequestError(400, f"Input {t.name!r} of {fname} has shape {shape_text(a.shape)}; "
                            f"{fname} expects {shape_text(s)}{more}.")


def _input_set(value: Any, spec: FunctionSpec, max_batch: int, stacking: bool
               ) -> tuple[list[np.ndarray], bool]:
    """The arrays of one ``inputs`` value in the function's order, and whether they came
    by name."""
    names = [t.name for t in spec.inputs]
    listed = ", ".join(names) or "no inputs"
    if isinstance(value, dict):
        unknown = [k for k in value if k not in names]
        if unknown:
            raise RequestError(400, f"{spec.name} has no input {unknown[0][:60]!r}; its "
                                    f"inputs are {listed}.")
        missing = [n for n in names if n not in value]
        if missing:
            raise RequestError(400, f"Input {missing[0]!r} of {spec.name} is missing; its "
                                    f"inputs are {listed}.")
        values, by_name = [value[n] for n in names], True
    elif isinstance(value, list):
        if len(value) != len(names):
            hint = (f' (put the array in a list, {{"inputs": [x]}}, or name it, '
                    f'{{"inputs": {{"{names[0]}": x}}}})' if len(names) == 1 else "")
            raise RequestError(400, f"{spec.name} takes {len(names)} input"
                                    f"{'s' if len(names) != 1 else ''} ({listed}), got "
                                    f"{len(value)}{hint}.")
        values, by_name = value, False
    else:
        raise RequestError(400, f'"inputs" must be a list of {spec.name}\'s inputs in order '
                                f"({listed}) or an object by name.")
    return [_numbers(v, t, spec.name) for v, t in zip(values, spec.inputs)], by_name


def read_request(body: bytes, spec: FunctionSpec, max_batch: int) -> Batch:
    """The input sets of a request body for ``spec`` (see the module docstring), every
    value checked; a :class:`RequestError` with one sentence otherwise."""
    doc = _json(body)
    if not isinstance(doc, dict) or ("inputs" in doc) == ("batch" in doc):
        raise RequestError(400, 'The request body must be a JSON object with "inputs" (the '
                                f"function's inputs, a list or an object by name) or "
                                f'"batch" (a list of such input sets).')
    if "batch" in doc:
        sets = doc["batch"]
        if not isinstance(sets, list) or not sets:
            raise RequestError(400, '"batch" must be a non-empty list of input sets.')
        if len(sets) > max_batch:
            raise _over_batch(len(sets), max_batch)
        items, by_name = [], False
        for value in sets:
            arrays, by_name = _input_set(value, spec, max_batch, stacking=False)
            items.append([a.reshape(t.shape) for a, t in zip(arrays, spec.inputs)])
        return Batch(items, by_name, "list")
    arrays, by_name = _input_set(doc["inputs"], spec, max_batch, stacking=True)
    forms = [_form(a, t, spec.name, max_batch, True) for a, t in zip(arrays, spec.inputs)]
    counts = {f[1] for f in forms}
    if len(counts) > 1 or len({f[0].startswith("stacked") for f in forms}) > 1:
        raise RequestError(400, f"The inputs of {spec.name} carry different batch sizes "
                                f"({', '.join(str(f[1]) for f in forms)}); give every input "
                                "the same leading batch dimension.")
    n = counts.pop() if counts else 1
    if n > max_batch:
        raise _over_batch(n, max_batch)
    if n == 0:
        raise RequestError(400, "The request carries a batch of 0 inputs; send at least one.")
    layout = forms[0][0] if forms else "one"
    items = [[(a[k] if layout.startswith("stacked") else a).reshape(t.shape)
              for a, t in zip(arrays, spec.inputs)] for k in range(n)]
    return Batch(items, by_name, layout)


def _over_batch(n: int, max_batch: int) -> RequestError:
    return RequestError(400, f"The request carries {n} inputs; this endpoint runs at most "
                             f"{max_batch} per request (--max-batch): split it.")


def _laid_out(per_item: list[np.ndarray], t: TensorSpec, layout: str) -> Any:
    """One output over the batch, laid out as the inputs came."""
    if layout in ("one", "list"):
        return [a.tolist() for a in per_item] if layout == "list" else per_item[0].tolist()
    squeeze = layout.endswith("squeezed") and t.shape[:1] == (1,)
    arrays = [a.reshape(t.shape[1:]) if squeeze else a for a in per_item]
    if layout == "one-squeezed":
        return arrays[0].tolist()
    return np.stack(arrays).tolist()


def outputs_doc(batch: Batch, results: list[list[np.ndarray]], spec: FunctionSpec) -> Any:
    """The answer's ``outputs``: a list in the function's order, or an object by name when
    the inputs came by name; each laid out as its inputs came (see :class:`Batch`)."""
    if batch.layout == "list":
        per_set = [[r.tolist() for r in res] for res in results]
        if batch.by_name:
            return [{t.name: v for t, v in zip(spec.outputs, s)} for s in per_set]
        return per_set
    outs = [_laid_out([res[i] for res in results], t, batch.layout)
            for i, t in enumerate(spec.outputs)]
    if batch.by_name:
        return {t.name: v for t, v in zip(spec.outputs, outs)}
    return outs


def finite_ms(seconds: float) -> float:
    """Milliseconds, rounded for the answer (never NaN)."""
    ms = seconds * 1e3
    return round(ms, 4) if math.isfinite(ms) else 0.0
