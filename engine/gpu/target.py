"""``Target``: what code is compiled for, parsed from a string as Apache TVM's.

Accepted spellings (anything else is refused with a sentence listing these)::

    Target("cuda")                         # the default GPU: specs.DEFAULT_GPU (H100 SXM, sm_90)
    Target("cuda -arch=sm_80")             # an arch; its sheet is that arch's representative
                                           # GPU (specs.ARCH_REPRESENTATIVE: sm_80 -> A100)
    Target("cuda -model=a100")             # a GPU by our short name or by TVM's tag name
    Target("nvidia/nvidia-a100")           # TVM's tags: nvidia/nvidia-a100, nvidia/nvidia-h100,
    Target("nvidia/a100")                  #   nvidia/geforce-rtx-4090, nvidia/tesla-p100, ...
                                           #   and nvidia/<short name>
    Target("cuda -arch=sm_80 -max_threads_per_block=512 -max_shared_memory_per_block=32768")
    Target("cuda", host="llvm")            # the host target (default: Target("llvm"))
    Target("llvm")                         # the host CPU (options -mcpu=, -mtriple=, -mattr=)

As TVM's: ``target.kind.name`` (``"cuda"`` / ``"llvm"``), ``target.arch`` (``"sm_80"``),
``target.attrs`` (a read-only dict: ``arch``, ``model``, ``max_threads_per_block``,
``max_num_threads``, ``max_shared_memory_per_block``, ``thread_warp_size``,
``registers_per_block``, ``l2_cache_size_bytes``), ``target.host``, ``target.keys``
(``("cuda", "gpu")``), ``str(target)`` (a canonical string that parses back to an equal
target). Beyond TVM: ``target.spec``, the GPU's :class:`~engine.gpu.specs.GPUSpec`.

A target string given to :func:`engine.build` still means the host CPU only
(``"llvm"``); a CUDA target is refused there until the GPU back end exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from .specs import DEFAULT_GPU, GPUS, SUPPORTED_ARCHS, GPUSpec, get_spec, spec_for_arch

#: the options each kind accepts (besides -arch/-model for cuda)
CUDA_INT_OPTIONS = ("max_threads_per_block", "max_num_threads", "max_shared_memory_per_block",
                    "thread_warp_size")
LLVM_OPTIONS = ("mcpu", "mtriple", "mattr")
KINDS = ("cuda", "llvm")


class TargetError(ValueError):
    """A target string (or keyword) this engine does not accept."""


@dataclass(frozen=True)
class TargetKind:
    """TVM's ``target.kind``: its ``name`` ("cuda" or "llvm")."""

    name: str

    def __str__(self) -> str:
        return self.name


def _accepted() -> str:
    tags = ", ".join(sorted(s.tvm_tag for s in GPUS.values()))
    return ("accepted targets: 'cuda', 'cuda -arch=sm_XX' (sm_XX one of "
            f"{', '.join(SUPPORTED_ARCHS)}), 'cuda -model=NAME' (NAME one of "
            f"{', '.join(sorted(GPUS))}), TVM's tags ({tags}) or 'nvidia/NAME', with options "
            f"{', '.join('-' + o + '=N' for o in CUDA_INT_OPTIONS)}; and 'llvm' (options "
            f"{', '.join('-' + o + '=...' for o in LLVM_OPTIONS)})")


def _refuse(why: str) -> TargetError:
    return TargetError(f"{why}; {_accepted()}")


def spec_by_model(model: str) -> GPUSpec:
    """A GPU by short name (``a100``), TVM tag (``nvidia/nvidia-a100``) or the tag's part
    after ``nvidia/`` (``nvidia-a100``)."""
    key = model.strip().lower().removeprefix("nvidia/")
    for spec in GPUS.values():
        if key in (spec.name, spec.tvm_tag.removeprefix("nvidia/")):
            return spec
    raise _refuse(f"unknown GPU model {model!r}")


def _split_options(words: list[str]) -> dict[str, str]:
    """``["-arch=sm_80", "-model=a100"]`` -> ``{"arch": "sm_80", "model": "a100"}``."""
    out: dict[str, str] = {}
    for word in words:
        name, eq, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or not eq or not name or not value:
            raise _refuse(f"cannot read {word!r} as an option (-name=value)")
        if name in out:
            raise _refuse(f"option -{name} given twice")
        out[name] = value
    return out


def _parse(text: str) -> tuple[str, dict[str, str]]:
    """A target string -> (kind, options); a tag becomes ``cuda -model=<tag>``."""
    words = text.split()
    if not words:
        raise _refuse("an empty target string")
    head, options = words[0], _split_options(words[1:])
    if head.lower().startswith("nvidia/"):
        if "model" in options:
            raise _refuse(f"{head!r} names the model already; -model is not allowed with it")
        return "cuda", {"model": head, **options}
    if head not in KINDS:
        raise _refuse(f"unknown target kind {head!r}")
    return head, options


