"""The CUDA driver API, thinly: devices, the primary context, PTX modules, kernel launches,
device memory and event timing, over ``cuda.bindings.driver`` (the ``cuda-bindings`` wheel).

Every function here names the driver API functions it calls. Each call is checked: a
``CUresult`` other than ``CUDA_SUCCESS`` becomes a :class:`CudaError` carrying the call, the
error's name and text (``cuGetErrorName`` / ``cuGetErrorString``) and, for a PTX the JIT
refused, its error log. Without a usable GPU every operation that needs one raises
:class:`NoCudaDevice` (a :class:`CudaError`) with the sentence :func:`cuda_available` gives,
which starts "no CUDA device: " and says what is missing: the ``cuda-bindings`` package, the
driver library ``libcuda.so.1`` (installed with the NVIDIA display driver, never by pip),
``cuInit`` failing, or no device. Arguments are checked before that, the same way on every
machine.

Usage (on a machine with a GPU)::

    ok, why = cuda_available()
    mod = load_ptx(ptx_text)                       # cuModuleLoadDataEx, JIT logs kept
    f = mod["vector_add"]                          # cuModuleGetFunction
    a = DeviceBuffer.from_array(a_np)              # cuMemAlloc + cuMemcpyHtoD
    launch(f, grid=(n // 256,), block=(256,), args=(a, b, c, n))   # cuLaunchKernel
    c.copy_to(c_np)                                # cuMemcpyDtoH
    seconds = time_launches(lambda: launch(...), number=10, repeat=3)   # cuEvent*

Kernel parameters are passed as the driver expects them (``kernelParams``): an array of
pointers, the i-th pointing at the i-th argument's value — a ``CUdeviceptr`` (8 bytes) for a
buffer, an ``int32`` for a scalar (:func:`pack_params`). The driver copies the values when
the launch is enqueued, so they need to live only during the ``cuLaunchKernel`` call.

Contexts: the device's primary context (``cuDevicePrimaryCtxRetain``) is retained once per
process and made current (``cuCtxSetCurrent``) in the calling thread before each operation.
"""
from __future__ import annotations

import ctypes
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from engine.ir import expr as E
from engine.ir.dtype import bytes_of

from .kernel import Kernel

#: size of each JIT log buffer handed to cuModuleLoadDataEx
JIT_LOG_BYTES = 16384

#: the launch limits every CUDA device since compute capability 3.0 has
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)

_INSTALL_BINDINGS = ("the Python package cuda-bindings is not installed "
                     "(pip install 'cuda-bindings>=12.4,<13', the gpu extra of pyproject.toml)")


class CudaError(RuntimeError):
    """A CUDA driver call failed: ``call`` (its name), ``code`` (the CUresult as an int, or
    None), ``name`` (``CUDA_ERROR_...``), ``log`` (the JIT's error log, for a PTX)."""

    def __init__(self, message: str, *, call: str | None = None, code: int | None = None,
                 name: str | None = None, log: str = ""):
        super().__init__(message)
        self.call, self.code, self.name, self.log = call, code, name, log


class NoCudaDevice(CudaError):
    """No usable CUDA device: the message is :func:`cuda_available`'s sentence."""


# ---------------------------------------------------------------------------------------
# the bindings and the checked call
# ---------------------------------------------------------------------------------------

_API: Any = None          # the driver module in use (cuda.bindings.driver, or a test double)
_STATUS: tuple[bool, str] | None = None
_LOCK = threading.RLock()
_CONTEXTS: dict[int, "Context"] = {}


def _import_bindings() -> Any:
    from cuda.bindings import driver
    return driver


def _api() -> Any:
    global _API
    if _API is None:
        _API = _import_bindings()
    return _API


def use_api(api: Any) -> Any:
    """Use ``api`` in place of ``cuda.bindings.driver`` (a test double: same functions, same
    return tuples; it needs no driver library); None goes back to the bindings. Forgets the
    availability and the contexts. Returns the previous one."""
    global _API, _STATUS
    with _LOCK:
        previous, _API, _STATUS = _API, api, None
        _CONTEXTS.clear()
    return previous


def _is_bindings(api: Any) -> bool:
    return getattr(api, "__name__", "") == "cuda.bindings.driver"


def _success(api: Any) -> Any:
    return api.CUresult.CUDA_SUCCESS


