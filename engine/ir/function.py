"""PrimFunc and IRModule."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from . import display
from .buffer import Buffer
from .dtype import is_bool, is_float, is_int, lanes_of
from .expr import Var
from .node import Node, node
from .stmt import Stmt


@node
class PrimFunc(Node):
    """A tensor function: parameters and a body.

    The parameters are buffers and, as in TVM (``def f(a: T.handle, n: T.int32)``), scalar
    parameters: a :class:`~engine.ir.expr.Var` of a scalar int, uint, float or bool dtype,
    in their place among the buffers (``params`` holds both, in order;
    :attr:`buffer_params` / :attr:`scalar_params` the ones of each kind). A buffer's shape
    may use symbolic sizes: scalar parameters, or variables of the function's own
    (``n = T.int32()``) bound from the shapes of the arrays it is called with.

    As in TVM, ``body`` is a BlockRealize of the implicit ``root`` block (whose
    ``alloc_buffers`` hold intermediate buffers such as ``Y`` in mm_relu).
    ``attrs`` is a tuple of ``(key, value)`` pairs (``global_symbol``, ``tir.noalias``).
    ``private`` (``@T.prim_func(private=True)``): as TVM's function without a global
    symbol, it takes the name it is given in a module built from a dict
    (``IRModule({"main": f})``); not compared by structural equality.
    """

    name: str
    params: tuple
    body: Stmt
    attrs: tuple = ()
    private: bool = dataclasses.field(default=False, metadata={"structural": False})

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        for p in self.params:
            if isinstance(p, Buffer):
                continue
            if isinstance(p, Var):
                dt = p.dtype
                if lanes_of(dt) == 1 and (is_int(dt) or is_float(dt) or is_bool(dt)):
                    continue
                raise TypeError(f"scalar parameter {p.name!r} has dtype {dt}; a scalar "
                                "parameter is an int, uint, float or bool scalar")
            raise TypeError(f"PrimFunc parameters must be Buffers or scalar Vars, got {p!r}")

    @property
    def buffer_params(self) -> tuple:
        """The buffer parameters, in order (the scalar ones left out)."""
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def scalar_params(self) -> tuple:
        """The scalar parameters (:class:`~engine.ir.expr.Var`), in order."""
        return tuple(p for p in self.params if not isinstance(p, Buffer))

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_attr(self, key: Any, value: Any = None) -> "PrimFunc":
        """A copy with one attribute set, or several: ``with_attr({"global_symbol": "f"})``
        (the course's form). Setting ``global_symbol`` also renames the function."""
        items = list(key.items()) if isinstance(key, dict) else [(key, value)]
        out = self
        for k, v in items:
            keys = [a for a, _ in out.attrs]
            attrs = (tuple((a, v if a == k else b) for a, b in out.attrs) if k in keys
                     else out.attrs + ((k, v),))
            out = out.replace(attrs=attrs, name=v if k == "global_symbol" else out.name)
        return out

    def with_body(self, body: Stmt) -> "PrimFunc":
        return self.replace(body=body)

    def script(self, dialect: str = "course-2022") -> str:
        """TVMScript text: ``dialect="course-2022"`` (the course's spelling, the default)
        or ``"tvm-0.27"`` (what Apache TVM 0.27's parser reads: ``T.sblock``, ...)."""
        return display.render("script", self, dialect=dialect)

    def show(self, dialect: str = "course-2022", **_style: object) -> None:
        """Print the TVMScript text (TVM's ``show()``; TVM's style options are accepted and
        ignored: the text is not highlighted)."""
        print(self.script(dialect=dialect))

    def _repr_html_(self) -> str:
        """Jupyter rendering: highlighted script and loop-nest picture."""
        return display.render("html", self)


@dataclasses.dataclass(frozen=True)
class GlobalVar:
    """The name of a function in a module (TVM's ``GlobalVar``): ``mod.get_global_var("f")``;
    ``mod[gv]`` is the function. Two are equal when they name the same function."""

    name_hint: str

    def same_as(self, other: Any) -> bool:
        return self == other

    def __repr__(self) -> str:
        return f"I.GlobalVar({self.name_hint!r})"


class Functions(tuple):
    """A module's functions: a tuple of ``(name, function)`` pairs that also reads as TVM's
    ``mod.functions`` map: ``items()`` gives ``(GlobalVar, function)`` pairs, ``keys()`` the
    GlobalVars, ``values()`` the functions (what ``for gv, f in mod.functions.items()``
    expects)."""

    __slots__ = ()

    def items(self) -> list:
        return [(GlobalVar(n), f) for n, f in tuple.__iter__(self)]

    def keys(self) -> list:
        return [GlobalVar(n) for n, _ in tuple.__iter__(self)]

    def values(self) -> list:
        return [f for _, f in tuple.__iter__(self)]


@node
class IRModule(Node):
    """A module of named functions: ``mod["mm_relu"]``, ``mod.script()``.

    The functions are TensorIR ``PrimFunc`` s and, in a model (``engine.relax``), Relax
    functions too; :meth:`prim_funcs` gives the TensorIR ones.

    ``workload`` is where the module came from, ``(name, params)``, set by
    ``engine.workloads.get`` (None otherwise): a ``Schedule`` of the module records it in its
    trace, so the trace replays on its own. It is metadata, not structure: structural
    equality, hashing and the IR walkers ignore it, and a changed module drops it.
    """

    functions: tuple  # ((name, PrimFunc), ...)
    workload: Any = dataclasses.field(default=None, metadata={"structural": False})

    __hash__ = object.__hash__

    def __post_init__(self):
        funcs = self.functions
        if isinstance(funcs, dict):   # TVM's IRModule({"main": f}): a private f is "main"
            funcs = tuple((k, f.replace(name=k) if getattr(f, "private", False)
                           and isinstance(k, str) and f.name != k else f)
                          for k, f in funcs.items())
        object.__setattr__(self, "functions", Functions(funcs))

    @staticmethod
    def from_funcs(*funcs: PrimFunc) -> "IRModule":
        return IRModule(tuple((f.name, f) for f in funcs))

    @staticmethod
    def from_expr(func: Any) -> "IRModule":
        """A module of one function named ``main`` (TVM's ``IRModule.from_expr``)."""
        named = func.replace(name="main") if getattr(func, "name", "main") != "main" else func
        if hasattr(named, "attrs") and dict(named.attrs).get("global_symbol") not in \
                (None, "main"):
            named = named.replace(attrs=tuple((k, "main" if k == "global_symbol" else v)
                                              for k, v in named.attrs))
        return IRModule((("main", named),))

    def __getitem__(self, name: "str | GlobalVar") -> PrimFunc:
        if not isinstance(name, str):   # a GlobalVar (also a Relax one, relax.GlobalVar)
            name = getattr(name, "name_hint", name)
        for n, f in self.functions:
            if n == name:
                return f
        names = ", ".join(n for n, _ in self.functions)
        raise KeyError(f"no function named {name!r} in this module (it has: {names})")

    def __contains__(self, name: "str | GlobalVar") -> bool:
        if not isinstance(name, str):   # a GlobalVar (also a Relax one, relax.GlobalVar)
            name = getattr(name, "name_hint", name)
        return any(n == name for n, _ in self.functions)

    def get_global_var(self, name: str) -> GlobalVar:
        """The :class:`GlobalVar` of the function ``name`` (TVM's ``get_global_var``);
        ValueError when the module has none of that name."""
        if name not in self:
            raise ValueError(f"the module has no function named {name!r} (it has: "
                             f"{', '.join(self.names())})")
        return GlobalVar(name)

    def get_global_vars(self) -> list:
        """The :class:`GlobalVar` of every function, in order."""
        return [GlobalVar(n) for n, _ in self.functions]

    def __iter__(self) -> Iterator[str]:
        return iter(n for n, _ in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def names(self) -> list[str]:
        return [n for n, _ in self.functions]

    def prim_funcs(self) -> list[tuple[str, PrimFunc]]:
        """The ``(name, PrimFunc)`` pairs: the TensorIR functions (a module may also hold
        Relax functions, ``engine.relax``)."""
        return [(n, f) for n, f in self.functions if isinstance(f, PrimFunc)]

    def prim_func_names(self) -> list[str]:
        return [n for n, f in self.functions if isinstance(f, PrimFunc)]

    def items(self):
        return list(self.functions)

    def with_function(self, name: str, func: PrimFunc) -> "IRModule":
        out, found = [], False
        for n, f in self.functions:
            if n == name:
                out.append((n, func))
                found = True
            else:
                out.append((n, f))
        if not found:
            out.append((name, func))
        return IRModule(tuple(out))

    def update_func(self, gv: "GlobalVar | str", func: Any) -> None:
        """TVM's ``mod.update_func(gv, func)``: the function ``gv`` names replaced by
        ``func`` — added when the module has none of that name, as TVM's
        ``IRModule::Update`` — *in place*: TVM's modules are mutable, and the course
        replaces a tuned function this way (``MyModule.update_func(gv, new_func)``, then
        builds ``MyModule``). The one change made to a module after it exists; everything
        holding this module object sees it, as in TVM. Use :meth:`with_function` for a
        changed copy. ``workload`` is dropped (a changed module)."""
        name = gv if isinstance(gv, str) else getattr(gv, "name_hint", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"update_func takes a GlobalVar (mod.get_global_var(name)) or a "
                            f"function name, got {type(gv).__name__}")
        updated = self.with_function(name, func)
        object.__setattr__(self, "functions", updated.functions)
        object.__setattr__(self, "workload", None)

    def script(self, dialect: str = "course-2022") -> str:
        """TVMScript text: ``dialect="course-2022"`` (the course's spelling, the default)
        or ``"tvm-0.27"`` (what Apache TVM 0.27's parser reads: ``T.sblock``, ...)."""
        return display.render("script", self, dialect=dialect)

    def show(self, dialect: str = "course-2022", **_style: object) -> None:
        """Print the TVMScript text (TVM's ``show()``; TVM's style options are accepted and
        ignored: the text is not highlighted)."""
        print(self.script(dialect=dialect))

    def _repr_html_(self) -> str:
        """Jupyter rendering: highlighted script and loop-nest picture."""
        return display.render("html", self)
