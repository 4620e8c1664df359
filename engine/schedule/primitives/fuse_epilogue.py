"""fuse_reduction_epilogue: an element-wise epilogue fused into the reduction it reads.

TVM's ``sch.fuse_reduction_epilogue(reduction_block, epilogue_block)`` (instruction kind
``FuseReductionEpilogue``, two block inputs, no attributes) removes the epilogue block
``D = epilogue(temp)`` and makes the reduction block that computes ``temp`` write ``D``
itself. What is accepted is what TVM accepts, less what would compute something else:

* on a sum reduction, the additions around the result (``temp + bias``, ``bias + temp``,
  ``(temp + b1) - b2``: temp added to, or on the left of a subtraction) move into the
  init — ``D = <init value> + bias``, then ``D = D + ...`` — as TVM does (``with
  T.init(): D[vi, vj] = C[vi, vj]``);
* what is left of the epilogue (a clipping ``min(max(temp, lo), hi)``, the ReLU of
  ``max(temp + bias, 0)``, any epilogue of a max reduction) is applied **once, by the
  instance that finishes each element** — every reduction axis at its domain's maximum::

      with T.init():
          D[vi, vj] = bias[vj]
      D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]
      if vk == 15:
          D[vi, vj] = T.max(D[vi, vj], T.float32(0))

  TVM instead applies it at every step of the reduction (``D = max(D + A * B, 0)`` after
  an init ``max(bias, 0)``: its documented "semantic change for non-linear epilogues"); a
  clipped running sum is not the clipped sum, so that form is never produced here.
  Applying it at the end needs the instance with every reduction axis at its maximum to
  run once per element, after the others (:func:`_check_finishing_instance`); the init
  part needs nothing of the kind (it runs where the reduction's own init ran).

Beyond TVM, refusals keep the result exact: the epilogue must read ``temp`` and write
``D`` at its own axes (each once), over the domain the reduction computes; no other block
may read ``temp`` (TVM leaves it allocated and unwritten); and no other block may run
between the reduction and the epilogue that writes what the epilogue reads, or touches
``D`` (the epilogue's work moves earlier).
"""
from __future__ import annotations

import math

from engine.arith import is_quasi_affine, simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import (Mutator, collect, collect_vars, field_names,
                               substitute)
from engine.ir.node import Node
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, IfThenElse, IterType,
                             SeqStmt, seq)
from engine.ir.structural import structural_equal

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import replace_stmts
from ._common import affine_bindings, conjuncts, expect_block, is_true
from .index_map_inverse import NotBijective
from .inline import _accessing, _dedup, _substituted
from .reduction import _const_ranges, _Digits, _from_zero

_SCALING = (E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod)


def _loads_of(e, buf) -> list:
    return [x for x in collect(e, E.BufferLoad) if x.buffer is buf]


def _touched(blk: Block, realize: BlockRealize) -> tuple[set, set]:
    """(ids of buffers read, ids of buffers written) by a block: its declared regions and
    every load and store in its body, init, predicate and bindings (opaque accesses)."""
    reads = {id(r.buffer) for r in blk.reads}
    writes = {id(w.buffer) for w in blk.writes}
    parts = [blk.body, blk.init, realize.predicate, *realize.iter_values]
    for p in parts:
        if p is None:
            continue
        reads |= {id(x.buffer) for x in collect(p, E.BufferLoad)}
        writes |= {id(x.buffer) for x in collect(p, BufferStore)}
    return reads, writes


def _path_to(e, target) -> list | None:
    """The nodes from ``e`` down to ``target`` (exclusive), each with the name of the field
    leading on: ``[(node, "a"), ...]``; None when ``target`` (found by identity) is not in
    ``e``."""
    if e is target:
        return []
    for name in field_names(type(e)):
        v = getattr(e, name)
        for child in (v if isinstance(v, tuple) else (v,)):
            if isinstance(child, Node) and not isinstance(child, Buffer):
                sub = _path_to(child, target)
                if sub is not None:
                    return [(e, name)] + sub
    return None


def _is_zero(e) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == 0


