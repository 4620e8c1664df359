"""A GPU function after lowering: its kernels and the launches that run them.

This is the one form every GPU back end reads — the PTX code generator (through LLVM's
NVPTX back end), the CUDA C printer and the CPU emulator — so that they all run the same
lowered kernel. :mod:`.lower` makes it from a scheduled PrimFunc.

A :class:`Kernel`'s ``body`` is lowered IR as the CPU back end sees it (no blocks; buffers
flattened to one dimension; vector accesses as ``Ramp``/``Broadcast``), with:

* the thread indices as free variables: ``kernel.thread_vars`` maps each axis in use
  ("blockIdx.x", ..., "threadIdx.z") to its ``Var`` (int32, named as TVM does:
  ``blockIdx_x``, ``threadIdx_x``); a thread axis not in the map has extent 1 (index 0:
  the lowering writes 0, not a variable);
* the kernel's parameters: the global buffers it touches and the scalar sizes it reads, in
  ``params`` order (the launch passes them so);
* "shared" buffers (one per thread block, constant size) in ``shared``, declared by the
  kernel, not allocated in the body; their contents are undefined at the start of a block
  (the lowering proves nothing from them);
* "local" buffers (one per thread) as ``Allocate`` statements in the body; one of a scalar
  integer dtype is zero-filled where it is allocated, as on the CPU
  (:func:`engine.ir.dtype.zero_filled`: the bounds proof counts on it);
* barriers as ``Evaluate(Call("int32", BARRIER, ()))``, where every thread of the block
  waits (CUDA's ``__syncthreads()``), placed by the lowering where a shared buffer written
  by one thread is read by another (or rewritten after another read it).

Every thread of the block runs the whole body; statements outside the loops that were bound
to threadIdx run in every thread. The ``vthread`` loops stay as serial loops inside each
thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

#: the barrier intrinsic's name (TVM's ``tvm_storage_sync("shared")``)
BARRIER = "tvm_storage_sync"

GRID_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
BLOCK_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def barrier() -> S.Evaluate:
    """``__syncthreads()``: every thread of the block waits here for the others."""
    return S.Evaluate(E.Call("int32", BARRIER, ()))


def is_barrier(s: Any) -> bool:
    return type(s) is S.Evaluate and type(s.value) is E.Call and s.value.op == BARRIER


@dataclass(frozen=True)
class Kernel:
    """One ``__global__`` function: what it computes per thread and its launch shape."""

    name: str
    params: tuple            # Buffer (global, flat) and Var (int32 scalar) parameters
    body: S.Stmt
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    thread_vars: dict = field(default_factory=dict)   # axis name -> E.Var
    shared: tuple = ()       # flat Buffers of scope "shared", constant sizes

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def shared_bytes(self) -> int:
        """Static shared memory per block, in bytes."""
        return sum(shared_buffer_bytes(b) for b in self.shared)

    @property
    def buffer_params(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def scalar_params(self) -> tuple:
        return tuple(p for p in self.params if not isinstance(p, Buffer))


def shared_buffer_bytes(buf: Buffer) -> int:
    from engine.ir.dtype import bytes_of
    n = 1
    for s in buf.shape:
        n *= int(E.as_const_int(s))
    return n * bytes_of(buf.dtype)


@dataclass(frozen=True)
class GpuFunction:
    """A PrimFunc built for a GPU: its parameters (as the caller passes them) and the
    kernels it launches, in order. ``temporaries`` are global buffers the function
    allocates between kernels (an intermediate stage not kept in shared memory); the
    runtime allocates them once per call."""

    name: str
    params: tuple            # the PrimFunc's parameters, flat buffers and scalars
    kernels: tuple           # Kernel, launched in this order
    temporaries: tuple = ()  # flat global Buffers allocated by the function
    source: Any = None       # the scheduled PrimFunc it was lowered from


@dataclass(frozen=True)
class GpuModule:
    """Every function of an IRModule, lowered for one GPU target."""

    functions: tuple         # GpuFunction
    target: Any = None       # engine.gpu.Target

    def __getitem__(self, name: str) -> GpuFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no GPU function {name!r}; the module has "
                       + ", ".join(f.name for f in self.functions))
