"""Cache geometry: the levels of a simulated hierarchy, read from the host or given explicitly.

A level is described by its capacity in bytes, its associativity (ways) and its line size;
the number of sets follows (``size / (ways * line)``). The simulator indexes a set with the
low bits of the line number (``line & (sets - 1)``, as valgrind's cachegrind does), so the
set count and the line size must be powers of two.

Levels are given as dicts ``{"name": "L1", "size": 49152, "ways": 12, "line": 64}`` (an
optional ``"sets"`` key is checked for consistency) or as :class:`CacheLevel` objects.
``levels=None`` reads the host's data/unified caches from
``/sys/devices/system/cpu/cpu0/cache/index*``; a level the kernel reports inconsistently
(some virtual machines report e.g. a 480 MiB L3 with a set count that is not a power of two)
is replaced by a stated default and the replacement is recorded in :attr:`Geometry.notes`.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Sequence

MAX_LEVELS = 4
MAX_WAYS = 64
SYSFS_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"

#: Used when the host does not report a level, or reports one that cannot be simulated.
DEFAULT_LEVELS = (
    {"name": "L1", "size": 32 * 1024, "ways": 8, "line": 64},
    {"name": "L2", "size": 1024 * 1024, "ways": 16, "line": 64},
    {"name": "L3", "size": 32 * 1024 * 1024, "ways": 16, "line": 64},
)


class CacheConfigError(ValueError):
    """A cache geometry that cannot be simulated; the message says what is wrong and how to fix it."""


def _is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def _fmt_size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


@dataclasses.dataclass(frozen=True)
class CacheLevel:
    """One set-associative LRU level: ``size`` bytes, ``ways``-way, ``line``-byte lines."""

    name: str
    size: int
    ways: int
    line: int

    @property
    def sets(self) -> int:
        return self.size // (self.ways * self.line)

    @property
    def line_bits(self) -> int:
        return self.line.bit_length() - 1

    def describe(self) -> str:
        return (f"{self.name}: {_fmt_size(self.size)}, {self.ways}-way, {self.line} B lines, "
                f"{self.sets} sets")

    def to_dict(self) -> dict:
        return {"name": self.name, "size": self.size, "ways": self.ways, "line": self.line,
                "sets": self.sets}


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A validated hierarchy (L1 first) plus where it came from and any fallback notes."""

    levels: tuple
    source: str  # "explicit", "host", "host+defaults" or "defaults"
    notes: tuple = ()

    @property
    def line(self) -> int:
        return self.levels[0].line

    def to_dict(self) -> dict:
        return {"levels": [lv.to_dict() for lv in self.levels], "source": self.source,
                "notes": list(self.notes)}


def _check_int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CacheConfigError(
            f"cache level {name!r}: {key!r} must be a positive integer number of "
            f"{'bytes' if key in ('size', 'line') else 'ways' if key == 'ways' else 'sets'}, "
            f"got {value!r}")
    if value <= 0:
        raise CacheConfigError(
            f"cache level {name!r}: {key!r} must be positive, got {value}; "
            "give e.g. {'name': 'L1', 'size': 49152, 'ways': 12, 'line': 64}")
    return value