def error_name(err: Any) -> tuple[str, str]:
    """(name, text) of a CUresult, by ``cuGetErrorName`` and ``cuGetErrorString``."""
    api = _api()
    name, text = getattr(err, "name", str(err)), "no description"
    try:
        e, raw = api.cuGetErrorName(err)
        if e == _success(api) and raw:
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        e, raw = api.cuGetErrorString(err)
        if e == _success(api) and raw:
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception:  # noqa: BLE001 - the names are a courtesy; the code is still reported
        pass
    return name, text


def _code(err: Any) -> int | None:
    try:
        return int(err)
    except (TypeError, ValueError):
        return None


def call(function: str, *args: Any) -> Any:
    """``cuda.bindings.driver.<function>(*args)``, checked: its outputs (None, one value, or
    a tuple); a CUresult other than CUDA_SUCCESS raises :class:`CudaError`, and so does an
    exception inside the bindings (a driver library that cannot be loaded, ...)."""
    api = _api()
    try:
        result = getattr(api, function)(*args)
    except Exception as exc:  # noqa: BLE001 - reported as the driver call that failed
        raise CudaError(f"{function} failed: {exc}", call=function) from exc
    err, outputs = result[0], tuple(result[1:])
    if err != _success(api):
        name, text = error_name(err)
        raise CudaError(f"{function} failed: {name} ({text})", call=function,
                        code=_code(err), name=name)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else outputs


# ---------------------------------------------------------------------------------------
# is there a GPU?
# ---------------------------------------------------------------------------------------

def _load_driver_library() -> str | None:
    """None when the CUDA driver library loads (``libcuda.so.1``; ``nvcuda.dll`` on
    Windows), else the sentence saying it is missing."""
    if sys.platform == "darwin":
        return "no CUDA device: macOS has no CUDA driver"
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError:
        return (f"no CUDA device: the CUDA driver library {name} is not installed (it comes "
                "with the NVIDIA display driver, not with a Python package)")
    return None


def probe(import_api: Callable[[], Any] | None = None,
          load_library: Callable[[], str | None] = _load_driver_library) -> tuple[bool, str]:
    """Look for a GPU once, without raising: ``(True, "CUDA driver 12.4, 1 device(s)")`` or
    ``(False, "no CUDA device: <why>")``. Calls ``cuInit``, ``cuDeviceGetCount`` and
    ``cuDriverGetVersion``."""
    try:
        api = (import_api or _api)()
    except ImportError:
        return False, "no CUDA device: " + _INSTALL_BINDINGS
    why = load_library()
    if why:
        return False, why
    try:
        (err,) = api.cuInit(0)
    except Exception as exc:  # noqa: BLE001 - the bindings could not load the driver
        return False, f"no CUDA device: the CUDA driver could not be loaded ({exc})"
    if err != _success(api):
        name, text = error_name(err)
        return False, f"no CUDA device: cuInit failed with {name} ({text})"
    try:
        err, count = api.cuDeviceGetCount()
        if err != _success(api):
            name, text = error_name(err)
            return False, f"no CUDA device: cuDeviceGetCount failed with {name} ({text})"
        if count == 0:
            return False, "no CUDA device: the CUDA driver found no device"
        err, version = api.cuDriverGetVersion()
        version = f"{version // 1000}.{version % 1000 // 10}" if err == _success(api) else "?"
    except Exception as exc:  # noqa: BLE001 - never raise from here
        return False, f"no CUDA device: the CUDA driver failed ({exc})"
    return True, f"CUDA driver {version}, {count} device(s)"


def cuda_available() -> tuple[bool, str]:
    """``(True, description)`` when a CUDA device can be used, else ``(False, sentence)``
    with a sentence starting "no CUDA device: ". Never raises; probed once per process
    (:func:`probe`)."""
    global _STATUS
    with _LOCK:
        if _STATUS is None:
            double = _API is not None and not _is_bindings(_API)
            _STATUS = probe(load_library=(lambda: None) if double else _load_driver_library)
        return _STATUS


def require_cuda() -> Any:
    """The driver API module, or :class:`NoCudaDevice` with :func:`cuda_available`'s
    sentence."""
    ok, why = cuda_available()
    if not ok:
        raise NoCudaDevice(why)
    return _api()


