"""A :class:`~.plan.Plan` as LLVM IR (llvmlite), the same for every target.

The module holds

* each constant (a bound weight) as an internal constant global, 64-byte aligned;
* each function's arena of intermediates as an internal zero-initialised global, 64-byte
  aligned, laid out by the memory plan (nothing is allocated per call);
* per function ``i32 @<prefix>_<name>(ptr %arg0, ...)``: the kernels
  (``i32 @engine_fn_<kernel>(ptr...)``, defined by the kernels' object) called in order on
  argument, constant and arena pointers, returning the first non-zero code of a kernel,
  copies (``llvm.memcpy``) of results not written in place, then 0;
* the metadata JSON as a private string, returned by ``ptr @<prefix>_metadata()`` and
  ``ptr @engine_deploy_metadata()``.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .metadata import METADATA_SYMBOL, symbol_of
from .plan import ARENA_ALIGN, Plan

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()


def _bytes_global(mod: ir.Module, name: str, data: bytes | None, size: int,
                  constant: bool) -> ir.GlobalVariable:
    """An internal ``[size x i8]`` global, 64-byte aligned: ``data`` or zeros."""
    ty = ir.ArrayType(I8, max(size, 1))
    g = ir.GlobalVariable(mod, ty, name=name)
    g.linkage = "internal"
    g.global_constant = constant
    g.align = ARENA_ALIGN
    g.initializer = ir.Constant(ty, bytearray(data)) if data else ir.Constant(ty, None)
    return g


def _string_function(mod: ir.Module, name: str, text_global: ir.GlobalVariable) -> None:
    fn = ir.Function(mod, ir.FunctionType(PTR, []), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(text_global)


def entry_module(plan: Plan, prefix: str, kernel_symbols: dict, meta_json: str,
                 target) -> ir.Module:
    """The LLVM module of the entry points (see the module docstring).

    ``kernel_symbols``: kernel name -> its LLVM symbol (``engine_fn_<name>``); ``target``:
    the :class:`~.targets.DeployTarget` whose triple and data layout the module gets.
    """
    mod = ir.Module(name=f"{prefix}entry_points")
    target.set_target(mod)
    consts = [_bytes_global(mod, f"{prefix}_const{k}", c.tobytes(), c.nbytes, True)
              for k, c in enumerate(plan.constants)]
    text = bytearray(meta_json.encode("utf-8") + b"\0")
    ty = ir.ArrayType(I8, len(text))
    meta = ir.GlobalVariable(mod, ty, name=f"{prefix}_metadata_json")
    meta.linkage = "private"
    meta.global_constant = True
    meta.initializer = ir.Constant(ty, text)
    _string_function(mod, f"{prefix}metadata", meta)
    _string_function(mod, METADATA_SYMBOL, meta)
    memcpy = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I1]),
                         name="llvm.memcpy.p0.p0.i64")
    declared: dict = {}
    for e in plan.entries:
        arena = _bytes_global(mod, f"{prefix}_arena_{e.name}", None, e.arena_bytes, False) \
            if e.arena_bytes else None
        fn = ir.Function(mod, ir.FunctionType(I32, [PTR] * len(e.args)),
                         name=symbol_of(prefix, e.name))
        for a, arg in zip(fn.args, e.args):
            a.name = f"arg_{arg.name}"
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def place(p, fn=fn, arena=arena, b=b):
            if p.kind == "arg":
                return fn.args[p.index]
            if p.kind == "const":
                return consts[p.index]
            return b.gep(arena, [ir.Constant(I64, 0), ir.Constant(I64, p.index)],
                         inbounds=True, source_etype=arena.value_type)

        for k, step in enumerate(e.steps):
            if step[0] == "call":
                _, kname, places = step
                sym = kernel_symbols[kname]
                kfn = declared.get(sym)
                if kfn is None:
                    kfn = declared[sym] = ir.Function(
                        mod, ir.FunctionType(I32, [PTR] * len(places)), name=sym)
                rc = b.call(kfn, [place(p) for p in places])
                failed = b.icmp_signed("!=", rc, ir.Constant(I32, 0))
                with b.if_then(failed, likely=False):
                    b.ret(rc)
            else:
                _, dst, src, nbytes = step
                b.call(memcpy, [place(dst), place(src), ir.Constant(I64, nbytes),
                                ir.Constant(I1, 0)])
        b.ret(ir.Constant(I32, 0))
    return mod
