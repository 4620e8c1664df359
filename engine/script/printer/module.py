"""Module level: :func:`script`, :func:`script_with_spans` and :func:`repr_node`; the
``@tvm.script.ir_module`` class, each ``@T.prim_func`` header (parameters, attributes,
symbolic variables) and the elided ``root`` block; and :class:`Printer`, assembled from the
parts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.function import IRModule, PrimFunc

from .names import sanitize
from .stmts import ScriptTooLarge, StmtPrinter, is_true

#: The spellings of each script dialect: ``course-2022`` is the course's TVMScript (the
#: default), ``tvm-0.27`` what Apache TVM 0.27 reads and prints (``T.block`` became
#: ``T.sblock``, ``alloc_buffer`` ``sblock_alloc_buffer``, ``block_attr`` ``sblock_attr``,
#: ``tir.noalias`` ``tirx.noalias``, the ``tirx`` module and ``@T.prim_func(s_tir=True)``).
#: Both parse back (:func:`engine.script.parse` reads either) to the same program.
DIALECTS = {
    "course-2022": {
        "imports": ("# from tvm.script import tir as T",),
        "ir_module": "@tvm.script.ir_module", "prim_func": "@T.prim_func",
        "block": "block", "alloc_buffer": "alloc_buffer", "block_attr": "block_attr",
        "func_attrs": {},
    },
    "tvm-0.27": {
        "imports": ("# from tvm.script import ir as I", "# from tvm.script import tirx as T",
                    ""),
        "ir_module": "@I.ir_module", "prim_func": "@T.prim_func(s_tir=True)",
        "block": "sblock", "alloc_buffer": "sblock_alloc_buffer", "block_attr": "sblock_attr",
        "func_attrs": {"tir.noalias": "tirx.noalias"},
    },
}


def dialect_spelling(dialect: str) -> dict:
    """The spellings of ``dialect`` (a ``ValueError`` naming the dialects otherwise)."""
    spell = DIALECTS.get(dialect) if isinstance(dialect, str) else None
    if spell is None:
        raise ValueError(f"unknown script dialect {dialect!r}; the dialects are "
                         + ", ".join(repr(d) for d in DIALECTS))
    return spell


@dataclass(frozen=True)
class Span:
    """Where an IR node is printed: ``kind`` is "loop", "block" or "stmt"; lines are
    1-based and inclusive; ``name`` is the printed loop variable / block name (for a
    statement: the stored buffer's name, or "if", "evaluate", "let", "allocate")."""

    node: Any
    kind: str
    name: str
    start_line: int
    end_line: int


def _mentions(buf: Buffer, var_ids: set) -> bool:
    """Does the shape (or strides) of ``buf`` use one of the variables (by id)?"""
    from engine.ir.functor import collect_vars
    return any(id(v) in var_ids for d in tuple(buf.shape) + tuple(buf.strides)
               if isinstance(d, E.PrimExpr) for v in collect_vars(d))


def _contains_block(s: Any) -> bool:
    stack = [s]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is S.BlockRealize or t is S.Block:
            return True
        if t is S.SeqStmt:
            stack.extend(x.seq)
        elif t is S.For or t is S.LetStmt or t is S.Allocate:
            stack.append(x.body)
        elif t is S.IfThenElse:
            stack.append(x.then_case)
            if x.else_case is not None:
                stack.append(x.else_case)
    return False


class Printer(StmtPrinter):
    """One printing job: lines, optional spans, and a scoped name table; with
    ``max_chars``, the job stops with :class:`ScriptTooLarge` as soon as its lines hold more
    characters than that."""

    def __init__(self, want_spans: bool, dialect: str = "course-2022",
                 max_chars: int | None = None):
        self.spell = dialect_spelling(dialect)
        self.max_chars = max_chars
        self.chars = 0
        self.lines: list[str] = []
        self.spans: list[list] | None = [] if want_spans else None
        self._indents = ["    " * i for i in range(64)]
        self.reset_names()
        self._expr_fn = self.expr_table()
        self._stmt_fn = self.stmt_table()

    # ------------------------------------------------------------------ functions
    def func(self, f: PrimFunc, name: str, ind: int) -> None:
        self.reset_names()
        self.emit(ind, self.spell["prim_func"])
        names = [self.define(p, p.name) for p in f.params]
        scalars = {id(p) for p in f.params if isinstance(p, E.Var)}
        params, matched = [], []
        for n, p in zip(names, f.params):
            if id(p) in scalars:
                params.append(f"{n}: T.{p.dtype}")
            elif scalars and _mentions(p, scalars):
                # a shape using a scalar parameter: TVM's ``var_A: T.handle`` with
                # ``A = T.match_buffer(var_A, shape)`` (an annotation cannot use a later
                # parameter)
                handle = self.define(("handle", p), "var_" + n)
                params.append(f"{handle}: T.handle")
                matched.append(f"{n} = T.match_buffer({handle}, {self.buffer_args(p)})")
            else:
                params.append(f"{n}: {self.buffer_annotation(p)}")
        self.emit(ind, f"def {sanitize(name)}({', '.join(params)}):")
        decl_at = len(self.lines)
        first_span = len(self.spans) if self.spans is not None else 0
        body_ind = ind + 1
        if f.attrs:
            attrs = self.dict_literal(f.attrs, self.spell["func_attrs"])
            self.emit(body_ind, f"T.func_attr({attrs})")
        for line in matched:
            self.emit(body_ind, line)
        body = f.body
        root = body.block if type(body) is S.BlockRealize else None
        if (root is not None and root.name_hint == "root" and not root.iter_vars
                and not body.iter_values and not root.reads and not root.writes
                and root.init is None and not root.annotations and is_true(body.predicate)
                and (root.alloc_buffers or _contains_block(root.body))):
            start = len(self.lines) + 1
            self.emit(body_ind, f'# with T.{self.spell["block"]}("root"):')
            rec = self.span(root, "block", "root", start)
            self.emit_allocs(root.alloc_buffers, body_ind)
            self.stmt(root.body, body_ind)
            self.end_span(rec)
        else:
            self.stmt(body, body_ind)
        if self.free_vars:  # symbolic variables: declare them right after the signature
            decls = [self._indents[body_ind] + f"{self.name_of[id(v)]} = T.{v.dtype}()"
                     for v in self.free_vars]
            self.lines[decl_at:decl_at] = decls
            if self.spans is not None:
                for rec in self.spans[first_span:]:
                    rec[3] += len(decls)
                    rec[4] += len(decls)

    def module(self, mod: IRModule) -> None:
        self.lines.extend(self.spell["imports"])
        self.lines.append(self.spell["ir_module"])
        self.lines.append("class Module:")
        if not mod.functions:
            self.lines.append("    pass")
        for k, (name, f) in enumerate(mod.functions):
            if k:
                self.lines.append("")
            self.func(f, name, 1)

    def run(self, obj: Any) -> str:
        if isinstance(obj, IRModule):
            self.module(obj)
        elif isinstance(obj, PrimFunc):
            if self.spell is not DIALECTS["course-2022"]:  # (the course printed none)
                self.lines.extend(x for x in self.spell["imports"] if "tirx" in x or not x)
            self.func(obj, obj.name, 0)
        else:
            raise TypeError(f"script() prints an IRModule or a PrimFunc, not {type(obj).__name__}")
        return "\n".join(self.lines) + "\n"


def script(obj: Any, dialect: str = "course-2022", max_chars: int | None = None) -> str:
    """TVMScript text of an IRModule or PrimFunc, in the course's 2022 syntax or, with
    ``dialect="tvm-0.27"``, in Apache TVM 0.27's (see :data:`DIALECTS`); with
    ``max_chars``, :class:`ScriptTooLarge` instead of a longer text."""
    return Printer(False, dialect, max_chars).run(obj)


def prim_func_lines(f: PrimFunc, name: str, indent: int) -> list[str]:
    """The lines of one ``@T.prim_func`` printed at ``indent`` levels (for printers of
    modules that also hold other kinds of functions)."""
    p = Printer(False)
    p.func(f, name, indent)
    return p.lines


def script_with_spans(obj: Any, dialect: str = "course-2022",
                      max_chars: int | None = None) -> tuple[str, list[Span]]:
    """``(text, spans)``: the text of :func:`script` and where each loop, block and
    statement is printed (see :class:`Span`); ``max_chars`` as for :func:`script`."""
    p = Printer(True, dialect, max_chars)
    text = p.run(obj)
    return text, [Span(*rec) for rec in p.spans]


def repr_node(node: Any) -> str:
    """Short text for any IR node (one line for expressions). Never raises."""
    try:
        if isinstance(node, (IRModule, PrimFunc)):
            return script(node).rstrip("\n")
        p = Printer(False)
        if isinstance(node, E.PrimExpr):
            return p.ex(node)
        if isinstance(node, (S.Stmt, S.Block)):
            p.stmt(node, 0)
            return "\n".join(p.lines)
        if isinstance(node, Buffer):
            return f"{node.name}: {p.buffer_annotation(node)}"
        if isinstance(node, BufferRegion):
            return p.region(node)
        if isinstance(node, Range):
            return p.range_text(node)
        if isinstance(node, S.IterVar):
            kind = "spatial" if node.iter_type is S.IterType.SPATIAL else "reduce"
            return f"IterVar({p.ex(node.var)}: {kind}, dom={p.range_text(node.dom)})"
        return f"<{type(node).__name__}>"
    except Exception:  # noqa: BLE001 - repr must never fail
        return f"<{type(node).__name__} at {id(node):#x}>"