def device_count() -> int:
    """How many CUDA devices the driver sees (``cuDeviceGetCount``); 0 without CUDA."""
    if not cuda_available()[0]:
        return 0
    return int(call("cuDeviceGetCount"))


def device_status(ordinal: int = 0) -> tuple[bool, str]:
    """:func:`cuda_available` for one device, ``cuda(ordinal)``."""
    _check_ordinal(ordinal)
    ok, why = cuda_available()
    if not ok:
        return ok, why
    count = device_count()
    if ordinal >= count:
        return False, (f"no CUDA device: cuda({ordinal}) does not exist, the CUDA driver "
                       f"found {count} device(s) (cuda(0)..cuda({count - 1}))")
    return True, why


def require_device(ordinal: int = 0) -> Any:
    """The driver API module when ``cuda(ordinal)`` exists, else :class:`NoCudaDevice`."""
    ok, why = device_status(ordinal)
    if not ok:
        raise NoCudaDevice(why)
    return _api()


def _check_ordinal(ordinal: Any) -> int:
    if isinstance(ordinal, bool) or not isinstance(ordinal, (int, np.integer)) or ordinal < 0:
        raise ValueError(f"a CUDA device number is an integer >= 0, got {ordinal!r}")
    return int(ordinal)


# ---------------------------------------------------------------------------------------
# devices and contexts
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceInfo:
    """One device as the driver describes it (``cuDeviceGetName``, ``cuDeviceTotalMem``,
    ``cuDeviceGetAttribute``); memory sizes in bytes."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessor_count: int
    total_memory: int
    max_threads_per_block: int
    max_shared_memory_per_block: int
    warp_size: int
    clock_rate_khz: int

    @property
    def arch(self) -> str:
        """``sm_80`` for compute capability 8.0."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


def _device_handle(ordinal: int) -> Any:
    require_device(ordinal)
    return call("cuDeviceGet", ordinal)


def device_attribute(ordinal: int, attribute: str) -> int:
    """``cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<attribute>, cuda(ordinal))``;
    ``attribute`` as "MULTIPROCESSOR_COUNT"."""
    dev = _device_handle(ordinal)
    attr = getattr(_api().CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + attribute.upper())
    return int(call("cuDeviceGetAttribute", attr, dev))


def device_info(ordinal: int = 0) -> DeviceInfo:
    """The device ``cuda(ordinal)``: name, compute capability, SMs, memory, limits."""
    dev = _device_handle(ordinal)
    raw = call("cuDeviceGetName", 256, dev)
    name = (raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes)
            else str(raw))

    def attr(a: str) -> int:
        return device_attribute(ordinal, a)
    return DeviceInfo(ordinal=ordinal, name=name,
                      compute_capability=(attr("COMPUTE_CAPABILITY_MAJOR"),
                                          attr("COMPUTE_CAPABILITY_MINOR")),
                      multiprocessor_count=attr("MULTIPROCESSOR_COUNT"),
                      total_memory=int(call("cuDeviceTotalMem", dev)),
                      max_threads_per_block=attr("MAX_THREADS_PER_BLOCK"),
                      max_shared_memory_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK"),
                      warp_size=attr("WARP_SIZE"), clock_rate_khz=attr("CLOCK_RATE"))


class Context:
    """The primary context of ``cuda(ordinal)``: ``cuDevicePrimaryCtxRetain`` on creation,
    ``cuDevicePrimaryCtxRelease`` by :meth:`release`; :meth:`make_current` is
    ``cuCtxSetCurrent``. :func:`context` keeps one per device for the process."""

    def __init__(self, ordinal: int = 0):
        self.ordinal = _check_ordinal(ordinal)
        self.device = _device_handle(self.ordinal)
        self.handle = call("cuDevicePrimaryCtxRetain", self.device)

    def make_current(self) -> "Context":
        if self.handle is None:
            raise CudaError(f"the context of cuda({self.ordinal}) was released")
        call("cuCtxSetCurrent", self.handle)
        return self

    def synchronize(self) -> None:
        """Wait for all the work queued in this context (``cuCtxSynchronize``)."""
        self.make_current()
        call("cuCtxSynchronize")

    def release(self) -> None:
        if self.handle is not None:
            self.handle = None
            call("cuDevicePrimaryCtxRelease", self.device)

    def __enter__(self) -> "Context":
        return self.make_current()

    def __exit__(self, *exc: Any) -> None:
        return None


