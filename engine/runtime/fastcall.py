"""Argument checks in compiled code: calling a kernel on numpy arrays in about a microsecond.

``f(a, b, c)`` must check every array against the kernel's parameters before the kernel
runs (see :mod:`engine.runtime.module`). Done in Python, those checks cost about 5.7 us a
call for three arrays (a 2 GHz EPYC; ctypes' own call is 0.8 us more): fine for one call,
but a kernel is called in loops — a Relax model runs one kernel per operator, a user times
``f(a, b, c)`` in a loop — and TVM's own call of the same compiled code costs 0.6 us,
because TVM compiles its argument checks into the generated host function
(``MakePackedAPI``).

This module does the same for the common case. For each *signature* (every parameter's
dtype, shape and whether the kernel writes it) it compiles, once per process, a small
function::

    i32 checked_call(ptr kernel, ptr arrays)   ; arrays: the call's tuple of arrays

that reads each array's numpy header (``PyArrayObject``: type, data pointer, number of
dimensions, shape, dtype, flags), checks exactly what the quick Python pass checks —
an exact ``numpy.ndarray``, the dtype, the shape, C-contiguous, aligned, writeable where the
kernel writes, no written buffer overlapping another — and then calls ``kernel`` on the
data pointers, returning its code. If anything differs it returns :data:`NEEDS_FULL_CHECK`
without calling the kernel, and the caller runs the Python checks, which accept the call
(a memmap, another spelling of the dtype) or say exactly what is wrong.

Where numpy's header fields lie is not assumed: :func:`array_layout` derives their offsets
from CPython's object header and confirms each one on a set of arrays (owned, views,
transposed, read-only, 0-d, several dtypes) against numpy's own accessors. If anything
disagrees (another numpy, another Python build), there is no compiled check and every call
takes the Python path, as before.

A kernel with symbolic sizes has one too (:func:`symbolic_wrapper_ir`: the sizes read from
the arrays' shapes, compared where they repeat, passed to the kernel after the pointers),
unless it has a scalar parameter or a dimension that is an expression (``(n + 31) // 32 *
32``): those take the Python checks of :mod:`engine.runtime.binding` on every call.

A kernel without a quick pass (declared strides, an empty buffer) has no compiled check
either: the compiled check is the quick pass's plan in machine code. A new signature's check is compiled (about 5 ms) on a
kernel's third call, so that a kernel called once keeps the Python checks; a call through
it costs about 1.3 us instead of 7.5.

The check runs inside the ctypes call, without the GIL, as the kernel does: the arrays are
held by the call's tuple, and reading their headers races with another thread reshaping
them no more than the Python checks followed by the kernel did.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

#: what a compiled check returns when the arrays need the full Python check (kernels return
#: 0 on success and negative codes on failure, never this)
NEEDS_FULL_CHECK = 1


@dataclass(frozen=True)
class ArrayLayout:
    """Byte offsets of the fields a compiled check reads in a numpy array object."""

    type: int    # PyObject.ob_type
    data: int    # char *data
    nd: int      # int nd
    dims: int    # npy_intp *dimensions
    descr: int   # PyArray_Descr *descr
    flags: int   # int flags
    tuple_size: int    # a tuple's ob_size
    tuple_items: int   # a tuple's ob_item[0]


def _probe_arrays() -> list[np.ndarray]:
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    ro = base.copy()
    ro.flags.writeable = False
    odd = np.frombuffer(bytearray(17), np.uint8)[1:].view(np.int32)
    return [base, base[3:, 1:], base.T, ro, odd, np.zeros((2, 3, 4), np.float64),
            np.array(3.0, np.float32), np.empty(0, np.int8), np.ones(7, np.int64),
            np.zeros((5, 1), np.bool_)]


def _read_layout() -> ArrayLayout | None:
    header = object.__basicsize__        # PyObject_HEAD: ob_type is its last field
    word = ctypes.sizeof(ctypes.c_void_p)
    if word != 8:
        return None
    layout = ArrayLayout(type=header - word, data=header, nd=header + word,
                         dims=header + 2 * word, descr=header + 5 * word,
                         flags=header + 6 * word, tuple_size=header,
                         tuple_items=tuple.__basicsize__)
    ptr = ctypes.c_void_p.from_address
    for a in _probe_arrays():
        at = id(a)
        if ptr(at + layout.type).value != id(type(a)):
            return None
        if (ptr(at + layout.data).value or 0) != a.ctypes.data:
            return None
        if ctypes.c_int.from_address(at + layout.nd).value != a.ndim:
            return None
        if a.ndim:
            dims = ptr(at + layout.dims).value
            if not dims or tuple((ctypes.c_ssize_t * a.ndim).from_address(dims)) != a.shape:
                return None
        if ptr(at + layout.descr).value != id(a.dtype):
            return None
        if ctypes.c_int.from_address(at + layout.flags).value != a.flags.num:
            return None
    for t in ((), (np.zeros(1),), tuple(_probe_arrays())):
        if ctypes.c_ssize_t.from_address(id(t) + layout.tuple_size).value != len(t):
            return None
        if any(ptr(id(t) + layout.tuple_items + word * k).value != id(x)
               for k, x in enumerate(t)):
            return None
    # a subclass must not pass for an ndarray
    sub = np.zeros(3).view(np.matrix)
    if ptr(id(sub) + layout.type).value == id(np.ndarray):
        return None
    return layout


_layout_lock = threading.Lock()
_layout: list = []


def array_layout() -> ArrayLayout | None:
    """The confirmed offsets of numpy's array header fields, or None (see the module
    docstring)."""
    with _layout_lock:
        if not _layout:
            try:
                _layout.append(_read_layout())
            except Exception:  # noqa: BLE001 - any surprise: no compiled checks
                _layout.append(None)
        return _layout[0]


class _Checker:
    """One compiled check (per signature) and what it needs kept alive."""

    def __init__(self, engine, cfunc, keep: tuple):
        self.engine = engine
        self.cfunc = cfunc
        self.keep = keep


_checkers: dict[tuple, _Checker | None] = {}
_checkers_lock = threading.Lock()


#: a new signature's check is compiled on a function's third call (compiling costs about
#: 5 ms, a call saves about 6 us: a kernel called once or twice keeps the Python checks)
COMPILE_AT_CALL = 3
#: :func:`checked_caller` with ``compile=False``: this signature's check is not compiled yet
NOT_COMPILED = object()


def checked_caller(plan, compile: bool = True) -> object | None:
    """A ctypes function ``call(kernel_address, id(arrays)) -> int`` (``arrays``: the tuple
    of arrays) that checks the arrays and calls the kernel (see the module docstring), or
    None when this process has no compiled check. ``plan`` is the quick Python pass's plan
    (``Function._quick_plan``: per argument (dtype, shape, flag bits required), and the
    pairs that must not overlap with their sizes): the compiled check is that plan in
    machine code. Compiled once per plan per process; with ``compile=False``,
    :data:`NOT_COMPILED` instead of compiling a new one."""
    with _checkers_lock:
        if plan in _checkers:
            hit = _checkers[plan]
            return hit.cfunc if hit is not None else None
        if not compile:
            return NOT_COMPILED
        layout = array_layout()
        checker = None
        if layout is not None:
            try:
                checker = _compile(plan, layout)
            except Exception:  # noqa: BLE001 - the Python checks still work
                checker = None
        _checkers[plan] = checker
        return checker.cfunc if checker is not None else None


class _CheckWriter:
    """Writes the LLVM IR of a check-and-call function line by line: each failed check
    branches to ``needs_full_check``, which returns :data:`NEEDS_FULL_CHECK`."""

    def __init__(self, layout: ArrayLayout, n: int):
        self.layout = layout
        self.lines: list[str] = []
        self.head = ["@engine_ndarray_type = global i64 0"]
        self.head += [f"@engine_descr_{k} = global i64 0" for k in range(n)]
        self._label = iter(range(1, 1 << 30))
        self.emit("define i32 @engine_checked_call(ptr %kernel, ptr %args) {")
        self.emit("entry:")
        self.emit("  %ndarray = load i64, ptr @engine_ndarray_type")
        self.field_is("%args", layout.tuple_size, "i64", "nargs", str(n))

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def require(self, cond: str) -> None:
        ok = f"ok{next(self._label)}"
        self.emit(f"  br i1 {cond}, label %{ok}, label %needs_full_check")
        self.emit(f"{ok}:")

    def field(self, obj: str, offset: int, ty: str, name: str) -> str:
        self.emit(f"  %{name}.at = getelementptr i8, ptr {obj}, i64 {offset}")
        self.emit(f"  %{name} = load {ty}, ptr %{name}.at")
        return f"%{name}"

    def field_is(self, obj: str, offset: int, ty: str, name: str, want: str) -> None:
        """Require the field at ``offset`` of ``obj`` to equal ``want``."""
        got = self.field(obj, offset, ty, name)
        self.emit(f"  %{name}.ok = icmp eq {ty} {got}, {want}")
        self.require(f"%{name}.ok")

    def array(self, k: int, ndim: int, need: int) -> str:
        """Read argument ``k``; require an ndarray of the expected dtype, ``ndim``
        dimensions and the ``need`` flags. Returns the array's register."""
        lay = self.layout
        a = self.field("%args", lay.tuple_items + 8 * k, "ptr", f"a{k}")
        self.field_is(a, lay.type, "i64", f"a{k}.type", "%ndarray")
        self.emit(f"  %a{k}.want = load i64, ptr @engine_descr_{k}")
        self.field_is(a, lay.descr, "i64", f"a{k}.descr", f"%a{k}.want")
        self.field_is(a, lay.nd, "i32", f"a{k}.nd", str(ndim))
        fl = self.field(a, lay.flags, "i32", f"a{k}.flags")
        self.emit(f"  %a{k}.need = and i32 {fl}, {need}")
        self.emit(f"  %a{k}.flags.ok = icmp eq i32 %a{k}.need, {need}")
        self.require(f"%a{k}.flags.ok")
        return a

    def data(self, k: int, a: str) -> None:
        """Read argument ``k``'s data pointer into ``%a{k}.data`` and its address into
        ``%a{k}.begin``."""
        self.field(a, self.layout.data, "ptr", f"a{k}.data")
        self.emit(f"  %a{k}.begin = ptrtoint ptr %a{k}.data to i64")

    def finish(self, args: list[str]) -> str:
        """Call the kernel with ``args``; the module's text."""
        self.emit(f"  %rc = call i32 %kernel({', '.join(args)})")
        self.emit("  ret i32 %rc")
        self.emit("needs_full_check:")
        self.emit(f"  ret i32 {NEEDS_FULL_CHECK}")
        self.emit("}")
        return "\n".join(self.head + [""] + self.lines) + "\n"


