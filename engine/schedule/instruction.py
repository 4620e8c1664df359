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

TVM's API names a kind of instruction with an :class:`InstructionKind` (``InstructionKind.get
("Split")``: its name, whether it is pure, the engine's Primitive behind it), and writes
an instruction as TVM's ``trace.as_python()`` does (:func:`python_line` with the dialect
:data:`TVM_TRACE`: every argument named, ``l1, = sch.get_loops(block=b0)``, numbers as
TVM's C++ writes them).
"""
from __future__ import annotations

import dataclasses
import inspect
import io
import json
import math
import re
import tokenize
from typing import Any

from engine.ir.node import AttrMap

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


#: the instruction kind that separates a tuned trace's schedule from its post-processing
#: (TVM's ``sch.enter_postproc()``; ``remove_postproc=True`` drops it and what follows)
POSTPROC_KIND = "EnterPostproc"
#: TVM 0.27's names of the kinds the engine names differently (the engine reads both)
TVM_KIND_NAMES = {"GetBlock": "GetSBlock"}
#: the dialect of :func:`python_line` writing TVM's ``trace.as_python()`` lines
TVM_TRACE = "tvm-trace"


class InstructionKind:
    """A kind of schedule instruction, as TVM's ``tvm.s_tir.schedule.InstructionKind``:
    ``InstructionKind.get("Split")`` is the one object of that kind (``same_as`` itself).

    * :attr:`name` — TVM 0.27's name (``"GetSBlock"`` for the engine's ``GetBlock``);
    * :attr:`is_pure` — whether removing the instruction alone changes nothing of the
      schedule's program: the queries and the sampling instructions (TVM's ``kIsPure``;
      ``EnterPostproc`` is not pure: it marks where post-processing starts);
    * :attr:`primitive` — the engine's :class:`~.registry.Primitive` that applies, checks and
      writes it.
    """

    __slots__ = ("_primitive",)
    _KINDS: dict[str, "InstructionKind"] = {}

    def __init__(self, primitive: Any):
        self._primitive = primitive

    @staticmethod
    def get(name: str) -> "InstructionKind":
        """The kind registered under ``name`` (TVM's name or the engine's); a name no
        primitive is registered under raises :class:`TraceError`."""
        prim = REGISTRY.get(name) if isinstance(name, str) else None
        if prim is None:
            raise TraceError(f"instruction kind {short(name)} is not registered")
        kind = InstructionKind._KINDS.get(prim.kind)
        if kind is None:
            kind = InstructionKind._KINDS.setdefault(prim.kind, InstructionKind(prim))
        return kind

    @property
    def name(self) -> str:
        return TVM_KIND_NAMES.get(self._primitive.kind, self._primitive.kind)

    @property
    def is_pure(self) -> bool:
        return not self._primitive.mutates and not self.is_postproc

    @property
    def is_postproc(self) -> bool:
        """Whether this is ``EnterPostproc`` (TVM's ``IsPostproc``)."""
        return self._primitive.kind == POSTPROC_KIND

    @property
    def primitive(self):
        return self._primitive

    def same_as(self, other: Any) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"InstructionKind({self.name!r})"


def dead_code_free(insts: list, pure: Any, defines: Any, uses: Any) -> list[int]:
    """The positions of ``insts`` that TVM's ``Trace.simplified`` keeps: walking backwards,
    a pure instruction (``pure(inst)``) none of whose results (``defines(inst)``) a kept
    instruction uses (``uses(inst)``) is dropped; every other one is kept."""
    used: set = set()
    kept = []
    for n in range(len(insts) - 1, -1, -1):
        inst = insts[n]
        if pure(inst) and not any(d in used for d in defines(inst)):
            continue
        kept.append(n)
        used.update(uses(inst))
    return kept[::-1]


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, AttrMap):
        return {k: _jsonable(x) for k, x in v.items()}
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
    """One instruction as a Python line in ``dialect`` ('engine', 'tvm' or 'course', or
    :data:`TVM_TRACE`: TVM's ``trace.as_python()``); a sampling instruction's ``decision``
    (when known) is written as TVM does, last: ``decision=[8, 16]``."""
    prim = REGISTRY.get(inst.kind)
    if prim is None:
        raise TraceError(f"unknown instruction kind {inst.kind!r}")
    tvm_trace = dialect == TVM_TRACE
    if tvm_trace:
        dialect = "tvm"
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
    if tvm_trace:
        args = _tvm_named(prim, args)
    call = f"sch.{prim.method_name(dialect)}({', '.join(args)})"
    outs = [py_name(o) for o in inst.outputs]
    if not outs:
        line = call
    elif prim.returns == "list" and len(outs) == 1:
        line = f"{outs[0]}, = {call}" if tvm_trace else f"({outs[0]},) = {call}"
    elif prim.returns == "list":
        line = f"{', '.join(outs)} = {call}"
    else:
        line = f"{outs[0]} = {call}"
    return _tvm_numbers(line) if tvm_trace else line