def context(ordinal: int = 0) -> Context:
    """The process's :class:`Context` of ``cuda(ordinal)``, made current in this thread."""
    ordinal = _check_ordinal(ordinal)
    with _LOCK:
        ctx = _CONTEXTS.get(ordinal)
        if ctx is None or ctx.handle is None:
            ctx = _CONTEXTS[ordinal] = Context(ordinal)
    return ctx.make_current()


def synchronize(ordinal: int = 0) -> None:
    """``cuCtxSynchronize`` in ``cuda(ordinal)``'s primary context."""
    context(ordinal).synchronize()


# ---------------------------------------------------------------------------------------
# device memory
# ---------------------------------------------------------------------------------------

class DevicePointer(int):
    """A raw device address (``CUdeviceptr``) as a kernel argument (a plain int is an int32
    scalar)."""


def _host_array(a: Any, writable: bool = False) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected a numpy array, got {type(a).__name__}")
    if not a.flags.c_contiguous:
        raise ValueError("the host array must be C-contiguous (numpy.ascontiguousarray)")
    if writable and not a.flags.writeable:
        raise ValueError("the host array to copy into is read-only")
    return a


class DeviceBuffer:
    """``nbytes`` of global memory on ``cuda(device)`` (``cuMemAlloc``; ``cuMemFree`` by
    :meth:`free`, on garbage collection, or leaving a ``with``). An empty buffer (0 bytes)
    allocates nothing and has the address 0."""

    def __init__(self, nbytes: int, device: int = 0):
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"a buffer's size is a number of bytes >= 0, got {nbytes!r}")
        self.nbytes, self.device, self._ptr = int(nbytes), _check_ordinal(device), 0
        self._freed = False
        require_device(self.device)
        if self.nbytes:
            context(self.device)
            self._ptr = int(call("cuMemAlloc", self.nbytes))

    @classmethod
    def from_array(cls, array: np.ndarray, device: int = 0) -> "DeviceBuffer":
        """A buffer of ``array.nbytes`` holding a copy of ``array``."""
        array = _host_array(np.ascontiguousarray(array))
        buf = cls(array.nbytes, device)
        buf.copy_from(array)
        return buf

    @property
    def ptr(self) -> int:
        """The device address (``CUdeviceptr``)."""
        if self._freed:
            raise CudaError("this device buffer was freed")
        return self._ptr

    def _check_size(self, a: np.ndarray) -> None:
        if a.nbytes != self.nbytes:
            raise ValueError(f"the host array has {a.nbytes} bytes, the device buffer "
                             f"{self.nbytes}")

    def copy_from(self, array: np.ndarray) -> "DeviceBuffer":
        """Host to device (``cuMemcpyHtoD``) of a C-contiguous array of the same size."""
        a = _host_array(array)
        self._check_size(a)
        if self.nbytes:
            context(self.device)
            call("cuMemcpyHtoD", self.ptr, a.ctypes.data, self.nbytes)
        return self

    def copy_to(self, out: np.ndarray) -> np.ndarray:
        """Device to host (``cuMemcpyDtoH``) into a C-contiguous writable array of the same
        size; returns ``out``."""
        a = _host_array(out, writable=True)
        self._check_size(a)
        if self.nbytes:
            context(self.device)
            call("cuMemcpyDtoH", a.ctypes.data, self.ptr, self.nbytes)
        return out

    def to_numpy(self, shape: Any, dtype: Any) -> np.ndarray:
        """A new host array of ``shape`` and ``dtype`` holding the buffer's bytes."""
        return self.copy_to(np.empty(shape, dtype))

    def free(self) -> None:
        """``cuMemFree`` (once; later calls do nothing)."""
        if self._freed:
            return
        self._freed = True
        ptr, self._ptr = self._ptr, 0
        if ptr:
            context(self.device)
            call("cuMemFree", ptr)

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
            pass

    def __repr__(self) -> str:
        state = "freed" if self._freed else f"0x{self._ptr:x}"
        return f"<DeviceBuffer {self.nbytes} bytes on cuda({self.device}) at {state}>"


