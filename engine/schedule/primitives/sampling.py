"""Sampling: sample_perfect_tile, sample_partitioned_tile, sample_categorical,
sample_compute_location (TVM's ``SamplePerfectTile``, ``SamplePartitionedTile``,
``SampleCategorical``, ``SampleComputeLocation``).

A sampling instruction changes no program: it draws a value from the schedule's random
generator (``Schedule(mod, seed=...)``) and returns it as a random variable — ExprRVs
(integers) for the first two, a LoopRV for the third — that later primitives take in
place of a constant. What it drew is its *decision*, recorded in the trace next to the
instruction (TVM's ``trace.decisions``): replaying the trace applies the decision instead
of drawing again, so a trace with decisions always rebuilds the same program, and
``trace.with_decision(inst, d)`` gives the trace of another choice.

The course's stochastic schedule, seeded so that it is reproducible::

    sch = engine.Schedule(mod, seed=7)
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)      # e.g. [v3, v4] = [8, 16]
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    print(sch.trace)   # v3, v4 = sch.sample_perfect_tile(loop=l2, n=2, ..., decision=[8, 16])

Decisions read from a link or an imported trace are hostile input: a perfect-tile decision
must multiply to the loop's extent (a partitioned tile's too, its inner part's product a
multiple of ``innerpart_factor``), a categorical decision must index a candidate, a
compute location must be one of the block's legal locations here; anything else is
refused with the reason (never silently repaired into another program).
"""
from __future__ import annotations

import math

from engine.arith.factor import divisors, prime_factors
from engine.ir import expr as E
from engine.ir.functor import uses_var
from engine.ir.stmt import Block, For, IterType

from ..error import ScheduleError, TraceError
from ..registry import INLINE_MARK, ROOT_MARK, Ctx, Primitive, Result, fmt, register
from ._common import expect_block, expect_loop, is_int, subject_of
from .compute_location import ComputeAt
from .inline import ComputeInline
from .queries import consumers_of

MAX_TILES = 10          # factors one sample_perfect_tile may draw
MAX_CANDIDATES = 64     # candidates of one sample_categorical
_MAX_REJECTIONS = 2000  # draws before the innermost bound is met by construction
#: extents a perfect tiling is drawn for: those of an int64 loop (factored at a bounded
#: cost, :mod:`engine.arith.factor`)
MAX_SAMPLED_EXTENT = (1 << 63) - 1


# ---------------------------------------------------------------------------- perfect tiles
def draw_perfect_tile(rng, extent: int, n: int) -> list[int]:
    """``n`` factors whose product is ``extent``, drawn as TVM does: each prime's exponent
    is spread over the ``n`` factors uniformly among all the ways to do it."""
    result = [1] * n
    for p, e in prime_factors(extent):
        # stars and bars: n - 1 bars among e + n - 1 places split e into n parts >= 0
        bars = sorted(rng.sample(range(e + n - 1), n - 1)) + [e + n - 1]
        last = -1
        for i, b in enumerate(bars):
            result[i] *= p ** (b - last - 1)
            last = b
    return result


