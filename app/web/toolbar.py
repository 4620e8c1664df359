"""The toolbar's primitives: which ones a selection offers, their inputs, and how a form
becomes schedule calls.

A form always carries the subject's selection id (``sel``, see :mod:`app.web.selection`) and the
primitive name; :func:`apply` resolves the subject the way course code does
(``sch.get_block(name)``, ``sch.get_loops(block)[k]``) so the recorded trace reads like the
course's Python. Malformed inputs raise :class:`InputError` (a refusal with a sentence, the
trace unchanged); the engine's own refusals are ``engine.ScheduleError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import whole_number
from .selection import FuncTree, LoopNode, loops_of_block, names_to_sels, parse_sel, walk_tree


class InputError(ValueError):
    """A toolbar input the app cannot turn into a primitive call."""

    def __init__(self, message: str, highlight: list[str] | None = None):
        super().__init__(message)
        self.highlight = highlight or []


@dataclass
class Arg:
    name: str
    label: str
    kind: str                       # "text" | "select" | "number"
    default: str = ""
    choices: list = field(default_factory=list)    # (value, label)
    help: str = ""


@dataclass
class Prim:
    name: str
    label: str
    doc: str
    args: list = field(default_factory=list)
    disabled: str = ""              # why it cannot be applied here (shown as tooltip)
    note: str = ""                  # a longer explanation shown beside it (bind's refusals)


SCOPES = [("global", "global"), ("local", "local"), ("shared", "shared")]
#: a GPU target's scopes: a block's "shared" memory, a thread's "local" registers, global
GPU_SCOPES = [("shared", "shared (per thread block)"), ("local", "local (per thread)"),
              ("global", "global")]
#: the thread axes a loop may be bound to, in the order the toolbar tries them
BIND_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
             "threadIdx.z", "vthread.x", "vthread.y", "vthread.z")
DTYPES = [(t, t) for t in ("float64", "float32", "float16", "int32", "int64")]
MAX_MAP_TEXT = 400   # characters of an index map typed in the toolbar


def _intrinsics() -> list:
    from engine.schedule.tensor_intrin import builtin_names
    return [(n, n) for n in builtin_names()]


_INTRINS = _intrinsics()


def loop_prims(tree: FuncTree, loop: LoopNode) -> list[Prim]:
    chain = loops_of_block(tree, loop.block) if loop.block else []
    order_default = ", ".join(l.name for l in chain)
    inner = [c for c in loop.children]
    fuse_reason = ""
    if not (len(inner) == 1 and isinstance(inner[0], LoopNode)):
        fuse_reason = "fuse needs a loop whose body is exactly one loop"
    others = [n for n in walk_tree(tree.roots) if n.is_loop and n.sel and n.block != loop.block]
    merge_choices = [(n.sel, f"{n.name} (above {n.block})") for n in others]
    prims = [
        Prim("split", "split", "Split the loop into nested loops of the given extents "
             "(one factor may be None: inferred).",
             [Arg("factors", "factors", "text", "None, 4",
                  help="comma-separated extents, outer first; one may be None")]),
        Prim("reorder", "reorder", "Reorder the loops above this block into the given order.",
             [Arg("order", "new order", "text", order_default,
                  help="loop names, outermost first")]),
        Prim("fuse", "fuse with inner", "Fuse this loop with the loop directly inside it.",
             disabled=fuse_reason),
        Prim("parallel", "parallel", "Run the iterations of this loop on several threads."),
        Prim("vectorize", "vectorize", "Turn this loop into SIMD vector instructions."),
        Prim("unroll", "unroll", "Unroll this loop completely."),
        Prim("rfactor", "rfactor", "Factor a reduction over this loop into a new block.",
             [Arg("factor_axis", "factor axis", "number", "0")]),
        Prim("add_unit_loop", "add unit loop", "Put a new loop of extent 1 around this loop."),
        Prim("blockize", "blockize", "Turn the loops from here down, and the block inside, "
             "into one outer block (a tile)."),
        Prim("tensorize", "tensorize", "Blockize the loops from here down and replace the tile "
             "by a tensor intrinsic's vector micro-kernel.",
             [Arg("intrin", "intrinsic", "select", _INTRINS[0][0], choices=_INTRINS)]),
        Prim("loop_partition", "loop_partition", "Cut the loop into consecutive ranges of the "
             "given lengths, each with its own copy of the body (one length may be None: the "
             "rest; without None a last range takes the rest).",
             [Arg("factors", "lengths", "text", "None, 4",
                  help="comma-separated range lengths, in order; one may be None")]),
        Prim("merge", "merge with", "Merge this loop's nest with a nest of the same shape "
             "above another block: both bodies run in one loop nest.",
             [Arg("loop", "other loop", "select", choices=merge_choices)],
             disabled="" if merge_choices else "no loop of another block to merge with"),
    ]
    return prims


def bind_prim(loop: LoopNode, trial) -> Prim:
    """``bind`` for a loop of a GPU session: the thread axes ``trial(axis)`` accepts
    (None: legal; else the refusal's sentence — bind tried on a copy of the schedule) are
    offered, the others listed with their reasons. The default is ``blockIdx.x`` when it is
    legal, else ``threadIdx.x`` (under a loop bound to blockIdx.x)."""
    legal, refused = [], []
    for axis in BIND_AXES:
        why = trial(axis)
        if why is None:
            legal.append(axis)
        else:
            refused.append((axis, why))
    default = next((a for a in ("blockIdx.x", "threadIdx.x") if a in legal),
                   legal[0] if legal else "")
    note = "; ".join(f"{a}: {why}" for a, why in refused)
    return Prim("bind", "bind", "Bind this loop to a GPU thread axis: its iterations run as "
                "the thread blocks of the grid (blockIdx), the threads of a block "
                "(threadIdx) or virtual threads (vthread).",
                [Arg("thread_axis", "thread axis", "select", default,
                     choices=[(a, a) for a in legal])],
                disabled="" if legal else f"no thread axis is legal for {loop.name} here",
                note=f"Not offered here — {note}" if note else "")


def block_prims(tree: FuncTree, block_name: str, gpu: bool = False) -> list[Prim]:
    node = tree.by_sel.get(f"B/{tree.func_name}/{block_name}")
    own = loops_of_block(tree, block_name)
    own_ids = {id(l) for l in own}
    others = [n for n in walk_tree(tree.roots) if n.is_loop and n.sel and id(n) not in own_ids]
    target_choices = [(n.sel, f"{n.name} (above {n.block})") for n in others]
    own_choices = [(l.sel or "", l.name) for l in own if l.sel]
    # decompose_reduction is usually wanted above the first reduction loop (the course's k)
    red_vars = node.reduce_loop_vars if node else ()
    first_red = next((l.sel for l in own if l.sel and any(l.node.loop_var is v for v in red_vars)),
                     own_choices[0][0] if own_choices else "")
    reads = [(str(i), b) for i, b in enumerate(node.reads)] if node else []
    writes = [(str(i), b) for i, b in enumerate(node.writes)] if node else []
    no_target = "" if target_choices else "no loop of another block to move under"
    n_axes = len(node.iter_kinds) if node else 0
    axes = [iv.var.name for iv in node.node.iter_vars] if node else []
    swap = f"lambda {', '.join(axes)}: ({', '.join(axes[::-1])}{',' if n_axes == 1 else ''})"
    either = [("r" + v, f"read {b}") for v, b in reads] + [("w" + v, f"write {b}")
                                                            for v, b in writes]
    no_axes = "" if n_axes else "this block has no axes"
    return [
        Prim("compute_at", "compute_at", "Move this (producer) block under a loop of its consumer.",
             [Arg("loop", "under loop", "select", choices=target_choices)], disabled=no_target),
        Prim("reverse_compute_at", "reverse_compute_at",
             "Move this (consumer) block under a loop of its producer.",
             [Arg("loop", "under loop", "select", choices=target_choices)], disabled=no_target),
        Prim("compute_inline", "compute_inline", "Inline this block into its consumers."),
        Prim("reverse_compute_inline", "reverse_compute_inline",
             "Inline this block into its producer."),
        Prim("decompose_reduction", "decompose_reduction",
             "Separate the reduction's initialisation into its own block, above the given loop.",
             [Arg("loop", "init above loop", "select", first_red, choices=own_choices)],
             disabled="" if own_choices else "this block has no loops"),
        Prim("cache_read", "cache_read", "Copy a buffer this block reads into a new buffer first.",
             [Arg("buffer", "read buffer", "select", choices=reads),
              Arg("scope", "scope", "select", "shared" if gpu else "local",
                  choices=GPU_SCOPES if gpu else SCOPES)],
             disabled="" if reads else "this block reads no buffer"),
        Prim("cache_write", "cache_write", "Write the result into a new buffer, copied out after.",
             [Arg("buffer", "write buffer", "select", choices=writes),
              Arg("scope", "scope", "select", "local", choices=GPU_SCOPES if gpu else SCOPES)],
             disabled="" if writes else "this block writes no buffer"),
        *([Prim("set_scope", "set_scope", "Place an intermediate buffer this block writes in "
                "another memory: a thread block's shared memory or a thread's local "
                "registers.",
                [Arg("buffer", "write buffer", "select", choices=writes),
                  Arg("scope", "scope", "select", "shared", choices=GPU_SCOPES)],
                disabled="" if writes else "this block writes no buffer")] if gpu else []),
        Prim("pad_einsum", "pad_einsum", "Round each axis of this Einsum block up to a multiple "
             "of its factor, through zero-padded copies of its buffers.",
             [Arg("padding", "padding", "text", ", ".join(["16"] * n_axes),
                  help="one factor per block axis, e.g. 16, 16, 1")],
             disabled="" if n_axes else "this block has no axes"),
        Prim("reindex", "reindex", "Put a buffer this block accesses behind a copy indexed by "
             "the block's own axes.",
             [Arg("buffer", "buffer", "select", choices=[("r" + v, f"read {b}") for v, b in reads]
                  + [("w" + v, f"write {b}") for v, b in writes])],
             disabled="" if reads or writes else "this block accesses no buffer"),
        Prim("cache_inplace", "cache_inplace", "Copy a buffer this block updates in place into "
             "a cache before it and back after it.",
             [Arg("buffer", "read buffer", "select", choices=reads),
              Arg("scope", "scope", "select", "local", choices=SCOPES)],
             disabled="" if reads else "this block reads no buffer"),
        Prim("cache_index", "cache_index", "Precompute this block's index arithmetic "
             "(A[vi * 4 + vj]) into int32 buffers written by new blocks before it.",
             [Arg("scope", "scope", "select", "global", choices=SCOPES),
              Arg("cse_thresh", "repeats", "number", "0",
                  help="0 caches every index computation; n only those met n times")]),
        Prim("rolling_buffer", "rolling_buffer", "Keep only the sliding window of the buffer this "
             "block writes, as a ring (after compute_at into a tiled consumer).",
             [Arg("buffer", "write buffer", "select", choices=writes)],
             disabled="" if writes else "this block writes no buffer"),
        Prim("decompose_padding", "decompose_padding", "Split this padding block into a block "
             "filling the pad value and a block writing the in-bound values.",
             [Arg("loop", "fill above loop", "select", own_choices[0][0] if own_choices else "",
                  choices=own_choices)], disabled="" if own_choices else "this block has no loops"),
        Prim("tensorize", "tensorize", "Replace this block (a tile made by blockize) by a "
             "tensor intrinsic's vector micro-kernel.",
             [Arg("intrin", "intrinsic", "select", _INTRINS[0][0], choices=_INTRINS)]),
        Prim("transform_block_layout", "transform_block_layout", "Remap this block's "
             "iteration space (its axes become the map's results) and rebuild its loops.",
             [Arg("index_map", "index map", "text", swap, help="a lambda of the block's axes: "
                  "a permutation, split (// %) or fuse (a * n + b)")], disabled=no_axes),
        Prim("reorder_block_iter_var", "reorder_block_iter_var", "Reorder this block's axes "
             "(its bindings follow).",
             [Arg("order", "new order", "text", ", ".join(str(k) for k in
                                                          reversed(range(n_axes))),
                  help="axis positions, new first; each once")],
             disabled="" if n_axes > 1 else "the block has fewer than two axes"),
        Prim("annotate_buffer_access", "annotate_buffer_access", "Declare the region this "
             "block reads or writes of a buffer (later compute_at and caches use it).",
             [Arg("buffer", "buffer", "select", choices=either),
              Arg("index_map", "ranges", "text", _region_default(node, axes),
                  help="a lambda of the block's axes giving (begin, end) or one index per "
                  "buffer dimension")], disabled="" if either and n_axes else
             "this block accesses no buffer"),
        Prim("unsafe_set_dtype", "unsafe_set_dtype", "Change the element type of an "
             "intermediate buffer this block writes (values cast on store and load).",
             [Arg("buffer", "write buffer", "select", choices=writes),
              Arg("dtype", "type", "select", "float64", choices=DTYPES)],
             disabled="" if writes else "this block writes no buffer"),
        Prim("reindex_cache_read", "reindex_cache_read", "Copy a buffer this block reads into "
             "a cache laid out by an index map of the block's axes.",
             [Arg("buffer", "read buffer", "select", choices=reads),
              Arg("scope", "scope", "select", "local", choices=SCOPES),
              Arg("index_map", "index map", "text", swap, help="a lambda of the block's axes")],
             disabled="" if reads and n_axes else "this block reads no buffer"),
        Prim("reindex_cache_write", "reindex_cache_write", "Write this block's result into a "
             "cache laid out by an index map of the block's axes, copied out after.",
             [Arg("buffer", "write buffer", "select", choices=writes),
              Arg("scope", "scope", "select", "local", choices=SCOPES),
              Arg("index_map", "index map", "text", swap, help="a lambda of the block's axes")],
             disabled="" if writes and n_axes else "this block writes no buffer"),
    ]


#: primitives that only mean something on the CPU (not offered, and refused, on a GPU target)
CPU_ONLY_PRIMS = {"parallel"}
ALL_PRIMS = {"split", "reorder", "fuse", "parallel", "vectorize", "unroll", "rfactor",
             "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
             "decompose_reduction", "cache_read", "cache_write", "pad_einsum", "decompose_padding",
             "reindex", "cache_inplace", "cache_index", "rolling_buffer", "add_unit_loop", "blockize",
             "tensorize", "loop_partition", "merge", "transform_block_layout",
             "reorder_block_iter_var", "annotate_buffer_access", "unsafe_set_dtype",
             "reindex_cache_read", "reindex_cache_write", "bind", "set_scope"}
#: the primitives only a GPU session offers (and applies)
GPU_PRIMS = {"bind", "set_scope"}
# form fields of the toolbar that are not workload parameters
FORM_FIELDS = frozenset({"sel", "primitive", "factors", "order", "factor_axis", "loop", "buffer",
                         "scope", "padding", "intrin", "index_map", "dtype",
                         "cse_thresh", "thread_axis"})
LOOP_PRIMS = {"split", "reorder", "fuse", "parallel", "vectorize", "unroll", "rfactor",
              "add_unit_loop", "blockize", "tensorize", "loop_partition", "merge", "bind"}


# ---------------------------------------------------------------------------- parsing inputs
def parse_factors(text: str) -> list:
    if not text or not text.strip():
        raise InputError("split needs factors, e.g. “None, 4”.")
    out: list = []
    for tok in text.replace("[", "").replace("]", "").split(","):
        tok = tok.strip()
        if tok.lower() in ("none", "_", "?", ""):
            out.append(None)
            continue
        v = whole_number(tok)
        if v is None:
            raise InputError(f"split factor “{tok[:20]}” is not a whole number or None; "
                             "write factors like “None, 4”.")
        out.append(v)
    if len(out) < 2:
        raise InputError("split needs at least two factors (outer and inner), e.g. “None, 4”.")
    if len(out) > 8:
        raise InputError("split takes at most 8 factors.")
    return out


def parse_padding(text: str) -> list[int]:
    """``"16, 16, 1"`` -> [16, 16, 1]: pad_einsum's factors, one per block axis."""
    toks = [t.strip() for t in str(text).replace("[", "").replace("]", "").split(",")]
    if not any(toks):
        raise InputError("pad_einsum needs one factor per block axis, e.g. “16, 16, 1”.")
    if len(toks) > 16:
        raise InputError("pad_einsum takes at most 16 factors.")
    out = []
    for tok in toks:
        v = whole_number(tok)
        if v is None or not 1 <= v <= 4096:
            raise InputError(f"padding factor “{tok[:20]}” is not a whole number from 1 to "
                             "4096; write factors like “16, 16, 1”.")
        out.append(v)
    return out


def parse_lengths(text: str) -> list:
    """``"None, 4"`` -> [None, 4]: loop_partition's range lengths (one or more)."""
    out: list = []
    for tok in str(text).replace("[", "").replace("]", "").split(","):
        tok = tok.strip()
        if tok.lower() in ("none", "_", "?"):
            out.append(None)
            continue
        v = whole_number(tok)
        if v is None:
            raise InputError(f"loop_partition length “{tok[:20]}” is not a whole number or "
                             "None; write lengths like “None, 4”.")
        out.append(v)
    if len(out) > 8:
        raise InputError("loop_partition takes at most 8 lengths.")
    return out


def parse_positions(text: str) -> list[int]:
    """``"2, 0, 1"`` -> [2, 0, 1]: reorder_block_iter_var's new order."""
    toks = [t.strip() for t in str(text).replace("[", "").replace("]", "").split(",")]
    if len(toks) > 16:
        raise InputError("a block has at most 16 axes to reorder.")
    return [_int(t, "an axis position") for t in toks]


def index_map_text(form, what: str) -> str:
    """The index map typed in the toolbar: bounded, and parsed by the engine's parser (only
    a lambda of integers, its parameters and ``+ - * // %``; never evaluated)."""
    from engine.schedule.primitives.buffer_access import parse_ranges
    from engine.schedule.primitives.index_map_check import IndexMapError
    from engine.schedule.primitives.layout import parse_index_map
    text = str(form.get("index_map", "")).strip()
    if not text:
        raise InputError(f"{what} needs an index map, e.g. “lambda i, j: (j, i)”.")
    if len(text) > MAX_MAP_TEXT:
        raise InputError(f"The index map is too long ({len(text)} characters; at most "
                         f"{MAX_MAP_TEXT}).")
    try:
        (parse_ranges if what == "annotate_buffer_access" else parse_index_map)(text)
    except IndexMapError as e:
        raise InputError(f"{what}: {e}") from None
    except (RecursionError, MemoryError):
        raise InputError(f"{what}: the index map is nested too deeply.") from None
    return text


def _int(text: str, what: str) -> int:
    v = whole_number(text)
    if v is None:
        raise InputError(f"{what} must be a whole number (digits 0-9), got “{str(text)[:20]}”.")
    return v


# ---------------------------------------------------------------------------- applying
def _block(sch, parsed: dict):
    return sch.get_block(parsed["block"], func_name=parsed["func"])


def _loop(sch, parsed: dict, sel: str):
    loops = sch.get_loops(_block(sch, parsed))
    if parsed["index"] >= len(loops):
        raise InputError("The selected loop no longer exists; select it again.", [sel])
    return loops[parsed["index"]]


def _intrin(form) -> str:
    name = form.get("intrin", "")
    if name not in dict(_INTRINS):
        raise InputError(f"Unknown tensor intrinsic “{str(name)[:40]}”; choose one of "
                         f"{', '.join(n for n, _ in _INTRINS)}.")
    return name


def _sel(form, key: str, kind: str) -> dict:
    raw = form.get(key, "")
    parsed = parse_sel(raw)
    if parsed is None or parsed["kind"] != kind:
        what = "a loop" if kind == "loop" else "a block"
        raise InputError(f"Select {what} first (click it in the program or the diagram).")
    return parsed


def apply(sch, tree: FuncTree, form, gpu: bool = False) -> str:
    """Apply the primitive described by ``form`` to ``sch``; returns a one-line summary.
    ``gpu``: the session targets a GPU (``bind`` and ``set_scope`` are refused otherwise,
    and the GPU's scopes are accepted)."""
    prim = form.get("primitive", "")
    if prim not in ALL_PRIMS:
        raise InputError(f"Unknown primitive “{prim[:40]}”.")
    if prim in GPU_PRIMS and not gpu:
        raise InputError(f"{prim} places work or data on a GPU: switch the target to a GPU "
                         "first (the target menu above the program).")
    if prim in CPU_ONLY_PRIMS and gpu:
        raise InputError(f"{prim} runs a loop on the CPU's threads; on a GPU, bind the loop "
                         "to a thread axis instead (or switch the target to the CPU).")
    sel = form.get("sel", "")
    kind = "loop" if prim in LOOP_PRIMS else "block"
    if prim == "tensorize" and str(sel).startswith("B/"):   # a loop or a block
        kind = "block"
    subj = _sel(form, "sel", kind)
    if subj["func"] != tree.func_name:
        raise InputError(f"The selection belongs to function {subj['func']}, not {tree.func_name}.")
    node = tree.by_sel.get(sel)
    if node is None:
        raise InputError("The selected loop or block is not in the current program; select again.")
    name = node.name

    if prim == "split":
        factors = parse_factors(form.get("factors", ""))
        sch.split(_loop(sch, subj, sel), factors=factors)
        return f"split {name} by {factors}"
    if prim == "reorder":
        chain = loops_of_block(tree, subj["block"])
        names = [t.strip() for t in form.get("order", "").split(",") if t.strip()]
        if len(names) < 2:
            raise InputError("reorder needs at least two loop names, e.g. “j_0, k, j_1”.")
        by_name: dict[str, list[int]] = {}
        for i, l in enumerate(chain):
            by_name.setdefault(l.name, []).append(i)
        idxs = []
        for n in names:
            if n not in by_name:
                have = ", ".join(l.name for l in chain)
                raise InputError(f"There is no loop “{n[:30]}” above block {subj['block']} "
                                 f"(its loops are: {have}).", [sel])
            if len(by_name[n]) > 1:
                raise InputError(f"Two loops above block {subj['block']} are called “{n}”; "
                                 "rename is not possible here, so reorder cannot tell them apart.")
            idxs.append(by_name[n][0])
        loops = sch.get_loops(_block(sch, subj))
        sch.reorder(*[loops[i] for i in idxs])
        return f"reorder {', '.join(names)}"
    if prim == "fuse":
        inner = node.children[0] if len(node.children) == 1 and node.children[0].is_loop else None
        if inner is None:
            raise InputError(f"fuse: loop {name} has no single inner loop to fuse with.", [sel])
        loops = sch.get_loops(_block(sch, subj))
        sch.fuse(loops[subj["index"]], loops[subj["index"] + 1])
        return f"fuse {name} with {inner.name}"
    if prim in ("parallel", "vectorize", "unroll"):
        getattr(sch, prim)(_loop(sch, subj, sel))
        return f"{prim} {name}"
    if prim in ("add_unit_loop", "blockize"):
        getattr(sch, prim)(_loop(sch, subj, sel))
        return f"{prim} {name}"
    if prim == "tensorize" and kind == "loop":
        sch.tensorize(_loop(sch, subj, sel), _intrin(form))
        return f"tensorize {name} with {form.get('intrin')}"
    if prim == "loop_partition":
        lengths = parse_lengths(form.get("factors", ""))
        sch.loop_partition(_loop(sch, subj, sel), factors=lengths)
        return f"loop_partition {name} into {lengths}"
    if prim == "merge":
        target = _sel(form, "loop", "loop")
        tnode = tree.by_sel.get(form.get("loop", ""))
        sch.merge(_loop(sch, subj, sel), _loop(sch, target, form.get("loop", "")))
        return f"merge {name} with {tnode.name if tnode else 'loop'}"
    if prim == "bind":
        axis = form.get("thread_axis", "")
        if axis not in BIND_AXES:
            raise InputError(f"Unknown thread axis “{str(axis)[:20]}”; use one of "
                             f"{', '.join(BIND_AXES)}.", [sel])
        sch.bind(_loop(sch, subj, sel), axis)
        return f"bind {name} to {axis}"
    if prim == "rfactor":
        axis = _int(form.get("factor_axis", "0"), "factor axis")
        sch.rfactor(_loop(sch, subj, sel), factor_axis=axis)
        return f"rfactor {name}"
    block = _block(sch, subj)
    if prim in ("compute_at", "reverse_compute_at"):
        target = _sel(form, "loop", "loop")
        tnode = tree.by_sel.get(form.get("loop", ""))
        getattr(sch, prim)(block, _loop(sch, target, form.get("loop", "")))
        return f"{prim} {name} under {tnode.name if tnode else 'loop'}"
    if prim in ("compute_inline", "reverse_compute_inline"):
        getattr(sch, prim)(block)
        return f"{prim} {name}"
    if prim == "decompose_reduction":
        target = _sel(form, "loop", "loop")
        tnode = tree.by_sel.get(form.get("loop", ""))
        sch.decompose_reduction(block, _loop(sch, target, form.get("loop", "")))
        return f"decompose_reduction {name} above {tnode.name if tnode else 'loop'}"
    if prim == "decompose_padding":
        target = _sel(form, "loop", "loop")
        tnode = tree.by_sel.get(form.get("loop", ""))
        sch.decompose_padding(block, _loop(sch, target, form.get("loop", "")))
        return f"decompose_padding {name} above {tnode.name if tnode else 'loop'}"
    if prim == "reindex":
        raw = form.get("buffer", "")
        kind = {"r": "read", "w": "write"}.get(raw[:1])
        if kind is None:
            raise InputError("reindex: choose a buffer the block reads or writes.")
        idx = _int(raw[1:], "buffer index")
        sch.reindex(block, (kind, idx))
        return f"reindex {name} {kind} buffer #{idx}"
    if prim == "cache_index":
        scope = form.get("scope", "global")
        if scope not in dict(SCOPES):
            raise InputError(f"Unknown storage scope “{scope[:20]}”; use global, local or shared.")
        thresh = _int(form.get("cse_thresh", "0") or "0", "repeats")
        stages = sch.cache_index(block, scope, thresh)
        return f"cache_index {name} ({len(stages)} index buffers, {scope})"
    if prim in ("cache_inplace", "rolling_buffer"):
        idx = _int(form.get("buffer", "0"), "buffer index")
        if prim == "rolling_buffer":
            sch.rolling_buffer(block, idx)
            return f"rolling_buffer {name} buffer #{idx}"
        scope = form.get("scope", "local")
        if scope not in dict(SCOPES):
            raise InputError(f"Unknown storage scope “{scope[:20]}”; use global, local or shared.")
        sch.cache_inplace(block, idx, scope)
        return f"cache_inplace {name} buffer #{idx} ({scope})"
    if prim == "pad_einsum":
        padding = parse_padding(form.get("padding", ""))
        sch.pad_einsum(block, padding)
        return f"pad_einsum {name} by {padding}"
    if prim in ("transform_block_layout", "reorder_block_iter_var", "annotate_buffer_access",
                "unsafe_set_dtype", "reindex_cache_read", "reindex_cache_write"):
        return _apply_block_layout(sch, block, name, prim, form)
    if prim == "tensorize":
        sch.tensorize(block, _intrin(form))
        return f"tensorize {name} with {form.get('intrin')}"
    if prim == "set_scope":
        idx = _int(form.get("buffer", "0"), "buffer index")
        scope = form.get("scope", "shared")
        if scope not in dict(GPU_SCOPES):
            raise InputError(f"Unknown storage scope “{scope[:20]}”; use shared, local or "
                             "global.")
        sch.set_scope(block, idx, scope)
        return f"set_scope {name} buffer #{idx} ({scope})"
    if prim in ("cache_read", "cache_write"):
        idx = _int(form.get("buffer", "0"), "buffer index")
        scope = form.get("scope", "local")
        if scope not in dict(SCOPES):
            raise InputError(f"Unknown storage scope “{scope[:20]}”; use global, local or shared.")
        getattr(sch, prim)(block, idx, scope)
        return f"{prim} {name} buffer #{idx} ({scope})"
    raise InputError(f"Unknown primitive “{prim}”.")  # pragma: no cover - ALL_PRIMS guards


def _region_default(node, axes: list) -> str:
    """The block's own region of its first accessed buffer, as annotate_buffer_access's
    ranges (a valid starting point to edit)."""
    from engine.ir.expr import Add
    from engine.schedule.primitives.buffer_access import ranges_text
    regions = [*node.node.reads, *node.node.writes] if node else []
    if not regions or not axes:
        return ""
    from engine.arith import simplify
    pairs = [(r.min, simplify(Add(r.min, r.extent))) for r in regions[0].region]
    try:
        return ranges_text([iv.var for iv in node.node.iter_vars], pairs)
    except ValueError:   # an expression the index-map syntax cannot write
        return f"lambda {', '.join(axes)}: [...]"


def _apply_block_layout(sch, block, name: str, prim: str, form) -> str:
    """The block primitives that take an index map, a type or an axis order."""
    if prim == "transform_block_layout":
        text = index_map_text(form, prim)
        sch.transform_block_layout(block, text)
        return f"transform_block_layout {name} by {text}"
    if prim == "reorder_block_iter_var":
        order = parse_positions(form.get("order", ""))
        sch.reorder_block_iter_var(block, order)
        return f"reorder_block_iter_var {name} to {order}"
    if prim == "annotate_buffer_access":
        raw = form.get("buffer", "")
        kind = {"r": "read", "w": "write"}.get(raw[:1])
        if kind is None:
            raise InputError("annotate_buffer_access: choose a buffer the block reads or writes.")
        idx = _int(raw[1:], "buffer index")
        sch.annotate_buffer_access(block, idx, kind, index_map_text(form, prim))
        return f"annotate_buffer_access {name} {kind} buffer #{idx}"
    idx = _int(form.get("buffer", "0"), "buffer index")
    if prim == "unsafe_set_dtype":
        dtype = form.get("dtype", "")
        if dtype not in dict(DTYPES):
            raise InputError(f"Unknown type “{str(dtype)[:20]}”; use one of "
                             f"{', '.join(t for t, _ in DTYPES)}.")
        sch.unsafe_set_dtype(block, idx, dtype)
        return f"unsafe_set_dtype {name} buffer #{idx} to {dtype}"
    scope = form.get("scope", "local")
    if scope not in dict(SCOPES):
        raise InputError(f"Unknown storage scope “{scope[:20]}”; use global, local or shared.")
    text = index_map_text(form, prim)
    getattr(sch, prim)(block, idx, scope, text)
    return f"{prim} {name} buffer #{idx} ({scope}) by {text}"


# ---------------------------------------------------------------------------- the pane
def context(trees: list[FuncTree], sel: str | None, bind_trial=None) -> dict:
    """The toolbar pane for a selection id: the primitives it offers, with their inputs.

    ``bind_trial``: for a GPU session, ``bind_trial(sel, axis)`` -> None when binding the
    selected loop to ``axis`` is legal, else the refusal's sentence (tried on a copy of the
    schedule, :func:`bind_trial_of`); without it (a CPU session) ``bind`` is not offered."""
    parsed = parse_sel(sel) if sel else None
    tree = next((t for t in trees if parsed and t.func_name == parsed["func"]), None)
    node = tree.by_sel.get(sel) if tree is not None else None
    if node is None:
        return {"sel": None, "node": None, "prims": [], "kind": None, "stale": bool(sel)}
    gpu = bind_trial is not None
    if node.is_loop:
        prims = loop_prims(tree, node)
        if gpu:   # CPU threads mean nothing in a kernel (vectorize stays: vector loads)
            prims = [p for p in prims if p.name not in CPU_ONLY_PRIMS]
            prims.insert(1, bind_prim(node, lambda axis: bind_trial(sel, axis)))
        desc = f"loop {node.name} (extent {node.extent_text}, {node.kind})"
    else:
        prims = block_prims(tree, node.name, gpu=gpu)
        desc = f"block {node.name}"
    return {"sel": sel, "node": node, "prims": prims, "kind": "loop" if node.is_loop else "block",
            "desc": desc, "stale": False}


def bind_trial_of(schedule_of, bounded):
    """``trial(sel, axis)`` for :func:`context`: bind the loop ``sel`` to ``axis`` on a
    duplicate of the state's schedule (``schedule_of()``, fetched once) within the
    request's work budget (``bounded()``, a context); None when the engine accepts it, else
    its refusal's rule. Trials past the budget are reported as not tried."""
    from engine.schedule import ScheduleError
    got: dict = {}

    def trial(sel: str, axis: str) -> str | None:
        if got.get("over"):
            return "not tried (the request's work budget is spent)"
        try:
            with bounded():
                if "sch" not in got:
                    got["sch"] = schedule_of()
                sch = got["sch"].duplicate()
                parsed = parse_sel(sel)
                if parsed is None or parsed["kind"] != "loop":
                    return "select a loop"
                sch.bind(_loop(sch, parsed, sel), axis)
        except ScheduleError as e:
            return e.rule
        except InputError as e:
            return str(e)
        except Exception as e:  # noqa: BLE001 - over the budget, or an engine bug: not offered
            got["over"] = True
            return f"not tried ({type(e).__name__})"
        return None
    return trial


def refusal_highlight(exc, trees: list[FuncTree]) -> list[str]:
    """The selection ids a ``ScheduleError`` points at (its IR nodes and names)."""
    sels: list[str] = []
    for node in exc.nodes:
        for t in trees:
            e = t.by_node.get(id(node))
            if e is not None and e.sel and e.sel not in sels:
                sels.append(e.sel)
    for s in names_to_sels(trees, exc.highlight):
        if s not in sels:
            sels.append(s)
    return sels