def wrapper_ir(plan, layout: ArrayLayout) -> str:
    """LLVM IR text of the check-and-call function for a quick-pass ``plan``.

    ``i32 @engine_checked_call(ptr %kernel, ptr %args)``: ``args`` is the tuple of arrays
    the kernel was called with. The addresses of the ndarray type and of the dtypes are
    globals, filled in after loading."""
    per_arg, pairs = plan
    n = len(per_arg)
    w = _CheckWriter(layout, n)
    emit = w.emit
    for k, (_, shape, need) in enumerate(per_arg):
        a = w.array(k, len(shape), need)
        if shape:
            dims = w.field(a, layout.dims, "ptr", f"a{k}.dims")
            for d_i, extent in enumerate(shape):
                w.field_is(dims, 8 * d_i, "i64", f"a{k}.dim{d_i}", str(extent))
        w.data(k, a)
    for i, j, size_i, size_j in pairs:          # disjoint: one ends before the other
        emit(f"  %a{i}.end.{j} = add i64 %a{i}.begin, {size_i}")
        emit(f"  %a{j}.end.{i} = add i64 %a{j}.begin, {size_j}")
        emit(f"  %apart{i}.{j}.ij = icmp ule i64 %a{i}.end.{j}, %a{j}.begin")
        emit(f"  %apart{i}.{j}.ji = icmp ule i64 %a{j}.end.{i}, %a{i}.begin")
        emit(f"  %apart{i}.{j} = or i1 %apart{i}.{j}.ij, %apart{i}.{j}.ji")
        w.require(f"%apart{i}.{j}")
    return w.finish([f"ptr %a{k}.data" for k in range(n)])


