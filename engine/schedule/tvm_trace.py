"""TVM's ``Instruction`` and ``Trace`` API (``tvm.s_tir.schedule``), over the engine's traces.

The engine records an instruction with *names* (``["GetLoops", ["b0"], [], ["l1", "l2"]]``,
:class:`~.instruction.Instruction`); TVM's instruction holds the *handles themselves*::

    b0, l1, l2 = BlockRV(), LoopRV(), LoopRV()
    trace = TVMTrace([TVMInstruction(InstructionKind.get("GetSBlock"), [], ["B", "main"], [b0]),
                      TVMInstruction(InstructionKind.get("GetLoops"), [b0], [], [l1, l2])], {})
    str(trace)          # the script TVM prints, handles named b0, l1, l2 in order
    trace.as_json()     # [[["GetSBlock", [], ["B", "main"], ["b0"]], ...], []]
    trace.apply_to_schedule(sch, remove_postproc=False)

:class:`TVMTrace` is mutable as TVM's (``append``, ``pop``) and keys its decisions by
instruction object. Its handles are named as TVM names them (``b``/``l``/``v`` and the
count of handles named before), which turns it into the engine's :class:`~.recorded_trace.
Trace` (:meth:`TVMTrace.recorded`): replay, TVM's ``as_python`` lines and every check are the
engine trace's. A sampled integer (TVM's ExprRV) may be an :class:`~.state.ExprRV` or, as in
TVM's tests, a ``tirx.Var``. Values may be Python's or TVM's IntImm/FloatImm.

This module sits above :mod:`.state` (it knows the handle classes).
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

from engine.ir.expr import FloatImm, IntImm, PrimExpr, Var
from engine.ir.functor import post_order_visit
from engine.ir.node import AttrMap

from .error import TraceError
from .instruction import Instruction, InstructionKind, check_insts, dead_code_free, python_line
from .recorded_trace import Trace, read_tvm_json
from .state import BlockRV, ExprRV, LoopRV

__all__ = ["TVMInstruction", "TVMTrace", "InstructionKind"]

HEADER = ("# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:")


def _is_handle(v: Any) -> bool:
    """A BlockRV, LoopRV or sampled integer (an ExprRV, or a Var as TVM's ExprRV)."""
    return isinstance(v, (BlockRV, LoopRV, ExprRV, Var))


def _prefix(rv: Any) -> str:
    """TVM's name prefix of a handle: ``b`` block, ``l`` loop, ``v`` sampled value."""
    if isinstance(rv, BlockRV):
        return "b"
    if isinstance(rv, LoopRV):
        return "l"
    if isinstance(rv, (ExprRV, Var)):
        return "v"
    raise TraceError(f"an instruction's output must be a BlockRV, LoopRV or ExprRV, got "
                     f"{type(rv).__name__}")


class TVMInstruction:
    """One schedule instruction as TVM builds it: ``kind`` (an :class:`InstructionKind`),
    ``inputs`` (handles, numbers, strings, None, lists), ``attrs`` (plain values),
    ``outputs`` (the handles it defines). Compared and hashed by identity, as TVM's
    objects; ``str(inst)`` is TVM's line with every handle written ``_``."""

    __slots__ = ("kind", "inputs", "attrs", "outputs")

    def __init__(self, kind: Any, inputs: Iterable = (), attrs: Iterable = (),
                 outputs: Iterable = ()):
        if isinstance(kind, str):
            kind = InstructionKind.get(kind)
        if not isinstance(kind, InstructionKind):
            raise TypeError(f"an instruction's kind must be an InstructionKind, got "
                            f"{type(kind).__name__}")
        self.kind = kind
        self.inputs = tuple(inputs)
        self.attrs = tuple(attrs)
        self.outputs = tuple(outputs)

    def same_as(self, other: Any) -> bool:
        return self is other

    def __str__(self) -> str:
        names = _Names(anonymous=True)
        return python_line(names.instruction(self), "tvm-trace")

    def __repr__(self) -> str:
        try:
            return str(self)
        except TraceError:
            return f"Instruction({self.kind.name}, {len(self.inputs)} inputs)"


class _Names:
    """Handles named as TVM names them while a trace is written (``b0``, ``l1``, ``v2``:
    the prefix of the handle's kind and the count of handles named before), and the
    values of an instruction in the engine's trace form."""

    def __init__(self, anonymous: bool = False):
        self.anonymous = anonymous   # every handle "_" (TVM's str(instruction))
        self.names: dict[int, str] = {}
        self.keep: list = []         # the named handles, alive while their ids are keys

    def define(self, rv: Any) -> str:
        if self.anonymous:
            return "_"
        if id(rv) in self.names:
            raise TraceError(f"the handle {self.names[id(rv)]} is defined a second time")
        name = f"{_prefix(rv)}{len(self.names)}"
        self.names[id(rv)] = name
        self.keep.append(rv)
        return name

    def ref(self, rv: Any) -> str:
        if self.anonymous:
            return "_"
        name = self.names.get(id(rv))
        if name is None:
            raise TraceError(f"the handle {rv!r} is used before an instruction defines it")
        return name

    def value(self, v: Any, literal_strings: bool) -> Any:
        """``v`` in trace form: handles by name, strings quoted when they are ``inputs``
        (``literal_strings``), TVM's IntImm/FloatImm as numbers, lists as tuples."""
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise TraceError(f"numbers must be finite, got {v!r}")
            return v
        if isinstance(v, str):
            return json.dumps(v) if literal_strings else v
        if _is_handle(v):
            return self.ref(v)
        if isinstance(v, IntImm):
            return bool(v.value) if v.dtype == "bool" else int(v.value)
        if isinstance(v, FloatImm):
            return self.value(float(v.value), literal_strings)
        if isinstance(v, (list, tuple)):
            return tuple(self.value(x, literal_strings) for x in v)
        if isinstance(v, (dict, AttrMap)):   # a dict (an annotation's value): as it is
            return AttrMap((k, self.value(x, False)) for k, x in v.items())
        if isinstance(v, PrimExpr):
            raise TraceError(f"an expression ({v!r}) cannot be an instruction's input here; "
                             "give the handle or the number itself")
        raise TraceError(f"{type(v).__name__} {v!r} cannot be an instruction's value (use "
                         "handles, numbers, strings, None or lists of them; a T.int32(...) "
                         "called outside a TVMScript function has no value: pass the "
                         "number)"[:300])

    def instruction(self, inst: TVMInstruction) -> Instruction:
        """The engine's Instruction of ``inst`` (unchecked)."""
        inputs = tuple(self.value(x, True) for x in inst.inputs)
        attrs = tuple(self.value(x, False) for x in inst.attrs)
        outputs = tuple(self.define(o) for o in inst.outputs)
        return Instruction(inst.kind.primitive.kind, inputs, attrs, outputs)


class TVMTrace:
    """TVM's ``Trace(insts, decisions)``: the instructions (:class:`TVMInstruction`) and the
    decisions of its sampling instructions (``{instruction: decision}``)."""

    __slots__ = ("_insts", "_decisions")

    def __init__(self, insts: Iterable = (), decisions: Any = None):
        self._insts: list[TVMInstruction] = []
        self._decisions: dict[TVMInstruction, Any] = {}
        for inst in insts:
            self._insts.append(_checked_instruction(inst))
        for inst, decision in dict(decisions or {}).items():
            if decision is not None:
                self._decisions[_checked_instruction(inst)] = decision

    # ------------------------------------------------------------------ TVM's attributes
    @property
    def insts(self) -> tuple:
        return tuple(self._insts)

    @property
    def decisions(self) -> dict:
        """``{instruction: decision}`` of the trace's instructions, in trace order."""
        return {i: self._decisions[i] for i in self._insts if i in self._decisions}

    def get_decision(self, inst: TVMInstruction) -> Any:
        """The decision made on ``inst``, or None."""
        return self._decisions.get(inst) if inst in self._insts else None

    def append(self, inst: TVMInstruction, decision: Any = None) -> None:
        """Add ``inst`` (and its decision, if any) at the end."""
        inst = _checked_instruction(inst)
        self._insts.append(inst)
        if decision is not None:
            self._decisions[inst] = decision

    def pop(self) -> TVMInstruction | None:
        """Remove the last instruction with its decision and return it (None when empty)."""
        if not self._insts:
            return None
        inst = self._insts.pop()
        if inst not in self._insts:
            self._decisions.pop(inst, None)
        return inst

    # ------------------------------------------------------------------ the engine's trace
    def _end(self, remove_postproc: bool) -> int:
        if remove_postproc:
            return next((n for n, i in enumerate(self._insts) if i.kind.is_postproc),
                        len(self._insts))
        return len(self._insts)

    def recorded(self, remove_postproc: bool = False) -> Trace:
        """The engine's :class:`~.recorded_trace.Trace` of this one (handles named as TVM
        names them), checked as any trace document is (:class:`TraceError`)."""
        names = _Names()
        raw, decisions = [], {}
        for n, inst in enumerate(self._insts[:self._end(remove_postproc)]):
            try:
                raw.append(_as_list(names.instruction(inst)))
                if inst in self._decisions:
                    decisions[n] = _plain(names.value(self._decisions[inst], False))
            except TraceError as e:
                raise TraceError(f"instruction {n + 1} ({inst.kind.name}): {e}") from None
        return Trace(check_insts(raw, tvm=False), None, decisions)

    @staticmethod
    def from_recorded(trace: Trace, handles: dict | None = None) -> "TVMTrace":
        """The engine's ``trace`` as TVM's: a handle named in ``handles`` (``{name: handle}``)
        is that object, any other a new BlockRV/LoopRV/ExprRV by its name's first letter."""
        env: dict[str, Any] = {}
        handles = handles or {}

        def handle(name: str) -> Any:
            rv = handles.get(name)
            if rv is None:
                cls = {"b": BlockRV, "l": LoopRV, "v": ExprRV}.get(name[:1])
                if cls is None:
                    raise TraceError(f"the handle name {name!r} does not say its kind (TVM's "
                                     "names start with b, l or v)")
                rv = cls(name)
            env[name] = rv
            return rv

        def value(v: Any) -> Any:
            if isinstance(v, str):
                return json.loads(v) if v.startswith('"') else env[v]
            if isinstance(v, (list, tuple)):
                return [value(x) for x in v]
            return v

        insts, decisions = [], {}
        for n, inst in enumerate(trace.insts):
            tvm_inst = TVMInstruction(InstructionKind.get(inst.kind),
                                      [value(x) for x in inst.inputs], [_plain(a) for a in
                                                                          inst.attrs],
                                      [handle(o) for o in inst.outputs])
            insts.append(tvm_inst)
            decision = trace.get_decision(n)
            if decision is not None:
                decisions[tvm_inst] = decision
        return TVMTrace(insts, decisions)

    @staticmethod
    def from_schedule(sch: Any) -> "TVMTrace":
        """The trace of ``sch`` as TVM's ``sch.trace``: its instructions hold ``sch``'s own
        handles (``sch.get(inst.outputs[0])`` works)."""
        return TVMTrace.from_recorded(sch.trace, {name: rv for rv, name in sch._names.items()})

    @staticmethod
    def from_json(doc: Any) -> "TVMTrace":
        """A trace document (ours, or TVM's ``as_json()`` list) as a TVM trace with new
        handles."""
        trace = read_tvm_json(doc) if isinstance(doc, (list, tuple)) else Trace.from_json(doc)
        return TVMTrace.from_recorded(trace)

    # ------------------------------------------------------------------ TVM's methods
    def apply_to_schedule(self, sch: Any, remove_postproc: bool = False,
                          decision_provider: Any = None) -> None:
        """Replay on ``sch`` (the engine trace's replay: all or nothing, TraceError);
        ``remove_postproc`` stops before ``EnterPostproc``;
        ``decision_provider(inst, inputs, attrs, decision)`` is asked for each decision."""
        provider = None
        if decision_provider is not None:
            def provider(n, inputs, attrs, decision):
                return decision_provider(self._insts[n], inputs, attrs, decision)
        self.recorded(remove_postproc)._replay(sch, remove_postproc, provider)

    @staticmethod
    def apply_json_to_schedule(json_obj: Any, sch: Any) -> None:
        """Replay a trace document (TVM's ``as_json()`` list or ours) on ``sch``."""
        Trace.apply_json_to_schedule(json_obj, sch)

    def as_json(self, remove_postproc: bool = False) -> list:
        """TVM's ``[[instructions], [decisions]]``: each instruction ``[kind name, inputs,
        attrs, output names]``, an input handle by its name, a string input between double
        quotes as TVM writes it, None as ``"None"``; numbers (and IntImm/FloatImm objects)
        as they are."""
        names = _Names()
        insts, decisions = [], []
        for n, inst in enumerate(self._insts[:self._end(remove_postproc)]):
            try:
                inputs = [_json_input(x, names) for x in inst.inputs]
                attrs = [_json_attr(a) for a in inst.attrs]
            except TraceError as e:
                raise TraceError(f"instruction {n + 1} ({inst.kind.name}): {e}") from None
            insts.append([inst.kind.name, inputs, attrs, [names.define(o) for o in inst.outputs]])
            if self._decisions.get(inst) is not None:
                decisions.append([n, _json_attr(self._decisions[inst])])
        return [insts, decisions]

    def as_python(self, remove_postproc: bool = False) -> list[str]:
        """TVM's ``as_python``: one line per instruction (``l1, l2 = sch.get_loops(block=b0)``)."""
        return self.recorded(remove_postproc).as_tvm_python()

    def with_decision(self, inst: TVMInstruction, decision: Any,
                      remove_postproc: bool) -> "TVMTrace":
        """A new trace (the same instruction objects) with ``inst``'s decision replaced;
        with ``remove_postproc`` without the instructions from ``EnterPostproc`` on."""
        new = TVMTrace(self._insts[:self._end(remove_postproc)], self._decisions)
        new._decisions[_checked_instruction(inst)] = decision
        return new

    def simplified(self, remove_postproc: bool) -> "TVMTrace":
        """TVM's dead-code elimination (:meth:`~.recorded_trace.Trace.simplified`): the pure
        instructions whose results nothing kept uses are dropped."""
        insts = self._insts[:self._end(remove_postproc)]
        kept = dead_code_free(insts, lambda i: i.kind.is_pure,
                              lambda i: [id(o) for o in i.outputs],
                              lambda i: [id(h) for h in _handles(i.inputs)])
        return TVMTrace([insts[n] for n in kept], self._decisions)

    def show(self, style: Any = None, black_format: bool = False) -> None:
        """Print the trace as TVM's script (``style`` and ``black_format`` are ignored)."""
        del style, black_format
        print(str(self))

    def __str__(self) -> str:
        lines = ["  " + line for line in self.as_python()] or ["  pass"]
        return "\n".join([*HEADER, *lines])

    def __repr__(self) -> str:
        try:
            return str(self)
        except TraceError as e:
            return f"Trace({len(self._insts)} instructions; cannot be written: {e})"


def _checked_instruction(inst: Any) -> TVMInstruction:
    if not isinstance(inst, TVMInstruction):
        raise TypeError(f"a TVM trace holds Instructions (tvm.s_tir.schedule.Instruction), got "
                        f"{type(inst).__name__}")
    return inst


def _as_list(inst: Instruction) -> list:
    return [inst.kind, _plain(list(inst.inputs)), _plain(list(inst.attrs)), list(inst.outputs)]


def _plain(v: Any) -> Any:
    """Tuples as lists, all the way down (the shape of a trace document)."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _handles(values: Iterable) -> Iterable:
    """The handles among inputs: direct, inside lists, and the Vars of an expression."""
    for v in values:
        if _is_handle(v):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _handles(v)
        elif isinstance(v, PrimExpr) and not isinstance(v, (IntImm, FloatImm)):
            found: list = []
            post_order_visit(v, lambda node: found.append(node) if isinstance(node, Var)
                             else None)
            yield from found


def _json_input(x: Any, names: _Names) -> Any:
    """An input as TVM's ``as_json`` writes it."""
    if x is None:
        return "None"
    if isinstance(x, str):
        return '"' + x + '"'
    if _is_handle(x):
        return names.ref(x)
    if isinstance(x, (list, tuple)):
        return [_json_input(y, names) for y in x]
    if isinstance(x, (dict, AttrMap)):
        return {k: _json_attr(v) for k, v in x.items()}
    if isinstance(x, (bool, int, float, IntImm, FloatImm)):
        return x
    raise TraceError(f"{type(x).__name__} {x!r} cannot be written in a trace document"[:200])


def _json_attr(a: Any) -> Any:
    """An attribute (or decision) as TVM's ``as_json`` gives it: plain values, lists, dicts
    and IntImm/FloatImm objects as they are."""
    if a is None or isinstance(a, (bool, int, float, str, IntImm, FloatImm)):
        return a
    if isinstance(a, (list, tuple)):
        return [_json_attr(x) for x in a]
    if isinstance(a, dict):
        return {_json_attr(k): _json_attr(v) for k, v in a.items()}
    raise TraceError(f"{type(a).__name__} {a!r} cannot be written in a trace document"[:200])
