"""bind: a loop becomes a GPU thread axis (TVM's ``Bind``).

A loop bound to ``blockIdx.x`` runs its iterations as the thread blocks of a grid, one bound
to ``threadIdx.x`` as the threads of a block, one bound to ``vthread.x`` as virtual threads
(each thread runs them one after the other). In the program a bound loop keeps a serial
loop's meaning (the interpreter runs it so); the GPU build runs its iterations at the same
time, so binding is a claim that they are independent — the rules below check it.

The kernel of a bound loop is the nest under the outermost bound loop enclosing it (or
under itself): every loop bound to one axis in a kernel has the same extent, since a launch
has one size per axis.
"""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.stmt import THREAD_TAGS, For, ForKind, IterType
from engine.ir.functor import uses_var

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import iter_stmts
from ._common import expect_loop
from .annotations import check_data_parallel

#: CUDA's limits on a launch (the programming guide's table of technical specifications,
#: every compute capability the engine targets)
MAX_THREADS_PER_BLOCK = 1024
MAX_EXTENT = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64,
              "blockIdx.x": 2 ** 31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535}


def thread_kind(tag: str) -> str:
    """"blockIdx", "threadIdx" or "vthread": the level of a thread axis."""
    return tag.split(".", 1)[0]


def is_private(tag: str, buf) -> bool:
    """Does each iteration of a loop bound to ``tag`` get its own copy of ``buf`` (a buffer
    used only under the loop)? A "local" buffer is one per thread; a "shared" one is one
    per thread block; a global buffer is one for the whole grid."""
    scope = buf.scope.split(".", 1)[0]
    if scope == "local":
        return True
    return scope == "shared" and thread_kind(tag) == "blockIdx"


def kernel_root(ctx: Ctx, loop: For) -> For:
    """The outermost loop among ``loop``'s bound ancestors, else ``loop`` itself."""
    root = loop
    for a in ctx.index.ancestors(loop):
        if isinstance(a, For) and a.kind is ForKind.THREAD_BINDING:
            root = a
    return root


def bound_loops(stmt) -> list[For]:
    """Every bound loop in ``stmt``'s subtree (``stmt`` included), in program order."""
    return [s for s in iter_stmts(stmt) if isinstance(s, For) and
            s.kind is ForKind.THREAD_BINDING]


def _check_free(ctx: Ctx, loop: For, tag: str) -> None:
    name = loop.loop_var.name
    subj, hl = f"loop {name}", [name]
    if loop.kind is ForKind.THREAD_BINDING:
        raise ctx.error(subj, f"loop {name} is already bound to {loop.thread_tag} (a loop is "
                        "bound once)", "bind another loop; split this one first to bind "
                        "its parts to two axes", highlight=hl)
    if loop.kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
        raise ctx.error(subj, f"loop {name} is {loop.kind.value}; a loop has one kind",
                        "bind a serial loop", highlight=hl)
    if not E.is_const_int(loop.min, 0):
        raise ctx.error(subj, f"loop {name} starts at {loop.min}, not 0 (a thread index "
                        "starts at 0)", "bind a loop that starts at 0", highlight=hl)
    ext = E.as_const_int(loop.extent)
    if ext is None and thread_kind(tag) != "blockIdx":
        raise ctx.error(subj, f"loop {name} has the symbolic extent {loop.extent}; a thread "
                        "block has a constant number of threads",
                        "split the loop by a constant and bind the inner part", highlight=hl)
    limit = MAX_EXTENT.get(tag)
    if ext is not None and limit is not None and ext > limit:
        raise ctx.error(subj, f"loop {name} has {ext} iterations, but {tag} goes up to "
                        f"{limit}", f"split it and bind a part of at most {limit}",
                        highlight=hl)


