"""app.kept.KeptByIdentity: a value made once per object (and extra key), the last few kept."""
from __future__ import annotations

import threading

from app.kept import KeptByIdentity


class Obj:
    pass


def test_a_value_is_made_once_per_object_and_extra_key():
    kept: KeptByIdentity[str] = KeptByIdentity(4)
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
    kept: KeptByIdentity[int] = KeptByIdentity(2)
    objs = [Obj() for _ in range(3)]
    calls = []
    for i, o in enumerate(objs):
        kept.get(o, lambda i=i: calls.append(i) or i)
    assert len(kept) == 2
    kept.get(objs[1], lambda: calls.append("x") or -1)             # kept: not made again
    kept.get(objs[0], lambda: calls.append("0 again") or 0)         # dropped: made again
    assert calls == [0, 1, 2, "0 again"]


def test_a_kept_object_stays_alive_so_its_id_is_not_reused():
    kept: KeptByIdentity[int] = KeptByIdentity(8)
    ids = set()
    for _ in range(8):
        o = Obj()
        ids.add(id(o))
        kept.get(o, lambda: 1)
        del o
    assert len(ids) == 8          # (none freed while kept: every id is new)


def test_threads_asking_at_once_all_get_a_value():
    kept: KeptByIdentity[int] = KeptByIdentity(8)
    o, out = Obj(), []
    ts = [threading.Thread(target=lambda: out.append(kept.get(o, lambda: 7))) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [7] * 8 and len(kept) == 1


def test_kept_drops_the_least_recently_used_value():
    from app.kept import Kept
    kept: Kept[str] = Kept(2)
    kept.put("a", "A")
    kept.put("b", "B")
    assert kept.get("a") == "A"          # (a used: b is now the oldest)
    kept.put("c", "C")
    assert kept.get("b") is None and kept.get("a") == "A" and kept.get("c") == "C"
    kept.clear()
    assert len(kept) == 0 and kept.get("a") is None