def symbolic_wrapper_ir(plan, layout: ArrayLayout) -> str:
    """LLVM IR text of the check-and-call function of a kernel with symbolic sizes (plan:
    :meth:`engine.runtime.binding.Binding.quick_plan`): as :func:`wrapper_ir`, but a
    dimension that is a size is read from the first array with it (an int32 size at most
    ``2**31 - 1``) and compared at the others, an array indexed with int32 arithmetic holds
    at most ``2**31 - 1`` elements, the overlap checks use the arrays' sizes in bytes
    computed from their shapes, and the kernel is called with the sizes after the
    pointers."""
    _, per_arg, pairs, size_dtypes = plan
    n = len(per_arg)
    w = _CheckWriter(layout, n)
    emit = w.emit
    size_value: dict[int, str] = {}
    for k, (dtype, dims, need, cap) in enumerate(per_arg):
        a = w.array(k, len(dims), need)
        count = "1"
        if dims:
            dp = w.field(a, layout.dims, "ptr", f"a{k}.dims")
        for d_i, c in enumerate(dims):
            got = w.field(dp, 8 * d_i, "i64", f"a{k}.dim{d_i}")
            if c >= 0:
                emit(f"  %a{k}.dim{d_i}.ok = icmp eq i64 {got}, {c}")
                w.require(f"%a{k}.dim{d_i}.ok")
            else:
                slot = -c - 1
                if slot not in size_value:
                    size_value[slot] = got
                    if size_dtypes[slot] == "int32":
                        emit(f"  %a{k}.dim{d_i}.fits = icmp ule i64 {got}, {2**31 - 1}")
                        w.require(f"%a{k}.dim{d_i}.fits")
                else:
                    emit(f"  %a{k}.dim{d_i}.ok = icmp eq i64 {got}, {size_value[slot]}")
                    w.require(f"%a{k}.dim{d_i}.ok")
            emit(f"  %a{k}.count{d_i} = mul i64 {count}, {got}")
            count = f"%a{k}.count{d_i}"
        if cap:
            emit(f"  %a{k}.cap.ok = icmp ule i64 {count}, {cap}")
            w.require(f"%a{k}.cap.ok")
        emit(f"  %a{k}.bytes = mul i64 {count}, {np.dtype(dtype).itemsize}")
        w.data(k, a)
    for i, j in pairs:   # disjoint: one ends before the other (or one is empty)
        emit(f"  %a{i}.end.{j} = add i64 %a{i}.begin, %a{i}.bytes")
        emit(f"  %a{j}.end.{i} = add i64 %a{j}.begin, %a{j}.bytes")
        emit(f"  %apart{i}.{j}.ij = icmp ule i64 %a{i}.end.{j}, %a{j}.begin")
        emit(f"  %apart{i}.{j}.ji = icmp ule i64 %a{j}.end.{i}, %a{i}.begin")
        emit(f"  %empty{i}.{j}.i = icmp eq i64 %a{i}.bytes, 0")
        emit(f"  %empty{i}.{j}.j = icmp eq i64 %a{j}.bytes, 0")
        emit(f"  %apart{i}.{j}.a = or i1 %apart{i}.{j}.ij, %apart{i}.{j}.ji")
        emit(f"  %apart{i}.{j}.b = or i1 %empty{i}.{j}.i, %empty{i}.{j}.j")
        emit(f"  %apart{i}.{j} = or i1 %apart{i}.{j}.a, %apart{i}.{j}.b")
        w.require(f"%apart{i}.{j}")
    args = [f"ptr %a{k}.data" for k in range(n)]
    for slot, dt in enumerate(size_dtypes):
        if dt == "int32":
            emit(f"  %size{slot} = trunc i64 {size_value[slot]} to i32")
            args.append(f"i32 %size{slot}")
        else:
            args.append(f"i64 {size_value[slot]}")
    return w.finish(args)


