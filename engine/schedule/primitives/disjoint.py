"""Do different iterations of a loop touch different instances of a block?

``parallel`` and ``vectorize`` refuse a loop whose iterations would update the same
elements of an accumulating block (a reduction or an in-place update) at the same time.
:func:`iterations_disjoint` is the sufficient test: it proves that the loop's value can be
read back from the block's spatial bindings, for the block instances that exist (the
block's ``T.where`` predicate is taken into account, so the loops of an imperfect split
are as good as those of a perfect one).

How a binding gives the loop back: write the binding as ``coef * atom + rest`` where
``atom`` is the only term using the loop ``l`` and ``rest`` varies (inside ``l``, under
the predicate) by less than ``|coef|``: then ``atom`` is known from the binding. ``atom`` is
a *digit* ``X // d % m`` (``d`` 1: no division, ``m`` None: no modulo) of a linear
expression ``X`` over the loops (``X`` is ``l`` itself, or e.g. ``i_0 * 5 + i_1`` when a
fused loop was split). Digits ``X % m1``, ``X // m1 % m2``, ... recover ``X`` once their
moduli span its range (or a digit without modulo ends the chain), and a recovered
``X = c * l + rest`` gives ``l`` when ``rest`` varies inside ``l`` by less than ``|c|``.

Example (matmul n=14, ``split(i, [None, 7])``, ``split(i_1, [None, 4])``)::

    vi = T.axis.spatial(14, i_0 * 7 + i_1_0 * 4 + i_1_1)
    T.where(i_1_0 * 4 + i_1_1 < 7)

``rest = i_1_0 * 4 + i_1_1`` ranges over [0, 7] without the predicate but over [0, 6]
with it, narrower than 7: iterations of ``i_0`` write different rows.
"""
from __future__ import annotations

from engine.arith.digits import digit_of
from engine.arith.guarded import GuardedBounds
from engine.ir import expr as E
from engine.ir.functor import substitute, uses_var
from engine.ir.stmt import IterType


def iterations_disjoint(index, loop, block, realize) -> bool:
    """True when distinct values of ``loop`` give block instances with distinct spatial
    bindings (a sufficient test; see the module docstring)."""
    values = [val for iv, val in zip(block.iter_vars, realize.iter_values)
              if iv.iter_type is IterType.SPATIAL]
    return values_recover_loop(index, loop, realize, values, realize.predicate)


def values_recover_loop(index, loop, realize, values, pred) -> bool:
    """True when ``values`` (expressions of the loops above ``realize``) determine the value
    of ``loop``, where ``pred`` holds (see the module docstring)."""
    lv = loop.loop_var
    if E.as_const_int(loop.extent) == 1:
        return True  # one iteration: nothing runs at the same time
    loops = index.loops_above(realize)
    inner = [lp.loop_var for lp in loops if lp is not loop and index.contains(loop, lp)]
    ranges = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            ranges[lp.loop_var] = (lo, lo + ext - 1)
    an = GuardedBounds(ranges)
    # a loop of one iteration is a constant (so ``i_1_0 * 3 + i_1_1 < 2`` with ``i_1_0`` in
    # [0, 0] bounds ``i_1_1``, and ``i_1_0 * 3`` does not count as a varying term)
    units = {lp.loop_var: lp.min for lp in loops
             if lp is not loop and E.as_const_int(lp.extent) == 1}
    if pred is not None and not (isinstance(pred, E.IntImm) and pred.value == 1):
        an.assume(substitute(pred, units) if units else pred)

    def width_inside(lin) -> int | None:
        """How much the part of ``lin`` that varies inside the loop can vary."""
        terms = {k: t for k, t in lin[0].items() if any(uses_var(t[0], v) for v in inner)}
        if not terms:
            return 0
        lo, hi = an._bound_lin((terms, 0))
        return None if lo is None or hi is None else hi - lo

    def width_of(terms) -> int | None:
        lo, hi = an._bound_lin((dict(terms), 0))
        return None if lo is None or hi is None else hi - lo

    groups: dict = {}  # key of X -> (linear form of X, [(divisor, modulus or None)])
    for val in values:
        if not uses_var(val, lv):
            continue
        val = substitute(val, units) if units else val
        for atom in _readable_atoms(an.linear(val), [lv] + inner, width_of):
            digit = digit_of(atom) if uses_var(atom, lv) else None
            if digit is None:
                continue
            x, d, m = digit
            x_lin = an.linear(x)
            key = (tuple(sorted((k, c) for k, (_, c) in x_lin[0].items())), x_lin[1])
            groups.setdefault(key, (x_lin, []))[1].append((d, m))
    return any(_recovers(an, x_lin, digits) and _gives_loop(x_lin, lv, width_inside)
               for x_lin, digits in groups.values())


def _readable_atoms(lin, varying, width_of) -> list:
    """The atoms of a binding ``sum(c_i * atom_i) + const`` that its value determines, for
    fixed values of the loops outside ``varying``: largest ``|c_i|`` first, an atom is read
    when the terms after it vary by less than ``|c_i|`` (a mixed-radix number such as
    ``f // 6 * 2 + f % 6 // 3``)."""
    terms = sorted(((k, t) for k, t in lin[0].items()
                    if any(uses_var(t[0], v) for v in varying)), key=lambda kt: -abs(kt[1][1]))
    out = []
    for pos, (_, (atom, coef)) in enumerate(terms):
        width = width_of(terms[pos + 1:])
        if width is None or width >= abs(coef):
            break
        out.append(atom)
    return out


