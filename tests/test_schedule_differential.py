"""Differential property tests of split, fuse, reorder, reindex, compute_at and
reverse_compute_at: random small programs, random arguments, legal or not.

A program is 1 to 3 stages (elementwise, transpose-like, a sum of two transposed reads,
an add of the input, a reduction with T.init, a shifted sum of two rows, a flattening
read through // and %, a broadcast, an in-place update of some rows of the input) over
small extents; some loops start at a
non-zero min, some carry annotations, the last stage sometimes has a T.where. A schedule
is a few random steps. After every step:

* accepted: the reference interpreter on the new program gives exactly what it gives on the
  ORIGINAL program (inputs are small integers, so a reordered sum is exact too; the
  outputs' initial contents are random, so a store that goes missing or lands elsewhere
  shows; intermediates start as NaN, so reading one that was not computed shows);
* refused: a :class:`engine.ScheduleError` whose message is a sentence, and the schedule
  unchanged — never another exception.

The programs and cases are this project's; the primitives are those of TVM's
test_tir_schedule_split_fuse.py, test_tir_schedule_reorder.py, test_tir_schedule_reindex.py
and test_tir_schedule_compute_at.py (tests/python/s_tir/schedule/).
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

import engine
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block

# ------------------------------------------------------------------------------ programs
KINDS_2D = ("ew", "tr", "sym", "add", "red", "shift", "flat")


@st.composite
def programs(draw, min_stages: int = 1):
    """TVMScript text of a random program of 1-3 stages (see the module docstring)."""
    m, n = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    if draw(st.booleans()):
        n = m                       # square: transposes and symmetric sums chain on
    a_shape = (m, n)
    shape: tuple = a_shape
    stages, cur = [], "A"
    n_stages = draw(st.integers(min_stages, 3))
    if n_stages > 1 and draw(st.integers(0, 4)) == 0:
        # the first stage updates some rows of the input in place (no T.init)
        rows = draw(st.integers(1, m))
        stages.append({"name": "S0", "kind": "inplace", "src": "A", "dst": "A",
                       "shape": (rows, n), "out_shape": (m, n)})
    for s in range(len(stages), n_stages):
        last = s == n_stages - 1
        out = "Out" if last else f"T{s}"
        if len(shape) == 2:
            kinds = [k for k in KINDS_2D
                     if (k != "sym" or shape[0] == shape[1])
                     and (k != "add" or (shape == a_shape and cur != "A"))
                     and (k != "shift" or shape[0] > 1)]
            kind = draw(st.sampled_from(kinds))
        else:
            kind = draw(st.sampled_from(["ew", "bcast"]))
        stages.append({"name": f"S{s}", "kind": kind, "src": cur, "dst": out,
                       "shape": shape})
        if kind == "tr":
            shape = (shape[1], shape[0])
        elif kind == "red":
            shape = (shape[0],)
        elif kind == "shift":
            shape = (shape[0] - 1, shape[1])
        elif kind == "flat":
            shape = (shape[0] * shape[1],)
        elif kind == "bcast":
            shape = (shape[0], draw(st.integers(1, 5)))
        stages[-1]["out_shape"] = shape
        cur = out
    lines = [f'@T.prim_func\ndef main(A: T.Buffer({a_shape}, "float32"), '
             f'Out: T.Buffer({shape}, "float32")):']
    for st_ in stages[:-1]:
        if st_["kind"] == "inplace":
            continue
        lines.append(f"    {st_['dst']} = T.alloc_buffer({st_['out_shape']})")
    for idx, st_ in enumerate(stages):
        last = idx == len(stages) - 1
        lines += _stage(draw, st_, where=draw(st.booleans()) if last else
                        draw(st.integers(0, 5)) == 0)
    return "\n".join(lines) + "\n"


def _stage(draw, st_, where: bool) -> list:
    kind, src, dst, shape = st_["kind"], st_["src"], st_["dst"], st_["shape"]
    if kind == "red":
        axes = [("i", shape[0], "S"), ("k", shape[1], "R")]
    elif kind == "bcast":
        axes = [("i", shape[0], "S"), ("j", st_["out_shape"][1], "S")]
    elif len(shape) == 2:
        axes = [("i", shape[0], "S"), ("j", shape[1], "S")]
    else:
        axes = [("i", shape[0], "S")]
    if kind == "tr":
        axes = [("i", shape[1], "S"), ("j", shape[0], "S")]
    elif kind == "shift":
        axes = [("i", shape[0] - 1, "S"), ("j", shape[1], "S")]
    elif kind == "flat":
        axes = [("i", shape[0] * shape[1], "S")]
    out, depth = [], 1
    binds = []
    for name, ext, it in axes:
        lo = draw(st.sampled_from([0] * 7 + [2]))
        ann = draw(st.sampled_from([False] * 7 + [True]))
        pad = "    " * depth
        if ann:
            out.append(f"{pad}for {name} in T.serial({lo}, {lo + ext}, "
                       'annotations={"pragma_note": 1}):')
        elif lo:
            out.append(f"{pad}for {name} in T.serial({lo}, {lo + ext}):")
        else:
            out.append(f"{pad}for {name} in range({ext}):")
        kw = "spatial" if it == "S" else "reduce"
        binds.append(f"v{name} = T.axis.{kw}({ext}, {name} - {lo})" if lo else
                     f"v{name} = T.axis.{kw}({ext}, {name})")
        st_.setdefault("mins", {})[name] = lo
        depth += 1
    pad = "    " * depth
    out.append(f'{pad}with T.block("{st_["name"]}"):')
    pad += "    "
    if where:
        names = [a[0] for a in axes]
        mins = st_["mins"]
        if len(names) > 1 and draw(st.booleans()):
            c = draw(st.integers(1, axes[0][1] + axes[1][1]))
            out.append(f"{pad}T.where({names[0]} + {names[1]} < "
                       f"{c + mins[names[0]] + mins[names[1]]})")
        else:
            c = draw(st.integers(1, axes[0][1]))
            out.append(f"{pad}T.where({names[0]} < {c + mins[names[0]]})")
    out += [pad + b for b in binds]
    if kind == "ew":
        idx = "vi, vj" if len(shape) == 2 else "vi"
        out.append(f"{pad}{dst}[{idx}] = {src}[{idx}] * T.float32(2) + T.float32(1)")
    elif kind == "tr":
        out.append(f"{pad}{dst}[vi, vj] = {src}[vj, vi] - T.float32(3)")
    elif kind == "sym":
        out.append(f"{pad}{dst}[vi, vj] = {src}[vi, vj] + {src}[vj, vi] * T.float32(2)")
    elif kind == "add":
        out.append(f"{pad}{dst}[vi, vj] = {src}[vi, vj] + A[vi, vj]")
    elif kind == "bcast":
        out.append(f"{pad}{dst}[vi, vj] = {src}[vi] + T.float32(1)")
    elif kind == "shift":
        out.append(f"{pad}{dst}[vi, vj] = {src}[vi, vj] + {src}[vi + 1, vj]")
    elif kind == "flat":
        n = shape[1]
        out.append(f"{pad}{dst}[vi] = {src}[vi // {n}, vi % {n}] * T.float32(3)")
    elif kind == "inplace":
        out.append(f"{pad}A[vi, vj] = A[vi, vj] * T.float32(2)")
    else:
        out.append(f"{pad}with T.init():")
        out.append(f"{pad}    {dst}[vi] = T.float32(0)")
        out.append(f"{pad}{dst}[vi] = {dst}[vi] + {src}[vi, vk]")
    return out


# ----------------------------------------------------------------------------- checking
def _run(mod, args):
    arrays = [a.copy() for a in args]
    engine.interpret(mod, "main", *arrays)
    return arrays


def _inputs(mod, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, tuple(int(s) for s in p.const_shape())).astype(p.dtype)
            for p in mod["main"].params]


def _blocks(sch) -> list[str]:
    names: list = []

    def fn(x):
        if isinstance(x, Block) and x.name_hint != "root":
            names.append(x.name_hint)
    post_order_visit(sch.mod["main"].body, fn)
    return sorted(set(names))


class Checker:
    """A schedule on a random program and the program's meaning to compare with."""

    def __init__(self, text: str):
        self.orig = engine.parse(text)
        self.args = _inputs(self.orig)
        self.want = _run(self.orig, self.args)
        self.sch = engine.Schedule(self.orig)
        self.accepted = 0

    def step(self, what: str, fn) -> bool:
        sch = self.sch
        before = sch.mod
        try:
            fn()
        except engine.ScheduleError as e:
            msg = str(e)
            assert msg.endswith(".") and " refused" in msg, msg
            assert sch.mod is before, f"{what}: refused but the program changed"
            note(f"{what}: refused: {msg}")
            return False
        note(f"{what}: accepted")
        got = _run(sch.mod, self.args)
        for p, w, g in zip(self.orig["main"].params, self.want, got):
            np.testing.assert_array_equal(
                g, w, err_msg=f"{what} changed {p.name}:\n{sch.mod.script()}")
        self.accepted += 1
        return True


