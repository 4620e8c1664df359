"""Buffer-level edits: unsafe_set_dtype (the element type of an intermediate buffer),
annotate_buffer_access (a block's declared region of a buffer) and unsafe_hide_buffer_access
(read regions of a buffer no block writes left out of a block's ``T.reads``)."""
from __future__ import annotations

import ast
import inspect
from typing import Any

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import BufferRegion, Range
from engine.ir.dtype import check_dtype
from engine.ir.functor import Mutator, collect, substitute
from engine.ir.stmt import BufferStore, MatchBufferRegion
from engine.script.pyast import parse_python

from ..error import ScheduleError, TraceError
from ..registry import (Ctx, Primitive, Result, fmt, py_int, py_int_list, py_str,
                        register, unquote)
from ..tree import replace_stmts
from ._common import expect_block, is_int
from .buffers import alloc_site, buffer_index_of, nth_buffer, with_views
from .index_map_check import IndexMapError
from .layout import expr_text, parse_index_map, tvm_index_map_from_json


class _SetDType(Mutator):
    """Every access to ``old`` (and to its ``T.match_buffer`` views, ``views``: old view
    id -> the view of the new type) moved to the new buffer: stores cast to the new type,
    loads cast back to the type the expression had."""

    def __init__(self, old, new, views: dict | None = None):
        self.old = old
        self.map = {id(old): new, **(views or {})}

    def visit_buffer(self, buf):
        return self.map.get(id(buf), buf)

    def visit_BufferLoad(self, e):
        idx = tuple(self.visit(i) for i in e.indices)
        new = self.map.get(id(e.buffer))
        if new is None:
            return E.BufferLoad(e.buffer, idx) if any(a is not b for a, b in
                                                      zip(idx, e.indices)) else e
        return E.Cast(self.old.dtype, E.BufferLoad(new, idx))

    def visit_BufferStore(self, s):
        new = self.map.get(id(s.buffer))
        if new is None:
            return self.generic_visit(s)
        return BufferStore(new, E.Cast(new.dtype, self.visit(s.value)),
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
        that the values fit). The ``T.match_buffer`` views of the buffer take the new type
        too (their accesses cast the same way).

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
        views = with_views(ctx.func.body, buf, dtype=dtype)   # a view has its source's dtype
        return Result(ctx.func.replace(body=_SetDType(buf, new, views).visit(ctx.func.body)),
                      [])

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


# ------------------------------------------------------------------ annotate_buffer_access
_EXAMPLE = 'e.g. "lambda vi, vj: [(vi - 1, vi + 2), (0, 8)]"'


def parse_ranges(text: Any) -> tuple[list, list]:
    """``"lambda vi, vj: [(vi, vi + 2), vj]"`` -> ([vi, vj], [(vi, vi + 2), (vj, vj + 1)]):
    each item a ``(begin, end)`` pair or one index (the point ``(i, i + 1)``), as TVM's
    ``gen_new_ranges``; or TVM's IndexMap JSON of the flattened pairs. Parsed, never
    evaluated: the index map's operators only."""
    if not isinstance(text, str):
        raise IndexMapError(f"the ranges must be a lambda string, got {type(text).__name__}")
    if text.lstrip().startswith("{"):  # TVM's IndexMap object: (begin, end) flattened
        params, exprs = tvm_index_map_from_json(text)
        if len(exprs) % 2:
            raise IndexMapError("the IndexMap of the ranges must give (begin, end) pairs")
        return params, [(simplify(b), simplify(e)) for b, e in zip(exprs[::2], exprs[1::2])]
    try:
        tree = parse_python(text.strip(), mode="eval")
    except SyntaxError as e:
        raise IndexMapError(f"the ranges are not valid Python ({e.msg}); {_EXAMPLE}") from None
    except RecursionError:
        raise IndexMapError("the ranges are nested too deeply") from None
    lam = tree.body
    if not isinstance(lam, ast.Lambda) or not isinstance(lam.body, (ast.List, ast.Tuple)):
        raise IndexMapError(f"the ranges must be a lambda returning a list; {_EXAMPLE}")
    flat = []
    for item in lam.body.elts:
        if isinstance(item, (ast.Tuple, ast.List)):
            if len(item.elts) != 2:
                raise IndexMapError("each range must be (begin, end) or one index")
            flat.extend(item.elts)
        else:
            flat.extend([item, ast.BinOp(item, ast.Add(), ast.Constant(1))])
    lam.body = ast.Tuple(flat, ast.Load())
    params, exprs = parse_index_map(ast.unparse(lam))
    return params, [(simplify(b), simplify(e)) for b, e in zip(exprs[::2], exprs[1::2])]