def _linear_init(e, path: list, value):
    """``e`` with the load at the end of ``path`` (Add/Sub nodes only) replaced by ``value``,
    ``0 + x`` and ``x + 0`` on the path folded to ``x`` (TVM's ``D[vi, vj] = C[vi, vj]``)."""
    if not path:
        return value
    (node, field), rest = path[0], path[1:]
    new = _linear_init(getattr(node, field), rest, value)
    other = node.b if field == "a" else node.a
    if isinstance(node, E.Add) and _is_zero(new):
        return other
    return type(node)(new, other) if field == "a" else type(node)(other, new)


class _NodeReplacer(Mutator):
    """Replaces the node ``target`` (found by identity) by ``value``."""

    def __init__(self, target, value):
        self.target, self.value = target, value

    def visit(self, n):
        return self.value if n is self.target else super().visit(n)


class _LoadReplacer(Mutator):
    """Replaces the loads ``hit(load)`` selects by ``value``."""

    def __init__(self, hit, value):
        self.hit, self.value = hit, value

    def visit_BufferLoad(self, x):
        return self.value if self.hit(x) else self.generic_visit(x)


def _own_axes(indices, ivars) -> bool:
    """True when ``indices`` are exactly the variables ``ivars``, each once (any order)."""
    ids = {id(v) for v in ivars}
    return len(indices) == len(ivars) and all(isinstance(i, E.Var) for i in indices) and \
        {id(i) for i in indices} == ids


