"""``engine.build(mod, target="cuda")``: a scheduled program built for a GPU.

The build lowers every function (:func:`.lower.lower_gpu`), generates PTX through LLVM's
NVPTX back end (:mod:`.nvptx`) and CUDA C (:mod:`.cuda_source`), and has ptxas assemble the
PTX for the target's architecture (registers, shared memory and spills per kernel; the
occupancy they allow). The result, :class:`GpuRuntimeModule`, is called like the CPU
module, with numpy arrays or ``engine.nd`` arrays:

* on a machine with a CUDA GPU it runs the kernels there (the driver API, :mod:`.driver`);
* without one it runs them in the emulator (:mod:`.emulator`: the kernels compiled for the
  CPU with the GPU's barrier semantics), so every result can still be checked;

``time_evaluator`` measures on the GPU, or — without one — returns the analytic model's time
(:mod:`.model`) for the target's GPU, marked as modeled and saying so.

``rt_mod.imported_modules[0].get_source()`` is the CUDA C (``get_source("ptx")`` the PTX),
as in TVM, where the device code is a module imported by the host module.
"""
from __future__ import annotations

import statistics
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.ir.buffer import Buffer
from engine.lower.errors import BuildError
from engine.runtime.module import TimingResult

from .kernel import GpuFunction, GpuModule
from .target import Target


def as_gpu_target(target: Any) -> Target:
    """A CUDA :class:`Target` from a string or a Target; anything else is refused."""
    t = target if isinstance(target, Target) else Target(target)
    if t.kind.name != "cuda":
        raise BuildError(f"target {t} is not a GPU target; use \"cuda\", "
                         "\"cuda -arch=sm_80\" or a named GPU such as \"nvidia/nvidia-a100\"")
    return t


def is_gpu_target(target: Any) -> bool:
    """Does ``target`` (a string or a Target) name a CUDA GPU?"""
    if isinstance(target, Target):
        return target.kind.name == "cuda"
    if isinstance(target, str):
        head = target.strip().split(" ", 1)[0]
        return head == "cuda" or head.startswith("nvidia/")
    return getattr(getattr(target, "kind", None), "name", None) == "cuda"


@dataclass(frozen=True)
class GpuTimingResult(TimingResult):
    """Seconds per call, like :class:`engine.runtime.module.TimingResult`; ``modeled`` says
    the figure is the analytic model's (no GPU here), ``note`` says for which GPU and why."""

    modeled: bool = False
    note: str = ""

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} — {self.note}" if self.note else text


class DeviceSourceModule:
    """The device code of a GPU build (TVM's ``rt_mod.imported_modules[0]``)."""

    type_key = "cuda"

    def __init__(self, owner: "GpuRuntimeModule"):
        self._owner = owner

    def get_source(self, fmt: str = "cuda") -> str:
        """The kernels as CUDA C (``"cuda"``/``"cu"``, the default) or PTX (``"ptx"``)."""
        if fmt in ("", "cuda", "cu"):
            return self._owner.cuda_source
        if fmt == "ptx":
            return self._owner.ptx
        raise ValueError(f"unknown source format {fmt!r}; use \"cuda\" or \"ptx\"")

    def __repr__(self) -> str:
        return f"<DeviceSourceModule cuda: {len(self._owner.kernels)} kernel(s)>"


