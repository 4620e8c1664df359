"""Loop partitioning and merging: loop_partition (a loop cut into consecutive ranges, one
loop nest each) and merge (loop nests of the same shape made one)."""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.buffer import BufferRegion, Range
from engine.ir.functor import Mutator, collect_vars, post_order_visit, substitute, uses_var
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar,
                            seq)

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import as_bool, expect_loop, is_int, is_true as is_true_const, subject_of, true_const


# ------------------------------------------------------------------ loop_partition
def _first_block_name(ctx: Ctx, loop: For) -> str:
    blocks = ctx.index.child_blocks(loop)
    return blocks[0].name_hint if blocks else loop.loop_var.name


def _first_access_indices(body) -> dict:
    """Buffer -> the indices of its first access in ``body`` (a store before the loads of
    its value, as TVM's extractor visits), kept only when every index is a variable."""
    found: dict = {}
    skipped: set = set()

    def note(buf, indices):
        if buf in found or buf in skipped:
            return
        if all(isinstance(i, E.Var) for i in indices):
            found[buf] = list(indices)
        else:
            skipped.add(buf)

    class Walk(Mutator):
        def visit_BufferStore(self, s):
            note(s.buffer, s.indices)
            self.visit(s.value)
            for i in s.indices:
                self.visit(i)
            return s

        def visit_BufferLoad(self, e):
            note(e.buffer, e.indices)
            for i in e.indices:
                self.visit(i)
            return e

    Walk().visit(body)
    return found


def _narrow_regions(regions: tuple, accesses: dict, doms: dict) -> tuple:
    """Each region of a buffer accessed at plain iter vars becomes those vars' domains."""
    out = []
    for r in regions:
        idx = accesses.get(r.buffer)
        if idx is None or len(idx) != len(r.region) or not all(v in doms for v in idx):
            out.append(r)
        else:
            out.append(BufferRegion(r.buffer, tuple(doms[v] for v in idx)))
    return tuple(out)


class _Partition(Mutator):
    """One partition's copy of the loop body: fresh variables for every loop and block
    axis, every block renamed ``<name>_<loop>``, and the axis a block binds to the
    partitioned loop itself given the partition's range (with its accesses at plain axes)."""

    def __init__(self, loop_var: E.Var, dom: Range):
        self.loop_var, self.dom = loop_var, dom

    def visit_For(self, f: For):
        new_var = E.Var(f.loop_var.name, f.loop_var.dtype)
        body = substitute(f.body, {f.loop_var: new_var})
        return f.replace(loop_var=new_var, body=self.visit(body))

    def visit_BlockRealize(self, r: BlockRealize):
        blk = r.block
        hit = next((k for k, v in enumerate(r.iter_values) if v is self.loop_var), None)
        fresh = {iv.var: E.Var(iv.var.name, iv.var.dtype) for iv in blk.iter_vars}
        ivs = tuple(IterVar(fresh[iv.var], self.dom if k == hit else iv.dom, iv.iter_type)
                    for k, iv in enumerate(blk.iter_vars))
        body = self.visit(blk.body)
        init = self.visit(blk.init) if blk.init is not None else None
        reads, writes = blk.reads, blk.writes
        if hit is not None:
            doms = {iv.var: iv.dom for iv in ivs}
            accesses = _first_access_indices(substitute(blk.body, fresh))
            reads = _narrow_regions(substitute(reads, fresh), accesses, doms)
            writes = _narrow_regions(substitute(writes, fresh), accesses, doms)
        new_blk = blk.replace(iter_vars=ivs, reads=reads, writes=writes,
                              name_hint=f"{blk.name_hint}_{self.loop_var.name}",
                              body=body, init=init)
        new_blk = substitute(new_blk, fresh)
        return r.replace(iter_values=tuple(self.visit(v) for v in r.iter_values),
                         predicate=self.visit(r.predicate), block=new_blk)

    def visit_BufferStore(self, s):
        return s


