"""Which of the schedule's loops LLVM vectorized on its own, read back from the optimised IR.

LLVM's loop vectorizer (and its SLP vectorizer, on a short loop LLVM unrolled) may turn a
loop the schedule left serial into vector code. llvmlite does not give LLVM's optimisation
remarks, so the code generator marks where each instruction came from instead: every
instruction of a serial loop's body carries the debug location ``line: <the loop's
number>`` (:class:`LoopLines`; the innermost serial loop around it). The compile unit emits
no debug information (``emissionKind: NoDebug``): the machine code, its object file and its
assembly are those of a module without the marks. LLVM's vectorizers keep a scalar
instruction's location on the vector instructions made from it (as they must for a
debugger), so after the O3 pipeline :func:`vectorized_loops` reads, for each loop number,
the widest vector load or store among the instructions that carry it.

A loop whose body already holds the schedule's own vectors (``vectorize``, lowered to
``Ramp``/``Broadcast``) is never reported: its vector code is the schedule's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import llvmlite.ir as ir

#: the DWARF version of the marks' (never emitted) debug information
_DEBUG_INFO_VERSION = 3


@dataclass(frozen=True)
class LoopMark:
    """One serial loop of the generated code: its PrimFunc, its loop variable's name and
    whether the schedule's own vectors are in its body."""

    func: str
    loop: str
    schedule_vectors: bool


class LoopLines:
    """The loop numbers of one code generation, and the debug metadata that carries them
    (per llvmlite module: a compile unit; per function: a subprogram)."""

    def __init__(self) -> None:
        self.marks: list[LoopMark] = []
        self._units: dict[int, tuple] = {}
        self._subprograms: dict[int, ir.DIValue] = {}

    def new_loop(self, func: str, loop: str, schedule_vectors: bool) -> int:
        """The number (a debug line, from 1) of a new serial loop."""
        self.marks.append(LoopMark(func, loop, schedule_vectors))
        return len(self.marks)

    def location(self, fn: ir.Function, line: int) -> ir.DIValue:
        """The debug location ``line`` in ``fn`` (line 0: no loop)."""
        return fn.module.add_debug_info("DILocation", {
            "line": line, "column": 0, "scope": self._subprogram(fn)})

    def _unit(self, module: ir.Module) -> tuple:
        got = self._units.get(id(module))
        if got is None:
            di_file = module.add_debug_info("DIFile", {"filename": "schedule", "directory": ""})
            cu = module.add_debug_info("DICompileUnit", {
                "language": ir.DIToken("DW_LANG_C99"), "file": di_file,
                "producer": "engine", "runtimeVersion": 0, "isOptimized": True,
                "emissionKind": ir.DIToken("NoDebug")}, is_distinct=True)
            module.add_named_metadata("llvm.dbg.cu", cu)
            module.add_named_metadata("llvm.module.flags", [
                ir.Constant(ir.IntType(32), 2), "Debug Info Version",
                ir.Constant(ir.IntType(32), _DEBUG_INFO_VERSION)])
            sub_type = module.add_debug_info("DISubroutineType",
                                             {"types": module.add_metadata([])})
            got = (module, cu, di_file, sub_type)
            self._units[id(module)] = got
        return got

    def _subprogram(self, fn: ir.Function) -> ir.DIValue:
        sp = self._subprograms.get(id(fn))
        if sp is None:
            _, cu, di_file, sub_type = self._unit(fn.module)
            sp = fn.module.add_debug_info("DISubprogram", {
                "name": fn.name, "file": di_file, "scope": di_file, "line": 0,
                "type": sub_type, "isLocal": False, "isDefinition": True,
                "isOptimized": True, "unit": cu}, is_distinct=True)
            fn.set_metadata("dbg", sp)
            self._subprograms[id(fn)] = sp
        return sp


# ------------------------------------------------------------------ reading the optimised IR
_LOCATION = re.compile(r"^!(\d+) = !DILocation\(line: (\d+)")
_DBG = re.compile(r", !dbg !(\d+)")
#: a vector load or store (plain or masked) and its lane count
_VECTOR_ACCESS = re.compile(
    r"(?:= load <(\d+) x [^>]+>|^\s*store <(\d+) x |"
    r"call <(\d+) x [^>]+> @llvm\.masked\.(?:load|gather)|"
    r"call void @llvm\.masked\.(?:store|scatter)\.v(\d+))")


def vectorized_lines(opt_text: str) -> dict[int, int]:
    """``{line: widest lanes}`` of the vector loads and stores of one optimised module's
    text, by the debug line (loop number) they carry."""
    lines_of: dict[str, int] = {}
    for text_line in opt_text.splitlines():
        if text_line.startswith("!"):
            m = _LOCATION.match(text_line)
            if m:
                lines_of[m.group(1)] = int(m.group(2))
    out: dict[int, int] = {}
    if not lines_of:
        return out
    for text_line in opt_text.splitlines():
        if "<" not in text_line or "!dbg" not in text_line:
            continue
        access = _VECTOR_ACCESS.search(text_line)
        dbg = _DBG.search(text_line)
        if access is None or dbg is None:
            continue
        line = lines_of.get(dbg.group(1))
        if not line:
            continue
        lanes = int(next(g for g in access.groups() if g))
        if lanes > 1:
            out[line] = max(out.get(line, 0), lanes)
    return out


def vectorized_loops(marks: list[LoopMark], opt_texts: list[str]) -> list[dict]:
    """The loops LLVM vectorized on its own: ``[{"func", "loop", "lanes"}]`` in loop order,
    from the optimised modules' texts and the marks of their code generation (loops whose
    body holds the schedule's own vectors left out)."""
    widest: dict[int, int] = {}
    for text in opt_texts:
        for line, lanes in vectorized_lines(text).items():
            widest[line] = max(widest.get(line, 0), lanes)
    out = []
    for line in sorted(widest):
        if not 1 <= line <= len(marks):
            continue
        mark = marks[line - 1]
        if not mark.schedule_vectors:
            out.append({"func": mark.func, "loop": mark.loop, "lanes": widest[line]})
    return out


_DBG_ATTACHMENT = re.compile(r", !dbg !\d+")
_DEBUG_DEFINE = re.compile(r"^(define [^{]*?) !dbg !\d+ \{", re.M)
_DEBUG_NODE = re.compile(r"^(?:!\d+ = (?:distinct )?!DI\w+\(|!llvm\.dbg\.cu = ).*\n", re.M)


def without_marks(ll_text: str) -> str:
    """An LLVM IR text without the loop marks (``, !dbg !N`` attachments, the ``DI*``
    nodes): what a learner reads in the code pane."""
    text = _DBG_ATTACHMENT.sub("", ll_text)
    text = _DEBUG_DEFINE.sub(r"\1 {", text)
    return _DEBUG_NODE.sub("", text)