def _loop_choice(data, sch, block):
    loops = sch.get_loops(block)
    return loops, (data.draw(st.sampled_from(loops)) if loops else None)


def do_split(c: Checker, data) -> None:
    sch = c.sch
    b = sch.get_block(data.draw(st.sampled_from(_blocks(sch))))
    loops, loop = _loop_choice(data, sch, b)
    if loop is None:
        return
    n = data.draw(st.integers(2, 3))
    if data.draw(st.integers(0, 4)):           # mostly one factor to infer
        factors = [data.draw(st.integers(1, 6)) for _ in range(n)]
        factors[data.draw(st.integers(0, n - 1))] = None
    else:                                      # anything: several None, 0, too small
        factors = [data.draw(st.one_of(st.none(), st.integers(0, 6))) for _ in range(n)]
    c.step(f"split({sch.get(loop).loop_var.name}, {factors})",
           lambda: sch.split(loop, factors))


def do_fuse(c: Checker, data) -> None:
    sch = c.sch
    b = sch.get_block(data.draw(st.sampled_from(_blocks(sch))))
    loops = sch.get_loops(b)
    if len(loops) < 2:
        return
    if data.draw(st.integers(0, 4)):
        start = data.draw(st.integers(0, len(loops) - 2))
        size = data.draw(st.integers(2, min(3, len(loops) - start)))
        chosen = loops[start:start + size]
    else:
        chosen = data.draw(st.permutations(loops))[:2]
    names = ", ".join(sch.get(lp).loop_var.name for lp in chosen)
    c.step(f"fuse({names})", lambda: sch.fuse(*chosen))


