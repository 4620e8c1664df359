"""The :class:`Trace`: the recorded list of schedule instructions, its JSON/URL forms,
Python exports (this engine, TVM 0.27, the 2022 course) and replay onto a Schedule.

Our document is ``{"format": "schedule-explorer/trace", "version": 1, "workload": {...},
"insts": [...]}`` (instructions as in :mod:`.instruction`), plus, when the trace samples,
``"decisions": [[inst_index, decision], ...]`` (TVM's decisions list); :meth:`Trace.from_json`
also reads TVM's ``trace.as_json()`` list ``[[insts], [decisions]]``.

Decisions: a sampling instruction (``SamplePerfectTile``, ``SampleCategorical``,
``SampleComputeLocation``) has a decision, what it drew; :attr:`Trace.decisions` maps those
instructions to their decisions, :meth:`Trace.with_decision` gives the trace with one of them
changed, and replaying applies them (a trace with all its decisions replays to the same
program every time).

TVM's side: :meth:`Trace.as_tvm_python` writes the lines of TVM's ``trace.as_python()``,
:meth:`Trace.simplified` is TVM's dead-code elimination, :meth:`Trace.apply_to_schedule` takes
TVM's ``remove_postproc`` and ``decision_provider``, and :func:`read_tvm_json` reads TVM's
``as_json()`` list as TVM does (string inputs between quotes taken as they are, ``"None"``,
the IntImm/FloatImm objects TVM's list may hold).
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from typing import Any, Iterable

from engine.ir.expr import FloatImm, IntImm

from .error import ScheduleError, TraceError
from .instruction import (POSTPROC_KIND, TVM_TRACE, Instruction, InstructionKind, check_insts,
                          check_workload_params, dead_code_free, is_ref, norm_workload,
                          python_line)
from .literals import is_param_name, py_literal, py_str, short
from .registry import REGISTRY, decode_literal

FORMAT = "schedule-explorer/trace"
SINGLE = "'"  # the engine script's header quotes as Python's repr does
VERSION = 1


#: the first character of a deflated trace token (:meth:`Trace.encode`); a token of the
#: first format is base64url of a JSON object, so it starts with "eyJ"
DEFLATED_TOKEN = "z"
#: the most a deflated token may inflate to (a token is hostile input: a few kilobytes of
#: deflate can inflate a thousand times)
MAX_TOKEN_JSON_BYTES = 256 * 1024


def _inflate(data: bytes, damaged: TraceError) -> bytes:
    """Raw deflate -> bytes, at most :data:`MAX_TOKEN_JSON_BYTES` (a TraceError beyond it;
    ``damaged`` for a stream that is not deflate or is cut short)."""
    unpacker = zlib.decompressobj(-15)
    try:
        out = unpacker.decompress(data, MAX_TOKEN_JSON_BYTES)
    except zlib.error:
        raise damaged from None
    if unpacker.unconsumed_tail:
        raise TraceError(f"the trace token inflates to more than {MAX_TOKEN_JSON_BYTES} bytes; "
                         "export the trace as JSON instead of a link")
    if not unpacker.eof:
        raise damaged
    return out


class Trace:
    """An immutable sequence of :class:`Instruction` plus optional workload metadata and
    the decisions of its sampling instructions (``{instruction or its index: decision}``,
    or TVM's list ``[[index, decision], ...]``)."""

    def __init__(self, insts: Iterable[Instruction] = (), workload: Any = None,
                 decisions: Any = None):
        self._insts = tuple(insts)
        if workload is not None and not (isinstance(workload, tuple) and len(workload) == 2):
            workload = norm_workload(workload)
        self.workload = workload
        self._decisions: dict[int, Any] = {}
        pairs = decisions.items() if isinstance(decisions, dict) else (decisions or ())
        for key, decision in pairs:  # {inst or index: decision} or TVM's [[index, decision]]
            if decision is not None:
                n = key if isinstance(key, int) and not isinstance(key, bool) \
                    else self._position(key)
                self._decisions[n] = _checked_decision(self._insts, n, decision)
        self._decisions = dict(sorted(self._decisions.items()))

    # ------------------------------------------------------------------ sequence
    @property
    def insts(self) -> tuple:
        return self._insts

    def __len__(self) -> int:
        return len(self._insts)

    def __iter__(self):
        return iter(self._insts)

    def __getitem__(self, k):
        if isinstance(k, slice):
            if k.step not in (None, 1) or (k.start not in (None, 0)):
                raise TraceError("only prefixes of a trace can be taken (trace[:k])")
            kept = self._insts[k]
            return Trace(kept, self.workload, self._decisions_before(len(kept)))
        return self._insts[k]

    def truncate(self, k: int) -> "Trace":
        """The first ``k`` instructions (undo back to step ``k``)."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise TraceError(f"truncate needs a step count >= 0, got {k!r}")
        return Trace(self._insts[:k], self.workload, self._decisions_before(k))

    def _decisions_before(self, k: int) -> dict:
        return {n: d for n, d in self._decisions.items() if n < k}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and self.as_json()["insts"] == other.as_json()["insts"] \
            and self._decisions == other._decisions

    # ------------------------------------------------------------------ decisions
    @property
    def decisions(self) -> dict:
        """The sampling instructions' decisions, ``{Instruction: decision}`` in trace order
        (TVM's ``trace.decisions``): a list of factors for SamplePerfectTile, a candidate's
        index for SampleCategorical, a location for SampleComputeLocation."""
        return {self._insts[n]: _public(d) for n, d in self._decisions.items()}

    def get_decision(self, inst: Any) -> Any:
        """The decision of ``inst`` (an Instruction of this trace or its index), or None."""
        return _public(self._decisions.get(self._position(inst)))

    def with_decision(self, inst: Any, decision: Any, remove_postproc: bool = True) -> "Trace":
        """A new trace with the decision of sampling instruction ``inst`` (an Instruction of
        this trace or its index) replaced by ``decision`` (TVM's ``Trace.with_decision``);
        with ``remove_postproc`` the instructions from ``enter_postproc`` on are dropped.
        The decision's shape is checked here (TraceError); whether it fits the program
        (a tiling's product, a legal location) is checked when the trace is replayed."""
        n = self._position(inst)
        end = self._end(remove_postproc)
        if n >= end:
            raise TraceError(f"instruction {n + 1} ({self._insts[n].kind}) is after "
                             "enter_postproc; pass remove_postproc=False to keep it")
        decisions = self._decisions_before(end)
        decisions[n] = decision
        return Trace(self._insts[:end], self.workload, decisions)

    def _end(self, remove_postproc: bool) -> int:
        """How many instructions count: all, or with ``remove_postproc`` those before the
        first ``EnterPostproc``."""
        if remove_postproc:
            return next((i for i, x in enumerate(self._insts) if x.kind == POSTPROC_KIND),
                        len(self._insts))
        return len(self._insts)

    def simplified(self, remove_postproc: bool = False) -> "Trace":
        """TVM's ``Trace.simplified``: the trace without the pure instructions (queries and
        sampling) whose results no later kept instruction uses, found walking backwards;
        with ``remove_postproc`` the instructions from ``EnterPostproc`` on are dropped
        first. Decisions stay with their instructions. (TVM looks only at an instruction's
        direct inputs; the handles inside a list input — ``cache_read``'s consumer blocks —
        count as used here too, so the simplified trace still replays.)"""
        insts = self._insts[:self._end(remove_postproc)]
        kept = dead_code_free(list(insts), lambda i: InstructionKind.get(i.kind).is_pure,
                              lambda i: i.outputs,
                              lambda i: _handle_refs(i.inputs))
        decisions = {new: self._decisions[old] for new, old in enumerate(kept)
                     if old in self._decisions}
        return Trace([insts[n] for n in kept], self.workload, decisions)

    def _position(self, inst: Any) -> int:
        """The index of ``inst`` (an Instruction of this trace, or an index)."""
        if isinstance(inst, int) and not isinstance(inst, bool):
            if not 0 <= inst < len(self._insts):
                raise TraceError(f"the trace has {len(self._insts)} instructions; there is no "
                                 f"instruction {inst}")
            return inst
        for n, x in enumerate(self._insts):
            if x is inst:
                return n
        for n, x in enumerate(self._insts):
            if x == inst:
                return n
        raise TraceError(f"{short(inst)} is not an instruction of this trace")

    def __repr__(self) -> str:
        return f"Trace({len(self)} instructions)\n" + self.as_python()

    def __str__(self) -> str:
        """What TVM prints for ``print(sch.trace)``: the trace as TVM's script, a function
        ``apply_trace(sch)`` of TVM's lines (the text ``show()`` prints; ``repr`` stays the
        engine's lines)."""
        lines = ["  " + line for line in self.as_tvm_python()] or ["  pass"]
        return "\n".join(["# from tvm import s_tir",
                           "def apply_trace(sch: s_tir.Schedule) -> None:", *lines])

    def show(self, style: Any = None, black_format: bool = False) -> None:
        """TVM's ``sch.trace.show()``: print the trace as TVM's script, a function
        ``apply_trace(sch)`` of TVM's lines (``style`` and ``black_format`` are ignored)."""
        del style, black_format
        print(str(self))

    def steps(self) -> list[str]:
        """One short Python line per instruction (for the trace pane); an instruction whose
        values cannot be written (a step the page will refuse to replay) shows as a comment."""
        lines = []
        for n, inst in enumerate(self._insts):
            try:
                lines.append(python_line(inst, "engine", self._decisions.get(n)))
            except TraceError as e:
                lines.append(f"# {inst.kind}: cannot be written ({e})")
        return lines

    # ------------------------------------------------------------------ JSON / URL
    def as_json(self) -> dict:
        doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self.workload is not None:
            doc["workload"] = {"name": self.workload[0], "params": dict(self.workload[1])}
        else:
            doc["workload"] = None
        doc["insts"] = [i.as_list() for i in self._insts]
        if self._decisions:
            doc["decisions"] = [[n, _public(d)] for n, d in self._decisions.items()]
        return doc

    @staticmethod
    def from_json(doc: Any, max_insts: int | None = None) -> "Trace":
        """Read our document (dict or JSON text) or TVM's ``[[insts], [decisions]]`` list.
        ``max_insts``: a document of more instructions is refused (:class:`TraceError`,
        naming both counts) before any instruction is read."""
        if isinstance(doc, (str, bytes)):
            try:
                doc = json.loads(doc)
            except ValueError as e:
                raise TraceError(f"the trace is not valid JSON: {e}") from None
        if isinstance(doc, list):
            if doc and isinstance(doc[0], list):
                _check_count(len(doc[0]), max_insts)
            return read_tvm_json(doc)
        if not isinstance(doc, dict):
            raise TraceError("a trace document must be a JSON object (ours) or a list "
                             f"(TVM's trace.as_json()), got {type(doc).__name__}")
        if doc.get("format") != FORMAT:
            raise TraceError(f"not a schedule-explorer trace: format is {doc.get('format')!r}, "
                             f"expected {FORMAT!r}")
        version = doc.get("version")
        if version != VERSION:
            raise TraceError(f"unsupported trace version {version!r}; this engine reads "
                             f"version {VERSION}")
        wl = doc.get("workload")
        workload = None
        if wl is not None:
            if not isinstance(wl, dict) or not isinstance(wl.get("name"), str) or \
                    not isinstance(wl.get("params", {}), dict):
                raise TraceError("'workload' must be {\"name\": str, \"params\": {...}} or null")
            workload = (wl["name"], dict(wl.get("params", {})))
            check_workload_params(workload[1])
        insts = doc.get("insts")
        if not isinstance(insts, list):
            raise TraceError("the trace document needs an 'insts' list")
        _check_count(len(insts), max_insts)
        checked = check_insts(insts, tvm=False)
        return Trace(checked, workload, read_decisions(doc.get("decisions", []), checked))

    def encode(self) -> str:
        """Compact URL-safe token: ``z`` then base64url (no padding) of the raw-deflated
        compact JSON document — about 2.4x shorter than the document's plain base64url
        (the first token format, which :meth:`decode` still reads: links shared before
        keep working)."""
        text = json.dumps(self.as_json(), separators=(",", ":"))
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        data = packer.compress(text.encode()) + packer.flush()
        return DEFLATED_TOKEN + base64.urlsafe_b64encode(data).decode().rstrip("=")

    @staticmethod
    def decode(token: str, max_insts: int | None = None) -> "Trace":
        """Inverse of :meth:`encode` (also reads the plain base64url JSON tokens of the
        first format). A deflated token may inflate to at most :data:`MAX_TOKEN_JSON_BYTES`:
        it is inflated with that cap, never beyond. ``max_insts`` as for :meth:`from_json`."""
        if not isinstance(token, str) or not re.fullmatch(r"[A-Za-z0-9_-]*", token):
            raise TraceError("a trace token contains only letters, digits, '-' and '_'")
        deflated = token.startswith(DEFLATED_TOKEN)
        body = token[len(DEFLATED_TOKEN):] if deflated else token
        damaged = TraceError("the trace token is damaged (not base64url of a JSON document, "
                             "plain or deflated); it may have been cut when copied")
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise damaged from None
        if deflated:
            raw = _inflate(raw, damaged)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise damaged from None
        return Trace.from_json(text, max_insts)

    # ------------------------------------------------------------------ exports
    def as_tvm_python(self, remove_postproc: bool = False) -> list[str]:
        """The instructions as TVM's ``trace.as_python()`` writes them, one line each
        (``b0 = sch.get_sblock(name="Y", func_name="mm_relu")``, ``l1, = sch.get_loops(block=b0)``,
        every argument named, sampling decisions last); with ``remove_postproc`` the lines
        stop before ``EnterPostproc``. A value that cannot be written refuses the export
        (TraceError naming the instruction)."""
        return self._python_lines(TVM_TRACE, self._end(remove_postproc))

    def as_python(self, *, header: bool = False) -> str:
        """Python lines for this engine's API (``b0 = sch.get_block("Y", ...)``).

        With ``header=True`` a complete script is returned (imports, workload, Schedule).
        """
        lines = self._python_lines("engine")
        if not header:
            return "\n".join(lines)
        head = ["import engine", ""]
        if self.workload is not None:
            name, params = self.workload
            for k in params:
                if not is_param_name(k):
                    raise TraceError(f"workload parameter {short(k)} is not a parameter name")
            what = "a workload parameter"
            name_text = py_str(name, "the workload name", quote=SINGLE)
            args = "".join(f", {k}={py_literal(v, what, quote=SINGLE)}"
                           for k, v in params.items())
            head.append(f"mod = engine.workloads.get({name_text}{args})")
            head.append(f"sch = engine.Schedule(mod, workload=({name_text}, "
                        f"{py_literal(dict(params), what, quote=SINGLE)}))")
        else:
            head.append("sch = engine.Schedule(mod)  # mod: the IRModule to schedule")
        return "\n".join(head + lines + ["print(sch.mod.script())", ""])

    def export(self, fmt_name: str) -> str:
        """``'python'`` (this engine), ``'tvm'`` (TVM 0.27, ``tvm.s_tir``), ``'course'``
        (the 2022 course's ``tvm.tir.Schedule``) or ``'json'``."""
        if fmt_name in ("python", "engine"):
            return self.as_python(header=True)
        if fmt_name == "json":
            return json.dumps(self.as_json(), indent=2)
        if fmt_name == "tvm":
            head = ["import tvm", "from tvm import s_tir", "", "",
                    "def apply_trace(sch: tvm.s_tir.Schedule) -> None:"]
        elif fmt_name == "course":
            head = ["import tvm", "from tvm import tir", "", "",
                    "def apply_trace(sch: tvm.tir.Schedule) -> None:"]
        else:
            raise TraceError(f"unknown export format {fmt_name!r}; use 'python', 'tvm', "
                             "'course' or 'json'")
        body = ["    " + line for line in self._python_lines(fmt_name)] or ["    pass"]
        return "\n".join(head + body) + "\n"

    def _python_lines(self, dialect: str, end: int | None = None) -> list[str]:
        """One Python line per instruction (the first ``end`` of them); a value that cannot
        be written refuses the export (TraceError naming the instruction). A handle is
        written only where an earlier line defines it, so the script names nothing else."""
        lines = []
        defined: set[str] = set()
        for n, inst in enumerate(self._insts[:end], 1):
            try:
                for name in _handle_refs(inst.inputs):
                    if name not in defined:
                        raise TraceError(f"it refers to {short(name)}, which no earlier "
                                         "instruction defines")
                lines.append(python_line(inst, dialect, self._decisions.get(n - 1)))
                defined.update(o for o in inst.outputs if isinstance(o, str))
            except TraceError as e:
                raise TraceError(f"instruction {n} ({inst.kind}) cannot be exported: {e}") \
                    from None
        return lines

    # ------------------------------------------------------------------ replay
    @staticmethod
    def apply_json_to_schedule(json_obj: Any, sch: Any) -> None:
        """TVM's ``Trace.apply_json_to_schedule``: replay a trace document (TVM's
        ``as_json()`` list, read by :func:`read_tvm_json`, or ours) on ``sch``."""
        if isinstance(json_obj, (list, tuple)):
            trace = read_tvm_json(json_obj)
        else:
            trace = Trace.from_json(json_obj)
        trace.apply_to_schedule(sch)

    def apply_to_schedule(self, sch: Any, remove_postproc: bool = False,
                          decision_provider: Any = None) -> None:
        """Replay the instructions on ``sch``, each sampling instruction with its decision
        (one without a decision samples from ``sch``'s generator). All or nothing: on any
        error a :class:`TraceError` is raised and ``sch`` is unchanged; when an instruction
        was refused, the TraceError's ``schedule_error`` is the ScheduleError.

        As TVM's: ``remove_postproc`` stops before ``EnterPostproc``;
        ``decision_provider(inst, inputs, attrs, decision)``, when given, is asked for the
        decision of each instruction (``inputs`` with the handles of ``sch``, ``decision``
        the recorded one or None) and what it returns is replayed (None: sample)."""
        provider = None
        if decision_provider is not None:
            def provider(n, inputs, attrs, decision):
                return decision_provider(self._insts[n], inputs, attrs, decision)
        self._replay(sch, remove_postproc, provider)

    def _replay(self, sch: Any, remove_postproc: bool, provider: Any) -> None:
        """:meth:`apply_to_schedule`, the provider asked by instruction position."""
        if self.workload is not None and sch.workload is not None and \
                self.workload[0] != sch.workload[0]:
            raise TraceError(f"this trace was recorded on workload {self.workload[0]!r}, "
                             f"but the schedule is for {sch.workload[0]!r}; open "
                             f"{self.workload[0]!r} to replay it")
        work = sch._clone()
        env: dict[str, Any] = {}
        for n, inst in enumerate(self._insts[:self._end(remove_postproc)], 1):
            prim = REGISTRY.get(inst.kind)
            if prim is None:
                raise TraceError(f"instruction {n}: unknown instruction kind {inst.kind!r}")
            try:
                prim.check_attrs(list(inst.attrs))
            except TraceError as e:
                raise TraceError(f"instruction {n} ({inst.kind}) is malformed: {e}") from None
            inputs = []
            for pos, x in enumerate(inst.inputs):
                if pos in prim.literal_inputs and not is_ref(x):
                    inputs.append(decode_literal(x))   # a plain value (an annotation's)
                elif isinstance(x, (list, tuple)) and pos in prim.int_list_inputs:
                    inputs.append(list(x))  # a list of integers (ReorderBlockIterVar)
                elif isinstance(x, (list, tuple)):  # a list of handles (consumer_blocks)
                    for y in x:
                        if not is_ref(y) or y not in env:
                            raise TraceError(f"instruction {n} ({inst.kind}) refers to {y!r}, "
                                             "which no earlier instruction defines")
                    inputs.append([env[y] for y in x])
                elif is_ref(x):
                    if x not in env:
                        raise TraceError(f"instruction {n} ({inst.kind}) refers to {x!r}, which no "
                                         "earlier instruction defines")
                    inputs.append(env[x])
                elif isinstance(x, str):
                    inputs.append(json.loads(x))
                else:
                    inputs.append(x)
            decision = self._decisions.get(n - 1)
            if provider is not None:
                decision = provider(n - 1, inputs, list(inst.attrs), _public(decision))
                if decision is not None:
                    decision = _checked_decision(self._insts, n - 1, decision)
            try:
                outs = work._run(prim, inputs, list(inst.attrs), decision)
            except ScheduleError as e:
                err = TraceError(f"instruction {n} ({inst.kind}) cannot be replayed: {e}")
                err.schedule_error = e
                raise err from e
            except (TypeError, ValueError, IndexError, KeyError) as e:
                raise TraceError(f"instruction {n} ({inst.kind}) is malformed: {e}") from e
            if len(outs) != len(inst.outputs):
                raise TraceError(f"instruction {n} ({inst.kind}) produced {len(outs)} results here "
                                 f"but the trace names {len(inst.outputs)}; the trace was "
                                 "recorded on a different program")
            env.update(zip(inst.outputs, outs))
        if work.workload is None and self.workload is not None:
            work.workload = self.workload
        sch._assign_from(work)


def _check_count(n: int, max_insts: int | None) -> None:
    if max_insts is not None and n > max_insts:
        raise TraceError(f"the trace has {n} instructions, more than the {max_insts} "
                         "allowed here; undo some steps or start a new trace")


def read_tvm_json(doc: Any) -> Trace:
    """TVM's ``trace.as_json()`` ``[[instructions], [decisions]]`` as a Trace, read as TVM's
    ``ApplyJSONToSchedule`` reads it: an input ``"None"`` is None, one between double
    quotes is the string inside them (taken as it is: TVM writes ``'"' + s + '"'``, no
    escapes), any other string names a handle; IntImm/FloatImm objects (TVM's list may
    hold them) are their numbers. Everything is then checked as our documents are."""
    if not isinstance(doc, (list, tuple)) or len(doc) != 2 or \
            not all(isinstance(x, (list, tuple)) for x in doc):
        raise TraceError("a TVM trace must be [[instructions], [decisions]] "
                         "(the output of trace.as_json())")
    insts = []
    for raw in doc[0]:
        if isinstance(raw, (list, tuple)) and len(raw) == 4 and \
                all(isinstance(x, (list, tuple)) for x in raw[1:]):
            kind, inputs, attrs, outputs = raw
            raw = [kind, [_tvm_input(x) for x in inputs], _numbers(list(attrs)),
                   list(outputs)]
        insts.append(raw)
    checked = check_insts(insts, tvm=True)
    return Trace(checked, None, read_decisions(_numbers(list(doc[1])), checked))


def _tvm_input(x: Any) -> Any:
    """One input of TVM's JSON in our form (see :func:`read_tvm_json`)."""
    if isinstance(x, str):
        if x == "None":
            return None
        if len(x) >= 2 and x[0] == '"' and x[-1] == '"':
            return json.dumps(x[1:-1])
        return x
    if isinstance(x, (list, tuple)):
        return [_tvm_input(y) for y in x]
    return _numbers(x)


def _numbers(x: Any) -> Any:
    """IntImm/FloatImm objects as Python numbers (a boolean IntImm as a bool), in lists too."""
    if isinstance(x, IntImm):
        return bool(x.value) if x.dtype == "bool" else int(x.value)
    if isinstance(x, FloatImm):
        return float(x.value)
    if isinstance(x, (list, tuple)):
        return [_numbers(y) for y in x]
    return x


def _public(decision: Any) -> Any:
    """A decision as the API and the documents show it (a tiling as a list)."""
    return list(decision) if isinstance(decision, tuple) else decision


def _checked_decision(insts: tuple, n: int, decision: Any) -> Any:
    """``decision`` for instruction ``n`` of ``insts``, its shape checked (TraceError)."""
    if not 0 <= n < len(insts):
        raise TraceError(f"a decision names instruction {n}, but the trace has "
                         f"{len(insts)} (counted from 0)")
    inst = insts[n]
    prim = REGISTRY.get(inst.kind)
    if prim is None or not prim.has_decision:
        raise TraceError(f"a decision names instruction {n} ({inst.kind}), which samples "
                         "nothing; only Sample* instructions have decisions")
    if isinstance(decision, list):
        decision = tuple(decision)
    try:
        return prim.check_decision(list(inst.attrs), decision)
    except TraceError as e:
        raise TraceError(f"instruction {n} ({inst.kind}): {e}") from None


def read_decisions(raw: Any, insts: list) -> dict[int, Any]:
    """A document's decisions list ``[[inst_index, decision], ...]`` (TVM's shape), checked
    against the instructions: each index once, each naming a sampling instruction, each
    decision of that instruction's shape."""
    if not isinstance(raw, list):
        raise TraceError("'decisions' must be a list of [instruction index, decision] pairs")
    out: dict[int, Any] = {}
    for entry in raw:
        if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int) \
                or isinstance(entry[0], bool):
            raise TraceError("each decision must be [instruction index, decision], got "
                             f"{short(entry)}")
        n, decision = entry
        if n in out:
            raise TraceError(f"instruction {n} has two decisions")
        if decision is None:
            continue
        out[n] = _checked_decision(tuple(insts), n, decision)
    return out


def _handle_refs(values: Iterable) -> Iterable[str]:
    """The handle names among trace inputs (inside lists too)."""
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _handle_refs(v)
        elif is_ref(v):
            yield v
