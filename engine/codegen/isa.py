"""The vector instruction set of a target: what schedules derive their tile sizes from.

:class:`VectorISA` is plain data — float32 lanes per vector register, how many vector
registers, the cache sizes, whether there is a fused multiply-add — and :func:`isa_of`
finds it:

* ``isa_of()`` / ``isa_of(None)`` — the machine we run on: llvmlite's host CPU name and
  features (AVX-512F → 16 lanes and 32 registers, AVX2 → 8 and 16, SSE → 4 and 16), cache
  sizes read from ``/sys/devices/system/cpu/cpu0/cache`` when readable, else typical ones;
* ``isa_of("llvm")`` — the host as well; ``isa_of("llvm -mcpu=skylake-avx512")``,
  ``"llvm -mcpu=haswell"``, ``"llvm -mattr=+avx512f"`` — that x86 CPU (typical caches);
* ``isa_of("llvm -mtriple=aarch64-linux-gnu")`` and ``isa_of("raspberry-pi-5")`` — NEON:
  4 lanes, 32 registers.

Nothing here compiles anything: :mod:`engine.presets`, the tuner's ``auto`` space and the
model page's default recipe read the numbers (a register block of ``registers // 2``
accumulators, ``lanes``-wide vectors, a panel of B that fits L1).
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from functools import lru_cache

__all__ = ["VectorISA", "isa_of", "host_isa", "AVX512", "AVX2", "SSE", "NEON", "KNOWN_ISAS"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class VectorISA:
    """A target's vector registers and caches (float32 lanes; sizes in bytes, None when not
    known)."""

    name: str                      # "avx512", "avx2", "sse", "neon"
    lanes: int                     # float32 lanes per vector register
    registers: int                 # architectural vector registers
    l1d_bytes: int | None = None   # per core
    l2_bytes: int | None = None    # per core
    llc_bytes: int | None = None   # last level, shared
    fma: bool = True
    arch: str = "x86_64"           # "x86_64" or "aarch64"
    cpu: str = ""                  # LLVM's CPU name when known ("znver4", "cortex-a76")

    @property
    def vector_bytes(self) -> int:
        """Bytes of one vector register."""
        return 4 * self.lanes

    @property
    def l1d(self) -> int:
        """L1 data cache bytes, a typical 32 KiB when not known."""
        return self.l1d_bytes or 32 * KiB

    @property
    def l2(self) -> int:
        """L2 bytes per core, a typical 512 KiB when not known."""
        return self.l2_bytes or 512 * KiB

    def describe(self) -> str:
        """One line: ``avx512: 16 float32 lanes x 32 registers, FMA; L1d 32 KiB, ...``."""
        def size(b: int | None) -> str:
            if b is None:
                return "?"
            return f"{b // MiB} MiB" if b >= MiB and b % MiB == 0 else f"{b // KiB} KiB"
        return (f"{self.name}: {self.lanes} float32 lanes x {self.registers} registers"
                f"{', FMA' if self.fma else ''}; L1d {size(self.l1d_bytes)}, "
                f"L2 {size(self.l2_bytes)}, LLC {size(self.llc_bytes)}"
                f"{f' ({self.cpu})' if self.cpu else ''}")


#: typical members of each family (caches of a common part: Skylake-SP / Zen 4 for
#: AVX-512, Haswell for AVX2, Cortex-A76 — the Raspberry Pi 5 — for NEON)
AVX512 = VectorISA("avx512", 16, 32, 32 * KiB, 1 * MiB, 32 * MiB, True)
AVX2 = VectorISA("avx2", 8, 16, 32 * KiB, 256 * KiB, 8 * MiB, True)
SSE = VectorISA("sse", 4, 16, 32 * KiB, 256 * KiB, 8 * MiB, False)
NEON = VectorISA("neon", 4, 32, 64 * KiB, 512 * KiB, 2 * MiB, True, arch="aarch64")
KNOWN_ISAS = {i.name: i for i in (AVX512, AVX2, SSE, NEON)}

#: named boards: target string -> ISA
BOARDS = {"raspberry-pi-5": replace(NEON, cpu="cortex-a76")}

#: x86 CPU names LLVM knows, by the widest vectors they have (others: by prefix below)
_AVX512_CPUS = {"skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids",
                "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids",
                "znver4", "znver5", "x86-64-v4", "knl", "knm"}
_AVX2_CPUS = {"haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
              "arrowlake", "arrowlake-s", "lunarlake", "gracemont", "sierraforest",
              "grandridge", "clearwaterforest", "pantherlake", "znver1", "znver2", "znver3",
              "x86-64-v3", "bdver4"}


def _family_from_features(feats: set[str]) -> VectorISA:
    if "avx512f" in feats:
        return AVX512
    if "avx2" in feats:
        return replace(AVX2, fma="fma" in feats)
    if "avx" in feats:
        return replace(AVX2, name="avx", fma="fma" in feats)
    return SSE


def _family_from_cpu(cpu: str) -> VectorISA | None:
    if cpu in _AVX512_CPUS:
        return AVX512
    if cpu in _AVX2_CPUS:
        return AVX2
    return None


def _sys_cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int]:
    """{"l1d", "l2", "llc"} -> bytes from Linux's cache description (empty when not
    readable)."""
    out: dict[str, int] = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return out
    top = 0
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = _parse_size(f.read().strip())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        if level == 1:
            out["l1d"] = size
        elif level == 2:
            out["l2"] = size
        if level >= 3 and level >= top:
            top = level
            out["llc"] = size
    return out


def _parse_size(text: str) -> int | None:
    """``"32K"`` -> 32768, ``"1024K"``, ``"32M"``; None for anything else."""
    units = {"K": KiB, "M": MiB, "G": 1024 * MiB}
    text = text.strip().upper()
    if text and text[-1] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    return int(text) if text.isdigit() else None


@lru_cache(maxsize=1)
def host_isa() -> VectorISA:
    """The ISA of the machine we run on (llvmlite's host CPU; Linux's cache sizes)."""
    from .target import host_cpu

    cpu, feat_text = host_cpu()
    feats = {f[1:] for f in feat_text.split(",") if f.startswith("+")}
    import platform
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        base = replace(NEON, cpu=cpu)
    else:
        base = replace(_family_from_features(feats), cpu=cpu)
    caches = _sys_cache_sizes()
    return replace(base, l1d_bytes=caches.get("l1d", base.l1d_bytes),
                   l2_bytes=caches.get("l2", base.l2_bytes),
                   llc_bytes=caches.get("llc", base.llc_bytes))


def _options(words: list[str]) -> dict[str, str]:
    opts = {}
    for w in words:
        if w.startswith("-") and "=" in w:
            k, v = w.lstrip("-").split("=", 1)
            opts[k] = v
    return opts


def isa_of(target: str | VectorISA | None = None) -> VectorISA:
    """The :class:`VectorISA` of a target (module docstring); the host for None/"llvm".

    A :class:`VectorISA` is returned as it is; a name of :data:`KNOWN_ISAS` ("avx512",
    "avx2", "sse", "neon") gives that family's typical member. Anything else is refused
    with a ``ValueError`` naming the forms understood."""
    if target is None:
        return host_isa()
    if isinstance(target, VectorISA):
        return target
    text = str(target).strip()
    if text in BOARDS:
        return BOARDS[text]
    if text in KNOWN_ISAS:
        return KNOWN_ISAS[text]
    try:
        words = shlex.split(text)
    except ValueError:
        words = []
    if not words or words[0] != "llvm":
        raise ValueError(
            f"cannot read the target {text!r}: write 'llvm' (this machine), "
            "'llvm -mcpu=<cpu>', 'llvm -mattr=+avx512f', 'llvm -mtriple=aarch64-linux-gnu', "
            f"a board ({', '.join(BOARDS)}) or an ISA name ({', '.join(KNOWN_ISAS)})")
    opts = _options(words[1:])
    triple = opts.get("mtriple", "")
    cpu = opts.get("mcpu", "")
    attrs = {a[1:] for a in opts.get("mattr", "").split(",") if a.startswith("+")}
    if triple.startswith(("aarch64", "arm64")):
        return replace(NEON, cpu=cpu)
    if triple and not triple.startswith(("x86_64", "i686", "i386")):
        raise ValueError(f"no vector description for the triple {triple!r}: the engine knows "
                         "x86_64 and aarch64")
    if cpu:
        fam = _family_from_cpu(cpu)
        if fam is None and not attrs:
            raise ValueError(f"unknown CPU {cpu!r}: name an x86 CPU LLVM knows "
                             "(e.g. skylake-avx512, znver4, haswell) or give "
                             "-mattr=+avx512f / +avx2")
        if fam is not None and not attrs:
            return replace(fam, cpu=cpu)
    if attrs:
        return replace(_family_from_features(attrs), cpu=cpu)
    return host_isa()
