"""Loop transformations: split, fuse, reorder."""
from __future__ import annotations

import math

from engine.arith import Analyzer, simplify
from engine.arith.symbolic import prove_le
from engine.ir import expr as E
from engine.ir.functor import substitute, uses_var
from engine.ir.stmt import BlockRealize, For, ForKind, IfThenElse

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import as_bool, conj, expect_loop, fused_name, is_int, split_names, subject_of


def _simplify_realizes(stmt, var_ranges=None):
    """Simplify bindings/predicates of the block realizes directly under ``stmt``, with the
    known ranges of new loop variables (``{var: (min, max)}``)."""
    from engine.ir.functor import Mutator

    class M(Mutator):
        def visit_BlockRealize(self, r: BlockRealize):
            vals = tuple(simplify(v, var_ranges) for v in r.iter_values)
            pred = simplify(r.predicate, var_ranges)
            return r.replace(iter_values=vals, predicate=pred)

        def visit_BufferStore(self, s):
            return s

    return M().visit(stmt)


def _add_predicate(ctx: Ctx, loop_body, pred):
    """Conjoin ``pred`` to the predicate of every block directly under ``loop_body``."""
    blocks = ctx.index.child_blocks(loop_body) if not isinstance(loop_body, BlockRealize) \
        else [loop_body.block]
    if not blocks:
        return IfThenElse(pred, loop_body)
    from engine.ir.functor import Mutator

    class M(Mutator):
        def visit_BlockRealize(self, r: BlockRealize):
            return r.replace(predicate=conj(r.predicate, pred))

        def visit_BufferStore(self, s):
            return s

    return M().visit(loop_body)


def _check_plain_loop(ctx: Ctx, loop: For, method: str) -> None:
    """TVM's split and fuse take loops without annotations or a thread binding that start
    at 0 (HasAnnotationOrThreadBindingError, CheckLoopStartsWithZero)."""
    name = loop.loop_var.name
    if loop.thread_tag:
        raise ctx.error(subject_of(loop), f"the loop is bound to {loop.thread_tag}, which "
                        f"the {'new loops' if method == 'split' else 'fused loop'} would "
                        "lose", f"{method} before binding the loop (TVM's rule)",
                        highlight=[name])
    if loop.annotations:
        keys = ", ".join(str(k) for k, _v in loop.annotations)
        raise ctx.error(subject_of(loop), f"the loop carries annotations ({keys}), which "
                        f"the {'new loops' if method == 'split' else 'fused loop'} would "
                        "lose", f"{method} before annotating the loop", highlight=[name])
    if not E.is_const_int(loop.min, 0):
        raise ctx.error(subject_of(loop), f"the loop does not start at 0 (it runs from "
                        f"{loop.min})", f"TVM's {method} takes only loops starting at 0",
                        highlight=[name])


def _sizes_of(loop: For) -> set:
    """The size ``n`` of a loop of extent ``k * n``: it runs at all only when ``n >= 1``."""
    terms, const = Analyzer().linear(loop.extent)
    return {a for a, c in terms.values() if isinstance(a, E.Var) and c > 0} \
        if const == 0 and len(terms) == 1 else set()


