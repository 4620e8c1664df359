"""The course's ``tvm.nd`` and ``tvm.cpu()``: arrays handed to and returned by the Relax
virtual machine.

:class:`NDArray` *is* a ``numpy.ndarray`` (a subclass: everything numpy does works on it, no
copy) with TVM's ``.numpy()`` (a plain ndarray view of the same memory) and
``.copyfrom(array)``; :func:`array` makes one from anything numpy accepts, as
``tvm.nd.array(img.reshape(1, 784))`` does. Functions registered with
``engine.register_func`` receive NDArrays, so ``torch.from_dlpack(x)`` (DLPack) and numpy
both work on them.

``cuda(0)`` is the GPU as the course names it (``tvm.cuda(0)``): ``.exist`` says whether it
can be used, ``.why_not`` why not ("no CUDA device: ..."). ``array(x, cuda(0))`` keeps the
host data and, when the GPU exists, a copy in device memory (``.device_data``: an
``engine.gpu.driver.DeviceBuffer``), which ``.numpy()`` copies back first; without a GPU it is
a host array tagged with the cuda device (the GPU emulator runs on those). The GPU side is
registered from above (:func:`register_cuda_backend`, by ``engine/__init__``): this module,
at the bottom of the engine, never imports ``engine.gpu``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NDArray", "array", "empty", "Device", "CudaDevice", "cpu", "cuda", "device",
           "register_cuda_backend"]

#: DLPack's device types, TVM's ``Device.device_type``: kDLCPU, kDLCUDA
CPU_DEVICE_TYPE, CUDA_DEVICE_TYPE = 1, 2


class NDArray(np.ndarray):
    """A numpy array with TVM's ``numpy()`` / ``copyfrom()``; one made by :func:`array` or
    :func:`empty` for a cuda device also carries that device and, when the GPU exists, its
    device memory (``device_data``). Arrays numpy derives from it (slices, results) are
    plain host arrays."""

    def numpy(self) -> np.ndarray:
        """The same memory as a plain ``numpy.ndarray`` (for an array in GPU memory, after
        copying the device's data back into it)."""
        host = self.view(np.ndarray)
        data = self.device_data
        if data is not None:
            data.copy_to(host)
        return host

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def copyfrom(self, source: Any) -> "NDArray":
        src = np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match the array's "
                             f"{self.shape}")
        np.copyto(self, src, casting="same_kind")
        data = self.device_data
        if data is not None:
            data.copy_from(self.view(np.ndarray))
        return self

    @property
    def device(self) -> "Device | CudaDevice":
        return getattr(self, "_device", None) or cpu()

    @property
    def device_data(self) -> Any:
        """The array's copy in GPU memory (a DeviceBuffer), or None (a host array)."""
        return getattr(self, "_device_data", None)


def as_ndarray(a: np.ndarray) -> NDArray:
    """``a`` seen as an :class:`NDArray` (no copy)."""
    return a.view(NDArray)


def array(data: Any, device: Any = None, dtype: Any = None) -> NDArray:
    """A C-contiguous copy of ``data`` as an :class:`NDArray` (``tvm.nd.array``); on a cuda
    device, also copied to the GPU when it exists (see the module docstring)."""
    dev = _resolve_device(device)
    if isinstance(data, NDArray):
        data = data.numpy()
    out = np.array(data, dtype=dtype, order="C", copy=True).view(NDArray)
    return _place(out, dev, copy=True)


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> NDArray:
    """An uninitialised :class:`NDArray` (``tvm.nd.empty``)."""
    dev = _resolve_device(device)
    return _place(np.empty(tuple(shape), dtype=dtype).view(NDArray), dev, copy=False)


def _place(out: NDArray, dev: Any, copy: bool) -> NDArray:
    if isinstance(dev, CudaDevice):
        out._device = dev
        if dev.exist:
            out._device_data = _cuda_backend().upload(out.view(np.ndarray), dev.device_id,
                                                      copy=copy)
    return out


class Device:
    """The host CPU (``tvm.cpu(0)``)."""

    device_type = CPU_DEVICE_TYPE
    exist = True
    why_not = None

    def __init__(self, index: int = 0):
        self.device_id = index

    def __repr__(self) -> str:
        return f"cpu({self.device_id})"

    __str__ = __repr__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("cpu", self.device_id))