def _partition_factors(ctx: Ctx, loop: For, factors: list) -> list[int]:
    """The partitions' extents (TVM's rules: one None inferred as the rest, and a last
    partition added for the rest when no factor is None)."""
    subj, hl = subject_of(loop), [loop.loop_var.name]
    extent = E.as_const_int(loop.extent)
    if extent is None or E.as_const_int(loop.min) is None:
        raise ctx.error(subj, "the loop's start and extent must be constants", "",
                        highlight=hl)
    if not factors:
        raise ctx.error(subj, "loop_partition needs at least one factor",
                        "try factors=[None, 4]", highlight=hl)
    vals = []
    for k, f in enumerate(factors):
        if isinstance(f, E.IntImm):
            f = f.value
        if f is not None and (not is_int(f) or f <= 0):
            raise ctx.error(subj, f"every factor must be a positive integer or None, got "
                            f"{f!r} at position {k}", "e.g. factors=[None, 4]", highlight=hl)
        vals.append(f)
    if sum(f is None for f in vals) > 1:
        raise ctx.error(subj, "at most one factor may be None (the inferred one)",
                        "give all but one factor, e.g. [None, 4]", highlight=hl)
    total = sum(f for f in vals if f is not None)
    if total >= extent:
        raise ctx.error(subj, f"the factors add up to {total}, not less than the loop's "
                        f"extent {extent}: no range would be left for "
                        f"{'the None factor' if None in vals else 'the last partition'}",
                        f"give factors adding up to less than {extent}", highlight=hl)
    if None in vals:
        return [extent - total if f is None else f for f in vals]
    return vals + [extent - total]


def _check_no_restarted_reduction(ctx: Ctx, loop: For) -> None:
    """Requirement 5: no block under the loop both has an init and reduces over the loop
    (each partition's copy would run the init again, losing the earlier partitions' sums;
    TVM builds that program, whose results are wrong)."""
    for blk in ctx.index.blocks_under(loop):
        if blk.init is None:
            continue
        realize = ctx.index.realize[id(blk)]
        for iv, v in zip(blk.iter_vars, realize.iter_values):
            if iv.iter_type is IterType.REDUCE and uses_var(v, loop.loop_var):
                raise ctx.error(subject_of(loop), f"it feeds the reduction axis {iv.var.name} "
                                f"of block {blk.name_hint}, which has an init: every "
                                "partition would start the reduction again",
                                f"first run decompose_reduction on block {blk.name_hint} (its "
                                "update block has no init), then partition",
                                highlight=[loop.loop_var.name, blk.name_hint])


