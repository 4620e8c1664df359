"""Module level: the entry points :func:`parse` (TVMScript text -> IRModule) and
:func:`parse_function_source` (the source of one ``@T.prim_func`` Python function), the
``@tvm.script.ir_module`` class / ``@T.prim_func`` decorators, imports naming the tir
namespace, function signatures (``T.Buffer`` / ``T.handle`` / scalar ``n: T.int32``
parameters, symbolic variables) and the implicit ``root`` block; and :class:`Parser`, assembled from the parts.
"""
from __future__ import annotations

import ast
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import SCALAR_DTYPES, is_bool, is_float, is_int, lanes_of
from engine.ir.function import IRModule, PrimFunc

from ..errors import ScriptError
from .blocks import BlockParser
from .buffers import BufferParser
from .context import BlockCtx, Handle, ParserContext, const_true, is_docstring, nop, python_ast
from .exprs import ExprParser
from .intrinsics import IntrinsicParser
from .stmts import StmtParser


def _decorator_target(d: ast.AST) -> ast.AST:
    """``@T.prim_func`` or ``@T.prim_func(...)`` -> the ``T.prim_func`` node."""
    return d.func if type(d) is ast.Call else d


class ModuleParser(ParserContext):
    """Module classes, decorators and functions (mixed into :class:`Parser`)."""

    def function(self, fn: ast.FunctionDef) -> PrimFunc:
        self.scopes = [{}]
        self.blocks: list[BlockCtx] = []
        self.root_allocs: list[Buffer] = []
        self.loop_dom: dict[int, tuple] = {}
        self.keep: list = []
        self.symbolic: set[int] = set()
        self.views: set[int] = set()      # ids of the T.match_buffer views of regions
        self.attrs: tuple = ()
        self.depth = 0
        self.saw_block = False
        self.current = fn
        a = fn.args
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
            raise self.err(fn, f"function {fn.name!r}: parameters must be plain "
                               "`name: T.Buffer(...)` or `name: T.int32` parameters")
        self.declare_symbolic_vars(fn.body)
        params = self.params(a.args)
        stmts = self.stmt_list(fn.body)
        final = []
        for p in params:
            if isinstance(p, Handle):
                if p.buffer is None:
                    raise self.err(fn, f"parameter {p.name!r} is a T.handle without "
                                       f"T.match_buffer({p.name}, shape, dtype)")
                final.append(p.buffer)
            else:
                final.append(p)
        if not self.root_allocs and len(stmts) == 1 and type(stmts[0]) is S.BlockRealize \
                and stmts[0].block.name_hint == "root":
            body = stmts[0]
        elif self.root_allocs or self.saw_block:
            inner = S.seq(*stmts) or nop()
            body = S.BlockRealize((), const_true(), S.Block(
                (), (), (), "root", inner, None, tuple(self.root_allocs), ()))
        else:
            body = S.seq(*stmts) or nop()
        return PrimFunc(fn.name, tuple(final), body, self.attrs)

    def declare_symbolic_vars(self, body: list) -> None:
        """Symbolic variables declared at the top (``n = T.int32()``): they may appear in
        the parameters' shapes, so they are declared before the parameters."""
        for st in body:
            if type(st) is not ast.Assign or len(st.targets) != 1:
                continue
            target, value = st.targets[0], st.value
            if type(target) is ast.Name:
                pairs = [(target, value)]
            elif type(target) is ast.Tuple and type(value) is ast.Tuple and \
                    len(target.elts) == len(value.elts):  # m, n = T.int64(), T.int64()
                pairs = list(zip(target.elts, value.elts))
            else:
                continue
            for t, v in pairs:
                if type(t) is ast.Name and type(v) is ast.Call and self.is_symbolic_decl(v):
                    f = self.tname(v.func)
                    if f == "var":
                        dtype = self.dtype_arg(v.args[0]) if v.args else "int32"
                    else:
                        dtype = self.dtype(v.func, f)
                    self.declare_symbolic(t.id, E.Var(t.id, dtype))

    def declare_symbolic(self, name: str, v: E.Var) -> None:
        """``v`` may appear in buffer shapes (a symbolic size or a scalar parameter)."""
        self.symbolic.add(id(v))
        self.keep.append(v)
        self.declare(name, v)

    def scalar_param_dtype(self, ann: ast.AST) -> str | None:
        """The dtype of a scalar parameter's annotation (``n: T.int32``, ``x: T.float32``,
        ``n: T.var("int64")``), or None when ``ann`` is not one."""
        if type(ann) is ast.Call:
            if self.tname(ann.func) == "var" and len(ann.args) <= 1 and not ann.keywords:
                return self.dtype_arg(ann.args[0]) if ann.args else "int32"
            return None
        f = self.tname(ann)
        if f is None or f not in SCALAR_DTYPES or f == "handle":
            return None
        dt = self.dtype(ann, f)
        if lanes_of(dt) != 1 or not (is_int(dt) or is_float(dt) or is_bool(dt)):
            raise self.err(ann, f"a scalar parameter is an int, uint, float or bool "
                                f"scalar, not {dt}")
        return dt

    def params(self, args: list) -> list:
        """The parameters: Buffers, scalar Vars (``n: T.int32``), and Handles waiting for
        their ``T.match_buffer``. The scalar parameters are declared first: a buffer's
        shape may use one (``A: T.Buffer((n,), "float32"), n: T.int32``)."""
        params: list = []
        scalars: dict = {}
        for arg in args:
            ann = arg.annotation
            if ann is None:
                raise self.err(arg, f"parameter {arg.arg!r} needs a type: "
                                    f"{arg.arg}: T.Buffer((128, 128), \"float32\") or "
                                    f"{arg.arg}: T.int32")
            if arg.arg in self.ns:
                raise self.err(arg, f"{arg.arg!r} is the TVMScript namespace; rename the "
                                    "parameter")
            dt = self.scalar_param_dtype(ann)
            if dt is not None:
                if arg.arg in scalars:
                    raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
                scalars[arg.arg] = E.Var(arg.arg, dt)
                self.declare_symbolic(arg.arg, scalars[arg.arg])
        for arg in args:
            ann = arg.annotation
            if arg.arg in scalars:
                if any(p.name == arg.arg for p in params):
                    raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
                params.append(scalars[arg.arg])
                continue
            target = ann.func if type(ann) is ast.Call else (
                ann.value if type(ann) is ast.Subscript else ann)
            f = self.tname(target)
            if f == "handle" and type(ann) is not ast.Call:
                if arg.arg in scalars or any(getattr(p, "name", None) == arg.arg
                                             for p in params):
                    raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
                h = Handle(arg.arg)
                self.declare(arg.arg, h)
                params.append(h)
                continue
            if f != "Buffer" or type(ann) not in (ast.Call, ast.Subscript):
                raise self.err(ann, f"parameter {arg.arg!r} must be annotated as "
                                    f"T.Buffer(shape, dtype), T.handle or a scalar type "
                                    f"such as T.int32")
            buf = self.new_buffer(ann, arg.arg, "Buffer")
            if (self.lookup(arg.arg) is not None and arg.arg in self.scopes[0]) or \
                    arg.arg in scalars:
                raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
            self.declare(arg.arg, buf)
            params.append(buf)
        return params

    # ------------------------------------------------------------------ top level
    def decorator_kind(self, fn: Any) -> str | None:
        for d in fn.decorator_list:
            name = self.dotted(_decorator_target(d))
            last = name.rsplit(".", 1)[-1]
            if last == "prim_func":
                return "prim_func"
            if last == "ir_module":
                return "ir_module"
            if name.split(".")[0] in self.relax_ns and last == "function":
                return "relax"
            if name.startswith("R.") or name.startswith("relax."):
                return "relax"
            return "other:" + (name or "?")
        return None

    def module(self, relax_hook: Any = None, given: dict | None = None) -> IRModule:
        """The IRModule of the whole text. ``@R.function`` functions are refused unless a
        ``relax_hook`` is given (``engine.relax`` gives one): it is called as
        ``relax_hook(self, relax_fns, prim_funcs, class_name)`` after the prim_funcs are
        parsed and returns ``{name: function}``. ``given``: TensorIR functions already
        parsed (by their ``@T.prim_func`` decorators), by name, taken as they are."""
        given = given or {}
        self.relax_ok = relax_hook is not None
        class_name = None
        try:
            tree = python_ast(self.source)
        except SyntaxError as e:
            raise self.syntax_error(e) from None
        except (ValueError, MemoryError) as e:  # e.g. null bytes
            raise ScriptError(f"cannot parse the text: {e}") from None
        funcs: list[ast.FunctionDef] = []
        classes = 0
        for st in tree.body:
            t = type(st)
            if t in (ast.Import, ast.ImportFrom):
                self.note_import(st)
                continue
            if is_docstring(st):
                continue
            if t is ast.Pass:
                continue
            if t is ast.ClassDef:
                kind = self.decorator_kind(st)
                if kind is not None and kind != "ir_module":
                    raise self.err(st, f"class {st.name!r} must be decorated with "
                                       "@tvm.script.ir_module (or @I.ir_module)")
                classes += 1
                class_name = st.name
                if classes > 1:
                    raise self.err(st, "only one module class per text")
                for m in st.body:
                    mt = type(m)
                    if mt is ast.FunctionDef:
                        self.check_prim_func(m)
                        funcs.append(m)
                    elif mt is ast.Pass or is_docstring(m):
                        continue
                    else:
                        raise self.err(m, "a module class may only contain @T.prim_func "
                                          "and @R.function functions")
                continue
            if t is ast.FunctionDef:
                self.check_prim_func(st, allow_plain=True)
                funcs.append(st)
                continue
            raise self.err(st, "expected a @tvm.script.ir_module class or @T.prim_func "
                               "functions at the top level")
        if not funcs:
            raise ScriptError("no @T.prim_func function or @tvm.script.ir_module class "
                              "found in the text", None, None, self.filename)
        seen = set()
        for fn in funcs:
            if fn.name in seen:
                raise self.err(fn, f"two functions are named {fn.name!r}")
            seen.add(fn.name)
        relax_fns = [fn for fn in funcs if self.decorator_kind(fn) == "relax"]
        parsed = {fn.name: given[fn.name] if fn.name in given else self.function(fn)
                  for fn in funcs if fn not in relax_fns}
        if relax_fns:
            self.current = None
            parsed.update(relax_hook(self, relax_fns, dict(parsed), class_name))
        return IRModule(tuple((fn.name, parsed[fn.name]) for fn in funcs))

    def check_prim_func(self, fn: ast.FunctionDef, allow_plain: bool = False) -> None:
        kind = self.decorator_kind(fn)
        if kind == "prim_func" or (kind is None and allow_plain):
            return
        if kind == "relax":
            if getattr(self, "relax_ok", False):
                return
            raise self.err(fn, f"function {fn.name!r} is a Relax function; engine.script.parse "
                               "reads only @T.prim_func functions (engine.parse reads both)")
        raise self.err(fn, f"function {fn.name!r} must be decorated with @T.prim_func")

    def note_import(self, st: ast.AST) -> None:
        """`from tvm.script import tir as X` / `import tvm.script.tir as X` make X a tir
        namespace name."""
        if type(st) is ast.ImportFrom:
            for alias in st.names:
                if alias.name == "tir":
                    self.ns.add(alias.asname or "tir")
                elif alias.name == "relax":
                    self.relax_ns.add(alias.asname or "relax")
        else:
            for alias in st.names:
                if alias.name.endswith(".tir") and alias.asname:
                    self.ns.add(alias.asname)
                elif alias.name.endswith(".relax") and alias.asname:
                    self.relax_ns.add(alias.asname)


