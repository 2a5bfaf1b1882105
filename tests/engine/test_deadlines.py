"""engine/deadlines.py: due in order, once, never early; discards and new times win; the heap
stays bounded however often deadlines are replaced."""

from __future__ import annotations

from edge_broker.engine.deadlines import Deadlines


def test_due_returns_what_is_due_once_in_order_and_never_early() -> None:
    d: Deadlines[str] = Deadlines()
    d.set("b", 20.0)
    d.set("a", 10.0)
    d.set("c", 30.0)
    assert d.next_at() == 10.0
    assert d.due(9.99) == []
    assert d.due(20.0) == ["a", "b"]
    assert d.due(25.0) == []
    assert len(d) == 1 and "c" in d and "a" not in d
    assert d.due(1e9) == ["c"] and d.next_at() is None


def test_discard_and_a_new_time_replace_the_old_deadline() -> None:
    d: Deadlines[str] = Deadlines()
    d.set("will", 10.0)
    d.set("will", 40.0)  # reconnected and lost again: the later deadline counts
    d.set("gone", 5.0)
    d.discard("gone")  # resumed: no longer due
    assert d.next_at() == 40.0
    assert d.due(39.0) == []
    assert d.due(40.0) == ["will"]
    d.set("again", 1.0)
    d.set("again", 1.0)  # the same time twice: still due once
    assert d.due(2.0) == ["again"]


def test_replacing_deadlines_does_not_grow_the_heap_without_bound() -> None:
    d: Deadlines[int] = Deadlines()
    for i in range(100_000):  # clients that reconnect often, each with a one-day expiry
        d.set(i % 10, 86_400.0 + i)
        if i % 3 == 0:
            d.discard(i % 10)
    assert len(d._heap) <= 2 * len(d) + 65
    live = {k for k in range(10) if k in d}
    assert set(d.due(1e12)) == live and len(d) == 0
