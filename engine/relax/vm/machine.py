"""``relax.build`` and ``relax.VirtualMachine``: a Relax module compiled and run.

::

    ex = engine.relax.build(mod, target="llvm")   # checks, TensorIR via engine.build,
                                                  # each Relax function to a Program
    vm = engine.relax.VirtualMachine(ex, engine.cpu())
    out = vm["main"](x, w0, b0, w1, b1)           # numpy arrays / NDArrays in, NDArray out

The machine runs a :class:`~.program.Program` instruction by instruction: TensorIR
functions are the compiled kernels of :mod:`engine.runtime` (called on the arrays, no copy),
``"env.*"`` names the functions registered with ``engine.register_func`` (looked up at each
call, so ``override=True`` takes effect at once), high-level operators their numpy meaning.
A packed name (``R.call_dps_packed("linear0", ...)``) that is the global symbol of one of the
module's TensorIR functions calls that function's kernel, as TVM's virtual machine finds
the name in the executable's own library before the registry.
Intermediate tensors live in one arena per function laid out by :mod:`.memory` and kept
between calls; the returned tensors are fresh arrays.

From a function's third call, a function of ``R.call_tir`` calls of constant shapes runs
as one native call (:mod:`.plan`): the user's arrays checked in compiled code, the returned
tensors allocated, the kernels called back to back. An argument that check does not accept
goes through the Python checks (which say what is wrong, or convert it); any other function
keeps the instruction loop below.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from engine.ir.function import IRModule, PrimFunc
from engine.lower.errors import BuildError
from engine.nd import NDArray, check_device
from engine.runtime import ArgumentError, aligned_empty
from engine.runtime import build as build_tir
from engine.runtime.module import data_pointer
from engine.runtime.packed import get_global_func, missing_message

from .. import expr as X
from ..struct_info import TensorStructInfo, TupleStructInfo, shape_text
from .checks import check_module
from .memory import plan_memory
from .plan import (ALIGN_FROM_BYTES, COMPILE_AT_CALL, NEEDS_FULL_CHECK, NativePlan,
                   native_plan, plans_enabled)
from .program import Program, compile_function


class VMError(RuntimeError):
    """A call the virtual machine could not make (an unregistered function, a registered
    function that failed)."""


class Executable:
    """What :func:`build` makes: the module, the compiled TensorIR kernels and one
    :class:`Program` (with its memory plan) per Relax function."""

    def __init__(self, mod: IRModule, kernels: Any, programs: dict):
        self.mod = mod
        self.kernels = kernels
        self.programs = programs
        self._native: dict[str, NativePlan | str] = {}
        self._native_lock = threading.Lock()

    def function_names(self) -> list[str]:
        return list(self.programs)

    def memory_plan(self, func_name: str = "main") -> dict:
        """How ``func_name``'s intermediate tensors share storage: tensors, planned (in the
        arena), escaping (returned), blocks, arena_bytes, naive_bytes (one allocation per
        planned tensor)."""
        return self.programs[_known(self.programs, func_name)].plan.summary()

    def native_plan(self, func_name: str = "main") -> NativePlan | str:
        """``func_name`` compiled into one native call (:mod:`.plan`; compiled once, shared
        by the machines of this executable), or the sentence saying why it runs
        instruction by instruction."""
        name = _known(self.programs, func_name)
        with self._native_lock:
            got = self._native.get(name)
            if got is None:
                got = self._native[name] = native_plan(self.programs[name], self.kernels)
        return got

    def stats(self) -> str:
        lines = []
        for name, p in self.programs.items():
            s = p.plan.summary()
            lines.append(f"{name}: {len(p.instrs)} instructions, {s['tensors']} tensors "
                         f"({s['planned']} in {s['blocks']} storage blocks, "
                         f"{s['arena_bytes']} bytes instead of {s['naive_bytes']}; "
                         f"{s['escaping']} returned)")
        return "\n".join(lines)

    def export_library(self, path: Any, **options: Any) -> Any:
        """Write the executable — kernels, bound weights, each function's plan as a C entry
        point ``int <prefix>_<function>(inputs..., outputs...)`` — as a standalone shared
        library ``path`` with its C header ``<stem>.h`` (TVM's ``export_library``;
        :func:`engine.deploy.export_library`: ``prefix=``, ``target=``)."""
        from engine.ir import deployment
        return deployment.call("export", self, path, **options)

    def __repr__(self) -> str:
        return f"<engine.relax.Executable {', '.join(self.programs)}>"


def _known(programs: dict, name: str) -> str:
    if name not in programs:
        have = ", ".join(programs) or "none"
        raise KeyError(f"no Relax function named {name!r} (the module has: {have})")
    return name


def build(mod: Any, target: Any = "llvm", params: dict | None = None,
          **options: Any) -> Executable:
    """Compile a module with Relax functions for the virtual machine (``relax.build`` /
    the course's ``relax.vm.build``); ``options`` go to ``engine.build`` for the TensorIR
    functions; ``params`` binds weights of ``main`` first (``BindParams``). For an ARM board
    (``target="llvm -mtriple=aarch64-linux-gnu"``, ``"raspberry-pi-5"``) the kernels are
    the board's code: the executable is exported (``ex.export_library``), not run here."""
    if isinstance(mod, X.Function):
        mod = IRModule(((mod.name, mod),))
    if not isinstance(mod, IRModule):
        raise BuildError(f"relax.build expects an IRModule, got {type(mod).__name__}")
    target_name = target if isinstance(target, str) else getattr(target, "kind", target)
    target_name = getattr(target_name, "name", target_name)   # a Target's kind: "llvm"
    from engine.codegen.machine import NAMED_MACHINES
    if not isinstance(target_name, str) or not (target_name.split()[0:1] == ["llvm"]
                                                or target_name.strip() in NAMED_MACHINES):
        raise BuildError(f"unsupported target {target!r}; this engine compiles for \"llvm\" "
                         "(the host CPU) and, to export, for an ARM board "
                         "(\"llvm -mtriple=aarch64-linux-gnu\", \"raspberry-pi-5\")")
    if params:
        from ..transform import BindParams
        mod = BindParams("main", params)(mod)
    relax_funcs = [(n, f) for n, f in mod.functions if isinstance(f, X.Function)]
    if not relax_funcs:
        raise BuildError("the module has no Relax function; build TensorIR functions with "
                         "engine.build(mod, target=\"llvm\")")
    check_module(mod)
    prims = [(n, f) for n, f in mod.functions if isinstance(f, PrimFunc)]
    # for an ARM board the kernels are its object code (engine.runtime.cross): the
    # executable is exported (ex.export_library), its kernels are not called here
    kernels = build_tir(IRModule(tuple(prims)), target=target_name, **options) \
        if prims else None
    symbols = {_global_symbol(n, f): n for n, f in prims}
    programs = {}
    for name, f in relax_funcs:
        prog = compile_function(f, name)
        prog.instrs = [_own_kernel(ins, symbols) for ins in prog.instrs]
        prog.plan = plan_memory(prog)
        programs[name] = prog
    return Executable(mod, kernels, programs)


def _global_symbol(name: str, f: PrimFunc) -> str:
    return str(dict(f.attrs).get("global_symbol", name))


def _own_kernel(ins: tuple, symbols: dict) -> tuple:
    """A packed call of a name the module's TensorIR functions export (their global
    symbol) made a call of that kernel: the executable's library is searched before the
    registry, as in TVM."""
    if ins[0] == "packed" and ins[1] in symbols:
        return ("kernel", symbols[ins[1]], *ins[2:])
    return ins


class VirtualMachine:
    """Runs an :class:`Executable`: ``vm["main"](*arrays)`` (TVM's ``relax.VirtualMachine``;
    ``device`` is the CPU: ``engine.cpu()``, "cpu" or None)."""

    def __init__(self, exe: Executable, device: Any = None, memory_cfg: Any = None):
        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine needs the Executable of engine.relax.build, got "
                            f"{type(exe).__name__}")
        if isinstance(device, (list, tuple)):
            for d in device:
                check_device(d)
        else:
            check_device(device)
        self.exe = exe
        self._arenas: dict[str, _Arena] = {}
        self._locks = {name: threading.Lock() for name in exe.programs}
        self._callers = {name: _Caller(self, prog) for name, prog in exe.programs.items()}

    @property
    def module(self) -> "VirtualMachine":
        """TVM's ``vm.module`` (the machine's runtime module):
        ``vm.module.time_evaluator("main", tvm.cpu(), number=100)``, ``vm.module["main"]``
        — the same calls as the machine's own."""
        return self

    def __getitem__(self, name: str) -> Any:
        return self._callers[_known(self.exe.programs, name)]

    def invoke(self, name: str, *args: Any) -> Any:
        """Run the Relax function ``name`` on ``args``; the result as NDArray(s)."""
        prog = self.exe.programs[_known(self.exe.programs, name)]
        return _to_user(self._run(prog, [_from_user(prog, i, a) for i, a in enumerate(args)],
                                  len(args)))

    def time_evaluator(self, func_name: str, device: Any = None, number: int = 10,
                       repeat: int = 3, min_repeat_ms: float = 0) -> Any:
        """A timer for ``func_name`` (TVM's ``vm.time_evaluator("main", dev, ...)``): the
        returned callable converts and checks its arguments once, runs once to warm up,
        then ``repeat`` times runs ``number`` calls back to back (``number`` grows until a
        repeat lasts ``min_repeat_ms``) and returns a ``TimingResult`` (seconds per call)."""
        import math
        import statistics
        import time

        from engine.runtime import TimingResult

        check_device(device)
        prog = self.exe.programs[_known(self.exe.programs, func_name)]
        if not isinstance(number, int) or number < 1 or not isinstance(repeat, int) or \
                repeat < 1:
            raise ValueError("number and repeat must be positive integers")

        def evaluator(*args: Any) -> Any:
            inputs = tuple(_from_user(prog, i, a) for i, a in enumerate(args))
            run = self._callers[prog.name]
            run(*inputs)
            n, results, perf = number, [], time.perf_counter
            for _ in range(repeat):
                while True:
                    t0 = perf()
                    for _ in range(n):
                        run(*inputs)
                    elapsed = perf() - t0
                    if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                        break
                    grow = (min_repeat_ms / 1e3) / max(elapsed, 1e-9)
                    n = max(n + 1, int(math.ceil(n * min(grow * 1.1, 100.0))))
                results.append(elapsed / n)
            return TimingResult(mean=statistics.fmean(results),
                                median=statistics.median(results), min=min(results),
                                max=max(results),
                                std=statistics.pstdev(results) if len(results) > 1 else 0.0,
                                results=tuple(results))
        return evaluator

    # ------------------------------------------------------------------ running
    def _arena(self, prog: Program) -> "_Arena":
        """The function's arena (made once, reused by every call that holds its lock)."""
        got = self._arenas.get(prog.name)
        if got is None:
            got = _new_arena(prog)
            self._arenas[prog.name] = got
        return got

    def _run(self, prog: Program, args: list, given: int) -> Any:
        if given != len(prog.params):
            names = ", ".join(p[2] for p in prog.params)
            raise ArgumentError(f"{prog.name} takes {len(prog.params)} argument(s) ({names}), "
                                f"got {given}")
        lock = self._locks[prog.name]
        if lock.acquire(blocking=False):
            try:
                return self._execute(prog, args, self._arena(prog).views)
            finally:
                lock.release()
        return self._execute(prog, args, _new_arena(prog).views)  # a concurrent call: its own

    def _execute(self, prog: Program, args: list, views: tuple) -> Any:
        regs: list = [None] * prog.num_regs
        sizes: dict = {}  # the symbolic sizes of this call: Var id -> int
        first: dict = {}  # Var id -> the argument that bound it (for messages)
        for i, ((reg, si, name), a) in enumerate(zip(prog.params, args)):
            regs[reg] = a
            _bind_sizes(prog, f"argument {i} ({name})", si, a, sizes, first)
        for reg, c in prog.consts.items():
            regs[reg] = c
        kernels = self.exe.kernels
        tokens = prog.tokens
        for ins in prog.instrs:
            kind = ins[0]
            if kind == "kernel" or kind == "packed":
                _, label, in_regs, outs, dst, is_tuple = ins
                arrays = [views[t] if views[t] is not None else
                          _fresh_tensor(tokens[t], sizes)
                          for t in outs]
                inputs = [regs[r] for r in in_regs]
                if kind == "kernel":
                    kernels[label](*inputs, *arrays)
                else:
                    _call_packed(label, inputs, arrays)
                regs[dst] = tuple(arrays) if is_tuple else arrays[0]
            elif kind == "move":
                regs[ins[2]] = regs[ins[1]]
            elif kind == "alloc":
                t = ins[1]
                regs[ins[2]] = views[t] if views[t] is not None else \
                    _fresh_tensor(tokens[t], sizes)
            elif kind == "op":
                _, opdef, in_regs, attrs, dst = ins
                regs[dst] = opdef.compute([regs[r] for r in in_regs], attrs)
            elif kind == "tuple":
                regs[ins[2]] = tuple(regs[r] for r in ins[1])
            elif kind == "get":
                regs[ins[3]] = regs[ins[1]][ins[2]]
            elif kind == "shape":
                regs[ins[2]] = ins[1]
            elif kind == "func":
                _, fname, in_regs, dst = ins
                callee = self.exe.programs[fname]
                regs[dst] = self._run(callee, [regs[r] for r in in_regs], len(in_regs))
        out = regs[prog.ret]
        return _fresh(out, prog.consts)


