"""Scalar (and lane-wise) expressions: constants, variables, casts, arithmetic, comparisons.

FloorDiv/FloorMod use floor semantics for negative operands; by a positive power of two
they become an arithmetic shift / a mask (exact for every sign); by another positive
constant with a provably non-negative dividend they become ``sdiv``/``srem``.
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir.dtype import bits_of, element_of, is_bool, is_float, is_int, is_uint, lanes_of

from .generator import restore
from .loops import Narrowed
from .llvm_types import I1, llvm_type, scalar_type


class ExpressionMixin:
    """``e_<Node>`` methods for arithmetic, logic, casts, constants and variables."""

    def e_Var(self, e: E.Var):
        v = self.vars.get(id(e))
        if v is None:
            raise self.err(f"variable {e.name!r} is used but never defined "
                           "(a block axis outside its block, or a free variable)")
        if isinstance(v, Narrowed):
            return v.value(self.builder)
        return v

    def e_IntImm(self, e: E.IntImm):
        return ir.Constant(llvm_type(e.dtype), int(e.value) & ((1 << bits_of(e.dtype)) - 1)
                           if is_uint(e.dtype) else int(e.value))

    def e_FloatImm(self, e: E.FloatImm):
        return ir.Constant(llvm_type(e.dtype), float(e.value))

    def e_StringImm(self, e: E.StringImm):
        raise self.err(f"a string constant {e.value!r} can only be the symbol of call_extern")

    def e_Let(self, e: E.Let):
        v = self.expr(e.value)
        old = self.vars.get(id(e.var))
        self.vars[id(e.var)] = v
        out = self.expr(e.body)
        restore(self.vars, id(e.var), old)
        return out

    def e_Cast(self, e: E.Cast):
        v = self.expr(e.value)
        return self.convert(v, e.value.dtype, e.dtype)

    def convert(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        b = self.builder
        lanes = lanes_of(dst)
        if lanes > 1 and not isinstance(v.type, ir.VectorType):
            v = self.splat(v, lanes)
        dt = llvm_type(dst) if lanes > 1 or not isinstance(v.type, ir.VectorType) else \
            ir.VectorType(scalar_type(dst), v.type.count)
        if v.type == dt and element_of(src) == element_of(dst):
            return v
        if is_bool(dst):
            if is_float(src):
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, None))
            if v.type == dt:
                return v
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        if is_float(dst):
            if is_float(src):
                sb, db = bits_of(src), bits_of(dst)
                if sb == db:
                    return v
                return b.fpext(v, dt) if db > sb else b.fptrunc(v, dt)
            if is_uint(src) or is_bool(src):
                return b.uitofp(v, dt)
            return b.sitofp(v, dt)
        if element_of(dst) == "handle":
            return b.inttoptr(v, dt) if not isinstance(v.type, ir.PointerType) else v
        # integer destination
        if is_float(src):
            return b.fptoui(v, dt) if is_uint(dst) else b.fptosi(v, dt)
        if element_of(src) == "handle":
            return b.ptrtoint(v, dt)
        sb = 1 if is_bool(src) else bits_of(src)
        db = bits_of(dst)
        if sb == db:
            return v
        if db < sb:
            return b.trunc(v, dt)
        if is_uint(src) or is_bool(src):
            return b.zext(v, dt)
        return b.sext(v, dt)

    def cast_int(self, v: ir.Value, ty: ir.IntType) -> ir.Value:
        if v.type == ty:
            return v
        if isinstance(v, ir.Constant) and isinstance(v.constant, int):
            return ir.Constant(ty, v.constant)
        if v.type.width < ty.width:
            return self.builder.sext(v, ty)
        return self.builder.trunc(v, ty)

    def as_i1(self, v: ir.Value, dtype: str) -> ir.Value:
        if v.type == I1:
            return v
        return self.convert(v, dtype, "bool")

    # arithmetic ---------------------------------------------------------------
    def _operands(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        return self.match(a, b)

    def e_Add(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fadd(a, b, flags=self.fflags)
        return self.builder.add(a, b, flags=self._iflags(e.a.dtype))

    def e_Sub(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fsub(a, b, flags=self.fflags)
        return self.builder.sub(a, b, flags=self._iflags(e.a.dtype))

    def e_Mul(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fmul(a, b, flags=self.fflags)
        return self.builder.mul(a, b, flags=self._iflags(e.a.dtype))

    def _iflags(self, dtype: str):
        return ["nsw"] if is_int(dtype) and not is_uint(dtype) and not is_bool(dtype) else []

    def e_Div(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fdiv(a, b, flags=self.fflags)
        if is_uint(e.a.dtype) or is_bool(e.a.dtype):
            return self.builder.udiv(a, b)
        return self.builder.sdiv(a, b)

    def e_Mod(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.frem(a, b, flags=self.fflags)
        if is_uint(e.a.dtype) or is_bool(e.a.dtype):
            return self.builder.urem(a, b)
        return self.builder.srem(a, b)

    def _nonneg_expr(self, e: E.PrimExpr) -> bool:
        """Conservatively: is ``e`` >= 0 for all values of the variables in scope?"""
        if isinstance(e, E.IntImm):
            return e.value >= 0
        if isinstance(e, E.Var):
            return id(e) in self.nonneg
        if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.Div, E.Min)):
            return self._nonneg_expr(e.a) and self._nonneg_expr(e.b)
        if isinstance(e, (E.FloorMod, E.Mod)):
            return self._nonneg_expr(e.b) if isinstance(e, E.FloorMod) else \
                self._nonneg_expr(e.a) and self._nonneg_expr(e.b)
        if isinstance(e, E.Max):
            return self._nonneg_expr(e.a) or self._nonneg_expr(e.b)
        if isinstance(e, E.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
            return bits_of(e.dtype) >= bits_of(e.value.dtype) and self._nonneg_expr(e.value)
        if isinstance(e, E.Ramp):
            return self._nonneg_expr(e.base) and self._nonneg_expr(e.stride)
        if isinstance(e, E.Broadcast):
            return self._nonneg_expr(e.value)
        return False

    def _floor(self, e, want_div: bool):
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            a, d = self._operands(e)
            q = b.fdiv(a, d, flags=self.fflags)
            fl = b.call(self.intrinsic("floor", q.type, 1), [q])
            if want_div:
                return fl
            return b.fsub(a, b.fmul(fl, d, flags=self.fflags), flags=self.fflags)
        if is_uint(dt) or is_bool(dt):
            a, d = self._operands(e)
            return b.udiv(a, d) if want_div else b.urem(a, d)
        c = E.as_const_int(e.b) if not isinstance(e.b, E.Broadcast) else E.as_const_int(e.b.value)
        a, d = self._operands(e)
        if c is not None and c > 0 and (c & (c - 1)) == 0:
            k = c.bit_length() - 1
            if want_div:
                return b.ashr(a, self.const_like(dt, k)) if k else a
            return b.and_(a, self.const_like(dt, c - 1))
        if c is not None and c > 0 and self._nonneg_expr(e.a):
            return b.sdiv(a, d) if want_div else b.srem(a, d)
        # general floor semantics
        zero = self.const_like(dt, 0)
        q = b.sdiv(a, d)
        r = b.srem(a, d)
        r_nz = b.icmp_signed("!=", r, zero)
        sign_diff = b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero))
        adjust = b.and_(r_nz, sign_diff)
        if want_div:
            return b.sub(q, b.zext(adjust, q.type))
        return b.select(adjust, b.add(r, d), r)

    def e_FloorDiv(self, e):
        return self._floor(e, True)

    def e_FloorMod(self, e):
        return self._floor(e, False)

    def _minmax(self, e, is_min: bool):
        a, b_ = self._operands(e)
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            c = b.fcmp_ordered("<" if is_min else ">", a, b_, flags=self.fflags)
        elif is_uint(dt) or is_bool(dt):
            c = b.icmp_unsigned("<" if is_min else ">", a, b_)
        else:
            c = b.icmp_signed("<" if is_min else ">", a, b_)
        return b.select(c, a, b_)

    def e_Min(self, e):
        return self._minmax(e, True)

    def e_Max(self, e):
        return self._minmax(e, False)

    def _cmp(self, e, op: str):
        a, b_ = self._operands(e)
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            if op == "!=":
                return b.fcmp_unordered(op, a, b_, flags=self.fflags)
            return b.fcmp_ordered(op, a, b_, flags=self.fflags)
        if is_uint(dt) or is_bool(dt):
            return b.icmp_unsigned(op, a, b_)
        if element_of(dt) == "handle":
            return b.icmp_unsigned(op, a, b_)
        return b.icmp_signed(op, a, b_)

    def e_EQ(self, e): return self._cmp(e, "==")
    def e_NE(self, e): return self._cmp(e, "!=")
    def e_LT(self, e): return self._cmp(e, "<")
    def e_LE(self, e): return self._cmp(e, "<=")
    def e_GT(self, e): return self._cmp(e, ">")
    def e_GE(self, e): return self._cmp(e, ">=")

    def e_And(self, e):
        a, b_ = self.match(self.as_i1v(e.a), self.as_i1v(e.b))
        return self.builder.and_(a, b_)

    def e_Or(self, e):
        a, b_ = self.match(self.as_i1v(e.a), self.as_i1v(e.b))
        return self.builder.or_(a, b_)

    def as_i1v(self, x: E.PrimExpr) -> ir.Value:
        v = self.expr(x)
        if is_bool(x.dtype):
            return v
        return self.convert(v, x.dtype, "bool" if lanes_of(x.dtype) == 1
                            else f"boolx{lanes_of(x.dtype)}")

    def e_Not(self, e):
        v = self.as_i1v(e.a)
        return self.builder.not_(v)

    def e_Select(self, e):
        c = self.as_i1v(e.condition)
        t, f = self.match(self.expr(e.true_value), self.expr(e.false_value))
        if isinstance(t.type, ir.VectorType) and not isinstance(c.type, ir.VectorType):
            pass  # scalar condition selects whole vectors
        elif isinstance(c.type, ir.VectorType) and not isinstance(t.type, ir.VectorType):
            t, f = self.splat(t, c.type.count), self.splat(f, c.type.count)
        return self.builder.select(c, t, f)