def _split_symbolic(ctx: Ctx, loop: For, factors: list, disable_pred: bool) -> Result:
    """split of a loop whose extent ``n`` is symbolic, as TVM: every factor but one a
    positive constant, the one given as None inferred as ``ceildiv(n, product)``, and the
    tail guarded by ``T.where(fused < n)`` unless the factors provably divide ``n``
    (``n * 32`` by 32; ``disable_predication`` is refused where they may not)."""
    subj, hl = subject_of(loop), [loop.loop_var.name]
    dtype = loop.loop_var.dtype
    if len(factors) < 2:
        raise ctx.error(subj, f"split needs at least two factors, got {len(factors)}",
                        "try factors=[None, 4]", highlight=hl)
    given = [f.value if isinstance(f, E.IntImm) else f for f in factors]
    if sum(f is None for f in given) != 1 or not all(
            f is None or (is_int(f) and f > 0) for f in given):
        raise ctx.error(subj, f"the loop's extent {loop.extent} is not a constant: give every "
                        "factor but one as a positive integer, and None for the one to infer",
                        "e.g. factors=[None, 4]", highlight=hl)
    known = math.prod(f for f in given if f is not None)
    inferred = simplify(E.FloorDiv(loop.extent + E.const(known - 1, dtype),
                                   E.const(known, dtype)))
    sizes = [inferred if f is None else E.const(f, dtype) for f in given]
    new_vars = [E.Var(name, dtype) for name in split_names(loop.loop_var.name, len(sizes))]
    fused: E.PrimExpr = new_vars[0]
    for v, f in zip(new_vars[1:], sizes[1:]):
        fused = fused * f + v
    # no tail when the factors divide the extent (n * 32 split by 32: k_0 * 32 + k_1 is
    # at most (n - 1) * 32 + 31): TVM's proof of the guard with symbolic bounds
    one = E.const(1, dtype)
    ranges = {v: (E.const(0, dtype), simplify(f - one)) for v, f in zip(new_vars, sizes)}
    exact = prove_le(fused, simplify(loop.extent - one), ranges, positive=_sizes_of(loop))
    if disable_pred and not exact:
        raise ctx.error(subj, f"the loop's extent {loop.extent} is not a constant, so it "
                        "cannot be shown that the factors divide it: disable_predication=True "
                        "could run the tail out of bounds", "leave the predicate on",
                        highlight=hl)
    body = _simplify_realizes(substitute(loop.body, {loop.loop_var: fused}))
    if not exact:
        body = _add_predicate(ctx, body, simplify(fused < loop.extent))
    new_loops = []
    for v, f in reversed(list(zip(new_vars, sizes))):
        body = For(v, E.const(0, dtype), f, ForKind.SERIAL, body)
        new_loops.append(body)
    new_loops.reverse()
    return Result(replace_stmts(ctx.func, {loop: new_loops[0]}), new_loops)