class GpuRuntimeModule:
    """A GPU build: its functions by name (``rt_mod["main"](a, b, c)``), sources, resources
    (``assembly``: ptxas's report for the target's architecture, or None with
    ``assembly_error`` when ptxas is not installed), the analytic model, and timing."""

    def __init__(self, target: Target, gpu_module: GpuModule, ptx: str, cuda_source: str,
                 assembly: Any, assembly_error: str = ""):
        self.target = target
        self.gpu_module = gpu_module
        self.ptx = ptx
        self.cuda_source = cuda_source
        # ptxas's report, or a PendingAssembly still running (build_gpu starts it in the
        # background: the emulator compiles and runs meanwhile); read through ``assembly``
        self._assembly = assembly
        self._assembly_error = assembly_error
        self.imported_modules = [DeviceSourceModule(self)]
        self._emulators: dict = {}
        self._device_modules: dict = {}

    def _settle_assembly(self) -> None:
        from .toolchain import PendingAssembly, ToolchainError
        if isinstance(self._assembly, PendingAssembly):
            pending, self._assembly = self._assembly, None
            try:
                self._assembly = pending.result()
            except ToolchainError as e:
                self._assembly_error = str(e)

    @property
    def assembly(self) -> Any:
        """ptxas's :class:`~.toolchain.AssemblyReport` (waits for ptxas when it still runs),
        or None when ptxas did not run (``assembly_error`` says why)."""
        self._settle_assembly()
        return self._assembly

    @property
    def assembly_error(self) -> str:
        self._settle_assembly()
        return self._assembly_error

    # ---------------------------------------------------------------- contents
    @property
    def kernels(self) -> list:
        return [k for f in self.gpu_module.functions for k in f.kernels]

    def function_names(self) -> list[str]:
        return [f.name for f in self.gpu_module.functions]

    def get_source(self, fmt: str = "") -> str:
        """The host side: each function's launches (grid, block, shared bytes), in order."""
        if fmt in ("cuda", "cu", "ptx"):
            return self.imported_modules[0].get_source(fmt)
        lines = [f"// host code for {self.target}"]
        for f in self.gpu_module.functions:
            lines.append(f"{f.name}({', '.join(_pname(p) for p in f.params)}):")
            for t in f.temporaries:
                lines.append(f"  allocate {t.name} {t.dtype}[{_size(t)}] in global memory")
            for k in f.kernels:
                lines.append(f"  launch {k.name}<<<grid={k.grid}, block={k.block}, "
                             f"shared={k.shared_bytes} B>>>"
                             f"({', '.join(_pname(p) for p in k.params)})")
        return "\n".join(lines) + "\n"

    def resources(self) -> list:
        """Per kernel: (name, registers per thread, shared bytes, spills, occupancy) — from
        ptxas when it ran, else shared bytes only."""
        from .occupancy import occupancy
        out = []
        for k in self.kernels:
            res = self.assembly.kernel(k.name) if self.assembly is not None else None
            regs = res.registers if res is not None else None
            occ = occupancy(self.target.spec, k.threads_per_block, regs or 32,
                            k.shared_bytes)
            out.append({"kernel": k.name, "grid": k.grid, "block": k.block,
                        "registers": regs, "shared_bytes": k.shared_bytes,
                        "spill_stores": res.spill_stores if res is not None else None,
                        "spill_loads": res.spill_loads if res is not None else None,
                        "occupancy": occ.occupancy, "occupancy_limited_by": occ.limited_by})
        return out

    def model(self, func_name: str = "main", spec: Any = None):
        """The analytic model of ``func_name`` on ``spec`` (default: the target's GPU)."""
        from .model import model_function
        regs = {k.name: self.assembly.kernel(k.name).registers for k in self.kernels
                if self.assembly is not None and self.assembly.kernel(k.name) is not None}
        return model_function(self.gpu_module[func_name], spec or self.target.spec,
                              registers_per_thread=regs or None)

    # ---------------------------------------------------------------- running
    def device_status(self) -> tuple[bool, str]:
        """(True, name) when a CUDA device runs the kernels here, else (False, why not)."""
        from .driver import cuda_available
        return cuda_available()

    def emulator(self, func_name: str = "main", check_races: bool = False,
                 opt_level: int = 3):
        """The :class:`~.emulator.Emulator` of ``func_name`` (compiled once per build, race
        check and LLVM optimisation level)."""
        from .emulator import Emulator
        key = (func_name, check_races, opt_level)
        if key not in self._emulators:
            self._emulators[key] = Emulator(self.gpu_module[func_name],
                                            check_races=check_races, opt_level=opt_level)
        return self._emulators[key]

    def __getitem__(self, name: str) -> "GpuFunctionRunner":
        self.gpu_module[name]    # KeyError with the names when missing
        return GpuFunctionRunner(self, name)

    def get_function(self, name: str) -> "GpuFunctionRunner":
        return self[name]

    def time_evaluator(self, func_name: str, dev: Any = None, number: int = 10,
                       repeat: int = 1, min_repeat_ms: float = 0, **_ignored: Any):
        """TVM's ``time_evaluator``: on a GPU, kernel launches timed with CUDA events;
        without one, the analytic model's time for the target's GPU (``modeled=True``,
        ``note`` saying so)."""
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"number must be a positive integer, got {number!r}")
        if not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
        runner = self[func_name]

        def evaluator(*args: Any) -> GpuTimingResult:
            ok, why = self.device_status()
            if ok:
                results = runner.time_on_device(args, number, repeat)
                return _timing(results, False, f"measured on {why}")
            runner.check_args(args)
            m = self.model(func_name)
            note = (f"modeled for {self.target.spec.display_name} "
                    f"(no GPU on this machine: {why})")
            return _timing([m.time_s] * repeat, True, note)
        return evaluator

    def __repr__(self) -> str:
        return (f"<GpuRuntimeModule {self.target}: {', '.join(self.function_names())}; "
                f"{len(self.kernels)} kernel(s)>")


