"""The Relax virtual machine: ``build`` (checks, TensorIR kernels, one program per Relax
function, memory planning) and ``VirtualMachine`` (``vm["main"](*arrays)``); the course's
``relax.vm.build``.

:mod:`.checks` (call_tir arguments against the TensorIR buffers), :mod:`.program` (a Relax
function as instructions over registers), :mod:`.memory` (which intermediate tensors share
storage), :mod:`.machine` (the Executable, the VirtualMachine), :mod:`.plan` (a function of
``call_tir`` calls compiled into one native call, the machine's fast path).
"""
from .machine import Executable, VirtualMachine, VMError, build
from .memory import MemoryPlan, plan_memory

__all__ = ["build", "Executable", "VirtualMachine", "VMError", "MemoryPlan", "plan_memory"]