@register
class Split(Primitive):
    kind = "Split"
    attr_kinds = (("preserve_unit_iters", "bool"), ("disable_predication", "bool"))
    required_attrs = 0
    method = "split"
    returns = "list"
    death_verb = "split"

    def call(self, sch, loop, factors, preserve_unit_iters: bool = True,
             disable_predication: bool = False):
        """Split a loop into a list of consecutive loops.

        It requires: 1) ``loop`` is a valid loop handle with a constant extent, starting
        at 0 and carrying no annotations (TVM's rules: the new loops could not keep
        them); 2) ``factors`` has at least two entries, each a positive integer or
        ``None``, and at most one ``None`` (it is inferred as
        ``ceil(extent / product of the others)``); 3) the product of the factors is
        at least the extent. When the factors do not divide the extent exactly, the
        outer loop is rounded up and the blocks under it get a ``T.where`` predicate
        guarding the tail, as in TVM.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    ...

        Call::

            i, j, k = sch.get_loops(sch.get_block("Y"))
            j0, j1 = sch.split(j, factors=[None, 4])

        After::

            for i, j_0, j_1, k in T.grid(128, 32, 4, 128):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1)
                    vk = T.axis.reduce(128, k)
                    ...

        Returns the new loops, outermost first.
        """
        from ..error import ScheduleError
        if not isinstance(factors, (list, tuple)):
            raise ScheduleError("split", sch._describe(loop) if loop in sch._symbols else "loop",
                                f"factors must be a list such as [None, 4], got {factors!r}",
                                "pass factors=[None, 4]")
        return list(sch._run(self, [loop, *factors],
                             [bool(preserve_unit_iters), bool(disable_predication)]))

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0])
        factors = list(inputs[1:])
        subj = subject_of(loop)
        hl = [loop.loop_var.name]
        _ = as_bool(ctx, attrs[0], "preserve_unit_iters") if attrs else True
        disable_pred = as_bool(ctx, attrs[1], "disable_predication") if len(attrs) > 1 else False
        extent = E.as_const_int(loop.extent)
        if extent is None:
            _check_plain_loop(ctx, loop, "split")
            return _split_symbolic(ctx, loop, factors, disable_pred)
        _check_plain_loop(ctx, loop, "split")
        if len(factors) < 2:
            raise ctx.error(subj, f"split needs at least two factors, got {len(factors)}",
                            "try factors=[None, 4]", highlight=hl)
        for f in factors:
            if f is None:
                continue
            if isinstance(f, E.IntImm):
                f = f.value
            if not is_int(f):
                raise ctx.error(subj, f"every factor must be a positive integer or None, got "
                                f"{f!r}", "try factors=[None, 4]", highlight=hl)
            if f <= 0:
                raise ctx.error(subj, f"every factor must be a positive integer or None, got "
                                f"{f}", "use None for the factor to infer, e.g. [None, 4]",
                                highlight=hl)
        factors = [f.value if isinstance(f, E.IntImm) else f for f in factors]
        n_none = sum(f is None for f in factors)
        if n_none > 1:
            raise ctx.error(subj, "at most one factor may be None (the inferred one)",
                            "give all but one factor, e.g. [None, 4]", highlight=hl)
        known = math.prod(f for f in factors if f is not None)
        if n_none:
            inferred = -(-extent // known)
            factors = [inferred if f is None else f for f in factors]
        total = math.prod(factors)
        if total < extent:
            raise ctx.error(subj, f"the factors multiply to {total}, less than the loop's "
                            f"extent {extent}", "use None for one factor to infer it, "
                            f"e.g. [None, {factors[-1]}]", highlight=hl)
        if total != extent and disable_pred:
            raise ctx.error(subj, f"the factors multiply to {total}, not {extent}, and "
                            "disable_predication=True would run the tail out of bounds",
                            "use factors that divide the extent", highlight=hl)
        base = loop.loop_var.name
        dtype = loop.loop_var.dtype
        new_vars = [E.Var(name, dtype) for name in split_names(base, len(factors))]
        fused: E.PrimExpr = new_vars[0]
        for v, f in zip(new_vars[1:], factors[1:]):
            fused = fused * E.const(f, dtype) + v
        body = substitute(loop.body, {loop.loop_var: fused})
        body = _simplify_realizes(body)
        if total != extent:
            body = _add_predicate(ctx, body, simplify(fused < E.const(extent, dtype)))
        new_loops = []
        for v, f in reversed(list(zip(new_vars, factors))):
            body = For(v, E.const(0, dtype), E.const(f, dtype), ForKind.SERIAL, body)
            new_loops.append(body)
        new_loops.reverse()
        func = replace_stmts(ctx.func, {loop: new_loops[0]})
        return Result(func, new_loops)

    def python_args(self, inputs, attrs, dialect):
        loop, factors = inputs[0], list(inputs[1:])
        if dialect == "engine":
            return [fmt(loop), f"factors={fmt(factors)}"]
        args = [f"loop={fmt(loop)}", f"factors={fmt(factors)}",
                f"preserve_unit_iters={self.attr(attrs, 0, default=True)}"]
        if dialect == "tvm":
            args.append(f"disable_predication={self.attr(attrs, 1, default=False)}")
        return args


@register
class Fuse(Primitive):
    kind = "Fuse"
    attr_kinds = (("preserve_unit_iters", "bool"),)
    required_attrs = 0
    method = "fuse"
    returns = "one"
    death_verb = "fused"

    def call(self, sch, *loops, preserve_unit_iters: bool = True):
        """Fuse a list of consecutive loops into one.

        It requires: 1) at least two loops; 2) each loop is the only child of the one
        before it (a perfect parent/child chain, outermost first); 3) every loop starts
        at 0 and carries no annotations (TVM's rules); 4) no loop's extent depends on
        another of them. The block bindings become ``fused // e`` and ``fused % e``
        terms.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])

        Call::

            i, j = sch.get_loops(sch.get_block("C"))
            ij = sch.fuse(i, j)

        After::

            for i_j_fused in T.serial(16384):
                with T.block("C"):
                    vi = T.axis.spatial(128, i_j_fused // 128)
                    vj = T.axis.spatial(128, i_j_fused % 128)
        """
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        return sch._run(self, list(loops), [bool(preserve_unit_iters)])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loops = [expect_loop(ctx, x) for x in inputs]
        if len(loops) < 2:
            subj = subject_of(loops[0]) if loops else "loops"
            raise ctx.error(subj, "fuse needs at least two loops", "pass e.g. fuse(i, j)")
        names = [lp.loop_var.name for lp in loops]
        if len({id(lp) for lp in loops}) != len(loops):
            raise ctx.error(f"loops {', '.join(names)}", "a loop is given twice", "",
                            highlight=names)
        for outer, inner in zip(loops, loops[1:]):
            if outer.body is not inner:
                if ctx.index.contains(inner, outer):
                    hint = f"list the loops outermost first: fuse({', '.join(reversed(names))})"
                    rule = (f"loop {inner.loop_var.name} is outside loop "
                            f"{outer.loop_var.name}, so they are not in parent/child order")
                elif ctx.index.contains(outer, inner):
                    rule = (f"loop {inner.loop_var.name} is not the only statement directly "
                            f"inside loop {outer.loop_var.name}")
                    hint = "only adjacent loops with nothing else between them can be fused"
                else:
                    rule = (f"loops {outer.loop_var.name} and {inner.loop_var.name} are not "
                            "nested in each other")
                    hint = "fuse only adjacent parent/child loops"
                raise ctx.error(f"loop {inner.loop_var.name}", rule, hint,
                                highlight=[outer.loop_var.name, inner.loop_var.name])
        for lp in loops:
            _check_plain_loop(ctx, lp, "fuse")
        for i, lp in enumerate(loops):
            for inner in loops[i + 1:]:
                if uses_var(inner.extent, lp.loop_var) or uses_var(inner.min, lp.loop_var):
                    raise ctx.error(subject_of(inner), "its extent depends on an outer loop "
                                    "being fused", "", highlight=[inner.loop_var.name])
        dtype = loops[0].loop_var.dtype
        fused = E.Var(fused_name(names), dtype)
        vmap = {}
        stride: E.PrimExpr = E.const(1, dtype)

        def div(x, d):  # x // 1 is x, as TVM's floordiv folds it
            return x if E.is_const_int(d, 1) else E.FloorDiv(x, d)

        for idx in range(len(loops) - 1, -1, -1):
            # TVM's bindings: a unit loop is 0, the outermost ``fused // stride``, the
            # others ``fused % (extent * stride) // stride``
            lp = loops[idx]
            upper = simplify(lp.extent * stride)
            if E.is_const_int(lp.extent, 1):
                val = E.const(0, dtype)
            elif idx == 0:
                val = div(fused, stride)
            else:
                val = div(E.FloorMod(fused, upper), stride)
            vmap[lp.loop_var] = val
            stride = upper
        body = substitute(loops[-1].body, vmap)
        total = E.as_const_int(stride)
        body = _simplify_realizes(body, {fused: (0, total - 1)} if total else {})
        # the fused extent as TVM writes it: the extents multiplied outermost first
        extent: E.PrimExpr = loops[0].extent
        for lp in loops[1:]:
            extent = extent * lp.extent
        extent = simplify(extent)
        new = For(fused, E.const(0, dtype), extent, ForKind.SERIAL, body)
        func = replace_stmts(ctx.func, {loops[0]: new})
        return Result(func, [new])

    def python_args(self, inputs, attrs, dialect):
        args = [fmt(x) for x in inputs]
        if dialect != "engine":
            args.append(f"preserve_unit_iters={self.attr(attrs, 0, default=True)}")
        return args


@register
class Reorder(Primitive):
    kind = "Reorder"
    attr_kinds = ()
    method = "reorder"

    def call(self, sch, *ordered_loops):
        """Reorder a list of loops; loops not listed keep their places.

        It requires: 1) the loops are in one chain: they can be ordered so that each is
        an ancestor of the next, and every loop between the outermost and the innermost
        has exactly one child (no block and no second statement in between); 2) no loop
        is given twice; 3) after reordering, no loop's range depends on a loop that
        moved inside it; 4) every block under them binds its axes affinely, as TVM
        requires: under all its loops or under the loops from the outermost reordered
        one down (loops above are constants there, so ``vi = i * i + j`` lets j move),
        each axis a scale-1 sum of loops or of their ``//`` / ``%`` parts, no part used
        twice, and its ``T.where`` only bounding such sums (a split's tail guard
        ``i_0 * 4 + i_1 < 10``), not e.g. ``i * 16 + j * 4 + k < 23``; 5) no loop being
        reordered feeds both a spatial and a reduction axis of a reduction block (its
        T.init would no longer come first). Reduction axes are reordered as TVM does,
        relying on the reduction being associative. One loop alone is already in order:
        nothing is checked or changed (as in TVM).

        Before::

            for i, j_0, j_1, k in T.grid(128, 32, 4, 128):
                with T.block("Y"): ...

        Call::

            sch.reorder(j0, k, j1)

        After::

            for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):
                with T.block("Y"): ...
        """
        if len(ordered_loops) == 1 and isinstance(ordered_loops[0], (list, tuple)):
            ordered_loops = tuple(ordered_loops[0])
        sch._run(self, list(ordered_loops), [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loops = [expect_loop(ctx, x) for x in inputs]
        names = [lp.loop_var.name for lp in loops]
        if not loops:
            raise ctx.error("loops", "reorder needs at least one loop", "")
        if len({id(lp) for lp in loops}) != len(loops):
            raise ctx.error(f"loops {', '.join(names)}", "a loop is given twice",
                            "list each loop once", highlight=names)
        if len(loops) == 1:
            return Result(None, [])     # TVM: one loop is already in order, nothing checked
        order = ctx.index.order
        by_depth = sorted(loops, key=lambda lp: order[id(lp)])
        top, bottom = by_depth[0], by_depth[-1]
        # the chain from top down to bottom, every step a single-child loop
        chain = [top]
        cur = top
        while cur is not bottom:
            body = cur.body
            if not isinstance(body, For):
                others = [lp.loop_var.name for lp in by_depth if lp not in chain]
                if not all(ctx.index.contains(top, lp) for lp in by_depth):
                    rule = "the loops are not nested in one another (they are in different "\
                           "loop nests)"
                else:
                    rule = (f"loop {cur.loop_var.name} has more than one statement or a block "
                            f"directly inside it, so {', '.join(others)} cannot be moved "
                            "across it")
                raise ctx.error(f"loops {', '.join(names)}", rule,
                                "reorder loops of one perfect nest (a single chain of loops)",
                                highlight=names)
            cur = body
            chain.append(cur)
        listed = {id(lp) for lp in loops}
        positions = [i for i, lp in enumerate(chain) if id(lp) in listed]
        new_chain = list(chain)
        for pos, lp in zip(positions, loops):
            new_chain[pos] = lp
        # a loop's range must not depend on loops that end up inside it
        for i, lp in enumerate(new_chain):
            for inner in new_chain[i + 1:]:
                if uses_var(lp.min, inner.loop_var) or uses_var(lp.extent, inner.loop_var):
                    raise ctx.error(subject_of(lp), f"its range depends on loop "
                                    f"{inner.loop_var.name}, which would be outside it", "",
                                    highlight=[lp.loop_var.name, inner.loop_var.name])
        _check_affine_blocks(ctx, top, bottom, names)
        _check_reduction_order(ctx, chain, bottom, names)
        body = bottom.body
        for lp in reversed(new_chain):
            body = lp.replace(body=body)
        func = replace_stmts(ctx.func, {top: body})
        return Result(func, [])


def _check_affine_blocks(ctx: Ctx, top: For, bottom: For, names):
    """TVM's reorder rule: every block under the loops binds its axes affinely — under all
    its loops, or at least under the loops from ``top`` down (the loops above ``top`` are
    constants there: CheckPartialAffineBinding), its ``T.where`` taken into account."""
    from ._common import affine_bindings
    for b in ctx.index.child_blocks(bottom):
        r = ctx.index.realize[id(b)]
        loops = ctx.index.loops_above(r)
        if affine_bindings(r.iter_values, loops, r.predicate).ok:
            continue
        inner = [lp for lp in loops if ctx.index.contains(top, lp)]
        res = affine_bindings(r.iter_values, inner, r.predicate)
        if res.ok:
            continue
        hl = names + [b.name_hint]
        if res.reason[0] == "where":
            raise ctx.error(f"block {b.name_hint}", f"block {b.name_hint}'s T.where "
                            f"({res.reason[1]}) bounds a combination of the loops being "
                            "reordered that is none of its axes, so its binding is not "
                            "affine in them", "reorder loops whose blocks have no such "
                            "T.where (a split's tail guard is fine)", highlight=hl)
        k = res.reason[1]
        iv, val = b.iter_vars[k], r.iter_values[k]
        raise ctx.error(f"block {b.name_hint}", f"axis {iv.var.name} of block {b.name_hint} "
                        f"is bound to {val}, which is not an affine combination of the loops "
                        "being reordered (a sum of loops, or of their // and % parts, with "
                        "scale 1, each part used once)", "reorder only loops that the "
                        "block's axes use through split/fuse-style bindings",
                        highlight=hl)


def _check_reduction_order(ctx: Ctx, chain: list, bottom: For, names) -> None:
    """A block that accumulates (a T.init, or reading what it writes) runs its T.init at the
    instance where its reduction axes are at their minimum, which must stay the first of
    those that update one element. It does when every loop being reordered feeds either
    spatial axes or reduction axes; a loop feeding both (a fuse of a spatial and a
    reduction loop) reordered against another would bring updates of an element before
    its T.init (TVM reorders such loops anyway; the result changes)."""
    from engine.ir.stmt import IterType
    for b in ctx.index.child_blocks(bottom):
        if not any(iv.iter_type is IterType.REDUCE for iv in b.iter_vars):
            continue
        r = ctx.index.realize[id(b)]
        for lp in chain:
            spatial = [iv.var.name for iv, v in zip(b.iter_vars, r.iter_values)
                       if iv.iter_type is not IterType.REDUCE and uses_var(v, lp.loop_var)]
            reduce = [iv.var.name for iv, v in zip(b.iter_vars, r.iter_values)
                      if iv.iter_type is IterType.REDUCE and uses_var(v, lp.loop_var)]
            if spatial and reduce:
                raise ctx.error(f"block {b.name_hint}", f"loop {lp.loop_var.name} feeds both "
                                f"the spatial axis {spatial[0]} and the reduction axis "
                                f"{reduce[0]} of block {b.name_hint}, so reordering it could "
                                "run updates of an element before its T.init",
                                "reorder before fusing a spatial loop with a reduction loop",
                                highlight=list(names) + [b.name_hint, lp.loop_var.name])


@register
class AddUnitLoop(Primitive):
    kind = "AddUnitLoop"
    attr_kinds = ()
    method = "add_unit_loop"
    returns = "one"

    def call(self, sch, block_or_loop):
        """Create a new loop of extent 1 on top of a loop or a block.

        It requires: 1) ``block_or_loop`` is a valid loop handle, or a block handle of
        a block other than the root block. On a loop, the new loop encloses it; on a
        block, the new loop sits between the block and the loops above it.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])

        Call::

            u = sch.add_unit_loop(sch.get_block("C"))

        After::

            for i, j, u in T.grid(128, 128, 1):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])

        Returns the new loop.
        """
        return sch._run(self, [block_or_loop], [])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        from engine.ir.stmt import Block
        node = inputs[0]
        if isinstance(node, Block):
            if node is ctx.index.root_block:
                raise ctx.error("block root", "a loop cannot be added on top of the root "
                                "block", "pass a loop or another block")
            target = ctx.index.realize[id(node)]
        elif isinstance(node, For):
            target = node
        else:
            raise ctx.error(subject_of(node), "expected a loop or block handle", "")
        used = {v.name for v in ctx.index.loops}
        name = "u"
        n = 0
        while name in used:
            n += 1
            name = f"u_{n}"
        new = For(E.Var(name, "int32"), E.const(0, "int32"), E.const(1, "int32"),
                  ForKind.SERIAL, target)
        return Result(replace_stmts(ctx.func, {target: new}), [new])

    def python_args(self, inputs, attrs, dialect):
        return [fmt(inputs[0]) if dialect == "engine" else f"block_or_loop={fmt(inputs[0])}"]