def sample_perfect_tile(rng, extent: int, n: int, max_innermost_factor: int) -> list[int]:
    """A perfect tiling of ``extent`` into ``n`` factors whose innermost is at most
    ``max_innermost_factor`` (-1: no bound), drawn uniformly as TVM's rejection sampling
    does (after many rejections the innermost factor is drawn among those that fit)."""
    if n == 1:
        return [extent]
    if max_innermost_factor == -1:
        return draw_perfect_tile(rng, extent, n)
    for _ in range(_MAX_REJECTIONS):
        tile = draw_perfect_tile(rng, extent, n)
        if tile[-1] <= max_innermost_factor:
            return tile
    inner = rng.choice(divisors(extent, at_most=max_innermost_factor))
    return draw_perfect_tile(rng, extent // inner, n - 1) + [inner]


def _tile_attrs(ctx: Ctx, subj: str, attrs) -> tuple[int, int]:
    n = attrs[0] if attrs else None
    most = attrs[1] if len(attrs) > 1 else 16
    if not is_int(n) or not 1 <= n <= MAX_TILES:
        raise ctx.error(subj, f"n, the number of factors, must be an integer from 1 to "
                        f"{MAX_TILES}, got {n!r}", "e.g. n=2 for an outer and an inner loop")
    if not is_int(most) or (most < 1 and most != -1):
        raise ctx.error(subj, "max_innermost_factor must be a positive integer (or -1 for "
                        f"no bound), got {most!r}", "e.g. max_innermost_factor=16")
    return n, most


def _check_tile_decision(decision, n, kind: str = "SamplePerfectTile") -> tuple:
    """A perfect-tile decision's shape (without the loop): ``n`` positive integers, the first
    of them -1 for a loop of symbolic extent (TVM's: the factor to infer)."""
    if not isinstance(decision, (list, tuple)) or not all(
            is_int(x) and (x >= 1 or (i == 0 and x == -1)) for i, x in enumerate(decision)):
        raise TraceError(f"a {kind} decision is a list of positive integers (the "
                         f"first -1 for a loop of symbolic extent), got {decision!r}"[:300])
    if is_int(n) and len(decision) != n:
        raise TraceError(f"a {kind} decision with n={n} has {n} factors, got "
                         f"{len(decision)} ({list(decision)})"[:300])
    return tuple(decision)


@register
class SamplePerfectTile(Primitive):
    kind = "SamplePerfectTile"
    method = "sample_perfect_tile"
    attr_kinds = (("n", "int"), ("max_innermost_factor", "int"))
    mutates = False
    returns = "list"
    has_decision = True

    def call(self, sch, loop, n: int, max_innermost_factor: int = 16, decision=None):
        """Sample the factors of a perfect tiling of a loop: ``n`` integers whose product
        is the loop's extent, the innermost at most ``max_innermost_factor``.

        It requires: 1) ``loop`` is a loop with a positive or symbolic extent; 2) ``n`` is
        an integer from 1 to 10; 3) ``max_innermost_factor`` is a positive integer or -1
        (no bound); 4) a given ``decision`` is ``n`` positive integers whose product is the
        extent. The program is unchanged; the factors (ExprRVs) are meant for :meth:`split`.
        A loop of symbolic extent is tiled trivially, as TVM does: ``[None, 1, ..., 1]``
        (the decision ``[-1, 1, ..., 1]``), the None left for split to infer.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"): ...

        Call::

            i, j, k = sch.get_loops(sch.get_block("C"))
            j_factors = sch.sample_perfect_tile(j, n=2)   # decision e.g. [8, 16]
            j_0, j_1 = sch.split(j, factors=j_factors)

        After::

            for i, j_0, j_1, k in T.grid(128, 8, 16, 128):
                with T.block("C"): ...

        Returns the ``n`` sampled factors (ExprRVs, outermost first); ``sch.get(v)`` gives
        each one's value, and the trace records the decision (``decision=[8, 16]``).
        """
        outs = sch._run(self, [loop], [n, max_innermost_factor], decision=decision)
        # a factor to infer (symbolic extent) is None, as TVM returns it
        return [None if sch.get(v) is None else v for v in outs]

    def check_decision(self, attrs, decision):
        return _check_tile_decision(decision, attrs[0] if attrs else None)

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0] if inputs else None)
        subj, hl = subject_of(loop), [loop.loop_var.name]
        n, most = _tile_attrs(ctx, subj, attrs)
        extent = E.as_const_int(loop.extent)
        if extent is None:
            # TVM's trivial tiling of a loop of symbolic extent: [-1, 1, ..., 1], whatever
            # the decision given (the -1, None, is the factor split infers)
            return Result(None, [None] + [1] * (n - 1), decision=(-1,) + (1,) * (n - 1))
        if extent < 1:
            raise ctx.error(subj, "the loop's extent is not positive, so it has no perfect "
                            "tiling", "sample the tiles of a loop with a positive extent",
                            highlight=hl)
        if extent > MAX_SAMPLED_EXTENT:
            raise ctx.error(subj, f"the loop's extent {extent} is beyond int64 (at most "
                            f"{MAX_SAMPLED_EXTENT})", "tile a loop of an int64 extent",
                            highlight=hl)
        if ctx.decision is None:
            tile = sample_perfect_tile(ctx.rng, extent, n, most)
        else:
            try:
                tile = list(_check_tile_decision(ctx.decision, n))
                if tile[0] < 1:
                    raise TraceError(f"a SamplePerfectTile decision is a list of positive "
                                     f"integers here (-1 is only for a loop of symbolic "
                                     f"extent; this one's is {extent}), got {tile}")
            except TraceError as e:
                raise ctx.error(subj, str(e), "", highlight=hl) from None
            if math.prod(tile) != extent:
                raise ctx.error(subj, f"the decision {tile} multiplies to {math.prod(tile)}, "
                                f"but the loop's extent is {extent}; a perfect tiling's "
                                "factors multiply to the extent", "choose factors of "
                                f"{extent}, e.g. {[1] * (n - 1) + [extent]}", highlight=hl)
        return Result(None, list(tile), decision=tuple(tile))

    def python_args(self, inputs, attrs, dialect):
        loop = fmt(inputs[0])
        rest = [f"n={self.attr(attrs, 0)}",
                f"max_innermost_factor={self.attr(attrs, 1, default=16)}"]
        return [loop if dialect == "engine" else f"loop={loop}"] + rest


