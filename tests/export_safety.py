"""What an exported schedule script may contain, checked on its syntax tree.

An export (engine Python, TVM 0.27, course 2022) is a list of schedule calls; whatever a
trace carries, the text must parse, and every statement must be one of: an import of
``engine``/``tvm``, the ``apply_trace`` function of the TVM dialects, an assignment of names,
or a call. Calls are only ``sch.<schedule method>(...)`` and the few setup calls the engine
export always has; arguments are only literals, handle names, lists/tuples/dicts of them
and index-map lambdas over integers; attributes are read only on ``sch``, ``engine``,
``tvm`` and the module chains the header names. No subscripts, no other names called.
"""
from __future__ import annotations

import ast

from engine.schedule.registry import BY_METHOD

SCH_METHODS = {p.method for p in BY_METHOD.values()} | \
    {m for p in BY_METHOD.values() for m in p.dialect_method.values()}
SETUP_CALLS = {"engine.workloads.get", "engine.Schedule", "print", "sch.mod.script"}
ATTRIBUTE_CHAINS = {"engine.workloads", "engine.workloads.get", "engine.Schedule",
                    "sch.mod", "sch.mod.script", "tvm.s_tir", "tvm.s_tir.Schedule",
                    "tvm.tir", "tvm.tir.Schedule"}
IMPORTS = {"engine", "tvm"}
FREE_NAMES = {"sch", "engine", "tvm", "mod", "print"}
INDEX_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def assert_safe_export(text: str) -> None:
    """Fail unless ``text`` is a schedule script of the allowed shape (module docstring)."""
    tree = ast.parse(text)
    handles: set[str] = set()
    for stmt in tree.body:
        _check_stmt(stmt, handles, top=True)


def _check_stmt(stmt: ast.stmt, handles: set, top: bool) -> None:
    if isinstance(stmt, ast.Import) and top:
        assert all(a.name in IMPORTS and a.asname is None for a in stmt.names), ast.dump(stmt)
    elif isinstance(stmt, ast.ImportFrom) and top:
        assert stmt.module == "tvm" and stmt.level == 0, ast.dump(stmt)
        assert all(a.name in ("s_tir", "tir") and a.asname is None for a in stmt.names)
    elif isinstance(stmt, ast.FunctionDef) and top:
        assert stmt.name == "apply_trace" and not stmt.decorator_list
        assert [a.arg for a in stmt.args.args] == ["sch"]
        ann = dotted(stmt.args.args[0].annotation)
        assert ann in ("tvm.s_tir.Schedule", "tvm.tir.Schedule"), ann
        assert isinstance(stmt.returns, ast.Constant) and stmt.returns.value is None
        inner = set(handles)
        for s in stmt.body:
            _check_stmt(s, inner, top=False)
    elif isinstance(stmt, ast.Pass) and not top:
        pass
    elif isinstance(stmt, ast.Assign):
        assert len(stmt.targets) == 1, ast.dump(stmt)
        _check_call(stmt.value, handles)
        target = stmt.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        setup = dotted(stmt.value.func) in SETUP_CALLS
        for n in names:
            assert isinstance(n, ast.Name), ast.dump(stmt)
            if setup:   # mod = engine.workloads.get(...); sch = engine.Schedule(mod, ...)
                assert n.id in ("mod", "sch"), ast.dump(stmt)
                continue
            assert not n.id.startswith("__") and n.id not in FREE_NAMES, n.id
            handles.add(n.id)
    elif isinstance(stmt, ast.Expr):
        _check_call(stmt.value, handles)
    else:
        raise AssertionError(f"statement not allowed in an export: {ast.dump(stmt)[:300]}")


def _check_call(node: ast.AST, handles: set) -> None:
    assert isinstance(node, ast.Call), ast.dump(node)[:300]
    name = dotted(node.func)
    if name is None or name not in SETUP_CALLS:
        assert isinstance(node.func, ast.Attribute) and dotted(node.func.value) == "sch", \
            f"call of {ast.dump(node.func)[:200]}"
        assert node.func.attr in SCH_METHODS, node.func.attr
    for a in node.args:
        _check_value(a, handles)
    for k in node.keywords:
        assert k.arg is not None and k.arg.isidentifier(), ast.dump(k)
        _check_value(k.value, handles)


def _check_value(node: ast.AST, handles: set) -> None:
    if isinstance(node, ast.Constant):
        assert node.value is None or isinstance(node.value, (bool, int, float, str))
    elif isinstance(node, ast.Name):
        assert node.id in handles or node.id in FREE_NAMES, f"unknown name {node.id!r}"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        assert isinstance(node.operand, ast.Constant)
        assert isinstance(node.operand.value, (int, float))
    elif isinstance(node, (ast.List, ast.Tuple)):
        for x in node.elts:
            _check_value(x, handles)
    elif isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            assert isinstance(k, ast.Constant) and isinstance(k.value, str)
            _check_value(v, handles)
    elif isinstance(node, ast.Call) and dotted(node.func) == "sch.mod.script":
        assert not node.args and not node.keywords
    elif isinstance(node, ast.Lambda):
        _check_index_map(node)
    else:
        raise AssertionError(f"value not allowed in an export: {ast.dump(node)[:300]}")


def _check_index_map(lam: ast.Lambda) -> None:
    params = {a.arg for a in lam.args.args}
    assert not (lam.args.vararg or lam.args.kwarg or lam.args.kwonlyargs or lam.args.defaults)
    for n in ast.walk(lam.body):
        if isinstance(n, ast.Name):
            assert n.id in params, f"index map uses {n.id!r}"
        elif isinstance(n, ast.Constant):
            assert type(n.value) is int
        else:
            assert isinstance(n, (ast.Tuple, ast.BinOp, ast.UnaryOp, ast.Load, ast.USub,
                                  ast.UAdd) + INDEX_OPS), ast.dump(n)[:200]
