"""tensorize: replace a block (or the subtree of a loop, blockized first) by the
implementation of a tensor intrinsic whose description it matches.

Matching is TVM's TensorizeComparator, structural: the block's ``T.writes`` then
``T.reads`` are paired in order with the description's root block (same dtypes and storage
scopes; each program region is the description's tile at some base indices), then the
bodies are compared node by node: the same loops (extents), the same blocks (axes of the
same extents and kinds, the same bindings), the same expressions, and every buffer access
at the base indices plus the description's indices.

TVM then binds each implementation buffer to its region with ``T.match_buffer``. This
engine does so when the implementation is opaque code (it takes a buffer's address or
offset, ``C.data``, ``C.elem_offset``, or calls an extern function): the block gets one view
per parameter, as TVM's (:func:`_views`). An implementation of TensorIR only has its
accesses rewritten in place onto the program's buffers at the base indices instead — the
same program, the views made plain one step earlier (what the lowering would do).
"""
from __future__ import annotations

import dataclasses

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, collect, substitute
from engine.ir.node import Node
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, IterVar, MatchBufferRegion

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, py_str, register
from ..tensor_intrin import TensorIntrin
from ..tree import replace_stmts
from ._common import as_bool, fresh_name, subject_of
from .blockize import blockize_loop


class Mismatch(Exception):
    """The block does not match the description (the message says where)."""


