"""Weights stored in the layout their kernel reads fastest, once, when they are constants.

A linear layer written as the course writes it (:func:`engine.topi.linear`, TVM's
``dense``) reads its weight as ``W[j, k]``: the output column ``j`` is the first index, the
reduction ``k`` the second, so neighbouring outputs are 3 KiB apart in ``W`` and the loop
over ``j`` cannot become a vector. The model's default recipe (:mod:`.schedules`) starts by
transposing such a weight when ``main`` passes it as a constant (the model's trained
weights, bound by ``BindParams``): the explorer's ``transform_layout`` with ``lambda j, k:
(k, j)`` on the parameter (:func:`transpose_weight`, a step of the trace), which rewrites
every access to ``W[k, j]``; the layer then reads its weight as ``x @ W_t`` does, and is
scheduled as well as a matmul. The stages as written (``unscheduled``, ``fused``) keep the
course's ``W[j, k]``.

A schedule that changes a parameter's layout changes the function's signature; the module
it goes back into is kept consistent by :func:`with_schedules`: the constants ``main``
passes there are stored in the new layout, computed once in numpy (what TVM's
``FoldConstant`` does to ``R.linear(x, w)`` with a constant ``w``, or to the layout
transform ``SplitLayoutRewritePreproc`` puts before a call). A computed value in that
position cannot be stored so: :class:`LayoutError` says which. The explorer keeps a
function's parameters as they are, so the model page opens a function whose trace starts
with such steps as the model stores it, with the rest of the trace
(:func:`split_layout_steps`), and puts those steps back first when that program's link is
pasted (:func:`join_layout_steps`).
"""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, IterType
from engine.relax import expr as X
from engine.relax.transform.fuse_ops import call_tir_callee, tir_args
from engine.schedule import Schedule, ScheduleError, Trace
from engine.schedule.instruction import Instruction, is_ref
from engine.schedule.param_layouts import changes_params, param_layouts, relaid

__all__ = ["pretranspose_weights", "transposed_weight_params", "transpose_weight",
           "constant_params", "with_schedules", "LayoutError", "TRANSPOSE_MAP",
           "split_layout_steps", "join_layout_steps"]

#: the index map applied to a transposed weight parameter
TRANSPOSE_MAP = "lambda j, k: (k, j)"


class LayoutError(ValueError):
    """A schedule changed the layout of a parameter the module cannot give it that way."""


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root"]


def _loads(block: Block, buf) -> list[E.BufferLoad]:
    found: list = []
    post_order_visit(block.body, lambda n: found.append(n)
                     if isinstance(n, E.BufferLoad) and n.buffer is buf else None)
    return found


def _reads_as_dense_weight(func: PrimFunc, buf) -> str | None:
    """The name of the one block reading the 2-D ``buf`` as ``buf[vj, vk]`` — ``vj`` its
    last spatial axis, ``vk`` its only reduction axis — when nothing else touches ``buf``;
    else None."""
    if len(buf.shape) != 2:
        return None
    users = [b for b in _blocks(func)
             if any(r.buffer is buf for r in b.reads) or any(w.buffer is buf for w in b.writes)]
    if len(users) != 1:
        return None
    blk = users[0]
    if any(w.buffer is buf for w in blk.writes) or blk.init is None:
        return None
    spatial = [iv.var for iv in blk.iter_vars if iv.iter_type == IterType.SPATIAL]
    reduce = [iv.var for iv in blk.iter_vars if iv.iter_type == IterType.REDUCE]
    if len(reduce) != 1 or not spatial:
        return None
    loads = _loads(blk, buf)
    if not loads or not all(len(ld.indices) == 2 and ld.indices[0] is spatial[-1]
                            and ld.indices[1] is reduce[0] for ld in loads):
        return None
    return blk.name_hint


def transposed_weight_params(func: PrimFunc) -> dict[int, str]:
    """Positions (among the buffer parameters) of the weights ``func`` reads as
    ``W[j, k]`` -> the block reading each."""
    out = {}
    for pos, buf in enumerate(func.buffer_params):
        name = _reads_as_dense_weight(func, buf)
        if name is not None:
            out[pos] = name
    return out