class Parser(ModuleParser, BlockParser, StmtParser, BufferParser, IntrinsicParser, ExprParser):
    """One parse: the source, its scopes and the state of the function being parsed."""


def _run(p: Parser, fn) -> Any:
    try:
        return fn()
    except ScriptError:
        raise
    except RecursionError:
        node = p.current
        err = p.err(node, "the program is too deeply nested to parse") if node is not None \
            else ScriptError("the program is too deeply nested to parse")
        raise err from None
    except Exception as e:  # noqa: BLE001 - never let a raw exception escape
        node = p.current
        msg = f"cannot parse this: {e}" if str(e) else f"cannot parse this ({type(e).__name__})"
        raise (p.err(node, msg) if node is not None else ScriptError(msg)) from None


def parse(text: str, relax_hook: Any = None) -> IRModule:
    """Parse TVMScript text into an IRModule (raises :class:`ScriptError` on bad input).

    A bare ``@T.prim_func`` is wrapped into a module keyed by its name. ``@R.function``
    functions need ``relax_hook`` (see :meth:`ModuleParser.module`; ``engine.parse`` passes
    the one of ``engine.relax``).
    """
    if not isinstance(text, str):
        raise ScriptError(f"parse() needs the script text as a str, got {type(text).__name__}")
    p = Parser(text)
    return _run(p, lambda: p.module(relax_hook))


