"""Buffer-level edits: unsafe_set_dtype (the element type of an intermediate buffer)."""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.dtype import check_dtype
from engine.ir.functor import Mutator
from engine.ir.stmt import BufferStore

from ..error import ScheduleError, TraceError
from ..registry import Ctx, Primitive, Result, fmt, py_str, register
from ._common import expect_block
from .buffers import alloc_site, buffer_index_of, nth_buffer


class _SetDType(Mutator):
    """Every access to ``old`` moved to ``new``: stores cast to the new type, loads cast
    back to the type the expression had."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_BufferLoad(self, e):
        idx = tuple(self.visit(i) for i in e.indices)
        if e.buffer is not self.old:
            return E.BufferLoad(e.buffer, idx) if any(a is not b for a, b in
                                                      zip(idx, e.indices)) else e
        return E.Cast(self.old.dtype, E.BufferLoad(self.new, idx))

    def visit_BufferStore(self, s):
        if s.buffer is not self.old:
            return self.generic_visit(s)
        return BufferStore(self.new, E.Cast(self.new.dtype, self.visit(s.value)),
                           tuple(self.visit(i) for i in s.indices))


@register
class UnsafeSetDType(Primitive):
    kind = "UnsafeSetDType"
    attr_kinds = (("buffer_index", "literal"), ("dtype", "str"))
    method = "unsafe_set_dtype"

    def call(self, sch, block, buffer_index, dtype: str):
        """Set the element type of a buffer a block writes. Every store to it casts the
        value to the new type and every load casts it back to the old one, so the
        program is the same up to the precision of the new type ("unsafe": no check
        that the values fit).

        It requires: 1) ``buffer_index`` names a buffer the block writes (an index into
        ``T.writes`` or the buffer's name); 2) the buffer is allocated by the function,
        not a parameter; 3) ``dtype`` is a scalar type such as "float16" or "float64".

        Before::

            Y = T.alloc_buffer((128, 128))
            ...
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            sch.unsafe_set_dtype(sch.get_block("Y"), 0, "float64")

        After::

            Y = T.alloc_buffer((128, 128), "float64")
            ...
                    Y[vi, vj] = T.Cast("float64", T.Cast("float32", Y[vi, vj])
                                       + A[vi, vk] * B[vk, vj])
        """
        index = buffer_index_of(sch, block, buffer_index, "write", self.method,
                                "buffer_index")
        if not isinstance(dtype, str):
            raise ScheduleError(self.method, repr(dtype), "dtype must be a string such as "
                                '"float16"', "")
        sch._run(self, [block], [str(index), dtype])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        subj = f"block {blk.name_hint}"
        raw = attrs[0] if attrs else None
        try:
            index = int(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) \
                else None
        except ValueError:
            index = None
        buf = nth_buffer(ctx, blk, index, "write", "buffer_index")
        dtype = attrs[1] if len(attrs) > 1 else None
        try:
            check_dtype(dtype)
        except (TypeError, ValueError):
            raise ctx.error(subj, f"{dtype!r} is not a scalar type", 'use e.g. "float16", '
                            '"float64" or "int32"', highlight=[blk.name_hint]) from None
        if "x" in str(dtype):
            raise ctx.error(subj, f"{dtype!r} is a vector type", "use a scalar type",
                            highlight=[blk.name_hint])
        if alloc_site(ctx.func, ctx.index, buf) is None:
            raise ctx.error(subj, f"{buf.name} is a parameter of the function, whose type is "
                            "fixed by the array the caller passes", "set the type of an "
                            "intermediate buffer (cache_write first)", highlight=[blk.name_hint])
        if dtype == buf.dtype:
            return Result(None, [])
        new = buf.replace(dtype=dtype)
        return Result(ctx.func.replace(body=_SetDType(buf, new).visit(ctx.func.body)), [])

    def check_attrs(self, attrs) -> None:
        super().check_attrs(attrs)
        if not (isinstance(attrs[0], int) and not isinstance(attrs[0], bool)) and \
                not (isinstance(attrs[0], str) and attrs[0].isdigit() and len(attrs[0]) < 6):
            raise TraceError(f"UnsafeSetDType's buffer_index must be a small integer, got "
                             f"{attrs[0]!r}"[:120])

    def python_args(self, inputs, attrs, dialect):
        self.check_attrs(list(attrs))
        index = str(int(attrs[0]))
        dtype = py_str(attrs[1], "UnsafeSetDType's dtype")
        if dialect == "engine":
            return [fmt(inputs[0]), index, dtype]
        return [f"block={fmt(inputs[0])}", f"buffer_index={index}", f"dtype={dtype}"]
