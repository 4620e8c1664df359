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
from .dialect import ACCESS_MASK, RESERVED_CALLS
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
        """``T.call_extern(dtype, "name", *args)`` or TVM 0.27's ``T.call_extern("name",
        *args, dtype=...)`` (``dtype=""``: no value, a handle here): a Call of the function
        by its name, which the engine cannot compile (an opaque call)."""
        args, kw = self.call_args(n, f, 1 if "dtype" in {k.arg for k in n.keywords} else 2,
                                  None, {"dtype"})
        if "dtype" in kw:
            d = kw["dtype"]
            empty = type(d) is ast.Constant and d.value == ""
            dtype = "handle" if empty else self.dtype_arg(d)
            name_node, rest = args[0], args[1:]
        else:
            dtype = self.dtype_arg(args[0])
            name_node, rest = args[1], args[2:]
        if type(name_node) is not ast.Constant or not isinstance(name_node.value, str) or \
                not name_node.value:
            raise self.err(name_node, f"T.{f} needs the function name as a string")
        if name_node.value in RESERVED_CALLS:
            raise self.err(name_node, f"T.{f} cannot call {name_node.value!r}: the name is "
                                      "one of the engine's own operations")
        vals = tuple(self.prim(a) for a in rest)
        return E.Call(dtype, name_node.value, vals)

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

    # ------------------------------------------------------------------ opaque code
    def opaque_call(self, n: ast.Call, f: str) -> E.Call:
        """``T.<builtin>(...)`` of :data:`engine.ir.expr.OPAQUE_CALLS`: ``T.tvm_access_ptr``,
        ``T.type_annotation``, ``T.tvm_mma_sync`` and friends, ``T.assume``."""
        if f == "type_annotation":
            args, kw = self.call_args(n, f, 0, 1, {"dtype"})
            if bool(args) == ("dtype" in kw):
                raise self.err(n, "T.type_annotation takes one dtype")
            return E.Call(self.dtype_arg(args[0] if args else kw["dtype"]), f, ())
        if f == "assume":
            args, _ = self.call_args(n, f, 1, 1)
            cond = self.prim(args[0], "bool")
            if cond.dtype != "bool":
                raise self.err(args[0], "T.assume needs a condition (a bool)")
            return E.Call("bool", f, (cond,))
        args, kw = self.call_args(n, f, 0, None, {"dtype"})
        vals = tuple(self.prim(a) for a in args)
        dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else E.OPAQUE_CALLS[f]
        if f == "tvm_access_ptr":
            self.check_access_ptr(n, vals)
        return E.Call(dtype, f, vals)

    def check_access_ptr(self, n: ast.Call, vals: tuple) -> None:
        if len(vals) != 5:
            raise self.err(n, "T.tvm_access_ptr takes (T.type_annotation(dtype), B.data, "
                              f"offset, extent, mask), got {len(vals)} argument(s)")
        ptype, data, _, _, mask = vals
        if not (type(ptype) is E.Call and ptype.op == "type_annotation"):
            raise self.err(n.args[0], "the first argument of T.tvm_access_ptr is "
                                      "T.type_annotation(dtype)")
        if type(data) is not E.BufferField or data.field != "data":
            raise self.err(n.args[1], "the second argument of T.tvm_access_ptr is a "
                                      "buffer's data (B.data)")
        if type(mask) is not E.IntImm or mask.value not in (1, 2, 3):
            raise self.err(n.args[4], "the mask of T.tvm_access_ptr is 1 (read), 2 (write) "
                                      "or 3 (both)")

    def buffer_method(self, n: ast.Call, buf) -> E.Call:
        """``B.access_ptr(mask, ptr_type="handle", content_lanes=1, offset=0,
        extent=None)``: TVM's ``T.tvm_access_ptr(T.type_annotation(B.dtype), B.data,
        offset, extent, mask)``, the extent the rest of the buffer by default."""
        attr = n.func.attr
        if attr != "access_ptr":
            raise self.err(n, f"buffer {buf.name!r} has no method {attr!r} (only "
                              "access_ptr)")
        args, kw = self.call_args(n, f"{buf.name}.access_ptr", 1, 2,
                                  {"ptr_type", "content_lanes", "offset", "extent"})
        mnode = args[0]
        if type(mnode) is ast.Constant and isinstance(mnode.value, str):
            mask = 0
            for c in mnode.value:
                if c not in ACCESS_MASK:
                    raise self.err(mnode, "an access mask is made of 'r' and 'w'")
                mask |= ACCESS_MASK[c]
        else:
            mask = self.int_const(mnode, "the access mask")
        if mask not in (1, 2, 3):
            raise self.err(mnode, "the access mask is \"r\", \"w\" or \"rw\" (1, 2 or 3)")
        ptr = kw.get("ptr_type", args[1] if len(args) > 1 else None)
        ptr_type = "handle" if ptr is None else self.dtype_arg(ptr)
        if "content_lanes" in kw and self.int_const(kw["content_lanes"], "content_lanes") != 1:
            raise self.err(kw["content_lanes"], "access_ptr with content_lanes other than 1 "
                                                "is not supported")
        idt = "int64" if any(d.dtype == "int64" for d in buf.shape) else "int32"
        offset = self.prim(kw["offset"], idt) if "offset" in kw else E.IntImm(idt, 0)
        if "extent" in kw:
            extent = self.prim(kw["extent"], idt)
        else:
            size = E.IntImm(idt, 1)
            for d in buf.shape:
                size = E.binary(E.Mul, size, d) if type(size) is not E.IntImm or \
                    type(d) is not E.IntImm else E.IntImm(idt, size.value * d.value)
            extent = size if E.is_const_int(offset, 0) else E.binary(E.Sub, size, offset)
        if type(offset) is E.IntImm and buf.elem_offset:
            offset = E.IntImm(offset.dtype, offset.value + int(buf.elem_offset))
        elif buf.elem_offset:
            offset = E.binary(E.Add, offset, int(buf.elem_offset))
        if self.is_view(buf):       # a T.match_buffer view: its offset is the region's
            field = E.BufferField(buf, "elem_offset")
            offset = field if E.is_const_int(offset, 0) else E.binary(E.Add, field, offset)
        return E.Call(ptr_type, "tvm_access_ptr", (
            E.Call(buf.dtype, "type_annotation", ()), E.BufferField(buf, "data"), offset,
            extent, E.IntImm("int32", mask)))

    def is_view(self, buf) -> bool:
        """Is ``buf`` a ``T.match_buffer`` view of a region (declared inside a block)?"""
        return id(buf) in getattr(self, "views", ())