@register
class LoopPartition(Primitive):
    kind = "LoopPartition"
    attr_kinds = (("preserve_unit_iters", "bool"),)
    required_attrs = 0
    method = "loop_partition"
    returns = "list"
    death_verb = "partitioned"

    def call(self, sch, loop, factors, preserve_unit_iters: bool = True):
        """Partition a loop into consecutive ranges, each with a copy of the loop body.

        The factors are the lengths of the ranges, in order; at most one is ``None``,
        inferred as what the others leave of the extent. When none is ``None`` a last
        range takes the rest. Each copy's loop keeps the range's start (``T.serial(3,
        7)``), its blocks are renamed ``<block>_<loop>`` and the axis bound to the loop
        gets the range as its domain; each copy sits in an opaque block
        ``<block>_<loop><k>_partition``, all in one ``<block>_<loop>_common`` block, as in
        TVM; as in TVM too, the new loops are serial (parallelize or vectorize them after).

        It requires: 1) ``loop`` is a valid loop handle without annotations; 2) its start
        and extent are constants; 3) the factors are positive integers (or one ``None``);
        4) they add up to less than the extent; 5) (beyond TVM, whose program would be
        wrong) no block under the loop with a ``T.init`` reduces over it (decompose the
        reduction first).

        Before::

            for i, j in T.grid(10, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

        Call::

            i, j = sch.get_loops(sch.get_block("B"))
            i0, i1, i2 = sch.loop_partition(i, factors=[None, 4, 3])

        After::

            with T.block("B_i_common"):
                with T.block("B_i0_partition"):
                    for i0, j in T.grid(3, 8):
                        with T.block("B_i0"):
                            vi, vj = T.axis.remap("SS", [i0, j])
                            T.reads(A[0:3, 0:8])
                            T.writes(B[0:3, 0:8])
                            B[vi, vj] = A[vi, vj] * T.float32(2)
                with T.block("B_i1_partition"):
                    for i1 in T.serial(3, 7):
                        for j in T.serial(8):
                            with T.block("B_i1"):
                                vi = T.axis.spatial((3, 7), i1)
                                ...
                with T.block("B_i2_partition"):
                    for i2 in T.serial(7, 10):
                        ...

        Returns the partitions' loops, in order.
        """
        if not isinstance(factors, (list, tuple)):
            raise ScheduleError(self.method, sch._describe(loop) if loop in sch._symbols
                                else "loop", f"factors must be a list such as [None, 4], got "
                                f"{factors!r}"[:200], "pass factors=[None, 4]")
        return list(sch._run(self, [loop, *factors], [bool(preserve_unit_iters)]))

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        if attrs:
            as_bool(ctx, attrs[0], "preserve_unit_iters")
        if loop.thread_tag:
            raise ctx.error(subject_of(loop), f"the loop is bound to {loop.thread_tag}",
                            "partition before binding the loop (TVM's rule)",
                            highlight=[loop.loop_var.name])
        if loop.annotations:
            raise ctx.error(subject_of(loop), "the loop has annotations ("
                            f"{', '.join(str(k) for k, _ in loop.annotations)})",
                            "unannotate it first", highlight=[loop.loop_var.name])
        sizes = _partition_factors(ctx, loop, list(inputs[1:]))
        _check_no_restarted_reduction(ctx, loop)
        name = f"{_first_block_name(ctx, loop)}_{loop.loop_var.name}"
        start = E.as_const_int(loop.min)
        dtype = loop.loop_var.dtype
        parts, loops = [], []
        for k, size in enumerate(sizes):
            var = E.Var(f"{loop.loop_var.name}{k}", dtype)
            dom = Range(E.const(start, dtype), E.const(size, dtype))
            body = _Partition(var, dom).visit(substitute(loop.body, {loop.loop_var: var}))
            new_loop = For(var, E.const(start, dtype), E.const(size, dtype), ForKind.SERIAL,
                           body)
            loops.append(new_loop)
            part = Block((), (), (), f"{name}{k}_partition", new_loop)
            parts.append(BlockRealize((), true_const(), part))
            start += size
        common = Block((), (), (), f"{name}_common", seq(*parts))
        func = replace_stmts(ctx.func, {loop: BlockRealize((), true_const(), common)})
        return Result(func, loops)

    def python_args(self, inputs, attrs, dialect):
        loop, factors = inputs[0], list(inputs[1:])
        if dialect == "engine":
            return [fmt(loop), f"factors={fmt(factors)}"]
        return [f"loop={fmt(loop)}", f"factors={fmt(factors)}",
                f"preserve_unit_iters={self.attr(attrs, 0, default=True)}"]


# ------------------------------------------------------------------ merge
def _chain(ctx: Ctx, loop: For, lca) -> list[For]:
    """The loops from ``loop`` up to (not including) ``lca``, innermost first."""
    out = [loop]
    for a in ctx.index.ancestors(loop):
        if a is lca:
            return out
        if isinstance(a, For):
            out.append(a)
    return out


