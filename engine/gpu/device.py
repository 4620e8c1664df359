"""The GPU side of ``engine.nd``'s cuda device: what ``engine.cuda(0).exist`` asks and where
``engine.nd.array(x, engine.cuda(0))`` keeps its data on the GPU.

``engine/__init__`` registers this module with :func:`engine.nd.register_cuda_backend`
(``engine.nd`` is at the bottom of the engine and never imports ``engine.gpu``). It is
called by ``engine.nd`` through three functions: :func:`status`, :func:`attributes` and
:func:`upload`. :func:`device_buffer` and :func:`to_device` give a runtime the GPU memory of
an array.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import driver
from .driver import DeviceBuffer


def status(device_id: int) -> tuple[bool, str]:
    """(True, description) when ``cuda(device_id)`` can be used, else (False, "no CUDA
    device: ..."). Never raises."""
    try:
        return driver.device_status(device_id)
    except Exception as exc:  # noqa: BLE001 - a device's .exist never raises
        return False, f"no CUDA device: {exc}"


def attributes(device_id: int) -> dict[str, Any]:
    """TVM's ``Device`` queries of ``cuda(device_id)`` (``device_name``,
    ``compute_version`` as "8.0", ``multi_processor_count``, ``max_threads_per_block``,
    ``max_shared_memory_per_block``, ``warp_size``, ``total_global_memory``)."""
    info = driver.device_info(device_id)
    return {"device_name": info.name,
            "compute_version": f"{info.compute_capability[0]}.{info.compute_capability[1]}",
            "multi_processor_count": info.multiprocessor_count,
            "max_threads_per_block": info.max_threads_per_block,
            "max_shared_memory_per_block": info.max_shared_memory_per_block,
            "warp_size": info.warp_size, "total_global_memory": info.total_memory}


def upload(host: np.ndarray, device_id: int, copy: bool = True) -> DeviceBuffer:
    """GPU memory of ``host``'s size on ``cuda(device_id)``, holding a copy of it when
    ``copy`` (``cuMemAlloc``, ``cuMemcpyHtoD``); :class:`~engine.gpu.driver.NoCudaDevice`
    without the device."""
    buf = DeviceBuffer(host.nbytes, device_id)
    if copy:
        buf.copy_from(np.ascontiguousarray(host))
    return buf


def device_buffer(array: Any) -> DeviceBuffer | None:
    """The GPU memory of an ``engine.nd`` array made for a cuda device, or None (a host
    array, or no GPU)."""
    return getattr(array, "device_data", None)


def to_device(array: np.ndarray, device_id: int = 0) -> DeviceBuffer:
    """The array's own GPU memory when it has some on ``cuda(device_id)``, else a new
    buffer holding a copy of it (the caller frees that one)."""
    buf = device_buffer(array)
    if buf is not None and buf.device == device_id:
        return buf
    return upload(np.ascontiguousarray(array), device_id)


__all__ = ["status", "attributes", "upload", "device_buffer", "to_device"]
