"""app.kept: values made once per object (and extra key) or key, kept within a number of
bytes (the least recently used go first; a value too heavy alone is not kept)."""
from __future__ import annotations

import threading

from app.kept import MIN_WEIGHT, Kept, KeptByIdentity, ir_bytes, weight


class Obj:
    pass


def test_a_value_is_made_once_per_object_and_extra_key():
    kept: KeptByIdentity[str] = KeptByIdentity(8 * MIN_WEIGHT, lambda obj, value: 0)
    made = []

    def make(tag):
        made.append(tag)
        return tag
    a, b = Obj(), Obj()
    assert kept.get(a, lambda: make("a")) == "a"
    assert kept.get(a, lambda: make("again")) == "a"
    assert kept.get(b, lambda: make("b")) == "b"
    assert kept.get(a, lambda: make("a/x"), "x") == "a/x"      # another extra key
    assert kept.get(a, lambda: make("again"), "x") == "a/x"
    assert made == ["a", "b", "a/x"]


def test_the_oldest_values_go_first_and_are_made_again():
    kept: KeptByIdentity[int] = KeptByIdentity(2 * MIN_WEIGHT, lambda obj, value: 0)
    objs = [Obj() for _ in range(3)]
    calls = []
    for i, o in enumerate(objs):
        kept.get(o, lambda i=i: calls.append(i) or i)
    assert len(kept) == 2
    kept.get(objs[1], lambda: calls.append("x") or -1)             # kept: not made again
    kept.get(objs[0], lambda: calls.append("0 again") or 0)         # dropped: made again
    assert calls == [0, 1, 2, "0 again"]


def test_a_kept_object_stays_alive_so_its_id_is_not_reused():
    kept: KeptByIdentity[int] = KeptByIdentity(16 * MIN_WEIGHT, lambda obj, value: 0)
    ids = set()
    for _ in range(8):
        o = Obj()
        ids.add(id(o))
        kept.get(o, lambda: 1)
        del o
    assert len(ids) == 8          # (none freed while kept: every id is new)


def test_threads_asking_at_once_all_get_a_value():
    kept: KeptByIdentity[int] = KeptByIdentity(16 * MIN_WEIGHT, lambda obj, value: 0)
    o, out = Obj(), []
    ts = [threading.Thread(target=lambda: out.append(kept.get(o, lambda: 7))) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [7] * 8 and len(kept) == 1


def test_kept_drops_the_least_recently_used_value():
    kept: Kept[str] = Kept(2 * MIN_WEIGHT)
    kept.put("a", "A")
    kept.put("b", "B")
    assert kept.get("a") == "A"          # (a used: b is now the oldest)
    kept.put("c", "C")
    assert kept.get("b") is None and kept.get("a") == "A" and kept.get("c") == "C"
    kept.clear()
    assert len(kept) == 0 and kept.get("a") is None


def test_kept_is_bounded_by_bytes_not_entries():
    kept: Kept[str] = Kept(10_000)
    for i in range(100):
        kept.put(i, "x" * 3000)
    assert kept.nbytes <= 10_000 and len(kept) == 3
    assert kept.get(99) is not None and kept.get(0) is None
    for i in range(1000):                       # many small values: bounded too
        kept.put(("small", i), "y")
    assert kept.nbytes <= 10_000 and len(kept) <= 10_000 // MIN_WEIGHT


def test_a_value_heavier_than_the_whole_budget_is_not_kept_and_drops_nothing():
    kept: Kept[str] = Kept(10_000)
    kept.put("a", "small")
    kept.put("huge", "z" * 20_000)
    assert kept.get("huge") is None and kept.get("a") == "small"
    kept.put("a", "z" * 20_000)                 # replacing a value by one too heavy drops it
    assert kept.get("a") is None and kept.nbytes == 0


def test_programs_weigh_by_their_size():
    import engine
    small = engine.workloads.get("mm_relu", n=16)
    big = engine.workloads.get("conv2d")
    assert ir_bytes(small) < ir_bytes(big) and weight(small) == ir_bytes(small)
    assert ir_bytes(small) == ir_bytes(small)   # counted once, remembered
    kept: KeptByIdentity[str] = KeptByIdentity(ir_bytes(big) + 1000)
    kept.get(small, lambda: "s")
    kept.get(big, lambda: "b")
    assert kept.nbytes <= ir_bytes(big) + 1000 and len(kept) == 1   # the small one went