class _Arena:
    """A function's planned storage: the bytes, their address, a view per planned token
    (None for the others)."""

    __slots__ = ("array", "address", "views")

    def __init__(self, array: np.ndarray, views: tuple):
        self.array = array
        self.address = data_pointer(array)
        self.views = views


def _new_arena(prog: Program) -> _Arena:
    plan = prog.plan
    arena = aligned_empty((max(plan.arena_bytes, 1),), "uint8")
    views = []
    for spec, off in zip(prog.tokens, plan.offsets):
        if off is None:
            views.append(None)
        else:
            views.append(arena[off:off + spec.nbytes].view(spec.dtype).reshape(spec.shape))
    return _Arena(arena, tuple(views))


class _Caller:
    """``vm[name]``: runs the function through its compiled plan once it has one (from its
    :data:`~.plan.COMPILE_AT_CALL`-th call), else instruction by instruction."""

    def __init__(self, vm: "VirtualMachine", prog: Program):
        self.__name__ = prog.name
        self._vm = vm
        self._prog = prog
        self._lock = vm._locks[prog.name]
        self._native: NativePlan | None = None
        self._calls = 0 if plans_enabled() else -1   # -1: no plan is sought
        self._arena: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"<engine.relax.VirtualMachine function {self._prog.name}>"

    def __call__(self, *args: Any) -> Any:
        native = self._native
        if native is not None:
            lock = self._lock                     # _run_native, inlined: the common call
            if lock.acquire(blocking=False):
                try:
                    arena = self._arena
                    got = native.run(args, arena if arena is not None else self._own_arena())
                finally:
                    lock.release()
            else:
                got = native.run(args, _new_arena(self._prog).array)   # a concurrent call
            if got is not NEEDS_FULL_CHECK:
                return got
            prog = self._prog
            if len(args) == len(prog.params):      # the Python checks say what is wrong
                args = tuple(_from_user(prog, i, a) for i, a in enumerate(args))
                got = self._run_native(native, args)
                if got is not NEEDS_FULL_CHECK:
                    return got
        elif self._calls >= 0:
            self._calls += 1
            if self._calls >= COMPILE_AT_CALL:
                self._calls = -1
                plan = self._vm.exe.native_plan(self._prog.name)
                if isinstance(plan, NativePlan):
                    self._native = plan
        return self._vm.invoke(self._prog.name, *args)

    def _own_arena(self) -> np.ndarray:
        """The machine's arena of this function (made on the first planned call)."""
        self._arena = self._vm._arena(self._prog).array
        return self._arena

    def _run_native(self, native: NativePlan, args: tuple) -> Any:
        lock = self._lock
        if lock.acquire(blocking=False):
            try:
                arena = self._arena
                return native.run(args, arena if arena is not None else self._own_arena())
            finally:
                lock.release()
        return native.run(args, _new_arena(self._prog).array)   # a concurrent call: its own


