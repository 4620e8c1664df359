"""What an exported library contains, before any code: a :class:`Plan`.

A plan is plain data read from what ``engine.build`` or ``relax.build`` made:

* the lowered TensorIR kernels to compile (``kernels``: name -> lowered PrimFunc);
* the constants to embed (the weights a Relax function binds), each once;
* one :class:`Entry` per exported function: its arguments in order (inputs, then outputs
  for a Relax function; the kernel's own parameter order for a TensorIR one), the size of
  its static arena of intermediates (from the memory plan), and its steps — kernel calls
  and copies over *places*: an argument, a constant, or an offset into the arena.

:func:`plan_tir` reads a built TensorIR :class:`engine.runtime.Module`; :func:`plan_relax` a
Relax :class:`engine.relax.vm.Executable`. Anything a library of fixed shapes and compiled
code cannot hold (symbolic shapes, scalar parameters, operators the virtual machine runs in
numpy, registered Python functions) is refused here with a :class:`DeployError` sentence.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.relax.struct_info import TensorStructInfo, TupleStructInfo
from engine.relax.vm import Executable
from engine.relax.vm.memory import ALIGN
from engine.runtime import Module
from engine.runtime.cross import CrossModule

from .targets import DeployError

#: the dtypes an exported function's arguments may have (numpy's names)
DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool")


@dataclass(frozen=True)
class Arg:
    """One argument of an entry point: a pointer to a C-contiguous array."""

    name: str
    shape: tuple
    dtype: str
    role: str          # "input" or "output"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Place:
    """Where a tensor lives while an entry point runs: ``("arg", i)``, ``("const", k)`` or
    ``("arena", byte offset)``."""

    kind: str
    index: int


@dataclass
class Entry:
    """One exported function: ``i32 <prefix>_<name>(ptr args...)``."""

    name: str
    kind: str                      # "tir" or "relax"
    args: list                     # [Arg]
    arena_bytes: int = 0
    #: ("call", kernel name, [Place]) | ("copy", dst Place, src Place, nbytes)
    steps: list = field(default_factory=list)


@dataclass
class Plan:
    """Everything one library holds (see the module docstring)."""

    kind: str                      # "tir" or "relax"
    kernels: dict                  # name -> lowered PrimFunc
    constants: list                # [np.ndarray], C-contiguous
    entries: list                  # [Entry]
    fast_math: bool = False


def _static_shape(shape: Any, what: str) -> tuple:
    dims = []
    for axis, d in enumerate(shape):
        c = d if isinstance(d, int) else E.as_const_int(d)
        if c is None:
            name = getattr(d, "name", str(d))
            raise DeployError(f"{what} has the symbolic size {name} in dimension {axis}: an "
                              "exported library has fixed shapes; build the model with a "
                              f"fixed size there (for example a fixed batch: {name} = 1) "
                              "and export that build")
        dims.append(int(c))
    return tuple(dims)


def _check_dtype(dtype: str, what: str) -> str:
    if dtype not in DTYPES:
        raise DeployError(f"{what} has dtype {dtype}, which an exported function cannot "
                          f"take or return (it takes {', '.join(DTYPES)})")
    return dtype


def _check_kernel(name: str, lf: Any) -> None:
    """A kernel the plan calls takes only pointers to buffers of fixed shapes."""
    orig = lf.attr("lowered_params", lf.params)
    for p in orig:
        if not isinstance(p, Buffer):
            raise DeployError(f"TensorIR function {name!r} takes the scalar parameter "
                              f"{p.name}: an exported library calls kernels on arrays only; "
                              "make it a constant of the program (or a one-element buffer) "
                              "and build again")
        _static_shape(p.shape, f"buffer {p.name!r} of TensorIR function {name!r}")
        if p.strides:
            raise DeployError(f"buffer {p.name!r} of TensorIR function {name!r} declares "
                              "strides: an exported function takes C-contiguous arrays; "
                              "drop the strides= of its declaration")
    if lf.attr("size_vars"):
        raise DeployError(f"TensorIR function {name!r} has symbolic sizes: an exported "
                          "library has fixed shapes; give its buffers fixed sizes and build "
                          "again")


def plan_tir(rt: "Module | CrossModule") -> Plan:
    """The plan of a built TensorIR module: one entry per kernel, its parameters in their
    order (destination passing: the buffers it writes are the outputs)."""
    if not isinstance(rt, (Module, CrossModule)):
        raise DeployError(f"export_library of a TensorIR build expects the module of "
                          f"engine.build, got {type(rt).__name__}")
    entries = []
    for name in rt.names():
        lf = rt.lowered[name]
        _check_kernel(name, lf)
        args = []
        for spec in rt[name].specs:
            what = f"buffer {spec.name!r} of TensorIR function {name!r}"
            args.append(Arg(spec.name, _static_shape(spec.shape, what),
                            _check_dtype(np.dtype(spec.dtype).name, what),
                            "output" if spec.written else "input"))
        entry = Entry(name, "tir", args)
        entry.steps.append(("call", name, [Place("arg", i) for i in range(len(args))]))
        entries.append(entry)
    return Plan("tir", dict(rt.lowered), [], entries, bool(rt.options.get("fast_math")))


# --------------------------------------------------------------------------- Relax

def _tensor_args(si: Any, name: str, what: str, role: str) -> list:
    """The arguments of a parameter or result type: one per tensor (a tuple flattened)."""
    if isinstance(si, TupleStructInfo):
        out = []
        for k, f in enumerate(si.fields):
            out += _tensor_args(f, f"{name}_{k}", f"{what}[{k}]", role)
        return out
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        raise DeployError(f"{what} is not a tensor of known shape: an exported function "
                          "takes and returns tensors of fixed shapes only")
    return [Arg(name, _static_shape(si.shape, what), _check_dtype(si.dtype, what), role)]


class _RelaxPlanner:
    """Reads one :class:`~engine.relax.vm.program.Program` into an :class:`Entry`: every
    register is given a place (or a tuple of places) at export time."""

    def __init__(self, prog: Any, constants: list, const_ids: dict):
        self.prog = prog
        self.constants = constants
        self.const_ids = const_ids
        self.where: dict = {}        # register -> Place or tuple
        self.token_place: dict = {}  # token -> Place

    def const(self, array: np.ndarray) -> Place:
        k = self.const_ids.get(id(array))
        if k is None:
            k = self.const_ids[id(array)] = len(self.constants)
            self.constants.append(np.ascontiguousarray(array))
        return Place("const", k)

    def refuse(self, what: str, hint: str) -> None:
        raise DeployError(f"Relax function {self.prog.name!r} {what}: an exported library "
                          f"holds only compiled kernels; {hint}")

    def run(self) -> Entry:
        prog = self.prog
        for ins in prog.instrs:
            self.unsupported(ins)
        inputs = []
        for reg, si, name in prog.params:
            if isinstance(si, TupleStructInfo):
                self.refuse(f"takes the tuple {name}", "pass its tensors one by one")
            inputs += _tensor_args(si, name, f"parameter {name!r} of Relax function "
                                   f"{prog.name!r}", "input")
            self.where[reg] = Place("arg", len(inputs) - 1)
        for reg, array in prog.consts.items():
            self.where[reg] = self.const(array)
        for k, t in enumerate(prog.tokens):
            _static_shape(t.shape, f"tensor {k} of Relax function {prog.name!r}")
        # the results: each tensor the function returns is written straight into its
        # output argument when an instruction makes it, else copied there at the end
        results = self._result_tokens()
        outputs = self._outputs(len(inputs))
        args = inputs + outputs
        for pos, tok in enumerate(results):
            if tok is not None and tok not in self.token_place:
                self.token_place[tok] = Place("arg", len(inputs) + pos)
        for t, off in enumerate(prog.plan.offsets):
            if t not in self.token_place:
                if off is None:
                    self.refuse(f"allocates tensor {t} outside its memory plan",
                                "build it with fixed shapes")
                self.token_place[t] = Place("arena", off)
        entry = Entry(prog.name, "relax", args, prog.plan.arena_bytes)
        for ins in prog.instrs:
            self.step(ins, entry)
        self._copy_results(entry, len(inputs))
        return entry

    def _result_tokens(self) -> list:
        """For each returned tensor, the token it is (None: an argument or a constant)."""
        holds: dict = {}
        for ins in self.prog.instrs:
            kind = ins[0]
            if kind in ("kernel", "packed"):
                outs = list(ins[3])
                holds[ins[4]] = tuple(("tok", t) for t in outs) if ins[5] else ("tok", outs[0])
            elif kind == "alloc":
                holds[ins[2]] = ("tok", ins[1])
            elif kind == "move":
                holds[ins[2]] = holds.get(ins[1], ("reg", ins[1]))
            elif kind == "tuple":
                holds[ins[2]] = tuple(holds.get(r, ("reg", r)) for r in ins[1])
            elif kind == "get":
                v = holds.get(ins[1])
                holds[ins[3]] = v[ins[2]] if isinstance(v, tuple) and v and \
                    isinstance(v[0], tuple) else ("reg", ins[3])
        ret = holds.get(self.prog.ret, ("reg", self.prog.ret))
        flat = list(ret) if ret and isinstance(ret[0], tuple) else [ret]
        out, seen = [], set()
        for v in flat:
            tok = v[1] if v[0] == "tok" and v[1] not in seen else None
            if tok is not None:
                seen.add(tok)
            out.append(tok)
        return out

    def _outputs(self, n_in: int) -> list:
        f = self.prog
        ret_si = self._ret_struct_info()
        if isinstance(ret_si, TupleStructInfo):
            return [a for k, fs in enumerate(ret_si.fields) for a in _tensor_args(
                fs, f"out{k}", f"result {k} of Relax function {f.name!r}", "output")]
        return _tensor_args(ret_si, "out", f"the result of Relax function {f.name!r}",
                            "output")

    def _ret_struct_info(self) -> Any:
        """The returned value's type, from the tokens and parameters it is made of."""
        return self._value_si(self.prog.ret)

    def _value_si(self, reg: int) -> Any:
        prog = self.prog
        for r, si, _ in prog.params:
            if r == reg:
                return si
        if reg in prog.consts:
            a = prog.consts[reg]
            return TensorStructInfo(tuple(a.shape), str(a.dtype))
        for ins in prog.instrs:
            kind = ins[0]
            if kind in ("kernel", "packed") and ins[4] == reg:
                sis = [TensorStructInfo(prog.tokens[t].shape, prog.tokens[t].dtype)
                       for t in ins[3]]
                return TupleStructInfo(tuple(sis)) if ins[5] else sis[0]
            if kind == "alloc" and ins[2] == reg:
                t = prog.tokens[ins[1]]
                return TensorStructInfo(t.shape, t.dtype)
            if kind == "move" and ins[2] == reg:
                return self._value_si(ins[1])
            if kind == "tuple" and ins[2] == reg:
                return TupleStructInfo(tuple(self._value_si(r) for r in ins[1]))
            if kind == "get" and ins[3] == reg:
                return self._value_si(ins[1]).fields[ins[2]]
        self.refuse("returns a value that is not a tensor it computes",
                    "return the tensors of its R.call_tir calls")
        return None

    def step(self, ins: tuple, entry: Entry) -> None:
        kind = ins[0]
        if kind == "kernel":
            _, label, in_regs, outs, dst, is_tuple = ins
            places = [self._place(r) for r in in_regs] + [self.token_place[t] for t in outs]
            entry.steps.append(("call", label, places))
            self.where[dst] = tuple(self.token_place[t] for t in outs) if is_tuple else \
                self.token_place[outs[0]]
        elif kind == "alloc":
            self.where[ins[2]] = self.token_place[ins[1]]
        elif kind == "move":
            self.where[ins[2]] = self.where[ins[1]]
        elif kind == "tuple":
            self.where[ins[2]] = tuple(self.where[r] for r in ins[1])
        elif kind == "get":
            self.where[ins[3]] = self.where[ins[1]][ins[2]]
        else:
            self.unsupported(ins)

    def unsupported(self, ins: tuple) -> None:
        """Refuse an instruction a library cannot hold (a sentence with the way out)."""
        kind = ins[0]
        if kind == "packed":
            self.refuse(f"calls the registered function {ins[1]!r}, which runs in Python",
                        "write it as a TensorIR function of the module (R.call_tir)")
        elif kind == "op":
            self.refuse(f"uses the operator {ins[1].name}, which the virtual machine runs "
                        "in numpy", "lower it to TensorIR first "
                        "(relax.transform.LegalizeOps()(mod))")
        elif kind == "func":
            self.refuse(f"calls the Relax function {ins[1]!r}",
                        "export a module whose functions call TensorIR functions only")
        elif kind not in ("kernel", "alloc", "move", "tuple", "get"):
            self.refuse(f"uses a {kind!r} instruction", "return tensors only")

    def _place(self, reg: int) -> Place:
        p = self.where.get(reg)
        if not isinstance(p, Place):
            self.refuse("passes a tuple to a kernel", "pass its tensors one by one")
        return p

    def _copy_results(self, entry: Entry, n_in: int) -> None:
        """Returned tensors not written in place (an argument, a constant, a tensor
        returned twice) are copied into their output arguments."""
        ret = self.where[self.prog.ret]
        flat = list(ret) if isinstance(ret, tuple) else [ret]
        for pos, src in enumerate(flat):
            dst = Place("arg", n_in + pos)
            if src != dst:
                entry.steps.append(("copy", dst, src, entry.args[n_in + pos].nbytes))


def plan_relax(ex: Executable) -> Plan:
    """The plan of a Relax executable: one entry per Relax function (inputs, then
    outputs), the kernels it calls, its bound weights, its static arena."""
    if not isinstance(ex, Executable):
        raise DeployError(f"export_library of a Relax build expects the Executable of "
                          f"relax.build, got {type(ex).__name__}")
    constants: list = []
    const_ids: dict = {}
    entries = [_RelaxPlanner(p, constants, const_ids).run() for p in ex.programs.values()]
    kernels = dict(ex.kernels.lowered) if ex.kernels is not None else {}
    called = {s[1] for e in entries for s in e.steps if s[0] == "call"}
    for name in sorted(called):
        _check_kernel(name, kernels[name])
    fast = bool(ex.kernels.options.get("fast_math")) if ex.kernels is not None else False
    return Plan("relax", {n: kernels[n] for n in kernels if n in called}, constants,
                entries, fast)


#: the arena's alignment (the memory plan's)
ARENA_ALIGN = ALIGN
