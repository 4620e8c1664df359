"""A read :class:`~.graph.Graph` as plain data, and back: what a sandboxed worker process
that read an ONNX model sends through a pipe.

:func:`graph_to_doc` writes a JSON-serialisable dict::

    {"format": "engine.relax.frontend.graph/1",
     "inputs": [{"name": "x", "shape": [1, 784], "dtype": "float32"}],
     "constants": {"w0": {"dtype": "float32", "shape": [784, 128],
                          "data": "<base64 of the C-order little-endian bytes>"}, ...},
     "calls": [{"op": "matmul", "inputs": ["x", "w0"], "output": "h__3", "attrs": {},
                "source": "Gemm 'fc1'"}, ...],
     "outputs": ["y"],
     "shapes": {"x": [1, 784], "w0": [784, 128], "h__3": [1, 128], ...}}

:func:`graph_from_doc` reads one as hostile input, as the ONNX reader reads a model: every
field's type; names defined once and before they are read; operators of :data:`~.graph.OPS`
with exactly their attributes, of their kinds; constants' base64 lengths checked against
dtype and shape before decoding; every shape recomputed (a doc whose declared shapes
disagree is refused); and the same :class:`~.graph.OnnxLimits` as a model (elements per
tensor and in all, FLOPs of the forward pass).  Anything wrong is an
:class:`~.graph.ImportError_` sentence.
"""
from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from .graph import (COMPUTED_DTYPE, MAX_NAME_CHARS, OPS, Call, Graph, ImportError_,
                    OnnxLimits, WorkBudget, check_attrs, check_tensor_shape, output_shape)

__all__ = ["DOC_FORMAT", "graph_to_doc", "graph_from_doc"]

DOC_FORMAT = "engine.relax.frontend.graph/1"
#: the dtypes a constant may have (integers: a Reshape's target shape, which the reader
#: drops once read; only float32 values are computed)
CONSTANT_DTYPES = ("float32", "int64", "int32")
#: the most calls one ONNX node becomes (Gemm: two transposes, matmul, add)
MAX_CALLS_PER_NODE = 4
#: the longest source a call may name (the reader's are an operator and a cut-short name)
MAX_SOURCE_CHARS = 200
_KEYS = ("format", "inputs", "constants", "calls", "outputs", "shapes")
_CALL_KEYS = ("op", "inputs", "output", "attrs", "source")
_CONSTANT_KEYS = ("dtype", "shape", "data")


# ----------------------------------------------------------------------------- writing
def _constant_doc(arr: np.ndarray) -> dict:
    little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return {"dtype": str(arr.dtype), "shape": [int(d) for d in arr.shape],
            "data": base64.b64encode(little.tobytes(order="C")).decode("ascii")}


def _attr_doc(value: Any) -> Any:
    return [int(v) for v in value] if isinstance(value, tuple) else int(value)


def graph_to_doc(graph: Graph) -> dict:
    """``graph`` as plain, JSON-serialisable data (see the module's docstring)."""
    return {
        "format": DOC_FORMAT,
        "inputs": [{"name": name, "shape": [int(d) for d in shape], "dtype": dtype}
                   for name, (shape, dtype) in graph.inputs.items()],
        "constants": {name: _constant_doc(arr) for name, arr in graph.constants.items()},
        "calls": [{"op": c.op, "inputs": list(c.inputs), "output": c.output,
                   "attrs": {k: _attr_doc(v) for k, v in c.attrs}, "source": c.source}
                  for c in graph.calls],
        "outputs": list(graph.outputs),
        "shapes": {name: [int(d) for d in shape] for name, shape in graph.shapes.items()},
    }


# ----------------------------------------------------------------------------- reading
def _bad(message: str) -> ImportError_:
    return ImportError_(f"the graph document is malformed: {message}")


def _kind(v: Any) -> str:
    return type(v).__name__


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _record(v: Any, keys: tuple[str, ...], where: str) -> dict:
    """A dict with exactly ``keys``."""
    if not isinstance(v, dict):
        raise _bad(f"{where} must be a dict, got {_kind(v)}")
    if len(v) != len(keys) or not all(k in v for k in keys):
        raise _bad(f"{where} must have the fields {', '.join(keys)}, got "
                   f"{', '.join(repr(k)[:40] for k in list(v)[:10])}")
    return v


def _list(v: Any, where: str, most: int) -> list:
    if not isinstance(v, list):
        raise _bad(f"{where} must be a list, got {_kind(v)}")
    if len(v) > most:
        raise _bad(f"{where} has {len(v)} entries; at most {most} are allowed")
    return v