def do_reorder(c: Checker, data) -> None:
    sch = c.sch
    b = sch.get_block(data.draw(st.sampled_from(_blocks(sch))))
    loops = sch.get_loops(b)
    if len(loops) < 2:
        return
    k = data.draw(st.integers(2, min(4, len(loops))))
    chosen = data.draw(st.permutations(loops))[:k]
    if data.draw(st.integers(0, 9)) == 0:      # now and then a loop of another nest
        other = sch.get_block(data.draw(st.sampled_from(_blocks(sch))))
        ol = sch.get_loops(other)
        if ol:
            chosen = chosen[:-1] + [data.draw(st.sampled_from(ol))]
    names = ", ".join(sch.get(lp).loop_var.name for lp in chosen)
    c.step(f"reorder({names})", lambda: sch.reorder(*chosen))


def do_reindex(c: Checker, data) -> None:
    sch = c.sch
    name = data.draw(st.sampled_from(_blocks(sch)))
    b = sch.get_block(name)
    blk = sch.get(b)
    kind = data.draw(st.sampled_from(["read", "write"]))
    n = len(blk.reads if kind == "read" else blk.writes)
    i = data.draw(st.integers(0, max(0, n)))     # n itself: out of range
    c.step(f"reindex({name}, ({kind!r}, {i}))", lambda: sch.reindex(b, (kind, i)))