@register
class FuseReductionEpilogue(Primitive):
    kind = "FuseReductionEpilogue"
    attr_kinds = ()
    method = "fuse_reduction_epilogue"

    def call(self, sch, reduction_block, epilogue_block):
        """Fuse an element-wise epilogue block into the reduction block whose result it
        reads: the reduction writes the epilogue's output directly, and the epilogue block
        (with its loops) disappears.

        It requires: 1) the reduction block is a complete reduction (a ``T.init()``, axes
        spatial or reduction bound quasi-affinely, the only writer of the one buffer
        ``temp`` it writes, allocated in the function, not indexed by a reduction axis),
        its body a single store updating ``temp`` where it initialises it; 2) the epilogue
        block is complete (all axes spatial, no ``T.where``, the only writer of its output
        ``D``, which it does not read), its body a single store ``D[...] = f(temp[...])``
        reading ``temp`` exactly once, at its own axes, and writing ``D`` at its own axes,
        over the domain the reduction computes; 3) ``temp`` is not multiplied, divided or
        taken modulo in ``f`` (TVM's rule); 4) no other block reads ``temp``, and none
        that runs between the two blocks writes what the epilogue reads or touches ``D``;
        5) ``D`` has ``temp``'s dtype. On a sum, the additions around ``temp`` in ``f``
        (``temp + bias``) become the init; the rest of ``f`` (a clipping, a ReLU), if any,
        is applied by the instance finishing each element, which needs the reduction axes
        bound one-to-one to loops of constant extent, no ``T.where`` on those loops and no
        other loop inside them repeating an element.

        Before::

            temp = T.alloc_buffer((16, 16))
            for i, j, k in T.grid(16, 16, 16):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        temp[vi, vj] = T.float32(0)
                    temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]
            for i, j in T.grid(16, 16):
                with T.block("bias"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    D[vi, vj] = temp[vi, vj] + bias[vj]

        Call::

            sch.fuse_reduction_epilogue(sch.get_block("matmul"), sch.get_block("bias"))

        After::

            for i, j, k in T.grid(16, 16, 16):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(bias[vj], A[vi, vk], B[vj, vk])
                    T.writes(D[vi, vj])
                    with T.init():
                        D[vi, vj] = bias[vj]
                    D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]

        With a clipping epilogue ``D[vi, vj] = T.min(T.max(temp[vi, vj], lo[0]), hi[0])``
        instead (TVM would clip the running sum at every step), after::

                    with T.init():
                        D[vi, vj] = T.float32(0)
                    D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]
                    if vk == 15:
                        D[vi, vj] = T.min(T.max(D[vi, vj], lo[0]), hi[0])
        """
        if isinstance(reduction_block, str):
            reduction_block = sch.get_block(reduction_block)
        if isinstance(epilogue_block, str):
            epilogue_block = sch.get_block(epilogue_block)
        sch._run(self, [reduction_block, epilogue_block], [])

    def python_args(self, inputs, attrs, dialect):
        return [f"reduction_block={fmt(inputs[0])}", f"epilogue_block={fmt(inputs[1])}"]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        red = expect_block(ctx, inputs[0], "reduction block")
        epi = expect_block(ctx, inputs[1], "epilogue block")
        rname, ename = red.name_hint, epi.name_hint
        hl = [rname, ename]
        subject = f"block {ename}"
        if red is epi:
            raise ctx.error(subject, "the reduction block and the epilogue block are the "
                            "same block", "give the block that reads the reduction's result "
                            "as the epilogue", highlight=hl)
        rr, er = ctx.index.realize[id(red)], ctx.index.realize[id(epi)]
        temp, rstore = _check_reduction(ctx, red, rr, hl)
        dstore = _check_epilogue(ctx, epi, er, temp, hl)
        dbuf = dstore.buffer
        load = _loads_of(dstore.value, temp)[0]

        # TVM's rule: the result is only shifted (Add / Min / Max shells), never scaled
        scaled = [n for n, _ in _path_to(dstore.value, load) if isinstance(n, _SCALING)]
        if scaled:
            raise ctx.error(subject, f"the epilogue scales the reduction result: "
                            f"{scaled[0]} multiplies, divides or takes the modulo of "
                            f"{temp.name} (TVM fuses only epilogues that add to it or clip "
                            "it)", "scale the inputs of the reduction instead",
                            highlight=hl)
        if dbuf.dtype != temp.dtype:
            raise ctx.error(subject, f"the epilogue writes {dbuf.name} as {dbuf.dtype} but "
                            f"the reduction computes {temp.name} as {temp.dtype}; the fused "
                            f"block keeps its running result in {dbuf.name}", "",
                            highlight=hl)
        if id(dbuf) in _touched(red, rr)[0]:
            raise ctx.error(subject, f"the reduction block {rname} reads {dbuf.name}, which "
                            "the fused block would write while it still reads it", "",
                            highlight=hl)

        # epilogue axis -> reduction axis: the element of temp each one reads
        vmap = {}
        rdom = {id(iv.var): iv for iv in red.iter_vars}
        edom = {id(iv.var): iv for iv in epi.iter_vars}
        for q, p in zip(load.indices, rstore.indices):
            ev, rv = edom[id(q)], rdom[id(p)]
            if not (structural_equal(ev.dom.min, rv.dom.min) and
                    structural_equal(ev.dom.extent, rv.dom.extent)):
                raise ctx.error(subject, f"the epilogue's axis {q.name} ranges over "
                                f"{ev.dom.min}..+{ev.dom.extent} but the reduction computes "
                                f"{temp.name} over {rv.dom.min}..+{rv.dom.extent} there "
                                f"(axis {p.name}): the fused block would write other "
                                f"elements of {dbuf.name} than the epilogue does", "",
                                highlight=hl)
            vmap[q] = p

        _check_others(ctx, red, epi, rr, er, temp, dbuf, hl)

        # f(temp) = outer(inner(temp)), inner the additions around temp (temp + bias):
        # on a sum, inner moves into the init (a shifted running sum), and outer, if any
        # is left (ReLU, clipping), is applied once, by the instance finishing the element
        upd = rstore.value
        didx = tuple(substitute(i, vmap) for i in dstore.indices)
        dload = E.BufferLoad(dbuf, didx)
        value = substitute(dstore.value, vmap)
        mload = _loads_of(value, temp)[0]
        path = _path_to(value, mload)
        split = len(path)
        if _is_sum(upd, temp, rstore.indices):
            while split and (isinstance(path[split - 1][0], E.Add) or (
                    isinstance(path[split - 1][0], E.Sub) and path[split - 1][1] == "a")):
                split -= 1
        inner = path[split][0] if split < len(path) else mload
        init_value = _linear_init(inner, path[split:], red.init.value)
        body = BufferStore(dbuf, _LoadReplacer(lambda x: x.buffer is temp, dload).visit(upd),
                           didx)
        if split:
            _check_finishing_instance(ctx, red, rr, hl)
            last = None
            for iv in red.iter_vars:
                if iv.iter_type is IterType.REDUCE:
                    hi = E.as_const_int(iv.dom.min) + E.as_const_int(iv.dom.extent) - 1
                    cond = E.EQ(iv.var, E.const(hi, iv.var.dtype))
                    last = cond if last is None else E.And(last, cond)
            finish = _NodeReplacer(inner, dload).visit(value)
            body = seq(body, IfThenElse(last, BufferStore(dbuf, finish, didx)))
        new_init = BufferStore(dbuf, init_value, didx)

        reads = [_substituted(r, vmap) for r in epi.reads if r.buffer is not temp]
        reads += [r for r in red.reads if r.buffer is not temp]
        writes = tuple(BufferRegion(w.buffer, tuple(
            Range(simplify(substitute(rg.min, vmap)), rg.extent) for rg in w.region))
            for w in epi.writes)
        fused = red.replace(body=body, init=new_init, reads=_dedup(reads), writes=writes)
        mapping = {rr: rr.replace(block=fused),
                   ctx.index.removal_root(er): None}
        func = replace_stmts(ctx.func, mapping)
        left = [b.name_hint for b in _accessing(func, temp)]
        if left:  # defensive: _check_others found every reader of temp
            raise ctx.error(subject, f"block {left[0]} still accesses {temp.name}", "",
                            highlight=hl + left[:1])
        # temp stays allocated, unused, as TVM leaves it
        return Result(func, [])