# ---------------------------------------------------------------------------- partitioned tiles
def _spread(rng, e: int, k: int) -> list[int]:
    """``e`` split into ``k`` parts >= 0, uniformly among all the ways (stars and bars)."""
    if k == 1:
        return [e]
    bars = sorted(rng.sample(range(e + k - 1), k - 1)) + [e + k - 1]
    out, last = [], -1
    for b in bars:
        out.append(b - last - 1)
        last = b
    return out


def draw_partitioned_tile(rng, extent: int, n: int, partition_pos: int,
                          innerpart_factor: int) -> list[int]:
    """``n`` factors whose product is ``extent``, those from ``partition_pos`` on (the inner
    part) multiplying to a multiple of ``innerpart_factor`` (which divides ``extent``).

    TVM draws perfect tilings (:func:`draw_perfect_tile`) until one meets the condition;
    this draws from the same distribution without rejections. A perfect tiling spreads the
    exponent ``e`` of each prime ``p`` of the extent over the factors independently of the
    other primes, and the condition is one per prime: the inner part holds at least ``f``
    of the ``e`` (``p**f`` the power of ``p`` in ``innerpart_factor``). So for each prime,
    the number ``s`` of its factors in the inner part is drawn in proportion to the
    spreads that put ``s`` there, then each part's share is spread uniformly."""
    if partition_pos == 0 or innerpart_factor == 1:
        return draw_perfect_tile(rng, extent, n)   # the condition always holds
    outer, inner = partition_pos, n - partition_pos
    result = [1] * n
    for p, e in prime_factors(extent):
        f, rest = 0, innerpart_factor
        while rest % p == 0:
            rest //= p
            f += 1
        # spreads with s of the e in the inner part: C(s+inner-1, inner-1) ways there
        # times C(e-s+outer-1, outer-1) ways for the rest in the outer part
        weights = [math.comb(s + inner - 1, inner - 1) * math.comb(e - s + outer - 1, outer - 1)
                   for s in range(f, e + 1)]
        r = rng.randrange(sum(weights))
        s = f
        for w in weights:
            if r < w:
                break
            r -= w
            s += 1
        for i, x in enumerate(_spread(rng, e - s, outer) + _spread(rng, s, inner)):
            result[i] *= p ** x
    return result


def _partitioned_attrs(ctx: Ctx, subj: str, attrs, hl) -> tuple[int, int, int]:
    n = attrs[0] if attrs else None
    pos = attrs[1] if len(attrs) > 1 else 0
    factor = attrs[2] if len(attrs) > 2 else 1
    if not is_int(n) or not 1 <= n <= MAX_TILES:
        raise ctx.error(subj, f"n, the number of factors, must be an integer from 1 to "
                        f"{MAX_TILES}, got {n!r}"[:200], "e.g. n=4 for four loops",
                        highlight=hl)
    if not is_int(pos) or not 0 <= pos < n:
        raise ctx.error(subj, f"partition_pos must be the position of one of the {n} "
                        f"factors (0 to {n - 1}): the inner part is the factors from it on, "
                        f"got {pos!r}"[:200], f"e.g. partition_pos={n - 1} for the innermost "
                        "factor alone", highlight=hl)
    if not is_int(factor) or not 1 <= factor <= MAX_SAMPLED_EXTENT:
        raise ctx.error(subj, f"innerpart_factor must be a positive integer, got "
                        f"{factor!r}"[:200], "e.g. innerpart_factor=16", highlight=hl)
    return n, pos, factor


