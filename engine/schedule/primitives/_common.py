"""Helpers shared by the primitive modules: argument checks and small IR utilities."""
from __future__ import annotations

import re
from typing import Any

from engine.ir import expr as E
from engine.ir.stmt import Block, BlockRealize, For, IterType

from ..registry import Ctx


def loop_name(loop: For) -> str:
    return loop.loop_var.name


#: a generated loop name longer than this is shortened (see :func:`split_names`)
MAX_GENERATED_NAME = 48
_GENERATED_SUFFIX = re.compile(r"_(?:[0-9]+|fused|o|i|init)(?=_|$)")


def name_stem(name: str) -> str:
    """The name a generated loop name grew from: the text before its first generated
    suffix (``_0``, ``_fused``, ...), at most 24 characters (``i_0_j_0_fused`` -> ``i``)."""
    m = _GENERATED_SUFFIX.search(name)
    stem = name[:m.start()] if m and m.start() > 0 else name
    return stem[:24]


def split_names(base: str, n: int) -> list[str]:
    """The names of the ``n`` loops a split of loop ``base`` makes: TVM's ``base_0``,
    ``base_1``, ... — on the stem of ``base`` when those would be longer than
    :data:`MAX_GENERATED_NAME` (a link of many splits must not grow names without end)."""
    if len(base) + 1 + len(str(n - 1)) > MAX_GENERATED_NAME:
        base = name_stem(base)
    return [f"{base}_{i}" for i in range(n)]


def fused_name(names: list[str]) -> str:
    """The name of the loop a fuse makes: TVM's ``i_j_fused`` — or ``<stem of the first
    loop>_fused`` when that would be longer than :data:`MAX_GENERATED_NAME` (TVM's scheme
    doubles the names with every round of fuse and split)."""
    joined = "_".join(names) + "_fused"
    return joined if len(joined) <= MAX_GENERATED_NAME else name_stem(names[0]) + "_fused"


def subject_of(node: Any) -> str:
    if isinstance(node, For):
        return f"loop {node.loop_var.name}"
    if isinstance(node, Block):
        return f"block {node.name_hint}"
    return repr(node)


def name_of(node: Any) -> str:
    if isinstance(node, For):
        return node.loop_var.name
    if isinstance(node, Block):
        return node.name_hint
    return ""


def expect_loop(ctx: Ctx, node: Any, what: str = "loop") -> For:
    if not isinstance(node, For):
        raise ctx.error(subject_of(node), f"the {what} argument must be a loop handle, "
                        f"got {subject_of(node)}", "get loops with sch.get_loops(block)",
                        highlight=[name_of(node)])
    return node


def expect_block(ctx: Ctx, node: Any, what: str = "block") -> Block:
    if not isinstance(node, Block):
        raise ctx.error(subject_of(node), f"the {what} argument must be a block handle, "
                        f"got {subject_of(node)}", "get blocks with sch.get_block(name)",
                        highlight=[name_of(node)])
    if node is ctx.index.root_block:
        raise ctx.error("block root", "the root block cannot be scheduled", "")
    return node