class CudaDevice:
    """A CUDA GPU (``tvm.cuda(0)``): ``exist`` (is it usable here?), ``why_not`` (the
    sentence when not, "no CUDA device: ..."), and TVM's queries (``device_name``,
    ``compute_version``, ``multi_processor_count``, ``max_threads_per_block``,
    ``max_shared_memory_per_block``, ``warp_size``, ``total_global_memory``: None when the
    device does not exist)."""

    device_type = CUDA_DEVICE_TYPE

    def __init__(self, index: int = 0):
        self.device_id = index

    def _status(self) -> tuple[bool, str]:
        backend = _cuda_backend()
        if backend is None:
            return False, "no CUDA device: the engine's GPU support is not loaded (import engine)"
        return backend.status(self.device_id)

    @property
    def exist(self) -> bool:
        return self._status()[0]

    @property
    def why_not(self) -> str | None:
        ok, why = self._status()
        return None if ok else why

    def _attribute(self, name: str) -> Any:
        return _cuda_backend().attributes(self.device_id)[name] if self.exist else None

    device_name = property(lambda self: self._attribute("device_name"))
    compute_version = property(lambda self: self._attribute("compute_version"))
    multi_processor_count = property(lambda self: self._attribute("multi_processor_count"))
    max_threads_per_block = property(lambda self: self._attribute("max_threads_per_block"))
    max_shared_memory_per_block = property(
        lambda self: self._attribute("max_shared_memory_per_block"))
    warp_size = property(lambda self: self._attribute("warp_size"))
    total_global_memory = property(lambda self: self._attribute("total_global_memory"))

    def __repr__(self) -> str:
        return f"cuda({self.device_id})"

    __str__ = __repr__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CudaDevice) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("cuda", self.device_id))


#: a function returning the GPU side (``engine.gpu.device``): ``status(device_id)``,
#: ``attributes(device_id)``, ``upload(host, device_id, copy)``; registered from above
_CUDA_BACKEND: Any = None


def register_cuda_backend(loader: Any) -> None:
    """Register the function that gives the GPU side (called on first use)."""
    global _CUDA_BACKEND
    _CUDA_BACKEND = loader


def _cuda_backend() -> Any:
    return None if _CUDA_BACKEND is None else _CUDA_BACKEND()


def cuda(index: int = 0) -> CudaDevice:
    """The CUDA GPU number ``index`` (``tvm.cuda(0)``); see :class:`CudaDevice`."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"a CUDA device number is an integer >= 0; got cuda({index!r})")
    return CudaDevice(index)


def cpu(index: int = 0) -> Device:
    """The host CPU (``tvm.cpu()``)."""
    if not isinstance(index, int) or index != 0:
        raise ValueError(f"this engine has one CPU device, cpu(0); got cpu({index!r})")
    return Device(0)


def device(name: str = "cpu", index: int = 0) -> "Device | CudaDevice":
    """``tvm.device("cpu")`` or ``tvm.device("cuda", 0)``."""
    if isinstance(name, str) and name.split() and name.split()[0] in ("cuda", "gpu"):
        return cuda(index)
    _check_device(name)
    return cpu(index)


def _resolve_device(dev: Any) -> "Device | CudaDevice":
    """The device an array is made for: the CPU (None, cpu(), "cpu", "llvm") or a
    :class:`CudaDevice` (cuda(i), "cuda")."""
    if isinstance(dev, CudaDevice):
        return dev
    if isinstance(dev, str) and dev.split() and dev.split()[0] in ("cuda", "gpu"):
        return cuda(0)
    _check_device(dev)
    return cpu()


def _check_device(dev: Any) -> None:
    if dev is None or isinstance(dev, Device):
        return
    if isinstance(dev, str) and dev.split() and dev.split()[0] in ("cpu", "llvm"):
        return
    if isinstance(dev, CudaDevice) or (isinstance(dev, str) and dev.split()
                                        and dev.split()[0] in ("cuda", "gpu")):
        raise ValueError(f"{dev}: this runs on the host CPU only (pass engine.cpu() or "
                         "leave the device out)")
    raise ValueError(f"unknown device {dev!r}: pass engine.cpu() or engine.cuda(0), or leave "
                     "it out")


def check_device(dev: Any) -> None:
    """Raise ValueError unless ``dev`` names the CPU (None, ``cpu()``, "cpu", "llvm")."""
    _check_device(dev)