def _name(v: Any, where: str) -> str:
    if not isinstance(v, str) or not 0 < len(v) <= MAX_NAME_CHARS:
        raise _bad(f"{where} must be a name (a string of 1 to {MAX_NAME_CHARS} characters), "
                   f"got {_kind(v)}")
    return v


def _shape(v: Any, limits: OnnxLimits, where: str) -> tuple[int, ...]:
    dims = _list(v, where, limits.max_rank)
    if not all(_is_int(d) and d >= 1 for d in dims):
        raise _bad(f"{where} must be a list of positive integers, got {repr(dims)[:80]}")
    dims = tuple(dims)
    check_tensor_shape(dims, limits, where)
    return dims


class _DocReader:
    """Reads a doc's parts in order, each name defined once and before it is read, each
    declared shape checked against the one worked out."""

    def __init__(self, doc: Any, limits: OnnxLimits):
        self.doc = _record(doc, _KEYS, "the document")
        self.limits = limits
        self.g = Graph()
        self.budget = WorkBudget(limits)
        self.declared = doc["shapes"]
        if not isinstance(self.declared, dict):
            raise _bad(f"shapes must be a dict, got {_kind(self.declared)}")

    def define(self, name: str, shape: tuple[int, ...], where: str) -> None:
        if name in self.g.shapes:
            raise _bad(f"{where} defines {name[:60]!r}, which is already defined")
        if name not in self.declared:
            raise _bad(f"shapes has no entry for {name[:60]!r} ({where})")
        if _shape(self.declared[name], self.limits, f"the shape of {name[:60]!r}") != shape:
            raise _bad(f"shapes says {name[:60]!r} ({where}) has shape "
                       f"{tuple(self.declared[name])}, but it has {shape}")
        self.g.shapes[name] = shape

    def inputs(self) -> None:
        entries = _list(self.doc["inputs"], "inputs", self.limits.max_nodes)
        if not entries:
            raise _bad("inputs is empty; a graph has at least one input")
        for k, v in enumerate(entries):
            entry = _record(v, ("name", "shape", "dtype"), f"input {k}")
            name = _name(entry["name"], f"input {k}'s name")
            shape = _shape(entry["shape"], self.limits, f"the shape of input {name[:60]!r}")
            if entry["dtype"] != COMPUTED_DTYPE:
                raise _bad(f"the dtype of input {name[:60]!r} must be {COMPUTED_DTYPE!r}, got "
                           f"{repr(entry['dtype'])[:40]}")
            self.define(name, shape, f"input {k}")
            self.g.inputs[name] = (shape, COMPUTED_DTYPE)

    def constants(self, most: int) -> None:
        entries = self.doc["constants"]
        if not isinstance(entries, dict):
            raise _bad(f"constants must be a dict, got {_kind(entries)}")
        if len(entries) > most:
            raise _bad(f"constants has {len(entries)} entries, more than the calls read")
        total = 0
        for name, v in entries.items():
            name = _name(name, "a constant's name")
            where = f"constant {name[:60]!r}"
            arr = _constant_array(_record(v, _CONSTANT_KEYS, where), self.limits, where)
            total += arr.size
            if total > self.limits.max_total_elements:
                raise ImportError_(f"the graph's constants hold more than "
                                   f"{self.limits.max_total_elements} values in all (the "
                                   "limit, max_total_elements)")
            self.define(name, arr.shape, where)
            self.g.constants[name] = arr

    def calls(self) -> None:
        for k, v in enumerate(self.doc["calls"]):
            entry = _record(v, _CALL_KEYS, f"call {k}")
            call = self.call(entry, k)
            where = f"call {k} ({call.source or call.op})"
            shapes = [self.g.shapes[i] for i in call.inputs]
            out = output_shape(call, shapes)
            self.budget.charge(call, shapes, out)
            self.define(call.output, out, where)
            self.g.calls.append(call)

    def call(self, entry: dict, k: int) -> Call:
        """The call of ``entry``: its operator, operands (defined before, float32) and
        attributes checked."""
        op, source = entry["op"], entry["source"]
        if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS:
            raise _bad(f"call {k}'s source must be a string of at most {MAX_SOURCE_CHARS} "
                       f"characters, got {_kind(source)}")
        if not isinstance(op, str) or op not in OPS:
            raise _bad(f"call {k}'s op must be one of {', '.join(OPS)}, got "
                       f"{repr(op)[:40]}")
        where = f"call {k} ({source or op})"
        inputs = _list(entry["inputs"], f"the inputs of {where}", OPS[op].arity)
        if len(inputs) != OPS[op].arity:
            raise _bad(f"{where}: {op} takes {OPS[op].arity} operand(s), got {len(inputs)}")
        for i in inputs:
            _name(i, f"an operand of {where}")
            if i not in self.g.shapes:
                raise _bad(f"{where} reads {i[:60]!r}, which is not defined before it")
            arr = self.g.constants.get(i)
            if arr is not None and str(arr.dtype) != COMPUTED_DTYPE:
                raise _bad(f"{where} reads the {arr.dtype} constant {i[:60]!r}; only "
                           f"{COMPUTED_DTYPE} values are computed")
        attrs = entry["attrs"]
        if not isinstance(attrs, dict):
            raise _bad(f"the attrs of {where} must be a dict, got {_kind(attrs)}")
        if len(attrs) != len(OPS[op].attrs):
            raise _bad(f"{where}: {op} takes {len(OPS[op].attrs)} attribute(s), got "
                       f"{len(attrs)}")
        items = []
        for key, value in attrs.items():
            if isinstance(value, list):
                value = tuple(_list(value, f"{str(key)[:40]} of {where}",
                                    max(4, self.limits.max_rank)))
            items.append((key, value))
        if not all(isinstance(key, str) for key, _ in items):
            raise _bad(f"the attribute names of {where} must be strings")
        call = Call(op, tuple(inputs), _name(entry["output"], f"the output of {where}"),
                    tuple(sorted(items)), source)
        check_attrs(call)
        return call

    def outputs(self) -> None:
        names = _list(self.doc["outputs"], "outputs", self.limits.max_nodes)
        if not names:
            raise _bad("outputs is empty; a graph has at least one output")
        computed = {c.output for c in self.g.calls}
        for name in names:
            if _name(name, "an output") not in computed:
                raise _bad(f"the output {name[:60]!r} is not computed by any call")
            self.g.outputs.append(name)

    def finish(self) -> Graph:
        extra = [n for n in self.declared if n not in self.g.shapes]
        if extra:
            raise _bad(f"shapes names {str(extra[0])[:60]!r}, which the graph does not define")
        read = {i for c in self.g.calls for i in c.inputs}
        unread = [n for n in self.g.constants if n not in read]
        if unread:
            raise _bad(f"the constant {unread[0][:60]!r} is read by no call")
        return self.g


