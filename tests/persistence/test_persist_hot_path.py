"""The per-message path with ``durability = "none"`` (issue 17): QoS 1 publishes into a
persistent session are stored one record per event-loop turn (not one or two per message) and
create no asyncio task. Counts, not timings (CPU per message: scripts/bench_persistence.py)."""

from __future__ import annotations

import asyncio

from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Puback, Publish


def test_qos1_publishes_into_a_persistent_session_append_per_turn_without_tasks(
    inprocess_broker_factory, tmp_path
):
    b = inprocess_broker_factory(persistent_config(tmp_path / "state", "none"))
    sub = RawClient(b.host, b.port)
    sub.connect("hot-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("hot/#", 1))
    sub.close()  # offline: every message is stored for it
    pub = RawClient(b.host, b.port)
    pub.connect("hot-pub")
    created = [0]
    names: list[str] = []

    def counting(loop, coro, **kwargs):
        name = getattr(coro, "__qualname__", repr(coro))
        if not name.startswith("InProcessBroker.call"):  # this test's own calls
            created[0] += 1
            names.append(name)
        return asyncio.Task(coro, loop=loop, **kwargs)

    def appends() -> int:
        return b.broker.persistence.keyed.stats().appends

    b.call(lambda: b.loop.set_task_factory(counting))
    before = b.call(appends)
    n = 200
    pub.sock.sendall(
        b"".join(encode(Publish(f"hot/{i}", b"x" * 32, 1, packet_id=i + 1), 5) for i in range(n))
    )
    acks = [pub.expect(Puback) for _ in range(n)]
    assert all(a.reason_code == 0 for a in acks)
    written = b.call(appends) - before
    b.call(lambda: b.loop.set_task_factory(None))
    assert created[0] == 0, f"{created[0]} tasks created for {n} publishes, e.g. {names[:6]}"
    assert 1 <= written <= n // 4, f"{written} appends for {n} publishes"
    assert b.call(lambda: len(b.broker.persistence)) == n  # the journals hold the references


def _records(path) -> list:
    import cbor2

    from edge_broker.store.frame import scan

    frames = scan(path.read_bytes(), 0, 1 << 30)
    return [cbor2.loads(f.payload) for f in frames if hasattr(f, "payload")]


def test_the_per_turn_record_lays_its_ops_flat(inprocess_broker_factory, tmp_path):
    """The ops of a turn go into one array (KeyedLog.write_flat), not an array each: with a
    few ops per delivery, an array per op cost as much CPU as the op's data (issue 17)."""
    from edge_broker.store.keyed import _FLAT

    state = tmp_path / "state"
    b = inprocess_broker_factory(persistent_config(state, "none"))
    sub = RawClient(b.host, b.port)
    sub.connect("flat-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("flat/#", 1))
    sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("flat-pub")
    n = 50
    pub.sock.sendall(
        b"".join(encode(Publish(f"flat/{i}", b"y" * 8, 1, packet_id=i + 1), 5) for i in range(n))
    )
    assert all(pub.expect(Puback).reason_code == 0 for _ in range(n))
    records = _records(state / "broker.log")
    flat = [r[1] for r in records if r[0] == _FLAT]
    # every reference went out in a flat record, in a batched RAW_ROWS op (kind 9)
    refs = [
        key
        for ops in flat
        for i in range(1, len(ops) - 2)
        if ops[i] == "ref" and ops[i - 1] == 9
        for key in ops[i + 2][:: ops[i + 1] + 1]
    ]
    assert len(refs) >= n, records[-3:]
    # and none as an array of its own (a single-op record or inside a nested batch)
    nested = [r for r in records if r[0] in (1, 2) and r[1] == "ref"]
    nested += [op for r in records if r[0] == 5 for op in r[1] if op[1] == "ref"]
    assert not nested, nested[:3]


def test_a_broker_with_a_store_collects_the_young_generation_less_often(
    inprocess_broker_factory, tmp_path
):
    """Queued messages of persistent sessions keep a few containers each until acknowledged;
    the broker with a store raises the young GC threshold (store/gcpause.py)."""
    import gc

    from edge_broker.store.gcpause import YOUNG_THRESHOLD

    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])
    try:
        inprocess_broker_factory(persistent_config(tmp_path / "state", "none"))
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD == 10_000
    finally:
        gc.set_threshold(*before)
