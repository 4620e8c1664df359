"""What an explorer session compiles for: this machine's CPU, one of the engine's named
GPUs (``engine.gpu.specs``), or an ARM board (aarch64, run here under ``qemu-aarch64``).

The target is part of the session's link (``target=cuda-h100-sxm``; absent: the CPU, so
every link made before GPUs existed stays a CPU link) and of the trace document (a
``target`` field holding the engine's target string, ``"cuda -model=h100-sxm"``; absent:
the CPU). Both are hostile input: only the keys of :data:`TARGETS` (and, in a document,
their engine strings) are accepted, by exact match — nothing is parsed.

The web process only *names* the target: a GPU step is built, run (in the emulator when
this machine has no GPU) and modeled by a measurement worker
(:mod:`app.service.timing`), which receives the engine string. A board's step
(``target=aarch64``) is compiled for the board, run and checked against numpy under
``qemu-aarch64`` and timed there: its times are the emulator's, labelled so
(:data:`EMULATION_LABEL`); there is no cache simulation or roofline for it.
"""
from __future__ import annotations

from dataclasses import dataclass

CPU = "cpu"


@dataclass(frozen=True)
class TargetChoice:
    key: str            # the URL's spelling: "cpu", "cuda-h100-sxm"
    label: str          # the page's: "CPU (this machine)", "H100 SXM"
    engine: str         # engine.build's target string: "llvm", "cuda -model=h100-sxm"
    gpu: str | None     # engine.gpu.specs' short name, None for the CPU
    #: the emulator a board's steps run under ("qemu-aarch64"), None for the CPU and GPUs
    emulator: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.gpu is not None

    @property
    def is_board(self) -> bool:
        """Another CPU than this machine's, run under an emulator."""
        return self.emulator is not None


#: the GPUs a session may target (engine.gpu.specs' short names) and their short labels
GPU_LABELS = {"h100-sxm": "H100 SXM", "a100": "A100", "rtx-4090": "RTX 4090",
              "tesla-p100": "Tesla P100"}

TARGETS: dict[str, TargetChoice] = {CPU: TargetChoice(CPU, "CPU (this machine)", "llvm", None)}
TARGETS.update({f"cuda-{g}": TargetChoice(f"cuda-{g}", label, f"cuda -model={g}", g)
                for g, label in GPU_LABELS.items()})
#: an ARM board: aarch64 Linux with NEON (engine.codegen.machine), run under qemu-user
AARCH64 = "aarch64"
TARGETS[AARCH64] = TargetChoice(AARCH64, "ARM board (aarch64, NEON)",
                                "llvm -mtriple=aarch64-linux-gnu", None, "qemu-aarch64")
#: the runtime plot's label of a board's step times
EMULATION_LABEL = "under emulation (qemu-aarch64), not an ARM board's time"
#: what the cache pane ("The cache simulation is not available: ...") and the roofline tab
#: say on a board
NO_SIMULATION_ON_BOARD = ("this is an emulated target: the steps run under qemu-aarch64 on "
                          "this machine, whose caches are not the ARM board's")
NO_ROOFLINE_ON_BOARD = ("The roofline is not available for an emulated target: the steps run "
                        "under qemu-aarch64 on this machine, whose peak GFLOP/s and memory "
                        "bandwidth are not the ARM board's.")
#: the document's spelling (the engine string) -> the choice
_BY_ENGINE = {t.engine: t for t in TARGETS.values()}


def accepted() -> str:
    return ", ".join(TARGETS)


def choice(key: str | None) -> TargetChoice:
    """The target of a link's ``target=`` (None or empty: the CPU); ``ValueError`` with
    the sentence for anything else."""
    if key is None or key == "":
        return TARGETS[CPU]
    got = TARGETS.get(key) if isinstance(key, str) else None
    if got is None:
        raise ValueError(f"target= must be one of {accepted()}, got “{str(key)[:30]}”")
    return got


def from_document(value) -> TargetChoice:
    """The target of a trace document's ``target`` field (absent/None: the CPU): an engine
    string (``"cuda -model=a100"``, ``"llvm"``) or a link's key; ``ValueError`` otherwise."""
    if value is None or value == "":
        return TARGETS[CPU]
    if isinstance(value, str):
        got = _BY_ENGINE.get(value) or TARGETS.get(value)
        if got is not None:
            return got
    raise ValueError(f"the trace's target must be one of "
                     f"{', '.join(repr(t.engine) for t in TARGETS.values())}, got "
                     f"{str(value)[:40]!r}")


def model_label(gpu: str, measured_on: str | None = None) -> str:
    """The runtime plot's label of a GPU step's times."""
    name = GPU_LABELS.get(gpu, gpu)
    if measured_on:
        return f"measured on {measured_on}"
    return f"modeled for {name} (no GPU on this machine)"
