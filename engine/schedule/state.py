"""The :class:`Schedule`: an immutable IRModule replaced wholesale by each primitive,
plus handles (``BlockRV``/``LoopRV``) that stay valid across later primitives.

Handles and identity
--------------------
A handle is a small object; the schedule's *symbol table* maps it to a stable key:

* a loop handle -> ``("loop", func_name, loop_var)`` — primitives keep a loop's ``Var``
  when they move or rebuild it, so the handle follows the loop;
* a block handle -> ``("block", func_name, block_name)`` — block names are unique in a
  function; a primitive that renames a block reports it (``Result.renames``).

After every primitive the table is checked against the new function: handles whose key
disappeared are moved to a *dead* table with a plain explanation ("it was split by step
3; use the new loops j_0, j_1"), which is what a later use of them raises.
:meth:`Schedule.get` returns the handle's current ``For``/``Block`` node.

A refused primitive raises :class:`ScheduleError` before anything is committed: the
module (``sch.mod``, same object), the handles and the trace are all unchanged.

Sampling (TVM's ``sample_perfect_tile`` / ``sample_categorical`` /
``sample_compute_location``) gives *random variables* of two more kinds: an
:class:`ExprRV` (a sampled integer, key ``("expr", func_name, value)``, usable wherever a
primitive takes an integer: split factors, annotation values) and a LoopRV of one of
TVM's special locations (key ``("mark", func_name, "root" | "inline")``). Each schedule
has its own random generator (``Schedule(mod, seed=...)``, :meth:`Schedule.seed`,
:meth:`Schedule.fork_seed`); what a sampling instruction decided is recorded in the
trace (``trace.decisions``), and replaying the trace applies it.
"""
from __future__ import annotations

import itertools
import random
import secrets
from typing import Any

from engine.ir import IRModule, PrimFunc, display
from engine.ir.function import GlobalVar
from engine.ir.stmt import Block, For

from . import registry
from .error import ScheduleError, UnknownHandleError
from .instruction import Instruction, norm_workload
from .recorded_trace import Trace
from .registry import MARKS, Ctx, LocationMark, Primitive
from .tree import FuncIndex
from .work_budget import current_budget

_uid = itertools.count()


class _RV:
    __slots__ = ("_uid", "_name")
    kind = "?"

    def __init__(self, name: str = ""):
        self._uid = next(_uid)
        self._name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name})"

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def same_as(self, other: object) -> bool:
        """Whether ``other`` is this very handle (TVM's ``same_as``)."""
        return self is other


class BlockRV(_RV):
    """A handle to a block of a schedule (valid across later primitives)."""

    __slots__ = ()
    kind = "block"


class LoopRV(_RV):
    """A handle to a loop of a schedule (valid until the loop is split/fused away)."""

    __slots__ = ()
    kind = "loop"


class ExprRV(_RV):
    """A sampled integer of a schedule (TVM's ExprRV): pass it wherever a primitive takes
    an integer (``sch.split(j, factors=[v0, v1])``); ``sch.get(v)`` is its value."""

    __slots__ = ()
    kind = "expr"


_SEED_LIMIT = 2 ** 31 - 1  # seeds are in [0, 2**31 - 1), as TVM's random engine's states


def _normal_seed(seed: Any) -> int:
    """``seed`` as a generator state; None or -1 draw one from the system's source."""
    if seed is None or (isinstance(seed, int) and not isinstance(seed, bool) and seed == -1):
        return secrets.randbelow(_SEED_LIMIT)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an integer (or None / -1 for a random one), got "
                        f"{type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer (or -1 for a random one), "
                         f"got {seed}")
    return seed % _SEED_LIMIT


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, PrimFunc):
        return IRModule.from_funcs(mod)
    raise TypeError(f"Schedule needs an IRModule or a PrimFunc, got {type(mod).__name__}; "
                    "build one with engine.workloads.get(...) or engine.parse(...)")