def _lowest_common_ancestor(ctx: Ctx, loops: list[For]):
    paths = [[*reversed(ctx.index.ancestors(lp)), lp] for lp in loops]
    lca = None
    for nodes in zip(*paths):
        if all(n is nodes[0] for n in nodes):
            lca = nodes[0]
        else:
            break
    return lca


def _accesses(blk: Block, realize: BlockRealize, buf, merged: dict) -> list:
    """Every index tuple at which ``blk`` accesses ``buf``, in terms of the loops (merged
    loops replaced by the new variables)."""
    binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    seen = []

    def fn(x):
        if isinstance(x, (BufferStore, E.BufferLoad)) and x.buffer is buf:
            seen.append(tuple(substitute(substitute(i, binding), merged) for i in x.indices))

    post_order_visit(blk, fn)
    return seen


def _uses_any(e, vs) -> bool:
    return any(uses_var(e, v) for v in vs)


def _inner_bound(ctx: Ctx, e) -> tuple | None:
    """(lo, hi) of an index over the ranges of the (unmerged) loops it uses."""
    from engine.arith import bound_of
    ranges = {}
    for v in collect_vars(e):
        lp = ctx.index.loops.get(v)
        lo, n = (E.as_const_int(lp.min), E.as_const_int(lp.extent)) if lp else (None, None)
        if lo is None or n is None:
            return None
        ranges[v] = (lo, lo + n - 1)
    lo, hi = bound_of(e, ranges)
    return None if lo is None or hi is None else (lo, hi)


def _pointwise_ok(ctx: Ctx, writer: Block, users: list, buf, merged: dict,
                  new_vars: list) -> bool:
    """Requirement 4's element rule: in each merged iteration the writer makes a slice of
    ``buf`` (its dimensions given by merged loops are those loops themselves, every merged
    loop naming one; its other dimensions whole loop ranges of inner loops, unguarded) and
    the users access only inside that same slice."""
    realize = ctx.index.realize[id(writer)]
    wacc = _accesses(writer, realize, buf, merged)
    if not wacc or not is_true_const(realize.predicate):
        return False
    first = wacc[0]
    dims = []
    for d, x in enumerate(first):
        if any(x is v for v in new_vars):
            if not all(a[d] is x for a in wacc):
                return False
            dims.append(("merged", x))
        elif isinstance(x, E.Var) and not _uses_any(x, new_vars):
            b = _inner_bound(ctx, x)
            if b is None or not all(a[d] is x for a in wacc):
                return False
            dims.append(("slice", b))
        else:
            return False
    if {id(v) for kind, v in dims if kind == "merged"} != {id(v) for v in new_vars}:
        return False
    for u in users:
        for acc in _accesses(u, ctx.index.realize[id(u)], buf, merged):
            for (kind, what), x in zip(dims, acc):
                if kind == "merged":
                    if x is not what:
                        return False
                else:
                    if _uses_any(x, new_vars):
                        return False
                    b = _inner_bound(ctx, x)
                    if b is None or b[0] < what[0] or b[1] > what[1]:
                        return False
    return True


