"""Search spaces: what the tuner draws candidates from.

A space is applied to a fresh, seeded schedule of the program (after the fixed prefix) and
makes its choices with the sampling primitives (``sample_perfect_tile``,
``sample_categorical``, ``sample_compute_location``); the resulting trace, with its
decisions, is one candidate. Three kinds:

* :class:`FunctionSpace` — a Python function over a schedule, the course's style::

      def stochastic_schedule_mm(sch):
          block_Y = sch.get_block("Y", "mm_relu")
          i, j, k = sch.get_loops(block_Y)
          j_factors = sch.sample_perfect_tile(j, n=2)
          j_0, j_1 = sch.split(j, factors=j_factors)
          sch.reorder(i, j_0, k, j_1)
          sch.decompose_reduction(block_Y, k)

* :class:`DirectiveSpace` — a list of clicks from the explorer ("sample this loop's
  split factors", "sample this block's compute location"), plain data, so a measuring
  process can rebuild it;
* ``"auto"`` — :class:`AutoSpace`, design-space rules like MetaSchedule's for CPU
  (:mod:`.auto`).

:func:`space_of` turns what ``tune(space=...)`` was given into a space; :func:`load_space_file`
reads a space function from a Python file (the command line's ``--space FILE.py``).
"""
from __future__ import annotations

import hashlib
import inspect
import json
import runpy
from typing import Any, Callable

from engine.ir.stmt import Block, BlockRealize, For
from engine.schedule import Schedule

from .task import TuneError

__all__ = ["Space", "FunctionSpace", "DirectiveSpace", "AutoSpace", "AutoGpuSpace", "space_of",
           "load_space_file", "DIRECTIVE_KINDS"]


class Space:
    """A search space: ``apply(sch)`` makes one random candidate on ``sch``."""

    id = "space"
    description = "a search space"

    def apply(self, sch: Schedule) -> None:
        raise NotImplementedError

    def portable(self) -> bool:
        """Whether another Python process can rebuild this space from its pickle (a
        runner's workers then draw fresh samples too)."""
        return True


class FunctionSpace(Space):
    """A Python function ``fn(sch)`` that samples and schedules (its return value is
    ignored). Its identity (for the database) is its name and source text."""

    def __init__(self, fn: Callable[[Schedule], Any]):
        if not callable(fn):
            raise TuneError(f"a search space must be a function of a schedule or 'auto', got "
                            f"{type(fn).__name__}")
        self.fn = fn
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", "space"))
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = name
        self.id = f"fn:{name}:{hashlib.sha256(source.encode()).hexdigest()[:16]}"
        self.description = f"the function {name}"

    def apply(self, sch: Schedule) -> None:
        self.fn(sch)

    def portable(self) -> bool:
        """A function another process can import by name: not ``__main__``'s (the
        worker's ``__main__`` is another program), not a local function or a lambda."""
        module = getattr(self.fn, "__module__", None)
        name = getattr(self.fn, "__qualname__", "")
        return bool(module) and module != "__main__" and "<" not in name


#: the explorer's clicks: what each directive does
DIRECTIVE_KINDS = {
    "sample_split": "split a loop into n factors drawn by sample_perfect_tile",
    "sample_compute_location": "move a block to a location drawn by sample_compute_location",
}


class DirectiveSpace(Space):
    """A space built by clicking: ``[{"kind": "sample_split", "loop": "j", "block": "Y",
    "n": 2, "max_innermost_factor": 16}, {"kind": "sample_compute_location", "block": "C"}]``
    applied in order to the program after the prefix (loops and blocks named as the
    program shows them; a split's ``block``, optional, says which block's loop is meant
    when two loops share a name — mm_relu has an ``i`` above Y and another above C)."""

    def __init__(self, directives: list[dict]):
        self.directives = [check_directive(d) for d in directives]
        if not self.directives:
            raise TuneError("the search space has no choices yet: add 'sample this split's "
                            "factors' on a loop or 'sample compute location' on a block")
        text = json.dumps(self.directives, sort_keys=True)
        self.id = "clicks:" + hashlib.sha256(text.encode()).hexdigest()[:16]
        self.description = "; ".join(describe_directive(d) for d in self.directives)

    def apply(self, sch: Schedule) -> None:
        for d in self.directives:
            if d["kind"] == "sample_split":
                loop = (_loop_of_block(sch, d["loop"], d["block"]) if d.get("block")
                        else _loop_by_name(sch, d["loop"]))
                factors = sch.sample_perfect_tile(loop, n=d["n"],
                                                  max_innermost_factor=d["max_innermost_factor"])
                sch.split(loop, factors=factors)
            else:
                block = sch.get_block(d["block"])
                location = sch.sample_compute_location(block)
                sch.compute_at(block, location)