#: the kinds whose handle arguments TVM's ``as_python`` writes without their names
#: (``sch.get_child_blocks(b0)``, ``sch.fuse(l1, l2, preserve_unit_iters=True)``)
_TVM_POSITIONAL = frozenset({"GetChildBlocks", "Fuse", "Merge", "Reorder"})
#: argument names TVM's ``as_python`` writes differently from the method's parameter
_TVM_ARG_NAMES = {"GetOutputBlocks": {"scope_block": "block"}}
_KEYWORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(?!=)")


def _tvm_named(prim: Any, args: list[str]) -> list[str]:
    """``args`` (the 'tvm' export's) with every argument named as TVM's ``as_python``
    names it: a leading positional one gets its parameter's name."""
    if prim.kind in _TVM_POSITIONAL:
        return args
    params = [p for p in inspect.signature(prim.call).parameters.values()][1:]  # sch
    renames = _TVM_ARG_NAMES.get(prim.kind, {})
    out = []
    for i, arg in enumerate(args):
        m = _KEYWORD.match(arg)
        if m is None and i < len(params) and \
                params[i].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD:
            arg = f"{params[i].name}={arg}"
            m = _KEYWORD.match(arg)
        if m is not None and m.group(1) in renames:
            arg = renames[m.group(1)] + arg[m.end(1):]
        out.append(arg)
    return out


def _tvm_numbers(line: str) -> str:
    """``line`` with its floating-point numbers written as TVM's C++ writes them (17
    significant digits, a whole number without its point: ``probs=[1]``, ``0.14999999999999999``).
    Only number tokens change; string literals are left as they are."""
    cuts = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.NUMBER and not tok.string.lower().startswith("0x") and \
                    any(c in tok.string for c in ".eE"):
                cuts.append((tok.start[1], tok.end[1], "%.17g" % float(tok.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):  # pragma: no cover - our own line
        return line
    for start, end, text in reversed(cuts):
        line = line[:start] + text + line[end:]
    return line


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


#: how deep and how long a plain input's lists and dicts may be (an annotation value)
_LITERAL_DEPTH = 8
_LITERAL_ITEMS = 256


def _check_literal(v: Any, where: str, depth: int = 0, quoted: bool = True) -> Any:
    """A plain input (a position of ``literal_inputs``: an annotation's value) checked and
    frozen: strings written with their quotes (``quoted``; a dict's strings are as they
    are, TVM's form), numbers, bools, None, lists (tuples) and dicts with string keys
    (:class:`~engine.ir.AttrMap`), at most :data:`_LITERAL_DEPTH` deep."""
    if depth > _LITERAL_DEPTH:
        raise TraceError(f"{where}: a value nested more than {_LITERAL_DEPTH} deep")
    if isinstance(v, str):
        if quoted:
            try:
                if not isinstance(json.loads(v), str):
                    raise ValueError
            except ValueError:
                raise TraceError(f"{where}: {short(v)} is a handle name or a bad string "
                                 "literal where a value is expected") from None
        return v
    if isinstance(v, (list, tuple)):
        if len(v) > _LITERAL_ITEMS:
            raise TraceError(f"{where}: a list of more than {_LITERAL_ITEMS} values")
        return tuple(_check_literal(x, where, depth + 1, quoted) for x in v)
    if isinstance(v, (dict, AttrMap)):
        if len(v) > _LITERAL_ITEMS:
            raise TraceError(f"{where}: a dict of more than {_LITERAL_ITEMS} values")
        if not all(isinstance(k, str) for k in v.keys()):
            raise TraceError(f"{where}: dict keys must be strings")
        return AttrMap((k, _check_literal(x, where, depth + 1, False)) for k, x in v.items())
    return _check_value(v, where)


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
            if len(ins) in prim.literal_inputs and not (isinstance(x, str) and
                                                         not x.startswith('"')):
                ins.append(_check_literal(x, f"instruction {n} ({kind})"))
                continue
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
            elif isinstance(x, list) and len(ins) in prim.int_list_inputs:
                if len(x) > 64 or not all(isinstance(y, int) and not isinstance(y, bool)
                                          for y in x):
                    raise TraceError(f"instruction {n} ({kind}): input {len(ins)} must be "
                                     f"a list of at most 64 integers, got {x!r}"[:200])
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