class Comparator:
    """Structural match of a program block (lhs) against a description (rhs)."""

    def __init__(self):
        self.buffers: dict[int, Buffer] = {}     # id(desc buffer) -> program buffer
        self.desc_of: dict[int, Buffer] = {}     # id(program buffer) -> desc buffer
        self.base: dict[int, list] = {}          # id(program buffer) -> base indices
        self.vars: dict = {}                     # desc Var -> program Var

    # -------------------------------------------------------------- buffers
    def buffer(self, lhs: Buffer, rhs: Buffer) -> None:
        got = self.buffers.get(id(rhs))
        if got is not None:
            if got is not lhs:
                raise Mismatch(f"the description's buffer {rhs.name} stands for "
                               f"{got.name} but is also used where the block uses {lhs.name}")
            return
        if lhs.dtype != rhs.dtype:
            raise Mismatch(f"buffer {lhs.name} is {lhs.dtype} but the description's "
                           f"{rhs.name} is {rhs.dtype}")
        if lhs.scope != rhs.scope:
            raise Mismatch(f"buffer {lhs.name} is in scope {lhs.scope!r} but the "
                           f"description's {rhs.name} is in scope {rhs.scope!r}")
        if id(lhs) in self.desc_of:
            raise Mismatch(f"buffer {lhs.name} would stand for two of the description's "
                           "buffers")
        self.buffers[id(rhs)] = lhs
        self.desc_of[id(lhs)] = rhs

    def scope_region(self, lhs: BufferRegion, rhs: BufferRegion) -> None:
        """A region of the matched block: fixes the buffer's base indices."""
        self.buffer(lhs.buffer, rhs.buffer)
        offset = len(lhs.region) - len(rhs.region)
        if offset < 0:
            raise Mismatch(f"buffer {lhs.buffer.name} has fewer dimensions than the "
                           f"description's {rhs.buffer.name}")
        base = []
        for d, g in enumerate(lhs.region):
            if d < offset:
                if not E.is_const_int(simplify(g.extent), 1):
                    raise Mismatch(f"the region of {lhs.buffer.name} spans more than one "
                                   f"element in dimension {d}, which the description lacks")
                base.append(g.min)
                continue
            want = rhs.region[d - offset]
            if not _same_int(g.extent, want.extent):
                raise Mismatch(f"the block covers {_txt(g.extent)} elements of "
                               f"{lhs.buffer.name} in dimension {d}, the description "
                               f"{_txt(want.extent)}")
            base.append(simplify(g.min - want.min))
        old = self.base.get(id(lhs.buffer))
        if old is not None:
            if any(not _same_int(a, b) for a, b in zip(old, base)):
                raise Mismatch(f"the regions of {lhs.buffer.name} do not start at the same "
                               "tile")
            return
        self.base[id(lhs.buffer)] = base

    def indices(self, buf: Buffer, lhs: tuple, rhs: tuple) -> None:
        base = self.base.get(id(buf))
        if base is None:
            raise Mismatch(f"buffer {buf.name} is accessed but not in the block's T.reads / "
                           "T.writes")
        offset = len(lhs) - len(rhs)
        for d, x in enumerate(lhs):
            want = base[d] if d < offset else simplify(base[d] + self.mapped(rhs[d - offset]))
            if not _same_int(x, want):
                raise Mismatch(f"an access to {buf.name} at {_txt(x)} (dimension {d}) is "
                               f"not where the description's access is ({_txt(want)})")

    def mapped(self, e):
        return substitute(e, self.vars)

    # -------------------------------------------------------------- statements
    def stmt(self, lhs, rhs) -> None:
        if type(lhs) is not type(rhs):
            raise Mismatch(f"the block has a {_kind(lhs)} where the description has a "
                           f"{_kind(rhs)}")
        if isinstance(lhs, For):
            if not _same_int(lhs.extent, rhs.extent) or not _same_int(lhs.min, rhs.min):
                raise Mismatch(f"loop {lhs.loop_var.name} runs {_txt(lhs.extent)} times, the "
                               f"description's loop {rhs.loop_var.name} {_txt(rhs.extent)}")
            self.vars[rhs.loop_var] = lhs.loop_var
            return self.stmt(lhs.body, rhs.body)
        if isinstance(lhs, BlockRealize):
            self.exprs(lhs.iter_values, rhs.iter_values, "the block bindings")
            self.expr(lhs.predicate, rhs.predicate)
            return self.block(lhs.block, rhs.block)
        if isinstance(lhs, BufferStore):
            self.buffer(lhs.buffer, rhs.buffer)
            self.indices(lhs.buffer, lhs.indices, rhs.indices)
            return self.expr(lhs.value, rhs.value)
        self.generic(lhs, rhs)

    def block(self, lhs: Block, rhs: Block) -> None:
        if len(lhs.iter_vars) != len(rhs.iter_vars):
            raise Mismatch(f"block {lhs.name_hint} has {len(lhs.iter_vars)} axes, the "
                           f"description's block {len(rhs.iter_vars)}")
        for a, b in zip(lhs.iter_vars, rhs.iter_vars):
            if a.iter_type is not b.iter_type or not _same_int(a.dom.extent, b.dom.extent):
                raise Mismatch(f"axis {a.var.name} of block {lhs.name_hint} differs from the "
                               f"description's axis {b.var.name} (extent or kind)")
            self.vars[b.var] = a.var
        if lhs.alloc_buffers or rhs.alloc_buffers:
            raise Mismatch("blocks that allocate buffers are not matched")
        self.regions(lhs.writes, rhs.writes, "T.writes")
        self.regions(lhs.reads, rhs.reads, "T.reads")
        if (lhs.init is None) != (rhs.init is None):
            raise Mismatch(f"block {lhs.name_hint} {'has' if lhs.init else 'lacks'} an init "
                           "the description " + ("lacks" if lhs.init else "has"))
        if lhs.init is not None:
            self.stmt(lhs.init, rhs.init)
        self.stmt(lhs.body, rhs.body)

    def regions(self, lhs, rhs, what: str) -> None:
        if len(lhs) != len(rhs):
            raise Mismatch(f"{what} lists {len(lhs)} region(s), the description "
                           f"{len(rhs)}")
        for a, b in zip(lhs, rhs):
            self.buffer(a.buffer, b.buffer)
            self.indices(a.buffer, tuple(g.min for g in a.region),
                         tuple(g.min for g in b.region))
            if any(not _same_int(x.extent, self.mapped(y.extent))
                   for x, y in zip(a.region[len(a.region) - len(b.region):], b.region)):
                raise Mismatch(f"a region of {a.buffer.name} in {what} has other extents "
                               "than the description's")

    # -------------------------------------------------------------- expressions
    def exprs(self, lhs, rhs, what: str) -> None:
        if len(lhs) != len(rhs):
            raise Mismatch(f"{what} differ in number")
        for a, b in zip(lhs, rhs):
            self.expr(a, b)

    def expr(self, lhs, rhs) -> None:
        if isinstance(rhs, E.Var):
            got = self.vars.get(rhs)
            if got is None or got is not lhs:
                raise Mismatch(f"{_txt(lhs)} is where the description has {rhs.name}")
            return
        if type(lhs) is not type(rhs):
            raise Mismatch(f"the block computes {_txt(lhs)} where the description computes "
                           f"{_txt(rhs)}")
        if isinstance(lhs, E.BufferLoad):
            self.buffer(lhs.buffer, rhs.buffer)
            return self.indices(lhs.buffer, lhs.indices, rhs.indices)
        self.generic(lhs, rhs)

    def generic(self, lhs, rhs) -> None:
        for f in dataclasses.fields(lhs):
            a, b = getattr(lhs, f.name), getattr(rhs, f.name)
            self.value(a, b, lhs)

    def value(self, a, b, owner) -> None:
        if isinstance(a, tuple) and isinstance(b, tuple):
            if len(a) != len(b):
                raise Mismatch(f"a {_kind(owner)} differs from the description's")
            for x, y in zip(a, b):
                self.value(x, y, owner)
        elif isinstance(a, Buffer) and isinstance(b, Buffer):
            self.buffer(a, b)
        elif isinstance(a, E.PrimExpr) and isinstance(b, E.PrimExpr):
            self.expr(a, b)
        elif isinstance(a, Node) and isinstance(b, Node):
            self.stmt(a, b)
        elif a != b or type(a) is not type(b):
            raise Mismatch(f"a {_kind(owner)} differs from the description's ({a!r} vs {b!r})")


