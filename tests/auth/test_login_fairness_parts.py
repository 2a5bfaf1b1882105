"""The parts of fair logins (issue 31 item 4) on their own: the hash slots served by source in
turn, a full line shared out, the (source, user) back-off, what a source is."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_broker.auth.hash_slots import HashSlots, SlotsFull
from edge_broker.auth.login_fairness import FREE_FAILURES, FailureBackoff, login_source


async def settle() -> None:
    """A few event-loop turns: a future's result reaches the task awaiting it."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_freed_slot_goes_to_the_sources_in_turn() -> None:
    slots = HashSlots(max_concurrent=1, max_memory_kib=65536, max_waiting=100)
    held = await slots.acquire(7168, "a")
    order: list[str] = []

    async def check(source: str) -> None:
        weight = await slots.acquire(7168, source)
        order.append(source)
        slots.release(weight)

    # the adversary queued five checks first, then two other sources one each
    tasks = [asyncio.ensure_future(check("evil")) for _ in range(5)]
    await asyncio.sleep(0)
    tasks += [asyncio.ensure_future(check(s)) for s in ("dev1", "dev2")]
    await asyncio.sleep(0)
    assert slots.waiting == 7 and slots.sources_waiting == 3
    slots.release(held)
    await asyncio.gather(*tasks)
    assert order == ["evil", "dev1", "dev2", "evil", "evil", "evil", "evil"]
    assert slots.waiting == 0 and slots.sources_waiting == 0


async def test_one_source_may_hold_only_its_share_of_the_line() -> None:
    slots = HashSlots(
        max_concurrent=1, max_memory_kib=65536, max_waiting=10, max_waiting_per_source=2
    )
    held = await slots.acquire(7168, "x")
    waiters = [asyncio.ensure_future(slots.acquire(7168, "evil")) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(SlotsFull) as full:
        await slots.acquire(7168, "evil")
    assert full.value.limit == "passwords.max_waiting_per_source"
    other = asyncio.ensure_future(slots.acquire(7168, "dev"))
    await asyncio.sleep(0)
    assert slots.waiting_from("dev") == 1
    for task in (*waiters, other):
        task.cancel()
    await asyncio.gather(*waiters, other, return_exceptions=True)
    assert slots.waiting == 0
    slots.release(held)


async def test_a_full_line_pushes_out_the_newest_waiter_of_the_longest_line() -> None:
    slots = HashSlots(
        max_concurrent=1, max_memory_kib=65536, max_waiting=4, max_waiting_per_source=4
    )
    held = await slots.acquire(7168, "x")
    evil = [asyncio.ensure_future(slots.acquire(7168, "evil")) for _ in range(4)]
    await settle()
    dev = asyncio.ensure_future(slots.acquire(7168, "dev"))  # the line is full: evil gives way
    await settle()
    assert evil[3].done() and isinstance(evil[3].exception(), SlotsFull)
    assert slots.waiting_from("evil") == 3 and slots.waiting_from("dev") == 1
    dev2 = asyncio.ensure_future(slots.acquire(7168, "dev"))  # evil 3 > dev 1 + 1: again
    await settle()
    assert evil[2].done() and slots.waiting_from("dev") == 2
    with pytest.raises(SlotsFull) as full:  # now evil 2, dev 2: an equal share, refused
        await slots.acquire(7168, "dev")
    assert full.value.limit == "passwords.max_waiting"
    slots.release(held)
    await settle()
    assert evil[0].done() and not evil[0].exception()  # evil's turn first (it queued first)
    slots.release(await evil[0])
    await settle()
    assert dev.done()
    for task in (evil[1], dev2):
        task.cancel()
    slots.release(await dev)
    await asyncio.gather(evil[1], dev2, return_exceptions=True)


def test_backoff_doubles_per_source_and_user_and_is_bounded() -> None:
    backoff = FailureBackoff(base=1.0, max_delay=8.0, max_entries=3)
    assert backoff.wait("a", "dev", 0.0) == 0.0
    free = [backoff.failed("a", "dev", 0.0) for _ in range(FREE_FAILURES)]
    assert free == [0.0] * FREE_FAILURES and backoff.wait("a", "dev", 0.0) == 0.0
    delays = [backoff.failed("a", "dev", t) for t in (0.0, 1.0, 3.0, 7.0, 15.0)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff.wait("a", "dev", 16.0) == 7.0 and backoff.wait("b", "dev", 16.0) == 0.0
    assert backoff.failed("a", "dev", 100.0) == 0.0  # quiet for longer than max: starts again
    backoff.succeeded("a", "dev")
    assert backoff.wait("a", "dev", 100.5) == 0.0
    for i in range(10):
        backoff.failed("evil", f"u{i}", 0.0)
    assert len(backoff) == 3  # the oldest forgotten
    off = FailureBackoff(0.0, 60.0, 10)
    assert [off.failed("a", "b", 0.0) for _ in range(9)] == [0.0] * 9


@given(st.lists(st.tuples(st.sampled_from("abc"), st.text(max_size=3)), max_size=50))
def test_backoff_table_never_exceeds_its_bound(failures: list[tuple[str, str]]) -> None:
    backoff = FailureBackoff(1.0, 60.0, 5)
    for i, (source, user) in enumerate(failures):
        backoff.failed(source, user, float(i))
        assert len(backoff) <= 5


def test_a_source_is_an_ipv4_address_or_an_ipv6_64() -> None:
    assert login_source(("192.0.2.7", 1883)) == "192.0.2.7"
    assert login_source(("2001:db8::1", 1, 0, 0)) == "2001:db8::/64"
    assert login_source(("2001:db8::ffff:1", 1, 0, 0)) == "2001:db8::/64"
    assert login_source(("2001:db8:0:1::1", 1, 0, 0)) == "2001:db8:0:1::/64"
    assert login_source(("::ffff:192.0.2.7", 1, 0, 0)) == "192.0.2.7"
    assert login_source(("fe80::1%eth0", 1, 0, 2)) == "fe80::/64"
    assert login_source(None) == "local"
