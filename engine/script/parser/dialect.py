"""The TVMScript dialect the parser accepts: which ``T.<name>`` exist and what they are
(expression functions, statement-only names, loop kinds, dtypes), the buffer keyword
arguments, the Python operators, and the names of the Python constructs it refuses."""
from __future__ import annotations

import ast
import re

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import SCALAR_DTYPES

#: loop iterators -> loop kind (``range`` is a serial loop)
LOOP_KINDS = {"serial": S.ForKind.SERIAL, "range": S.ForKind.SERIAL,
              "parallel": S.ForKind.PARALLEL, "vectorized": S.ForKind.VECTORIZED,
              "unroll": S.ForKind.UNROLLED}

DTYPE_HINT = "(use float32, float64, int32, int64, ...)"
DTYPE_LIKE = re.compile(r"^(u?int|float|bool|handle)\w*$")

#: T.<name> functions usable in expressions (value = how many positional args; None: any)
EXPR_FUNCS = {
    "Cast": 2, "cast": 2, "Select": 3, "if_then_else": 3, "max": 2, "min": 2,
    "truncdiv": 2, "truncmod": 2, "floordiv": 2, "floormod": 2, "ceildiv": 2, "Ramp": 3,
    "Broadcast": 2,
    "call_extern": None, "call_intrin": None, "call_pure_extern": None, "Let": 3,
    "max_value": 1, "min_value": 1, "infinity": 1,
}
#: T.<name> only meaningful as statements / loop iterators / declarations
STMT_FUNCS = {
    "block", "sblock", "init", "reads", "writes", "where", "block_attr", "sblock_attr",
    "func_attr",
    "alloc_buffer", "sblock_alloc_buffer", "match_buffer", "evaluate", "grid", "serial",
    "parallel", "vectorized", "unroll", "axis", "axis.spatial", "axis.reduce", "axis.S",
    "axis.R", "axis.remap", "Buffer", "handle", "prim_func", "LetStmt", "allocate", "var",
    "thread_binding", "launch_thread", "env_thread",
}
#: function attributes TVM 0.27 spells differently -> the course-2022 name the IR keeps
FUNC_ATTR_2022 = {"tirx.noalias": "tir.noalias"}
KNOWN_T = set(EXPR_FUNCS) | STMT_FUNCS | set(E.INTRINSICS) | set(SCALAR_DTYPES) | \
    set(E.OPAQUE_CALLS)

#: the access masks of ``B.access_ptr("r")`` (TVM's letters)
ACCESS_MASK = {"r": 1, "w": 2}
#: the operations of the engine's lowered code that text may not name (an extern call of
#: the cache simulator's instrumentation, an address): a T.call_extern of one is refused
RESERVED_CALLS = frozenset({"call_extern", "address_of"})

BUFFER_KWARGS = {"dtype", "scope", "strides", "elem_offset", "align", "offset_factor",
                 "buffer_type", "axis_separators", "data"}

#: Python arithmetic / comparison operators -> IR nodes
BINOPS = {ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.Div: E.Div,
          ast.FloorDiv: E.FloorDiv, ast.Mod: E.FloorMod}
CMPOPS = {ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT,
          ast.GtE: E.GE}

#: how an unsupported expression is named in an error
AST_NAMES = {
    ast.Lambda: "a lambda", ast.IfExp: "a conditional expression (use T.Select or "
    "T.if_then_else)", ast.Dict: "a dict", ast.Set: "a set", ast.ListComp: "a list "
    "comprehension", ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.JoinedStr: "an f-string", ast.List: "a list",
    ast.Tuple: "a tuple", ast.Starred: "a starred expression", ast.Slice: "a slice",
    ast.NamedExpr: "an assignment expression (:=)",
}

#: how an unsupported statement is named in an error
STMT_NAMES = {
    ast.While: "while loops", ast.Return: "return", ast.FunctionDef: "nested functions",
    ast.ClassDef: "classes", ast.Import: "import", ast.ImportFrom: "import", ast.Try: "try",
    ast.Raise: "raise", ast.Assert: "assert", ast.Delete: "del", ast.Global: "global",
    ast.Nonlocal: "nonlocal", ast.Break: "break", ast.Continue: "continue",
    ast.AsyncFor: "async for", ast.AsyncWith: "async with",
    ast.AsyncFunctionDef: "async functions",
}
