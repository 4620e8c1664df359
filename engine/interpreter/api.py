"""The interpreter's entry points: :func:`interpret`, :func:`compile_func` (cached per
PrimFunc) and :class:`CompiledFunc`, which checks the arrays it is called with against the
function's parameters and runs the compiled closures on them."""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir.function import IRModule, PrimFunc

from .errors import ArgumentError, InterpretError
from .stmts import StmtCompiler
from engine.ir.dtype import is_int

from .values import int_limits, np_dtype, scalar_caster


class CompiledFunc:
    """A PrimFunc compiled for the interpreter: call it with numpy arrays."""

    def __init__(self, func: PrimFunc, vectorize: bool = True):
        from engine.ir.views import inline_views
        func = inline_views(func)   # T.match_buffer views: accesses of what they view
        comp = StmtCompiler(func, vectorize)
        self.vectorize = vectorize
        self.name = func.name
        self.params = func.params
        # scalar parameters (Vars) take the value passed in their place, bound first: a
        # buffer's shape may use one (it is then checked, not bound)
        self._scalar = [isinstance(p, E.Var) for p in func.params]
        self._param_slots = [comp.bind(p) if isinstance(p, E.Var) else None
                             for p in func.params]
        self._param_slots = [slot if slot is not None else comp.bind_buffer(p)
                             for slot, p in zip(self._param_slots, func.params)]
        self._casts = [scalar_caster(p.dtype) if isinstance(p, E.Var) else None
                       for p in func.params]
        buffers = [(p_i, p) for p_i, p in enumerate(func.params) if not isinstance(p, E.Var)]
        # shape variables of the parameters are bound from the arrays' shapes (first use);
        # every other dimension is an expression checked against the array
        self._shape_binds: list[tuple[int, int, int]] = []  # (param, dim, slot)
        self._slot_vars: dict = {}   # slot -> the size variable bound there
        for p_i, buf in buffers:
            for d, s in enumerate(buf.shape):
                if isinstance(s, E.Var) and id(s) not in comp.scope:
                    slot = comp.bind(s)
                    self._shape_binds.append((p_i, d, slot))
                    self._slot_vars[slot] = s
        self._shape_fns = [None if isinstance(p, E.Var) else [comp.expr(s) for s in p.shape]
                           for p in func.params]
        self._body = comp.stmt(func.body)
        self.bands = comp.nbands  # how many loop nests run as numpy operations
        self._nslots = comp.nslots
        self._stored = [id(b) in comp.stored for b in func.params]
        self._dtypes = [np_dtype(b.dtype) for b in func.params]
        self._flat = [not isinstance(b, E.Var) and (bool(b.strides) or bool(b.elem_offset))
                      for b in func.params]

    def __repr__(self) -> str:
        return f"<interpreted {self.name}({', '.join(b.name for b in self.params)})>"

    def _scalar_value(self, p_i: int, var: E.Var, value: Any) -> Any:
        """The value of scalar parameter ``var`` passed as ``value`` (a Python or numpy
        number its dtype holds), as the interpreter holds it."""
        where = f"argument {p_i} (scalar {var.name!r}) of {self.name}"
        dt = var.dtype
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if dt == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ArgumentError(f"{where} must be a bool (True or False), got "
                                    f"{type(value).__name__}")
        elif is_int(dt):
            if isinstance(value, (bool, np.bool_)) or \
                    not isinstance(value, (int, np.integer)):
                raise ArgumentError(f"{where} must be an integer ({dt}), got "
                                    f"{type(value).__name__} {value!r}")
            lo, hi, _, _ = int_limits(dt)
            if not lo <= int(value) <= hi:
                raise ArgumentError(f"{where} must be an integer that {dt} holds ({lo} to "
                                    f"{hi}), got {int(value)}")
            value = int(value)
        elif isinstance(value, (bool, np.bool_)) or \
                not isinstance(value, (int, float, np.integer, np.floating)):
            raise ArgumentError(f"{where} must be a number ({dt}), got "
                                f"{type(value).__name__} {value!r}")
        return self._casts[p_i](value)

    def _prepare(self, arrays: tuple, env: list) -> None:
        params = self.params
        sig = ", ".join(b.name for b in params)
        if len(arrays) != len(params):
            what = "argument(s)" if any(self._scalar) else "array(s)"
            raise ArgumentError(f"{self.name} expects {len(params)} {what} ({sig}), "
                                f"got {len(arrays)}")
        for p_i, (buf, arr) in enumerate(zip(params, arrays)):
            if self._scalar[p_i]:
                env[self._param_slots[p_i]] = self._scalar_value(p_i, buf, arr)
                continue
            if not isinstance(arr, np.ndarray):
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must be a "
                                    f"numpy array, got {type(arr).__name__}")
            if arr.dtype != self._dtypes[p_i]:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"dtype {buf.dtype}, got {arr.dtype}")
            if self._stored[p_i] and not arr.flags.writeable:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} is written "
                                    "by the function but the array is read-only")
        bound_at: dict = {}
        for p_i, d, slot in self._shape_binds:
            arr = arrays[p_i]
            if d < arr.ndim and env[slot] is None:
                env[slot] = int(arr.shape[d])
                bound_at[slot] = (p_i, d)
        for p_i, (buf, arr) in enumerate(zip(params, arrays)):
            if self._scalar[p_i]:
                continue
            try:
                expected = tuple(int(f(env)) for f in self._shape_fns[p_i])
            except TypeError:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"{len(buf.shape)} dimension(s), got shape "
                                    f"{arr.shape}") from None
            if self._flat[p_i]:
                if not arr.flags.c_contiguous:
                    raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must be "
                                        "C-contiguous (its buffer has explicit strides)")
                env[self._param_slots[p_i]] = arr.reshape(-1)
                continue
            if arr.shape != expected:
                if len(expected) == 1 and arr.size == expected[0] and arr.flags.c_contiguous:
                    env[self._param_slots[p_i]] = arr.reshape(-1)  # a flattened buffer
                    continue
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"shape {expected}, got {arr.shape}"
                                    f"{self._size_origin(buf, arr, expected, bound_at)}")
            env[self._param_slots[p_i]] = arr

    def _size_origin(self, buf, arr: np.ndarray, expected: tuple, bound_at: dict) -> str:
        """Where the size that ``arr`` disagrees with came from (another array), as words."""
        for d, (want, dim) in enumerate(zip(expected, buf.shape)):
            if d < arr.ndim and arr.shape[d] != want and isinstance(dim, E.Var):
                for slot, (q, qd) in bound_at.items():
                    if self._slot_vars.get(slot) is dim:
                        return (f" (its size {dim.name} is {want}, from axis {qd} of argument "
                                f"{q} ({self.params[q].name}))")
        return ""

    def __call__(self, *arrays: np.ndarray) -> None:
        env: list = [None] * self._nslots
        self._prepare(arrays, env)
        with np.errstate(all="ignore"):
            try:
                self._body(env)
            except InterpretError:
                raise
            except RecursionError:
                raise InterpretError(f"{self.name}: the program is nested too deeply for "
                                     "the interpreter") from None
            except Exception as exc:  # noqa: BLE001 - reported as an interpreter error
                raise InterpretError(f"{self.name}: execution failed: "
                                     f"{type(exc).__name__}: {exc}") from exc