def _is_sum(upd, buf, indices) -> bool:
    """True when the update ``upd`` is ``buf[indices] + x`` (or ``x + buf[indices]``) with
    ``x`` not reading ``buf``: a sum reduction."""
    def own(x):
        return isinstance(x, E.BufferLoad) and x.buffer is buf and \
            structural_equal(tuple(x.indices), tuple(indices))
    return isinstance(upd, E.Add) and ((own(upd.a) and not _loads_of(upd.b, buf)) or
                                       (own(upd.b) and not _loads_of(upd.a, buf)))


def _check_reduction(ctx: Ctx, red: Block, rr: BlockRealize, hl: list):
    """TVM's complete reduction block (``CheckReductionBlock``, ``GetSingleWrite``,
    ``CheckNotOutputBlock``), plus the single-store form the rewrite reads: returns the
    buffer it reduces into and its update store."""
    rname = red.name_hint
    subject = f"block {rname}"
    if not any(iv.iter_type is IterType.REDUCE for iv in red.iter_vars):
        raise ctx.error(subject, f"block {rname} is not a reduction block (it has no "
                        "reduction axis)", "give the block that reduces (with T.init()) "
                        "as the first argument", highlight=hl)
    if any(iv.iter_type not in (IterType.SPATIAL, IterType.REDUCE) for iv in red.iter_vars):
        raise ctx.error(subject, f"block {rname} has axes that are neither spatial nor "
                        "reduction axes", "", highlight=hl)
    if red.init is None:
        raise ctx.error(subject, f"block {rname} has no T.init(), so it is not a complete "
                        "reduction block (a decomposed reduction, or the inner block of a "
                        "blockize)", "fuse the epilogue before decompose_reduction and "
                        "blockize", highlight=hl)
    if len(red.writes) != 1:
        raise ctx.error(subject, f"block {rname} writes {len(red.writes)} buffers; the "
                        "reduction must write exactly one", "", highlight=hl)
    temp = red.writes[0].buffer
    if any(p is temp for p in ctx.func.params):
        raise ctx.error(subject, f"block {rname} writes the function's output {temp.name}, "
                        "which must stay (it is an output block)", "let the reduction "
                        "write an intermediate buffer that the epilogue reads",
                        highlight=hl)
    for iv, v in zip(red.iter_vars, rr.iter_values):
        if not is_quasi_affine(v):
            raise ctx.error(subject, f"block {rname} binds its axis {iv.var.name} to {v}, "
                            "which is not a quasi-affine expression of the loops (TVM's "
                            "rule for a reduction block)", "", highlight=hl)
    store = red.body
    init = red.init
    if not isinstance(store, BufferStore) or store.buffer is not temp or red.alloc_buffers:
        raise ctx.error(subject, f"the body of block {rname} is not a single store to "
                        f"{temp.name}", "", highlight=hl)
    if not isinstance(init, BufferStore) or init.buffer is not temp or \
            not structural_equal(tuple(init.indices), tuple(store.indices)):
        raise ctx.error(subject, f"the T.init() of block {rname} does not initialise the "
                        f"element of {temp.name} its body updates", "", highlight=hl)
    spatial = [iv.var for iv in red.iter_vars if iv.iter_type is IterType.SPATIAL]
    if not _own_axes(store.indices, spatial):
        raise ctx.error(subject, f"block {rname} must store {temp.name} at exactly its "
                        "spatial axes (one index per axis), so that each element is one "
                        "reduction", "", highlight=hl)
    if _loads_of(init.value, temp) or any(
            not structural_equal(tuple(x.indices), tuple(store.indices))
            for x in _loads_of(store.value, temp)):
        raise ctx.error(subject, f"block {rname} reads other elements of {temp.name} than "
                        "the one it updates", "", highlight=hl)
    others = [b.name_hint for b in ctx.index.all_blocks()
              if b is not red and any(w.buffer is temp for w in b.writes)]
    if others:
        raise ctx.error(subject, f"block {rname} is not the only block writing "
                        f"{temp.name} (block {others[0]} writes it too), and a reduction "
                        "block must be its output's only writer", "",
                        highlight=hl + others[:1])
    return temp, store


