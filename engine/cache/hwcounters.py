"""Hardware cache-miss counters through Linux ``perf_event_open`` (called via ctypes).

:func:`probe` opens the counters once and tells whether they work (many virtual machines
expose no PMU: the syscall then fails with ENOENT/EOPNOTSUPP, or ``perf_event_paranoid``
forbids it with EACCES). :func:`measure` runs a callable between enable and disable of
the L1D read-miss and last-level-cache miss counters of the calling thread (user space only)
and returns the counts; when counters are unavailable it returns a result whose
``available`` is False and whose ``reason`` explains why, in plain words.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import platform
from typing import Callable

PERF_TYPE_HARDWARE = 0
PERF_TYPE_HW_CACHE = 3
PERF_COUNT_HW_CACHE_L1D = 0
PERF_COUNT_HW_CACHE_LL = 2
PERF_COUNT_HW_CACHE_OP_READ = 0
PERF_COUNT_HW_CACHE_RESULT_ACCESS = 0
PERF_COUNT_HW_CACHE_RESULT_MISS = 1
PERF_COUNT_HW_CACHE_MISSES = 3

PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_RESET = 0x2403

_SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "arm64": 241, "i386": 336, "i686": 336}

# flag bits in the bitfield word of perf_event_attr
_DISABLED = 1 << 0
_EXCLUDE_KERNEL = 1 << 5
_EXCLUDE_HV = 1 << 6


class _PerfEventAttr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved", ctypes.c_uint16),
    ]


def _cache_config(cache: int, op: int, result: int) -> int:
    return cache | (op << 8) | (result << 16)


#: name -> (perf type, config)
EVENTS = {
    "L1D read misses": (PERF_TYPE_HW_CACHE, _cache_config(
        PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)),
    "LLC misses": (PERF_TYPE_HW_CACHE, _cache_config(
        PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)),
}
#: used when the LL cache event is not supported but generic cache misses are
FALLBACK_LLC = (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES)


@dataclasses.dataclass
class CounterResult:
    available: bool
    reason: str = ""
    counts: dict = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        if not self.available:
            return f"hardware counters: not available ({self.reason})"
        text = "hardware counters: " + ", ".join(f"{k} {v:,}" for k, v in self.counts.items())
        return text + (f" ({self.reason})" if self.reason else "")

    def to_dict(self) -> dict:
        return {"available": self.available, "reason": self.reason, "counts": dict(self.counts)}


_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _open(ptype: int, config: int) -> int:
    """File descriptor of a disabled counter for this thread, or ``-errno``."""
    nr = _SYSCALL_NR.get(platform.machine())
    if nr is None:
        return -errno.ENOSYS
    attr = _PerfEventAttr()
    attr.type = ptype
    attr.size = ctypes.sizeof(_PerfEventAttr)
    attr.config = config
    attr.flags = _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV
    libc = _syscall()
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(nr), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        return -ctypes.get_errno()
    return int(fd)


def _explain(err: int) -> str:
    name = errno.errorcode.get(err, str(err))
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return (f"perf_event_open failed with {name}: this CPU or virtual machine exposes no "
                "hardware performance counters for cache events")
    if err in (errno.EACCES, errno.EPERM):
        paranoid = "?"
        try:
            with open("/proc/sys/kernel/perf_event_paranoid") as f:
                paranoid = f.read().strip()
        except OSError:
            pass
        return (f"perf_event_open failed with {name}: not permitted (perf_event_paranoid is "
                f"{paranoid}; lower it to 2 or less, or run with CAP_PERFMON)")
    if err == errno.ENOSYS:
        return f"perf_event_open is not available on {platform.system()} {platform.machine()}"
    return f"perf_event_open failed with {name} ({os.strerror(err)})"


_PROBE: CounterResult | None = None


def probe() -> CounterResult:
    """Whether the counters can be opened here (cached after the first call)."""
    global _PROBE
    if _PROBE is None:
        if platform.system() != "Linux":
            _PROBE = CounterResult(False, f"perf_event_open needs Linux, this is {platform.system()}")
        else:
            fds, reason = _open_all()
            for fd in fds.values():
                os.close(fd)
            _PROBE = CounterResult(not reason, reason)
    return _PROBE


def _open_all() -> tuple[dict, str]:
    fds: dict = {}
    for name, (ptype, config) in EVENTS.items():
        fd = _open(ptype, config)
        if fd < 0 and name == "LLC misses":
            fd = _open(*FALLBACK_LLC)
        if fd < 0:
            for f in fds.values():
                os.close(f)
            return {}, _explain(-fd)
        fds[name] = fd
    return fds, ""


def measure(fn: Callable[[], object], repeat: int = 1,
            before: Callable[[], object] | None = None) -> CounterResult:
    """Counts of L1D read misses and LLC misses while ``fn()`` runs (``repeat`` times, summed;
    ``before()``, e.g. a cache flush, runs before each repetition with the counters off)."""
    import fcntl
    pr = probe()
    if not pr.available:
        return CounterResult(False, pr.reason)
    fds, reason = _open_all()
    if reason:
        return CounterResult(False, reason)
    try:
        for fd in fds.values():
            fcntl.ioctl(fd, PERF_EVENT_IOC_RESET, 0)
        for _ in range(repeat):
            if before is not None:
                before()
            for fd in fds.values():
                fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
            fn()
            for fd in fds.values():
                fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
        counts = {name: int.from_bytes(os.read(fd, 8), "little") for name, fd in fds.items()}
    finally:
        for fd in fds.values():
            os.close(fd)
    return CounterResult(True, "", counts)
