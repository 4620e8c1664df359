"""The primitive registry: one :class:`Primitive` subclass per TVM instruction kind.

A primitive bundles four things, so that the public method, trace replay and every
export stay consistent:

* ``kind`` — TVM's instruction kind name (``"Split"``); ``aliases`` lists other names
  accepted when importing traces (TVM 0.27 calls GetBlock ``"GetSBlock"``).
* ``call(sch, ...)`` — the public ``Schedule`` method (installed as ``Schedule.<method>``
  with this docstring). It checks the Python-level arguments, turns them into the
  trace form ``inputs`` (handles and literals) / ``attrs`` (plain values), and returns
  ``sch._run(self, inputs, attrs)`` shaped as the user expects.
* ``apply(ctx, inputs, attrs) -> Result`` — the pure transformation. ``inputs`` arrive
  with every handle replaced by its current IR node (a ``For`` or a ``Block``); ``ctx``
  gives the function and a :class:`~engine.schedule.tree.FuncIndex`. It returns the new
  PrimFunc (or None for a query) and the output nodes; it raises ScheduleError to refuse.
* ``python_args(inputs, attrs, dialect)`` — the argument list for exported Python, every
  value written by :mod:`.literals` (``fmt`` for inputs, ``attr`` for attributes).
* ``attr_kinds`` — the name and type of each attribute (``("factor_axis", "int")``), the
  first ``required_attrs`` of them required: a trace is refused when it is read or replayed
  if its attributes do not fit (:meth:`Primitive.check_attrs`).

See ``engine/schedule/__init__.py`` for a worked example of adding a primitive.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from .error import ScheduleError, TraceError
# fmt is imported by the primitives from here
from .literals import (fmt, fmt_literal, py_bool, py_int, py_int_list, py_literal,  # noqa: F401
                       py_number_list, py_number_or_none, py_str)

REGISTRY: dict[str, "Primitive"] = {}   # kind (and aliases) -> primitive
BY_METHOD: dict[str, "Primitive"] = {}  # method name -> primitive
_SCHEDULE_CLASS: list[type] = []


@dataclasses.dataclass
class Result:
    """What a primitive's ``apply`` returns.

    ``func``: the new PrimFunc (None or the same object when nothing changed);
    ``outputs``: For/Block nodes of the new function, in order (they become new handles);
    ``renames``: block renames ``{old_name: new_name}`` so existing handles follow them;
    ``decision``: what a sampling instruction decided (recorded in the trace).

    A sampling primitive's outputs may also be ints (they become ExprRVs) and
    :data:`ROOT_MARK` / :data:`INLINE_MARK` (LoopRVs of TVM's special locations).
    """

    func: Any = None
    outputs: list = dataclasses.field(default_factory=list)
    renames: dict = dataclasses.field(default_factory=dict)
    decision: Any = None


class LocationMark:
    """TVM's two special compute locations a sampled LoopRV can stand for:
    :data:`ROOT_MARK` (leave the block where it is, decision -1) and :data:`INLINE_MARK`
    (inline it, decision -2). ``compute_at`` / ``reverse_compute_at`` given one of them
    do nothing / inline the block, as TVM does."""

    __slots__ = ("name", "decision")

    def __init__(self, name: str, decision: int):
        self.name = name
        self.decision = decision

    def __repr__(self) -> str:
        return f"the {self.name} location"


ROOT_MARK = LocationMark("root", -1)
INLINE_MARK = LocationMark("inline", -2)
MARKS = {m.name: m for m in (ROOT_MARK, INLINE_MARK)}


@dataclasses.dataclass
class Ctx:
    """Context given to ``apply``: the module, the target function and its index."""

    mod: Any
    func_name: str
    func: Any
    index: Any  # FuncIndex
    step: int   # 1-based number of this transformation (queries are not counted)
    method: str
    rng: Any = None        # the schedule's random.Random (sampling primitives)
    decision: Any = None   # the recorded decision replayed, or None to sample

    def error(self, subject: str, rule: str, hint: str = "", highlight=(), nodes=()):
        """Build a ScheduleError for this primitive (``raise ctx.error(...)``)."""
        return ScheduleError(self.method, subject, rule, hint, highlight, nodes)


class Primitive:
    """Base class of schedule instructions (see module docstring)."""

    kind: str = ""
    method: str = ""
    aliases: tuple = ()
    mutates: bool = True            # False for queries (GetBlock, GetLoops, ...)
    returns: str = "none"           # "none" | "one" | "list"
    # Names used when a handle dies because of this primitive ("split", "fused").
    death_verb: str = ""
    # Method names in exported Python for other dialects, e.g. {"tvm": "get_sblock"}.
    dialect_method: dict = {}
    # Index in attrs holding the function name (GetBlock), else None.
    func_name_attr: int | None = None
    # Positions in inputs that hold a *list* of handles (TVM's CacheRead/CacheWrite
    # ``consumer_blocks``: ``["CacheRead", ["b0", ["b3"]], [0, "global"], ["b4"]]``).
    list_inputs: tuple = ()
    # Positions in inputs that hold a list of integers (TVM's ReorderBlockIterVar
    # ``new_order``: ``["ReorderBlockIterVar", ["b0", [2, 0, 1]], [], []]``).
    int_list_inputs: tuple = ()
    # Positions in inputs that hold a plain value, never a handle (Annotate's ``ann_val``:
    # a string, a number, a list of them or a dict): recorded with :func:`encode_literal`,
    # given back to the primitive with :func:`decode_literal`.
    literal_inputs: tuple = ()

    # The attributes: (name, kind) pairs, kinds from ATTR_KINDS; None: not declared (any
    # plain values, still written only by the literal writer). ``required_attrs``: how many
    # of them a trace must give (None: all).
    attr_kinds: tuple | None = None
    required_attrs: int | None = None
    # False for instructions that act on no function (SampleCategorical): a module of
    # several functions needs no func_name for them.
    needs_function: bool = True
    # Sampling instructions carry a decision (TVM's ``decision=``), recorded in the trace.
    has_decision: bool = False

    def check_decision(self, attrs, decision) -> None:
        """Refuse (TraceError) a decision of the wrong shape for this kind, before any
        replay (what depends on the program is checked by ``apply``)."""
        raise TraceError(f"{self.kind} takes no decision")

    def check_attrs(self, attrs) -> None:
        """Refuse (TraceError) attributes of the wrong number or type for this kind."""
        if self.attr_kinds is None:
            return
        most = len(self.attr_kinds)
        least = most if self.required_attrs is None else self.required_attrs
        if not least <= len(attrs) <= most:
            names = ", ".join(n for n, _ in self.attr_kinds) or "none"
            count = str(most) if least == most else f"{least} to {most}"
            raise TraceError(f"{self.kind} takes {count} attribute(s) ({names}), got "
                             f"{len(attrs)}")
        for i in range(len(attrs)):
            self.attr(attrs, i)

    def attr(self, attrs, i: int, default: Any = None) -> str:
        """Attribute ``i`` written as Python (``default`` when the trace omits it), checked
        against its declared kind."""
        if i >= len(attrs):
            return py_literal(default)
        name, kind = self.attr_kinds[i] if self.attr_kinds and i < len(self.attr_kinds) \
            else (f"attribute {i}", "literal")
        return ATTR_KINDS[kind](attrs[i], f"{self.kind}'s {name}")

    def call(self, sch, *args, **kwargs):  # pragma: no cover - overridden
        raise NotImplementedError

    def apply(self, ctx: Ctx, inputs: list, attrs: list) -> Result:  # pragma: no cover
        raise NotImplementedError

    def python_args(self, inputs: list, attrs: list, dialect: str) -> list[str]:
        """Default: inputs positionally (handle names / literals), attrs omitted."""
        return [fmt(x) for x in inputs]

    def method_name(self, dialect: str) -> str:
        return self.dialect_method.get(dialect, self.method)


# How each kind of attribute is checked and written (each raises TraceError on a misfit).
ATTR_KINDS = {
    "int": py_int,
    "bool": py_bool,
    "str": py_str,
    "number?": py_number_or_none,
    "literal": py_literal,
    "ints": py_int_list,
    "numbers": py_number_list,
}


def quote(s: str) -> str:
    """Trace encoding of a string literal input (TVM's convention: quoted)."""
    import json
    return json.dumps(s)


def unquote(s: str) -> str:
    import json
    return json.loads(s)


def encode_literal(v: Any) -> Any:
    """A plain input value in trace form (TVM's): a string quoted, lists (tuples) item by
    item, a dict as it is (an :class:`~engine.ir.AttrMap`, hashable: its lists tuples)."""
    from engine.ir.node import AttrMap
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, (list, tuple)):
        return tuple(encode_literal(x) for x in v)
    if isinstance(v, (dict, AttrMap)):
        return _frozen_plain(v)
    return v


def _frozen_plain(v: Any) -> Any:
    from engine.ir.node import AttrMap
    if isinstance(v, (dict, AttrMap)):
        return AttrMap((k, _frozen_plain(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return tuple(_frozen_plain(x) for x in v)
    return v


def decode_literal(v: Any) -> Any:
    """The value of a plain input in trace form (:func:`encode_literal`'s inverse): quoted
    strings unquoted, lists as lists, a dict as a dict (its strings as they are)."""
    from engine.ir.node import AttrMap
    if isinstance(v, str):
        return unquote(v)
    if isinstance(v, (list, tuple)):
        return [decode_literal(x) for x in v]
    if isinstance(v, (dict, AttrMap)):
        return _plain(v)
    return v


def _plain(v: Any) -> Any:
    from engine.ir.node import AttrMap
    if isinstance(v, (dict, AttrMap)):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def register(cls: type) -> type:
    """Class decorator: register a Primitive subclass and install its Schedule method."""
    prim = cls()
    if not prim.kind or not prim.method:
        raise TypeError(f"{cls.__name__} must define kind and method")
    if prim.kind in REGISTRY and type(REGISTRY[prim.kind]) is not cls:
        raise TypeError(f"instruction kind {prim.kind!r} is registered twice")
    REGISTRY[prim.kind] = prim
    for a in prim.aliases:
        REGISTRY[a] = prim
    BY_METHOD[prim.method] = prim
    for sch_cls in _SCHEDULE_CLASS:
        _install(sch_cls, prim)
    return cls


#: parameters that take a block: as in TVM, a block may be given by its name there
#: (``sch.cache_read("B", 0, "local")``, ``sch.get_loops("matmul")``): the schedule looks it
#: up first (a GetBlock step in the trace, as TVM records it)
BLOCK_PARAMS = frozenset({"block", "block_or_loop", "target", "scope_block", "consumer_blocks"})


def _names_to_blocks(sch: Any, sig: inspect.Signature | None, args: tuple, kwargs: dict):
    """``args``/``kwargs`` with every block name given for a block parameter looked up."""
    if sig is None or not any(isinstance(a, (str, list, tuple))
                              for a in (*args, *kwargs.values())):
        return args, kwargs
    try:
        bound = sig.bind_partial(sch, *args, **kwargs)
    except TypeError:
        return args, kwargs          # the call itself says what is wrong
    changed = False
    for name in BLOCK_PARAMS & bound.arguments.keys():
        value = bound.arguments[name]
        if isinstance(value, str):
            bound.arguments[name] = sch.get_block(value)
            changed = True
        elif isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
            bound.arguments[name] = [sch.get_block(v) if isinstance(v, str) else v
                                     for v in value]
            changed = True
    if not changed:
        return args, kwargs
    return bound.args[1:], bound.kwargs


def _install(sch_cls: type, prim: Primitive) -> None:
    call = prim.call
    try:
        call_sig: inspect.Signature | None = inspect.signature(call)
        if not BLOCK_PARAMS & set(call_sig.parameters):
            call_sig = None
    except (TypeError, ValueError):  # pragma: no cover
        call_sig = None

    def method(self, *args, **kwargs):
        args, kwargs = _names_to_blocks(self, call_sig, args, kwargs)
        return call(self, *args, **kwargs)

    method.__name__ = prim.method
    method.__qualname__ = f"{sch_cls.__name__}.{prim.method}"
    method.__doc__ = call.__doc__
    try:
        sig = inspect.signature(call)
        params = list(sig.parameters.values())
        if params:
            params[0] = params[0].replace(name="self")
        method.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # pragma: no cover
        pass
    setattr(sch_cls, prim.method, method)


def install_all(sch_cls: type) -> None:
    if sch_cls not in _SCHEDULE_CLASS:
        _SCHEDULE_CLASS.append(sch_cls)
    for prim in BY_METHOD.values():
        _install(sch_cls, prim)


def lookup_kind(kind: str) -> Primitive | None:
    return REGISTRY.get(kind)