@register
class Merge(Primitive):
    kind = "Merge"
    attr_kinds = ()
    method = "merge"
    returns = "one"
    death_verb = "merged"

    def call(self, sch, *loops):
        """Merge loop nests of the same shape into one: their bodies run one after the
        other inside a single nest of new loops ``<loop>_m``, placed where the last nest
        was. Each given loop stands for the nest from it up to the loops they share.

        It requires: 1) at least two loop handles, none inside another; 2) from each given
        loop up to the loops they share, a perfect nest (each loop the only child of the
        one above) of loops without annotations, all starting at 0; 3) the nests have the
        same depth and the same extents, level by level; 4) (beyond TVM, which does not
        check it and then builds wrong programs) merging keeps every value a block reads:
        a buffer that one nest writes and another accesses is accessed by each of their
        blocks at one element per iteration, the same element, named by every merged loop,
        and the loops are given in the order those two nests run; no block between the
        nests shares a buffer (one of them writing it) with a nest that merging moves past
        it.

        Before::

            for i, j in T.grid(10, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for i, j in T.grid(10, 8):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

        Call::

            i, j = sch.get_loops(sch.get_block("B"))
            i2, j2 = sch.get_loops(sch.get_block("C"))
            sch.merge(j, j2)

        After::

            for i_m, j_m in T.grid(10, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i_m, j_m])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i_m, j_m])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

        Returns the innermost merged loop.
        """
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        return sch._run(self, list(loops), [])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loops = [expect_loop(ctx, x) for x in inputs]
        if len(loops) < 2:
            raise ctx.error("the loops", f"merge needs at least two loops, got {len(loops)}",
                            "pass the loops of two nests, e.g. sch.merge(j, j2)")
        names = [lp.loop_var.name for lp in loops]
        if len({id(lp) for lp in loops}) != len(loops):
            raise ctx.error("the loops", "the same loop is given twice", "give each nest's "
                            "loop once", highlight=names)
        for a in loops:
            for b in loops:
                if a is not b and ctx.index.contains(a, b):
                    raise ctx.error(subject_of(a), f"it contains loop {b.loop_var.name}: the "
                                    "merged loops must be separate nests", "", highlight=names)
        scopes = {id(ctx.index.scope_block(lp)) for lp in loops}
        if len(scopes) > 1:
            raise ctx.error("the loops", "they are under different blocks", "merge loops "
                            "of one block scope", highlight=names)
        lca = _lowest_common_ancestor(ctx, loops)
        chains = [_chain(ctx, lp, lca) for lp in loops]
        for chain in chains:
            for lp in chain:
                if lp.thread_tag:
                    raise ctx.error(subject_of(lp), f"the loop is bound to {lp.thread_tag}",
                                    "merge before binding (TVM's rule)",
                                    highlight=[lp.loop_var.name])
                if lp.annotations:
                    raise ctx.error(subject_of(lp), "the loop has annotations", "unannotate it "
                                    "first", highlight=[lp.loop_var.name])
                if not E.is_const_int(lp.min, 0):
                    raise ctx.error(subject_of(lp), "the loop does not start at 0", "",
                                    highlight=[lp.loop_var.name])
            for inner, outer in zip(chain, chain[1:]):
                if outer.body is not inner:
                    raise ctx.error(subject_of(outer), f"loop {inner.loop_var.name} is not its "
                                    "only child: the nest above a merged loop must be perfect",
                                    "", highlight=[outer.loop_var.name, inner.loop_var.name])
        first = chains[0]
        for chain, lp in zip(chains[1:], loops[1:]):
            if len(chain) != len(first):
                raise ctx.error(subject_of(lp), f"its nest has {len(chain)} loop(s) below the "
                                f"shared ones, loop {names[0]}'s has {len(first)}: the nests "
                                "must have the same depth", "", highlight=names)
            for a, b in zip(first, chain):
                ea, eb = E.as_const_int(a.extent), E.as_const_int(b.extent)
                if ea is None or eb is None or ea != eb:
                    raise ctx.error(subject_of(b), f"its extent {_text(b.extent)} differs from "
                                    f"loop {a.loop_var.name}'s {_text(a.extent)}: merged loops "
                                    "must have the same extents", "",
                                    highlight=[a.loop_var.name, b.loop_var.name])
        new_vars = [E.Var(f"{lp.loop_var.name}_m", lp.loop_var.dtype) for lp in first]
        bodies = [substitute(chain[0].body, {lp.loop_var: v for lp, v in zip(chain, new_vars)})
                  for chain in chains]
        self._check_dependences(ctx, chains, bodies, new_vars)
        nest = seq(*bodies)
        out_loops = []
        for lp, v in zip(first, new_vars):
            nest = For(v, E.const(0, v.dtype), lp.extent, ForKind.SERIAL, nest)
            out_loops.append(nest)
        mapping = {chain[-1]: None for chain in chains[:-1]}
        mapping[chains[-1][-1]] = nest
        return Result(replace_stmts(ctx.func, mapping), [out_loops[0]])

    def _check_dependences(self, ctx: Ctx, chains, bodies, new_vars) -> None:
        """Requirement 4: merging keeps every value a block reads. Two merged nests that
        share a buffer (one writes it) access it element by element, the same element per
        iteration, every merged loop naming it, and keep their order; a block between the
        nests shares no such buffer with a nest that moves past it."""
        nests = [ctx.index.blocks_under(chain[0]) for chain in chains]
        roots = [chain[-1] for chain in chains]
        start = [ctx.index.order[id(r)] for r in roots]
        merged = {}
        for chain in chains:
            for lp, v in zip(chain, new_vars):
                merged[lp.loop_var] = v
        for a, blocks_a in enumerate(nests):
            for b, blocks_b in enumerate(nests):
                if a == b:
                    continue
                for wa in blocks_a:
                    for w in wa.writes:
                        users = [x for x in blocks_b if _touches(x, w.buffer)]
                        if not users:
                            continue
                        self._check_pointwise(ctx, wa, users, w.buffer, merged, new_vars)
                        if (start[a] < start[b]) != (a < b):
                            raise ctx.error(f"block {wa.name_hint}", f"{w.buffer.name} is "
                                            f"written by block {wa.name_hint} and used by "
                                            f"block {users[0].name_hint}, and merging in this "
                                            "order would swap them", "give the loops in the "
                                            "order their nests run",
                                            highlight=[wa.name_hint, users[0].name_hint])
        target = start[-1]
        inside = [ctx.index.blocks_under(r) for r in roots]
        in_nests = {id(x) for bs in inside for x in bs}
        for x in ctx.index.all_blocks():
            pos = ctx.index.order[id(x)]
            if id(x) in in_nests or any(ctx.index.contains(x, r) for r in roots):
                continue
            for k, blocks in enumerate(nests):
                if not (start[k] < pos < target or target < pos < start[k]):
                    continue
                for y in blocks:
                    shared = _conflict(x, y)
                    if shared is not None:
                        raise ctx.error(f"block {x.name_hint}", f"it runs between the merged "
                                        f"nests and shares {shared.name} with block "
                                        f"{y.name_hint}, which merging would move past it",
                                        "merge nests that are next to each other (or that "
                                        "share nothing with the blocks between them)",
                                        highlight=[x.name_hint, y.name_hint])

    def _check_pointwise(self, ctx, writer, users, buf, merged, new_vars) -> None:
        hl = [writer.name_hint, *(u.name_hint for u in users)]
        ok = _pointwise_ok(ctx, writer, users, buf, merged, new_vars)
        if not ok:
            raise ctx.error(f"block {writer.name_hint}", f"{buf.name} is written in one merged "
                            f"nest and used in another ({', '.join(u.name_hint for u in users)})"
                            ", not slice by slice (each merged iteration making the part of it "
                            "that iteration uses): merging could let a block read a value "
                            "before it is made (or after it is overwritten)", "merge nests "
                            "that share no buffer, or whose blocks use it element by element "
                            "along the merged loops (elementwise stages, row-wise reductions)",
                            highlight=hl)

    def python_args(self, inputs, attrs, dialect):
        return [fmt(x) for x in inputs]


def _touches(blk: Block, buf) -> bool:
    return any(r.buffer is buf for r in (*blk.reads, *blk.writes))


def _conflict(x: Block, y: Block):
    """A buffer one of the two blocks writes and the other accesses (None if none)."""
    for a, b in ((x, y), (y, x)):
        for w in a.writes:
            if _touches(b, w.buffer):
                return w.buffer
    return None


def _text(e) -> str:
    c = E.as_const_int(e)
    return str(c) if c is not None else "a symbolic extent"