def _same_int(a, b) -> bool:
    d = simplify(E.Sub(a, b) if isinstance(a, E.PrimExpr) or isinstance(b, E.PrimExpr)
                 else E.const(a - b, "int32"))
    return E.is_const_int(d, 0)


def _txt(e) -> str:
    try:
        from engine.ir import display
        return display.render("repr", e)
    except Exception:  # noqa: BLE001 - a message only
        return type(e).__name__


def _kind(n) -> str:
    return {"For": "loop", "BlockRealize": "block", "BufferStore": "store",
            "SeqStmt": "sequence of statements"}.get(type(n).__name__, type(n).__name__)


class _Rebase(Mutator):
    """The implementation's body on the program's buffers: fresh loop/axis variables,
    fresh block names, every access to a parameter moved to the program buffer at its
    base indices."""

    def __init__(self, targets: dict, bases: dict, used_blocks: set):
        self.targets, self.bases, self.used = targets, bases, used_blocks
        self.vmap: dict = {}

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def _point(self, buf, idx):
        base = self.bases[id(buf)]
        off = len(base) - len(idx)
        return tuple(base[:off]) + tuple(simplify(b + self.visit(i))
                                         for b, i in zip(base[off:], idx))

    def visit_BufferLoad(self, e):
        if id(e.buffer) in self.targets:
            return E.BufferLoad(self.targets[id(e.buffer)], self._point(e.buffer, e.indices))
        return self.generic_visit(e)

    def visit_BufferStore(self, s):
        if id(s.buffer) in self.targets:
            return BufferStore(self.targets[id(s.buffer)], self.visit(s.value),
                               self._point(s.buffer, s.indices))
        return self.generic_visit(s)

    def visit_BufferRegion(self, r):
        if id(r.buffer) not in self.targets:
            return r
        mins = self._point(r.buffer, tuple(g.min for g in r.region))
        base = self.bases[id(r.buffer)]
        off = len(base) - len(r.region)
        exts = (1,) * off + tuple(self.visit(g.extent) for g in r.region)
        return BufferRegion(self.targets[id(r.buffer)],
                            tuple(Range(m, x) for m, x in zip(mins, exts)))

    def visit_For(self, s):
        nv = E.Var(s.loop_var.name, s.loop_var.dtype)
        self.vmap[s.loop_var] = nv
        return For(nv, self.visit(s.min), self.visit(s.extent), s.kind, self.visit(s.body),
                   s.annotations, s.thread_tag)

    def visit_Block(self, b):
        ivs = []
        for iv in b.iter_vars:
            nv = E.Var(iv.var.name, iv.var.dtype)
            self.vmap[iv.var] = nv
            ivs.append(IterVar(nv, iv.dom, iv.iter_type))
        name = fresh_name(b.name_hint or "block", self.used)
        self.used.add(name)
        out = self.generic_visit(b)
        return out.replace(iter_vars=tuple(ivs), name_hint=name)


