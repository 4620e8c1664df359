"""The one-to-one check of transform_layout's index maps, bounded by a count of points.

A map is checked by evaluating it on the old index space: per dimension for a *separable*
map (each new index uses one old index, as in ``(j // 16, k, j % 16)``: linear in the
extents), on every point otherwise. Every point evaluated is charged first to a
:class:`CheckBudget` — the one installed by :func:`check_budget` for the current thread
(the web app gives each request one), else ``MAX_CHECK`` per check — so the work a trace
can ask for is bounded whatever its sizes and maps; over the budget the check refuses
with :class:`CheckBudgetError` instead of starting. Verdicts are remembered by map and
shape, so replaying the same trace again costs nothing.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import numpy as np

from engine.ir import expr as E
from engine.ir.functor import collect_vars

MAX_CHECK = 1 << 24  # elements whose images are enumerated to prove the map injective
SEPARABLE_EXAMPLE = "(j // 16, k, j % 16)"


class IndexMapError(ValueError):
    """An index map that cannot be read (the message says what to write instead)."""


_PREC = {E.Add: 1, E.Sub: 1, E.Mul: 2, E.FloorDiv: 2, E.FloorMod: 2}
_SYM = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%"}


def expr_text(e: E.PrimExpr) -> str:
    """Python text of an index expression (the inverse of ``layout.parse_index_map``)."""
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return str(e.value)
    t = type(e)
    if t in _PREC:
        p = _PREC[t]
        left = expr_text(e.a)
        if type(e.a) in _PREC and _PREC[type(e.a)] < p:
            left = f"({left})"
        right = expr_text(e.b)
        if type(e.b) in _PREC and _PREC[type(e.b)] <= p or \
                (isinstance(e.b, E.IntImm) and e.b.value < 0):
            right = f"({right})"
        return f"{left} {_SYM[t]} {right}"
    raise IndexMapError(f"{type(e).__name__} is not allowed in an index map (use integers, "
                        "the parameters and + - * // %)")


class CheckBudget:
    """How many index points the one-to-one checks of index maps may still evaluate.

    Shared by every ``transform_layout`` run under :func:`check_budget` (e.g. all the
    replays one web request does), so the work a link can ask for is bounded by a count,
    whatever its sizes and maps. ``used`` is the number of points evaluated so far.
    """

    def __init__(self, points: int):
        self.points = int(points)
        self.used = 0

    @property
    def left(self) -> int:
        return self.points - self.used

    def take(self, n: int) -> bool:
        """Reserve ``n`` points; False (and nothing reserved) when fewer are left."""
        if n > self.left:
            return False
        self.used += n
        return True


class CheckBudgetError(IndexMapError):
    """The one-to-one check of an index map needs more points than the budget has left."""


_BUDGET: ContextVar[CheckBudget | None] = ContextVar("index_map_check_budget", default=None)
_VERDICTS: dict[tuple, bool] = {}   # (map text, shape) -> one-to-one, for replays
_MAX_VERDICTS = 512
_VERDICTS_LOCK = threading.Lock()


@contextmanager
def check_budget(budget: CheckBudget) -> Iterator[CheckBudget]:
    """Run the enclosed schedule primitives with the one-to-one checks drawing on
    ``budget`` (per thread/context); outside, each check may evaluate up to ``MAX_CHECK``
    points."""
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)



def _np_eval(e: E.PrimExpr, env: dict):
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return np.int64(e.value)
    a, b = _np_eval(e.a, env), _np_eval(e.b, env)
    t = type(e)
    if t is E.Add:
        return a + b
    if t is E.Sub:
        return a - b
    if t is E.Mul:
        return a * b
    if t in (E.FloorDiv, E.FloorMod):
        b = np.broadcast_to(b, np.shape(a)) if np.ndim(a) else b
        if np.any(np.asarray(b) == 0):
            raise IndexMapError("the index map divides by zero")
        return np.floor_divide(a, b) if t is E.FloorDiv else np.mod(a, b)
    raise IndexMapError(f"{t.__name__} is not allowed in an index map")  # pragma: no cover


def injective(params: list, exprs: list, shape: tuple, new_shape: tuple) -> bool:
    """True when no two old indices map to the same new index, within the current budget.

    Verdicts are remembered (by map and shape), so replaying a trace again and again costs
    the check once. Raises :class:`CheckBudgetError` when the check needs more points than
    the budget (:func:`check_budget`, else ``MAX_CHECK`` per check) allows."""
    key = (tuple(map(str, exprs)), tuple(p.name for p in params), tuple(shape))
    with _VERDICTS_LOCK:
        known = _VERDICTS.get(key)
    if known is not None:
        return known
    try:
        ok = _injective(params, exprs, tuple(shape), tuple(new_shape))
    except OverflowError:
        raise IndexMapError("the index map's values are too large to be indices") from None
    with _VERDICTS_LOCK:
        while len(_VERDICTS) >= _MAX_VERDICTS:
            del _VERDICTS[next(iter(_VERDICTS))]
        _VERDICTS[key] = ok
    return ok


def _charge(points: int) -> None:
    """Reserve ``points`` evaluations of the map, or refuse in a sentence."""
    budget = _BUDGET.get()
    if budget is None:
        if points <= MAX_CHECK:
            return
        have = MAX_CHECK
    elif budget.take(points):
        return
    else:
        have = budget.left
    raise CheckBudgetError(
        f"this index map cannot be checked to be one-to-one within the budget ({points} "
        f"points to check, {max(have, 0)} left); use a smaller size or a map whose new "
        f"indices each use a single old index, e.g. {SEPARABLE_EXAMPLE}")


def _injective(params: list, exprs: list, shape: tuple, new_shape: tuple) -> bool:
    """True when no two old indices map to the same new index.

    A *separable* map (each new index uses at most one old index, as in ``(j // 16, k,
    j % 16)``) is one-to-one exactly when, for every old index, the new indices using it
    are one-to-one along that dimension — checked in time linear in the extents. Other
    maps are checked by enumerating the old index space. Either way the points evaluated
    are charged to the budget first."""
    uses = [[p for p in params if any(v is p for v in collect_vars(x))] for x in exprs]
    if all(len(u) <= 1 for u in uses):
        _charge(sum(shape))
        for p, n in zip(params, shape):
            mine = [(x, ns) for x, u, ns in zip(exprs, uses, new_shape) if u and u[0] is p]
            if not mine:
                if n > 1:
                    return False
                continue
            vals = np.arange(n, dtype=np.int64)
            cols = [np.broadcast_to(_np_eval(x, {p: vals}), (n,)) for x, _ in mine]
            if _distinct_rows(cols, [ns for _, ns in mine]) != n:
                return False
        return True
    _charge(math.prod(shape))
    return _injective_enum(params, exprs, shape, new_shape)


def _distinct_rows(cols: list, extents: list) -> int:
    """How many distinct tuples the columns ``cols`` (new indices within ``extents``)
    hold: linearised when the new index space fits an int64, else compared row-wise."""
    if math.prod(extents) < 1 << 62:
        lin = np.zeros(len(cols[0]), dtype=np.int64)
        for c, ext in zip(cols, extents):
            lin = lin * ext + np.asarray(c, dtype=np.int64)
        return int(np.unique(lin).size)
    return int(np.unique(np.stack([np.asarray(c, dtype=np.int64) for c in cols], axis=1),
                         axis=0).shape[0])


def _injective_enum(params: list, exprs: list, shape: tuple, new_shape: tuple) -> bool:
    """Enumerate the old index space (in chunks along the first dimension) and check that
    no two old indices map to the same new index: marked in a bitmap of the new index space
    when that is at most a few bytes per point, else all images sorted once at the end, so
    memory follows the number of points, not the size of the new shape."""
    count, total_new = math.prod(shape), math.prod(new_shape)
    seen = np.zeros(total_new, dtype=bool) if total_new <= 8 * count else None
    strides = [math.prod(new_shape[d + 1:]) for d in range(len(new_shape))]
    images = []
    for cols in _image_chunks(params, exprs, shape):
        if seen is None:
            images.append(cols)
            continue
        lin = np.zeros(len(cols[0]), dtype=np.int64)
        for c, st in zip(cols, strides):
            lin += np.asarray(c, dtype=np.int64) * st
        if np.unique(lin).size != lin.size or seen[lin].any():
            return False
        seen[lin] = True
    if seen is not None:
        return True
    cols = [np.concatenate([chunk[d] for chunk in images]) for d in range(len(exprs))]
    return _distinct_rows(cols, list(new_shape)) == count


def _image_chunks(params: list, exprs: list, shape: tuple) -> Iterator[list]:
    """The new indices of the old index space, about a million points at a time (chunks
    along the first dimension): one column per new index."""
    rest = shape[1:]
    step = max(1, (1 << 20) // max(math.prod(rest), 1))
    for start in range(0, shape[0], step):
        stop = min(shape[0], start + step)
        grids = np.meshgrid(np.arange(start, stop, dtype=np.int64),
                            *[np.arange(s, dtype=np.int64) for s in rest], indexing="ij")
        env = {p: g.ravel() for p, g in zip(params, grids)}
        size = grids[0].size
        yield [np.broadcast_to(_np_eval(x, env), (size,)) for x in exprs]
