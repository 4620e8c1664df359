"""Loop kinds and annotations: parallel, vectorize, unroll, annotate, unannotate."""
from __future__ import annotations

from engine.arith import is_quasi_affine
from engine.ir import expr as E
from engine.ir.functor import uses_var
from engine.ir.node import AttrMap
from engine.ir.stmt import Block, For, ForKind, IterType

from ..registry import Ctx, Primitive, Result, fmt, fmt_literal, register
from ..tree import replace_stmts
from ._common import expect_loop, is_reduction_block, name_of, subject_of
from .disjoint import cells_disjoint, iterations_disjoint


def check_data_parallel(ctx: Ctx, loop: For, what: str, private=None) -> None:
    """TVM's rule for parallel/vectorize: every block under the loop binds the loop only
    to data-parallel (spatial) axes. In addition (for correctness of what we run), a
    block that accumulates (a reduction, or an in-place update) must write disjoint
    elements in different iterations of the loop, or the iterations would race (the
    test, under the block's ``T.where``, is :func:`.disjoint.iterations_disjoint`)."""
    lv = loop.loop_var
    name = lv.name
    for b in ctx.index.blocks_under(loop):
        r = ctx.index.realize.get(id(b))
        if r is None:
            continue
        for iv, val in zip(b.iter_vars, r.iter_values):
            if not is_quasi_affine(val):
                raise ctx.error(f"loop {name}", f"block {b.name_hint} binds its axis "
                                f"{iv.var.name} to {val}, which is not an affine expression "
                                f"of its loops (TVM's rule: the blocks under a loop that "
                                f"is to {what} are bound affinely)", "",
                                highlight=[name, b.name_hint])
            if iv.iter_type is IterType.REDUCE and uses_var(val, lv):
                raise ctx.error(f"loop {name}", f"loop {name} is bound to the reduction axis "
                                f"{iv.var.name} of block {b.name_hint}, so its iterations "
                                f"update the same element and cannot {what}",
                                "only loops over data-parallel (spatial) axes can "
                                f"{what}; choose a loop over an output index",
                                highlight=[name, b.name_hint])
        accumulates = is_reduction_block(b) or bool(
            {id(x.buffer) for x in b.reads} & {id(x.buffer) for x in b.writes})
        if accumulates and not iterations_disjoint(ctx.index, loop, b, r):
            raise ctx.error(f"loop {name}", f"different iterations of loop {name} would "
                            f"update the same elements of block {b.name_hint} at the same "
                            f"time, so they cannot {what}", "choose a loop that indexes the "
                            f"output of {b.name_hint} one-to-one (e.g. before compute_at "
                            "duplicated its work)", highlight=[name, b.name_hint])
    _check_shared_buffers(ctx, loop, what, private)


def _shared_outside(ctx: Ctx, loop: For, buf) -> bool:
    """Is ``buf`` seen outside ``loop``'s subtree (a parameter, or accessed by a block
    elsewhere)? A buffer used only inside the loop is made private to each iteration by
    lowering, so iterations do not share it."""
    if any(p is buf for p in ctx.func.params):
        return True
    return any(any(x.buffer is buf for x in (*b.reads, *b.writes))
               for b in ctx.index.all_blocks() if not ctx.index.contains(loop, b))


def _accesses(ctx: Ctx, loop: For, buf) -> list:
    """``(block, realize, indices)`` of every load and store of ``buf`` by the blocks under
    ``loop`` (their bodies and inits)."""
    from engine.ir.functor import collect
    from engine.ir.stmt import BufferStore
    out = []
    for b in ctx.index.blocks_under(loop):
        r = ctx.index.realize.get(id(b))
        if r is None:
            continue
        for part in (b.body, b.init):
            if part is None:
                continue
            for x in collect(part, (E.BufferLoad, BufferStore)):
                if x.buffer is buf:
                    out.append((b, r, x.indices))
    return out


def _check_shared_buffers(ctx: Ctx, loop: For, what: str, private=None) -> None:
    """Iterations that run at the same time must not touch the same element of a buffer
    they share when one of them stores it (a race: ``B[0] = A[vi]``, or a scan
    ``B[vi] = B[vi - 1] + A[vi]``): for every buffer stored under the loop and seen outside
    it, :func:`.disjoint.cells_disjoint` must show that each iteration keeps to its own
    elements. (A buffer used only inside the loop is private to each iteration, unless
    ``private(buf)`` says otherwise: on a GPU a "shared" buffer is one per thread block.)"""
    name = loop.loop_var.name
    stored = {}
    for b in ctx.index.blocks_under(loop):
        for w in b.writes:
            stored.setdefault(id(w.buffer), (w.buffer, b))
    for buf, writer in stored.values():
        if not _shared_outside(ctx, loop, buf) and (private is None or private(buf)):
            continue
        if not cells_disjoint(ctx.index, loop, _accesses(ctx, loop, buf)):
            raise ctx.error(f"loop {name}", f"different iterations of loop {name} could "
                            f"touch the same element of {buf.name} while one of them stores "
                            f"it (block {writer.name_hint}), so they cannot {what}", "",
                            highlight=[name, writer.name_hint])