@register
class SamplePartitionedTile(Primitive):
    kind = "SamplePartitionedTile"
    method = "sample_partitioned_tile"
    attr_kinds = (("n", "int"), ("partition_pos", "int"), ("innerpart_factor", "int"))
    mutates = False
    returns = "list"
    has_decision = True

    def call(self, sch, loop, n: int, partition_pos: int = 0, innerpart_factor: int = 1,
             decision=None):
        """Sample the factors of a partitioned tiling of a loop: ``n`` integers whose
        product is the loop's extent, parted at ``partition_pos`` into an outer part (the
        factors before it) and an inner part (the factors from it on) whose product is a
        multiple of ``innerpart_factor`` (TVM's ``SamplePartitionedTile``, which
        MetaSchedule's tensor-core tiling draws so that the inner loops cover whole
        tensor-core tiles). Among the tilings that meet that, the sample is distributed as
        TVM's (a perfect tiling drawn until it meets it).

        It requires: 1) ``loop`` is a loop with a positive or symbolic extent; 2) ``n`` is
        an integer from 1 to 10 and ``partition_pos`` one from 0 to ``n - 1``; 3)
        ``innerpart_factor`` is a positive integer dividing the loop's extent (else no
        tiling meets the condition; TVM then falls back to the tiling ``[-1, 1, ..., 1]``,
        which does not meet it: refused here); 4) a loop of symbolic extent is tiled
        trivially, as TVM does, ``[None, 1, ..., 1]`` (the decision ``[-1, 1, ..., 1]``),
        and only when ``innerpart_factor`` is 1 (a symbolic extent is not known to be a
        multiple of more); 5) a given ``decision`` is ``n`` positive integers multiplying
        to the extent, the inner part's product a multiple of ``innerpart_factor`` (TVM
        repairs a decision that is not: refused here, never silently changed). The
        program is unchanged; the factors (ExprRVs) are meant for :meth:`split`.

        Before::

            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"): ...

        Call::

            i, j, k = sch.get_loops(sch.get_block("C"))
            f = sch.sample_partitioned_tile(j, n=3, partition_pos=1, innerpart_factor=16)
            j_0, j_1, j_2 = sch.split(j, factors=f)   # decision e.g. [2, 4, 16]

        After::

            for i, j_0, j_1, j_2, k in T.grid(128, 2, 4, 16, 128):   # 4 * 16 % 16 == 0
                with T.block("C"): ...

        Returns the ``n`` sampled factors (ExprRVs, outermost first); ``sch.get(v)`` gives
        each one's value, and the trace records the decision (``decision=[2, 4, 16]``).
        """
        outs = sch._run(self, [loop], [n, partition_pos, innerpart_factor],
                        decision=decision)
        return [None if sch.get(v) is None else v for v in outs]

    def check_decision(self, attrs, decision):
        return _check_tile_decision(decision, attrs[0] if attrs else None, self.kind)

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        loop = expect_loop(ctx, inputs[0] if inputs else None)
        subj, hl = subject_of(loop), [loop.loop_var.name]
        n, pos, factor = _partitioned_attrs(ctx, subj, attrs, hl)
        extent = E.as_const_int(loop.extent)
        if extent is None:
            if factor != 1:
                raise ctx.error(subj, f"the loop's extent {loop.extent} is symbolic, so it "
                                f"is not known to be a multiple of innerpart_factor={factor}: "
                                "no tiling is known to meet the condition", "use "
                                "innerpart_factor=1 here (a trivial tiling, as TVM's), or "
                                "sample the tiles of a loop of constant extent", highlight=hl)
            return Result(None, [None] + [1] * (n - 1), decision=(-1,) + (1,) * (n - 1))
        if extent < 1:
            raise ctx.error(subj, "the loop's extent is not positive, so it has no tiling",
                            "sample the tiles of a loop with a positive extent", highlight=hl)
        if extent > MAX_SAMPLED_EXTENT:
            raise ctx.error(subj, f"the loop's extent {extent} is beyond int64 (at most "
                            f"{MAX_SAMPLED_EXTENT})", "tile a loop of an int64 extent",
                            highlight=hl)
        if extent % factor:
            raise ctx.error(subj, f"innerpart_factor={factor} does not divide the loop's "
                            f"extent {extent}, so no tiling's inner part multiplies to a "
                            f"multiple of it (TVM falls back to [-1, 1, ..., 1], which does "
                            "not either)", "choose an innerpart_factor that divides "
                            f"{extent}, e.g. {max(divisors(extent, at_most=factor))}",
                            highlight=hl)
        if ctx.decision is None:
            tile = draw_partitioned_tile(ctx.rng, extent, n, pos, factor)
        else:
            try:
                tile = list(_check_tile_decision(ctx.decision, n, self.kind))
                if tile[0] < 1:
                    raise TraceError(f"a {self.kind} decision is a list of positive "
                                     f"integers here (-1 is only for a loop of symbolic "
                                     f"extent; this one's is {extent}), got {tile}")
            except TraceError as e:
                raise ctx.error(subj, str(e), "", highlight=hl) from None
            if math.prod(tile) != extent:
                raise ctx.error(subj, f"the decision {tile} multiplies to {math.prod(tile)}, "
                                f"but the loop's extent is {extent}; a tiling's factors "
                                "multiply to the extent", "choose factors of "
                                f"{extent}", highlight=hl)
            inner = math.prod(tile[pos:])
            if inner % factor:   # pos >= 1 here: the whole tiling multiplies to the extent
                example = [extent // factor] + [1] * (pos - 1) + [factor] + [1] * (n - pos - 1)
                raise ctx.error(subj, f"the decision {tile}'s inner part {tile[pos:]} (from "
                                f"partition_pos={pos}) multiplies to {inner}, which is not a "
                                f"multiple of innerpart_factor={factor}", "choose factors "
                                f"whose inner part multiplies to a multiple of {factor}, e.g. "
                                f"{example}", highlight=hl)
        return Result(None, list(tile), decision=tuple(tile))

    def python_args(self, inputs, attrs, dialect):
        loop = fmt(inputs[0])
        rest = [f"n={self.attr(attrs, 0)}", f"partition_pos={self.attr(attrs, 1, default=0)}",
                f"innerpart_factor={self.attr(attrs, 2, default=1)}"]
        return [loop if dialect == "engine" else f"loop={loop}"] + rest


# ---------------------------------------------------------------------------- categorical
def _categorical_attrs(ctx: Ctx, attrs) -> tuple[list, list]:
    if len(attrs) != 2:
        raise ctx.error("", "sample_categorical takes candidates and probs", "")
    cands, probs = attrs
    if not isinstance(cands, (list, tuple)) or not 1 <= len(cands) <= MAX_CANDIDATES or \
            not all(is_int(c) for c in cands):
        raise ctx.error("candidates", f"the candidates must be a list of 1 to {MAX_CANDIDATES} "
                        f"integers, got {cands!r}", "e.g. candidates=[0, 16, 64, 512]")
    if not isinstance(probs, (list, tuple)) or len(probs) != len(cands):
        raise ctx.error("probs", f"probs must be a list of {len(cands)} numbers, one per "
                        f"candidate, got {probs!r}", "e.g. probs=[0.25, 0.25, 0.25, 0.25]")
    for p in probs:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) \
                or p < 0:
            raise ctx.error("probs", f"every probability must be a finite number >= 0, got "
                            f"{p!r}", "")
    if not sum(probs) > 0:
        raise ctx.error("probs", "the probabilities are all zero", "give at least one "
                        "candidate a positive probability")
    return list(cands), [float(p) for p in probs]