def _check_nesting(ctx: Ctx, loop: For, tag: str) -> None:
    """No other loop on ``loop``'s path binds ``tag``; the grid encloses the threads; no
    CPU-parallel loop is on the path (a GPU kernel has no CPU threads)."""
    name = loop.loop_var.name
    level = thread_kind(tag)
    above = [a for a in ctx.index.ancestors(loop) if isinstance(a, For)]
    below = [s for s in iter_stmts(loop.body) if isinstance(s, For)]
    for other, where in [(a, "encloses") for a in above] + [(b, "is inside") for b in below]:
        oname = other.loop_var.name
        hl = [name, oname]
        if other.kind is ForKind.PARALLEL:
            raise ctx.error(f"loop {name}", f"loop {oname}, which {where} it, is a CPU "
                            "parallel loop; a GPU kernel has no CPU threads",
                            f"remove the parallel loop (bind {oname} instead)", highlight=hl)
        if other.kind is not ForKind.THREAD_BINDING:
            continue
        if other.thread_tag == tag:
            outer, inner = (other, loop) if where == "encloses" else (loop, other)
            why = _nested_same_axis_conflict(ctx, outer, inner)
            if why:
                raise ctx.error(f"loop {name}", f"loop {oname}, which {where} it, is already "
                                f"bound to {tag}, and {why}", "bind each axis once on a "
                                "path, or bind the inner loop of a stage computed for the "
                                "whole thread block (a cooperative fetch: cache_read to "
                                '"shared", compute_at, split, bind)', highlight=hl)
            continue
        olevel = thread_kind(other.thread_tag)
        inner_level, outer_level = (level, olevel) if where == "encloses" else (olevel, level)
        if outer_level != "blockIdx" and inner_level == "blockIdx":
            raise ctx.error(f"loop {name}", f"a blockIdx loop would be inside the "
                            f"{'threadIdx' if 'threadIdx' in (level, olevel) else 'vthread'}"
                            f" loop {oname if where == 'encloses' else name}: the grid's "
                            "blocks enclose their threads", "bind the outer loops to blockIdx "
                            "and the inner ones to threadIdx", highlight=hl)


def _nested_same_axis_conflict(ctx: Ctx, outer: For, inner: For) -> str:
    """Why ``inner`` cannot share ``outer``'s thread axis ("" when it can).

    On the GPU both loops become the same thread index, so each thread runs its own part of
    the inner loop once, not the whole inner loop once per iteration of the outer one. That
    is the program's meaning when the inner loop is the same in every outer iteration (it
    does not use the outer variable, nor do the loops between them) and what it computes
    does not depend on the rest of the outer loop's body: no other statement under
    ``outer`` writes a buffer the inner loop reads or writes (TVM's cooperative fetch)."""
    ov = outer.loop_var
    path = [a for a in ctx.index.ancestors(inner) if ctx.index.contains(outer, a) and
            a is not outer]
    for a in path:
        if isinstance(a, For) and (uses_var(a.min, ov) or uses_var(a.extent, ov)):
            return f"loop {a.loop_var.name} between them depends on {ov.name}"
    from engine.ir.functor import collect_vars
    if any(v is ov for v in collect_vars(inner)):
        return f"what runs under loop {inner.loop_var.name} depends on {ov.name}"
    inside = ctx.index.blocks_under(inner)
    ids = {id(b) for b in inside}
    touched = {id(r.buffer) for b in inside for r in (*b.reads, *b.writes)}
    for b in ctx.index.blocks_under(outer):
        if id(b) in ids:
            continue
        for w in b.writes:
            if id(w.buffer) in touched:
                return (f"block {b.name_hint} under loop {ov.name} writes {w.buffer.name}, "
                        f"which the blocks under loop {inner.loop_var.name} use")
    return ""


def _check_kernel(ctx: Ctx, loop: For, tag: str) -> None:
    """Across the kernel the bound loop belongs to: one extent per axis, at most 1024
    threads per block."""
    name = loop.loop_var.name
    root = kernel_root(ctx, loop)
    extents: dict[str, tuple] = {}
    for b in bound_loops(root) + [loop]:
        btag = tag if b is loop else b.thread_tag
        ext = b.extent
        seen = extents.get(btag)
        if seen is None:
            extents[btag] = (ext, b)
            continue
        same = E.as_const_int(ext) is not None and E.as_const_int(ext) == E.as_const_int(
            seen[0]) or ext is seen[0]
        if not same and b is not seen[1]:
            first = seen[1].loop_var.name
            raise ctx.error(f"loop {name}", f"loop {b.loop_var.name} would be bound to {btag} "
                            f"with {ext} iterations, but loop {first} of the same kernel is "
                            f"bound to it with {seen[0]} (a launch has one size per axis)",
                            f"split loop {name} so that its bound part has {seen[0]} "
                            "iterations, or bind another axis",
                            highlight=[name, first])
    threads = 1
    for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        if t in extents:
            threads *= E.as_const_int(extents[t][0]) or 1
    if threads > MAX_THREADS_PER_BLOCK:
        sizes = " × ".join(f"{E.as_const_int(extents[t][0])} ({t})"
                           for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z")
                           if t in extents)
        raise ctx.error(f"loop {name}", f"a thread block would have {sizes} = {threads} "
                        f"threads; a GPU runs at most {MAX_THREADS_PER_BLOCK} per block",
                        "bind smaller loops to threadIdx (split them first)",
                        highlight=[name])


