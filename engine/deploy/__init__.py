"""engine.deploy — the deployment form: a built model or kernel as a standalone library.

::

    rt = engine.build(mod); rt.export_library("kernel.so")          # + kernel.h
    ex = engine.relax.build(mlp); ex.export_library("mlp.so")       # int mlp_main(x, out)
    mod = engine.runtime.load_module("mlp.so"); mod["main"](x)      # back in the engine
    NativeLibrary("mlp.so")["main"](x)                              # ctypes + numpy only

What each module owns:

* :mod:`.targets` — everything target-specific: :class:`DeployTarget` (triple, CPU,
  features, the LLVM target machine, object emission, the thread pool's objects, the
  link), :data:`host_target`, :func:`register_target` for other machines, :func:`get_target`;
* :mod:`.plan` — what a library holds, read from a TensorIR build or a Relax executable
  (kernels, bound weights, per function its arguments, arena and steps); the refusals;
* :mod:`.entry_points` — a plan's C entry points, weights, arenas and metadata as LLVM IR;
* :mod:`.metadata` — the JSON metadata compiled into the library and the C header;
* :mod:`.export` — :func:`export_library`: plan, kernels, entry points, link, header;
* :mod:`.loader` — :class:`NativeLibrary`, ctypes + numpy only (copyable next to a library);
* :mod:`.load` — :func:`load_module`, the engine's view of a loaded library;
* :mod:`.aarch64` — the ARM board target (``"llvm -mtriple=aarch64-linux-gnu"``,
  ``"raspberry-pi-5"``): cross-compiled thread pool, linked by ``aarch64-linux-gnu-gcc``;
* :mod:`.qemu` — :func:`run_under_qemu`: an aarch64 library run here under ``qemu-aarch64``;
  :mod:`.board` — :func:`run_on_board`, a board build's kernel called under qemu;
* :mod:`.wasm` — the browser target (``"wasm32"``): objects from llvmlite's WebAssembly
  backend (:mod:`engine.wasm`), linked by ``wasm-ld`` with the module's own runtime into
  one ``.wasm`` (``static/engine_wasm.js`` loads it in a page).
"""
from .aarch64 import Aarch64Target
from .board import run_on_board
from .export import ExportedLibrary, export_library, normalize_prefix
from .load import LoadedModule, load_module
from .loader import LibraryError, LibraryFunction, NativeLibrary
from .metadata import METADATA_SYMBOL, build_metadata, header_text
from .qemu import measure_under_qemu, run_under_qemu
from .plan import Plan, plan_relax, plan_tir
from .targets import DeployError, DeployTarget, get_target, host_target, register_target
from .wasm import WASM32, WasmTarget

__all__ = ["export_library", "ExportedLibrary", "normalize_prefix", "load_module",
           "LoadedModule", "NativeLibrary", "LibraryFunction", "LibraryError",
           "METADATA_SYMBOL", "build_metadata", "header_text", "Plan", "plan_tir",
           "plan_relax", "DeployError", "DeployTarget", "get_target", "host_target",
           "register_target", "Aarch64Target", "run_under_qemu", "measure_under_qemu",
           "run_on_board", "WasmTarget", "WASM32"]