def _int_option(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _refuse(f"-{name} must be an integer, got {value!r}") from None
    if number <= 0:
        raise _refuse(f"-{name} must be positive, got {number}")
    return number


def _cuda_spec(options: dict[str, str]) -> GPUSpec:
    """The sheet named by -model, else the representative of -arch, else the default."""
    arch = options.get("arch")
    if arch is not None and arch not in SUPPORTED_ARCHS:
        raise _refuse(f"unsupported arch {arch!r}")
    if "model" in options:
        spec = spec_by_model(options["model"])
        if arch is not None and arch != spec.arch:
            raise _refuse(f"-arch={arch} contradicts -model={options['model']} "
                          f"({spec.display_name} is {spec.arch})")
        return spec
    return spec_for_arch(arch) if arch else get_spec(DEFAULT_GPU)


def _cuda_attrs(options: dict[str, str]) -> dict[str, Any]:
    unknown = sorted(set(options) - {"arch", "model", *CUDA_INT_OPTIONS})
    if unknown:
        raise _refuse(f"unknown cuda option(s) {', '.join('-' + u for u in unknown)}")
    spec = _cuda_spec(options)
    attrs: dict[str, Any] = {
        "arch": spec.arch, "model": spec.name,
        "max_threads_per_block": spec.max_threads_per_block,
        "max_num_threads": spec.max_threads_per_block,
        "max_shared_memory_per_block": spec.shared_memory_per_block,
        "thread_warp_size": spec.warp_size,
        "registers_per_block": spec.registers_per_block,
        "l2_cache_size_bytes": spec.l2_size,
    }
    for name in CUDA_INT_OPTIONS:
        if name in options:
            attrs[name] = _int_option(name, options[name])
    _check_cuda_limits(attrs, spec)
    return attrs


def _check_cuda_limits(attrs: dict[str, Any], spec: GPUSpec) -> None:
    if attrs["thread_warp_size"] != spec.warp_size:
        raise _refuse(f"-thread_warp_size must be {spec.warp_size} on NVIDIA GPUs")
    for name in ("max_threads_per_block", "max_num_threads"):
        if attrs[name] > spec.max_threads_per_block:
            raise _refuse(f"-{name}={attrs[name]} exceeds {spec.display_name}'s "
                          f"{spec.max_threads_per_block} threads per block")
    if attrs["max_shared_memory_per_block"] > spec.shared_memory_per_block_optin:
        raise _refuse(f"-max_shared_memory_per_block={attrs['max_shared_memory_per_block']} "
                      f"exceeds {spec.display_name}'s {spec.shared_memory_per_block_optin} bytes")


def _llvm_attrs(options: dict[str, str]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(LLVM_OPTIONS))
    if unknown:
        raise _refuse(f"unknown llvm option(s) {', '.join('-' + u for u in unknown)}")
    return dict(options)


class Target:
    """A compilation target; see the module docstring for the accepted strings.

    ``Target(other_target)`` copies one (``host=`` replacing its host). Immutable (``attrs``
    is a read-only mapping); equal when kind, attributes and host are equal; hashable.
    """

    attrs: Mapping[str, Any]
    __slots__ = ("kind", "attrs", "host", "_spec")

    def __init__(self, target: "str | Target", host: "str | Target | None" = None):
        if isinstance(target, Target):
            kind, attrs, spec = target.kind.name, dict(target.attrs), target.spec
            host = host if host is not None else target.host
        elif isinstance(target, str):
            kind, options = _parse(target)
            attrs = _cuda_attrs(options) if kind == "cuda" else _llvm_attrs(options)
            spec = GPUS[attrs["model"]] if kind == "cuda" else None
        else:
            raise _refuse(f"a target is a string or a Target, got {type(target).__name__}")
        object.__setattr__(self, "kind", TargetKind(kind))
        object.__setattr__(self, "attrs", MappingProxyType(attrs))
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "host", _host(kind, host))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Target is immutable")

    @property
    def arch(self) -> str:
        """The GPU's compute capability, ``"sm_80"`` (TVM's ``target.arch``)."""
        if self.kind.name != "cuda":
            raise AttributeError(f"a {self.kind.name} target has no arch")
        return self.attrs["arch"]

    @property
    def spec(self) -> GPUSpec | None:
        """The GPU's specification sheet (None for a CPU target)."""
        return self._spec

    @property
    def model(self) -> str | None:
        return self.attrs.get("model")

    @property
    def keys(self) -> tuple[str, ...]:
        return ("cuda", "gpu") if self.kind.name == "cuda" else ("cpu",)

    @property
    def max_threads_per_block(self) -> int:
        return self.attrs["max_threads_per_block"]

    @property
    def max_shared_memory_per_block(self) -> int:
        return self.attrs["max_shared_memory_per_block"]

    @property
    def thread_warp_size(self) -> int:
        return self.attrs["thread_warp_size"]

    def __str__(self) -> str:
        if self.kind.name == "llvm":
            return " ".join(["llvm", *(f"-{k}={v}" for k, v in sorted(self.attrs.items()))])
        order = ("arch", "model", *CUDA_INT_OPTIONS)
        return " ".join(["cuda", *(f"-{k}={self.attrs[k]}" for k in order)])

    def __repr__(self) -> str:
        host = f", host={str(self.host)!r}" if self.host is not None else ""
        return f"Target({str(self)!r}{host})"

    def _key(self) -> tuple:
        return (self.kind.name, tuple(sorted(self.attrs.items())), self.host)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _host(kind: str, host: "str | Target | None") -> Target | None:
    """A GPU target's host: an llvm Target (``"llvm"`` by default); a CPU target has none."""
    if kind == "llvm":
        if host is not None:
            raise _refuse("an llvm target takes no host")
        return None
    found = Target(host if host is not None else "llvm")
    if found.kind.name != "llvm":
        raise _refuse(f"the host of a GPU target must be an llvm target, got {str(found)!r}")
    return found


def list_tags() -> list[str]:
    """TVM's tag names this engine accepts, and ``nvidia/<short name>`` for each GPU."""
    return sorted({s.tvm_tag for s in GPUS.values()} | {f"nvidia/{n}" for n in GPUS})