def _constant_array(entry: dict, limits: OnnxLimits, where: str) -> np.ndarray:
    """The array of a constant's ``{"dtype", "shape", "data"}``, its base64 length checked
    against dtype and shape before it is decoded."""
    dtype = entry["dtype"]
    if dtype not in CONSTANT_DTYPES:
        raise _bad(f"the dtype of {where} must be one of {', '.join(CONSTANT_DTYPES)}, got "
                   f"{repr(dtype)[:40]}")
    shape = _shape(entry["shape"], limits, f"the shape of {where}")
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    data = entry["data"]
    if not isinstance(data, str) or len(data) != 4 * -(-nbytes // 3):
        got = f"{len(data)} characters" if isinstance(data, str) else _kind(data)
        raise _bad(f"the data of {where} must be {4 * -(-nbytes // 3)} characters of base64 "
                   f"({nbytes} bytes of {dtype} for shape {shape}), got {got}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"the data of {where} is not valid base64") from None
    if len(raw) != nbytes:
        raise _bad(f"the data of {where} holds {len(raw)} bytes; {dtype} of shape {shape} needs "
                   f"{nbytes}")
    little = np.dtype(dtype).newbyteorder("<")
    return np.frombuffer(raw, dtype=little).reshape(shape).astype(dtype)


def graph_from_doc(doc: Any, limits: OnnxLimits | None = None) -> Graph:
    """The :class:`~.graph.Graph` of a document written by :func:`graph_to_doc`, read as
    hostile input (an :class:`~.graph.ImportError_` sentence on anything wrong)."""
    reader = _DocReader(doc, limits or OnnxLimits())
    d = reader.doc
    if d["format"] != DOC_FORMAT:
        raise _bad(f"format must be {DOC_FORMAT!r}, got {repr(d['format'])[:60]}")
    calls = _list(d["calls"], "calls", MAX_CALLS_PER_NODE * reader.limits.max_nodes)
    most_names = reader.limits.max_nodes + 3 * len(calls)   # inputs, constants, outputs
    if len(reader.declared) > most_names:
        raise _bad(f"shapes has {len(reader.declared)} entries, more than the graph can "
                   "define")
    reader.inputs()
    reader.constants(most=2 * len(calls))
    reader.calls()
    reader.outputs()
    return reader.finish()
