"""A sequence of compiled kernels called by one native function: the Relax virtual
machine's compiled plan (:mod:`engine.relax.vm.plan`).

A Relax function of ``R.call_tir`` calls with constant shapes does the same thing at every
call: check the user's arrays, allocate the returned tensors, call kernel after kernel on
pointers into the user's arrays, the constants, the returned tensors and the planned arena.
Called from Python one by one, each kernel costs a ctypes call and the Python around it
(about 1.2 us a ``call_tir``; TVM's C++ virtual machine about 0.5 us). This module compiles
the whole sequence, once, into one function::

    i32 engine_sequence(ptr frame)      ; frame: (inputs, output 0, ..., output n-1, arena)

``frame`` is a tuple the caller makes for the call (alive during it): the tuple of the
user's arrays, the returned tensors just allocated, and the arena (an array; one argument
through ctypes costs ~0.23 us where four cost ~0.4). It checks every input's numpy header
as :mod:`.fastcall` does — an exact
``numpy.ndarray`` or ``engine.nd.NDArray``, the dtype, the shape, C-contiguous and aligned
(inputs are only read) — reads the outputs' and the arena's data pointers (arrays the
caller has just made, so they are not checked), then calls each kernel with its operands,
constant kernel addresses and constant offsets into the arena. An input that differs
returns :data:`~.fastcall.NEEDS_FULL_CHECK` before any kernel runs (the caller's Python
checks then say what is wrong, or convert the array); a kernel that fails returns
``(position + 1) << 16 | (its code & 0xffff)`` (:func:`failure`).

The caller guarantees what makes the unchecked calls safe: each operand has exactly the
dtype and shape of the kernel's buffer, the kernels write only their output buffers, no
buffer is empty, and written buffers (outputs, arena blocks) never overlap a buffer of the
same call (:mod:`engine.relax.vm.memory` plans the arena that way).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .fastcall import NEEDS_FULL_CHECK, ArrayLayout, array_layout, jit_small_function

__all__ = ["Operand", "Step", "Sequence", "compile_sequence", "sequence_ir", "failure"]


@dataclass(frozen=True)
class Operand:
    """Where a kernel's argument points: ``("input", k)`` the ``k``-th input's data,
    ``("output", k)`` the ``k``-th output's, ``("arena", offset)`` bytes into the arena,
    ``("address", a)`` a fixed address (a constant array the caller keeps alive)."""

    kind: str
    value: int


@dataclass(frozen=True)
class Step:
    """One kernel call: the kernel's address and its arguments in order."""

    address: int
    operands: tuple


#: input specs: (dtype, shape) per input; the flags every input needs (C-contiguous, aligned)
_NEED = 0x1 | 0x100