_CACHE: "weakref.WeakKeyDictionary[PrimFunc, dict]" = weakref.WeakKeyDictionary()


def compile_func(func: PrimFunc, vectorize: bool = True) -> CompiledFunc:
    """Compile ``func`` for the interpreter (cached per PrimFunc object).

    With ``vectorize`` (the default) innermost loop nests whose iterations are independent
    (or form a +/max/min reduction) run as numpy operations; the result is the same as
    running them one iteration at a time (``vectorize=False``), only faster.
    """
    if not isinstance(func, PrimFunc):
        raise ArgumentError(f"expected a PrimFunc, got {type(func).__name__}")
    per_func = _CACHE.get(func)
    if per_func is None:
        per_func = _CACHE[func] = {}
    cf = per_func.get(bool(vectorize))
    if cf is None:
        cf = per_func[bool(vectorize)] = CompiledFunc(func, bool(vectorize))
    return cf


def interpret(mod_or_func: IRModule | PrimFunc, func_name: Any = None,
              *arrays: np.ndarray, vectorize: bool = True) -> None:
    """Run ``mod_or_func[func_name]`` on numpy ``arrays`` (outputs are filled in place).

    ``mod_or_func`` may be an :class:`IRModule` (``func_name`` names the function; it may be
    omitted when the module has one function) or a :class:`PrimFunc` (``func_name`` is then
    optional).  Arrays must match the parameters' count, dtype and shape
    (:class:`ArgumentError` otherwise).  ``vectorize=False`` runs every loop iteration by
    iteration (slower; the results are the same).
    """
    if isinstance(func_name, np.ndarray):
        arrays = (func_name,) + arrays
        func_name = None
    if isinstance(mod_or_func, PrimFunc):
        func = mod_or_func
        if func_name is not None and func_name != func.name:
            raise ArgumentError(f"the PrimFunc is named {func.name!r}, not {func_name!r}")
    elif isinstance(mod_or_func, IRModule):
        if func_name is None:
            names = mod_or_func.prim_func_names()
            if len(names) != 1:
                raise ArgumentError(f"the module has {len(names)} functions "
                                    f"({', '.join(names)}); say which one to run")
            func_name = names[0]
        if func_name not in mod_or_func:
            raise ArgumentError(f"no function named {func_name!r} in the module (it has: "
                                f"{', '.join(mod_or_func.names())})")
        func = mod_or_func[func_name]
        if not isinstance(func, PrimFunc):
            raise ArgumentError(f"{func_name!r} is a Relax function; run a model with "
                                "engine.relax.VirtualMachine(engine.relax.build(mod))")
    else:
        raise ArgumentError(f"interpret() needs an IRModule or a PrimFunc, got "
                            f"{type(mod_or_func).__name__}")
    compile_func(func, vectorize)(*arrays)
