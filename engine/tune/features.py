"""Loop-nest features of a scheduled program: what the cost model sees of a candidate.

Like Ansor's and MetaSchedule's per-store features, computed from the scheduled TensorIR
(the loop nest with its blocks) without compiling it. For each leaf block (a block holding
a store): its loops' extents and kinds (parallel, vectorized, unrolled), the arithmetic per
iteration, and for each buffer it touches the stride of the innermost and the vectorized
loop (contiguous, reused, strided), the bytes touched by the innermost 1..6 loops
(footprints: what must stay in cache), and the arithmetic intensity of the largest sub-nest
whose data fits in L1 and in L2. The two heaviest blocks give the vector, plus a few
whole-program counts. Values are on log2 scales (``log2(1 + x)``) so a tree model splits
them evenly.

:func:`program_features` -> a fixed-length list of floats (:data:`FEATURE_NAMES`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.function import IRModule, PrimFunc

__all__ = ["program_features", "FEATURE_NAMES", "block_accesses"]

L1_BYTES = 32 * 1024
L2_BYTES = 512 * 1024
FOOTPRINT_LEVELS = (1, 2, 3, 4, 6)
BUFFERS_PER_BLOCK = 3
BLOCKS = 2

_BUF_NAMES = (["stride_inner_zero", "stride_inner_one", "stride_inner_big", "stride_inner",
               "stride_vector", "reuse_loops"] +
              [f"footprint_{k}" for k in FOOTPRINT_LEVELS] + ["footprint_all", "is_write",
                                                              "local_scope"])
_BLOCK_NAMES = (["iterations", "loops", "inner_extent", "inner_vectorized", "inner_unrolled",
                 "inner_parallel", "vector_extent", "vector_depth", "parallel_extent",
                 "parallel_depth", "unrolled_extent", "unroll_pragma", "ops", "reduction",
                 "intensity_l1", "iterations_l1", "intensity_l2", "iterations_l2"] +
                [f"buf{b}_{n}" for b in range(BUFFERS_PER_BLOCK) for n in _BUF_NAMES])
FEATURE_NAMES = ([f"block{k}_{n}" for k in range(BLOCKS) for n in _BLOCK_NAMES] +
                 ["leaf_blocks", "allocated_buffers", "total_iterations", "parallel_loops"])


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


@dataclass
class _Loop:
    var: E.Var
    extent: int
    kind: S.ForKind
    annotations: tuple


@dataclass
class _Access:
    buffer: Any
    indices: tuple
    write: bool


@dataclass
class _Leaf:
    loops: list
    block: S.Block
    bindings: dict
    accesses: list = field(default_factory=list)
    ops: int = 0
    pragma_unroll: int = 0


# --------------------------------------------------------------------------- evaluation
def _eval(e: Any, env: dict) -> int:
    """An index expression's integer value with loop variables from ``env`` (others 0)."""
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.FloatImm):
        return int(e.value)
    if isinstance(e, E.Var):
        v = env.get(e, 0)
        return v if isinstance(v, int) else _eval(v, env)
    if isinstance(e, E.Cast):
        return _eval(e.value, env)
    if isinstance(e, E.Add):
        return _eval(e.a, env) + _eval(e.b, env)
    if isinstance(e, E.Sub):
        return _eval(e.a, env) - _eval(e.b, env)
    if isinstance(e, E.Mul):
        return _eval(e.a, env) * _eval(e.b, env)
    if isinstance(e, (E.FloorDiv, E.Div)):
        b = _eval(e.b, env)
        return _eval(e.a, env) // b if b else 0
    if isinstance(e, (E.FloorMod, E.Mod)):
        b = _eval(e.b, env)
        return _eval(e.a, env) % b if b else 0
    if isinstance(e, E.Min):
        return min(_eval(e.a, env), _eval(e.b, env))
    if isinstance(e, E.Max):
        return max(_eval(e.a, env), _eval(e.b, env))
    if isinstance(e, E.Ramp):
        return _eval(e.base, env)
    return 0


def _ops(e: Any) -> int:
    """Arithmetic operations in a value expression (loads and constants are free)."""
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.Min, E.Max, E.Mod,
                      E.FloorMod)):
        return 1 + _ops(e.a) + _ops(e.b)
    if isinstance(e, E.Call):
        return 1 + sum(_ops(a) for a in e.args)
    if isinstance(e, E.Select):
        return 1 + _ops(e.condition) + _ops(e.true_value) + _ops(e.false_value)
    if isinstance(e, E.Cast):
        return _ops(e.value)
    return 0