def parse_class_source(text: str, namespaces: set, relax_namespaces: set, line_offset: int,
                       col_offset: int, filename: str | None, captured: dict, relax_hook: Any,
                       given: dict) -> IRModule:
    """Parse the source of a Python module class holding ``@R.function`` methods (or of
    one ``@R.function``): ``engine.script.ir.ir_module``. ``given``: its ``@T.prim_func``
    functions already parsed, by name; ``relax_hook`` reads the Relax ones."""
    p = Parser(text, namespaces, line_offset, col_offset, filename, captured)
    p.relax_ns.update(relax_namespaces)
    return _run(p, lambda: p.module(relax_hook, given))


def parse_function_source(text: str, namespaces: set | None = None, line_offset: int = 0,
                          col_offset: int = 0, filename: str | None = None,
                          captured: dict | None = None) -> PrimFunc:
    """Parse the source of one decorated Python function (used by ``@T.prim_func``).
    ``captured``: the plain constants the text may name from its Python surroundings
    (``engine.script.tir.captured_names``: closure and module variables), looked up when
    a name is not defined in the text."""
    p = Parser(text, namespaces, line_offset, col_offset, filename, captured)

    def go() -> PrimFunc:
        try:
            tree = python_ast(text)
        except SyntaxError as e:
            raise p.syntax_error(e) from None
        for st in tree.body:
            if type(st) in (ast.Import, ast.ImportFrom):
                p.note_import(st)
        fns = [st for st in tree.body if type(st) is ast.FunctionDef]
        if len(fns) != 1:
            raise ScriptError("expected the source of exactly one function", None, None,
                              filename)
        for d in fns[0].decorator_list:  # @tx.prim_func: `tx` names the tir namespace
            target = _decorator_target(d)
            if type(target) is ast.Attribute and target.attr == "prim_func" and \
                    type(target.value) is ast.Name:
                p.ns.add(target.value.id)
        return p.function(fns[0])

    return _run(p, go)