class _Fresh(_Rebase):
    """The implementation's body as it is, on the views: fresh loop and axis variables,
    fresh block names, each parameter buffer its view (``views``: id -> view)."""

    def __init__(self, views: dict, used_blocks: set):
        super().__init__({}, {}, used_blocks)
        self.views = views

    def visit_buffer(self, buf):
        return self.views.get(id(buf), buf)

    def visit_BufferRegion(self, r):
        return self.generic_visit(r)

    def visit_Call(self, c):
        """``P.access_ptr(..)`` of a parameter ``P`` points at ``P.data + offset``: the
        parameter's own offset was a number where it was parsed (a parameter is no view
        there); on the view it is the region's, ``V.elem_offset`` (TVM's spelling)."""
        out = self.generic_visit(c)
        if c.op != "tvm_access_ptr" or len(c.args) != 5:
            return out
        data, off = c.args[1], c.args[2]
        if type(data) is not E.BufferField or id(data.buffer) not in self.views or \
                collect(off, E.BufferField):
            return out
        view = self.views[id(data.buffer)]
        rel = simplify(E.binary(E.Sub, off, E.IntImm(off.dtype, int(data.buffer.elem_offset))))
        field = E.BufferField(view, "elem_offset")
        if field.dtype != rel.dtype:
            rel = E.IntImm(field.dtype, rel.value) if type(rel) is E.IntImm else \
                E.Cast(field.dtype, rel)
        new_off = field if E.is_const_int(rel, 0) else E.binary(E.Add, field, rel)
        return E.Call(out.dtype, out.op, (out.args[0], out.args[1], new_off) + out.args[3:])


def _opaque(node) -> bool:
    """Does the implementation use opaque code (a buffer's address or offset, an extern
    call, one of TVM's builtins)?"""
    return bool(collect(node, E.BufferField)) or any(
        c.op not in E.INTRINSICS for c in collect(node, E.Call))


def _views(ctx: Ctx, cmp: Comparator, intrin: TensorIntrin, name: str, subject: str,
           hl: list) -> tuple[dict, tuple]:
    """TVM's views of an opaque implementation: for each parameter (in order) a new
    buffer like it viewing the program's region it stands for — the base indices, one
    element in the leading dimensions the description lacks, then the extents of the
    implementation's region of it (its shape). ``(id(param) -> view, match_buffers)``."""
    impl_block = intrin.impl.body.block
    views, matches = {}, []
    for dp, ip in zip(intrin.desc.params, intrin.impl.params):
        prog = cmp.buffers[id(dp)]
        base = cmp.base[id(prog)]
        region = next((r.region for r in (*impl_block.reads, *impl_block.writes)
                       if r.buffer is ip), None)
        extents = [g.extent for g in region] if region is not None else list(ip.shape)
        off = len(base) - len(extents)
        if off < 0 or len(extents) != len(ip.shape) or \
                any(not _same_int(x, n) for x, n in zip(extents, ip.shape)):
            raise ctx.error(subject, f"tensor intrinsic {name!r}: its implementation's "
                            f"region of {ip.name} is not the whole of {ip.name}, so it "
                            "cannot view a region of the program", "", highlight=hl)
        rng = [Range(b, E.IntImm(b.dtype, 1)) for b in base[:off]]
        rng += [Range(b, x if x.dtype == b.dtype else E.IntImm(b.dtype, int(x.value))
                      if type(x) is E.IntImm else E.Cast(b.dtype, x))
                for b, x in zip(base[off:], extents)]
        # the implementation's strides stay (``strides=[sa, 1]``: ``sa`` is bound to the
        # program buffer's stride where the view is made plain)
        view = ip.replace(dtype=prog.dtype, scope=prog.scope, elem_offset=0)
        views[id(ip)] = view
        matches.append(MatchBufferRegion(view, BufferRegion(prog, tuple(rng))))
    return views, tuple(matches)