def _fresh_tensor(spec: Any, sizes: dict) -> np.ndarray:
    """A tensor made at this call (returned, or of symbolic shape): 64-byte aligned from
    :data:`~.plan.ALIGN_FROM_BYTES` on, a plain numpy allocation below (0.15 us instead
    of ~2: kernels need only element alignment), as the compiled plan makes them."""
    shape = spec.resolve(sizes)
    dtype = np.dtype(spec.dtype)
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= n
    if nbytes < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype)
    return aligned_empty(shape, dtype)


def _bind_sizes(prog: Program, what: str, si: Any, a: Any, sizes: dict,
                first: dict) -> None:
    """Bind the symbolic sizes of a parameter's type from its argument's shape (``sizes``:
    Var id -> int; ``first``: Var id -> the argument that bound it); a size met again must
    be the same."""
    if isinstance(si, TupleStructInfo):
        for k, (f, x) in enumerate(zip(si.fields, a)):
            _bind_sizes(prog, f"{what}[{k}]", f, x, sizes, first)
        return
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        return
    for axis, d in enumerate(si.shape):
        if isinstance(d, int):
            continue
        got = int(a.shape[axis])
        known = sizes.setdefault(id(d), got)
        if known != got:
            raise ArgumentError(f"{prog.name}: shape mismatch: {what} has {got} in dimension "
                                f"{axis}, which is {d.name}, but {d.name} is {known} "
                                f"from {first.get(id(d), 'an earlier argument')} (shape "
                                f"{tuple(a.shape)})")
        first.setdefault(id(d), what)


