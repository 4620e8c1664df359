"""CacheReport: the result of :func:`engine.cache.simulate`, as objects, plain data and text."""
from __future__ import annotations

import dataclasses
from typing import Any


def _rate(misses: float, accesses: float) -> float:
    return float(misses) / float(accesses) if accesses else 0.0


@dataclasses.dataclass
class LevelStats:
    """Accesses/hits/misses of one cache level (of the whole program, a buffer or a block)."""

    name: str
    accesses: int
    misses: int

    @property
    def hits(self) -> int:
        return self.accesses - self.misses

    @property
    def miss_rate(self) -> float:
        return _rate(self.misses, self.accesses)

    def to_dict(self) -> dict:
        return {"name": self.name, "accesses": self.accesses, "hits": self.hits,
                "misses": self.misses, "miss_rate": self.miss_rate}


@dataclasses.dataclass
class CacheReport:
    """Simulated cache behaviour of one function.

    * ``levels``: :class:`LevelStats` per level, L1 first. An access is one cache line touched
      by one load or store (a vector access touching two lines counts twice); the accesses
      of level *k+1* are the misses of level *k*.
    * ``per_buffer`` / ``per_block``: ``{name: [LevelStats per level]}``.
    * ``buffers``: ``{name: {"bytes", "scope", "address"}}`` (address = first element's
      address seen by the simulator: a parameter's real one, an allocated buffer's placed
      one, see :mod:`engine.cache.instrument`).
    * ``loops``: :class:`~engine.cache.footprint.LoopFootprint` per loop (pre-order), the
      bytes one iteration of the loop body touches vs every level's capacity.
    * ``sampling``: one entry per sampled loop (``"estimated from k of n iterations of
      loop i"``); empty when every access was simulated (``exact`` is then True).
    * ``hardware``: measured counters of the uninstrumented kernel, or why there are none.
    * ``simulated_accesses``, ``sim_seconds``, ``sim_cpu_seconds``: work done by the
      simulator, the wall-clock and the CPU time of the instrumented run (on a busy machine
      the CPU time is the fairer measure of the simulator's speed).
    """

    func_name: str
    geometry: Any  # engine.cache.geometry.Geometry
    levels: list
    per_buffer: dict
    per_block: dict
    buffers: dict
    loops: list
    sampling: list
    hardware: Any  # engine.cache.hwcounters.CounterResult | None
    simulated_accesses: int
    sim_seconds: float
    compile_seconds: float
    notes: list = dataclasses.field(default_factory=list)
    sim_cpu_seconds: float = 0.0

    # -- convenience -------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        return not self.sampling

    def level(self, name: str) -> LevelStats:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(f"no cache level named {name!r}; levels are "
                       f"{[lv.name for lv in self.levels]}")

    def misses(self, level: str = "L1") -> int:
        return self.level(level).misses

    @property
    def accesses_per_second(self) -> float:
        return self.simulated_accesses / self.sim_seconds if self.sim_seconds > 0 else 0.0

    @property
    def accesses_per_cpu_second(self) -> float:
        return self.simulated_accesses / self.sim_cpu_seconds if self.sim_cpu_seconds > 0 else 0.0

    def loop_footprint(self, loop: Any):
        """The footprint entry of a loop: a ``For`` node of the simulated function (by
        identity), its pre-order index (int), or its path (``"i/j_0"``) / name — for a
        string the first loop in pre-order with that path, else with that name."""
        if isinstance(loop, int) and not isinstance(loop, bool):
            if 0 <= loop < len(self.loops):
                return self.loops[loop]
        for fp in self.loops:
            if fp.loop is loop:
                return fp
        for key in ("path", "name"):
            for fp in self.loops:
                if isinstance(loop, str) and getattr(fp, key) == loop:
                    return fp
        raise KeyError(f"no loop {loop!r} in {self.func_name}")

    @property
    def sampling_note(self) -> str:
        if not self.sampling:
            return "exact: every access simulated"
        return "; ".join(s["text"] for s in self.sampling)

    # -- plain data ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready data for plots: only str/int/float/bool/list/dict."""
        names = [lv.name for lv in self.levels]
        return {
            "func": self.func_name,
            "geometry": self.geometry.to_dict(),
            "levels": [lv.to_dict() for lv in self.levels],
            "level_names": names,
            "per_buffer": {b: [s.to_dict() for s in st] for b, st in self.per_buffer.items()},
            "per_block": {b: [s.to_dict() for s in st] for b, st in self.per_block.items()},
            "buffers": {k: dict(v) for k, v in self.buffers.items()},
            "loops": [fp.to_dict() for fp in self.loops],
            "exact": self.exact,
            "sampling": [dict(s) for s in self.sampling],
            "sampling_note": self.sampling_note,
            "hardware": self.hardware.to_dict() if self.hardware is not None else
            {"available": False, "reason": "not measured", "counts": {}},
            "simulated_accesses": self.simulated_accesses,
            "sim_seconds": self.sim_seconds,
            "compile_seconds": self.compile_seconds,
            "sim_cpu_seconds": self.sim_cpu_seconds,
            "accesses_per_second": self.accesses_per_second,
            "accesses_per_cpu_second": self.accesses_per_cpu_second,
            "notes": list(self.notes),
        }

    # -- text ------------------------------------------------------------------------------
    def summary(self) -> str:
        """A readable multi-line summary (levels, buffers, blocks, loop footprints, notes)."""
        out = [f"cache simulation of {self.func_name} "
               f"({'exact' if self.exact else self.sampling_note})"]
        for lv, g in zip(self.levels, self.geometry.levels):
            out.append(f"  {g.describe()}")
        out.append("")
        w = max([len(n) for n in list(self.per_buffer) + list(self.per_block)] + [6])
        out.append(f"  {'level':<{w}} {'accesses':>14} {'hits':>14} {'misses':>12} {'miss rate':>9}")
        for lv in self.levels:
            out.append(f"  {lv.name:<{w}} {lv.accesses:>14,} {lv.hits:>14,} {lv.misses:>12,} "
                       f"{lv.miss_rate:>8.2%}")
        for title, table in (("buffer", self.per_buffer), ("block", self.per_block)):
            out.append("")
            out.append(f"  misses per {title}: " + "  ".join(f"{lv.name}" for lv in self.levels))
            for name, st in table.items():
                cells = "  ".join(f"{s.misses:,} ({s.miss_rate:.1%})" for s in st)
                out.append(f"  {name:<{w}} {cells}")
        if self.loops:
            out.append("")
            out.append("  loop footprints (one iteration of the body):")
            for fp in self.loops:
                fits = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in fp.fits.items())
                out.append(f"  {'  ' * fp.depth}{fp.name} (x{fp.extent}): "
                           f"{fp.line_bytes:,} B in lines ({fp.bytes:,} B of data) -> fits {fits}")
        out.append("")
        if self.hardware is not None:
            out.append("  " + self.hardware.describe())
        out.append(f"  simulated {self.simulated_accesses:,} accesses in {self.sim_seconds:.3f} s "
                   f"({self.accesses_per_second / 1e6:.0f} M/s); compile {self.compile_seconds:.3f} s")
        for n in list(self.geometry.notes) + list(self.notes):
            out.append(f"  note: {n}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()