def make_level(spec: Any, index: int = 0) -> CacheLevel:
    """Validate one level given as a dict or :class:`CacheLevel`; raise :class:`CacheConfigError`."""
    if isinstance(spec, CacheLevel):
        spec = {"name": spec.name, "size": spec.size, "ways": spec.ways, "line": spec.line}
    if not isinstance(spec, dict):
        raise CacheConfigError(
            f"cache level #{index + 1} must be a dict like "
            f"{{'name': 'L1', 'size': 49152, 'ways': 12, 'line': 64}}, got {spec!r}")
    allowed = {"name", "size", "ways", "line", "sets"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise CacheConfigError(
            f"cache level #{index + 1}: unknown key(s) {unknown}; the keys are "
            "'name', 'size' (bytes), 'ways', 'line' (bytes) and optionally 'sets'")
    name = spec.get("name", f"L{index + 1}")
    if not isinstance(name, str) or not name:
        raise CacheConfigError(f"cache level #{index + 1}: 'name' must be a non-empty string")
    missing = [k for k in ("size", "ways", "line") if k not in spec]
    if missing:
        raise CacheConfigError(
            f"cache level {name!r}: missing {missing}; every level needs 'size' (bytes), "
            "'ways' and 'line' (bytes)")
    size = _check_int(name, "size", spec["size"])
    ways = _check_int(name, "ways", spec["ways"])
    line = _check_int(name, "line", spec["line"])
    if not _is_pow2(line):
        raise CacheConfigError(
            f"cache level {name!r}: the line size must be a power of two, got {line} B "
            "(typical: 64)")
    if ways > MAX_WAYS:
        raise CacheConfigError(
            f"cache level {name!r}: {ways} ways is more than the simulator supports "
            f"({MAX_WAYS}); model a highly associative cache with at most {MAX_WAYS} ways")
    if size % (ways * line):
        raise CacheConfigError(
            f"cache level {name!r}: size {size} B is not a multiple of ways x line = "
            f"{ways} x {line} = {ways * line} B, so it has no whole number of sets")
    sets = size // (ways * line)
    if not _is_pow2(sets):
        raise CacheConfigError(
            f"cache level {name!r}: {_fmt_size(size)} / ({ways} ways x {line} B) = {sets} sets, "
            "which is not a power of two; the set index is taken from the address bits, so "
            "choose a size that gives a power-of-two number of sets")
    if "sets" in spec:
        given = _check_int(name, "sets", spec["sets"])
        if given != sets:
            raise CacheConfigError(
                f"cache level {name!r}: 'sets' is {given} but size / (ways x line) = {sets}; "
                "drop 'sets' or make it consistent")
    return CacheLevel(name, size, ways, line)


def validate_levels(levels: Sequence[Any]) -> tuple:
    """Validate a whole hierarchy (1..4 levels, one line size, distinct names)."""
    if isinstance(levels, (str, bytes, dict)) or not isinstance(levels, Iterable):
        raise CacheConfigError(
            "levels must be a list of dicts such as "
            "[{'name': 'L1', 'size': 49152, 'ways': 12, 'line': 64}, ...], "
            f"got {levels!r}")
    levels = list(levels)
    if not levels:
        raise CacheConfigError("levels is empty; give at least one cache level (or None for the host's)")
    if len(levels) > MAX_LEVELS:
        raise CacheConfigError(
            f"{len(levels)} cache levels given; the simulator models at most {MAX_LEVELS} "
            "(L1..L4)")
    out = tuple(make_level(s, i) for i, s in enumerate(levels))
    names = [lv.name for lv in out]
    if len(set(names)) != len(names):
        raise CacheConfigError(f"cache level names must be distinct, got {names}")
    lines = {lv.line for lv in out}
    if len(lines) != 1:
        raise CacheConfigError(
            f"all levels must use the same line size, got {[lv.line for lv in out]} B; "
            "the simulator moves whole lines between levels")
    return out


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = 1
    if text.endswith("K"):
        mult, text = 1024, text[:-1]
    elif text.endswith("M"):
        mult, text = 1024 * 1024, text[:-1]
    elif text.endswith("G"):
        mult, text = 1024 ** 3, text[:-1]
    return int(text) * mult


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def read_sysfs(root: str = SYSFS_CACHE_DIR) -> list[dict]:
    """Raw data/unified cache entries of cpu0 (level, size, ways, line, sets), sorted by level."""
    out = []
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return out
    for e in entries:
        d = os.path.join(root, e)
        ctype = _read(os.path.join(d, "type"))
        if ctype not in ("Data", "Unified"):
            continue
        try:
            rec = {
                "level": int(_read(os.path.join(d, "level")) or 0),
                "size": _parse_size(_read(os.path.join(d, "size")) or "0"),
                "ways": int(_read(os.path.join(d, "ways_of_associativity")) or 0),
                "line": int(_read(os.path.join(d, "coherency_line_size")) or 0),
                "sets": int(_read(os.path.join(d, "number_of_sets")) or 0),
            }
        except ValueError:
            continue
        out.append(rec)
    out.sort(key=lambda r: r["level"])
    return out


def host_geometry(root: str = SYSFS_CACHE_DIR) -> Geometry:
    """The host's data hierarchy, each level checked; bogus or missing levels use defaults."""
    raw = read_sysfs(root)
    notes: list[str] = []
    by_level: dict[int, dict] = {}
    for rec in raw:
        by_level.setdefault(rec["level"], rec)
    levels: list[CacheLevel] = []
    used_default = False
    for i, default in enumerate(DEFAULT_LEVELS):
        lvl = i + 1
        rec = by_level.get(lvl)
        name = f"L{lvl}"
        if rec is None:
            if i == 0 or any(k > lvl for k in by_level):
                notes.append(f"{name}: not reported by the host; using the default "
                             f"{_fmt_size(default['size'])}, {default['ways']}-way, "
                             f"{default['line']} B lines")
                levels.append(make_level(dict(default, name=name)))
                used_default = True
            continue
        problem = None
        try:
            lv = make_level({"name": name, "size": rec["size"], "ways": rec["ways"],
                             "line": rec["line"]})
            if rec["sets"] and rec["sets"] != lv.sets:
                problem = (f"it reports {rec['sets']} sets but size / (ways x line) = {lv.sets}")
        except CacheConfigError as exc:
            problem = str(exc).split(": ", 1)[-1]
            lv = None
        if problem is None and levels and lv.line != levels[0].line:
            problem = f"its line size {lv.line} B differs from L1's {levels[0].line} B"
        if problem is not None:
            d = make_level(dict(default, name=name))
            if levels:
                d = make_level({"name": name, "size": d.size, "ways": d.ways,
                                "line": levels[0].line})
            notes.append(
                f"{name} as reported by the host ({_fmt_size(rec['size'])}, {rec['ways']}-way, "
                f"{rec['line']} B lines, {rec['sets']} sets) cannot be simulated: {problem}; "
                f"using the default {_fmt_size(d.size)}, {d.ways}-way, {d.line} B lines instead")
            levels.append(d)
            used_default = True
        else:
            levels.append(lv)
    if not raw:
        return Geometry(tuple(make_level(d) for d in DEFAULT_LEVELS), "defaults",
                        (f"no cache information under {root}; using the default hierarchy",))
    return Geometry(tuple(levels[:MAX_LEVELS]), "host+defaults" if used_default else "host",
                    tuple(notes))


def resolve(levels: Any = None) -> Geometry:
    """``None`` -> the host's geometry; a list of level specs -> validated explicit geometry."""
    if levels is None:
        return host_geometry()
    if isinstance(levels, Geometry):
        return levels
    return Geometry(validate_levels(levels), "explicit", ())
