"""engine.gpu.driver (the CUDA driver API) and the cuda device of engine.nd / tvm.

Three kinds of tests:

* the machine without a GPU (this one, CI): every operation that needs a GPU says so with
  the sentence "no CUDA device: ..." raised from the engine, never from inside the bindings;
  they are skipped, with the reason shown, on a machine that has a GPU;
* the driver's calls against a test double of ``cuda.bindings.driver`` (:class:`FakeDriver`:
  the same functions and return tuples, the bindings' own enums, host memory standing in for
  the device's and a vector add run in Python for a launch): kernel parameter packing as the
  driver reads it, JIT logs, error names, contexts, copies, events;
* ``@pytest.mark.gpu``: the same on a real GPU (vector add launched and timed), skipped with
  the "no CUDA device: ..." sentence where there is none.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from cuda.bindings import driver as real

import engine
from engine import nd
from engine import tvm
from gpu_kernel_samples import vector_add_ptx
from engine.gpu import driver
from engine.gpu import device as gpu_device
from engine.gpu.driver import (CudaError, DeviceBuffer, DevicePointer, NoCudaDevice,
                               check_kernel_args, check_ptx, cuda_available, launch,
                               launch_dims, load_ptx, pack_params, time_launches)
from engine.gpu.kernel import Kernel
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer

HAVE_GPU, WHY = cuda_available()
without_gpu = pytest.mark.skipif(HAVE_GPU, reason=f"a CUDA device exists ({WHY}): these "
                                 "tests are of a machine without one")

#: c[i] = a[i] + b[i] for i < n
VECTOR_ADD_PTX = vector_add_ptx("sm_60")


def _assert_no_device(excinfo) -> None:
    """Raised by the engine with the sentence, not from inside the bindings."""
    assert isinstance(excinfo.value, RuntimeError)
    assert str(excinfo.value).startswith("no CUDA device: ")
    assert excinfo.value.__cause__ is None
    assert excinfo.traceback[-1].path.name == "driver.py"


# ---------------------------------------------------------------------------------------
# this machine: no GPU
# ---------------------------------------------------------------------------------------

@without_gpu
def test_cuda_is_not_available_and_says_why():
    ok, why = cuda_available()
    assert ok is False and why.startswith("no CUDA device: ")
    assert cuda_available() == (ok, why)  # probed once
    assert driver.device_count() == 0
    assert driver.device_status(3) == (False, why)


@without_gpu
def test_the_cuda_device_does_not_exist_and_says_why():
    for dev in (engine.cuda(0), engine.cuda(), tvm.cuda(0), tvm.runtime.cuda(0),
                tvm.device("cuda", 0), nd.device("gpu")):
        assert dev.exist is False
        assert dev.why_not == WHY
        assert str(dev) == repr(dev) == "cuda(0)"
        assert dev.device_type == 2 and dev.device_id == 0
        assert dev.device_name is None and dev.compute_version is None
    assert engine.cuda(1) != engine.cuda(0) and engine.cuda(1) == tvm.cuda(1)
    assert engine.cuda(0) != engine.cpu(0) and engine.cpu().exist is True
    assert len({engine.cuda(0), tvm.cuda(0)}) == 1
    with pytest.raises(ValueError, match="integer >= 0"):
        engine.cuda(-1)


@without_gpu
def test_an_array_for_the_cuda_device_is_a_host_array_tagged_with_it():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    for a in (nd.array(x, engine.cuda(0)), tvm.nd.array(x, tvm.cuda(0)),
              tvm.runtime.tensor(x, tvm.cuda(0)), nd.array(x, "cuda")):
        assert a.device == engine.cuda(0)
        assert a.device_data is None
        np.testing.assert_array_equal(a.numpy(), x)
        assert type(a.numpy()) is np.ndarray
    a = nd.array(x, engine.cuda(0))
    a.copyfrom(x * 2)
    np.testing.assert_array_equal(a.numpy(), x * 2)
    e = nd.empty((2, 3), "int32", engine.cuda(0))
    assert e.shape == (2, 3) and e.device == engine.cuda(0)
    assert nd.array(x).device == engine.cpu()
    assert gpu_device.device_buffer(a) is None


def test_the_cpu_only_parts_refuse_the_cuda_device():
    with pytest.raises(ValueError, match="host CPU only"):
        nd.check_device(engine.cuda(0))
    with pytest.raises(ValueError, match="host CPU only"):
        nd.check_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        nd.array([1], "rocm")


@without_gpu
def test_every_operation_that_needs_a_gpu_says_so():
    fn = lambda: None  # noqa: E731
    attempts = [lambda: DeviceBuffer(16), lambda: DeviceBuffer.from_array(np.ones(4)),
                lambda: load_ptx(VECTOR_ADD_PTX), lambda: launch(object(), 1, 1, ()),
                lambda: time_launches(fn), lambda: driver.device_info(0),
                lambda: driver.Context(0), lambda: driver.context(0),
                lambda: driver.synchronize(), lambda: driver.require_cuda(),
                lambda: gpu_device.upload(np.ones(3), 0), lambda: gpu_device.to_device(np.ones(3))]
    for attempt in attempts:
        with pytest.raises(NoCudaDevice) as excinfo:
            attempt()
        _assert_no_device(excinfo)
        assert isinstance(excinfo.value, CudaError) and str(excinfo.value) == WHY
    # an empty buffer needs no memory but still a device
    with pytest.raises(NoCudaDevice):
        DeviceBuffer(0)
    assert gpu_device.status(0) == (False, WHY)


def test_the_availability_probe_names_each_missing_piece():
    def missing():
        raise ImportError("No module named 'cuda'")
    assert driver.probe(import_api=missing) == (
        False, "no CUDA device: " + driver._INSTALL_BINDINGS)
    no_lib = driver.probe(import_api=lambda: real,
                          load_library=lambda: "no CUDA device: no libcuda.so.1")
    assert no_lib == (False, "no CUDA device: no libcuda.so.1")

    fake = FakeDriver()
    fake.cuInit = lambda flags: (_ for _ in ()).throw(RuntimeError("cannot load libcuda"))
    assert driver.probe(import_api=lambda: fake, load_library=lambda: None) == (
        False, "no CUDA device: the CUDA driver could not be loaded (cannot load libcuda)")
    fake = FakeDriver()
    fake.cuInit = lambda flags: (real.CUresult.CUDA_ERROR_NO_DEVICE,)
    previous = driver.use_api(fake)  # error_name asks the double for the names
    try:
        got = driver.probe(import_api=lambda: fake, load_library=lambda: None)
    finally:
        driver.use_api(previous)
    assert got == (False, "no CUDA device: cuInit failed with CUDA_ERROR_NO_DEVICE "
                          "(no CUDA-capable device is detected)")
    fake = FakeDriver(devices=0)
    assert driver.probe(import_api=lambda: fake, load_library=lambda: None) == (
        False, "no CUDA device: the CUDA driver found no device")
    fake = FakeDriver()
    assert driver.probe(import_api=lambda: fake, load_library=lambda: None) == (
        True, "CUDA driver 12.4, 1 device(s)")


def test_the_driver_library_check_gives_a_sentence_or_nothing():
    why = driver._load_driver_library()
    assert why is None or (why.startswith("no CUDA device: ") and "display driver" in why)


# ---------------------------------------------------------------------------------------
# arguments, checked the same on every machine
# ---------------------------------------------------------------------------------------

def _read(address: int, ctype):
    return ctypes.cast(ctypes.c_void_p(address), ctypes.POINTER(ctype)).contents.value


def test_kernel_parameters_are_packed_as_an_array_of_pointers_to_the_values():
    args = (DevicePointer(0x7F00_0000_1000), real.CUdeviceptr(0x7F00_0000_2000), 1024, -7,
            np.int32(5), np.float32(1.5), np.int64(-2**40), np.uint32(7), np.float64(0.25))
    p = pack_params(args)
    assert len(p) == len(args) and p.address == ctypes.addressof(p.pointers)
    kinds = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
             ctypes.c_float, ctypes.c_int64, ctypes.c_uint32, ctypes.c_double]
    sizes = [8, 8, 4, 4, 4, 4, 8, 4, 8]
    for i, (slot, kind, size) in enumerate(zip(p.slots, kinds, sizes)):
        assert type(slot) is kind and ctypes.sizeof(slot) == size
        # kernelParams[i] points at the i-th value
        entry = _read(p.address + i * ctypes.sizeof(ctypes.c_void_p), ctypes.c_void_p)
        assert entry == ctypes.addressof(slot)
    values = [_read(p.pointers[i], k) for i, k in enumerate(kinds)]
    assert values == [0x7F00_0000_1000, 0x7F00_0000_2000, 1024, -7, 5, 1.5, -2**40, 7, 0.25]
    assert ctypes.sizeof(p.pointers) == len(args) * ctypes.sizeof(ctypes.c_void_p)


def test_no_kernel_parameter_is_a_null_array():
    assert pack_params(()).address == 0 and len(pack_params(())) == 0


@pytest.mark.parametrize("bad, match", [
    (True, "a bool"), (2**31, "does not fit an int32"), (-2**31 - 1, "does not fit an int32"),
    (1.5, "not a kernel argument"), (np.ones(3), "not a kernel argument"),
    ("x", "not a kernel argument"), (np.int16(3), "not a kernel argument")])
def test_what_is_not_a_kernel_argument_is_refused(bad, match):
    with pytest.raises((TypeError, ValueError), match=f"kernel argument 1: .*{match}|{match}"):
        pack_params((DevicePointer(16), bad))


def test_launch_dimensions_are_checked_against_cudas_limits():
    assert launch_dims(8, 128) == ((8, 1, 1), (128, 1, 1))
    assert launch_dims((4, 2), (16, 16)) == ((4, 2, 1), (16, 16, 1))
    assert launch_dims((2**31 - 1, 65535, 65535), (1, 1, 64))[0][0] == 2**31 - 1
    for grid, block, match in [(0, 1, "positive"), ((1, 2, 3, 4), 1, "1 to 3"),
                               ((1, 65536), 1, "grid.y = 65536"), (2**31, 1, "grid.x"),
                               (1, (1, 1, 65), "block.z = 65"), (1, (32, 33), "1056 threads"),
                               (1, 2048, "block.x = 2048"), (1.0, 1, "positive"),
                               (1, (True,), "positive")]:
        with pytest.raises(ValueError, match=match):
            launch_dims(grid, block)
    with pytest.raises(ValueError, match="shared_bytes"):
        launch(None, 1, 1, (), shared_bytes=-1)
    with pytest.raises(ValueError, match="block"):
        launch(None, 1, 4096, ())
    with pytest.raises(TypeError, match="kernel argument 0"):
        launch(None, 1, 1, (2.5,))


def test_ptx_is_checked_before_the_driver_is_asked():
    assert check_ptx(VECTOR_ADD_PTX).endswith(b"}\n\0")
    assert driver.ptx_entries(VECTOR_ADD_PTX) == ["vector_add"]
    for bad, error, match in [
            (VECTOR_ADD_PTX.encode(), TypeError, "is a str"), ("  \n", ValueError, "empty"),
            (VECTOR_ADD_PTX.replace(".version 7.8", ""), ValueError, "no .version"),
            (VECTOR_ADD_PTX.replace(".target sm_60", ""), ValueError, "no .target"),
            (VECTOR_ADD_PTX.replace(".entry", ".func"), ValueError, "no kernel"),
            (VECTOR_ADD_PTX + "\0", ValueError, "NUL")]:
        with pytest.raises(error, match=match):
            load_ptx(bad)
    with pytest.raises(ValueError, match="device number"):
        load_ptx(VECTOR_ADD_PTX, device=-1)


def test_buffer_sizes_and_timing_counts_are_checked():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="number of bytes"):
            DeviceBuffer(bad)
    for number, repeat in ((0, 1), (1, 0), (1.5, 1)):
        with pytest.raises(ValueError, match="positive integer"):
            time_launches(lambda: None, number, repeat)
    with pytest.raises(TypeError, match="enqueues"):
        time_launches(None)


def _kernel() -> Kernel:
    n = E.Var("n", "int32")
    A, B, C = (Buffer(x, (1024,), "float32") for x in "ABC")
    tx = E.Var("threadIdx_x", "int32")
    body = S.BufferStore(C, E.BufferLoad(A, (tx,)) + E.BufferLoad(B, (tx,)), (tx,))
    return Kernel("vadd", (A, B, C, n), body, grid=(8, 1, 1), block=(128, 1, 1),
                  thread_vars={"threadIdx.x": tx})


def test_the_arguments_of_a_lowered_kernel_are_checked_in_order():
    k = _kernel()
    p = DevicePointer(0x1000)
    check_kernel_args(k, (p, p, p, 1024))
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        check_kernel_args(k, (p, p, p))
    with pytest.raises(TypeError, match="parameter C is a buffer"):
        check_kernel_args(k, (p, p, 3, 1024))
    with pytest.raises(TypeError, match="parameter n is an int32"):
        check_kernel_args(k, (p, p, p, p + 0.5))
    with pytest.raises(TypeError, match="parameter n is an int32"):
        check_kernel_args(k, (p, p, p, 2**32))


# ---------------------------------------------------------------------------------------
# the driver's calls, against a test double of cuda.bindings.driver
# ---------------------------------------------------------------------------------------

R = real.CUresult
J = real.CUjit_option


class FakeDriver:
    """``cuda.bindings.driver`` as the engine calls it, with host memory as device memory.

    Records the calls (``calls``); a loaded module is the PTX text; ``vector_add`` launched
    reads its kernel parameters through the ``kernelParams`` array (u64, u64, u64, u32) and
    adds in Python, thread by thread."""

    CUresult, CUjit_option = real.CUresult, real.CUjit_option
    CUdevice_attribute, CUfunction_attribute = real.CUdevice_attribute, real.CUfunction_attribute
    CUevent_flags = real.CUevent_flags
    NAMES = {R.CUDA_ERROR_NO_DEVICE: "no CUDA-capable device is detected",
             R.CUDA_ERROR_INVALID_PTX: "a PTX JIT compilation failed",
             R.CUDA_ERROR_OUT_OF_MEMORY: "out of memory",
             R.CUDA_ERROR_NOT_FOUND: "named symbol not found"}

    def __init__(self, devices: int = 1):
        self.devices, self.calls, self.memory, self.freed = devices, [], {}, []
        self.current, self.retained, self.time_ms = None, 0, 2.0
        self.fail: dict[str, R] = {}
        self.events = 0

    def _r(self, name: str, *out):
        self.calls.append(name)
        return (self.fail.get(name, R.CUDA_SUCCESS), *out)

    def cuInit(self, flags):
        return self._r("cuInit")

    def cuDeviceGetCount(self):
        return self._r("cuDeviceGetCount", self.devices)

    def cuDriverGetVersion(self):
        return self._r("cuDriverGetVersion", 12040)

    def cuGetErrorName(self, err):
        return (R.CUDA_SUCCESS, err.name.encode())

    def cuGetErrorString(self, err):
        return (R.CUDA_SUCCESS, self.NAMES.get(err, "unknown").encode())

    def cuDeviceGet(self, ordinal):
        return self._r("cuDeviceGet", ("dev", ordinal))

    def cuDeviceGetName(self, length, dev):
        return self._r("cuDeviceGetName", b"Fake GPU\0\0\0")

    def cuDeviceTotalMem(self, dev):
        return self._r("cuDeviceTotalMem", 16 << 30)

    def cuDeviceGetAttribute(self, attr, dev):
        values = {"COMPUTE_CAPABILITY_MAJOR": 8, "COMPUTE_CAPABILITY_MINOR": 0,
                  "MULTIPROCESSOR_COUNT": 108, "MAX_THREADS_PER_BLOCK": 1024,
                  "MAX_SHARED_MEMORY_PER_BLOCK": 49152, "WARP_SIZE": 32,
                  "CLOCK_RATE": 1410000}
        return self._r("cuDeviceGetAttribute", values[attr.name[len("CU_DEVICE_ATTRIBUTE_"):]])

    def cuDevicePrimaryCtxRetain(self, dev):
        self.retained += 1
        return self._r("cuDevicePrimaryCtxRetain", ("ctx", dev))

    def cuDevicePrimaryCtxRelease(self, dev):
        self.retained -= 1
        return self._r("cuDevicePrimaryCtxRelease")

    def cuCtxSetCurrent(self, ctx):
        self.current = ctx
        return self._r("cuCtxSetCurrent")

    def cuCtxSynchronize(self):
        return self._r("cuCtxSynchronize")

    def cuMemAlloc(self, nbytes):
        assert self.current is not None, "no current context"
        if "cuMemAlloc" in self.fail:
            return self._r("cuMemAlloc", real.CUdeviceptr(0))
        block = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(block)] = block
        return self._r("cuMemAlloc", real.CUdeviceptr(ctypes.addressof(block)))

    def cuMemFree(self, ptr):
        self.freed.append(int(ptr))
        del self.memory[int(ptr)]
        return self._r("cuMemFree")

    def _check_device_range(self, ptr: int, nbytes: int) -> None:
        assert any(base <= ptr and ptr + nbytes <= base + len(b)
                   for base, b in self.memory.items()), "not device memory"

    def cuMemcpyHtoD(self, dst, src, nbytes):
        self._check_device_range(int(dst), nbytes)
        ctypes.memmove(int(dst), src, nbytes)
        return self._r("cuMemcpyHtoD")

    def cuMemcpyDtoH(self, dst, src, nbytes):
        self._check_device_range(int(src), nbytes)
        ctypes.memmove(dst, int(src), nbytes)
        return self._r("cuMemcpyDtoH")

    def cuModuleLoadDataEx(self, image, n, options, values):
        assert isinstance(image, bytes) and image.endswith(b"\0") and n == len(options)
        opts = dict(zip(options, values))
        assert opts[J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES] == len(opts[J.CU_JIT_ERROR_LOG_BUFFER])
        assert opts[J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES] == len(opts[J.CU_JIT_INFO_LOG_BUFFER])
        if b"bogus" in image:
            log = b"ptxas application ptx input, line 7; error   : Unknown symbol 'bogus'\0"
            opts[J.CU_JIT_ERROR_LOG_BUFFER][:len(log)] = log
            self.calls.append("cuModuleLoadDataEx")
            return (R.CUDA_ERROR_INVALID_PTX, None)
        info = b"ptxas info    : Used 8 registers\0"
        opts[J.CU_JIT_INFO_LOG_BUFFER][:len(info)] = info
        return self._r("cuModuleLoadDataEx", ("module", image))

    def cuModuleGetFunction(self, module, name):
        assert isinstance(name, bytes)
        if name.decode() not in driver.ptx_entries(module[1].decode()):
            return (R.CUDA_ERROR_NOT_FOUND, None)
        return self._r("cuModuleGetFunction", ("function", name.decode()))

    def cuModuleUnload(self, module):
        return self._r("cuModuleUnload")

    def cuFuncGetAttribute(self, attr, fn):
        return self._r("cuFuncGetAttribute", 8)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launched = (f[1], (gx, gy, gz), (bx, by, bz), shared, stream)
        assert f[1] == "vector_add" and extra == 0
        slot = [_read(params + i * 8, ctypes.c_void_p) for i in range(4)]
        a, b, c = (_read(s, ctypes.c_uint64) for s in slot[:3])
        n = _read(slot[3], ctypes.c_uint32)
        for block in range(gx):
            for thread in range(bx):
                i = block * bx + thread
                if i < n:
                    va, vb = (ctypes.c_float.from_address(p + 4 * i).value for p in (a, b))
                    ctypes.c_float.from_address(c + 4 * i).value = va + vb
        return self._r("cuLaunchKernel")

    def cuEventCreate(self, flags):
        self.events += 1
        return self._r("cuEventCreate", ("event", self.events))

    def cuEventRecord(self, event, stream):
        return self._r("cuEventRecord")

    def cuEventSynchronize(self, event):
        return self._r("cuEventSynchronize")

    def cuEventElapsedTime(self, start, end):
        return self._r("cuEventElapsedTime", self.time_ms)

    def cuEventDestroy(self, event):
        self.events -= 1
        return self._r("cuEventDestroy")


@pytest.fixture
def fake():
    f = FakeDriver()
    previous = driver.use_api(f)
    yield f
    driver.use_api(previous)


def test_with_the_double_cuda_is_available_and_the_device_described(fake):
    assert cuda_available() == (True, "CUDA driver 12.4, 1 device(s)")
    info = driver.device_info(0)
    assert (info.name, info.compute_capability, info.arch, info.multiprocessor_count) == \
        ("Fake GPU", (8, 0), "sm_80", 108)
    assert info.total_memory == 16 << 30 and info.warp_size == 32
    dev = engine.cuda(0)
    assert dev.exist and dev.why_not is None
    assert (dev.device_name, dev.compute_version, dev.multi_processor_count) == \
        ("Fake GPU", "8.0", 108)
    assert engine.cuda(1).exist is False
    assert engine.cuda(1).why_not == ("no CUDA device: cuda(1) does not exist, the CUDA "
                                      "driver found 1 device(s) (cuda(0)..cuda(0))")
    with pytest.raises(NoCudaDevice, match=r"cuda\(1\) does not exist"):
        DeviceBuffer(4, device=1)


def test_the_primary_context_is_retained_once_and_made_current(fake):
    ctx = driver.context(0)
    assert driver.context(0) is ctx and fake.retained == 1
    assert fake.current == ("ctx", ("dev", 0))
    ctx.synchronize()
    ctx.release()
    assert fake.retained == 0
    with pytest.raises(CudaError, match="released"):
        ctx.make_current()
    assert driver.context(0) is not ctx and fake.retained == 1


def test_device_buffers_copy_both_ways_and_free_once(fake):
    x = np.arange(10, dtype=np.float32)
    buf = DeviceBuffer.from_array(x)
    assert buf.nbytes == 40 and buf.ptr in fake.memory
    np.testing.assert_array_equal(buf.to_numpy((10,), np.float32), x)
    out = np.zeros(10, np.float32)
    assert buf.copy_to(out) is out and (out == x).all()
    with pytest.raises(ValueError, match="40"):
        buf.copy_from(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.copy_to(np.zeros(20, np.float32)[::2])
    ro = np.zeros(10, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        buf.copy_to(ro)
    ptr = buf.ptr
    buf.free()
    buf.free()
    assert fake.freed == [ptr]
    with pytest.raises(CudaError, match="freed"):
        buf.ptr
    with DeviceBuffer(0) as empty:
        assert empty.ptr == 0
        empty.copy_from(np.zeros(0))
    assert "cuMemAlloc" in fake.calls and fake.calls.count("cuMemAlloc") == 1


def test_a_failed_driver_call_is_a_cuda_error_with_its_name_and_text(fake):
    fake.fail["cuMemAlloc"] = R.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(CudaError) as excinfo:
        DeviceBuffer(1 << 40)
    e = excinfo.value
    assert str(e) == "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
    assert (e.call, e.code, e.name) == ("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY")

    def broken(*args):
        raise RuntimeError("inside the bindings")
    fake.cuCtxSynchronize = broken
    with pytest.raises(CudaError, match="cuCtxSynchronize failed: inside the bindings"):
        driver.synchronize()


def test_ptx_is_loaded_with_the_jit_logs_and_its_kernels_found(fake):
    mod = load_ptx(VECTOR_ADD_PTX)
    assert mod.entries == ["vector_add"] and mod.info_log == "ptxas info    : Used 8 registers"
    f = mod["vector_add"]
    assert mod.get_function("vector_add") is f and f.attribute("num_regs") == 8
    with pytest.raises(KeyError, match="its kernels: vector_add"):
        mod["main_kernel0"]
    mod.unload()
    with pytest.raises(CudaError, match="unloaded"):
        mod.get_function("other")


def test_a_ptx_the_jit_refuses_raises_with_its_log(fake):
    with pytest.raises(CudaError) as excinfo:
        load_ptx(VECTOR_ADD_PTX.replace("ret;", "bogus;"))
    e = excinfo.value
    assert e.name == "CUDA_ERROR_INVALID_PTX" and e.call == "cuModuleLoadDataEx"
    assert e.log == "ptxas application ptx input, line 7; error   : Unknown symbol 'bogus'"
    assert str(e).startswith("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT "
                             "compilation failed)\nthe JIT's log:\nptxas application")


def test_a_launch_passes_the_packed_parameters_the_driver_reads(fake):
    n = 1000
    a, b = np.random.default_rng(0).random((2, n), dtype=np.float32)
    f = load_ptx(VECTOR_ADD_PTX)["vector_add"]
    da, db, dc = DeviceBuffer.from_array(a), DeviceBuffer.from_array(b), DeviceBuffer(4 * n)
    launch(f, grid=(n + 127) // 128, block=128, args=(da, db, dc, n))
    assert fake.launched == ("vector_add", (8, 1, 1), (128, 1, 1), 0, 0)
    np.testing.assert_array_equal(dc.to_numpy(n, np.float32), a + b)
    with pytest.raises(TypeError, match="DriverFunction"):
        launch("vector_add", 1, 1, ())


def test_a_lowered_kernels_launch_uses_its_grid_and_block(fake):
    f = load_ptx(VECTOR_ADD_PTX)["vector_add"]
    k = Kernel("vector_add", _kernel().params, _kernel().body, grid=(8, 1, 1),
               block=(128, 1, 1))
    bufs = [DeviceBuffer(4096) for _ in range(3)]
    driver.launch_kernel(k, f, (*bufs, 1024))
    assert fake.launched[1:3] == ((8, 1, 1), (128, 1, 1))
    with pytest.raises(ValueError, match="needs 4096 bytes"):
        driver.launch_kernel(k, f, (DeviceBuffer(16), *bufs[1:], 1024))


def test_launches_are_timed_with_events(fake):
    f = load_ptx(VECTOR_ADD_PTX)["vector_add"]
    bufs = [DeviceBuffer(64) for _ in range(3)]
    calls = []

    def run():
        calls.append(1)
        launch(f, 1, 16, (*bufs, 16))
    times = time_launches(run, number=4, repeat=3)
    assert times == [pytest.approx(2.0e-3 / 4)] * 3
    assert len(calls) == 1 + 4 * 3 and fake.events == 0  # warm-up; events destroyed
    assert fake.calls.count("cuEventElapsedTime") == 3


def test_an_array_for_the_cuda_device_keeps_a_device_copy(fake):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = nd.array(x, engine.cuda(0))
    buf = a.device_data
    assert isinstance(buf, DeviceBuffer) and gpu_device.device_buffer(a) is buf
    assert gpu_device.to_device(a) is buf
    # a kernel writes the device memory: numpy() copies it back
    buf.copy_from(x * 10)
    np.testing.assert_array_equal(a.numpy(), x * 10)
    a.copyfrom(x + 1)
    np.testing.assert_array_equal(buf.to_numpy((2, 3), np.float32), x + 1)
    e = nd.empty((4,), "float32", tvm.cuda(0))
    assert e.device_data.nbytes == 16
    other = gpu_device.to_device(np.ones(3, np.float32))
    assert other.nbytes == 12 and other is not buf


# ---------------------------------------------------------------------------------------
# a real GPU
# ---------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=WHY)
def test_gpu_device_info():
    info = driver.device_info(0)
    assert info.name and info.multiprocessor_count > 0 and info.total_memory > 0
    assert info.compute_capability >= (3, 0) and info.warp_size == 32
    assert engine.cuda(0).exist and engine.cuda(0).compute_version


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=WHY)
def test_gpu_vector_add_is_launched_and_timed():
    n = 1 << 20
    rng = np.random.default_rng(0)
    a, b = rng.random((2, n), dtype=np.float32)
    mod = load_ptx(VECTOR_ADD_PTX)
    f = mod["vector_add"]
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer(4 * n) as dc:
        launch(f, grid=(n + 255) // 256, block=256, args=(da, db, dc, n))
        driver.synchronize()
        np.testing.assert_array_equal(dc.to_numpy(n, np.float32), a + b)
        times = time_launches(lambda: launch(f, (n + 255) // 256, 256, (da, db, dc, n)),
                              number=10, repeat=3)
        assert len(times) == 3 and all(0 < t < 1 for t in times)
    mod.unload()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=WHY)
def test_gpu_bad_ptx_raises_with_the_jit_log():
    with pytest.raises(CudaError) as excinfo:
        load_ptx(VECTOR_ADD_PTX.replace("ret;", "bogus_instruction;"))
    assert excinfo.value.log


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=WHY)
def test_gpu_nd_array_round_trips_through_device_memory():
    x = np.arange(100, dtype=np.float32)
    a = nd.array(x, engine.cuda(0))
    assert isinstance(a.device_data, DeviceBuffer)
    np.testing.assert_array_equal(a.numpy(), x)


NO_DRIVER_LIBRARY = driver._load_driver_library()


@pytest.mark.skipif(NO_DRIVER_LIBRARY is None, reason="the CUDA driver library is installed: "
                    "this test is of the bindings without it")
def test_the_real_bindings_accept_the_arguments_as_the_engine_passes_them():
    """Each call as driver.py makes it goes through the bindings' argument conversion and
    fails only where the bindings load the driver library, as a CudaError of ours."""
    J = real.CUjit_option
    options = [J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
               J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
               J.CU_JIT_LOG_VERBOSE]
    params = pack_params((DevicePointer(0x1000), 3))
    host = np.zeros(4, np.float32)
    calls = [("cuModuleLoadDataEx", check_ptx(VECTOR_ADD_PTX), 5, options,
              [bytearray(64), 64, bytearray(64), 64, 1]),
             ("cuModuleGetFunction", real.CUmodule(), b"vector_add"),
             ("cuLaunchKernel", real.CUfunction(), 1, 1, 1, 32, 1, 1, 0, 0, params.address, 0),
             ("cuMemcpyHtoD", 0x1000, host.ctypes.data, 16),
             ("cuMemcpyDtoH", host.ctypes.data, 0x1000, 16), ("cuMemFree", 0x1000),
             ("cuEventRecord", real.CUevent(), 0), ("cuDeviceGetName", 256, real.CUdevice(0)),
             ("cuDeviceGetAttribute",
              real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_WARP_SIZE, real.CUdevice(0))]
    previous = driver.use_api(real)
    try:
        for name, *args in calls:
            with pytest.raises(CudaError, match=f"^{name} failed: ") as excinfo:
                driver.call(name, *args)
            assert type(excinfo.value.__cause__).__name__ == "DynamicLibNotFoundError", name
    finally:
        driver.use_api(previous)
