"""Instructions: the records a trace is made of, how a list of them is read and checked
(our documents and TVM's), and how one is written as a line of Python.

An instruction has TVM's shape ``[kind, inputs, attrs, outputs]``::

    ["GetBlock", [], ["Y", "mm_relu"], ["b0"]]
    ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]
    ["Split", ["l2", null, 4], [true, false], ["l4", "l5"]]

``inputs`` hold handle names (``"b0"``, ``"l2"``), numbers, ``null`` and string literals
written with their quotes (``"\\"pragma\\""``, TVM's convention).

This module sits below both the Schedule (:mod:`.state`, which records instructions) and
the Trace (:mod:`.recorded_trace`), so neither needs the other's module to know them.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from .error import TraceError
from .literals import SCRIPT_NAMES, is_handle_name, is_param_name, py_literal, py_name, short
from .registry import REGISTRY


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One recorded step: ``kind``, ``inputs`` (handle names/literals), ``attrs``, ``outputs``."""

    kind: str
    inputs: tuple
    attrs: tuple
    outputs: tuple

    def as_list(self) -> list:
        return [self.kind, _jsonable(list(self.inputs)), _jsonable(list(self.attrs)),
                list(self.outputs)]

    @property
    def primitive(self):
        return REGISTRY.get(self.kind)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def is_ref(v: Any) -> bool:
    """Whether a trace input is a handle name (string literals are written with quotes)."""
    return isinstance(v, str) and not v.startswith('"')


def norm_workload(workload: Any) -> tuple[str, dict] | None:
    """Workload metadata as ``(name, params)`` (or None), from any of the accepted forms."""
    if workload is None:
        return None
    if isinstance(workload, dict):
        name, params = workload.get("name"), workload.get("params", {})
    elif isinstance(workload, (tuple, list)) and len(workload) == 2:
        name, params = workload
    elif isinstance(workload, str):
        name, params = workload, {}
    else:
        raise TypeError("workload must be (name, params), {'name':..., 'params':...} or a name")
    if not isinstance(name, str) or not isinstance(params, dict):
        raise TypeError("workload must be (name: str, params: dict)")
    return name, dict(params)


def python_line(inst: Instruction, dialect: str, decision: Any = None) -> str:
    """One instruction as a Python line in ``dialect`` ('engine', 'tvm' or 'course'); a
    sampling instruction's ``decision`` (when known) is written as TVM does, last:
    ``decision=[8, 16]``."""
    prim = REGISTRY.get(inst.kind)
    if prim is None:
        raise TraceError(f"unknown instruction kind {inst.kind!r}")
    try:
        args = prim.python_args(list(inst.inputs), list(inst.attrs), dialect)
        if decision is not None:
            checked = prim.check_decision(list(inst.attrs), decision)
            args.append(f"decision={py_literal(checked, 'a decision')}")
    except (IndexError, TypeError, ValueError) as e:  # TraceError is a ValueError
        if isinstance(e, TraceError):
            raise
        raise TraceError(f"{inst.kind} has inputs or attributes of the wrong shape "
                         f"({inst.kind} takes {len(inst.inputs)} input(s) here)") from None
    call = f"sch.{prim.method_name(dialect)}({', '.join(args)})"
    outs = [py_name(o) for o in inst.outputs]
    if not outs:
        return call
    if prim.returns == "list":
        if len(outs) == 1:
            return f"({outs[0]},) = {call}"
        return f"{', '.join(outs)} = {call}"
    return f"{outs[0]} = {call}"


def check_workload_params(params: dict) -> None:
    """Workload parameters are keyword arguments: identifier names, plain values."""
    for k, v in params.items():
        if not is_param_name(k):
            raise TraceError(f"workload parameter {short(k)} is not a parameter name "
                             "(letters, digits and '_')")
        if not (v is None or isinstance(v, (bool, int, str)) or
                (isinstance(v, float) and math.isfinite(v))):
            raise TraceError(f"workload parameter {k} must be a number or a string, "
                             f"got {short(v)}")


def _check_value(v: Any, where: str) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        raise TraceError(f"{where}: numbers must be finite, got {v!r}")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return tuple(_check_value(x, where) for x in v)
    raise TraceError(f"{where}: unsupported value {v!r}")


def check_insts(insts: list, tvm: bool) -> list[Instruction]:
    """Read and check a raw instruction list (ours, or TVM's with ``tvm=True``)."""
    out = []
    defined: set[str] = set()
    for n, raw in enumerate(insts, 1):
        if not isinstance(raw, list) or len(raw) != 4:
            raise TraceError(f"instruction {n} must be [kind, inputs, attrs, outputs], "
                             f"got {raw!r}")
        kind, inputs, attrs, outputs = raw
        if not isinstance(kind, str):
            raise TraceError(f"instruction {n}: the kind must be a string, got {kind!r}")
        prim = REGISTRY.get(kind)
        if prim is None:
            raise TraceError(f"instruction {n}: unknown instruction kind {kind!r}")
        if not all(isinstance(x, list) for x in (inputs, attrs, outputs)):
            raise TraceError(f"instruction {n} ({kind}): inputs, attrs and outputs must be lists")
        ins = []
        for x in inputs:
            if tvm and x == "None":
                x = None
            if isinstance(x, str) and not x.startswith('"'):
                if x not in defined:
                    raise TraceError(f"instruction {n} ({kind}) refers to {x!r}, which no "
                                     "earlier instruction defines")
            elif isinstance(x, str):
                try:
                    if not isinstance(json.loads(x), str):
                        raise ValueError
                except ValueError:
                    raise TraceError(f"instruction {n} ({kind}): bad string literal {x!r}") \
                        from None
            elif isinstance(x, list):
                if len(ins) not in prim.list_inputs:
                    raise TraceError(f"instruction {n} ({kind}): nested lists are not valid "
                                     "inputs")
                for y in x:  # a list of handles (CacheRead's consumer_blocks)
                    if not isinstance(y, str) or y.startswith('"') or y not in defined:
                        raise TraceError(f"instruction {n} ({kind}): input {len(ins)} must be "
                                         f"a list of earlier handle names, got {x!r}")
            ins.append(_check_value(x, f"instruction {n} ({kind})"))
        at = [_check_value(x, f"instruction {n} ({kind})") for x in attrs]
        try:
            prim.check_attrs(at)
        except TraceError as e:
            raise TraceError(f"instruction {n} ({kind}): {e}") from None
        for o in outputs:
            if not is_handle_name(o):
                raise TraceError(f"instruction {n} ({kind}): output names must be identifiers "
                                 "that are not Python keywords nor "
                                 f"{', '.join(sorted(SCRIPT_NAMES))}, got {short(o)}")
            if o in defined:
                raise TraceError(f"instruction {n} ({kind}) defines {o!r} a second time")
            defined.add(o)
        out.append(Instruction(prim.kind, tuple(ins), tuple(at), tuple(outputs)))
    return out

