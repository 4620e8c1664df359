"""What every part of the parser shares: the source and its error positions, the name
scopes, the ``T`` namespace names, dtype arguments and call-argument checking; plus the
small records the statement parser keeps (a block being parsed, a ``T.handle`` parameter).
"""
from __future__ import annotations

import ast
import difflib
import warnings
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import DTypeError, SCALAR_DTYPES, split_lanes

from ..errors import ScriptError
from ..pyast import parse_python
from .dialect import DTYPE_HINT, DTYPE_LIKE, KNOWN_T

_TRUE = None  # created lazily (IntImm("bool", 1))


def const_true() -> E.IntImm:
    """The shared ``True`` predicate of block realizations."""
    global _TRUE
    if _TRUE is None:
        _TRUE = E.IntImm("bool", 1)
    return _TRUE


def extent_of(mn: E.PrimExpr, end: E.PrimExpr) -> E.PrimExpr:
    """The extent of ``[mn, end)`` (the inverse of the printer's ``end_of``)."""
    if type(mn) is E.IntImm and type(end) is E.IntImm:
        return E.IntImm(end.dtype, end.value - mn.value)
    if type(mn) is E.IntImm and mn.value == 0:
        return end
    if type(end) is E.Add:
        from engine.ir.structural import structural_equal
        if structural_equal(end.a, mn):
            return end.b
    width = _constant_difference(end, mn)
    if width is not None and end.dtype == mn.dtype:   # A[vi - 2:vi + 3]: extent 5, as TVM's
        return E.IntImm(end.dtype, width)
    return E.binary(E.Sub, end, mn)


def _linear_terms(e: E.PrimExpr, scale: int, terms: list, depth: int = 0) -> int | None:
    """Add ``scale * e`` to ``terms`` (a list of ``[atom, coefficient]``, an atom once,
    compared by structural equality: variables by identity) as a sum of integer multiples
    of atoms; returns its constant part, None when ``e`` is too deep to read."""
    if depth > 32 or len(terms) > 64:
        return None
    t = type(e)
    if t is E.IntImm:
        return scale * e.value
    if t in (E.Add, E.Sub):
        a = _linear_terms(e.a, scale, terms, depth + 1)
        b = _linear_terms(e.b, scale if t is E.Add else -scale, terms, depth + 1)
        return None if a is None or b is None else a + b
    if t is E.Mul and (type(e.a) is E.IntImm or type(e.b) is E.IntImm):
        c, x = (e.a, e.b) if type(e.a) is E.IntImm else (e.b, e.a)
        return _linear_terms(x, scale * c.value, terms, depth + 1)
    from engine.ir.structural import structural_equal
    for term in terms:
        if structural_equal(term[0], e):
            term[1] += scale
            return 0
    terms.append([e, scale])
    return 0


def _constant_difference(end: E.PrimExpr, mn: E.PrimExpr) -> int | None:
    """``end - mn`` when it is a constant once equal terms cancel (``vi + 3 - (vi - 2)``
    is 5); else None."""
    terms: list = []
    a = _linear_terms(end, 1, terms)
    b = _linear_terms(mn, -1, terms)
    if a is None or b is None or any(c for _, c in terms):
        return None
    return a + b


def nop() -> S.Stmt:
    """The statement of an empty body: ``T.evaluate(0)``."""
    return S.Evaluate(E.IntImm("int32", 0))


def python_ast(text: str) -> ast.Module:
    """Python's syntax tree of ``text`` (never compiled or run)."""
    with warnings.catch_warnings():  # e.g. SyntaxWarning for "1if": not the user's concern
        warnings.simplefilter("ignore")
        return parse_python(text)


def is_docstring(st: ast.AST) -> bool:
    """A bare string statement (a docstring or a string used as a comment)."""
    return type(st) is ast.Expr and type(st.value) is ast.Constant and \
        isinstance(st.value.value, str)


class BlockCtx:
    """What the statements inside a ``with T.block(...)`` declare about their block."""

    __slots__ = ("name", "iter_vars", "iter_values", "predicate", "reads", "writes",
                 "annotations", "alloc_buffers", "init", "node", "match_buffers")

    def __init__(self, name: str, node: ast.AST):
        self.name = name
        self.node = node
        self.iter_vars: list[S.IterVar] = []
        self.iter_values: list = []
        self.predicate = None
        self.reads = None
        self.writes = None
        self.annotations = None
        self.alloc_buffers: list[Buffer] = []
        self.init = None
        self.match_buffers: list[S.MatchBufferRegion] = []


class Handle:
    """A ``T.handle`` parameter waiting for its ``T.match_buffer``."""

    __slots__ = ("name", "buffer")

    def __init__(self, name: str):
        self.name = name
        self.buffer: Buffer | None = None


class Consumed:
    """Returned (alone or as ``(CONSUMED, stmt)``) by a statement whose body is the rest
    of the statement list (a let binding)."""

    __slots__ = ()


CONSUMED = Consumed()


