"""What ``relax.build`` checks before compiling: every function a Relax function calls
exists and is of the right kind, and every ``R.call_tir`` of a TensorIR function passes
arrays of the shapes and dtypes its buffers declare (destination passing: the inputs, then
the outputs). A mismatch is a :class:`BuildError` that names the call, the argument, the
buffer and both shapes."""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.function import IRModule, PrimFunc
from engine.lower.errors import BuildError

from .. import expr as X
from ..struct_info import TensorStructInfo, TupleStructInfo, same_dim, shape_text


def _match(si: TensorStructInfo, buf: Any, sizes: dict) -> bool:
    """Does a tensor of ``si``'s shape fit ``buf``? A buffer's symbolic size (a Var of the
    TensorIR function) takes the first size passed for it and must get the same one at
    every other buffer (``sizes``: Var id -> size); a symbolic size of the Relax function
    against a buffer's number is checked when the call runs (the kernel reads the array's
    shape)."""
    if len(si.shape) != len(buf.shape):
        return False
    for d, b in zip(si.shape, buf.shape):
        if type(b) is E.IntImm:
            if isinstance(d, int) and d != b.value:
                return False
        elif isinstance(b, E.Var):
            prev = sizes.setdefault(id(b), d)
            if not same_dim(prev, d):
                return False
    return True


def _buffer_text(buf: Any) -> str:
    return shape_text(tuple(d.value if type(d) is E.IntImm else d for d in buf.shape))


def _check_shapes(buf: Any, fname: str) -> None:
    for d in buf.shape:
        if type(d) is not E.IntImm and not isinstance(d, E.Var):
            raise BuildError(f"TensorIR function {fname}: buffer {buf.name} has the size "
                             f"{d} in its shape; R.call_tir passes tensors to buffers whose "
                             "sizes are numbers or variables (m = T.int64())")


def _outputs(si: Any) -> list:
    return list(si.fields) if isinstance(si, TupleStructInfo) else [si]


def _describe(e: Any) -> str:
    return e.name_hint if isinstance(e, X.Var) else type(e).__name__.lower()


def check_call_tir(call: X.Call, mod: IRModule, where: str) -> None:
    """Raise BuildError unless ``call`` (an ``R.call_tir`` of a GlobalVar) matches the
    TensorIR function it calls."""
    callee, args = call.args
    name = callee.name_hint
    text = f"R.call_tir({name}, ...) in {where}"
    if name not in mod:
        have = ", ".join(mod.prim_func_names()) or "none"
        raise BuildError(f"{text} calls {name}, which the module does not define "
                         f"(its TensorIR functions: {have})")
    prim = mod[name]
    if not isinstance(prim, PrimFunc):
        raise BuildError(f"{text}: {name} is a Relax function; R.call_tir calls TensorIR "
                         "functions (call a Relax function directly)")
    outs = _outputs(call.sinfo_args[0])
    values = [(a, a.struct_info, "argument", i) for i, a in enumerate(args.fields)] + \
        [(None, o, "output", i) for i, o in enumerate(outs)]
    if len(values) != len(prim.params):
        bufs = ", ".join(b.name for b in prim.params)
        raise BuildError(f"{text} passes {len(args.fields)} argument(s) and {len(outs)} "
                         f"output(s), but {name} takes {len(prim.params)} buffers ({bufs}): "
                         "the inputs, then the outputs")
    sizes: dict = {}
    for (expr, si, kind, i), buf in zip(values, prim.params):
        if not hasattr(buf, "shape"):
            raise BuildError(f"{text}: {name}'s parameter {buf.name} is a scalar; R.call_tir "
                             "passes tensors to buffer parameters only")
        _check_shapes(buf, name)
        what = f"{kind} {i}" + (f" ({_describe(expr)})" if expr is not None else "")
        if not isinstance(si, TensorStructInfo) or si.shape is None:
            raise BuildError(f"{text}: {what} must be a tensor of known shape for buffer "
                             f"{buf.name}, got a {si.describe()}")
        if not _match(si, buf, sizes) or si.dtype != buf.dtype:
            raise BuildError(f"{text}: shape mismatch: {what} is a {si.describe()}, but "
                             f"{name}'s buffer {buf.name} is {buf.dtype} {_buffer_text(buf)}"
                             + (" (a size variable of the buffers gets one size per call)"
                                if any(isinstance(d, E.Var) for d in buf.shape) else ""))


def check_module(mod: IRModule) -> None:
    """Check every Relax function of ``mod`` (see the module docstring)."""
    for fname, f in mod.functions:
        if not isinstance(f, X.Function):
            continue
        for b in f.bindings():
            _check_value(b.value, mod, fname)
        _check_value(f.body.body, mod, fname)


def _check_value(v: Any, mod: IRModule, where: str) -> None:
    if isinstance(v, X.Tuple):
        for f in v.fields:
            _check_value(f, mod, where)
        return
    if not isinstance(v, X.Call):
        return
    op = v.op
    if isinstance(op, X.Op) and op.name == "relax.call_tir" and \
            isinstance(v.args[0], X.GlobalVar):
        check_call_tir(v, mod, where)
    elif isinstance(op, X.GlobalVar):
        if op.name_hint not in mod or not isinstance(mod[op.name_hint], X.Function):
            raise BuildError(f"{where} calls {op.name_hint}(...), which is not a Relax "
                             "function of the module")