class Schedule:
    """A schedule over an IRModule, mirroring ``tvm.tir.Schedule``.

    ``Schedule(mod, workload=("mm_relu", {"n": 128}))`` — ``workload`` is optional
    metadata recorded in the trace (used when replaying a shared trace). ``seed`` seeds
    the schedule's random generator (the sampling primitives): the same seed and the same
    calls give the same decisions; without one (or with -1) a seed is drawn from the
    system's random source.
    Without ``workload``, a module from ``engine.workloads.get`` gives its own
    (``mod.workload``).
    """

    def __init__(self, mod: Any, workload: Any = None, *, func_name: str | None = None,
                 seed: int | None = None):
        self._mod: IRModule = _as_module(mod)
        self._orig_mod: IRModule = self._mod
        self.workload = norm_workload(workload if workload is not None
                                      else getattr(mod, "workload", None))
        self._default_func = func_name
        if func_name is not None and func_name not in self._mod:
            raise ScheduleError("Schedule", f"function {func_name}",
                                "the module has no function of that name",
                                f"use one of {', '.join(self._mod.names())}")
        if func_name is not None and not isinstance(self._mod[func_name], PrimFunc):
            raise ScheduleError("Schedule", f"function {func_name}",
                                "it is a Relax function; a schedule transforms TensorIR "
                                "functions",
                                f"use one of {', '.join(self._mod.prim_func_names())}")
        self._symbols: dict[_RV, tuple] = {}
        self._names: dict[_RV, str] = {}
        self._dead: dict[_RV, tuple[str, str, str]] = {}
        self._insts: list = []
        self._decisions: dict[int, Any] = {}   # instruction index -> decision
        self._counter = 0
        self._index_cache: dict[int, tuple[PrimFunc, FuncIndex]] = {}
        self._rng = random.Random(_normal_seed(seed))

    # ------------------------------------------------------------------ state
    @property
    def mod(self) -> IRModule:
        """The current IRModule (a new object after each successful primitive)."""
        return self._mod

    @property
    def original_mod(self) -> IRModule:
        return self._orig_mod

    @property
    def trace(self):
        """The instructions applied so far, as a :class:`~engine.schedule.trace.Trace`."""
        return Trace(list(self._insts), workload=self.workload, decisions=self._decisions)

    @property
    def func_name(self) -> str:
        """The function primitives act on by default (the only one, or the one given)."""
        return self._resolve_func_name(None, "Schedule")

    def _resolve_func_name(self, func_name: str | None, method: str) -> str:
        if func_name is not None:
            if not isinstance(func_name, str):
                raise ScheduleError(method, f"function {func_name!r}",
                                    "func_name must be a string", "")
            if func_name not in self._mod:
                raise ScheduleError(method, f"function {func_name}",
                                    "the module has no function of that name",
                                    f"use one of {', '.join(self._mod.names())}")
            if not isinstance(self._mod[func_name], PrimFunc):
                raise ScheduleError(method, f"function {func_name}",
                                    "it is a Relax function; a schedule transforms TensorIR "
                                    "functions",
                                    f"use one of {', '.join(self._mod.prim_func_names())}")
            return func_name
        if self._default_func is not None:
            return self._default_func
        names = self._mod.prim_func_names()
        if len(names) == 1:
            return names[0]
        raise ScheduleError(method, "the module",
                            f"it has several functions ({', '.join(names)}), and the schedule "
                            "does not know which function to be working on",
                            "pass func_name=..., or call sch.work_on(name) first")

    def work_on(self, func_name: str) -> None:
        """Make ``func_name`` the default function (TVM's ``Schedule.work_on``)."""
        self._default_func = self._resolve_func_name(func_name, "work_on")

    def get_sblock(self, name: str, func_name: str | None = None) -> "BlockRV":
        """TVM 0.27's name for :meth:`get_block` (so pasted 0.27 code runs)."""
        return self.get_block(name, func_name)  # type: ignore[attr-defined]

    def can_decompose_padding(self, block: "BlockRV", loop: "LoopRV") -> bool:
        """Whether ``decompose_padding(block, loop)`` would apply (TVM's
        ``can_decompose_padding``: a question, recorded in no trace, changing nothing)."""
        trial = self.copy()
        try:
            trial._run(registry.BY_METHOD["decompose_padding"], [block, loop], [])
        except ScheduleError:
            return False
        return True

    def __repr__(self) -> str:
        wl = f" workload={self.workload[0]}" if self.workload else ""
        return f"<Schedule{wl} funcs={self._mod.names()} steps={len(self._insts)}>"

    def _repr_html_(self) -> str:
        """Jupyter rendering: the current program (highlighted), loop nest and trace."""
        return display.render("html", self)

    # ------------------------------------------------------------------ randomness
    def seed(self, seed: int) -> None:
        """Re-seed the schedule's random generator (TVM's ``Schedule.seed``): later
        sampling draws from the new seed; -1 draws a seed from the system's source."""
        self._rng.seed(_normal_seed(seed))

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's generator, which advances (TVM's
        ``Schedule.fork_seed``): give it to another schedule to sample independently but
        reproducibly."""
        return self._rng.randrange(1, _SEED_LIMIT)

    def copy(self) -> "Schedule":
        """An independent copy; handles of this schedule are valid in the copy too. As in
        TVM, the copy's random generator is seeded from this one's (:meth:`fork_seed`)."""
        new = self._clone()
        new._rng = random.Random(self.fork_seed())
        return new

    def duplicate(self) -> "Schedule":
        """An exact copy: the same handles, and its random generator continues from the same
        state, so the copy goes on exactly as this schedule would (whereas :meth:`copy`
        gives the copy a seed forked from this one's, as TVM does). A schedule replayed once
        can be kept and duplicated for each later use instead of being replayed again."""
        return self._clone()

    def _clone(self) -> "Schedule":
        """A copy that also continues this one's random generator from the same state
        (replays work on one and commit it back)."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)  # a subclass's settings too; the tables below
        new._mod = self._mod
        new._orig_mod = self._orig_mod
        new.workload = self.workload
        new._default_func = self._default_func
        new._symbols = dict(self._symbols)
        new._names = dict(self._names)
        new._dead = dict(self._dead)
        new._insts = list(self._insts)
        new._decisions = dict(self._decisions)
        new._counter = self._counter
        new._index_cache = dict(self._index_cache)
        new._rng = random.Random()
        new._rng.setstate(self._rng.getstate())
        return new

    def _assign_from(self, other: "Schedule") -> None:
        """Take over ``other``'s state (used to commit a replay done on a copy)."""
        for k in ("_mod", "_orig_mod", "workload", "_default_func", "_symbols", "_names",
                  "_dead", "_insts", "_decisions", "_counter", "_index_cache", "_rng"):
            setattr(self, k, getattr(other, k))

    def index(self, func_name: str | None = None) -> FuncIndex:
        """The (cached) :class:`FuncIndex` of a function of the current module."""
        fn = self._resolve_func_name(func_name, "index")
        return self._index_of(self._mod[fn])

    def _index_of(self, func: PrimFunc) -> FuncIndex:
        hit = self._index_cache.get(id(func))
        if hit is not None and hit[0] is func:
            return hit[1]
        idx = FuncIndex(func)
        if len(self._index_cache) > 8:
            self._index_cache.clear()
        self._index_cache[id(func)] = (func, idx)
        return idx

    # ------------------------------------------------------------------ handles
    def rv_name(self, rv: _RV) -> str:
        """The trace name (``b0``, ``l1``, ...) of a handle of this schedule."""
        name = self._names.get(rv)
        if name is None:
            raise ScheduleError("rv_name", repr(rv), "this handle belongs to another schedule",
                                "get it again from this schedule with get_block/get_loops")
        return name

    def _new_rv(self, cls: type, key: tuple) -> _RV:
        prefix = {BlockRV: "b", LoopRV: "l", ExprRV: "v"}[cls]
        name = f"{prefix}{self._counter}"
        self._counter += 1
        rv = cls(name)
        self._symbols[rv] = key
        self._names[rv] = name
        return rv

    def _describe(self, rv: _RV) -> str:
        key = self._symbols.get(rv)
        if key is None:
            dead = self._dead.get(rv)
            return dead[2] if dead else f"{rv.kind} {rv!r}"
        if key[0] == "expr":
            return f"sampled value {self._names[rv]}"
        if key[0] == "mark":
            return repr(MARKS[key[2]])
        return f"{key[0]} {key[2] if key[0] == 'block' else key[2].name}"

    def _lookup(self, rv: Any, method: str) -> tuple[str, Any]:
        """(func_name, current node) of a handle; ScheduleError if stale or foreign."""
        if not isinstance(rv, _RV) or isinstance(rv, ExprRV):
            raise ScheduleError(method, repr(rv), "expected a block or loop handle "
                                f"(BlockRV/LoopRV), got {type(rv).__name__}",
                                "get handles with sch.get_block(...) and sch.get_loops(...)")
        key = self._symbols.get(rv)
        if key is None:
            dead = self._dead.get(rv)
            if dead is not None:
                rule, hint, subject = dead[:3]
                cls = dead[3] if len(dead) > 3 else ScheduleError
                raise cls(method, subject, rule, hint, highlight=[subject.split(" ", 1)[-1]])
            raise UnknownHandleError(method, f"{rv.kind} handle", "this handle belongs to "
                                     "another schedule", "get it again from this schedule "
                                     "with get_block/get_loops")
        kind, fn, k = key
        if kind == "mark":
            return fn, MARKS[k]
        if fn not in self._mod:
            raise ScheduleError(method, f"{kind} handle", f"its function {fn} no longer "
                                "exists in the module", "")
        idx = self._index_of(self._mod[fn])
        if kind == "loop":
            node = idx.loops.get(k)
        else:
            bs = idx.blocks.get(k)
            node = bs[0] if bs else None
        if node is None:  # defensive: deaths are recorded eagerly
            raise ScheduleError(method, self._describe(rv), "this handle no longer exists",
                                "get the blocks and loops again with get_block/get_loops")
        return fn, node

    def get(self, rv: Any) -> Any:
        """The current IR node of a handle: a ``For`` for a LoopRV, a ``Block`` for a BlockRV,
        the integer an ExprRV was sampled as (None for a LoopRV of the root or inline
        location, as TVM)."""
        if isinstance(rv, ExprRV):
            return self._value_of(rv, "get")
        node = self._lookup(rv, "get")[1]
        return None if isinstance(node, LocationMark) else node

    def _value_of(self, rv: "ExprRV", method: str) -> int:
        key = self._symbols.get(rv)
        if key is None:
            dead = self._dead.get(rv)
            if dead is not None:
                raise UnknownHandleError(method, dead[2], dead[0], dead[1])
            raise UnknownHandleError(method, f"sampled value {rv!r}", "this value belongs to "
                                     "another schedule", "sample it again on this schedule")
        return key[2]

    def is_alive(self, rv: Any) -> bool:
        return rv in self._symbols

    def remove_rv(self, rv: Any) -> None:
        """Forget a handle (TVM's ``Schedule.remove_rv``): the block, loop or sampled value
        stays in the program and in the trace, but this handle no longer refers to it —
        using it again raises an :class:`UnknownHandleError` (an ``IndexError``, as TVM's)
        saying so. Not a step of the trace (TVM records none either).

        Before::

            b = sch.get_block("C")
            sch.get(b)             # the block C

        After ``sch.remove_rv(b)``::

            sch.get(b)             # UnknownHandleError: ... removed with remove_rv
            b = sch.get_block("C") # a new handle of the same block
        """
        if not isinstance(rv, _RV):
            raise ScheduleError("remove_rv", repr(rv), "expected a handle (BlockRV, LoopRV or "
                                f"ExprRV), got {type(rv).__name__}", "")
        if rv not in self._symbols:  # removed, dead, or another schedule's: say which
            if isinstance(rv, ExprRV):
                self._value_of(rv, "remove_rv")
            self._lookup(rv, "remove_rv")
        subject = self._describe(rv)
        symbols = dict(self._symbols)
        del symbols[rv]
        self._symbols = symbols
        self._dead = {**self._dead, rv: (
            f"this handle ({self._names.get(rv, rv)}) was removed from the schedule with "
            "remove_rv", "get the block or loop again with get_block/get_loops, or sample "
            "again", subject, UnknownHandleError)}

    @property
    def func_working_on(self) -> GlobalVar | None:
        """The function primitives act on when not told (TVM's ``func_working_on``): set by
        ``work_on`` or ``func_name=``, else the module's only function; None when the module
        has several and none was chosen."""
        name = self._default_func
        if name is None:
            names = self._mod.prim_func_names()
            name = names[0] if len(names) == 1 else None
        return None if name is None else self._mod.get_global_var(name)

    def handles(self) -> dict:
        """Live handles: {name: (kind, func_name, loop var name or block name)}."""
        out = {}
        for rv, (kind, fn, k) in self._symbols.items():
            out[self._names[rv]] = (kind, fn, k if kind == "block" else k.name)
        return out

    # ------------------------------------------------------------------ core
    def _run(self, prim: Primitive, inputs: list, attrs: list, decision: Any = None) -> list:
        """Apply ``prim`` to trace-form inputs/attrs (and, for a sampling instruction, the
        decision to replay, None to sample); commit and record on success."""
        method = prim.method
        for a in attrs:
            if isinstance(a, _RV) or (isinstance(a, (list, tuple)) and
                                      any(isinstance(y, _RV) for y in a)):
                raise ScheduleError(method, self._describe(a) if isinstance(a, _RV) else
                                    "an argument", "this argument must be a plain value, "
                                    "not a handle or a sampled value", "sampled values "
                                    "(ExprRV) can be split factors and annotation values")
        # steps are numbered as the UI shows them: transformations and sampling
        # instructions, queries not counted
        step = 1 + sum(1 for i in self._insts if _is_step(registry.REGISTRY.get(i.kind)))
        func_name = None
        if prim.func_name_attr is not None and prim.func_name_attr < len(attrs):
            func_name = self._resolve_func_name(attrs[prim.func_name_attr], method)
        resolved = []
        for x in inputs:
            if isinstance(x, (list, tuple)) and any(isinstance(y, _RV) for y in x):
                items = []
                for y in x:  # a list of handles (cache_read's consumer_blocks)
                    if not isinstance(y, _RV):
                        raise ScheduleError(method, repr(y), "a list of blocks must hold only "
                                            "block handles", "get them with sch.get_block(...)")
                    fn, node = self._lookup(y, method)
                    if func_name is None:
                        func_name = fn
                    elif fn != func_name:
                        raise ScheduleError(method, self._describe(y), "all handles given to "
                                            "one primitive must be in the same function "
                                            f"({func_name})", "")
                    items.append(node)
                resolved.append(items)
            elif isinstance(x, ExprRV):
                resolved.append(self._value_of(x, method))
            elif isinstance(x, _RV):
                fn, node = self._lookup(x, method)
                if func_name is None:
                    func_name = fn
                elif fn != func_name:
                    raise ScheduleError(method, self._describe(x), "all handles given to one "
                                        f"primitive must be in the same function ({func_name})",
                                        "")
                resolved.append(node)
            else:
                resolved.append(x)
        if func_name is None:
            if prim.needs_function or self._default_func is not None or \
                    len(self._mod.names()) == 1:
                func_name = self._resolve_func_name(None, method)
            else:
                func_name = self._mod.names()[0]
        func = self._mod[func_name]
        ctx = Ctx(self._mod, func_name, func, self._index_of(func), step, method,
                  rng=self._rng, decision=decision)
        budget = current_budget()
        if budget is not None:
            budget.check_time(method)
        if prim.mutates and prim.kind not in _ANY_AXES:
            _refuse_unordered_axes(ctx, method, resolved)
        result = prim.apply(ctx, resolved, list(attrs))
        new_func = result.func if result.func is not None else func
        if budget is not None:
            budget.check_time(method)
            if new_func is not func:
                budget.check_size(method, new_func)

        # ---- commit (nothing above may have changed self)
        new_mod = self._mod
        if new_func is not func:
            new_mod = self._mod.with_function(func_name, new_func)
        new_idx = self._index_of(new_func)
        if new_func is not func:
            _refuse_lost_views(method, ctx.index, new_idx)
        renames = dict(result.renames)
        out_rvs: list[_RV] = []
        pending: list[tuple[type, tuple]] = []
        for node in result.outputs:
            if (isinstance(node, int) and not isinstance(node, bool)) or node is None:
                # a sampled integer; None: a factor left to infer (a tile of a loop of
                # symbolic extent, TVM's -1)
                pending.append((ExprRV, ("expr", func_name, node)))
            elif isinstance(node, LocationMark):
                pending.append((LoopRV, ("mark", func_name, node.name)))
            elif isinstance(node, For):
                if node.loop_var not in new_idx.loops:
                    raise AssertionError(f"{prim.kind} returned a loop not in the new function")
                pending.append((LoopRV, ("loop", func_name, node.loop_var)))
            elif isinstance(node, Block):
                if node.name_hint not in new_idx.blocks:
                    raise AssertionError(f"{prim.kind} returned a block not in the new function")
                pending.append((BlockRV, ("block", func_name, node.name_hint)))
            else:
                raise AssertionError(f"{prim.kind} returned a non-loop/block output {node!r}")
        # renames and deaths of existing handles
        symbols = dict(self._symbols)
        dead = dict(self._dead)
        if new_func is not func:
            for rv, (kind, fn, k) in list(symbols.items()):
                if fn != func_name or kind not in ("loop", "block"):
                    continue
                if kind == "block" and k in renames:
                    k = renames[k]
                    symbols[rv] = (kind, fn, k)
                alive = (k in new_idx.loops) if kind == "loop" else (k in new_idx.blocks)
                if not alive:
                    del symbols[rv]
                    dead[rv] = self._death_note(prim, kind, k, step, result.outputs)
        self._mod = new_mod
        self._symbols = symbols
        self._dead = dead
        for cls, key in pending:
            out_rvs.append(self._new_rv(cls, key))
        enc_inputs = [registry.encode_literal(x) if pos in prim.literal_inputs and
                      not isinstance(x, _RV)
                      else self._names[x] if isinstance(x, _RV)
                      else (registry.quote(x) if isinstance(x, str) else
                            (tuple(self._names[y] if isinstance(y, _RV) else y for y in x)
                             if isinstance(x, (list, tuple))
                             else x)) for pos, x in enumerate(inputs)]
        if prim.has_decision:
            self._decisions[len(self._insts)] = result.decision
        self._insts.append(Instruction(prim.kind, tuple(enc_inputs), tuple(_frozen(attrs)),
                                       tuple(self._names[r] for r in out_rvs)))
        return out_rvs

    @staticmethod
    def _death_note(prim: Primitive, kind: str, key: Any, step: int, outputs: list):
        if kind == "loop":
            subject = f"loop {key.name}"
            verb = prim.death_verb or f"removed by {prim.method} at"
            rule = f"this loop handle no longer exists (it was {verb} by step {step})" \
                if prim.death_verb else f"this loop handle no longer exists (it was {verb} " \
                f"step {step})"
            new_loops = [o.loop_var.name for o in outputs if isinstance(o, For)]
            if new_loops:
                word = "loop" if len(new_loops) == 1 else "loops"
                hint = f"use the new {word} {', '.join(new_loops)}"
            else:
                hint = "get the current loops again with get_loops"
            return rule, hint, subject
        subject = f"block {key}"
        rule = (f"this block handle no longer exists (it was removed by {prim.method} at "
                f"step {step})")
        return rule, "get the remaining blocks with get_block", subject


#: primitives that do not depend on what kind each block axis is
_ANY_AXES = frozenset({"Annotate", "Unannotate", "EnterPostproc", "RollingBuffer"})


def _refuse_unordered_axes(ctx: Ctx, method: str, resolved: list) -> None:
    """The schedule's primitives reason about spatial and reduction axes only: a block
    given (or under a loop given) with a scan or opaque axis is refused, as TVM refuses most
    primitives there (rolling_buffer marks its rolled axis opaque so that nothing else
    moves it)."""
    from engine.ir.stmt import IterType
    nodes = []
    for x in resolved:
        nodes.extend(x if isinstance(x, (list, tuple)) else [x])
    for node in nodes:
        if isinstance(node, Block):
            blocks = [node, *ctx.index.blocks_under(node)]
        elif isinstance(node, For):
            blocks = ctx.index.blocks_under(node)
        else:
            continue
        for b in blocks:
            odd = [iv for iv in b.iter_vars
                   if iv.iter_type not in (IterType.SPATIAL, IterType.REDUCE)]
            if odd:
                iv = odd[0]
                raise ScheduleError(method, f"block {b.name_hint}",
                                    f"its axis {iv.var.name} is {'an' if iv.iter_type.value[0] in 'aeiou' else 'a'} "
                                    f"{iv.iter_type.value} axis, "
                                    "and the schedule transforms blocks of spatial and "
                                    "reduction axes only", "", highlight=[b.name_hint])


def _unlisted_views(index: Any) -> dict:
    """``(block name, id(source)) -> (block, source)`` for every ``T.match_buffer`` view
    whose source buffer the block leaves out of its ``T.reads``/``T.writes``."""
    out = {}
    for b in index.all_blocks():
        if not b.match_buffers:
            continue
        listed = {id(r.buffer) for r in b.reads} | {id(w.buffer) for w in b.writes}
        for m in b.match_buffers:
            if id(m.source.buffer) not in listed:
                out[(b.name_hint, id(m.source.buffer))] = (b, m.source.buffer)
    return out


def _refuse_lost_views(method: str, old_index: Any, new_index: Any) -> None:
    """A block's ``T.match_buffer`` view is an access of its source that the block's
    regions declare (as TVM's region detection makes them). The primitives rewrite the
    accesses and regions they know of; one that left a view's source out of the regions
    of a block that declared it (a cache stage in its place: the view would still read
    or write the old buffer) changed what the block computes: refused."""
    if not any(b.match_buffers for b in new_index.all_blocks()):
        return
    before = _unlisted_views(old_index)
    for key, (b, src) in _unlisted_views(new_index).items():
        if key not in before:
            raise ScheduleError(method, f"block {b.name_hint}", f"block {b.name_hint} views a "
                                f"region of {src.name} (T.match_buffer), which {method} "
                                "leaves out of the block's T.reads/T.writes: the view would "
                                "still access the old buffer", f"apply {method} before the "
                                "regions are matched: it does not follow T.match_buffer "
                                "views", highlight=[b.name_hint])


def _is_step(prim: Any) -> bool:
    return prim is None or prim.mutates or prim.has_decision


def _frozen(v: Any) -> Any:
    """Lists inside recorded attributes become tuples (an Instruction is hashable)."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    return v


registry.install_all(Schedule)
from . import primitives  # noqa: E402,F401  (registers the primitives, installs methods)