def _check_reduction(ctx: Ctx, loop: For, tag: str) -> None:
    lv, name = loop.loop_var, loop.loop_var.name
    for b in ctx.index.blocks_under(loop):
        r = ctx.index.realize.get(id(b))
        if r is None:
            continue
        for iv, val in zip(b.iter_vars, r.iter_values):
            if iv.iter_type is IterType.REDUCE and uses_var(val, lv):
                raise ctx.error(f"loop {name}", f"loop {name} runs the reduction axis "
                                f"{iv.var.name} of block {b.name_hint}; bound to {tag} its "
                                "iterations would add into the same element at the same "
                                "time (a cross-thread reduction, which the engine does not "
                                "build)", "bind a loop over the output's indices; keep the "
                                "reduction loops serial inside the thread",
                                highlight=[name, b.name_hint])


@register
class Bind(Primitive):
    kind = "Bind"
    attr_kinds = (("thread_axis", "str"),)
    method = "bind"

    def call(self, sch, loop, thread_axis: str):
        """Bind a loop to a GPU thread axis: ``blockIdx.x/y/z`` (the thread blocks of the
        grid), ``threadIdx.x/y/z`` (the threads of a block) or ``vthread.x/y/z`` (virtual
        threads: each thread runs them in turn; ``"vthread"`` is ``vthread.x``).

        It requires: 1) the loop is serial, starts at 0 and is not bound yet (a loop is
        bound once); 2) no loop on its path is CPU-parallel, blockIdx loops enclose
        threadIdx/vthread loops, and a loop on its path bound to the same axis is allowed
        only for a stage computed for the whole thread block (the cooperative fetch: the
        inner loop does not depend on the outer one, and nothing else under the outer loop
        writes what the inner one uses) — both become the same thread index; 3) every loop bound to one axis
        in the kernel has the same extent (a launch has one size per axis), threadIdx and
        vthread loops have constant extents, a block has at most 1024 threads (threadIdx.z
        at most 64); 4) the blocks under the loop bind it only to spatial axes (a reduction
        loop cannot be bound: the engine builds no cross-thread reduction) with affine
        bindings; 5) its iterations are independent: two iterations never touch the same
        element of a buffer they share while one stores it ("local" buffers are per
        thread, "shared" ones per thread block).

        Before::

            for i in range(1024):
                with T.block("C"):
                    vi = T.axis.spatial(1024, i)
                    C[vi] = A[vi] + B[vi]

        Call::

            i0, i1 = sch.split(sch.get_loops("C")[0], [None, 128])
            sch.bind(i0, "blockIdx.x")
            sch.bind(i1, "threadIdx.x")

        After::

            for i_0 in T.thread_binding(8, thread="blockIdx.x"):
                for i_1 in T.thread_binding(128, thread="threadIdx.x"):
                    with T.block("C"):
                        vi = T.axis.spatial(1024, i_0 * 128 + i_1)
                        C[vi] = A[vi] + B[vi]
        """
        sch._run(self, [loop], [thread_axis])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0] if inputs else None)
        tag = attrs[0] if attrs else None
        if tag == "vthread":
            tag = "vthread.x"
        if not isinstance(tag, str) or tag not in THREAD_TAGS:
            raise ctx.error(f"loop {loop.loop_var.name}", f"unknown thread axis {tag!r}"[:120],
                            "use one of " + ", ".join(THREAD_TAGS),
                            highlight=[loop.loop_var.name])
        _check_free(ctx, loop, tag)
        _check_nesting(ctx, loop, tag)
        _check_kernel(ctx, loop, tag)
        _check_reduction(ctx, loop, tag)
        check_data_parallel(ctx, loop, f"run as {tag} threads",
                            private=lambda buf: is_private(tag, buf))
        from ..tree import replace_stmts
        new = loop.replace(kind=ForKind.THREAD_BINDING, thread_tag=tag)
        return Result(replace_stmts(ctx.func, {loop: new}), [])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0)]
        return [f"loop={fmt(inputs[0])}", f"thread_axis={self.attr(attrs, 0)}"]
