"""Calls: math intrinsics, ``if_then_else``, and the instrumentation hooks.

Intrinsics (:data:`engine.ir.expr.INTRINSICS`) map to LLVM intrinsics (``llvm.exp``,
``llvm.sqrt``, ``llvm.fma``, ...), to libm (``tanh``, ``erf``) or to an expansion
(``sigmoid``, ``rsqrt``); the integer ones (``bitwise_*``, ``shift_*``) to LLVM's and,
or, xor, shl, ashr/lshr; ``if_then_else`` evaluates only the chosen branch.
``address_of`` and ``call_extern`` are described in :mod:`engine.codegen.llvm`.
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir.dtype import element_of, is_bool, is_float, is_uint, lanes_of

from .llvm_types import I32, I64, llvm_type, scalar_type, type_suffix


class IntrinsicMixin:
    """``e_Call``: intrinsics, ``if_then_else``, ``address_of`` and ``call_extern``."""

    def intrinsic(self, name: str, ty: ir.Type, nargs: int) -> ir.Function:
        """Declare ``llvm.<name>.<type suffix>`` overloaded on ``ty``."""
        return self.declare(f"llvm.{name}.{type_suffix(ty)}", ty, [ty] * nargs)

    def e_Call(self, e: E.Call):
        op = e.op
        if op == "address_of":
            return self._address_of(e)
        if op == "call_extern":
            return self._call_extern(e)
        if op not in E.INTRINSICS:
            raise self.err(f"unsupported intrinsic {op!r}")
        if len(e.args) != E.INTRINSICS[op]:
            raise self.err(f"intrinsic {op!r} takes {E.INTRINSICS[op]} arguments, "
                           f"got {len(e.args)}")
        b = self.builder
        if op == "likely":
            return self.expr(e.args[0])
        if op == "if_then_else":
            return self._if_then_else(e)
        args = [self.expr(a) for a in e.args]
        lanes = max([a.type.count if isinstance(a.type, ir.VectorType) else 1 for a in args])
        if lanes > 1:
            args = [self.splat(a, lanes) for a in args]
        dt = e.args[0].dtype
        if op in E.BITWISE:
            return self._bitwise(op, args, e)
        if op in ("abs", "fabs") and not is_float(dt):
            x = args[0]
            if is_uint(dt) or is_bool(dt):
                return x
            neg = b.sub(self.const_like(dt, 0) if lanes == 1 else ir.Constant(x.type, None), x)
            return b.select(b.icmp_signed("<", x, ir.Constant(x.type, None)), neg, x)
        if not is_float(dt):
            # integer argument to a float function: compute in float64 then cast back
            ft = "float64" if lanes == 1 else f"float64x{lanes}"
            args = [self.convert(a, x.dtype, ft) for a, x in zip(args, e.args)]
            val = self._float_call(op, args, ft)
            return self.convert(val, ft, e.dtype)
        val = self._float_call(op, args, dt if lanes == 1 else f"{element_of(dt)}x{lanes}")
        if element_of(e.dtype) != element_of(dt):
            val = self.convert(val, dt, e.dtype)
        return val

    def _bitwise(self, op: str, args: list, e: E.Call) -> ir.Value:
        """Integer bits: and, or, xor, not, shl, and ashr (signed) / lshr (unsigned)."""
        b = self.builder
        if not all(a.dtype.startswith(("int", "uint")) for a in e.args):
            raise self.err(f"T.{op} needs integers")
        args = [self.convert(v, x.dtype, e.dtype) if element_of(x.dtype) !=
                element_of(e.dtype) else v for v, x in zip(args, e.args)]
        if op == "bitwise_not":
            return b.not_(args[0])
        x, y = args
        if op == "bitwise_and":
            return b.and_(x, y)
        if op == "bitwise_or":
            return b.or_(x, y)
        if op == "bitwise_xor":
            return b.xor(x, y)
        if op == "shift_left":
            return b.shl(x, y)
        return b.lshr(x, y) if is_uint(e.dtype) else b.ashr(x, y)

    _LLVM_UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
                   "sqrt": "sqrt", "fabs": "fabs", "abs": "fabs", "floor": "floor",
                   "ceil": "ceil", "round": "roundeven", "trunc": "trunc",
                   "sin": "sin", "cos": "cos"}
    _LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}

    def _float_call(self, op: str, args: list, dtype: str) -> ir.Value:
        b = self.builder
        ty = args[0].type
        fm = self.fflags
        if op in self._LLVM_UNARY:
            return b.call(self.intrinsic(self._LLVM_UNARY[op], ty, 1), args, fastmath=fm)
        if op == "pow":
            return b.call(self.intrinsic("pow", ty, 2), args, fastmath=fm)
        if op == "fma":
            return b.call(self.intrinsic("fma", ty, 3), args, fastmath=fm)
        if op == "rsqrt":
            s = b.call(self.intrinsic("sqrt", ty, 1), args, fastmath=fm)
            return b.fdiv(self.const_like(dtype, 1.0), s, flags=fm)
        if op == "sigmoid":
            x = args[0]
            neg = b.fneg(x, flags=fm)
            ex = b.call(self.intrinsic("exp", ty, 1), [neg], fastmath=fm)
            one = self.const_like(dtype, 1.0)
            return b.fdiv(one, b.fadd(one, ex, flags=fm), flags=fm)
        if op in self._LIBM:
            base = element_of(dtype)
            if base == "float16":
                wide = "float32" if lanes_of(dtype) == 1 else f"float32x{lanes_of(dtype)}"
                r = self._float_call(op, [self.convert(a, dtype, wide) for a in args], wide)
                return self.convert(r, wide, dtype)
            sym = self._LIBM[op][0 if base == "float32" else 1]
            st = scalar_type(base)
            fn = self.declare(sym, st, [st])
            if isinstance(ty, ir.VectorType):
                out = ir.Constant(ty, ir.Undefined)
                for lane in range(ty.count):
                    x = b.extract_element(args[0], ir.Constant(I32, lane))
                    out = b.insert_element(out, b.call(fn, [x]), ir.Constant(I32, lane))
                return out
            return b.call(fn, args)
        raise self.err(f"unsupported intrinsic {op!r}")

    def _if_then_else(self, e: E.Call) -> ir.Value:
        cond_e, t_e, f_e = e.args
        if lanes_of(cond_e.dtype) > 1:
            # each branch is evaluated only for its lanes (masked loads), then blended
            c = self.as_i1v(cond_e)
            b = self.builder
            vals = []
            for m, branch in ((self._and_mask(c), t_e), (self._and_mask(b.not_(c)), f_e)):
                ty = llvm_type(branch.dtype) if lanes_of(branch.dtype) > 1 else \
                    ir.VectorType(scalar_type(branch.dtype), c.type.count)
                before = b.block
                result = {}

                def emit(branch=branch, result=result):
                    v = self.expr(branch)
                    if not isinstance(v.type, ir.VectorType):
                        v = self.splat(v, c.type.count)
                    result["v"], result["block"] = v, b.block
                self._under_mask(m, emit)
                phi = b.phi(ty)
                phi.add_incoming(result["v"], result["block"])
                phi.add_incoming(ir.Constant(ty, None), before)
                vals.append(phi)
            return b.select(c, vals[0], vals[1])
        c = self.as_i1(self.expr(cond_e), cond_e.dtype)
        b = self.builder
        with b.if_else(c) as (then, otherwise):
            with then:
                tv = self.expr(t_e)
                tb = b.block
            with otherwise:
                fv = self.expr(f_e)
                fb = b.block
        tv, fv = self.match(tv, fv)
        phi = b.phi(tv.type)
        phi.add_incoming(tv, tb)
        phi.add_incoming(fv, fb)
        return phi

    def _address_of(self, e: E.Call) -> ir.Value:
        if len(e.args) != 1 or not isinstance(e.args[0], E.BufferLoad):
            raise self.err("address_of takes one argument, a BufferLoad such as A[i]")
        ld = e.args[0]
        if len(ld.indices) != 1 or lanes_of(ld.indices[0].dtype) != 1:
            raise self.err("address_of needs a flattened scalar BufferLoad (lower first)")
        p = self._elem_ptr(ld.buffer, self.index(ld.indices[0]))
        if e.dtype == "handle":   # a pointer argument of an extern call
            return p
        v = self.builder.ptrtoint(p, I64)
        return self.convert(v, "int64", e.dtype) if e.dtype != "int64" else v

    def _call_extern(self, e: E.Call) -> ir.Value:
        if not e.args or not isinstance(e.args[0], E.StringImm):
            raise self.err("call_extern needs the symbol name as its first argument "
                           "(a StringImm)")
        sym = e.args[0].value
        args = [self.expr(a) for a in e.args[1:]]
        for a, x in zip(args, e.args[1:]):
            if isinstance(a.type, ir.VectorType):
                raise self.err(f"call_extern {sym!r} got a vector argument")
        ret = llvm_type(e.dtype)
        fn = self.declare(sym, ret, [a.type for a in args])
        return self.builder.call(fn, args)
