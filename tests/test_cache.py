"""engine.cache: geometry validation, the reference LRU, the compiled simulator on streams."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cache import (CacheConfigError, ReferenceHierarchy, StreamSimulator, host_geometry,
                          validate_levels)
from engine.cache.geometry import DEFAULT_LEVELS

L1_SMALL = {"name": "L1", "size": 1024, "ways": 2, "line": 64}   # 8 sets
L2_SMALL = {"name": "L2", "size": 4096, "ways": 4, "line": 64}   # 16 sets


# -- geometry ------------------------------------------------------------------------------
def test_explicit_geometry_sets():
    (lv,) = validate_levels([{"name": "L1", "size": 49152, "ways": 12, "line": 64}])
    assert lv.sets == 64 and lv.line_bits == 6


@pytest.mark.parametrize("spec, words", [
    ({"name": "L1", "size": 48 * 1024, "ways": 8, "line": 64}, "not a power of two"),  # 96 sets
    ({"name": "L1", "size": 32768, "ways": 8, "line": 48}, "line size must be a power of two"),
    ({"name": "L1", "size": 0, "ways": 8, "line": 64}, "must be positive"),
    ({"name": "L1", "size": 32768, "ways": 0, "line": 64}, "must be positive"),
    ({"name": "L1", "size": 32768, "ways": 8}, "missing"),
    ({"name": "L1", "size": 32768, "ways": 8, "line": 64, "sets": 32}, "'sets' is 32"),
    ({"name": "L1", "size": 1000, "ways": 8, "line": 64}, "not a multiple"),
    ({"name": "L1", "size": "32K", "ways": 8, "line": 64}, "positive integer"),
    ({"name": "L1", "size": 32768, "ways": 8, "line": 64, "assoc": 8}, "unknown key"),
])
def test_bad_level_is_refused_with_reason(spec, words):
    with pytest.raises(CacheConfigError) as exc:
        validate_levels([spec])
    assert words in str(exc.value)


def test_too_many_levels_and_other_hierarchy_errors():
    lv = {"size": 4096, "ways": 4, "line": 64}
    with pytest.raises(CacheConfigError, match="at most 4"):
        validate_levels([dict(lv, name=f"L{i}") for i in range(5)])
    with pytest.raises(CacheConfigError, match="empty"):
        validate_levels([])
    with pytest.raises(CacheConfigError, match="distinct"):
        validate_levels([dict(lv, name="L1"), dict(lv, name="L1")])
    with pytest.raises(CacheConfigError, match="same line size"):
        validate_levels([dict(lv, name="L1"), {"name": "L2", "size": 8192, "ways": 4,
                                                "line": 128}])
    with pytest.raises(CacheConfigError, match="list of dicts"):
        validate_levels({"name": "L1", "size": 4096, "ways": 4, "line": 64})


def _fake_sysfs(tmp_path, entries):
    for i, (level, typ, size, ways, line, sets) in enumerate(entries):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, val in (("level", level), ("type", typ), ("size", size),
                          ("ways_of_associativity", ways), ("coherency_line_size", line),
                          ("number_of_sets", sets)):
            (d / name).write_text(f"{val}\n")
    return str(tmp_path)


def test_host_geometry_from_sysfs(tmp_path):
    root = _fake_sysfs(tmp_path, [(1, "Data", "48K", 12, 64, 64),
                                  (1, "Instruction", "32K", 8, 64, 64),
                                  (2, "Unified", "1024K", 16, 64, 1024),
                                  (3, "Unified", "32768K", 16, 64, 32768)])
    g = host_geometry(root)
    assert g.source == "host" and not g.notes
    assert [(lv.name, lv.size, lv.ways, lv.sets) for lv in g.levels] == [
        ("L1", 49152, 12, 64), ("L2", 1 << 20, 16, 1024), ("L3", 32 << 20, 16, 32768)]


def test_bogus_host_l3_falls_back_to_stated_default(tmp_path):
    # a VM reporting a 480 MiB L3 with a set count that is not a power of two
    root = _fake_sysfs(tmp_path, [(1, "Data", "32K", 8, 64, 64),
                                  (2, "Unified", "512K", 8, 64, 1024),
                                  (3, "Unified", "491520K", 16, 64, 491520)])
    g = host_geometry(root)
    assert g.source == "host+defaults"
    l3 = g.levels[2]
    assert (l3.size, l3.ways) == (DEFAULT_LEVELS[2]["size"], DEFAULT_LEVELS[2]["ways"])
    assert len(g.notes) == 1 and "L3" in g.notes[0] and "default" in g.notes[0]
    assert "480 MiB" in g.notes[0]


def test_this_host_geometry_is_usable():
    g = host_geometry()
    assert 1 <= len(g.levels) <= 4
    for lv in g.levels:
        assert lv.sets & (lv.sets - 1) == 0 and lv.line & (lv.line - 1) == 0
        assert lv.sets * lv.ways * lv.line == lv.size


# -- hand-computed cases (compiled simulator and reference agree with the arithmetic) -----
def _both(levels, stream, nbuf=1):
    sim = StreamSimulator(levels, nbuf=nbuf)
    addrs = np.array([a for a, *_ in stream], dtype=np.int64)
    sizes = np.array([s for _, s, *_ in stream], dtype=np.int64)
    keys = np.array([k[0] if k else 0 for _, _, *k in stream], dtype=np.int32)
    sim.run(addrs, sizes, keys)
    ref = ReferenceHierarchy(levels).run((a, s, k[0] if k else 0) for a, s, *k in stream)
    return sim, ref


def test_stride_mapping_to_one_set_misses_every_time():
    # 8 sets x 64 B: a 512 B stride lands in set 0 every time; 3 lines cycle through 2 ways
    stream = [(base + 512 * (i % 3), 4) for i in range(300) for base in (1 << 20,)]
    sim, ref = _both([L1_SMALL], stream)
    assert sim.misses(0).sum() == 300 == ref.misses[0]
    # the same 3 lines 64 B apart (3 different sets) miss only the first time
    stream = [((1 << 20) + 64 * (i % 3), 4) for i in range(300)]
    sim, ref = _both([L1_SMALL], stream)
    assert sim.misses(0).sum() == 3 == ref.misses[0]


@pytest.mark.parametrize("nlines, passes", [(16, 10), (17, 10)])
def test_working_set_just_fits_or_just_overflows(nlines, passes):
    # 1 KiB, 2-way: 16 lines fit exactly; a 17th line maps to set 0 next to lines 0 and 8,
    # and those three then evict each other on every pass (LRU)
    stream = [((1 << 16) + 64 * i, 4) for _ in range(passes) for i in range(nlines)]
    sim, ref = _both([L1_SMALL], stream)
    expected = 16 if nlines == 16 else 17 + (passes - 1) * 3
    assert sim.misses(0).sum() == expected == ref.misses[0]
    assert sim.accesses(0).sum() == nlines * passes


def test_fully_associative_lru_thrashes_at_ways_plus_one():
    fa = {"name": "L1", "size": 8 * 64, "ways": 8, "line": 64}  # one set, 8 ways
    for n, expected in ((8, 8), (9, 9 * 5)):
        stream = [(64 * (i % n), 8) for i in range(n * 5)]
        sim, ref = _both([fa], stream)
        assert sim.misses(0).sum() == expected == ref.misses[0]


def test_access_spanning_lines_counts_once_per_line():
    stream = [(60, 8), (128, 64), (192, 130)]  # 2 lines, 1 line, 3 lines
    sim, ref = _both([L1_SMALL], stream)
    assert sim.accesses(0).sum() == 6 == ref.accesses[0]


def test_next_level_sees_exactly_the_misses():
    stream = [((1 << 20) + 64 * (i % 40), 4) for i in range(400)]
    sim, ref = _both([L1_SMALL, L2_SMALL], stream)
    assert sim.accesses(1).sum() == sim.misses(0).sum()
    # 40 lines: thrash L1 (16 lines) but fit L2 (64 lines): L2 misses only compulsory
    assert sim.misses(1).sum() == 40 == ref.misses[1]


# -- random streams: compiled simulator == Python reference -------------------------------
level_specs = st.sampled_from([
    [L1_SMALL],
    [L1_SMALL, L2_SMALL],
    [{"name": "L1", "size": 512, "ways": 1, "line": 32},
     {"name": "L2", "size": 2048, "ways": 2, "line": 32},
     {"name": "L3", "size": 8192, "ways": 8, "line": 32}],
    [{"name": "L1", "size": 256, "ways": 4, "line": 16},
     {"name": "L2", "size": 1024, "ways": 16, "line": 16},
     {"name": "L3", "size": 4096, "ways": 4, "line": 16},
     {"name": "L4", "size": 16384, "ways": 2, "line": 16}],
])


@given(levels=level_specs,
       stream=st.lists(st.tuples(st.integers(0, 1 << 14), st.integers(1, 80), st.integers(0, 2)),
                       min_size=1, max_size=400))
def test_compiled_simulator_matches_reference_lru(levels, stream):
    sim, ref = _both(levels, stream, nbuf=3)
    for k in range(len(levels)):
        assert sim.accesses(k).sum() == ref.accesses[k]
        assert sim.misses(k).sum() == ref.misses[k]
        for key in range(3):
            got = (int(sim.accesses(k)[key]), int(sim.misses(k)[key]))
            want = tuple(ref.per_key.get(key, [[0, 0]] * len(levels))[k])
            assert got == want


@given(seed=st.integers(0, 2**32 - 1))
def test_state_persists_between_runs_and_reset_clears_it(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 13, size=200)
    sim = StreamSimulator([L1_SMALL, L2_SMALL])
    sim.run(a[:100])
    sim.run(a[100:])
    ref = ReferenceHierarchy([L1_SMALL, L2_SMALL]).run((int(x), 4) for x in a)
    assert sim.misses(0).sum() == ref.misses[0] and sim.misses(1).sum() == ref.misses[1]
    sim.reset()
    assert sim.accesses(0).sum() == 0
    sim.run(a[:1] - a[:1] % 64)  # one line-aligned 4-byte access after a reset: cold miss
    assert sim.misses(0).sum() == 1 and sim.misses(1).sum() == 1


def test_stream_rejects_bad_input():
    sim = StreamSimulator([L1_SMALL], nbuf=2)
    with pytest.raises(ValueError, match="buffer ids"):
        sim.run(np.array([0, 64]), 4, np.array([0, 2]))
    with pytest.raises(ValueError, match="at least one byte"):
        sim.run(np.array([0]), 0)
