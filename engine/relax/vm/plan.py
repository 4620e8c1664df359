"""A Relax function compiled once into one native call: the virtual machine's fast path.

A :class:`~.program.Program` whose instructions are ``R.call_tir`` calls of the module's
own kernels (constant shapes, pointer parameters only) and moves, tuples and tuple items
between them does the same thing at every call. :func:`static_plan` resolves, once, every
register to where its tensor lives — the ``k``-th argument, a constant, the planned arena
(:mod:`.memory`'s offsets) or the ``k``-th returned tensor (fresh at each call) — and
checks, once, what the per-kernel argument checks would check at every call: each operand
has the dtype and shape of the kernel's buffer, the kernels write only their outputs, no
buffer is empty. :func:`native_plan` compiles the sequence of kernel calls into one function
(:mod:`engine.runtime.sequence`): a call of ``vm["main"](x)`` then checks the user's arrays
in compiled code, allocates the returned tensors and calls the kernels back to back
without returning to Python.

Anything else — a registered (``env.*``) function, a high-level operator, a call of another
Relax function, a symbolic size, a kernel with scalar parameters — keeps the machine's
instruction-by-instruction loop (:mod:`.machine`); :func:`static_plan` says why in a
sentence. ``ENGINE_VM_PLAN=0`` turns the compiled plan off (the instruction loop, for
comparison: ``benchmarks/bench_vm.py``), and so does ``ENGINE_COMPILED_CHECKS=0``, which
also turns off the kernels' compiled checks.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from engine.nd import NDArray
from engine.runtime.fastcall import NEEDS_FULL_CHECK
from engine.runtime.module import Function, aligned_empty, data_pointer
from engine.runtime.sequence import Operand, Sequence, Step, compile_sequence, failure

from ..struct_info import TensorStructInfo
from .program import Program

__all__ = ["StaticPlan", "NativePlan", "static_plan", "native_plan", "plans_enabled",
           "COMPILE_AT_CALL", "NEEDS_FULL_CHECK"]

#: a function's plan is compiled on its third call (compiling costs a few milliseconds; a
#: function called once or twice keeps the instruction loop), as the kernels' checks are
COMPILE_AT_CALL = 3
#: a returned tensor at least this large is 64-byte aligned (as the instruction loop's);
#: a smaller one is a plain numpy allocation (element-aligned, which kernels accept),
#: 0.3 us instead of 0.9
ALIGN_FROM_BYTES = 4096


def plans_enabled() -> bool:
    """False when ``ENGINE_VM_PLAN=0`` or ``ENGINE_COMPILED_CHECKS=0`` (read when a
    machine is made)."""
    return os.environ.get("ENGINE_VM_PLAN", "1") != "0" and \
        os.environ.get("ENGINE_COMPILED_CHECKS", "1") != "0"


@dataclass(frozen=True)
class _Leaf:
    """A tensor a register holds: where it lives, its dtype and shape."""

    operand: Operand
    dtype: np.dtype
    shape: tuple
    const: Any = None     # the constant array itself (kept alive, copied when returned)


@dataclass(frozen=True)
class StaticPlan:
    """What :func:`static_plan` resolved: the inputs checked at each call
    (``[(dtype, shape)]``), the returned tensors made at each call (``[(dtype, shape)]``),
    the kernel calls (``[(kernel name, Step)]``) and the result (a nested tuple of
    ``_Leaf``)."""

    inputs: tuple
    outputs: tuple
    steps: tuple
    result: Any


def static_plan(prog: Program, kernels: Any) -> StaticPlan | str:
    """The plan of ``prog`` over the compiled ``kernels``, or a sentence saying why it has
    none (the instruction loop then runs it)."""
    if prog.plan is None:
        return "its memory is not planned"
    inputs, regs = [], {}
    for k, (reg, si, name) in enumerate(prog.params):
        if not isinstance(si, TensorStructInfo) or si.shape is None or \
                not all(isinstance(d, int) for d in si.shape):
            return f"its parameter {name} has no constant tensor shape"
        dt = np.dtype(si.dtype)
        shape = tuple(si.shape)
        if 0 in shape:
            return f"its parameter {name} is empty"
        inputs.append((dt, shape))
        regs[reg] = _Leaf(Operand("input", k), dt, shape)
    for reg, c in prog.consts.items():
        if not (c.flags.c_contiguous and c.flags.aligned) or c.size == 0:
            return "a constant is not a contiguous, non-empty array"
        regs[reg] = _Leaf(Operand("address", data_pointer(c)), c.dtype, tuple(c.shape), c)
    outputs: list = []
    out_of_token: dict[int, int] = {}

    def token(t: int) -> _Leaf | str:
        spec = prog.tokens[t]
        if spec.symbolic:
            return "a tensor it allocates has a symbolic shape"
        if spec.nbytes == 0:
            return "a tensor it allocates is empty"
        dt = np.dtype(spec.dtype)
        off = prog.plan.offsets[t]
        if off is not None:
            return _Leaf(Operand("arena", off), dt, tuple(spec.shape))
        if t not in out_of_token:
            out_of_token[t] = len(outputs)
            outputs.append((dt, tuple(spec.shape)))
        return _Leaf(Operand("output", out_of_token[t]), dt, tuple(spec.shape))

    steps = []
    for ins in prog.instrs:
        kind = ins[0]
        if kind == "kernel":
            _, label, in_regs, outs, dst, is_tuple = ins
            leaves = [regs.get(r) for r in in_regs]
            if not all(isinstance(x, _Leaf) for x in leaves):
                return f"an argument of {label} is not a tensor"
            made = [token(t) for t in outs]
            for m in made:
                if isinstance(m, str):
                    return m
            why = _kernel_fits(kernels, label, leaves, made)
            if why:
                return why
            steps.append((label, Step(kernels[label].address,
                                      tuple(x.operand for x in leaves + made))))
            regs[dst] = tuple(made) if is_tuple else made[0]
        elif kind == "alloc":
            m = token(ins[1])
            if isinstance(m, str):
                return m
            regs[ins[2]] = m
        elif kind == "move":
            regs[ins[2]] = regs.get(ins[1])
        elif kind == "tuple":
            regs[ins[2]] = tuple(regs.get(r) for r in ins[1])
        elif kind == "get":
            held = regs.get(ins[1])
            if not isinstance(held, tuple):
                return "it takes an item of something not a tuple"
            regs[ins[3]] = held[ins[2]]
        elif kind == "packed":
            return f"it calls the registered function {ins[1]!r}"
        elif kind == "op":
            return f"it runs the high-level operator {ins[1].name}"
        elif kind == "func":
            return f"it calls the Relax function {ins[1]}"
        else:
            return f"it has a {kind!r} instruction"
    result = regs.get(prog.ret)
    if not _all_leaves(result):
        return "it returns something other than tensors"
    return StaticPlan(tuple(inputs), tuple(outputs), tuple(steps), result)


def _all_leaves(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_all_leaves(v) for v in value)
    return isinstance(value, _Leaf)


def _kernel_fits(kernels: Any, label: str, inputs: list, outputs: list) -> str:
    """"" when ``label``'s compiled kernel takes exactly these operands unchecked (pointer
    parameters of their dtypes and shapes, C-contiguous, only the outputs written), else
    why not."""
    if kernels is None or label not in kernels:
        return f"the kernel {label} is not compiled"
    f = kernels[label]
    if not isinstance(f, Function):
        return f"the kernel {label} is not compiled for this machine"
    if f.binding is not None:
        return f"the kernel {label} has symbolic sizes or scalar parameters"
    specs = f.specs
    if len(specs) != len(inputs) + len(outputs):
        return f"the kernel {label} takes {len(specs)} arrays"
    for i, (s, leaf) in enumerate(zip(specs, inputs + outputs)):
        if s.strides is not None:
            return f"the kernel {label} declares strides for {s.name}"
        if s.written != (i >= len(inputs)):
            return f"the kernel {label} writes its input {s.name}" if s.written else \
                f"the kernel {label} does not write its output {s.name}"
        if np.dtype(s.dtype) != leaf.dtype or tuple(s.shape) != leaf.shape:
            return f"the kernel {label}'s buffer {s.name} is not {leaf.dtype} {leaf.shape}"
    return ""


class NativePlan:
    """A compiled :class:`StaticPlan`: ``plan.run(args, arena)`` (``arena``: the function's
    planned storage, an array) is the function's value, or :data:`NEEDS_FULL_CHECK` when an
    argument is not exactly what the plan checks (the caller's Python checks then say what
    is wrong, or convert it)."""

    def __init__(self, static: StaticPlan, sequence: Sequence, kernels: Any):
        self.static = static
        self.sequence = sequence
        self._kernels = [kernels[label] for label, _ in static.steps]
        self._frame = _frame_maker([_allocator(dt, shape) for dt, shape in static.outputs])
        self._result = _result_builder(static.result)
        self._call = sequence.call
        result = static.result
        if len(static.outputs) == 1 and isinstance(result, _Leaf) and \
                result.operand.kind == "output":
            self.run = self._one_output_runner(_allocator(*static.outputs[0]))

    def run(self, args: tuple, arena: np.ndarray) -> Any:
        frame = self._frame(args, arena)        # (args, fresh outputs..., arena)
        code = self._call(id(frame))
        if code == 0:
            return self._result(args, frame)
        return self._not_run(code)

    def _one_output_runner(self, alloc: Callable[[], NDArray]) -> Callable:
        """:meth:`run` for the common function returning one tensor (two Python calls
        fewer: ~0.1 us of a call of a few microseconds)."""
        call, not_run = self._call, self._not_run

        def run(args: tuple, arena: np.ndarray) -> Any:
            out = alloc()
            frame = (args, out, arena)
            code = call(id(frame))
            return out if code == 0 else not_run(code)
        return run

    def _not_run(self, code: int) -> Any:
        """:data:`NEEDS_FULL_CHECK`, or the failing kernel's error raised."""
        if code == NEEDS_FULL_CHECK:
            return NEEDS_FULL_CHECK
        step, rc = failure(code)
        self._kernels[step]._failed(rc)
        raise RuntimeError(f"a kernel failed with code {rc}")   # _failed always raises


