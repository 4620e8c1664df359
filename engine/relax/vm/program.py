"""A Relax function compiled for the virtual machine: a flat list of instructions over
numbered registers, and the tensors its calls allocate.

Instructions are tuples whose first item names them:

* ``("kernel", name, in_regs, out_tokens, dst, tuple_out)`` — ``R.call_tir`` of a TensorIR
  function: the inputs, then fresh output tensors (destination passing);
* ``("packed", symbol, in_regs, out_tokens, dst, tuple_out)`` — the same for a registered
  function (``R.call_tir("env.linear", ...)``, ``R.call_dps_packed``);
* ``("alloc", token, dst)`` — ``R.alloc_tensor``;
* ``("op", opdef, operands, attrs, dst)`` — a high-level operator run by its numpy meaning;
* ``("func", name, in_regs, dst)`` — a call of another Relax function of the module;
* ``("tuple", regs, dst)``, ``("get", reg, index, dst)``, ``("move", src, dst)``,
  ``("shape", values, dst)``.

Each tensor an instruction allocates is a *token* (:class:`TensorSpec`); :mod:`.memory`
decides which tokens share storage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.lower.errors import BuildError

from .. import expr as X
from ..op import OPS
from ..struct_info import TensorStructInfo, TupleStructInfo


@dataclass(frozen=True)
class TensorSpec:
    """A tensor an instruction allocates; a symbolic size in its shape is a Var of the
    function, bound when it runs (:meth:`resolve`)."""

    shape: tuple
    dtype: str

    @property
    def symbolic(self) -> bool:
        return any(not isinstance(s, int) for s in self.shape)

    def resolve(self, sizes: dict) -> tuple:
        """The shape with the symbolic sizes of this call (``sizes``: Var id -> int)."""
        return tuple(s if isinstance(s, int) else sizes[id(s)] for s in self.shape)

    @property
    def nbytes(self) -> int:
        n = np.dtype(self.dtype).itemsize
        for s in self.shape:
            n *= s
        return n


@dataclass
class Program:
    """One compiled Relax function."""

    name: str
    params: list  # [(reg, struct_info, name)]
    instrs: list
    ret: int
    num_regs: int
    consts: dict  # reg -> read-only array
    tokens: list  # [TensorSpec]
    token_defs: list  # instruction index defining each token
    plan: Any = None  # memory.MemoryPlan
    names: dict = field(default_factory=dict)  # reg -> variable name (for messages)


class _Compiler:
    def __init__(self, f: X.Function, fname: str):
        self.f = f
        self.fname = fname
        self.regs: dict[int, int] = {}
        self.n = 0
        self.instrs: list = []
        self.consts: dict[int, np.ndarray] = {}
        self.const_regs: dict[int, int] = {}
        self.tokens: list[TensorSpec] = []
        self.token_defs: list[int] = []
        self.names: dict[int, str] = {}
        self.param_sizes: set[int] = set()  # ids of the symbolic sizes the parameters bind

    def new_reg(self) -> int:
        self.n += 1
        return self.n - 1

    def token(self, si: Any, what: str) -> int:
        if not isinstance(si, TensorStructInfo) or si.shape is None:
            raise BuildError(f"{self.fname}: {what} must have a known tensor shape to be "
                             f"allocated, got a {si.describe()}")
        for d in si.shape:
            if not isinstance(d, int) and id(d) not in self.param_sizes:
                raise BuildError(f"{self.fname}: {what} has the symbolic size {d.name}, which "
                                 "no parameter's shape defines; a symbolic size is bound from "
                                 "the arguments' shapes (x: R.Tensor((\"n\", 784), ...))")
        self.tokens.append(TensorSpec(si.shape, si.dtype))
        self.token_defs.append(len(self.instrs))
        return len(self.tokens) - 1

    def operand(self, e: Any) -> int:
        if isinstance(e, X.Var):
            reg = self.regs.get(id(e))
            if reg is None:
                raise BuildError(f"{self.fname}: {e.name_hint} is used but never bound")
            return reg
        if isinstance(e, X.Constant):
            reg = self.const_regs.get(id(e))
            if reg is None:
                reg = self.const_regs[id(e)] = self.new_reg()
                self.consts[reg] = e.data.array
            return reg
        dst = self.new_reg()
        self.value(e, dst)
        return dst

    def outputs(self, si: Any, what: str) -> tuple[list, bool]:
        if isinstance(si, TupleStructInfo):
            return [self.token(f, what) for f in si.fields], True
        return [self.token(si, what)], False

    def value(self, e: Any, dst: int) -> None:
        if isinstance(e, (X.Var, X.Constant)):
            self.instrs.append(("move", self.operand(e), dst))
        elif isinstance(e, X.Tuple):
            regs = [self.operand(x) for x in e.fields]
            self.instrs.append(("tuple", regs, dst))
        elif isinstance(e, X.TupleGetItem):
            self.instrs.append(("get", self.operand(e.tuple_value), e.index, dst))
        elif isinstance(e, X.ShapeExpr):
            self.instrs.append(("shape", e.values, dst))
        elif isinstance(e, X.Call):
            self.call(e, dst)
        else:
            raise BuildError(f"{self.fname}: cannot run a {type(e).__name__} on the virtual "
                             "machine")

    def call(self, c: X.Call, dst: int) -> None:
        op = c.op
        if isinstance(op, X.GlobalVar):
            regs = [self.operand(a) for a in c.args]
            self.instrs.append(("func", op.name_hint, regs, dst))
            return
        name = op.name if isinstance(op, X.Op) else None
        if name in ("relax.call_tir", "relax.call_dps_packed"):
            callee, args = c.args
            regs = [self.operand(a) for a in args.fields]
            label = callee.name_hint if isinstance(callee, X.GlobalVar) else \
                callee.global_symbol
            outs, is_tuple = self.outputs(c.sinfo_args[0], f"the output of {label}")
            kind = "kernel" if isinstance(callee, X.GlobalVar) else "packed"
            self.instrs.append((kind, label, regs, outs, dst, is_tuple))
            return
        if name == "relax.builtin.alloc_tensor":
            tok = self.token(c.struct_info, "R.alloc_tensor")
            self.instrs.append(("alloc", tok, dst))
            return
        opdef = OPS.get(name or "")
        if opdef is None:
            raise BuildError(f"{self.fname}: the virtual machine cannot run {op!r}")
        regs = [self.operand(a) for a in c.args]
        self.instrs.append(("op", opdef, regs, dict(c.attrs), dst))

    def run(self) -> Program:
        params = []
        for p in self.f.params:
            reg = self.regs[id(p)] = self.new_reg()
            self.names[reg] = p.name_hint
            params.append((reg, p.struct_info, p.name_hint))
            self.param_sizes.update(id(d) for d in _sizes(p.struct_info))
        for b in self.f.bindings():
            dst = self.new_reg()
            self.value(b.value, dst)
            self.regs[id(b.var)] = dst
            self.names[dst] = b.var.name_hint
        ret = self.operand(self.f.body.body)
        return Program(self.fname, params, self.instrs, ret, self.n, self.consts,
                       self.tokens, self.token_defs, names=self.names)


def _sizes(si: Any) -> list:
    """The symbolic sizes in a parameter's type."""
    if isinstance(si, TensorStructInfo) and si.shape is not None:
        return [d for d in si.shape if not isinstance(d, int)]
    if isinstance(si, TupleStructInfo):
        return [d for f in si.fields for d in _sizes(f)]
    return []


def compile_function(f: X.Function, name: str) -> Program:
    """The :class:`Program` of one Relax function (its memory is planned separately)."""
    return _Compiler(f, name).run()