def check_directive(d: Any) -> dict:
    """A directive with its values checked (TuneError names what is wrong)."""
    if not isinstance(d, dict) or d.get("kind") not in DIRECTIVE_KINDS:
        raise TuneError(f"a search-space choice is one of {', '.join(DIRECTIVE_KINDS)}, got "
                        f"{str(d)[:80]}")
    if d["kind"] == "sample_split":
        loop, n = d.get("loop"), d.get("n", 2)
        most = d.get("max_innermost_factor", 16)
        if not isinstance(loop, str) or not loop.isidentifier():
            raise TuneError(f"sample_split needs the name of a loop, got {str(loop)[:40]!r}")
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 4:
            raise TuneError(f"sample_split draws 2 to 4 factors, got n={n!r}")
        if not isinstance(most, int) or isinstance(most, bool) or not 1 <= most <= 1024:
            raise TuneError(f"max_innermost_factor must be from 1 to 1024, got {most!r}")
        out = {"kind": "sample_split", "loop": loop, "n": n, "max_innermost_factor": most}
        block = d.get("block")
        if block is not None:
            if not isinstance(block, str) or not block or len(block) > 64:
                raise TuneError(f"sample_split's block must be a block's name, got "
                                f"{str(block)[:40]!r}")
            out["block"] = block
        return out
    block = d.get("block")
    if not isinstance(block, str) or not block or len(block) > 64:
        raise TuneError(f"sample_compute_location needs the name of a block, got "
                        f"{str(block)[:40]!r}")
    return {"kind": "sample_compute_location", "block": block}


def describe_directive(d: dict) -> str:
    if d["kind"] == "sample_split":
        above = f" (above {d['block']})" if d.get("block") else ""
        return f"split {d['loop']}{above} into {d['n']} sampled factors"
    return f"sample the compute location of block {d['block']}"


def _loop_of_block(sch: Schedule, name: str, block: str):
    """The handle of the loop called ``name`` among the loops above ``block``."""
    try:
        handle = sch.get_block(block)
    except Exception as e:  # noqa: BLE001 - a ScheduleError says which blocks exist
        raise TuneError(f"the program has no block called {block!r} ({e})") from e
    for loop in sch.get_loops(handle):
        if sch.get(loop).loop_var.name == name:
            return loop
    raise TuneError(f"block {block!r} has no loop called {name!r} above it")


def _loop_by_name(sch: Schedule, name: str):
    """The handle of the loop whose variable is called ``name`` (through the first block
    under it, so the trace holds ordinary get_block/get_loops steps)."""
    func = sch.mod[sch.func_name]
    target = _find_loop(func.body, name)
    if target is None:
        raise TuneError(f"the program has no loop called {name!r}")
    block = _first_block(target.body)
    if block is None:
        raise TuneError(f"loop {name!r} has no block under it")
    for loop in sch.get_loops(sch.get_block(block.name_hint)):
        if sch.get(loop).loop_var.name == name:
            return loop
    raise TuneError(f"loop {name!r} was not found above block {block.name_hint!r}")


def _find_loop(stmt: Any, name: str) -> For | None:
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, For):
            if s.loop_var.name == name:
                return s
            stack.append(s.body)
        elif isinstance(s, BlockRealize):
            stack.append(s.block.body)
        elif hasattr(s, "seq"):
            stack.extend(reversed(s.seq))
        elif hasattr(s, "body"):
            stack.append(s.body)
    return None


def _first_block(stmt: Any) -> Block | None:
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            return s.block
        if isinstance(s, For):
            stack.append(s.body)
        elif hasattr(s, "seq"):
            stack.extend(reversed(s.seq))
        elif hasattr(s, "then_case"):
            stack.append(s.then_case)
        elif hasattr(s, "body"):
            stack.append(s.body)
    return None


