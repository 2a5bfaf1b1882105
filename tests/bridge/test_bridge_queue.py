"""The outbound queue's bounds and overflow policies, the durable queue log's recovery and
compaction, the backoff schedule and the 3.1.1 echo filter (sans-io parts, no sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edge_broker.bridge.link import backoff_delay
from edge_broker.bridge.queue import Entry, OutboundQueue
from edge_broker.bridge.store import BridgeStore


def entry(seq: int, qos: int = 1, size: int = 10) -> Entry:
    return Entry(seq, f"t/{seq % 3}", bytes(size), qos, False)


def test_drop_oldest_keeps_the_newest_and_never_drops_in_flight():
    q = OutboundQueue(3, 1 << 20, "drop-oldest")
    for i in range(3):
        assert q.push(entry(i)) == []
    first = q.take()
    q.fly(first, 7)
    dropped = q.push(entry(3))
    assert [e.seq for e in dropped] == [1]  # the oldest not in flight
    assert [e.seq for e in q.pending] == [2, 3]
    assert list(q.inflight) == [7]
    assert len(q) == 3


def test_drop_newest_refuses_the_new_message():
    q = OutboundQueue(2, 1 << 20, "drop-newest")
    q.push(entry(0))
    q.push(entry(1))
    new = entry(2)
    assert q.push(new) == [new]
    assert [e.seq for e in q.pending] == [0, 1]


def test_byte_bound():
    q = OutboundQueue(1000, 200, "drop-oldest")
    for i in range(5):
        q.push(entry(i, size=40))
    assert q.bytes <= 200
    assert [e.seq for e in q.pending][-1] == 4
    assert q.push(entry(9, size=500)) != []  # larger than the whole queue: refused


def test_qos0_leaves_the_queue_when_taken_and_qos1_when_finished():
    q = OutboundQueue(10, 1 << 20)
    q.push(entry(0, qos=0))
    q.push(entry(1, qos=1))
    q.take()
    assert (len(q), q.bytes) == (1, entry(1).size)
    e = q.take()
    q.fly(e, 1)
    assert q.finish(1) is e
    assert (len(q), q.bytes) == (0, 0)


def test_store_recovers_order_packet_ids_and_releases(tmp_path: Path):
    path = tmp_path / "bridge-cloud.log"

    async def write() -> None:
        store = BridgeStore(path, "always")
        entries = [entry(i) for i in range(1, 6)]
        for e in entries:
            store.queued(e)
        pending = store.take_pending()
        assert pending is not None
        await pending  # what a local PUBACK waits for
        entries[0].pid = 11
        store.flying(entries[0])
        entries[1].pid = 12
        store.flying(entries[1])
        store.released(entries[1])
        store.done(entries[2])
        await asyncio.sleep(0.05)
        await store.aclose()

    asyncio.run(write())
    store = BridgeStore(path, "always")
    entries, next_seq = store.recovered()
    assert [(e.seq, e.pid, e.released) for e in entries] == [
        (1, 11, False),
        (2, 12, True),
        (4, None, False),
        (5, None, False),
    ]
    assert next_seq == 6
    q = OutboundQueue(100, 1 << 20)
    for e in entries:
        q.restore(e)
    assert list(q.inflight) == [11, 12]
    assert [e.seq for e in q.pending] == [4, 5]
    store.log.close()


def test_store_compaction_keeps_only_live_messages(tmp_path: Path):
    path = tmp_path / "bridge-c.log"

    async def churn() -> None:
        store = BridgeStore(path, "never")
        store.log.compact_min_bytes = 0
        for i in range(1, 2001):
            e = entry(i, size=200)
            store.queued(e)
            if i <= 1990:
                store.done(e)
            if i % 100 == 0:
                await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        store.log.compact()
        await store.aclose()

    asyncio.run(churn())
    size = path.stat().st_size
    store = BridgeStore(path, "never")
    entries, _ = store.recovered()
    assert [e.seq for e in entries] == list(range(1991, 2001))
    assert size < 20 * 400  # 10 live messages, not 2000
    store.log.close()


def test_backoff_grows_with_jitter_and_a_cap():
    assert backoff_delay(0, 1.0, 60.0, lambda: 1.0) == 1.0
    assert backoff_delay(3, 1.0, 60.0, lambda: 1.0) == 8.0
    assert backoff_delay(30, 1.0, 60.0, lambda: 1.0) == 60.0
    assert backoff_delay(30, 1.0, 60.0, lambda: 0.0) == 1.0
    assert 1.0 <= backoff_delay(5, 1.0, 60.0) <= 32.0