def ranges_text(params: list, ranges: list) -> str:
    """The canonical lambda of ``ranges`` (TVM's ``gen_new_ranges`` form)."""
    items = ", ".join(f"({expr_text(b)}, {expr_text(e)})" for b, e in ranges)
    return f"lambda {', '.join(p.name for p in params)}: [{items}]"


def _normal_ranges(gen: Any) -> str:
    if isinstance(gen, str):
        return ranges_text(*parse_ranges(gen))
    if not callable(gen):
        raise IndexMapError(f"gen_new_ranges must be a lambda or a lambda string; {_EXAMPLE}")
    try:
        names = list(inspect.signature(gen).parameters)
    except (TypeError, ValueError):
        raise IndexMapError("cannot read the parameters of gen_new_ranges; pass a lambda "
                            "string") from None
    params = [E.Var(n, "int32") for n in names]
    try:
        out = gen(*params)
    except Exception as e:  # noqa: BLE001 - the user's function
        raise IndexMapError(f"calling gen_new_ranges failed: {e}") from None
    if not isinstance(out, (list, tuple)):
        raise IndexMapError(f"gen_new_ranges must return a list of ranges; {_EXAMPLE}")
    ranges = []
    for item in out:
        pair = tuple(item) if isinstance(item, (list, tuple)) else (item, item + 1)
        if len(pair) != 2:
            raise IndexMapError("each range must be (begin, end) or one index")
        ranges.append(tuple(E.convert(x) for x in pair))
    text = ranges_text(params, ranges)
    parse_ranges(text)  # only the allowed operators
    return text


