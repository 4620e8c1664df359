"""CUDA's occupancy rules: how many blocks of a kernel one SM holds at once.

:func:`occupancy` follows CUDA's occupancy calculator (``cuda_occupancy.h``, the rules of
``cudaOccupancyMaxActiveBlocksPerMultiprocessor``). Four limits, each a number of blocks
per SM; the smallest wins:

* **warps**: ``max_warps_per_sm // warps_per_block`` (a block's threads rounded up to whole
  warps); a block of more than ``max_threads_per_block`` threads does not launch (0);
* **blocks**: ``max_blocks_per_sm``;
* **registers**: registers are given to warps, ``regs_per_thread x 32`` rounded up to the
  allocation unit (256) per warp, out of the register file of each of the SM's
  sub-partitions (``registers_per_sm / sub-partitions``: the partitions a warp is tied to);
  a block whose warps (rounded up to a multiple of the sub-partitions) need more than
  ``registers_per_block``, or a thread needing more than ``max_registers_per_thread``, does
  not launch; a kernel using no register is not limited;
* **shared memory**: the block's shared bytes plus the driver's reserved bytes (1 KiB from
  sm_80), rounded up to the allocation unit, out of the SM's shared memory (the largest
  carveout: the calculator's default preference); more than 48 KiB per block needs the
  opt-in limit (dynamic shared memory), more than that does not launch.

Not modelled: partitioned global caching (sm_52/sm_61 only), block barriers (limits only
kernels using many named barriers), carveout preferences smaller than the maximum. On sm_60
the calculator also checks the kernel against GP10x's four sub-partitions (a kernel that
could not run there is refused on GP100 too): kept.
"""
from __future__ import annotations

from dataclasses import dataclass

from .specs import GPUSpec

#: the four limits, in the order they are reported
LIMITS = ("warps", "registers", "shared_memory", "blocks")
UNLIMITED = 2 ** 31 - 1


@dataclass(frozen=True)
class Occupancy:
    """A kernel's occupancy of one SM. ``limited_by`` names every limit equal to the
    smallest (e.g. ``("warps", "registers")``), in :data:`LIMITS` order; ``block_limits``
    is each limit's number of blocks (``UNLIMITED`` when it does not bind at all)."""

    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    warps_per_block: int
    limited_by: tuple[str, ...]
    block_limits: dict[str, int]
    registers_per_block: int        # as allocated: whole units per warp
    shared_bytes_per_block: int     # as allocated: reserved bytes and whole units

    @property
    def occupancy(self) -> float:
        """Active warps / the SM's maximum warps, in [0, 1]."""
        return self.active_warps_per_sm / self.max_warps_per_sm

    def summary(self) -> str:
        """One line: ``4 blocks/SM, 32 of 64 warps (50%), limited by registers``."""
        return (f"{self.active_blocks_per_sm} blocks/SM, {self.active_warps_per_sm} of "
                f"{self.max_warps_per_sm} warps ({self.occupancy:.0%}), limited by "
                f"{' and '.join(n.replace('_', ' ') for n in self.limited_by)}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def warps_per_block(spec: GPUSpec, threads_per_block: int) -> int:
    return _ceil_div(threads_per_block, spec.warp_size)


def warp_limit(spec: GPUSpec, threads_per_block: int) -> int:
    """Blocks per SM allowed by the SM's warp slots (0: the block is too large)."""
    if threads_per_block > spec.max_threads_per_block:
        return 0
    return spec.max_warps_per_sm // warps_per_block(spec, threads_per_block)


def registers_per_warp(spec: GPUSpec, registers_per_thread: int) -> int:
    """Registers allocated to one warp: whole allocation units."""
    return _round_up(registers_per_thread * spec.warp_size, spec.register_allocation_unit)


def register_limit(spec: GPUSpec, threads_per_block: int, registers_per_thread: int,
                   sub_partitions: int | None = None) -> int:
    """Blocks per SM allowed by the register file (0: the block cannot launch)."""
    parts = sub_partitions or spec.warp_allocation_granularity
    warps = warps_per_block(spec, threads_per_block)
    per_warp = registers_per_warp(spec, registers_per_thread)
    if (registers_per_thread > spec.max_registers_per_thread
            or per_warp * warps > spec.registers_per_block
            or per_warp * _round_up(warps, parts) > spec.registers_per_block):
        return 0
    if per_warp == 0:
        return UNLIMITED
    warps_per_part = (spec.registers_per_sm // parts) // per_warp
    return warps_per_part * parts // warps


def _pascal_register_limit(spec: GPUSpec, threads: int, registers: int) -> int:
    """GP100 (sm_60, 2 sub-partitions) refuses what GP10x (4) could not run."""
    limit = register_limit(spec, threads, registers)
    if spec.arch == "sm_60" and limit and not register_limit(spec, threads, registers, 4):
        return 0
    return limit


def shared_bytes_allocated(spec: GPUSpec, shared_bytes: int) -> int:
    """Shared memory allocated to one block: its bytes, the driver's reserve, whole units."""
    return _round_up(shared_bytes + spec.reserved_shared_memory_per_block,
                     spec.shared_memory_allocation_unit)


def shared_memory_limit_per_block(spec: GPUSpec, shared_bytes: int) -> int:
    """The most shared memory one block may have: 48 KiB, or the opt-in maximum beyond."""
    limit = spec.shared_memory_per_block
    if shared_bytes > limit:
        limit = spec.shared_memory_per_block_optin
    return limit + spec.reserved_shared_memory_per_block


def shared_memory_limit(spec: GPUSpec, shared_bytes: int) -> int:
    """Blocks per SM allowed by shared memory (0: the block asks for too much)."""
    allocated = shared_bytes_allocated(spec, shared_bytes)
    if allocated > shared_memory_limit_per_block(spec, shared_bytes):
        return 0
    return spec.shared_memory_per_sm // allocated if allocated else UNLIMITED


def occupancy(spec: GPUSpec, threads_per_block: int, registers_per_thread: int,
              shared_bytes_per_block: int = 0) -> Occupancy:
    """The occupancy of a kernel launched in blocks of ``threads_per_block`` threads, each
    thread using ``registers_per_thread`` registers and each block ``shared_bytes_per_block``
    bytes of shared memory (static plus dynamic), on one SM of ``spec``."""
    _check_inputs(threads_per_block, registers_per_thread, shared_bytes_per_block)
    limits = {
        "warps": warp_limit(spec, threads_per_block),
        "registers": _pascal_register_limit(spec, threads_per_block, registers_per_thread),
        "shared_memory": shared_memory_limit(spec, shared_bytes_per_block),
        "blocks": spec.max_blocks_per_sm,
    }
    blocks = min(limits.values())
    warps = warps_per_block(spec, threads_per_block)
    return Occupancy(
        active_blocks_per_sm=blocks, active_warps_per_sm=blocks * warps,
        max_warps_per_sm=spec.max_warps_per_sm, warps_per_block=warps,
        limited_by=tuple(n for n in LIMITS if limits[n] == blocks), block_limits=limits,
        registers_per_block=registers_per_warp(spec, registers_per_thread) * warps,
        shared_bytes_per_block=shared_bytes_allocated(spec, shared_bytes_per_block))


def _check_inputs(threads: int, registers: int, shared: int) -> None:
    for name, value, low in (("threads_per_block", threads, 1),
                             ("registers_per_thread", registers, 0),
                             ("shared_bytes_per_block", shared, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