def jit_small_function(text: str, name: str, values: dict[str, int]) -> tuple[Any, int]:
    """LLVM IR ``text`` compiled in its own MCJIT at LLVM's fast instruction selection
    (straight-line loads, compares and calls need no more), each i64 global of ``values``
    set (the addresses of Python objects the code compares with); the execution engine
    (keep it alive) and the address of the function ``name``."""
    import llvmlite.binding as llvm

    from engine.codegen.target import JIT_LOCK, new_target_machine, set_host_target
    with JIT_LOCK:
        mod = llvm.parse_assembly(text)
        mod.verify()
        set_host_target(mod, 0)
        ee = llvm.create_mcjit_compiler(mod, new_target_machine(0))
        ee.finalize_object()
        address = ee.get_function_address(name)
        for global_name, value in values.items():
            ctypes.c_int64.from_address(ee.get_global_value_address(global_name)).value = value
    return ee, address


def _compile(plan, layout: ArrayLayout) -> _Checker:
    if plan[0] == "sym":
        text = symbolic_wrapper_ir(plan, layout)
        descrs = tuple(p[0] for p in plan[1])
    else:
        text = wrapper_ir(plan, layout)
        descrs = tuple(dtype for dtype, _, _ in plan[0])
    ee, address = jit_small_function(text, "engine_checked_call", {
        "engine_ndarray_type": id(np.ndarray),
        **{f"engine_descr_{k}": id(dt) for k, dt in enumerate(descrs)}})
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
    # the dtype objects whose addresses the check compares with stay alive with it
    return _Checker(ee, proto(address), keep=descrs)


__all__ = ["NEEDS_FULL_CHECK", "NOT_COMPILED", "COMPILE_AT_CALL", "ArrayLayout", "array_layout", "checked_caller", "wrapper_ir", "symbolic_wrapper_ir",
           "jit_small_function"]