def _loads(e: Any, out: list) -> None:
    if isinstance(e, E.BufferLoad):
        out.append(_Access(e.buffer, e.indices, False))
        for i in e.indices:
            _loads(i, out)
        return
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, name, None)
        if isinstance(sub, E.PrimExpr):
            _loads(sub, out)
    for arg in getattr(e, "args", ()) or ():
        if isinstance(arg, E.PrimExpr):
            _loads(arg, out)


# --------------------------------------------------------------------------- walking
def _leaves(stmt: Any, loops: list, out: list) -> None:
    if isinstance(stmt, S.For):
        ext = stmt.extent.value if isinstance(stmt.extent, E.IntImm) else 1
        _leaves(stmt.body, loops + [_Loop(stmt.loop_var, max(1, ext), stmt.kind,
                                          stmt.annotations)], out)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _leaves(s, loops, out)
    elif isinstance(stmt, S.BlockRealize):
        blk = stmt.block
        bindings = {iv.var: val for iv, val in zip(blk.iter_vars, stmt.iter_values)}
        stores: list = []
        _stores(blk.body, stores)
        if stores:
            leaf = _Leaf(loops, blk, bindings)
            for st in stores:
                leaf.accesses.append(_Access(st.buffer, st.indices, True))
                _loads(st.value, leaf.accesses)
                leaf.ops += _ops(st.value)
            leaf.pragma_unroll = max([_pragma(lp.annotations) for lp in loops] +
                                     [_pragma(blk.annotations)])
            out.append(leaf)
        else:
            _leaves(blk.body, loops, out)
    elif isinstance(stmt, (S.IfThenElse,)):
        _leaves(stmt.then_case, loops, out)
        if stmt.else_case is not None:
            _leaves(stmt.else_case, loops, out)
    elif isinstance(stmt, (S.LetStmt, S.Allocate)):
        _leaves(stmt.body, loops, out)


def _stores(stmt: Any, out: list) -> None:
    if isinstance(stmt, S.BufferStore):
        out.append(stmt)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _stores(s, out)
    elif isinstance(stmt, S.IfThenElse):
        _stores(stmt.then_case, out)
        if stmt.else_case is not None:
            _stores(stmt.else_case, out)
    elif isinstance(stmt, (S.LetStmt,)):
        _stores(stmt.body, out)


def _pragma(annotations: tuple) -> int:
    for k, v in annotations or ():
        if "unroll" in str(k):
            try:
                return int(getattr(v, "value", v))
            except (TypeError, ValueError):
                return 1
    return 0


# --------------------------------------------------------------------------- one block
def _flat_strides(buf: Any) -> list[int]:
    shape = [int(getattr(s, "value", s)) if not isinstance(s, int) else s for s in buf.shape]
    if buf.strides:
        return [int(getattr(s, "value", s)) for s in buf.strides]
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(1, s)
    return out[::-1]


def block_accesses(leaf: _Leaf) -> list[tuple[Any, bool, list[int]]]:
    """For each access of a leaf block: (buffer, is_write, element stride per loop)."""
    out = []
    for acc in leaf.accesses:
        strides = _flat_strides(acc.buffer)

        def flat(env: dict) -> int:
            full = dict(leaf.bindings)
            full.update(env)
            return sum(_eval(i, full) * s for i, s in zip(acc.indices, strides))
        base = flat({})
        per_loop = []
        for lp in leaf.loops:
            per_loop.append(flat({lp.var: 1}) - base)
        out.append((acc.buffer, acc.write, per_loop))
    return out


def _dedupe(accesses: list) -> list:
    """One entry per buffer (the write, else the first read), writes first, then the
    buffers with the largest footprint."""
    seen: dict[str, tuple] = {}
    for buf, write, strides in accesses:
        if buf.name not in seen or (write and not seen[buf.name][1]):
            seen[buf.name] = (buf, write, strides)
    return sorted(seen.values(), key=lambda a: (not a[1], -_nbytes(a[0])))


def _nbytes(buf: Any) -> int:
    try:
        return int(buf.nbytes())
    except Exception:  # noqa: BLE001 - symbolic shapes
        return 0


def _footprint(loops: list, strides: list[int], level: int, itemsize: int) -> int:
    """Bytes one buffer's accesses touch in the innermost ``level`` loops."""
    elems = 1
    for lp, s in zip(loops[len(loops) - level:], strides[len(loops) - level:]):
        if s != 0:
            elems *= lp.extent
    return elems * itemsize


