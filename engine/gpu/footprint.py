"""What a scheduled program's kernels need per thread block, read without building them:
threads and the shared memory of their placed tiles.

``lower_gpu`` refuses a kernel whose shared memory is over the target's per-block limit, but
only once the whole lowering has run (bounds proof, flattening, barriers: ~50 ms for the
course's shared-memory GEMM). :func:`shared_footprints` runs only the part that decides the
tiles — thread variables, blocks -> loops, the per-block boxes of :mod:`.lower` (step 4) —
so that a caller that must answer quickly (the explorer, at a click) can tell a schedule
step that makes a kernel need more shared memory than the GPU has.

Only *kernels* are read: top-level statements whose outermost loop is bound to a thread
axis (what ``lower_gpu`` would make a kernel of). A shared buffer used by several top-level
statements (a ``cache_read`` stage not computed inside its consumer's kernel yet) belongs
to no kernel and is not counted; nor is a kernel the lowering refuses for another reason
(a statement not bound yet, a loop around the kernel...): those are states a schedule
passes through on its way to a kernel, and the build says what is missing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.ir import stmt as S
from engine.ir.buffer import base_scope
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import collect_stmts
from engine.lower.errors import BuildError

from .kernel import shared_buffer_bytes


@dataclass(frozen=True)
class SharedTile:
    """One shared buffer as a thread block holds it."""

    name: str
    shape: tuple
    dtype: str
    bytes: int
    writers: tuple      # names of the blocks that store into it (its stage)
    at_loop: str | None  # the innermost loop enclosing both its stage and a reader of it


@dataclass(frozen=True)
class KernelFootprint:
    """A kernel's shared memory per thread block (its tiles) and threads per block."""

    func: str
    index: int
    threads: int
    tiles: tuple

    @property
    def name(self) -> str:
        return f"{self.func}_kernel{self.index}"

    @property
    def shared_bytes(self) -> int:
        return sum(t.bytes for t in self.tiles)


def shared_footprints(mod_or_func: Any, target: Any) -> tuple:
    """The :class:`KernelFootprint` of every kernel of ``mod_or_func`` (a PrimFunc or an
    IRModule's PrimFuncs) that has shared buffers, for the CUDA ``target`` (an
    :class:`engine.gpu.Target` or its string). See the module docstring for what is read
    and what is skipped; never raises for a program the lowering would refuse."""
    from .lower import _FunctionLowerer, _KernelLowerer
    from .target import Target
    target = target if isinstance(target, Target) else Target(target)
    if isinstance(mod_or_func, PrimFunc):
        funcs = [(mod_or_func.name, mod_or_func)]
    elif isinstance(mod_or_func, IRModule):
        funcs = [(n, f) for n, f in mod_or_func.functions if isinstance(f, PrimFunc)]
    else:
        return ()
    out = []
    for fname, func in funcs:
        fl = _FunctionLowerer(fname, func, target)
        try:
            _, _, on_chip, stmts, users = fl.statements()
        except BuildError:
            continue
        for k, stmt in enumerate(stmts):
            if not (type(stmt) is S.For and stmt.kind is S.ForKind.THREAD_BINDING):
                continue
            mine = [b for b in on_chip if users.get(id(b)) == [k]]
            if not _has_shared(stmt, mine):
                continue
            kl = _KernelLowerer(fl, f"{fname}_kernel{k}", stmt, mine)
            try:
                extents, tiles = kl.shared_tiles()
            except (BuildError, ValueError):
                continue
            threads = 1
            for a in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
                threads *= extents.get(a, 1)
            out.append(KernelFootprint(fname, k, threads, tuple(
                _tile(b, stmt) for b in tiles)))
    return tuple(out)


def over_shared_limit(footprints: tuple, target: Any) -> list:
    """The footprints over the ``target``'s static shared memory per block."""
    from .target import Target
    target = target if isinstance(target, Target) else Target(target)
    limit = target.attrs.get("max_shared_memory_per_block")
    if limit is None:
        return []
    return [f for f in footprints if f.shared_bytes > limit]


def shared_limit_sentence(fp: KernelFootprint, target: Any) -> str:
    """The sentence of a kernel over the shared-memory limit: its tiles and the limit."""
    from .target import Target
    target = target if isinstance(target, Target) else Target(target)
    limit = target.attrs.get("max_shared_memory_per_block", 0)
    spec = target.spec
    gpu = spec.display_name.removeprefix("NVIDIA ") if spec is not None else "the target"
    tiles = ", ".join(f"{t.name} {' x '.join(map(str, t.shape))} {t.dtype} "
                      f"({_kib(t.bytes)})" for t in sorted(fp.tiles, key=lambda t: -t.bytes))
    return (f"kernel {fp.name} would need {_kib(fp.shared_bytes)} of shared memory per "
            f"thread block ({tiles}); the {gpu} allows {_kib(limit)} per block")


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n % 1024 else f"{n // 1024} KiB"


def _has_shared(stmt: S.Stmt, mine: list) -> bool:
    if any(base_scope(b.scope) == "shared" for b in mine):
        return True
    return any(base_scope(b.scope) == "shared"
               for br in collect_stmts(stmt, S.BlockRealize) for b in br.block.alloc_buffers)


def _tile(buf: Any, kernel: S.Stmt) -> SharedTile:
    shape = tuple(int(n) for n in buf.const_shape())
    writers, at = _stage_of(buf.name, kernel)
    return SharedTile(buf.name, shape, buf.dtype, shared_buffer_bytes(buf), writers, at)


def _stage_of(name: str, kernel: S.Stmt) -> tuple:
    """The blocks of ``kernel`` storing into the buffer named ``name`` and the innermost
    loop enclosing one of them and a block reading it (where the stage was computed)."""
    paths: list = []     # (block, loops enclosing it, writes?, reads?)

    def walk(s, loops):
        if type(s) is S.For:
            walk(s.body, loops + [s])
        elif type(s) is S.BlockRealize:
            b = s.block
            writes = any(r.buffer.name == name for r in b.writes)
            reads = any(r.buffer.name == name for r in b.reads)
            if writes or reads:
                paths.append((b, loops, writes, reads))
            walk(b.body, loops)
            if b.init is not None:
                walk(b.init, loops)
        elif type(s) is S.SeqStmt:
            for x in s.seq:
                walk(x, loops)
        elif type(s) is S.IfThenElse:
            walk(s.then_case, loops)
            if s.else_case is not None:
                walk(s.else_case, loops)
        elif hasattr(s, "body"):
            walk(s.body, loops)
    walk(kernel, [])
    writers = tuple(dict.fromkeys(b.name_hint for b, _, w, _ in paths if w))
    at = None
    depth = -1
    for _, wl, w, _ in paths:
        if not w:
            continue
        for _, rl, _, r in paths:
            if not r:
                continue
            n = 0
            while n < len(wl) and n < len(rl) and wl[n] is rl[n]:
                n += 1
            if n and n - 1 > depth:
                depth, at = n - 1, wl[n - 1].loop_var.name
    return writers, at