def _fresh(value: Any, consts: dict) -> Any:
    """Constants are returned as copies (they are read-only and shared)."""
    if isinstance(value, tuple):
        return tuple(_fresh(v, consts) for v in value)
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


def _call_packed(symbol: str, inputs: list, outputs: list) -> None:
    f = get_global_func(symbol, allow_missing=True)
    if f is None:
        raise VMError(missing_message(symbol))
    try:
        f(*[a.view(NDArray) for a in inputs], *[a.view(NDArray) for a in outputs])
    except Exception as e:  # noqa: BLE001 - say which registered function failed
        raise VMError(f"the registered function {symbol!r} raised {type(e).__name__}: {e}") \
            from e


def _from_user(prog: Program, i: int, a: Any) -> Any:
    """A user's argument as the machine holds it (a plain C-contiguous ndarray, or a tuple),
    checked against the parameter's type."""
    if i >= len(prog.params):
        return a  # the count is checked by the caller, with every name
    _, si, name = prog.params[i]
    return _convert(prog.name, f"argument {i} ({name})", si, a)


def _convert(fname: str, what: str, si: Any, a: Any) -> Any:
    if isinstance(si, TupleStructInfo):
        if not isinstance(a, (tuple, list)) or len(a) != len(si.fields):
            raise ArgumentError(f"{fname}: {what} must be a tuple of {len(si.fields)} arrays")
        return tuple(_convert(fname, f"{what}[{k}]", f, x) for k, f in enumerate(si.fields))
    if not isinstance(si, TensorStructInfo):
        return a
    numpy = getattr(a, "numpy", None)
    if not isinstance(a, np.ndarray) and callable(numpy):
        a = numpy()
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"{fname}: {what} must be an array (numpy or engine.nd.array), "
                            f"got {type(a).__name__}")
    a = np.asarray(a)  # an NDArray seen as a plain ndarray (no copy)
    if a.dtype != np.dtype(si.dtype):
        want = shape_text(si.shape) if si.shape is not None else f"{si.ndim} dimensions"
        raise ArgumentError(f"{fname}: {what} must be a {si.dtype} tensor of shape {want}, "
                            f"got {a.dtype} (convert with .astype(\"{si.dtype}\"))")
    if (si.shape is not None and (a.ndim != len(si.shape) or any(
            isinstance(d, int) and d != n for d, n in zip(si.shape, a.shape)))) or \
            (si.shape is None and si.ndim >= 0 and a.ndim != si.ndim):
        want = shape_text(si.shape) if si.shape is not None else f"{si.ndim} dimensions"
        raise ArgumentError(f"{fname}: shape mismatch: {what} must be a {si.dtype} tensor of "
                            f"shape {want}, got shape {a.shape}")
    if not (a.flags.c_contiguous and a.flags.aligned):
        a = np.ascontiguousarray(a)
    return a


def _to_user(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_to_user(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.view(NDArray)
    return value