class ParserContext:
    """The state of one parse and the helpers every part of the parser uses.

    :meth:`.module.ModuleParser.function` sets the state of the function being parsed:
    ``scopes`` (name -> Var / Buffer / Handle, innermost last), ``blocks`` (the enclosing
    :class:`BlockCtx`), ``root_allocs``, ``loop_dom`` (loop variable id -> (min, extent)),
    ``symbolic`` (ids of the symbolic variables), ``attrs``, ``depth`` (statement nesting),
    ``saw_block`` and ``keep`` (keeps the variables whose ids are used as keys alive).
    """

    def __init__(self, source: str, namespaces: set | None = None, line_offset: int = 0,
                 col_offset: int = 0, filename: str | None = None,
                 captured: dict | None = None):
        self.source = source
        self.captured = dict(captured or {})  # name -> plain constant from outside the text
        self.lines = source.splitlines()
        self.ns = {"T", "tir"} | set(namespaces or ())
        self.relax_ns = {"R", "relax"}  # the names of Relax's namespace (``engine.relax``)
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.filename = filename
        self.current: ast.AST | None = None

    # ------------------------------------------------------------------ errors
    def err(self, node: Any, msg: str) -> ScriptError:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        if line is not None and col is not None:
            text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
            col = len(text.encode("utf-8")[:col].decode("utf-8", errors="replace")) + 1
            return ScriptError(msg, line + self.line_offset, col + self.col_offset,
                               self.filename)
        return ScriptError(msg, None if line is None else line + self.line_offset, None,
                           self.filename)

    def syntax_error(self, e: SyntaxError) -> ScriptError:
        """The ScriptError for a Python syntax error in the source."""
        return ScriptError(f"Python syntax error: {e.msg}",
                           None if e.lineno is None else e.lineno + self.line_offset,
                           None if e.offset is None else e.offset + self.col_offset,
                           self.filename)

    # ------------------------------------------------------------------ scopes
    def lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def declare(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def outside(self, name: str) -> Any:
        """The constant a name undefined in the text has outside it (a closure's or the
        module's variable, see ``captured``), or None."""
        if name in self.ns or self.lookup(name) is not None:
            return None
        return self.captured.get(name)

    # ------------------------------------------------------------------ namespace
    def tname(self, node: Any) -> str | None:
        """``T.axis.remap`` -> "axis.remap"; builtins -> "builtin.<name>"; else None."""
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        if node.id in self.ns and parts:
            return ".".join(reversed(parts))
        if not parts and node.id in ("range", "max", "min", "abs") and \
                self.lookup(node.id) is None:
            return "builtin." + node.id
        return None

    def dotted(self, node: Any) -> str:
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is ast.Name:
            parts.append(node.id)
            return ".".join(reversed(parts))
        return ""

    def unknown_t(self, node: Any, name: str) -> ScriptError:
        base = name.split(".")[0]
        if base not in KNOWN_T and (DTYPE_LIKE.match(base) or difflib.get_close_matches(
                base, SCALAR_DTYPES, n=1, cutoff=0.8)):
            return self.dtype_error(node, base)
        close = difflib.get_close_matches(name, sorted(KNOWN_T), n=1)
        hint = f"; did you mean T.{close[0]}?" if close else ""
        return self.err(node, f"unknown function T.{name}{hint}")

    def dtype_error(self, node: Any, s: str) -> ScriptError:
        close = difflib.get_close_matches(str(s), SCALAR_DTYPES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return self.err(node, f"unknown dtype {str(s)!r} {DTYPE_HINT}{hint}")

    def dtype(self, node: Any, s: Any) -> str:
        if not isinstance(s, str):
            raise self.err(node, f"a dtype must be a string such as \"float32\", got {s!r}")
        try:
            split_lanes(s)
        except DTypeError:
            raise self.dtype_error(node, s) from None
        return s

    def dtype_arg(self, node: ast.AST) -> str:
        """A dtype written as "float32" or as T.float32."""
        if type(node) is ast.Constant:
            return self.dtype(node, node.value)
        if type(node) is ast.Name and isinstance(self.outside(node.id), str):
            return self.dtype(node, self.outside(node.id))
        f = self.tname(node)
        if f is not None:
            return self.dtype(node, f)
        raise self.err(node, "expected a dtype such as \"float32\"")

    # ------------------------------------------------------------------ arguments
    def call_args(self, call: ast.Call, fname: str, nmin: int, nmax: int | None,
                  kwargs: set = frozenset()) -> tuple[list, dict]:
        for a in call.args:
            if type(a) is ast.Starred:
                raise self.err(a, f"T.{fname} does not accept *arguments")
        kw = {}
        for k in call.keywords:
            if k.arg is None:
                raise self.err(k, f"T.{fname} does not accept **arguments")
            if k.arg not in kwargs:
                allowed = ", ".join(sorted(kwargs)) or "none"
                raise self.err(k, f"T.{fname} has no argument {k.arg!r} (allowed: {allowed})")
            kw[k.arg] = k.value
        n = len(call.args)
        if n < nmin or (nmax is not None and n > nmax):
            if nmax is None:
                want = f"at least {nmin}"
            elif nmin == nmax:
                want = str(nmin)
            else:
                want = f"{nmin} to {nmax}"
            raise self.err(call, f"T.{fname} takes {want} positional argument(s), got {n}")
        return list(call.args), kw

