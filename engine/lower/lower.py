"""Lowering: TensorIR blocks -> plain loops over flat (1-D) buffers.

``lower(func)`` takes a scheduled :class:`~engine.ir.PrimFunc` (or an IRModule, lowered
function by function) and returns a *lowered* PrimFunc that the LLVM code generator
(:mod:`engine.codegen`) consumes directly. The passes, in order:

0. **Views** (:func:`engine.ir.views.inline_views`): an access through a block's
   ``T.match_buffer`` view becomes an access of the region of the buffer it views.
   **Buffer placement, compaction and storage_align** (:mod:`.compact`): each buffer a
   block allocates moves to the innermost loop enclosing all its accesses (when provably
   safe), shrinks to the box one iteration touches, and gets the padded strides of a
   ``buffer_dim_align`` annotation.
1. **Blocks -> loops** (:class:`_BlockLowerer`). Every ``BlockRealize`` disappears: its
   block axes are replaced by the bound values (``vi -> i``, ``vj -> j0 * 4 + j1``), its
   predicate (``T.where``) becomes an ``IfThenElse``, its ``alloc_buffers`` become
   ``Allocate`` statements around the block body, and its ``init`` statement runs when
   every reduce-axis binding equals its domain minimum (TVM's ``LowerInitBlock`` rule, as
   the interpreter runs it). When the block sits at the bottom of a perfect loop nest
   whose innermost loops drive exactly the reduce axes, and the reduce axes are at their
   minimum at the first iteration of those loops and at no other
   (:func:`_at_minimum_only_first`: not so for ``k * k // 2``, 0 at k = 0 and k = 1), the
   init is *hoisted* in front of those loops instead of being guarded by an ``if`` (the
   usual ``Y[i, j] = 0; for k: Y[i, j] += ...`` shape), which is what a C programmer
   writes.
2. **Flattening** (:class:`_Flattener`). Each buffer becomes a 1-D buffer of the same
   name, dtype, scope and alignment; ``A[i, j]`` becomes ``A[i * stride0 + j]`` (explicit
   ``strides``/``elem_offset`` are honoured). The lowered function's parameters are the
   flat buffers; the original parameters are kept in the attribute ``"lowered_params"``
   (the runtime checks numpy arrays against their shapes).
3. **Simplification** of every index/condition (:func:`engine.arith.simplify` plus the
   lowering-specific folds of :mod:`engine.arith.lower_simplify`).
4. **Loop legalisation** (:mod:`.legalize`): ``unroll`` loops with a constant extent are
   expanded (others become serial loops with an ``unroll_skipped`` note); ``vectorized`` loops become straight-line vector code (``Ramp`` /
   ``Broadcast`` / vector loads and stores) when the body is vectorizable, otherwise a
   serial loop annotated with ``("vectorize_fallback", reason)`` (always correct).
   ``parallel`` loops stay as ``For(kind=PARALLEL)``; the code generator outlines them.

The lowered function carries the attribute ``("lowered", True)``. Instrumentation passes
(e.g. the cache simulator) may rewrite a lowered function — it is ordinary IR — and pass
it to ``engine.build(func, lowered=True)``.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import lanes_of
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import Mutator, collect, collect_vars, substitute

from .errors import BuildError
from engine.arith import Analyzer
from engine.arith.digits import digit_of
from engine.arith.lower_simplify import lower_simplify


# ---------------------------------------------------------------------------
# 1. blocks -> loops
# ---------------------------------------------------------------------------
def _and_all(conds: list) -> E.PrimExpr | None:
    out = None
    for c in conds:
        out = c if out is None else E.And(out, c)
    return out


def _is_true(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value != 0


def _is_false(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _guard(cond: E.PrimExpr, body: S.Stmt | None) -> S.Stmt | None:
    if body is None:
        return None
    cond = lower_simplify(cond)
    if _is_true(cond):
        return body
    if _is_false(cond):
        return None
    return S.IfThenElse(cond, body, None)


def _digit(atom: E.PrimExpr):
    """:func:`engine.arith.digits.digit_of`, None for a plain atom (no division, no modulo)."""
    dig = digit_of(atom)
    return dig if dig is not None and (dig[1] > 1 or dig[2] is not None) else None


def _at_minimum_only_first(offsets: list, loops: list, first: dict) -> bool:
    """True when the ``offsets`` (each reduce binding minus its domain's minimum, 0 at the
    first iteration of ``loops``) are all 0 at that first iteration only: then one init in
    front of the loops is TVM's rule (the init runs at every instance whose reduce axes are
    all at their minimum). Proven when, with the loops counted from 0, every offset is a
    sum of terms ``c * atom`` with ``c > 0`` — an atom is a loop, or a digit ``X // d``,
    ``X % m``, ``X // d % m`` of a sum ``X`` of loops with positive coefficients, so every
    term is at least 0 — and the terms all 0 force every loop to 0: a loop that is an
    atom, or the loops of an ``X`` whose digits read back all of it (``X % m1``,
    ``X // m1 % m2``, ..., up to ``X``'s largest value)."""
    ranges: dict = {}
    for f in loops:
        ext = E.as_const_int(f.extent)
        if ext is None or ext <= 0:
            return False
        ranges[id(f.loop_var)] = (f.loop_var, ext - 1)
    an = Analyzer({v: (0, hi) for v, hi in ranges.values()})
    shift = {v: E.binary(E.Add, v, mn) for v, mn in first.items() if not E.is_const_int(mn, 0)}
    zero: set = set()
    groups: dict = {}  # X as ((loop id, coef), ...) -> ({loop id: coef}, [(d, m)])
    for off in offsets:
        terms, const = an.linear(an.simplify(substitute(off, shift)))
        if const != 0:
            return False
        for atom, coef in terms.values():
            if coef <= 0:
                return False
            if isinstance(atom, E.Var) and id(atom) in ranges:
                zero.add(id(atom))
                continue
            dig = _digit(atom)
            if dig is None:
                return False
            x, d, m = dig
            x_terms, x_const = an.linear(x)
            if x_const != 0 or not x_terms:
                return False
            coefs = {}
            for a, c in x_terms.values():
                if not (isinstance(a, E.Var) and id(a) in ranges) or c <= 0:
                    return False
                coefs[id(a)] = c
            groups.setdefault(tuple(sorted(coefs.items())), (coefs, []))[1].append((d, m))
    for coefs, digits in groups.values():
        top = sum(c * ranges[v][1] for v, c in coefs.items())
        cur = 1
        while True:
            nxt = [m for d, m in digits if d == cur]
            if not nxt:
                break
            if None in nxt or cur * max(nxt) > top:
                zero.update(coefs)
                break
            cur *= max(nxt)
    return all(v in zero or hi == 0 for v, (_, hi) in ranges.items())


class _BlockLowerer:
    """Removes Block/BlockRealize (see the module docstring, step 1)."""

    def __init__(self, func_name: str):
        self.func_name = func_name
        self.blocks: list[str] = []

    def where(self) -> str:
        if self.blocks:
            return f"in block {self.blocks[-1]!r} of function {self.func_name!r}"
        return f"in function {self.func_name!r}"

    def check(self, e: Any) -> None:
        """Refuse calls the backend cannot compile (opaque code: TVM's builtins, extern
        calls, a buffer's address), naming the block."""
        for c in collect(e, (E.Call, E.BufferField)):
            if type(c) is E.BufferField:
                raise BuildError(f"{c.buffer.name}.{c.field} is used {self.where()}: the "
                                 "address of a buffer is for opaque code (an extern call, "
                                 "T.tvm_access_ptr), which this engine cannot compile")
            if c.op in ("address_of", "call_extern"):
                continue
            if c.op in E.OPAQUE_CALLS:
                raise BuildError(f"T.{c.op} {self.where()} is opaque code (one of TVM's "
                                 "builtins for code outside TensorIR: tensor-core, "
                                 "pointer or extern calls); this engine's LLVM backend "
                                 "cannot compile it — the program can be scheduled and "
                                 "printed, not built")
            if c.op not in E.INTRINSICS:
                known = ", ".join(sorted(E.INTRINSICS))
                raise BuildError(f"unsupported intrinsic {c.op!r} {self.where()} (an extern "
                                 "call is opaque code: only engine.build or tvm.compile "
                                 "called from your own Python links an extern function, "
                                 "its LLVM IR given by a loop's pragma_import_llvm "
                                 "annotation — a program pasted into or measured by the "
                                 f"explorer never does); the LLVM backend knows: {known}")
            if len(c.args) != E.INTRINSICS[c.op]:
                raise BuildError(f"intrinsic {c.op!r} takes {E.INTRINSICS[c.op]} argument(s) "
                                 f"but is called with {len(c.args)} {self.where()}")

    def sub(self, e: Any, vmap: dict) -> Any:
        if e is not None:
            self.check(e)
        return substitute(e, vmap) if vmap else e

    # statements --------------------------------------------------------
    def stmt(self, s: Any, vmap: dict) -> S.Stmt | None:
        if s is None:
            return None
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise BuildError(f"cannot lower statement of kind {type(s).__name__} "
                             f"in function {self.func_name!r}")
        return meth(s, vmap)

    def s_SeqStmt(self, s: S.SeqStmt, vmap: dict):
        return S.seq(*[self.stmt(x, vmap) for x in s.seq])

    def s_BufferStore(self, s: S.BufferStore, vmap: dict):
        return S.BufferStore(s.buffer, self.sub(s.value, vmap),
                             tuple(self.sub(i, vmap) for i in s.indices))

    def s_Evaluate(self, s: S.Evaluate, vmap: dict):
        if type(s.value) is E.Call and s.value.op == "assume":
            return None    # T.assume: a fact the program may rely on, no code
        return S.Evaluate(self.sub(s.value, vmap))

    def s_IfThenElse(self, s: S.IfThenElse, vmap: dict):
        then = self.stmt(s.then_case, vmap)
        els = self.stmt(s.else_case, vmap)
        cond = self.sub(s.condition, vmap)
        if then is None and els is None:
            return None
        if then is None:
            return S.IfThenElse(E.Not(cond), els, None)
        return S.IfThenElse(cond, then, els)

    def s_LetStmt(self, s: S.LetStmt, vmap: dict):
        body = self.stmt(s.body, vmap)
        if body is None:
            return None
        return S.LetStmt(s.var, self.sub(s.value, vmap), body)

    def s_Allocate(self, s: S.Allocate, vmap: dict):
        body = self.stmt(s.body, vmap)
        return None if body is None else S.Allocate(s.buffer, body)

    def s_For(self, s: S.For, vmap: dict):
        # collect the perfect nest s -> ... -> innermost For
        chain = [s]
        while isinstance(chain[-1].body, S.For):
            chain.append(chain[-1].body)
        leaf = chain[-1].body
        if isinstance(leaf, S.BlockRealize) and leaf.block.init is not None:
            hoisted = self._try_hoist(chain, leaf, vmap)
            if hoisted is not None:
                return hoisted
        body = self.stmt(s.body, vmap)
        if body is None:
            return None
        return S.For(s.loop_var, self.sub(s.min, vmap), self.sub(s.extent, vmap), s.kind,
                     body, s.annotations, s.thread_tag)

    def _try_hoist(self, chain: list, br: S.BlockRealize, vmap: dict):
        """Hoist the init of ``br`` above its innermost reduction loops, if provably equal."""
        block = br.block
        if block.alloc_buffers:
            return None
        self.blocks.append(block.name_hint)
        try:
            return self._hoist(chain, br, vmap)
        finally:
            self.blocks.pop()

    def _hoist(self, chain: list, br: S.BlockRealize, vmap: dict):
        block = br.block
        values = [self.sub(v, vmap) for v in br.iter_values]
        if len(values) != len(block.iter_vars):
            raise BuildError(f"block {block.name_hint!r} binds {len(values)} values to "
                             f"{len(block.iter_vars)} axes")
        red_vars: set[int] = set()
        spatial_vars: set[int] = set()
        for iv, v in zip(block.iter_vars, values):
            ids = {id(x) for x in collect_vars(v)}
            (red_vars if iv.iter_type is S.IterType.REDUCE else spatial_vars).update(ids)
        loop_ids = [id(f.loop_var) for f in chain]
        if red_vars - set(loop_ids):
            return None  # a reduce binding uses a loop outside this nest: keep the if-form
        red_loop = red_vars & set(loop_ids)
        if not red_loop:
            return None
        k = len(chain) - min(loop_ids.index(x) for x in red_loop)
        suffix_loops = chain[len(chain) - k:]
        suffix_ids = {id(f.loop_var) for f in suffix_loops}
        if spatial_vars & suffix_ids:
            return None
        if suffix_ids - red_vars:
            # a loop between the reduction loops that no reduce axis uses: the block runs
            # its init once per iteration of that loop (at reduce == min); keep the if-form
            return None
        pred = self.sub(br.predicate, vmap)
        if {id(x) for x in collect_vars(pred)} & suffix_ids:
            return None
        # the first iteration of the suffix loops must hit every reduce axis' minimum
        first = {}
        for f in suffix_loops:
            mn, ext = lower_simplify(self.sub(f.min, vmap)), lower_simplify(self.sub(f.extent, vmap))
            if not (isinstance(ext, E.IntImm) and ext.value > 0):
                return None
            if any(id(x) in suffix_ids for x in collect_vars(mn)):
                return None
            first[f.loop_var] = mn
        offsets = []
        for iv, v in zip(block.iter_vars, values):
            if iv.iter_type is not S.IterType.REDUCE:
                continue
            offset = E.binary(E.Sub, v, self.sub(iv.dom.min, vmap))
            at_first = lower_simplify(substitute(offset, first))
            if not (isinstance(at_first, E.IntImm) and at_first.value == 0):
                return None
            offsets.append(offset)
        # ... and no later iteration may hit them all again: TVM's rule runs the init at
        # every instance whose reduce axes are all at their minimum (``k * k // 2`` is 0
        # at k = 0 and at k = 1), which one init in front of the loops would not do
        if not _at_minimum_only_first(offsets, suffix_loops, first):
            return None
        bvmap = dict(vmap)
        for iv, v in zip(block.iter_vars, values):
            bvmap[iv.var] = v
        init = self.stmt(block.init, bvmap)
        body = self.stmt(block.body, bvmap)
        inner = body
        for f in reversed(suffix_loops):
            if inner is None:
                break
            inner = S.For(f.loop_var, self.sub(f.min, vmap), self.sub(f.extent, vmap), f.kind,
                          inner, f.annotations, f.thread_tag)
        inner = _guard(pred, S.seq(init, inner))
        for f in reversed(chain[:len(chain) - k]):
            if inner is None:
                return S.Evaluate(E.IntImm("int32", 0))
            inner = S.For(f.loop_var, self.sub(f.min, vmap), self.sub(f.extent, vmap), f.kind,
                          inner, f.annotations, f.thread_tag)
        return inner if inner is not None else S.Evaluate(E.IntImm("int32", 0))

    def s_BlockRealize(self, br: S.BlockRealize, vmap: dict):
        self.blocks.append(br.block.name_hint)
        try:
            return self._block_realize(br, vmap)
        finally:
            self.blocks.pop()

    def _block_realize(self, br: S.BlockRealize, vmap: dict):
        block = br.block
        if len(br.iter_values) != len(block.iter_vars):
            raise BuildError(f"block {block.name_hint!r} binds {len(br.iter_values)} values "
                             f"to {len(block.iter_vars)} axes")
        bvmap = dict(vmap)
        values = [self.sub(v, vmap) for v in br.iter_values]
        for iv, v in zip(block.iter_vars, values):
            bvmap[iv.var] = v
        body = self.stmt(block.body, bvmap)
        if block.init is not None:
            conds = []
            for iv, v in zip(block.iter_vars, values):
                if iv.iter_type is S.IterType.REDUCE:
                    conds.append(E.binary(E.EQ, v, self.sub(iv.dom.min, vmap)))
            init = self.stmt(block.init, bvmap)
            cond = _and_all(conds)
            if cond is not None:
                init = _guard(cond, init)
            body = S.seq(init, body)
        for buf in reversed(block.alloc_buffers):
            if body is not None:
                body = S.Allocate(buf, body)
        return _guard(self.sub(br.predicate, vmap), body)

    def s_Block(self, b: S.Block, vmap: dict):
        return self.s_BlockRealize(S.BlockRealize((), E.IntImm("bool", 1), b), vmap)


# ---------------------------------------------------------------------------
# 2. flattening
# ---------------------------------------------------------------------------
def flat_buffer(buf: Buffer) -> Buffer:
    """The 1-D buffer with the storage of ``buf`` (same name, dtype, scope, alignment);
    a symbolic shape gives a symbolic size (``m * k``)."""
    if buf.strides:
        strides = []
        for s in buf.strides:
            v = E.as_const_int(s)
            if v is None:
                raise BuildError(f"buffer {buf.name!r} has symbolic strides; use constant strides")
            strides.append(v)
    try:
        shape = buf.const_shape()
    except ValueError:
        if buf.strides:
            raise BuildError(f"buffer {buf.name!r} has explicit strides and a symbolic "
                             "shape; give it constant sizes, or no strides") from None
        return Buffer(buf.name, (symbolic_size(buf),), buf.dtype, buf.scope, (), 0, buf.align)
    if buf.strides:
        size = 1 + sum((n - 1) * st for n, st in zip(shape, strides)) if all(shape) else 0
    else:
        size = 1
        for n in shape:
            size *= n
    size += buf.elem_offset
    return Buffer(buf.name, (max(size, 0),), buf.dtype, buf.scope, (), 0, buf.align)


def index_dtype(buf: Buffer) -> str:
    """The dtype of a symbolic-shape buffer's flat indices: int64 when a size is int64,
    else int32 (the runtime then checks that the array holds fewer than 2**31 elements)."""
    return "int64" if any(d.dtype == "int64" for d in buf.shape) else "int32"


def _as_dtype(e: E.PrimExpr, dtype: str) -> E.PrimExpr:
    return e if e.dtype == dtype else E.Cast(dtype, e)


def symbolic_strides(buf: Buffer) -> list:
    """Row-major strides of a symbolic-shape buffer, as expressions of its index dtype."""
    idt = index_dtype(buf)
    strides, acc = [], E.IntImm(idt, 1)
    for n in reversed(buf.shape):
        strides.append(acc)
        acc = lower_simplify(E.binary(E.Mul, acc, _as_dtype(n, idt)))
    return list(reversed(strides))


def symbolic_size(buf: Buffer) -> E.PrimExpr:
    """The number of elements of a symbolic-shape buffer (an expression)."""
    idt = index_dtype(buf)
    size: E.PrimExpr = E.IntImm(idt, 1)
    for n in buf.shape:
        size = E.binary(E.Mul, size, _as_dtype(n, idt))
    return lower_simplify(size)


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return list(reversed(strides))


class _Flattener(Mutator):
    def __init__(self) -> None:
        self.map: dict[int, Buffer] = {}
        self.info: dict[int, tuple] = {}

    def flat(self, buf: Buffer) -> Buffer:
        fb = self.map.get(id(buf))
        if fb is None:
            fb = flat_buffer(buf)
            self.map[id(buf)] = fb
            if type(fb.shape[0]) is not E.IntImm:  # a symbolic shape
                self.info[id(buf)] = (symbolic_strides(buf), 0, index_dtype(buf), buf.shape)
                return fb
            shape = buf.const_shape()
            strides = ([E.as_const_int(s) for s in buf.strides] if buf.strides
                       else row_major_strides(shape))
            big = fb.shape[0].value >= 2**31
            self.info[id(buf)] = (strides, buf.elem_offset, "int64" if big else "int32", shape)
        return fb

    def visit_buffer(self, buf: Buffer) -> Buffer:
        return self.flat(buf)

    def linear(self, buf: Buffer, indices: tuple) -> E.PrimExpr:
        self.flat(buf)
        strides, offset, idt, shape = self.info[id(buf)]
        if len(indices) != len(shape):
            raise BuildError(f"buffer {buf.name!r} has {len(shape)} dimensions but is indexed "
                             f"with {len(indices)} indices")
        lanes = max([lanes_of(i.dtype) for i in indices] + [1])
        terms = []
        for idx, st in zip(indices, strides):
            idx = self.visit(idx)
            terms.append((idx, st))
        terms = [(idx, E.IntImm(idt, st) if isinstance(st, int) else st)
                 for idx, st in terms]
        if lanes == 1:
            out: E.PrimExpr = E.IntImm(idt, offset)
            for idx, st in terms:
                idx = idx if idx.dtype == idt else E.Cast(idt, idx)
                out = E.Add(out, E.Mul(idx, st) if not E.is_const_int(st, 1) else idx)
            return lower_simplify(out)
        # vector index: keep a single Ramp in Ramp form, everything else broadcast
        base: E.PrimExpr = E.IntImm(idt, offset)
        vec_terms = []
        for idx, st in terms:
            if lanes_of(idx.dtype) == 1:
                idx = idx if idx.dtype == idt else E.Cast(idt, idx)
                base = E.Add(base, E.Mul(idx, st))
            elif isinstance(idx, E.Ramp) and not vec_terms:
                b = idx.base if idx.base.dtype == idt else E.Cast(idt, idx.base)
                s_ = idx.stride if idx.stride.dtype == idt else E.Cast(idt, idx.stride)
                vec_terms.append(("ramp", b, s_, st))
            else:
                vec_terms.append(("vec", idx, None, st))
        if len(vec_terms) == 1 and vec_terms[0][0] == "ramp":
            _, b, s_, st = vec_terms[0]
            base = E.Add(base, E.Mul(b, st))
            return lower_simplify(E.Ramp(lower_simplify(base), lower_simplify(
                E.Mul(s_, st)), lanes))
        vt = f"{idt}x{lanes}"
        out = E.Broadcast(lower_simplify(base), lanes)
        for kind, a, s_, st in vec_terms:
            if kind == "ramp":
                a = E.Ramp(a, s_, lanes)
            elif a.dtype != vt:
                a = E.Cast(vt, a)
            out = E.Add(out, E.Mul(a, E.Broadcast(st, lanes)))
        return out

    def visit_BufferLoad(self, n: E.BufferLoad):
        return E.BufferLoad(self.flat(n.buffer), (self.linear(n.buffer, n.indices),))

    def visit_BufferStore(self, s: S.BufferStore):
        return S.BufferStore(self.flat(s.buffer), self.visit(s.value),
                             (self.linear(s.buffer, s.indices),))


# ---------------------------------------------------------------------------
def lower(func: Any, *, legalize: bool = True, compact: bool = True,
          extern: bool = False) -> Any:
    """Lower a PrimFunc (or every function of an IRModule); see the module docstring.

    ``extern=True`` (a build that links outside code: ``engine.build`` from Python) makes
    extern calls compilable first (:mod:`.extern`); without it they are refused as opaque
    code.

    ``compact=False`` skips buffer placement/compaction (:mod:`.compact`; storage_align
    strides are then not applied either) — for comparisons only.

    Raises :class:`BuildError` (naming the block/buffer/node) for programs that cannot
    be lowered, or whose buffer accesses cannot be proven in bounds (:mod:`.bounds_check`).
    Lowering an already lowered function returns it unchanged (once its accesses are proven
    in bounds).
    """
    if isinstance(func, IRModule):
        return IRModule(tuple((name, lower(f, legalize=legalize, compact=compact,
                                           extern=extern)
                               if isinstance(f, PrimFunc) else f)
                              for name, f in func.functions))
    if not isinstance(func, PrimFunc):
        raise BuildError(f"lower() expects a PrimFunc or IRModule, got {type(func).__name__}")
    from .bounds_check import check_bounds
    if func.attr("lowered", False):
        # the attribute may come from a pasted program's T.func_attr: prove its accesses too
        check_bounds(func.body, func.name, func.attr("size_vars", ()), func.params)
        return func
    from .compact import compact_buffers
    from .legalize import legalize_loops
    from .tails import peel_vector_tails
    from engine.ir.views import inline_views
    if extern:
        from .extern import link_extern_calls
        func = link_extern_calls(func)
    func = inline_views(func)   # T.match_buffer views and B.elem_offset made plain first
    src = compact_buffers(func) if compact else func
    body = _BlockLowerer(func.name).stmt(src.body, {})
    if body is None:
        body = S.Evaluate(E.IntImm("int32", 0))
    size_vars = symbolic_sizes(func, body)
    check_bounds(body, func.name, size_vars, func.params)
    fl = _Flattener()
    params = tuple(fl.flat(p) if isinstance(p, Buffer) else p for p in func.params)
    body = fl.visit(body)
    body = lower_simplify(body)
    if legalize:
        body = legalize_loops(body, func.name)
        body = peel_vector_tails(body)
    out = PrimFunc(func.name, params + size_vars, body, func.attrs)
    out = out.with_attr("lowered_params", tuple(func.params)).with_attr("lowered", True)
    if size_vars:
        out = out.with_attr("size_vars", size_vars)
    return out


def symbolic_sizes(func: PrimFunc, body: S.Stmt) -> tuple:
    """The symbolic sizes of ``func`` that are not parameters, in order of first
    appearance in the buffer parameters' shapes: each is read from the shape of the array
    given for the first buffer with that size as one of its dimensions (TVM's binding of
    ``T.match_buffer`` shapes). They become the lowered function's last parameters.

    A variable the body (or a shape) uses that is neither a parameter, nor bound in the
    body, nor a dimension of a buffer parameter is refused: nothing would give its value.
    """
    scalars = {id(p) for p in func.params if not isinstance(p, Buffer)}
    sizes: dict[int, E.Var] = {}
    for p in func.params:
        if isinstance(p, Buffer):
            for d in p.shape:
                if type(d) is E.Var and id(d) not in scalars:
                    sizes.setdefault(id(d), d)
    for p in func.params:
        if not isinstance(p, Buffer):
            continue
        for d in tuple(p.shape) + tuple(p.strides):
            for v in collect_vars(d):
                if id(v) not in sizes and id(v) not in scalars:
                    raise BuildError(
                        f"the shape of buffer {p.name!r} uses {v.name!r}, which no array "
                        f"gives: a symbolic size must be one whole dimension of some "
                        f"parameter's shape (as {v.name!r} in T.Buffer(({v.name},), ...)) or a "
                        f"scalar parameter ({v.name}: T.{v.dtype})")
    known = set(sizes) | scalars
    for v in _free_vars(body):
        if id(v) not in known:
            raise BuildError(f"function {func.name!r} uses the variable {v.name!r}, which "
                             "nothing defines: make it a scalar parameter "
                             f"({v.name}: T.{v.dtype}) or a dimension of a parameter's shape")
    for v in sizes.values():
        if not v.dtype.startswith("int") or v.dtype not in ("int32", "int64"):
            raise BuildError(f"symbolic size {v.name!r} has dtype {v.dtype}; a size is an "
                             "int32 or int64 (n = T.int32() or T.int64())")
    return tuple(sizes.values())


def _free_vars(body: S.Stmt) -> list:
    """The variables ``body`` uses without defining them (loop variables, lets and block
    axes define theirs), in first-use order, each once."""
    from engine.ir.functor import pre_order_visit
    defined: set[int] = set()
    used: dict[int, E.Var] = {}
    seen: set[int] = set()

    def visit(n):
        if id(n) in seen:  # a shared subtree is walked once
            return False
        seen.add(id(n))
        if isinstance(n, S.For):
            defined.add(id(n.loop_var))
        elif isinstance(n, (S.LetStmt, E.Let)):
            defined.add(id(n.var))
        elif isinstance(n, S.Block):
            defined.update(id(iv.var) for iv in n.iter_vars)
        elif isinstance(n, S.Allocate):
            for d in n.buffer.shape:
                for v in collect_vars(d):
                    used.setdefault(id(v), v)
        elif isinstance(n, (E.BufferLoad, S.BufferStore)):
            for d in n.buffer.shape:
                for v in collect_vars(d):
                    used.setdefault(id(v), v)
        elif type(n) is E.Var:
            used.setdefault(id(n), n)
        return None
    pre_order_visit(body, visit)
    return [v for k, v in used.items() if k not in defined]