def _set_kind(ctx: Ctx, loop: For, kind: ForKind) -> Result:
    """The loop with its new kind; a thread binding is dropped, as TVM's primitives drop
    it (the loop keeps its meaning: a bound loop means a serial one)."""
    new = loop.replace(kind=kind, thread_tag="")
    return Result(replace_stmts(ctx.func, {loop: new}), [])


@register
class Parallel(Primitive):
    kind = "Parallel"
    attr_kinds = ()
    method = "parallel"

    def call(self, sch, loop):
        """Run the iterations of a loop in parallel threads.

        It requires: 1) every block under the loop binds the loop only to data-parallel
        (spatial) axes — a loop bound to a reduction axis cannot be parallel; 2) no
        reduction block under it repeats the same elements in every iteration; 3) no
        loop enclosing it or inside it is already parallel.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("C"): ...

        Call::

            i, j = sch.get_loops(sch.get_block("C"))
            sch.parallel(i)

        After::

            for i in T.parallel(128):
                for j in range(128):
                    with T.block("C"): ...
        """
        sch._run(self, [loop], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        name = loop.loop_var.name
        check_data_parallel(ctx, loop, "run in parallel")
        for a in ctx.index.ancestors(loop):
            if isinstance(a, For) and a.kind is ForKind.PARALLEL:
                raise ctx.error(f"loop {name}", f"it is inside loop {a.loop_var.name}, which "
                                "is already parallel (nested parallel loops are not "
                                "supported)", "parallelize only the outer loop",
                                highlight=[name, a.loop_var.name])
        from ..tree import iter_stmts
        for s in iter_stmts(loop.body):
            if isinstance(s, For) and s.kind is ForKind.PARALLEL:
                raise ctx.error(f"loop {name}", f"loop {s.loop_var.name} inside it is "
                                "already parallel (nested parallel loops are not supported)",
                                "parallelize only one loop of a nest",
                                highlight=[name, s.loop_var.name])
        return _set_kind(ctx, loop, ForKind.PARALLEL)


@register
class Vectorize(Primitive):
    kind = "Vectorize"
    attr_kinds = ()
    method = "vectorize"

    def call(self, sch, loop):
        """Vectorize a loop (its iterations become the lanes of SIMD instructions).

        It requires: 1) every block under the loop binds the loop only to data-parallel
        (spatial) axes; 2) no reduction block under it repeats the same elements in
        every iteration; 3) the loop has a constant extent. The backend legalises
        what it cannot vectorize (it falls back to a scalar loop, never wrong code).

        Before::

            for i, j_0, j_1 in T.grid(128, 32, 4):
                with T.block("C"): ...

        Call::

            sch.vectorize(j1)

        After::

            for i, j_0 in T.grid(128, 32):
                for j_1 in T.vectorized(4):
                    with T.block("C"): ...
        """
        sch._run(self, [loop], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        if E.as_const_int(loop.extent) is None:
            raise ctx.error(subject_of(loop), "a vectorized loop needs a constant extent",
                            "split it with a constant inner factor and vectorize that",
                            highlight=[loop.loop_var.name])
        check_data_parallel(ctx, loop, "become vector lanes")
        return _set_kind(ctx, loop, ForKind.VECTORIZED)


@register
class Unroll(Primitive):
    kind = "Unroll"
    attr_kinds = ()
    method = "unroll"

    def call(self, sch, loop):
        """Unroll a loop (always legal: the iterations keep their order).

        It requires: 1) ``loop`` is a valid loop handle.

        Before::

            for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):
                with T.block("Y"): ...

        Call::

            sch.unroll(j1)

        After::

            for i, j_0, k in T.grid(128, 32, 128):
                for j_1 in T.unroll(4):
                    with T.block("Y"): ...
        """
        sch._run(self, [loop], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        return _set_kind(ctx, loop, ForKind.UNROLLED)


#: how deep and how long an annotation value's lists and dicts may be
_ANN_DEPTH = 8
_ANN_ITEMS = 256


def _check_ann_value(ctx: Ctx, v, depth: int = 0):
    """An annotation value in its IR form: a str, int, float or bool, a list of values (a
    tuple) or a dict of them with string keys (an :class:`~engine.ir.AttrMap`), as TVM's
    ``sch.annotate(loop, "k", {"arr": [0, 0], "key": 3})``."""
    if isinstance(v, (bool, int, float, str)):
        if isinstance(v, float) and v != v:
            raise ctx.error("", "an annotation value cannot be NaN", "")
        return v
    if depth < _ANN_DEPTH and isinstance(v, (list, tuple)) and len(v) <= _ANN_ITEMS:
        return tuple(_check_ann_value(ctx, x, depth + 1) for x in v)
    if depth < _ANN_DEPTH and isinstance(v, (dict, AttrMap)) and len(v) <= _ANN_ITEMS:
        if not all(isinstance(k, str) for k in v.keys()):
            raise ctx.error("", "the keys of an annotation dict must be strings, got "
                            f"{list(v.keys())!r}"[:200], "")
        return AttrMap((k, _check_ann_value(ctx, x, depth + 1)) for k, x in v.items())
    raise ctx.error("", "annotation values must be str, int, float or bool, or lists and "
                    f"dicts of them, got {v!r}"[:300], "")


def _target(ctx: Ctx, node):
    if not isinstance(node, (For, Block)):
        raise ctx.error(subject_of(node), "expected a block or loop handle", "")
    if isinstance(node, Block) and node is ctx.index.root_block:
        raise ctx.error("block root", "the root block cannot be annotated", "")
    return node


@register
class Annotate(Primitive):
    kind = "Annotate"
    attr_kinds = (("ann_key", "str"),)
    method = "annotate"
    literal_inputs = (1,)

    def call(self, sch, block_or_loop, ann_key: str, ann_val):
        """Annotate a block or a loop with a key/value pair (shown in the script).

        It requires: 1) ``ann_key`` is a non-empty string; 2) ``ann_val`` is a str,
        int, float or bool, or a list or dict (string keys) of such values. An existing
        value for the key is replaced.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("C"): ...

        Call::

            i, j = sch.get_loops(sch.get_block("C"))
            sch.annotate(i, "pragma_auto_unroll_max_step", 16)

        After::

            for i in T.serial(128, annotations={"pragma_auto_unroll_max_step": 16}):
                for j in range(128):
                    with T.block("C"): ...
        """
        sch._run(self, [block_or_loop, ann_val], [ann_key])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        node = _target(ctx, inputs[0])
        if len(inputs) != 2 or len(attrs) != 1:
            raise ctx.error(subject_of(node), "annotate needs a key and a value", "")
        key = attrs[0]
        if not isinstance(key, str) or not key:
            raise ctx.error(subject_of(node), f"the annotation key must be a non-empty string, "
                            f"got {key!r}", 'e.g. "pragma_unroll_explicit"',
                            highlight=[name_of(node)])
        val = _check_ann_value(ctx, inputs[1])
        anns = tuple((k, v) for k, v in node.annotations if k != key) + ((key, val),)
        return Result(replace_stmts(ctx.func, {node: node.replace(annotations=anns)}), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0), fmt_literal(inputs[1])]
        return [f"block_or_loop={fmt(inputs[0])}", f"ann_key={self.attr(attrs, 0)}",
                f"ann_val={fmt_literal(inputs[1])}"]


@register
class Unannotate(Primitive):
    kind = "Unannotate"
    attr_kinds = (("ann_key", "str"),)
    method = "unannotate"

    def call(self, sch, block_or_loop, ann_key: str):
        """Remove an annotation from a block or a loop.

        It requires: 1) the block or loop has an annotation with key ``ann_key``.

        Before::

            for i in T.serial(128, annotations={"pragma_auto_unroll_max_step": 16}): ...

        Call::

            sch.unannotate(i, "pragma_auto_unroll_max_step")

        After::

            for i in range(128): ...
        """
        sch._run(self, [block_or_loop], [ann_key])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        node = _target(ctx, inputs[0])
        key = attrs[0] if attrs else None
        if not any(k == key for k, _ in node.annotations):
            have = ", ".join(k for k, _ in node.annotations) or "none"
            raise ctx.error(subject_of(node), f"it has no annotation {key!r} (it has: {have})",
                            "", highlight=[name_of(node)])
        anns = tuple((k, v) for k, v in node.annotations if k != key)
        return Result(replace_stmts(ctx.func, {node: node.replace(annotations=anns)}), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0)]
        return [f"block_or_loop={fmt(inputs[0])}", f"ann_key={self.attr(attrs, 0)}"]