def as_bool(ctx: Ctx, v: Any, name: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise ctx.error("", f"{name} must be True or False, got {v!r}", "")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def realize_of(ctx: Ctx, block: Block) -> BlockRealize:
    return ctx.index.realize[id(block)]


def binding_map(realize: BlockRealize) -> dict:
    """Block iter var -> bound expression."""
    return {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}


def is_reduction_block(block: Block) -> bool:
    return any(iv.iter_type is IterType.REDUCE for iv in block.iter_vars)


def true_const() -> E.PrimExpr:
    return E.IntImm("bool", 1)


def is_true(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def conj(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    if is_true(a):
        return b
    if is_true(b):
        return a
    return E.And(a, b)


def buffers_read(block: Block) -> list:
    return [r.buffer for r in block.reads]


def buffers_written(block: Block) -> list:
    return [r.buffer for r in block.writes]


def fresh_name(name: str, used: set) -> str:
    """``name``, or ``name_1``, ``name_2``, ... — the first not in ``used``."""
    if name not in used:
        return name
    n = 1
    while f"{name}_{n}" in used:
        n += 1
    return f"{name}_{n}"


def conjuncts(e: E.PrimExpr) -> list:
    """The terms of a conjunction ``a and b and ...`` (``[e]`` when ``e`` is no ``and``)."""
    if isinstance(e, E.And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


# ---------------------------------------------------------------------------
# Affine bindings: a small form of TVM's DetectIterMap (surjective level)
# ---------------------------------------------------------------------------
class AffineBindings:
    """What :func:`affine_bindings` found.

    ``ok``: every binding is an affine combination of the loops (below). Otherwise
    ``reason`` is ``("axis", k)`` (binding ``k`` is not) or ``("where", conjunct)`` (a
    conjunct of the predicate bounds something that is not one of the bindings' parts).
    ``ranges[k]`` is ``(lo, extent)`` of binding ``k``'s values over the loops under the
    predicate — every value in ``[lo, lo + extent)`` is taken — or None when it depends on
    variables other than the loops given.
    """

    __slots__ = ("ok", "reason", "ranges")

    def __init__(self, ok: bool, reason: Any = None, ranges: Any = None):
        self.ok, self.reason, self.ranges = ok, reason, ranges or []


class _NotAffine(Exception):
    pass


def _linear(e: E.PrimExpr):
    from engine.arith.simplify import Analyzer
    return Analyzer().linear(e)


def affine_bindings(values, loops, predicate) -> AffineBindings:
    """Are ``values`` (a block's bindings) an affine map of ``loops`` under ``predicate``?

    The rule is TVM's (``IsAffineBinding``: ``DetectIterMap`` at the surjective level, each
    binding a scale-1 sum): every binding is ``offset + sum(coef * digit)`` where a digit is
    a loop (``i``), or ``X // d``, ``X % m``, ``X // d % m`` of a loop or of a fused sum of
    loops ``X`` (``i_0 * 4 + i_1``); the digits of one binding form a mixed radix starting
    at scale 1 (``i_0 * 4 + i_1`` with ``i_1`` in [0, 4)), or overlap without a gap as the
    surjective level allows (``v0 * 2 + v1`` with v1 in [0, 4)); no part of a loop is used
    twice (``i // 8`` and ``i % 8`` are two parts, ``i`` and ``i`` are not); the offset uses no
    loop of ``loops`` (other variables are constants here). Each conjunct of the predicate
    that uses the loops bounds a fused sum (``i_0 * 4 + i_1 < 10``, as an imperfect split
    leaves) or one binding's digits (``0 <= vi``), never a combination that is none of
    them (``i * 16 + j * 4 + k < 23`` with ``vi = i, vj = j``).
    """
    iters = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        iters[id(lp.loop_var)] = (lo, ext if lo is not None else None)
    if not iters:
        return AffineBindings(True, None, [None] * len(values))

    def uses_iter(e) -> bool:
        from engine.ir.functor import collect_vars
        return any(id(v) in iters for v in collect_vars(e))

    # ---- the predicate's conjuncts: upper (S < u) or lower (S >= l) bounds of a sum S
    guards = []
    for c in conjuncts(predicate) if predicate is not None else []:
        if is_true(c) or not uses_iter(c):
            continue
        if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)):
            return AffineBindings(False, ("where", c))
        a, b = (c.a, c.b) if isinstance(c, (E.LT, E.LE)) else (c.b, c.a)
        t = E.Sub(a, b)
        if isinstance(c, (E.LE, E.GE)):
            t = E.Sub(t, E.const(1, t.dtype))
        terms, const = _linear(t)          # t < 0
        it = [(x, k) for x, k in terms.values() if uses_iter(x)]
        symbolic = any(not uses_iter(x) for x, _ in terms.values())
        for x, k in it:                    # a loop's digit counts from its min
            if isinstance(x, E.Var):
                lo = iters[id(x)][0]
                symbolic = symbolic or lo is None
                const += k * (lo or 0)
        if all(k > 0 for _, k in it):
            guards.append({"conj": c, "atoms": it, "upper": True,
                           "bound": None if symbolic else -const})
        elif all(k < 0 for _, k in it):
            guards.append({"conj": c, "atoms": [(x, -k) for x, k in it], "upper": False,
                           "bound": None if symbolic else const + 1})
        else:
            return AffineBindings(False, ("where", c))
    guards.sort(key=lambda g: len(g["atoms"]))

    sources: dict = {}       # source key -> extent (None: unknown)
    pseudo: list = []        # (digit key, the digits {key: coef} it stands for, scale)

    def radix(dt: dict, overlap: bool = True):
        """(scale, extent) of a sum of digits forming a mixed radix (``scale * (d0 + e0 *
        (d1 + e1 * ...))``), or None. At scale 1 (``overlap``) a digit may also come in
        below the scale the radix expects, as TVM's surjective iterator maps allow
        (``v0 * 2 + v1`` with v1 in [0, 4): every value in [0, 2 * 5 + 3] is taken); the
        extent is then the number of values taken."""
        if not dt:
            return 1, 1
        items = sorted(((c, d) for d, c in dt.items()), key=lambda x: x[0])
        scale = items[0][0]
        if scale <= 0:
            return None
        expected, tail = 1, 0
        for c, d in items:
            if expected is None or c % scale:
                return None
            unit = c // scale
            if unit != expected:
                if not (overlap and scale == 1 and unit < expected):
                    return None
                tail += expected - unit
            expected = None if d[2] is None else unit * d[2]
        return scale, (None if expected is None else expected + tail)

    def in_pseudo(dt: dict) -> dict:
        """``dt`` with the sums the predicate bounded replaced by their digits."""
        dt = dict(dt)
        for pkey, parts, scale in pseudo:
            if all(dt.get(d) == c for d, c in parts.items()):
                for d in parts:
                    del dt[d]
                dt[pkey] = scale
        return dt

    def guard_terms(g):
        if "terms" not in g:
            try:
                gt: dict = {}
                for x, k in g["atoms"]:
                    d = digit(x)
                    if d[2] != 1:
                        gt[d] = gt.get(d, 0) + k
                g["terms"] = gt
            except _NotAffine:
                g["terms"] = None
        return None if g["terms"] is None else in_pseudo(g["terms"])

    def bounded(dt: dict, loops_only: bool = False) -> dict:
        """Sums of the digits of ``dt`` that an upper bound of the predicate cuts short
        become one digit (``i_1_0 * 4 + i_1_1 < 7``: a digit of extent 7), smallest first
        (``loops_only``: bounds of sums of loops alone, for a fused sum of loops)."""
        for g in guards:
            if g.get("used") or not g["upper"]:
                continue
            if loops_only and not all(isinstance(x, E.Var) for x, _k in g["atoms"]):
                continue
            gt = guard_terms(g)
            if not gt or not all(dt.get(d) == c for d, c in gt.items()):
                continue
            r = radix(gt, overlap=False)
            if r is None:
                continue
            scale, ext = r
            if g["bound"] is None or ext is None:
                ext = None
            else:
                ext = max(0, min(ext, -(-g["bound"] // scale)))
            pkey = (("where", len(pseudo)), 1, ext)
            pseudo.append((pkey, gt, scale))
            for d in gt:
                del dt[d]
            dt[pkey] = scale
            g["used"] = True
        return dt

    def source(e, bare: bool = False) -> tuple:
        """(key, extent) of a fused sum of loops (a mixed radix, offset 0); a loop not
        starting at 0 only ``bare`` (a digit of its own, its min in the offset)."""
        terms, const = _linear(e)
        if const != 0 or not terms:
            raise _NotAffine
        parts = []
        for x, k in terms.values():
            if not isinstance(x, E.Var) or id(x) not in iters or k <= 0:
                raise _NotAffine
            lo, ext = iters[id(x)]
            if lo != 0 and not (bare and len(terms) == 1 and k == 1):
                raise _NotAffine
            parts.append((id(x), k, ext))
        if len(parts) == 1 and parts[0][1] == 1:
            vid, _k, ext = parts[0]
            key: tuple = ((vid, 1),)
            extent = ext
        else:
            key = tuple(sorted((vid, k) for vid, k, _e in parts))
            if key in sources:
                return key, sources[key]
            dt = {(((vid, 1),), 1, ext): k for vid, k, ext in parts}
            r = radix(bounded(dt, loops_only=True))
            if r is None or r[0] != 1:
                raise _NotAffine
            extent = r[1]
        sources[key] = extent
        return key, extent

    def digit(x) -> tuple:
        """(source key, lower, extent): the value ``X // lower % extent`` of a source."""
        if isinstance(x, (E.FloorDiv, E.FloorMod)):
            c = E.as_const_int(x.b)
            if c is None or c <= 0:
                raise _NotAffine
            if isinstance(x.a, (E.FloorDiv, E.FloorMod)):
                key, lower, ext = digit(x.a)
            else:
                key, ext = source(x.a)
                lower = 1
            total = sources[key]
            if ext is None or total is None:
                raise _NotAffine
            if isinstance(x, E.FloorDiv):
                if ext % c == 0:
                    return key, lower * c, ext // c
                if lower * ext >= total:           # the top digit: rounded up
                    return key, lower * c, -(-ext // c)
                raise _NotAffine
            if ext <= c:
                return key, lower, ext
            if ext % c == 0:
                return key, lower, c
            raise _NotAffine
        key, ext = source(x, bare=True)
        return key, 1, ext

    # ---- the bindings as sums of digits
    bindings = []            # per binding: [{digit: coef}, offset or None]
    windows: dict = {}       # source key -> [(lower, extent, binding)]
    for k, v in enumerate(values):
        try:
            terms, const = _linear(v)
            offset = const
            dt: dict = {}
            for x, coef in terms.values():
                if not uses_iter(x):
                    offset = None           # a constant under these loops, not a number
                    continue
                if isinstance(x, E.Var):
                    lo = iters[id(x)][0]
                    offset = None if offset is None or lo is None else offset + coef * lo
                d = digit(x)
                if d[2] == 1:
                    continue                # a digit of extent 1 is always 0
                dt[d] = coef
                windows.setdefault(d[0], []).append((d[1], d[2], k))
            bindings.append([dt, offset])
        except _NotAffine:
            return AffineBindings(False, ("axis", k))
    # ---- no loop in two sources, no part of a source used twice, the parts aligned (so
    # they are independent)
    var_source: dict = {}
    for key, ws in windows.items():
        if not isinstance(key[0], tuple):
            continue
        for vid, _c in key:
            if var_source.setdefault(vid, key) != key:
                return AffineBindings(False, ("axis", ws[0][2]))
    for key, ws in windows.items():
        total = sources[key]
        ws.sort(key=lambda w: w[0])
        for (l1, e1, _k1), (l2, _e2, k2) in zip(ws, ws[1:]):
            if e1 is None or l2 < l1 * e1 or l2 % (l1 * e1) != 0:
                return AffineBindings(False, ("axis", k2))
        for lower, ext, k in ws:
            if ext is not None and total is not None and lower * ext < total and \
                    total % (lower * ext) != 0:
                return AffineBindings(False, ("axis", k))
    # ---- each binding: upper bounds of the predicate, then a mixed radix from scale 1
    for entry in bindings:
        entry[0] = bounded(entry[0])
    shifts: list = [0] * len(bindings)
    for g in guards:
        if g.get("used"):
            continue
        gt = guard_terms(g)
        owner = None if g["upper"] or not gt else next(
            (k for k, (dt, _o) in enumerate(bindings) if dt == gt), None)
        if owner is None:
            return AffineBindings(False, ("where", g["conj"]))
        shifts[owner] = None if g["bound"] is None or shifts[owner] is None else \
            max(shifts[owner], g["bound"])
    ranges = []
    for k, (dt, offset) in enumerate(bindings):
        r = radix(dt)
        if r is None or r[0] != 1:
            return AffineBindings(False, ("axis", k))
        shift = shifts[k]
        if offset is None or r[1] is None or shift is None:
            ranges.append(None)
        else:
            shift = max(0, shift)
            ranges.append((offset + shift, max(0, r[1] - shift)))
    return AffineBindings(True, None, ranges)