def _check_epilogue(ctx: Ctx, epi: Block, er: BlockRealize, temp, hl: list) -> BufferStore:
    """TVM's complete epilogue block and its body pattern (``BodyPatternAllowFusion``):
    returns its store ``D[...] = f(temp[...])``."""
    ename = epi.name_hint
    subject = f"block {ename}"
    if any(iv.iter_type is not IterType.SPATIAL for iv in epi.iter_vars) or epi.init:
        raise ctx.error(subject, f"the epilogue block {ename} has axes that are not "
                        "spatial; it must be element-wise", "", highlight=hl)
    if not is_true(er.predicate):
        raise ctx.error(subject, f"the epilogue block {ename} has a predicate "
                        f"(T.where({er.predicate})), which TVM does not fuse", "",
                        highlight=hl)
    store = epi.body
    if not isinstance(store, BufferStore) or epi.alloc_buffers:
        raise ctx.error(subject, f"the body of the epilogue block {ename} is not a single "
                        "buffer store", "", highlight=hl)
    dbuf = store.buffer
    if len(epi.writes) != 1 or epi.writes[0].buffer is not dbuf:
        raise ctx.error(subject, f"the epilogue block {ename} must declare the one write of "
                        f"the buffer it stores, {dbuf.name}", "", highlight=hl)
    cover = affine_bindings(er.iter_values, ctx.index.loops_above(er), er.predicate)
    for iv, rg in zip(epi.iter_vars, cover.ranges if cover.ok else [None] * len(epi.iter_vars)):
        want = (E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent))
        if rg is None or tuple(rg) != want:
            raise ctx.error(subject, f"the loops of the epilogue block {ename} cannot be "
                            f"shown to run its axis {iv.var.name} over its whole domain, "
                            "which the fused block would compute", "", highlight=hl)
    loads = _loads_of(store.value, temp) + [x for i in store.indices
                                            for x in _loads_of(i, temp)]
    if not loads:
        raise ctx.error(subject, f"the epilogue block {ename} does not read {temp.name}, "
                        "the result of the reduction", "", highlight=hl)
    if len(loads) != 1 or _loads_of(store.indices, temp):
        raise ctx.error(subject, f"the epilogue block {ename} reads {temp.name} "
                        f"{len(loads)} times; the reduction result must be used exactly "
                        "once (TVM's rule)", "", highlight=hl)
    ivars = [iv.var for iv in epi.iter_vars]
    if not _own_axes(loads[0].indices, ivars):
        raise ctx.error(subject, f"the epilogue block {ename} reads "
                        f"{temp.name}[{', '.join(str(i) for i in loads[0].indices)}], not "
                        "the element at its own axes (one index per axis), so it is not "
                        "element-wise in the reduction result", "", highlight=hl)
    if not _own_axes(store.indices, ivars):
        raise ctx.error(subject, f"the epilogue block {ename} writes "
                        f"{dbuf.name}[{', '.join(str(i) for i in store.indices)}], not the "
                        "element at its own axes (one index per axis)", "", highlight=hl)
    if dbuf is temp or _loads_of(store.value, dbuf) or any(r.buffer is dbuf
                                                         for r in epi.reads):
        raise ctx.error(subject, f"the epilogue block {ename} reads {dbuf.name}, which it "
                        "writes, so it is not a complete block", "", highlight=hl)
    others = [b.name_hint for b in ctx.index.all_blocks()
              if b is not epi and any(w.buffer is dbuf for w in b.writes)]
    if others:
        raise ctx.error(subject, f"the epilogue block {ename} is not the only block writing "
                        f"{dbuf.name} (block {others[0]} writes it too)", "",
                        highlight=hl + others[:1])
    return store