@register
class AnnotateBufferAccess(Primitive):
    kind = "AnnotateBufferAccess"
    attr_kinds = ()
    method = "annotate_buffer_access"

    def call(self, sch, block, buffer_index, buf_type: str, gen_new_ranges):
        """Declare the region a block reads or writes of one buffer, replacing the one
        inferred from its accesses (TVM: for accesses the analysis cannot bound, e.g.
        data-dependent ones). The block gets the annotation ``explicit_read_region`` (or
        ``explicit_write_region``) listing the buffer's index, and later primitives
        (compute_at, cache_read, ...) use the declared region. Like TVM it does not check
        that the region covers what the block accesses: a region too small makes those
        primitives compute too little (what the block reads out of its buffer is still
        proven in bounds when the program is built).

        It requires: 1) ``buffer_index`` names a buffer the block reads (``buf_type``
        "read") or writes ("write"): an index into ``T.reads``/``T.writes`` or the buffer's
        name; 2) ``gen_new_ranges`` (a lambda or lambda string) takes one parameter per
        block axis and returns one ``(begin, end)`` pair (or one index, the point
        ``(i, i + 1)``) per buffer dimension, using the index map's operators.

        Before::

            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[vi, vj])
                C[vi, vj] = B[vi, vj] + T.float32(1)

        Call::

            sch.annotate_buffer_access(sch.get_block("C"), 0, "read",
                                       "lambda vi, vj: [(vi, vi + 2), (0, 8)]")

        After::

            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[vi:vi + 2, 0:8])
                T.block_attr({"explicit_read_region": [0]})
                C[vi, vj] = B[vi, vj] + T.float32(1)
        """
        if buf_type not in ("read", "write"):
            raise ScheduleError(self.method, "buf_type", f'buf_type must be "read" or "write", '
                                f"got {buf_type!r}"[:120], "")
        index = buffer_index_of(sch, block, buffer_index, buf_type, self.method,
                                "buffer_index")
        try:
            text = _normal_ranges(gen_new_ranges)
        except IndexMapError as e:
            raise ScheduleError(self.method, "gen_new_ranges", str(e), "") from None
        sch._run(self, [block, index, 0 if buf_type == "read" else 1, text], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        subj, hl = f"block {blk.name_hint}", [blk.name_hint]
        if len(inputs) != 4:
            raise ctx.error(subj, "annotate_buffer_access needs the block, the buffer index, "
                            "its kind and the ranges", "")
        index, btype, text = inputs[1], inputs[2], inputs[3]
        if btype not in (0, 1) or isinstance(btype, bool):
            raise ctx.error(subj, f"the buffer kind must be 0 (read) or 1 (write), got "
                            f"{btype!r}"[:80], "", highlight=hl)
        kind = "read" if btype == 0 else "write"
        buf = nth_buffer(ctx, blk, index, kind, "buffer_index")
        try:
            params, ranges = parse_ranges(text)
        except IndexMapError as e:
            raise ctx.error(subj, str(e), "") from None
        if len(params) != len(blk.iter_vars):
            raise ctx.error(subj, f"gen_new_ranges takes {len(params)} parameter(s) but the "
                            f"block has {len(blk.iter_vars)} axes", "give the lambda one "
                            "parameter per block axis", highlight=hl)
        if len(ranges) != buf.ndim:
            raise ctx.error(subj, f"gen_new_ranges gives {len(ranges)} range(s) but "
                            f"{buf.name} has {buf.ndim} dimension(s)", "give one (begin, end) "
                            "per dimension", highlight=hl)
        axes = {p: iv.var for p, iv in zip(params, blk.iter_vars)}
        region = []
        for d, (b, e) in enumerate(ranges):
            b, e = substitute(b, axes), substitute(e, axes)
            extent = simplify(e - b)
            c = E.as_const_int(extent)
            if c is not None and c <= 0:
                raise ctx.error(subj, f"range {d} of {buf.name} is empty (it ends before it "
                                "begins)", "give (begin, end) with end > begin", highlight=hl)
            region.append(Range(b, extent))
        field = "reads" if btype == 0 else "writes"
        regions = list(getattr(blk, field))
        regions[index] = BufferRegion(buf, tuple(region))
        key = f"explicit_{kind}_region"
        notes = dict(blk.annotations)
        listed = list(notes.get(key, ()))
        if index not in listed:
            listed.append(index)
        notes[key] = tuple(listed)
        new_blk = blk.replace(**{field: tuple(regions)}, annotations=tuple(notes.items()))
        return Result(replace_stmts(ctx.func, {blk: new_blk}), [])

    def python_args(self, inputs, attrs, dialect):
        if len(inputs) != 4:
            raise TraceError("AnnotateBufferAccess takes 4 inputs (block, buffer_index, "
                             "buffer_index_type, the ranges)")
        index = py_int(inputs[1], "AnnotateBufferAccess's buffer_index")
        btype = inputs[2]
        if btype not in (0, 1) or isinstance(btype, bool):
            raise TraceError(f"AnnotateBufferAccess's buffer_index_type must be 0 (read) or 1 "
                             f"(write), got {btype!r}"[:120])
        raw = unquote(inputs[3]) if isinstance(inputs[3], str) and \
            inputs[3].startswith('"') else inputs[3]
        try:
            text = ranges_text(*parse_ranges(raw))
        except IndexMapError as e:
            raise TraceError(f"AnnotateBufferAccess's ranges: {e}") from None
        kind = py_str("read" if btype == 0 else "write")
        if dialect == "engine":
            return [fmt(inputs[0]), index, kind, py_str(text)]
        return [f"block={fmt(inputs[0])}", f"buffer_index={index}", f"buf_type={kind}",
                f"gen_new_ranges={text}"]


# ------------------------------------------------------------------ unsafe_hide_buffer_access
_HIDE_TYPES = ("read", "write")
#: how many regions one unsafe_hide_buffer_access may name (a trace's integer lists are
#: at most 64 long)
MAX_HIDDEN = 64


def _buffer_family(func, buf) -> tuple[set, dict]:
    """The ids of ``buf``, the buffer it is a ``T.match_buffer`` view of (up to the buffer
    that is no view) and every view of that one (views of views included): the buffers
    that share ``buf``'s storage. Also the map view id -> its source, for naming."""
    source_of = {id(m.buffer): m.source.buffer
                 for m in collect(func.body, MatchBufferRegion, into_expressions=False)}
    root = buf
    while id(root) in source_of:
        root = source_of[id(root)]
    family = {id(root)}
    grew = True
    while grew:
        grew = False
        for view, src in source_of.items():
            if id(src) in family and view not in family:
                family.add(view)
                grew = True
    return family, source_of


def _writer_of(ctx: Ctx, buf) -> str | None:
    """How some block of the function writes ``buf`` (or storage it shares through
    ``T.match_buffer`` views), as a phrase; None when none does."""
    family, _ = _buffer_family(ctx.func, buf)
    for b in ctx.index.all_blocks():
        for w in b.writes:
            if id(w.buffer) in family:
                return f"block {b.name_hint} writes it (T.writes lists {w.buffer.name})"
    stores = [st for st in collect(ctx.func.body, BufferStore, into_expressions=False)
              if id(st.buffer) in family]
    opaque = [f for f in collect(ctx.func.body, E.BufferField)
              if f.field == "data" and id(f.buffer) in family]
    if not stores and not opaque:
        return None
    # the innermost block holding one (a nested block comes after the blocks around it)
    for b in reversed([ctx.index.root_block] + ctx.index.all_blocks()):
        for st in collect(b.body, BufferStore, into_expressions=False):
            if any(st is x for x in stores):
                return f"block {b.name_hint} stores into {st.buffer.name}"
        for f in collect(b.body, E.BufferField):
            if any(f is x for x in opaque):
                return f"block {b.name_hint} passes {f.buffer.name}.data to opaque code, " \
                       "which may write it"
    return "it is stored into"  # pragma: no cover - every statement is in the root block


@register
class UnsafeHideBufferAccess(Primitive):
    kind = "UnsafeHideBufferAccess"
    attr_kinds = ()
    method = "unsafe_hide_buffer_access"
    int_list_inputs = (2,)

    def call(self, sch, block, buf_type: str, buf_index_array):
        """Hide some of a block's read regions: they are left out of its ``T.reads`` (TVM's
        ``UnsafeHideBufferAccess``). The block's body still loads what it loaded, so the
        program computes the same thing; only what later primitives are told changes. TVM's
        use: the index buffer of a sparse computation (``A[IA[vi]]``), whose region in
        ``T.reads`` would keep ``tensorize`` from matching the block.

        The engine's dependence checks (compute_at, reorder, inlining, the cache stages,
        ...) read ``T.reads``/``T.writes`` to know which block produces what another
        consumes, so only what cannot mislead them is hidden: reads of a buffer that no
        block of the function writes (an input only read). TVM also hides write regions
        and reads of any buffer, unchecked ("unsafe"): refused here.

        It requires: 1) ``buf_type`` is "read" ("write" is refused, see above); 2)
        ``buf_index_array`` lists positions in the block's ``T.reads`` (0 the first); 3) no
        block of the function writes the buffers of those regions (nor stores into them,
        nor passes their ``.data`` to opaque code); 4) the block does not view one of them
        with ``T.match_buffer`` (the engine keeps a view's source in the block's regions).

        Before::

            for i in range(10):
                with T.block("B"):
                    vi = T.axis.spatial(10, i)
                    T.reads(A[IA[vi] % 128], IA[vi])
                    T.writes(B[vi])
                    B[vi] = A[IA[vi] % 128]

        Call::

            sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [1])

        After::

            for i in range(10):
                with T.block("B"):
                    vi = T.axis.spatial(10, i)
                    T.reads(A[IA[vi] % 128])
                    T.writes(B[vi])
                    B[vi] = A[IA[vi] % 128]
        """
        if not isinstance(buf_type, str):
            raise ScheduleError(self.method, "buf_type", 'buf_type must be "read" or '
                                f'"write", got {buf_type!r}'[:200], "")
        if not isinstance(buf_index_array, (list, tuple)) or \
                not all(is_int(x) for x in buf_index_array):
            raise ScheduleError(self.method, "buf_index_array", "buf_index_array must be a "
                                "list of positions in the block's T.reads or T.writes, such "
                                f"as [1], got {buf_index_array!r}"[:200], "")
        sch._run(self, [block, buf_type, list(buf_index_array)], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0] if inputs else None)
        subj, hl = f"block {blk.name_hint}", [blk.name_hint]
        if len(inputs) != 3:
            raise ctx.error(subj, "unsafe_hide_buffer_access needs the block, the buffer "
                            "type and the list of region positions", "")
        btype, indices = inputs[1], inputs[2]
        if btype not in _HIDE_TYPES:
            raise ctx.error(subj, 'the buffer type must be "read" or "write", got '
                            f"{btype!r}"[:200], 'use "read"', highlight=hl)
        regions = blk.reads if btype == "read" else blk.writes
        field = "T.reads" if btype == "read" else "T.writes"
        if not isinstance(indices, (list, tuple)) or len(indices) > MAX_HIDDEN:
            raise ctx.error(subj, f"buf_index_array must be a list of at most {MAX_HIDDEN} "
                            f"positions in the block's {field}", "", highlight=hl)
        for x in indices:
            if not is_int(x) or not 0 <= x < len(regions):
                have = ", ".join(f"{i}: {r.buffer.name}" for i, r in enumerate(regions)) \
                    or "nothing"
                raise ctx.error(subj, f"{x!r}"[:40] + f" is not a position in block "
                                f"{blk.name_hint}'s {field} (0 to {len(regions) - 1}; it "
                                f"lists {have})", "give positions in the list, 0 the first",
                                highlight=hl)
        if btype == "write":
            raise ctx.error(subj, "a write region is never hidden: the engine's dependence "
                            "checks (compute_at, reorder, inlining, the cache stages, ...) "
                            "read T.writes to know which block produces a buffer, and with "
                            "the write hidden they could move a reader of it before this "
                            "block writes it", "keep the write in T.writes; to declare a "
                            "narrower region use annotate_buffer_access", highlight=hl)
        hidden = sorted(set(indices))
        for i in hidden:
            buf = regions[i].buffer
            how = _writer_of(ctx, buf)
            if how is not None:
                raise ctx.error(subj, f"{buf.name} is written in this function ({how}), and "
                                "the engine's dependence checks read T.reads to know which "
                                f"blocks consume what is written: with block "
                                f"{blk.name_hint}'s read of {buf.name} hidden, a later "
                                "primitive could move it before that write", "keep the read "
                                "in T.reads; only reads of a buffer no block writes (an "
                                "input only read, such as the index buffer of a sparse "
                                "computation) can be hidden", highlight=hl)
        kept = tuple(r for i, r in enumerate(regions) if i not in hidden)
        listed = {id(r.buffer) for r in kept} | {id(w.buffer) for w in blk.writes}
        for m in blk.match_buffers:
            src = m.source.buffer
            if id(src) not in listed and any(regions[i].buffer is src for i in hidden):
                raise ctx.error(subj, f"block {blk.name_hint} views a region of {src.name} "
                                f"(T.match_buffer {m.buffer.name}), and the engine keeps a "
                                "view's source in the block's T.reads/T.writes", "hide the "
                                "reads of a buffer the block does not view", highlight=hl)
        if not hidden:
            return Result(None, [])
        return Result(replace_stmts(ctx.func, {blk: blk.replace(reads=kept)}), [])

    def python_args(self, inputs, attrs, dialect):
        if len(inputs) != 3:
            raise TraceError("UnsafeHideBufferAccess takes 3 inputs (block, buf_type, "
                             "buf_index_array)")
        btype = fmt(inputs[1]) if isinstance(inputs[1], str) and \
            inputs[1].startswith('"') else None
        if btype is None:
            raise TraceError(f"UnsafeHideBufferAccess's buf_type must be a string, got "
                             f"{inputs[1]!r}"[:120])
        indices = py_int_list(inputs[2], "UnsafeHideBufferAccess's buf_index_array")
        if dialect == "engine":
            return [fmt(inputs[0]), btype, indices]
        return [f"block={fmt(inputs[0])}", f"buf_type={btype}",
                f"buf_index_array={indices}"]