def tensorize_block(ctx: Ctx, realize: BlockRealize, intrin: TensorIntrin, name: str,
                    subject: str, hl: list) -> Block:
    """The block of ``realize`` with its body replaced by the intrinsic's implementation."""
    block = realize.block
    desc_block = intrin.desc.body.block
    cmp = Comparator()
    try:
        cmp.expr(realize.predicate, intrin.desc.body.predicate)
        for a, b in zip(block.writes, desc_block.writes):
            cmp.scope_region(a, b)
        for a, b in zip(block.reads, desc_block.reads):
            cmp.scope_region(a, b)
        if len(block.writes) != len(desc_block.writes) or \
                len(block.reads) != len(desc_block.reads):
            raise Mismatch(f"block {block.name_hint} reads {len(block.reads)} and writes "
                           f"{len(block.writes)} region(s), the description "
                           f"{len(desc_block.reads)} and {len(desc_block.writes)}")
        cmp.stmt(block.body, desc_block.body)
    except Mismatch as e:
        raise ctx.error(subject, f"block {block.name_hint} does not match tensor intrinsic "
                        f"{name!r}: {e}", "blockize the loops of exactly one tile of the "
                        "intrinsic's shape (after split and reorder; decompose_reduction "
                        "first if the block has an init the description lacks)",
                        highlight=hl + [block.name_hint]) from None
    impl = intrin.impl
    targets, bases = {}, {}
    for dp, ip in zip(intrin.desc.params, impl.params):
        prog = cmp.buffers.get(id(dp))
        if prog is None:
            raise ctx.error(subject, f"tensor intrinsic {name!r} does not use its parameter "
                            f"{dp.name}", "", highlight=hl)
        targets[id(ip)] = prog
        bases[id(ip)] = cmp.base[id(prog)]
    used = {b.name_hint for bs in ctx.index.blocks.values() for b in bs}
    impl_block = impl.body.block
    matches = ()
    if _opaque(impl_block):
        views, matches = _views(ctx, cmp, intrin, name, subject, hl)
        body = _Fresh(views, used).visit(impl_block.body)
    else:
        body = _Rebase(targets, bases, used).visit(impl_block.body)
    allocs = block.alloc_buffers
    if impl_block.alloc_buffers:
        raise ctx.error(subject, f"tensor intrinsic {name!r} allocates buffers in its root "
                        "block, which this engine does not place", "", highlight=hl)
    ann = dict(block.annotations)
    for k, v in impl_block.annotations:
        ann.setdefault(k, v)
    return block.replace(body=body, alloc_buffers=allocs, annotations=tuple(ann.items()),
                         match_buffers=block.match_buffers + matches)