def do_compute_at(c: Checker, data, reverse: bool) -> None:
    sch = c.sch
    names = _blocks(sch)
    name = data.draw(st.sampled_from(names))
    b = sch.get_block(name)
    others = [x for x in names if x != name]
    # mostly a loop of another block (a consumer's, a producer's, or unrelated)
    other = data.draw(st.sampled_from(others)) if others and data.draw(st.integers(0, 5)) \
        else name
    loops = sch.get_loops(sch.get_block(other))
    if not loops:
        return
    loop = data.draw(st.sampled_from(loops))
    keep = data.draw(st.booleans())
    what = (f"{'reverse_' if reverse else ''}compute_at({name}, "
            f"{sch.get(loop).loop_var.name}, preserve_unit_loops={keep})")
    fn = sch.reverse_compute_at if reverse else sch.compute_at
    c.step(what, lambda: fn(b, loop, preserve_unit_loops=keep))


STEPS = {
    "split": do_split,
    "fuse": do_fuse,
    "reorder": do_reorder,
    "reindex": do_reindex,
    "compute_at": lambda c, d: do_compute_at(c, d, False),
    "reverse_compute_at": lambda c, d: do_compute_at(c, d, True),
}
SETUP = ("split", "fuse", "reorder")


def _scenario(text: str, data, last: str, setup_steps: int = 2) -> Checker:
    note(text)
    c = Checker(text)
    for _ in range(data.draw(st.integers(0, setup_steps))):
        STEPS[data.draw(st.sampled_from(SETUP))](c, data)
    STEPS[last](c, data)
    return c


# -------------------------------------------------------------------------------- tests
@given(text=programs(), data=st.data())
def test_split_keeps_the_program(text, data):
    """Random split factors (None, 0, too small, uneven) after random loop transforms."""
    _scenario(text, data, "split")


@given(text=programs(), data=st.data())
def test_fuse_keeps_the_program(text, data):
    """Random adjacent or scattered loops to fuse, some annotated or not starting at 0."""
    _scenario(text, data, "fuse")


@given(text=programs(), data=st.data())
def test_reorder_keeps_the_program(text, data):
    """Random permutations of a block's loops (and now and then another block's loop),
    after splits and fuses (predicates, div/mod bindings)."""
    _scenario(text, data, "reorder")


@given(text=programs(), data=st.data())
def test_reindex_keeps_the_program(text, data):
    """Random reads and writes to reindex, of every kind of stage (two reads at transposed
    indices, in-place reductions, a T.where), after random loop transforms."""
    _scenario(text, data, "reindex")


@given(text=programs(min_stages=2), data=st.data())
def test_compute_at_keeps_the_program(text, data):
    """Random producer/loop pairs (legal or not) for compute_at."""
    _scenario(text, data, "compute_at", setup_steps=1)


@given(text=programs(min_stages=2), data=st.data())
def test_reverse_compute_at_keeps_the_program(text, data):
    """Random consumer/loop pairs (legal or not) for reverse_compute_at."""
    _scenario(text, data, "reverse_compute_at", setup_steps=1)


@given(text=programs(), data=st.data())
def test_random_schedules_keep_the_program(text, data):
    """Sequences of up to four steps of any of the six primitives."""
    note(text)
    c = Checker(text)
    for _ in range(data.draw(st.integers(1, 4))):
        STEPS[data.draw(st.sampled_from(sorted(STEPS)))](c, data)


def test_the_generator_makes_every_kind_of_program():
    """The strategy reaches each stage kind, T.where, non-zero mins and annotations, and
    the programs run (a property over programs that never exercise a case proves
    nothing)."""
    from hypothesis import find, settings
    for needle in ("[vj, vi]", "T.init()", "T.where(", "T.serial(2,", "annotations=",
                   "+ A[vi, vj]", "[vi] + T.float32(1)", "[vi + 1, vj]", "[vi // ",
                   "A[vi, vj] = A[vi, vj]"):
        text = find(programs(), lambda t, n=needle: n in t,
                    settings=settings(max_examples=2000, database=None))
        Checker(text)
