"""The ``T.<name>(...)`` expression functions: ``T.Cast``/``T.cast``, ``T.Select``,
``T.if_then_else``, ``T.max``/``T.min``, ``T.truncdiv``/``T.truncmod``/``T.floordiv``/
``T.floormod``, ``T.Ramp``, ``T.Broadcast``, ``T.call_extern`` (and friends), ``T.Let`` and
``T.max_value``/``T.min_value``/``T.infinity``. :meth:`ExprParser.call` dispatches
``T.<name>`` of :data:`.dialect.EXPR_FUNCS` to the method ``f_<name>``.
"""
from __future__ import annotations

import ast
import math

from engine.ir import expr as E
from engine.ir.dtype import is_float, is_int, split_lanes

from .context import ParserContext
from .exprs import branch_hint


class IntrinsicParser(ParserContext):
    """``f_<name>(call_node, name)`` for every T.<name> expression function."""

    def f_Cast(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return E.Cast(self.dtype_arg(args[0]), self.prim(args[1]))

    def f_cast(self, n, f):
        args, kw = self.call_args(n, f, 1, 2, {"dtype"})
        if len(args) == 2:
            dnode = args[1]
        elif "dtype" in kw:
            dnode = kw["dtype"]
        else:
            raise self.err(n, "T.cast(value, dtype) needs a dtype")
        return E.Cast(self.dtype_arg(dnode), self.prim(args[0]))

    def f_Select(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        c = self.prim(args[0], "bool")
        tv, fv = self.expr(args[1]), self.expr(args[2])
        h = branch_hint(tv, fv)
        return E.Select(c, self.to_prim(args[1], tv, h), self.to_prim(args[2], fv, h))

    def f_if_then_else(self, n, f):
        args, kw = self.call_args(n, f, 3, 3, {"dtype"})
        return self.intrin(n, "if_then_else", args, kw)

    def f_max(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, E.Max, args)

    def f_min(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, E.Min, args)

    def _int_binary(self, n, f, cls):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, cls, args)

    def f_truncdiv(self, n, f):
        return self._int_binary(n, f, E.Div)

    def f_truncmod(self, n, f):
        return self._int_binary(n, f, E.Mod)

    def f_floordiv(self, n, f):
        return self._int_binary(n, f, E.FloorDiv)

    def f_floormod(self, n, f):
        return self._int_binary(n, f, E.FloorMod)

    def f_ceildiv(self, n, f):
        """``T.ceildiv(a, b)``: ``(a + b - 1) // b``, as TVM builds it (a split of a loop of
        symbolic extent n by 4 runs ``T.ceildiv(n, 4)`` times)."""
        args, _ = self.call_args(n, f, 2, 2)
        a, b = self.expr(args[0]), self.expr(args[1])
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and \
                not isinstance(b, bool):
            if b == 0:
                raise self.err(n, "T.ceildiv divides by zero")
            return -(-a // b)
        d = self.minmax(n, E.FloorDiv, args)
        num, den = d.a, d.b
        if not (is_int(num.dtype) and is_int(den.dtype)):
            raise self.err(n, "T.ceildiv takes integers")
        one = E.IntImm(den.dtype, 1)
        return E.binary(E.FloorDiv, E.binary(E.Add, num, E.binary(E.Sub, den, one)), den)

    def f_Ramp(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        base = self.prim(args[0])
        stride = self.prim(args[1], base.dtype)
        lanes = self.int_const(args[2], "the number of lanes")
        return E.Ramp(base, stride, self.check_lanes(args[2], lanes))

    def f_Broadcast(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        v = self.prim(args[0])
        lanes = self.int_const(args[1], "the number of lanes")
        return E.Broadcast(v, self.check_lanes(args[1], lanes))

    def check_lanes(self, node: ast.AST, lanes: int) -> int:
        if lanes < 1:
            raise self.err(node, "the number of lanes must be at least 1")
        return lanes

    def _extern(self, n, f):
        args, _ = self.call_args(n, f, 2, None)
        dtype = self.dtype_arg(args[0])
        if type(args[1]) is not ast.Constant or not isinstance(args[1].value, str):
            raise self.err(args[1], f"T.{f} needs the function name as a string")
        vals = tuple(self.prim(a) for a in args[2:])
        return E.Call(dtype, args[1].value, vals)

    f_call_extern = f_call_intrin = f_call_pure_extern = _extern

    def f_Let(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        if type(args[0]) is not ast.Name:
            raise self.err(args[0], "T.Let(x, value, body) needs a new variable name first")
        value = self.prim(args[1])
        var = E.Var(args[0].id, value.dtype)
        self.scopes.append({args[0].id: var})
        try:
            body = self.prim(args[2])
        finally:
            self.scopes.pop()
        return E.Let(var, value, body)

    def _limit(self, n, f):
        args, _ = self.call_args(n, f, 1, 1)
        dtype = self.dtype_arg(args[0])
        base = split_lanes(dtype)[0]
        if is_float(base):
            import numpy as np
            fi = np.finfo(base)
            if f == "infinity":
                return E.FloatImm(dtype, math.inf)
            return E.FloatImm(dtype, float(fi.max if f == "max_value" else fi.min))
        if is_int(base):
            if f == "infinity":
                raise self.err(n, f"T.infinity needs a float dtype, got {dtype}")
            bits = int(base.lstrip("uint"))
            if base.startswith("u"):
                lo, hi = 0, 2 ** bits - 1
            else:
                lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            return E.IntImm(dtype, hi if f == "max_value" else lo)
        raise self.err(n, f"T.{f} needs a numeric dtype, got {dtype}")

    f_max_value = f_min_value = f_infinity = _limit