# ---------------------------------------------------------------------------------------
# PTX modules
# ---------------------------------------------------------------------------------------

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)")


def ptx_entries(ptx_text: str) -> list[str]:
    """The kernel names (``.entry``) of a PTX text, in order."""
    return _ENTRY.findall(ptx_text)


def check_ptx(ptx_text: Any) -> bytes:
    """The PTX as the NUL-terminated bytes cuModuleLoadDataEx reads; ValueError/TypeError
    for what is not a PTX text (not a str, empty, a NUL inside, no ``.version`` or
    ``.target`` directive, no ``.entry``)."""
    if not isinstance(ptx_text, str):
        raise TypeError(f"a PTX text is a str, got {type(ptx_text).__name__}")
    if not ptx_text.strip():
        raise ValueError("the PTX text is empty")
    if "\0" in ptx_text:
        raise ValueError("the PTX text contains a NUL character")
    for directive in (".version", ".target"):
        if not re.search(rf"^\s*\{directive}\b", ptx_text, re.M):
            raise ValueError(f"not a PTX text: it has no {directive} directive")
    if not ptx_entries(ptx_text):
        raise ValueError("the PTX text has no kernel (.entry)")
    return ptx_text.encode() + b"\0"


def _log(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()


class DriverFunction:
    """One kernel of a loaded module (``CUfunction``): launch it with :func:`launch`."""

    def __init__(self, module: "DriverModule", name: str, handle: Any):
        self.module, self.name, self.handle = module, name, handle

    def attribute(self, attribute: str) -> int:
        """``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_<attribute>)``, e.g. "NUM_REGS",
        "MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES"."""
        attr = getattr(_api().CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + attribute.upper())
        context(self.module.device)
        return int(call("cuFuncGetAttribute", attr, self.handle))

    def __repr__(self) -> str:
        return f"<DriverFunction {self.name} on cuda({self.module.device})>"


class DriverModule:
    """A PTX loaded into ``cuda(device)``'s primary context (``CUmodule``):
    ``module[name]`` is a :class:`DriverFunction` (``cuModuleGetFunction``); ``info_log``
    the JIT's messages; :meth:`unload` is ``cuModuleUnload``."""

    def __init__(self, handle: Any, device: int, entries: list[str], info_log: str = ""):
        self.handle, self.device, self.entries, self.info_log = handle, device, entries, info_log
        self._functions: dict[str, DriverFunction] = {}

    def get_function(self, name: str) -> DriverFunction:
        f = self._functions.get(name)
        if f is not None:
            return f
        if self.handle is None:
            raise CudaError("this module was unloaded")
        if not isinstance(name, str) or name not in self.entries:
            raise KeyError(f"no kernel {name!r} in this PTX; its kernels: "
                           + ", ".join(self.entries))
        context(self.device)
        f = self._functions[name] = DriverFunction(
            self, name, call("cuModuleGetFunction", self.handle, name.encode()))
        return f

    __getitem__ = get_function

    def unload(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            self._functions.clear()
            context(self.device)
            call("cuModuleUnload", handle)

    def __repr__(self) -> str:
        return f"<DriverModule {', '.join(self.entries)} on cuda({self.device})>"


def load_ptx(ptx_text: str, device: int = 0) -> DriverModule:
    """Load a PTX text into ``cuda(device)`` (``cuModuleLoadDataEx``, the driver's JIT, with
    its info and error log buffers). A PTX the JIT refuses raises :class:`CudaError` whose
    message and ``log`` carry the JIT's error log."""
    image = check_ptx(ptx_text)
    device = _check_ordinal(device)
    api = require_device(device)
    context(device)
    info, error = bytearray(JIT_LOG_BYTES), bytearray(JIT_LOG_BYTES)
    J = api.CUjit_option
    options = [J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
               J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
               J.CU_JIT_LOG_VERBOSE]
    values = [info, JIT_LOG_BYTES, error, JIT_LOG_BYTES, 1]
    try:
        handle = call("cuModuleLoadDataEx", image, len(options), options, values)
    except CudaError as exc:
        log = _log(error)
        raise CudaError(f"{exc}" + (f"\nthe JIT's log:\n{log}" if log else ""),
                        call=exc.call, code=exc.code, name=exc.name, log=log) from None
    return DriverModule(handle, device, ptx_entries(ptx_text), _log(info))


# ---------------------------------------------------------------------------------------
# launches
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PackedParams:
    """Kernel parameters as ``cuLaunchKernel``'s ``kernelParams``: ``slots`` the values
    (ctypes objects, in order), ``pointers`` a ``void*[n]`` whose i-th entry is the address
    of ``slots[i]``; ``address`` the array's address (0 for no parameter: NULL)."""

    slots: tuple
    pointers: Any

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers) if self.slots else 0

    def __len__(self) -> int:
        return len(self.slots)


def _slot(arg: Any, i: int) -> Any:
    """The ctypes value of one kernel argument."""
    if isinstance(arg, DeviceBuffer):
        return ctypes.c_uint64(arg.ptr)
    if isinstance(arg, DevicePointer) or type(arg).__name__ == "CUdeviceptr":
        return ctypes.c_uint64(int(arg))
    if isinstance(arg, (bool, np.bool_)):
        raise TypeError(f"kernel argument {i}: a bool; pass an int32 (0 or 1)")
    if isinstance(arg, (int, np.int32)):
        if not -2**31 <= int(arg) < 2**31:
            raise ValueError(f"kernel argument {i}: {int(arg)} does not fit an int32")
        return ctypes.c_int32(int(arg))
    scalars = {np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint32): ctypes.c_uint32,
               np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float,
               np.dtype(np.float64): ctypes.c_double}
    if isinstance(arg, np.generic) and arg.dtype in scalars:
        return scalars[arg.dtype](arg.item())
    raise TypeError(f"kernel argument {i}: {type(arg).__name__} is not a kernel argument "
                    "(a DeviceBuffer or DevicePointer for a buffer, an int for an int32, a "
                    "numpy scalar for another type)")