@register
class SampleCategorical(Primitive):
    kind = "SampleCategorical"
    method = "sample_categorical"
    attr_kinds = (("candidates", "ints"), ("probs", "numbers"))
    mutates = False
    returns = "one"
    has_decision = True
    needs_function = False

    def call(self, sch, candidates, probs, decision=None):
        """Sample one of ``candidates`` with the probabilities ``probs``.

        It requires: 1) ``candidates`` is a list of 1 to 64 integers; 2) ``probs`` has
        one finite number >= 0 per candidate, not all zero; 3) a given ``decision`` is
        the index of a candidate. The program is unchanged; the sampled value (an ExprRV)
        is meant for a primitive taking an integer, e.g. the unroll annotation
        MetaSchedule samples.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("C"): ...

        Call::

            v = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.5, 0.25, 0.25])
            sch.annotate(i, "pragma_auto_unroll_max_step", v)   # decision e.g. 1

        After::

            for i in T.serial(128, annotations={"pragma_auto_unroll_max_step": 16}):
                for j in range(128):
                    with T.block("C"): ...

        Returns the sampled candidate (an ExprRV; ``sch.get(v)`` gives its value); the
        trace records the index of the candidate (``decision=1``).
        """
        cands = list(candidates) if isinstance(candidates, (list, tuple)) else candidates
        ps = list(probs) if isinstance(probs, (list, tuple)) else probs
        return sch._run(self, [], [cands, ps], decision=decision)[0]

    def check_decision(self, attrs, decision):
        cands = attrs[0] if attrs else ()
        if not is_int(decision):
            raise TraceError(f"a SampleCategorical decision is the index of a candidate, got "
                             f"{decision!r}")
        if isinstance(cands, (list, tuple)) and not 0 <= decision < len(cands):
            raise TraceError(f"a SampleCategorical decision indexes its {len(cands)} "
                             f"candidates (0 to {len(cands) - 1}), got {decision}")
        return decision

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        if inputs:
            raise ctx.error("", "sample_categorical takes no handles", "")
        cands, probs = _categorical_attrs(ctx, attrs)
        if ctx.decision is None:
            index = ctx.rng.choices(range(len(cands)), weights=probs)[0]
        else:
            try:
                index = self.check_decision(attrs, ctx.decision)
            except TraceError as e:
                raise ctx.error("the decision", str(e), "") from None
        return Result(None, [cands[index]], decision=index)

    def python_args(self, inputs, attrs, dialect):
        return [f"candidates={self.attr(attrs, 0)}", f"probs={self.attr(attrs, 1)}"]