def _check_others(ctx: Ctx, red: Block, epi: Block, rr, er, temp, dbuf, hl: list) -> None:
    """The other blocks: none reads ``temp`` (nothing would write it any more), and none
    that runs between the start of the reduction and the epilogue writes a buffer the
    epilogue reads or touches ``D`` — the fused block reads the epilogue's inputs and
    writes ``D`` that much earlier."""
    idx = ctx.index
    rname, ename = red.name_hint, epi.name_hint
    subject = f"block {ename}"
    for b in idx.all_blocks():
        if b is red or b is epi or idx.contains(b, rr) or idx.contains(b, er):
            continue
        reads, writes = _touched(b, idx.realize[id(b)])
        if id(temp) in reads | writes:
            raise ctx.error(subject, f"block {b.name_hint} also reads {temp.name}, which "
                            f"nothing would write once {rname} writes {dbuf.name} instead",
                            "fuse only an epilogue that is the reduction result's one "
                            "reader", highlight=hl + [b.name_hint])
    if idx.scope_block(rr) is not idx.scope_block(er):
        raise ctx.error(subject, f"blocks {rname} and {ename} are not in the same scope",
                        "", highlight=hl)
    anc_r = [rr] + idx.ancestors(rr)
    on_e = {id(x) for x in [er] + idx.ancestors(er)}
    k = next(i for i, a in enumerate(anc_r) if id(a) in on_e)
    top = anc_r[k]
    if not isinstance(top, SeqStmt):
        raise ctx.error(subject, f"blocks {rname} and {ename} do not run one after the "
                        "other", "", highlight=hl)
    child_r = anc_r[k - 1]
    child_e = next(x for x in [er] + idx.ancestors(er) if idx.parent.get(id(x)) is top)
    a = next(i for i, s in enumerate(top.seq) if s is child_r)
    b = next(i for i, s in enumerate(top.seq) if s is child_e)
    if a > b:
        raise ctx.error(subject, f"the epilogue block {ename} runs before the reduction "
                        f"block {rname}", "", highlight=hl)
    shared = []  # the loops above both blocks, inside their scope
    for x in idx.ancestors(top):
        if isinstance(x, Block):
            break
        if isinstance(x, For):
            shared.append(x)
    roots = [shared[-1]] if shared else list(top.seq[a:b + 1])
    epi_inputs = list({id(b): b for b in [*(r.buffer for r in epi.reads),
                                          *(x.buffer for x in collect(epi.body, E.BufferLoad))]
                       if b is not temp}.values())
    for blk in idx.all_blocks():
        if blk is red or blk is epi:
            continue
        br = idx.realize[id(blk)]
        if not any(idx.contains(root, br) for root in roots):
            continue
        reads, writes = _touched(blk, br)
        hit = [bf for bf in [*epi_inputs, dbuf] if id(bf) in writes or
               (bf is dbuf and id(bf) in reads)]
        if hit:
            verb = "writes" if id(hit[0]) in writes else "reads"
            raise ctx.error(subject, f"block {blk.name_hint} runs between the reduction "
                            f"{rname} and the epilogue {ename} and {verb} {hit[0].name}; "
                            "fused, the epilogue's work would happen before it",
                            "move that block before the reduction or after the epilogue",
                            highlight=hl + [blk.name_hint])


