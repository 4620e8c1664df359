"""The course's ``tvm.nd`` and ``tvm.cpu()``: arrays handed to and returned by the Relax
virtual machine.

:class:`NDArray` *is* a ``numpy.ndarray`` (a subclass: everything numpy does works on it, no
copy) with TVM's ``.numpy()`` (a plain ndarray view of the same memory) and
``.copyfrom(array)``; :func:`array` makes one from anything numpy accepts, as
``tvm.nd.array(img.reshape(1, 784))`` does. Functions registered with
``engine.register_func`` receive NDArrays, so ``torch.from_dlpack(x)`` (DLPack) and numpy
both work on them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NDArray", "array", "empty", "Device", "cpu", "device"]


class NDArray(np.ndarray):
    """A numpy array with TVM's ``numpy()`` / ``copyfrom()``."""

    def numpy(self) -> np.ndarray:
        """The same memory as a plain ``numpy.ndarray``."""
        return self.view(np.ndarray)

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def copyfrom(self, source: Any) -> "NDArray":
        src = np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match the array's "
                             f"{self.shape}")
        np.copyto(self, src, casting="same_kind")
        return self

    @property
    def device(self) -> "Device":
        return cpu()


def as_ndarray(a: np.ndarray) -> NDArray:
    """``a`` seen as an :class:`NDArray` (no copy)."""
    return a.view(NDArray)


def array(data: Any, device: Any = None, dtype: Any = None) -> NDArray:
    """A C-contiguous copy of ``data`` as an :class:`NDArray` (``tvm.nd.array``)."""
    _check_device(device)
    if isinstance(data, NDArray):
        data = data.numpy()
    return np.array(data, dtype=dtype, order="C", copy=True).view(NDArray)


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> NDArray:
    """An uninitialised :class:`NDArray` (``tvm.nd.empty``)."""
    _check_device(device)
    return np.empty(tuple(shape), dtype=dtype).view(NDArray)


class Device:
    """The host CPU, the one device this engine runs on (``tvm.cpu(0)``)."""

    device_type = 1

    def __init__(self, index: int = 0):
        self.device_id = index

    def __repr__(self) -> str:
        return f"cpu({self.device_id})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("cpu", self.device_id))


def cpu(index: int = 0) -> Device:
    """The host CPU (``tvm.cpu()``)."""
    if not isinstance(index, int) or index != 0:
        raise ValueError(f"this engine has one CPU device, cpu(0); got cpu({index!r})")
    return Device(0)


def device(name: str = "cpu", index: int = 0) -> Device:
    """``tvm.device("cpu")``: only the CPU is known."""
    _check_device(name)
    return cpu(index)


def _check_device(dev: Any) -> None:
    if dev is None or isinstance(dev, Device):
        return
    if isinstance(dev, str) and dev.split()[0] in ("cpu", "llvm"):
        return
    raise ValueError(f"unknown device {dev!r}: this engine runs on the host CPU only "
                     "(pass engine.cpu() or leave it out)")


def check_device(dev: Any) -> None:
    """Raise ValueError unless ``dev`` names the CPU (None, ``cpu()``, "cpu", "llvm")."""
    _check_device(dev)