class GpuFunctionRunner:
    """One function of a GPU build, called with its arrays (numpy or ``engine.nd``)."""

    def __init__(self, module: GpuRuntimeModule, name: str):
        self.module = module
        self.name = name
        self.function: GpuFunction = module.gpu_module[name]

    def check_args(self, args: tuple) -> list:
        """The host arrays of ``args``, checked against the function's parameters (count,
        dtype, number of elements and, when the source function has it, shape)."""
        f = self.function
        if len(args) != len(f.params):
            raise TypeError(f"{f.name} takes {len(f.params)} arguments "
                            f"({', '.join(_pname(p) for p in f.params)}), got {len(args)}")
        shapes = {}
        if f.source is not None:
            for p in f.source.params:
                if isinstance(p, Buffer):
                    try:
                        shapes[p.name] = tuple(p.const_shape())
                    except ValueError:
                        pass
        arrays = []
        for p, a in zip(f.params, args):
            if not isinstance(p, Buffer):
                arrays.append(a)
                continue
            host = np.asarray(a) if not isinstance(a, np.ndarray) else a
            want = np.dtype(p.dtype)
            if host.dtype != want:
                raise TypeError(f"argument {p.name}: dtype {host.dtype}, expected {want}")
            shape = shapes.get(p.name)
            if shape is not None and host.shape != shape:
                raise ValueError(f"argument {p.name}: shape {host.shape}, expected {shape}")
            if host.size != int(np.prod(p.const_shape())):
                raise ValueError(f"argument {p.name}: {host.size} elements, expected "
                                 f"{int(np.prod(p.const_shape()))}")
            arrays.append(host)
        return arrays

    def __call__(self, *args: Any) -> None:
        arrays = self.check_args(args)
        ok, _why = self.module.device_status()
        if ok:
            self._run_on_device(args, arrays)
            return
        views = [a.view(np.ndarray) if isinstance(a, np.ndarray) else a for a in arrays]
        self.module.emulator(self.name)(*views)

    # ------------------------------------------------------------- on a GPU
    def _device_function(self, kernel_name: str):
        from .driver import load_ptx
        mods = self.module._device_modules
        if "ptx" not in mods:
            mods["ptx"] = load_ptx(self.module.ptx)
        return mods["ptx"].get_function(kernel_name)

    def _device_args(self, args: tuple, arrays: list) -> tuple[dict, list]:
        """Device buffers for the parameters (an engine.nd array already on the device keeps
        its buffer) and the temporaries; returns (by buffer id, buffers to copy back)."""
        from .driver import DeviceBuffer
        f = self.function
        env: dict = {}
        back: list = []
        for p, a, host in zip(f.params, args, arrays):
            if not isinstance(p, Buffer):
                env[id(p)] = host
                continue
            dev = getattr(a, "device_data", None)     # an engine.nd array on the GPU
            if dev is None:
                dev = DeviceBuffer.from_array(np.ascontiguousarray(host))
            back.append((dev, host))
            env[id(p)] = dev
        for t in f.temporaries:
            env[id(t)] = DeviceBuffer(int(np.prod(t.const_shape())) * np.dtype(t.dtype).itemsize)
        return env, back

    def _launch_all(self, env: dict) -> None:
        from .driver import launch_kernel
        for k in self.function.kernels:
            launch_kernel(k, self._device_function(k.name), [env[id(p)] for p in k.params])

    def _run_on_device(self, args: tuple, arrays: list) -> None:
        from .driver import synchronize
        env, back = self._device_args(args, arrays)
        self._launch_all(env)
        synchronize()
        for dev, host in back:
            if isinstance(host, np.ndarray) and host.flags.writeable:
                dev.copy_to(host.reshape(-1).view(np.ndarray) if host.flags.c_contiguous
                            else host)

    def time_on_device(self, args: tuple, number: int, repeat: int) -> list[float]:
        from .driver import time_launches
        arrays = self.check_args(args)
        env, _back = self._device_args(args, arrays)
        return time_launches(lambda: self._launch_all(env), number, repeat)