def native_plan(prog: Program, kernels: Any) -> NativePlan | str:
    """The compiled plan of ``prog``, or a sentence saying why it has none."""
    static = static_plan(prog, kernels)
    if isinstance(static, str):
        return static
    seq = compile_sequence(list(static.inputs), len(static.outputs),
                           [step for _, step in static.steps])
    if seq is None:
        return "numpy's array header could not be confirmed in this process"
    return NativePlan(static, seq, kernels)


def _allocator(dtype: np.dtype, shape: tuple) -> Callable[[], NDArray]:
    """A maker of one fresh returned tensor (an NDArray)."""
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    new = np.ndarray.__new__
    if nbytes < ALIGN_FROM_BYTES:
        return lambda: new(NDArray, shape, dtype)
    return lambda: aligned_empty(shape, dtype).view(NDArray)


def _frame_maker(allocs: list) -> Callable[[tuple, np.ndarray], tuple]:
    """``(args, arena) -> (args, fresh output 0, ..., arena)``: the one argument of the
    compiled sequence (:mod:`engine.runtime.sequence`)."""
    if not allocs:
        return lambda args, arena: (args, arena)
    if len(allocs) == 1:
        (a0,) = allocs
        return lambda args, arena: (args, a0(), arena)
    if len(allocs) == 2:
        a0, a1 = allocs
        return lambda args, arena: (args, a0(), a1(), arena)
    return lambda args, arena: (args, *[a() for a in allocs], arena)


def _result_builder(result: Any) -> Callable[[tuple, tuple], Any]:
    """``(args, frame) -> the function's value`` for a resolved result (output ``k`` is
    ``frame[k + 1]``)."""
    if isinstance(result, _Leaf) and result.operand.kind == "output":
        k = result.operand.value + 1
        return lambda args, frame: frame[k]

    def build(value: Any, args: tuple, frame: tuple) -> Any:
        if isinstance(value, tuple):
            return tuple(build(v, args, frame) for v in value)
        op = value.operand
        if op.kind == "output":
            return frame[op.value + 1]
        if op.kind == "input":
            a = args[op.value]
            return (a if a.flags.writeable else a.copy()).view(NDArray)
        return value.const.copy().view(NDArray)   # a constant: read-only, shared
    return lambda args, frame: build(result, args, frame)