def pack_params(args: Sequence[Any]) -> PackedParams:
    """``args`` laid out for ``cuLaunchKernel``: a DeviceBuffer / DevicePointer /
    ``CUdeviceptr`` becomes a ``CUdeviceptr`` (uint64), a Python int an ``int32``
    (range-checked), a numpy scalar its own type."""
    slots = tuple(_slot(a, i) for i, a in enumerate(args))
    pointers = (ctypes.c_void_p * max(len(slots), 1))(*[ctypes.addressof(s) for s in slots])
    return PackedParams(slots, pointers)


def launch_dims(grid: Any, block: Any) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``grid`` and ``block`` (an int or 1 to 3 ints) as 3-tuples, checked against CUDA's
    limits (threads per block, block and grid extents)."""
    def dims(value: Any, what: str, limits: tuple) -> tuple[int, int, int]:
        v = (value,) if isinstance(value, (int, np.integer)) else \
            tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(v) <= 3 or any(isinstance(x, bool) or not isinstance(
                x, (int, np.integer)) or x < 1 for x in v):
            raise ValueError(f"{what} is 1 to 3 positive integers, got {value!r}")
        v = tuple(int(x) for x in v) + (1,) * (3 - len(v))
        for axis, x, limit in zip("xyz", v, limits):
            if x > limit:
                raise ValueError(f"{what}.{axis} = {x} is over CUDA's limit {limit}")
        return v
    g = dims(grid, "grid", MAX_GRID_DIMS)
    b = dims(block, "block", MAX_BLOCK_DIMS)
    if b[0] * b[1] * b[2] > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block {b} has {b[0] * b[1] * b[2]} threads, over CUDA's limit "
                         f"{MAX_THREADS_PER_BLOCK}")
    return g, b


def launch(function: DriverFunction, grid: Any, block: Any, args: Sequence[Any],
           shared_bytes: int = 0, stream: Any = None) -> None:
    """Enqueue ``function`` on ``stream`` (None: the default stream) with ``cuLaunchKernel``:
    ``grid`` blocks of ``block`` threads, ``shared_bytes`` of dynamic shared memory, the
    arguments packed by :func:`pack_params`. Asynchronous: errors of the kernel itself show
    at the next synchronising call."""
    g, b = launch_dims(grid, block)
    if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, int) or shared_bytes < 0:
        raise ValueError(f"shared_bytes is a number of bytes >= 0, got {shared_bytes!r}")
    params = pack_params(args)
    require_cuda()
    if not isinstance(function, DriverFunction):
        raise TypeError(f"launch takes a DriverFunction (load_ptx(...)[name]), got "
                        f"{type(function).__name__}")
    context(function.module.device)
    call("cuLaunchKernel", function.handle, *g, *b, shared_bytes,
         0 if stream is None else stream, params.address, 0)


def check_kernel_args(kernel: Kernel, args: Sequence[Any]) -> None:
    """``args`` against a lowered :class:`~engine.gpu.kernel.Kernel`'s parameters, in
    order: a buffer parameter takes a DeviceBuffer (large enough) or a DevicePointer, a
    scalar an int fitting int32."""
    if len(args) != len(kernel.params):
        raise TypeError(f"kernel {kernel.name} takes {len(kernel.params)} arguments, got "
                        f"{len(args)}")
    buffers = {id(p) for p in kernel.buffer_params}
    for p, a in zip(kernel.params, args):
        if id(p) in buffers:
            if not isinstance(a, (DeviceBuffer, DevicePointer)):
                raise TypeError(f"kernel {kernel.name}: parameter {p.name} is a buffer, got "
                                f"{type(a).__name__}")
            need = _buffer_bytes(p)
            if isinstance(a, DeviceBuffer) and need is not None and a.nbytes < need:
                raise ValueError(f"kernel {kernel.name}: buffer {p.name} needs {need} bytes, "
                                 f"the device buffer has {a.nbytes}")
        elif isinstance(a, bool) or not isinstance(a, (int, np.integer)) \
                or not -2**31 <= int(a) < 2**31:
            raise TypeError(f"kernel {kernel.name}: parameter {p.name} is an int32, got {a!r}")


def _buffer_bytes(buf: Any) -> int | None:
    n = 1
    for s in buf.shape:
        c = E.as_const_int(s)
        if c is None:
            return None
        n *= c
    return n * bytes_of(buf.dtype)


def launch_kernel(kernel: Kernel, function: DriverFunction, args: Sequence[Any],
                  stream: Any = None) -> None:
    """Launch a lowered kernel's loaded function with the kernel's grid and block (its
    shared memory is static, declared in the PTX)."""
    check_kernel_args(kernel, args)
    launch(function, kernel.grid, kernel.block, args, 0, stream)


# ---------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------

def time_launches(fn: Callable[[], Any], number: int = 10, repeat: int = 3,
                  device: int = 0, stream: Any = None) -> list[float]:
    """Seconds per call of ``fn`` (which enqueues work, e.g. a :func:`launch`), one figure
    per repeat, measured on the GPU with events: ``cuEventRecord`` before and after
    ``number`` calls, ``cuEventSynchronize``, ``cuEventElapsedTime``. One call warms up
    first. Events are made with ``cuEventCreate`` and destroyed (``cuEventDestroy``)."""
    for what, v in (("number", number), ("repeat", repeat)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{what} must be a positive integer, got {v!r}")
    if not callable(fn):
        raise TypeError("time_launches takes a function that enqueues the work")
    require_device(device)
    context(device)
    s = 0 if stream is None else stream
    flags = _api().CUevent_flags.CU_EVENT_DEFAULT
    start, end = call("cuEventCreate", flags), None
    try:
        end = call("cuEventCreate", flags)
        fn()  # warm-up
        call("cuEventRecord", start, s)
        call("cuEventSynchronize", start)
        out = []
        for _ in range(repeat):
            call("cuEventRecord", start, s)
            for _ in range(number):
                fn()
            call("cuEventRecord", end, s)
            call("cuEventSynchronize", end)
            out.append(float(call("cuEventElapsedTime", start, end)) / 1e3 / number)
        return out
    finally:
        for ev in (start, end):
            if ev is not None:
                call("cuEventDestroy", ev)


__all__ = ["CudaError", "NoCudaDevice", "cuda_available", "probe", "require_cuda",
           "require_device", "device_count", "device_status", "DeviceInfo", "device_info",
           "device_attribute", "Context", "context", "synchronize", "DevicePointer",
           "DeviceBuffer", "check_ptx", "ptx_entries", "DriverModule", "DriverFunction",
           "load_ptx", "PackedParams", "pack_params", "launch_dims", "launch",
           "check_kernel_args", "launch_kernel", "time_launches", "call", "error_name",
           "use_api", "JIT_LOG_BYTES"]