class AutoSpace(Space):
    """MetaSchedule-like design-space rules for CPU (see :mod:`.auto`); ``target``: None
    or ``"llvm"`` for this machine, or another CPU target (``"raspberry-pi-5"``,
    ``"llvm -mtriple=aarch64-linux-gnu"``, ``"llvm -mcpu=haswell"``) whose vector ISA
    (:func:`engine.codegen.isa.isa_of`) sizes the sampled tiles and vectors: NEON's 4
    lanes on the board, the vectorized tiles whole vectors (``apply_auto``'s
    ``whole_vectors``). Such a space has its own id (``"auto:2:neon"``), so its trials
    are never mixed with this machine's in a database."""

    id = "auto:2"   # 2: tiles sized from the ISA, B packed or not (sampled)
    description = ("auto: multi-level tiling with sampled tiles and cache_write, inlined "
                   "element-wise stages, parallel + vectorize + unroll")

    def __init__(self, target: str | None = None):
        self.target = None if target in (None, "", "llvm") else str(target)
        self.isa = None
        if self.target is not None:
            from engine.codegen.isa import isa_of  # noqa: PLC0415
            try:
                self.isa = isa_of(self.target)
            except ValueError as e:
                raise TuneError(str(e)) from None
            self.id = f"{AutoSpace.id}:{self.isa.name}"
            self.description = (f"{AutoSpace.description} (sized for {self.target}: "
                                f"{self.isa.describe()})")

    def apply(self, sch: Schedule) -> None:
        from .auto import apply_auto  # noqa: PLC0415
        apply_auto(sch, self.isa, whole_vectors=self.isa is not None)


class AutoGpuSpace(Space):
    """MetaSchedule-like design-space rules for a CUDA target (see :mod:`.auto_gpu`);
    ``target``: the target string (its limits bound the sampled thread blocks)."""

    id = "auto-gpu:1"
    description = ("auto (GPU): multi-level tiling bound to blockIdx/vthread/threadIdx with "
                   "sampled tiles, local accumulation, cooperative shared-memory fetches, "
                   "element-wise stages bound to sampled thread counts")

    def __init__(self, target: str = "cuda"):
        self.target = str(target)

    def apply(self, sch: Schedule) -> None:
        from .auto_gpu import apply_auto_gpu  # noqa: PLC0415
        apply_auto_gpu(sch, self.target)


def is_gpu_target(target: str | None) -> bool:
    """Whether ``target`` names a GPU (``"cuda ..."``, ``"nvidia/..."``)."""
    return target is not None and str(target).strip().startswith(("cuda", "nvidia/"))


def space_of(space: Any, target: str | None = None) -> Space:
    """A :class:`Space` from ``"auto"``, a function, a list of directives or a Space;
    ``target``: a CUDA target string makes ``"auto"`` the GPU rules, a CPU target
    (``"raspberry-pi-5"``, ``"llvm -mtriple=aarch64-linux-gnu"``) the CPU rules sized for
    its vector ISA (:class:`AutoSpace`)."""
    if isinstance(space, Space):
        return space
    if isinstance(space, str):
        if space == "auto":
            if is_gpu_target(target):
                return AutoGpuSpace(target)
            return AutoSpace(target)
        raise TuneError(f"unknown search space {space!r}; pass 'auto', a function of a "
                        "schedule, or a list of sampling directives")
    if isinstance(space, list):
        return DirectiveSpace(space)
    if callable(space):
        return FunctionSpace(space)
    raise TuneError(f"a search space is 'auto', a function of a schedule or a list of "
                    f"directives, got {type(space).__name__}")


def load_space_file(path: str, name: str | None = None) -> FunctionSpace:
    """The space function of a Python file: ``name``, else a function called ``space``,
    else the file's only function taking one argument."""
    try:
        env = runpy.run_path(path)
    except FileNotFoundError:
        raise TuneError(f"no such space file: {path}") from None
    except SyntaxError as e:
        raise TuneError(f"{path} is not valid Python (line {e.lineno}: {e.msg})") from None
    except Exception as e:  # noqa: BLE001 - the file's own top-level code failed
        raise TuneError(f"running {path} failed: {type(e).__name__}: {e}") from None
    if name is not None:
        fn = env.get(name)
        if not callable(fn):
            raise TuneError(f"{path} defines no function {name!r}")
        return FunctionSpace(fn)
    if callable(env.get("space")):
        return FunctionSpace(env["space"])
    fns = [v for k, v in env.items() if inspect.isfunction(v) and not k.startswith("_")
           and v.__module__ == env.get("__name__") and _one_arg(v)]
    if len(fns) != 1:
        found = ", ".join(f.__name__ for f in fns) or "none"
        raise TuneError(f"{path} must define one function of a schedule (or one called "
                        f"'space'); found: {found}")
    return FunctionSpace(fns[0])


def _one_arg(fn: Callable) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return len([p for p in params if p.default is p.empty]) == 1