def _recovers(an, x_lin, digits) -> bool:
    """The digits ``X // d % m`` determine ``X`` over its range."""
    lo, hi = an._bound_lin(x_lin)
    span = None if lo is None or hi is None else hi - lo + 1
    cur = 1
    while True:
        nxt = [m for d, m in digits if d == cur]
        if not nxt:
            return False
        if None in nxt:
            return True
        cur *= max(nxt)
        if span is not None and cur >= span:
            return True


def _gives_loop(x_lin, lv, width_inside) -> bool:
    """``X = c * loop + rest`` with ``rest`` varying inside the loop by less than ``|c|``."""
    terms, const = x_lin
    l_terms = [(k, a, c) for k, (a, c) in terms.items() if uses_var(a, lv)]
    if len(l_terms) != 1 or l_terms[0][1] is not lv:
        return False
    key, _, coef = l_terms[0]
    rest = ({k: t for k, t in terms.items() if k != key}, const)
    width = width_inside(rest)
    return width is not None and width < abs(coef)



def cells_disjoint(index, loop, accesses) -> bool:
    """Do different iterations of ``loop`` touch different elements of a buffer, for the
    ``accesses`` ``[(block, realize, indices), ...]`` made of it under the loop? Either
    :func:`slabs_disjoint`, or: the dimensions that do not vary inside one iteration are the
    same expressions of the loops for every access, and they determine the loop's value
    (:func:`values_recover_loop`: ``C[f // 6, f % 6, j]`` under a fused ``f``)."""
    if slabs_disjoint(index, loop, accesses):
        return True
    if not accesses:
        return True
    from engine.ir import structural_equal
    rows, full = [], []
    for block, realize, indices in accesses:
        bind = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
        inner = [lp.loop_var for lp in index.loops_above(realize)
                 if lp is not loop and index.contains(loop, lp)]
        exprs = [substitute(e, bind) for e in indices]
        full.append(exprs)
        rows.append([None if any(uses_var(e, v) for v in inner) else e for e in exprs])
    block, realize, _ = accesses[0]
    if all(structural_equal(tuple(f), tuple(full[0])) for f in full[1:]):
        # one cell function for every access (a block's load and store of its output):
        # the loop read back from the element is enough
        if values_recover_loop(index, loop, realize, full[0], None):
            return True
    fixed = [d for d in range(len(rows[0]))
             if all(r[d] is not None for r in rows) and
             all(structural_equal(r[d], rows[0][d]) for r in rows[1:])]
    if not fixed:
        return False
    return values_recover_loop(index, loop, realize, [rows[0][d] for d in fixed], None)


def slabs_disjoint(index, loop, accesses) -> bool:
    """Do different iterations of ``loop`` touch different elements of a buffer, for the
    ``accesses`` ``[(block, realize, indices), ...]`` made of it under the loop (stores and
    loads alike)? A sufficient test: some dimension in which every access, in one
    iteration ``l``, lies in a window ``c * l + a .. c * l + a + |c| - 1`` — the same ``c``
    for all, the same terms of loops outside ``loop``, the window no wider than ``|c|`` over
    the loops inside (and the blocks' ``T.where``). Then iteration ``l`` owns the slab
    ``c * l + a ..`` of that dimension, and no other iteration comes near it.

    So ``Y_init`` storing ``Y[i, j]`` and ``Y_update`` reading it are disjoint across ``i``,
    while a scan storing ``B[i]`` and reading ``B[i - 1]`` (a window of 2 for ``c = 1``), or
    ``B[0] = A[i]`` (no ``i`` at all), are not."""
    lv = loop.loop_var
    if E.as_const_int(loop.extent) == 1:
        return True
    per_access = []
    for block, realize, indices in accesses:
        per_access.append(_dims_of(index, loop, lv, block, realize, indices))
    if not per_access:
        return True
    for dim in range(len(per_access[0])):
        entries = [acc[dim] for acc in per_access]
        if any(e is None for e in entries):
            continue
        coefs = {e[0] for e in entries}
        outers = {e[1] for e in entries}
        if len(coefs) != 1 or 0 in coefs or len(outers) != 1:
            continue
        lo = min(e[2] for e in entries)
        hi = max(e[3] for e in entries)
        if hi - lo < abs(coefs.pop()):
            return True
    return False


def _dims_of(index, loop, lv, block, realize, indices) -> list:
    """Per index dimension: ``(c, outer terms, lo, hi)`` with the index
    ``c * l + outer + inner`` and ``inner + const`` in ``[lo, hi]`` over the loops inside
    ``loop``; None where the index is not of that form."""
    loops = index.loops_above(realize)
    inner = [lp for lp in loops if lp is not loop and index.contains(loop, lp)]
    ranges = {}
    for lp in inner:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            ranges[lp.loop_var] = (lo, lo + ext - 1)
    an = GuardedBounds(ranges)
    pred = realize.predicate
    if pred is not None and not (isinstance(pred, E.IntImm) and pred.value == 1):
        an.assume(pred)
    bind = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    inner_vars = [lp.loop_var for lp in inner]
    out = []
    for e in indices:
        terms, const = an.linear(substitute(e, bind))
        coef, outer, inner_terms, ok = 0, [], {}, True
        for k, (atom, c) in terms.items():
            if atom is lv:
                coef += c
            elif uses_var(atom, lv):
                ok = False
            elif any(uses_var(atom, v) for v in inner_vars):
                inner_terms[k] = (atom, c)
            else:
                outer.append((k, c))
        if not ok:
            out.append(None)
            continue
        lo, hi = an._bound_lin((inner_terms, const))
        out.append(None if lo is None or hi is None else
                   (coef, tuple(sorted(outer, key=repr)), lo, hi))
    return out
