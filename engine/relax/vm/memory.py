"""Static memory planning: which tensors a Relax function allocates may share storage.

Every tensor an instruction allocates (a *token*: the output of an ``R.call_tir``, an
``R.alloc_tensor``) lives from the instruction that makes it to the last instruction that
reads it — through any variable, alias, tuple or call result that may hold it. The tokens
the function returns *escape* and get memory of their own at each call; the others are
placed in one arena, greedily in program order: a token takes the smallest free block that
fits (else grows the largest free block, else opens a new one), and its block is freed after
its last use. Outputs of an instruction never share storage with its inputs (inputs are
freed only after the outputs are placed). A tensor of symbolic shape (``R.Tensor(("n",
128), ...)``) is allocated at each call, its size known only then.

For the course's MLP, ``lv0`` and ``lv1`` get two blocks and ``out`` escapes; in a longer
chain the third intermediate reuses the first's block (``Executable.memory_plan``).
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass(frozen=True)
class MemoryPlan:
    """Where each token lives: ``offsets[t]`` (bytes into the arena) or None (escapes: a
    fresh array per call); ``arena_bytes`` the arena's size; ``block_of[t]`` the storage
    block (None for escaping tokens); ``naive_bytes`` what one allocation per token would
    take (the planned tokens only)."""

    offsets: tuple
    block_of: tuple
    block_sizes: tuple
    arena_bytes: int
    naive_bytes: int

    @property
    def num_blocks(self) -> int:
        return len(self.block_sizes)

    def summary(self) -> dict:
        planned = sum(1 for o in self.offsets if o is not None)
        return {"tensors": len(self.offsets), "planned": planned,
                "escaping": len(self.offsets) - planned, "blocks": self.num_blocks,
                "arena_bytes": self.arena_bytes, "naive_bytes": self.naive_bytes}


def _reads(ins: tuple) -> list:
    kind = ins[0]
    if kind in ("kernel", "packed"):
        return list(ins[2])
    if kind in ("op", "func"):
        return list(ins[2])
    if kind == "tuple":
        return list(ins[1])
    if kind in ("get", "move"):
        return [ins[1]]
    return []


def _dst(ins: tuple) -> int:
    return ins[-2] if ins[0] in ("kernel", "packed") else ins[-1]


def plan_memory(program) -> MemoryPlan:
    """The :class:`MemoryPlan` of a :class:`~.program.Program`."""
    holds: dict[int, frozenset] = {}  # register -> tokens it may reference
    last_use = list(program.token_defs)
    for i, ins in enumerate(program.instrs):
        kind = ins[0]
        reads = _reads(ins)
        for r in reads:
            for t in holds.get(r, ()):
                last_use[t] = max(last_use[t], i)
        if kind in ("kernel", "packed"):
            held = frozenset(ins[3])
        elif kind == "alloc":
            held = frozenset((ins[1],))
        elif kind == "shape":
            held = frozenset()
        else:  # move, tuple, get, op (a view, e.g. reshape), func (may return an argument)
            held = frozenset().union(*(holds.get(r, frozenset()) for r in reads))
        holds[_dst(ins)] = held
    escaping = holds.get(program.ret, frozenset())
    n = len(program.tokens)
    dies_at: dict[int, list] = {}
    dynamic = {t for t in range(n) if program.tokens[t].symbolic}
    for t in range(n):
        if t not in escaping and t not in dynamic:
            dies_at.setdefault(last_use[t], []).append(t)
    block_sizes: list[int] = []
    free: list[int] = []
    block_of: list = [None] * n
    naive = 0
    defined_at: dict[int, list] = {}
    for t, d in enumerate(program.token_defs):
        defined_at.setdefault(d, []).append(t)
    for i in range(len(program.instrs)):
        for t in defined_at.get(i, ()):
            if t in escaping or t in dynamic:
                continue
            need = program.tokens[t].nbytes
            naive += need
            fitting = [b for b in free if block_sizes[b] >= need]
            if fitting:
                b = min(fitting, key=lambda k: block_sizes[k])
            elif free:
                b = max(free, key=lambda k: block_sizes[k])
                block_sizes[b] = need
            else:
                b = len(block_sizes)
                block_sizes.append(need)
            if b in free:
                free.remove(b)
            block_of[t] = b
        for t in dies_at.get(i, ()):
            free.append(block_of[t])
    offsets_of_block = []
    total = 0
    for size in block_sizes:
        offsets_of_block.append(total)
        total += -(-size // ALIGN) * ALIGN
    offsets = tuple(None if b is None else offsets_of_block[b] for b in block_of)
    return MemoryPlan(offsets, tuple(block_of), tuple(block_sizes), total, naive)