def transpose_weight(sch: Schedule, func_name: str, pos: int, block_name: str) -> bool:
    """Apply ``transform_layout(<block>, ("read", i), "lambda j, k: (k, j)")`` to the
    ``pos``-th buffer parameter of ``func_name`` in ``sch`` (recorded in its trace); False
    when the engine refuses it (``sch`` unchanged)."""
    buf = sch.mod[func_name].buffer_params[pos]
    handle = sch.get_block(block_name, func_name=func_name)
    reads = sch.get(handle).reads
    index = next((i for i, r in enumerate(reads) if r.buffer is buf), None)
    if index is None:
        return False
    try:
        sch.transform_layout(handle, ("read", index), TRANSPOSE_MAP)
    except ScheduleError:
        return False
    return True


def _calls(mod: IRModule, callee: str) -> list[tuple[str, tuple]]:
    """(Relax function, arguments) of every ``call_tir`` of ``callee`` in ``mod``."""
    out = []
    for fname, f in mod.items():
        if isinstance(f, X.Function):
            for b in f.bindings():
                if call_tir_callee(b.value) == callee:
                    out.append((fname, tuple(tir_args(b.value))))
    return out


def constant_params(mod: IRModule, func_name: str) -> frozenset[int]:
    """Positions of the buffer parameters of the TensorIR function ``func_name`` that every
    call of it in ``mod`` passes a constant (none when nothing calls it)."""
    calls = _calls(mod, func_name)
    if not calls:
        return frozenset()
    n = len(mod[func_name].buffer_params)
    return frozenset(p for p in range(n)
                     if all(p < len(a) and isinstance(a[p], X.Constant) for _, a in calls))


def with_schedules(base: IRModule, funcs: dict[str, PrimFunc], traces: dict,
                   ) -> IRModule:
    """``base`` with its TensorIR functions replaced by ``funcs`` (scheduled by
    ``traces``, name -> Trace, from ``base``'s own functions), and every constant a
    replaced function's changed parameter receives stored in its new layout (module
    docstring; one copy per constant and layout). :class:`LayoutError` when a changed
    parameter receives something other than a constant."""
    out = dict(base.items())
    out.update(funcs)
    changed: dict[str, list] = {}
    for name, trace in traces.items():
        old, new = base[name], funcs.get(name)
        if new is None or not changes_params(old, new):
            continue
        layouts = param_layouts(old, name, trace)
        if layouts:
            changed[name] = layouts
    if not changed:
        return IRModule(tuple(out.items()))
    done: dict[tuple, X.Constant] = {}
    for caller, f in base.items():
        if not isinstance(f, X.Function):
            continue
        out[caller] = _relay_calls(caller, f, changed, base, done)
    return IRModule(tuple(out.items()))


def _relay_calls(caller: str, f, changed: dict, base: IRModule, done: dict):
    """``f`` with the constants it passes to the functions of ``changed`` re-laid out."""
    if not any(call_tir_callee(b.value) in changed for b in f.bindings()):
        return f
    blocks = []
    for block in f.body.blocks:
        bindings = []
        for b in block.bindings:
            callee = call_tir_callee(b.value)
            if callee in changed:
                args = list(tir_args(b.value))
                for layout in changed[callee]:
                    pos = layout.position
                    arg = args[pos] if pos < len(args) else None
                    if not isinstance(arg, X.Constant):
                        pname = base[callee].buffer_params[pos].name
                        raise LayoutError(
                            f"the schedule of {callee} changes the layout of its parameter "
                            f"{pname}, but {caller} passes it a value computed when the "
                            f"model runs, not a constant weight; only a constant can be "
                            f"stored in another layout (cache_read {pname} and transform "
                            f"the layout of the copy instead)")
                    key = (id(arg.data), tuple(str(x) for x in layout.exprs), layout.shape)
                    if key not in done:
                        try:
                            done[key] = X.Constant.of(relaid(arg.data.array, layout))
                        except ValueError as e:
                            raise LayoutError(f"the schedule of {callee} re-lays out a "
                                              f"constant it is passed: {e}") from None
                    args[pos] = done[key]
                b = b.replace(value=b.value.replace(
                    args=(b.value.args[0], X.Tuple(tuple(args)))))
            bindings.append(b)
        blocks.append(block.replace(bindings=tuple(bindings)))
    return f.replace(body=f.body.replace(blocks=tuple(blocks)))