def _timing(results: list, modeled: bool, note: str) -> GpuTimingResult:
    return GpuTimingResult(mean=statistics.fmean(results), median=statistics.median(results),
                           min=min(results), max=max(results),
                           std=statistics.pstdev(results) if len(results) > 1 else 0.0,
                           results=tuple(results), modeled=modeled, note=note)


def _pname(p: Any) -> str:
    return getattr(p, "name", str(p))


def _size(buf: Buffer) -> int:
    return int(np.prod(buf.const_shape()))


#: the last GPU builds, by (structural hash of the program, target): a worker asked for a
#: step's measurement and then for its code (or the same program again) builds it once, and
#: the emulator compiled for it is kept with it. Programs are immutable, so a build is too.
BUILD_CACHE_SIZE = 16
_builds: "OrderedDict[tuple, GpuRuntimeModule]" = OrderedDict()
_builds_lock = threading.Lock()


def build_gpu(mod: Any, target: Any = "cuda") -> GpuRuntimeModule:
    """Build ``mod`` (IRModule or PrimFunc) for a CUDA ``target``; see the module
    docstring. ptxas runs in the background (``rt.assembly`` waits for it). Its absence is
    not an error here (the module records the sentence in
    ``assembly_error``); a program the GPU lowering or LLVM refuses raises BuildError.
    The same program built again for the same target is the same module (the last
    :data:`BUILD_CACHE_SIZE` builds are kept)."""
    from engine.ir.structural import structural_hash
    target = as_gpu_target(target)
    key = (structural_hash(mod), str(target))
    with _builds_lock:
        hit = _builds.get(key)
        if hit is not None:
            _builds.move_to_end(key)
            return hit
    rt = _build(mod, target)
    with _builds_lock:
        _builds[key] = rt
        while len(_builds) > BUILD_CACHE_SIZE:
            _builds.popitem(last=False)
    return rt


def _build(mod: Any, target: Target) -> GpuRuntimeModule:
    from .cuda_source import module_to_cuda
    from .lower import lower_gpu
    from .nvptx import compile_ptx
    from .toolchain import ToolchainError, start_assembly
    gmod = lower_gpu(mod, target)
    kernels = [k for f in gmod.functions for k in f.kernels]
    ptx = compile_ptx(kernels, arch=target.arch) if kernels else ""
    assembly, error = None, ""
    if kernels:
        # ptxas runs in the background while the caller goes on (the CUDA C, the emulator's
        # compile and run); whatever reads its figures waits for it
        try:
            assembly = start_assembly(ptx, arch=target.arch)
        except ToolchainError as e:
            error = str(e)
    cuda = module_to_cuda(gmod)
    return GpuRuntimeModule(target, gmod, ptx, cuda, assembly, error)