# ---------------------------------------------------------------------------- compute location
def loop_iter_type(ctx: Ctx, loop: For) -> IterType | None:
    """TVM's GetLoopIterType: SPATIAL when the blocks under ``loop`` bind it only to
    spatial axes (or not at all), REDUCE when only to reduction axes, None (opaque) when
    to both or to other kinds."""
    lv = loop.loop_var
    kinds = set()
    for b in ctx.index.blocks_under(loop):
        r = ctx.index.realize.get(id(b))
        if r is None:
            continue
        for iv, val in zip(b.iter_vars, r.iter_values):
            if uses_var(val, lv):
                kinds.add(iv.iter_type)
    if kinds - {IterType.SPATIAL, IterType.REDUCE} or len(kinds) > 1:
        return None
    return IterType.REDUCE if kinds == {IterType.REDUCE} else IterType.SPATIAL


def _common_loops(ctx: Ctx, blocks: list[Block]) -> list[For]:
    """The loops around every one of ``blocks`` (in their scope), outermost first."""
    chains = [ctx.index.loops_above(ctx.index.realize[id(b)]) for b in blocks]
    out = []
    for group in zip(*chains):
        if any(lp is not group[0] for lp in group):
            break
        out.append(group[0])
    return out


def _legal(ctx: Ctx, prim: Primitive, inputs: list, attrs: list) -> bool:
    try:
        prim.apply(ctx, inputs, attrs)
    except ScheduleError:
        return False
    return True


