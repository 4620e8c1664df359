"""Buffers: shapes, ``T.Buffer(...)``/``T.Buffer[...]``/``T.alloc_buffer(...)``/
``T.allocate(...)`` specifications, storage scopes, ``T.match_buffer`` and the buffer
regions of ``T.reads``/``T.writes``.
"""
from __future__ import annotations

import ast
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import is_int

from .context import Handle, ParserContext, extent_of
from .dialect import BUFFER_KWARGS


class BufferParser(ParserContext):
    """Buffer declarations and regions (mixed into the parser; see :mod:`.module`)."""

    def shape(self, node: ast.AST) -> tuple:
        if type(node) in (ast.Tuple, ast.List):
            pairs = [(it, self.expr(it)) for it in node.elts]
        else:
            v = self.expr(node)   # a name from outside the text may be a whole shape
            pairs = [(node, x) for x in v] if isinstance(v, list) else [(node, v)]
        out = []
        for it, v in pairs:
            if isinstance(v, bool) or isinstance(v, (float, str)):
                raise self.err(it, f"buffer shapes must be integers, got {v!r}")
            if isinstance(v, int):
                if v < 0:
                    raise self.err(it, f"buffer shapes must not be negative, got {v}")
                out.append(E.IntImm("int32" if -2**31 <= v < 2**31 else "int64", v))
                continue
            if isinstance(v, Buffer) or not isinstance(v, E.PrimExpr):
                raise self.err(it, "buffer shapes must be integer constants")
            if not is_int(v.dtype):
                raise self.err(it, f"buffer shapes must be integers, got dtype {v.dtype}")
            if type(v) is E.IntImm:
                if v.value < 0:
                    raise self.err(it, f"buffer shapes must not be negative, got {v.value}")
            elif not self.symbolic_only(v):
                raise self.err(it, "buffer shapes must be constant (or use symbolic "
                                   "variables declared with n = T.int32() at the top of "
                                   "the function)")
            out.append(v)
        return tuple(out)

    def symbolic_only(self, e: E.PrimExpr) -> bool:
        from engine.ir.functor import collect_vars
        return all(id(v) in self.symbolic for v in collect_vars(e))

    def buffer_spec(self, call: ast.AST, fname: str, allow_positional_dtype: bool = True,
                    skip_first: bool = False) -> dict:
        """Shape/dtype/scope/... of T.Buffer(...), T.Buffer[...], T.alloc_buffer(...)."""
        if type(call) is ast.Subscript:  # T.Buffer[(128, 128), "float32"]
            items = self.subscript_items(call.slice)
            if type(call.slice) is ast.Tuple and len(items) >= 1 and \
                    type(items[0]) in (ast.Tuple, ast.List):
                args, kw = items, {}
            elif type(call.slice) is ast.Tuple and len(items) == 2 and \
                    type(items[1]) is ast.Constant and isinstance(items[1].value, str):
                args, kw = items, {}  # T.Buffer[128, "float32"]: a 1-D shape, no tuple
            else:
                args, kw = [call.slice], {}
            if len(args) > 2:
                raise self.err(call, "T.Buffer[shape, dtype] takes a shape and a dtype")
        else:
            args, kw = self.call_args(call, fname, 1 + skip_first, 3 + skip_first,
                                      BUFFER_KWARGS)
            if skip_first:
                args = args[1:]
        if not args:
            raise self.err(call, f"T.{fname} needs a shape")
        spec: dict[str, Any] = {"shape": self.shape(args[0])}
        if len(args) >= 2:
            if not allow_positional_dtype:
                raise self.err(args[1], f"T.{fname}: pass the dtype as dtype=\"...\"")
            if "dtype" in kw:
                raise self.err(args[1], f"T.{fname}: the dtype is given twice")
            spec["dtype"] = self.dtype_arg(args[1])
        if len(args) >= 3:
            spec["scope"] = self.scope_arg(args[2])
        if "dtype" in kw:
            spec["dtype"] = self.dtype_arg(kw["dtype"])
        if "scope" in kw:
            spec["scope"] = self.scope_arg(kw["scope"])
        if "strides" in kw:
            spec["strides"] = self.shape(kw["strides"])
        if "elem_offset" in kw:
            spec["elem_offset"] = self.int_const(kw["elem_offset"], "elem_offset")
        if "align" in kw:
            spec["align"] = self.int_const(kw["align"], "align")
        if "data" in kw:
            raise self.err(kw["data"], "T.Buffer(data=...) is not supported")
        return spec

    def scope_arg(self, node: ast.AST) -> str:
        if type(node) is not ast.Constant or not isinstance(node.value, str):
            raise self.err(node, "a storage scope must be a string such as \"local\"")
        from engine.ir.buffer import SCOPES, is_storage_scope
        if node.value == "":
            return "global"            # TVM's empty scope is global memory
        if not is_storage_scope(node.value):
            raise self.err(node, f"unknown storage scope {node.value!r} (use "
                                 f"{', '.join(SCOPES)}, optionally tagged: \"global.A_reg\")")
        return node.value

    def new_buffer(self, node: ast.AST, name: str, fname: str, skip_first: bool = False
                   ) -> Buffer:
        """The buffer ``name`` that ``T.<fname>(...)`` (or ``T.Buffer[...]``) at ``node``
        declares."""
        return self.make_buffer(node, name, self.buffer_spec(node, fname, skip_first=skip_first))

    def make_buffer(self, node: ast.AST, name: str, spec: dict) -> Buffer:
        try:
            return Buffer(name, spec["shape"], spec.get("dtype", "float32"),
                          spec.get("scope", "global"), spec.get("strides", ()),
                          spec.get("elem_offset", 0), spec.get("align", 64))
        except (TypeError, ValueError) as e:
            raise self.err(node, str(e)) from None

    # ------------------------------------------------------------------ regions
    def region(self, node: ast.AST) -> BufferRegion:
        if type(node) is ast.Name:
            return BufferRegion.full(self.buffer_of(node))
        if type(node) is not ast.Subscript:
            raise self.err(node, "T.reads/T.writes expect buffer regions such as A[vi, 0:128]")
        buf = self.buffer_of(node.value)
        items = self.subscript_items(node.slice)
        if len(items) != buf.ndim:
            raise self.err(node, f"buffer {buf.name!r} has {buf.ndim} dimension(s) but the "
                                 f"region has {len(items)}")
        ranges = []
        for d, it in enumerate(items):
            if type(it) is ast.Slice:
                if it.step is not None:
                    raise self.err(it, "region slices cannot have a step")
                lo = self.index_expr(it.lower) if it.lower is not None else \
                    E.IntImm(buf.shape[d].dtype, 0)
                hi = self.index_expr(it.upper) if it.upper is not None else buf.shape[d]
                if type(lo) is not E.IntImm and type(hi) is E.IntImm:
                    hi = E.IntImm(lo.dtype, hi.value) if hi.dtype != lo.dtype else hi
                ranges.append(Range(lo, extent_of(lo, hi)))
            else:
                mn = self.index_expr(it)
                ranges.append(Range(mn, E.IntImm(mn.dtype, 1)))
        return BufferRegion(buf, tuple(ranges))

    def regions(self, call: ast.Call, fname: str) -> tuple:
        args, _ = self.call_args(call, fname, 0, None)
        out = []
        for a in args:
            if type(a) in (ast.List, ast.Tuple):
                out.extend(self.region(x) for x in a.elts)
            else:
                out.append(self.region(a))
        return tuple(out)

    def match_buffer(self, n: ast.Assign, name: str, call: ast.Call) -> None:
        if call.args and self.blocks and type(call.args[0]) in (ast.Subscript, ast.Name) \
                and not isinstance(self.lookup(getattr(call.args[0], "id", "")), Handle):
            return self.match_view(n, name, call)
        if self.depth != 0 or not call.args:
            raise self.err(n, "T.match_buffer(handle, shape, dtype) belongs at the top of "
                              "the function, or inside a block as a view of a region: "
                              "X = T.match_buffer(B[vi, 0:4], (4,))")
        h = call.args[0]
        hv = self.lookup(h.id) if type(h) is ast.Name else None
        if not isinstance(hv, Handle):
            raise self.err(h, "T.match_buffer's first argument must be a T.handle parameter")
        if hv.buffer is not None:
            raise self.err(h, f"handle {h.id!r} is already matched")
        buf = self.new_buffer(call, name, "match_buffer", skip_first=True)
        hv.buffer = buf
        self.declare(name, buf)
        return None


    def match_view(self, n: ast.Assign, name: str, call: ast.Call) -> None:
        """``X = T.match_buffer(B[vi, 0:4], (4,), ...)`` inside a block: ``X`` is a view of
        the region (:class:`engine.ir.stmt.MatchBufferRegion`). Its shape must be the
        region's extents (the trailing ones; the leading ones 1), its dtype and scope the
        source's (they are the default); its offset comes from the region, and so do its
        strides: ``strides=(sa, 1)`` (a tensor intrinsic's, after tensorize) names them,
        each a variable (bound to the source's stride when the view is made plain) or 1."""
        ctx = self.blocks[-1]
        source = self.region(call.args[0])
        spec = self.buffer_spec(call, "match_buffer", skip_first=True)
        src = source.buffer
        if "elem_offset" in spec:
            raise self.err(call, "a view takes its elem offset from the region it matches; "
                                 "leave out elem_offset=")
        if "strides" in spec and (len(spec["strides"]) != len(spec["shape"]) or any(
                type(st) is not E.Var and not E.is_const_int(st, 1)
                for st in spec["strides"]) or not any(type(st) is E.Var
                                                      for st in spec["strides"])):
            raise self.err(call, "a view takes its strides from the region it matches: "
                                 "leave out strides=, or name them, each one a variable "
                                 "(strides=(sa, 1)) or 1, one per dimension")
        dtype = spec.get("dtype", src.dtype)
        scope = spec.get("scope", src.scope)
        if dtype != src.dtype:
            raise self.err(call, f"the view {name!r} is {dtype} but {src.name} is "
                                 f"{src.dtype}: a view has its source's dtype")
        if scope != src.scope:
            raise self.err(call, f"the view {name!r} is in scope {scope!r} but {src.name} is "
                                 f"in {src.scope!r}: a view has its source's scope")
        shape = spec["shape"]
        region = source.region
        offset = len(region) - len(shape)
        if offset < 0:
            raise self.err(call, f"the view {name!r} has {len(shape)} dimensions, more than "
                                 f"the region of {src.name} ({len(region)})")
        from engine.ir.structural import structural_equal
        for d, rg in enumerate(region):
            want = shape[d - offset] if d >= offset else E.IntImm(rg.extent.dtype, 1)
            got = rg.extent
            same = (type(got) is E.IntImm and type(want) is E.IntImm and
                    got.value == want.value) or structural_equal(got, want)
            if not same:
                size = str(got.value) if type(got) is E.IntImm else "several"
                if d < offset:
                    why = (f"dimension {d} of the region spans {size} elements, and the "
                           "view leaves it out (only leading dimensions of extent 1 can be "
                           "left out: the view's dimensions are the region's last ones)")
                else:
                    why = (f"dimension {d - offset} of the view has "
                           f"{getattr(want, 'value', 'other')} elements where the region "
                           f"(its dimension {d}) spans {size}")
                raise self.err(call, f"the view {name!r} does not fit the region of "
                                     f"{src.name}: {why}")
        buf = self.make_buffer(call, name, dict(spec, dtype=dtype, scope=scope))
        ctx.match_buffers.append(S.MatchBufferRegion(buf, source))
        self.views = getattr(self, "views", set()) | {id(buf)}
        self.keep.append(buf)
        self.declare(name, buf)
        return None