def _block_vector(leaf: _Leaf) -> tuple[list[float], float]:
    loops = leaf.loops
    n = len(loops)
    iterations = math.prod(lp.extent for lp in loops) if loops else 1
    kinds = [lp.kind for lp in loops]
    inner = loops[-1] if loops else None
    vec = [i for i, k in enumerate(kinds) if k is S.ForKind.VECTORIZED]
    par = [i for i, k in enumerate(kinds) if k is S.ForKind.PARALLEL]
    unr = [i for i, k in enumerate(kinds) if k is S.ForKind.UNROLLED]
    reduction = leaf.block.init is not None or any(
        iv.iter_type is S.IterType.REDUCE for iv in leaf.block.iter_vars)
    ops = max(1, leaf.ops)
    accesses = _dedupe(block_accesses(leaf))
    itemsizes = [_itemsize(a[0]) for a in accesses]
    # the largest sub-nests whose data fits in L1 / L2: their arithmetic intensity
    fit = []
    for limit in (L1_BYTES, L2_BYTES):
        best_level = 0
        for level in range(1, n + 1):
            total = sum(_footprint(loops, a[2], level, sz) for a, sz in zip(accesses, itemsizes))
            if total <= limit:
                best_level = level
        iters = math.prod(lp.extent for lp in loops[n - best_level:]) if best_level else 1
        total = sum(_footprint(loops, a[2], best_level, sz)
                    for a, sz in zip(accesses, itemsizes)) if best_level else 1
        fit += [_log(iters * ops / max(1, total)), _log(iters)]
    vec_extent = math.prod(loops[i].extent for i in vec) if vec else 0
    vals = [_log(iterations), float(n), _log(inner.extent if inner else 1),
            float(bool(inner and inner.kind is S.ForKind.VECTORIZED)),
            float(bool(inner and inner.kind is S.ForKind.UNROLLED)),
            float(bool(inner and inner.kind is S.ForKind.PARALLEL)),
            _log(vec_extent), float(n - vec[-1]) if vec else 0.0,
            _log(math.prod(loops[i].extent for i in par) if par else 0),
            float(par[0] + 1) if par else 0.0,
            _log(math.prod(loops[i].extent for i in unr) if unr else 0),
            _log(leaf.pragma_unroll), _log(ops), float(reduction)] + fit
    for b in range(BUFFERS_PER_BLOCK):
        if b >= len(accesses):
            vals += [0.0] * len(_BUF_NAMES)
            continue
        buf, write, strides = accesses[b]
        sz = itemsizes[b]
        inner_s = abs(strides[-1]) if strides else 0
        vec_s = abs(strides[vec[-1]]) if vec else 0
        reuse = sum(1 for s in strides if s == 0)
        vals += [float(inner_s == 0), float(inner_s == 1), float(inner_s > 1), _log(inner_s),
                 _log(vec_s), float(reuse)]
        vals += [_log(_footprint(loops, strides, min(k, n), sz)) for k in FOOTPRINT_LEVELS]
        vals += [_log(_footprint(loops, strides, n, sz)), float(write),
                 float(getattr(buf, "scope", "global") != "global")]
    return vals, float(iterations * ops)


def _itemsize(buf: Any) -> int:
    bits = "".join(ch for ch in str(buf.dtype) if ch.isdigit())
    return max(1, int(bits) // 8) if bits else 4


# --------------------------------------------------------------------------- program
def program_features(mod: Any, func_name: str | None = None) -> list[float]:
    """The feature vector of a scheduled program (:data:`FEATURE_NAMES`, in order)."""
    func = _func(mod, func_name)
    leaves: list[_Leaf] = []
    _leaves(func.body, [], leaves)
    vectors = sorted((_block_vector(leaf) for leaf in leaves), key=lambda v: -v[1])
    out: list[float] = []
    for k in range(BLOCKS):
        out += vectors[k][0] if k < len(vectors) else [0.0] * len(_BLOCK_NAMES)
    allocs = []
    _collect_allocs(func.body, allocs)
    total = sum(w for _, w in vectors)
    parallel = sum(1 for leaf in leaves for lp in leaf.loops if lp.kind is S.ForKind.PARALLEL)
    out += [float(len(leaves)), float(len(allocs)), _log(total), float(parallel)]
    return out


def _collect_allocs(stmt: Any, out: list) -> None:
    if isinstance(stmt, S.BlockRealize):
        out.extend(stmt.block.alloc_buffers)
        _collect_allocs(stmt.block.body, out)
    elif isinstance(stmt, S.For):
        _collect_allocs(stmt.body, out)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _collect_allocs(s, out)


def _func(mod: Any, func_name: str | None) -> PrimFunc:
    if isinstance(mod, PrimFunc):
        return mod
    if isinstance(mod, IRModule):
        return mod[func_name] if func_name else mod[mod.names()[0]]
    raise TypeError(f"features need an IRModule or a PrimFunc, got {type(mod).__name__}")