def _check_finishing_instance(ctx: Ctx, red: Block, rr: BlockRealize, hl: list) -> None:
    """An epilogue applied at the instance where every reduction axis is at its domain's
    maximum runs once per element, after every other instance of that element, when:
    the reduction axes are bound one-to-one to loops of constant extent (splits, fusions
    and reorders of them, from each domain's minimum: the last iteration of those loops is
    the one at every maximum); no ``T.where`` or ``if`` above the block tests those
    loops; no spatial binding uses them; and every other loop inside the outermost of them
    is a spatial loop whose iterations are different elements (else an element's
    instances would be spread over several of its iterations)."""
    rname = red.name_hint
    subject = f"block {rname}"
    why = "the epilogue is not linear, so it is applied once, when each element is finished"
    loops = ctx.index.loops_above(rr)
    ranges = _const_ranges(loops)
    loop_ids = {id(lp.loop_var) for lp in loops}
    reader = _Digits({v: ext for v, (_, ext) in ranges.items()})
    bind = list(zip(red.iter_vars, rr.iter_values))
    red_loops: dict = {}
    for iv, v in bind:
        if iv.iter_type is not IterType.REDUCE:
            continue
        name = iv.var.name
        for x in collect_vars(v):
            if id(x) not in loop_ids or x not in ranges:
                raise ctx.error(subject, f"{why}; but the reduction axis {name} is bound to "
                                f"{v}, which uses {x.name}, not a loop of constant extent "
                                "around the block", "", highlight=hl)
        dmin, dext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        if dmin is None or dext is None:
            raise ctx.error(subject, f"{why}; but the reduction axis {name} has no constant "
                            "domain", "", highlight=hl)
        digits_of, at_first = _from_zero(v, ranges)
        try:
            ds = reader.read(digits_of)
        except NotBijective as err:
            raise ctx.error(subject, f"{why}; but the reduction axis {name} is bound to {v}, "
                            f"which is not a one-to-one map of the loops ({err})", "",
                            highlight=hl) from None
        span = math.prod(n for _, _, n in ds)
        if E.as_const_int(at_first) != dmin or span != dext:
            got = (f"starts at {at_first}, not at the domain's minimum {dmin}"
                   if E.as_const_int(at_first) != dmin else
                   f"takes {span} values where its domain has {dext}")
            raise ctx.error(subject, f"{why}; but the reduction axis {name} is bound to {v}, "
                            f"which {got}, so the last iteration need not finish the "
                            "element", "", highlight=hl)
        for x in collect_vars(v):
            if ranges[x][1] > 1:
                red_loops[id(x)] = x
    bad = reader.problem(list(red_loops.values()))
    if bad is not None:
        raise ctx.error(subject, f"{why}; but the reduction axes {bad[1]}, so they are not a "
                        "one-to-one map of the loops", "", highlight=hl + bad[0])
    for iv, v in bind:
        if iv.iter_type is IterType.SPATIAL and any(id(x) in red_loops
                                                    for x in collect_vars(v)):
            raise ctx.error(subject, f"{why}; but the spatial axis {iv.var.name} is bound "
                            f"to {v}, which uses a reduction loop", "", highlight=hl)
    guards = [c for c in conjuncts(rr.predicate) if not is_true(c)]
    guards += [a.condition for a in ctx.index.ancestors(rr)
               if isinstance(a, IfThenElse) and ctx.index.contains(
                   ctx.index.scope_block(rr), a)]
    for c in guards:
        if any(id(x) in red_loops for x in collect_vars(c)):
            raise ctx.error(subject, f"{why}; but {c} tests a reduction loop, so the "
                            "finishing instance may not run", "", highlight=hl)
    if not red_loops:
        return
    first = min(i for i, lp in enumerate(loops) if id(lp.loop_var) in red_loops)
    inner = [lp for lp in loops[first + 1:] if id(lp.loop_var) not in red_loops and
             not E.is_const_int(lp.extent, 1)]
    if not inner:
        return
    names = hl + [lp.loop_var.name for lp in inner]
    sp_ranges = {v: r for v, r in ranges.items() if id(v) not in red_loops}
    sreader = _Digits({v: ext for v, (_, ext) in sp_ranges.items()})
    for iv, v in bind:
        if iv.iter_type is not IterType.SPATIAL:
            continue
        try:
            sreader.read(_from_zero(v, sp_ranges)[0])
        except (NotBijective, KeyError):
            raise ctx.error(subject, f"{why}; but loop {inner[0].loop_var.name} runs inside "
                            f"the reduction loops and the spatial binding {v} cannot be shown "
                            "to give each of its iterations its own element", "move the "
                            "spatial loops outside the reduction loops first",
                            highlight=names) from None
    bad = sreader.problem([lp.loop_var for lp in inner])
    if bad is not None:
        raise ctx.error(subject, f"{why}; but loop {inner[0].loop_var.name} runs inside the "
                        f"reduction loops and the spatial axes {bad[1]}, so one element's "
                        "instances may be spread over its iterations", "move the spatial "
                        "loops outside the reduction loops first", highlight=names + bad[0])