def pretranspose_weights(mod: IRModule, func_name: str = "main") -> IRModule:
    """``mod`` with every constant weight read as ``W[j, k]`` stored transposed (only the
    first step of the default recipe, :func:`transpose_weight`); the module is returned
    unchanged when there is none."""
    funcs, traces = {}, {}
    for name, f in mod.items():
        if not isinstance(f, PrimFunc):
            continue
        weights = constant_params(mod, name)
        sch = Schedule(IRModule(((name, f),)))
        done = [transpose_weight(sch, name, pos, blk)
                for pos, blk in transposed_weight_params(f).items() if pos in weights]
        if any(done):
            funcs[name], traces[name] = sch.mod[name], sch.trace
    return with_schedules(mod, funcs, traces) if funcs else mod


def _refs(values) -> set[str]:
    out: set[str] = set()
    for v in values:
        if isinstance(v, (list, tuple)):
            out |= _refs(v)
        elif is_ref(v):
            out.add(v)
    return out


def split_layout_steps(func: PrimFunc, name: str, trace
                       ) -> tuple[PrimFunc, Trace, Trace] | None:
    """When ``trace`` begins with steps that only store parameters in another layout (the
    recipe's first steps: ``get_block`` and ``transform_layout`` of a parameter) which
    the rest does not refer to: ``(func`` with its parameters so stored, those steps, the
    rest``)`` — the function as the model stores it and its schedule, for the explorer,
    which keeps a function's parameters as they are; else None."""
    insts = trace.insts
    head = 0
    while head < len(insts) and insts[head].kind in ("GetBlock", "TransformLayout"):
        head += 1
    k = max((n + 1 for n in range(head) if insts[n].kind == "TransformLayout"), default=0)
    if k == 0:
        return None
    steps = trace.truncate(k)
    defined = {o for inst in insts[:k] for o in inst.outputs}
    if any(_refs(inst.inputs) & defined for inst in insts[k:]):
        return None
    if len(param_layouts(func, name, steps)) != sum(i.kind == "TransformLayout"
                                                    for i in insts[:k]):
        return None         # a transform_layout of a buffer the function allocates
    sch = Schedule(IRModule(((name, func),)))
    steps.apply_to_schedule(sch)
    rest = Trace(insts[k:], trace.workload,
                 {n - k: d for n, d in trace._decisions.items() if n >= k})
    return sch.mod[name], steps, rest


def join_layout_steps(steps: Trace, rest: Trace) -> Trace:
    """``steps`` (from :func:`split_layout_steps`) then ``rest`` (a schedule of the
    function they store, from the explorer): one trace of the function as written; the
    handles of ``steps`` renamed apart from those of ``rest``."""
    taken = {o for inst in rest.insts for o in inst.outputs} | _refs(
        v for inst in rest.insts for v in inst.inputs)
    names: dict[str, str] = {}
    for inst in steps.insts:
        for o in inst.outputs:
            new, n = f"{o}_layout", 0
            while new in taken:
                n += 1
                new = f"{o}_layout{n}"
            names[o] = new
            taken.add(new)

    def renamed(values):
        return tuple(renamed(v) if isinstance(v, (list, tuple))
                     else names.get(v, v) if is_ref(v) else v for v in values)

    head = [Instruction(i.kind, renamed(i.inputs), i.attrs, renamed(i.outputs))
            for i in steps.insts]
    k = len(head)
    return Trace(head + list(rest.insts), rest.workload or steps.workload,
                 {n + k: d for n, d in rest._decisions.items()})