@register
class Tensorize(Primitive):
    kind = "Tensorize"
    attr_kinds = (("tensor_intrin", "str"), ("preserve_unit_iters", "bool"))
    required_attrs = 1
    method = "tensorize"

    def call(self, sch, block_or_loop, tensor_intrin: str, preserve_unit_iters: bool = True):
        """Replace a block (or the subtree of a loop, blockized first) by the
        implementation of a registered tensor intrinsic.

        It requires: 1) ``block_or_loop`` is a valid block handle, or a loop handle
        that blockize accepts; 2) ``tensor_intrin`` names a registered intrinsic
        (``engine.TensorIntrin.register``; built-in: ``vfma_f32_16x16x16``,
        ``vfma_f32_8x8x8``, ``vdot_f32_16x16x16_bt``); 3) the block matches the
        intrinsic's description: its ``T.writes`` and ``T.reads`` are the description's,
        in order, as tiles of the same extents at some base indices (same dtypes and
        storage scopes), and its body has the same loops, blocks (axes, bindings) and
        expressions, every access at the base plus the description's indices; 4) it
        has no ``T.where`` guard (unless the description has the same). An implementation
        of opaque code (``C.data``, ``C.elem_offset``, an extern call) is bound to the tiles
        by one ``T.match_buffer`` view per parameter, as TVM does (the program can then be
        scheduled and printed, not built); the After below is a TensorIR implementation's.

        Before::

            for i_0, j_0, k_0 in T.grid(2, 2, 2):
                with T.block("C_o"):
                    vi_o, vj_o, vk_o = T.axis.remap("SSR", [i_0, j_0, k_0])
                    T.reads(C[...], A[vi_o * 16:vi_o * 16 + 16, vk_o * 16:vk_o * 16 + 16],
                            B[vk_o * 16:vk_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                    T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                    for i_1, j_1, k_1 in T.grid(16, 16, 16):
                        with T.block("C"):
                            ...
                            C[...] = C[...] + A[...] * B[...]

        Call::

            sch.tensorize(c_o, "vfma_f32_16x16x16")

        After::

            for i_0, j_0, k_0 in T.grid(2, 2, 2):
                with T.block("C_o"):
                    ...
                    for i, k in T.grid(16, 16):
                        for j in T.vectorized(16):
                            C[vi_o * 16 + i, vj_o * 16 + j] = C[vi_o * 16 + i, vj_o * 16 + j]
                                + A[vi_o * 16 + i, vk_o * 16 + k] * B[vk_o * 16 + k, vj_o * 16 + j]
        """
        if not isinstance(tensor_intrin, str):
            raise ScheduleError("tensorize", repr(tensor_intrin), "tensor_intrin must be the "
                                "name of a registered tensor intrinsic",
                                'e.g. "vfma_f32_16x16x16"')
        sch._run(self, [block_or_loop], [tensor_intrin, bool(preserve_unit_iters)])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        node = inputs[0]
        if not isinstance(node, (Block, For)):
            raise ctx.error(subject_of(node), "expected a block or loop handle", "")
        if not attrs or not isinstance(attrs[0], str):
            raise ctx.error(subject_of(node), "tensorize needs the name of a tensor intrinsic",
                            "")
        name = attrs[0]
        keep = as_bool(ctx, attrs[1], "preserve_unit_iters") if len(attrs) > 1 else True
        subject = subject_of(node)
        hl = [node.loop_var.name if isinstance(node, For) else node.name_hint]
        intrin = TensorIntrin.get(name, allow_missing=True)
        if intrin is None:
            from ..tensor_intrin import names
            raise ctx.error(subject, f"no tensor intrinsic is registered as {name!r}",
                            f"register it with engine.TensorIntrin.register(name, desc, impl),"
                            f" or use one of: {', '.join(names())}", highlight=hl)
        if isinstance(node, For):
            realize, _ = blockize_loop(ctx, node, keep, self.method)
            key = node
        else:
            if node is ctx.index.root_block:
                raise ctx.error("block root", "the root block cannot be tensorized", "")
            realize = ctx.index.realize[id(node)]
            key = realize
        new_block = tensorize_block(ctx, realize, intrin, name, subject, hl)
        new = realize.replace(block=new_block)
        return Result(replace_stmts(ctx.func, {key: new}), [])

    def python_args(self, inputs, attrs, dialect):
        name = py_str(attrs[0], "Tensorize's tensor_intrin") if attrs else '""'
        keep = self.attr(attrs, 1, default=True)
        if dialect == "engine":
            return [fmt(inputs[0]), name] + ([] if keep == "True" else
                                             [f"preserve_unit_iters={keep}"])
        return [f"block_or_loop={fmt(inputs[0])}", f"tensor_intrin={name}",
                f"preserve_unit_iters={keep}"]