def sequence_ir(inputs: list, n_outputs: int, steps: list, layout: ArrayLayout) -> str:
    """The LLVM IR text of ``engine_sequence`` (see the module docstring); ``inputs`` is
    ``[(dtype, shape)]``. The addresses of the two array types and of the inputs' dtypes are
    globals, filled in after loading."""
    lines = ["@engine_ndarray_type = global i64 0", "@engine_ndarray_subtype = global i64 0"]
    lines += [f"@engine_descr_{k} = global i64 0" for k in range(len(inputs))]
    body: list[str] = []
    emit = body.append
    labels = iter(range(1, 1 << 30))

    def require(cond: str) -> None:
        ok = f"ok{next(labels)}"
        emit(f"  br i1 {cond}, label %{ok}, label %needs_full_check")
        emit(f"{ok}:")

    def field(obj: str, offset: int, ty: str, name: str) -> str:
        emit(f"  %{name}.at = getelementptr i8, ptr {obj}, i64 {offset}")
        emit(f"  %{name} = load {ty}, ptr %{name}.at")
        return f"%{name}"

    def field_is(obj: str, offset: int, ty: str, name: str, want: str) -> None:
        got = field(obj, offset, ty, name)
        emit(f"  %{name}.ok = icmp eq {ty} {got}, {want}")
        require(f"%{name}.ok")

    emit("define i32 @engine_sequence(ptr %frame) {")
    emit("entry:")
    field("%frame", layout.tuple_items, "ptr", "inputs")
    arena_obj = field("%frame", layout.tuple_items + 8 * (n_outputs + 1), "ptr", "arena.obj")
    field(arena_obj, layout.data, "ptr", "arena")
    emit("  %ndarray = load i64, ptr @engine_ndarray_type")
    emit("  %subtype = load i64, ptr @engine_ndarray_subtype")
    field_is("%inputs", layout.tuple_size, "i64", "nin", str(len(inputs)))
    for k, (_, shape) in enumerate(inputs):
        a = field("%inputs", layout.tuple_items + 8 * k, "ptr", f"in{k}")
        ty = field(a, layout.type, "i64", f"in{k}.type")
        emit(f"  %in{k}.plain = icmp eq i64 {ty}, %ndarray")
        emit(f"  %in{k}.sub = icmp eq i64 {ty}, %subtype")
        emit(f"  %in{k}.type.ok = or i1 %in{k}.plain, %in{k}.sub")
        require(f"%in{k}.type.ok")
        emit(f"  %in{k}.want = load i64, ptr @engine_descr_{k}")
        field_is(a, layout.descr, "i64", f"in{k}.descr", f"%in{k}.want")
        field_is(a, layout.nd, "i32", f"in{k}.nd", str(len(shape)))
        fl = field(a, layout.flags, "i32", f"in{k}.flags")
        emit(f"  %in{k}.need = and i32 {fl}, {_NEED}")
        emit(f"  %in{k}.flags.ok = icmp eq i32 %in{k}.need, {_NEED}")
        require(f"%in{k}.flags.ok")
        if shape:
            dims = field(a, layout.dims, "ptr", f"in{k}.dims")
            for d, extent in enumerate(shape):
                field_is(dims, 8 * d, "i64", f"in{k}.dim{d}", str(extent))
        field(a, layout.data, "ptr", f"in{k}.data")
    for k in range(n_outputs):
        o = field("%frame", layout.tuple_items + 8 * (k + 1), "ptr", f"out{k}")
        field(o, layout.data, "ptr", f"out{k}.data")
    for s, step in enumerate(steps):
        args = []
        for j, op in enumerate(step.operands):
            if op.kind == "input":
                args.append(f"ptr %in{op.value}.data")
            elif op.kind == "output":
                args.append(f"ptr %out{op.value}.data")
            elif op.kind == "arena":
                emit(f"  %s{s}.{j} = getelementptr i8, ptr %arena, i64 {op.value}")
                args.append(f"ptr %s{s}.{j}")
            elif op.kind == "address":
                emit(f"  %s{s}.{j} = inttoptr i64 {op.value} to ptr")
                args.append(f"ptr %s{s}.{j}")
            else:
                raise ValueError(f"unknown operand kind {op.kind!r}")
        emit(f"  %k{s} = inttoptr i64 {step.address} to ptr")
        emit(f"  %rc{s} = call i32 %k{s}({', '.join(args)})")
        emit(f"  %rc{s}.ok = icmp eq i32 %rc{s}, 0")
        emit(f"  br i1 %rc{s}.ok, label %done{s}, label %fail{s}")
        emit(f"fail{s}:")
        emit(f"  %rc{s}.low = and i32 %rc{s}, 65535")
        emit(f"  %rc{s}.code = or i32 %rc{s}.low, {(s + 1) << 16}")
        emit(f"  ret i32 %rc{s}.code")
        emit(f"done{s}:")
    emit("  ret i32 0")
    emit("needs_full_check:")
    emit(f"  ret i32 {NEEDS_FULL_CHECK}")
    emit("}")
    return "\n".join(lines + [""] + body) + "\n"


def failure(code: int) -> tuple[int, int]:
    """``(position of the kernel that failed, its code)`` from what ``engine_sequence``
    returned (neither 0 nor :data:`~.fastcall.NEEDS_FULL_CHECK`)."""
    return (code >> 16) - 1, ctypes.c_int16(code & 0xFFFF).value


class Sequence:
    """A compiled sequence: ``seq.call(id(frame)) -> code`` (0,
    :data:`~.fastcall.NEEDS_FULL_CHECK`, or a failure: :func:`failure`). Holds its
    execution engine and the dtypes whose addresses the check compares with."""

    def __init__(self, engine, cfunc, keep: tuple):
        self._engine = engine
        self.call = cfunc
        self._keep = keep


def compile_sequence(inputs: list, n_outputs: int, steps: list) -> Sequence | None:
    """``engine_sequence`` compiled for this process (``inputs``: ``[(dtype, shape)]`` of
    the checked inputs; ``steps``: the :class:`Step` list), or None when numpy's array
    header could not be confirmed (:func:`~.fastcall.array_layout`)."""
    from engine.nd import NDArray

    layout = array_layout()
    if layout is None:
        return None
    text = sequence_ir(inputs, n_outputs, steps, layout)
    descrs = tuple(np.dtype(dt) for dt, _ in inputs)
    ee, address = jit_small_function(text, "engine_sequence", {
        "engine_ndarray_type": id(np.ndarray), "engine_ndarray_subtype": id(NDArray),
        **{f"engine_descr_{k}": id(dt) for k, dt in enumerate(descrs)}})
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
    return Sequence(ee, proto(address), keep=descrs)