def compute_locations(ctx: Ctx, blk: Block, only: int | None = None
                      ) -> list[tuple[int, object]]:
    """TVM's CollectComputeLocation: the places ``blk`` can be computed at, as
    ``(decision, location)`` pairs — ``-2`` inline (when it can be inlined), ``-1`` where it
    is (the root), and ``i`` the ``i``-th loop above its first consumer, for the loops
    around all its consumers that are not unit loops, outside the first non-spatial loop
    (keeping only the leading spatial ones), where compute_at (preserving unit loops)
    is legal. With ``only``, the legality of that one location alone is tried (what a
    replayed decision needs: one trial rather than one per loop)."""
    out: list[tuple[int, object]] = []
    if only in (None, -2) and _legal(ctx, ComputeInline(), [blk], []):
        out.append((-2, INLINE_MARK))
    out.append((-1, ROOT_MARK))
    consumers = consumers_of(ctx, blk)
    if not consumers:
        return out
    boundary = _common_loops(ctx, consumers)
    if not boundary:
        return out
    loops = ctx.index.loops_above(ctx.index.realize[id(consumers[0])])
    n_candidate = len(boundary)
    types = [loop_iter_type(ctx, lp) for lp in loops[:n_candidate]]
    last_spatial = max((i for i, t in enumerate(types) if t is IterType.SPATIAL), default=-1)
    visited_reduce = False
    for i, lp in enumerate(loops[:n_candidate]):
        if E.as_const_int(lp.extent) == 1:
            continue
        if types[i] is IterType.SPATIAL:
            if visited_reduce:
                break
        else:
            visited_reduce = True
            if i > last_spatial:
                break
        if only in (None, i) and _legal(ctx, ComputeAt(), [blk, lp], [True, -1]):
            out.append((i, lp))
    return out


@register
class SampleComputeLocation(Primitive):
    kind = "SampleComputeLocation"
    method = "sample_compute_location"
    attr_kinds = ()
    mutates = False
    returns = "one"
    has_decision = True

    def call(self, sch, block, decision=None):
        """Sample a compute location of a block: a loop to :meth:`compute_at` it under,
        or one of TVM's two special locations — where it is (the root, decision -1) and
        inlined (decision -2, offered when compute_inline is legal).

        It requires: 1) ``block`` is a block handle; 2) a given ``decision`` is one of the
        block's legal locations: -2, -1, or the position ``i`` of a loop above its first
        consumer (0 the outermost) under which compute_at is legal. The program is
        unchanged; pass the result to ``compute_at``.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"): ...
            for i, j in T.grid(128, 128):
                with T.block("C"): ...    # reads B

        Call::

            loc = sch.sample_compute_location(sch.get_block("B"))   # decision e.g. 0
            sch.compute_at(sch.get_block("B"), loc, preserve_unit_loops=True)

        After::

            for i in range(128):
                for ax0 in range(128):
                    with T.block("B"): ...
                for j in range(128):
                    with T.block("C"): ...

        Returns a LoopRV; ``compute_at`` / ``reverse_compute_at`` given the root location
        do nothing, given the inline location inline the block (as TVM).
        """
        return sch._run(self, [block], [], decision=decision)[0]

    def check_decision(self, attrs, decision):
        if not is_int(decision) or decision < -2:
            raise TraceError("a SampleComputeLocation decision is -2 (inline), -1 (root) or "
                             f"the position of a loop (0, 1, ...), got {decision!r}")
        return decision

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0] if inputs else None)
        if ctx.decision is None:
            locations = compute_locations(ctx, blk)
            decision, where = locations[ctx.rng.randrange(len(locations))]
        else:
            try:
                decision = self.check_decision(attrs, ctx.decision)
            except TraceError as e:
                raise ctx.error(f"block {blk.name_hint}", str(e), "") from None
            found = dict(compute_locations(ctx, blk, only=decision))
            if decision not in found:
                legal = ", ".join(str(d) for d, _ in compute_locations(ctx, blk))
                raise ctx.error(f"block {blk.name_hint}", f"{decision} is not a legal compute "
                                f"location of block {blk.name_hint} in this program (legal: "
                                f"{legal})", "choose one of the legal locations",
                                highlight=[blk.name_hint])
            where = found[decision]
        return Result(None, [where], decision=decision)

    def python_args(self, inputs, attrs, dialect):
        block = fmt(inputs[0])
        return [block if dialect == "engine" else f"block={block}"]
