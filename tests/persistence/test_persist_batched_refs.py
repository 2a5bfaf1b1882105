"""References held by the journals, written as batched ops (issue 17: ten persistent subscribers
within 1.5x of one): a store of the previous format (format 2: a flat record per turn with a row
per reference and ``RAW_SET`` per step) loads and is brought forward, and a compaction writes
the references the sessions hold (the store's index keeps no copy of them) so that a kill -9
after it restores each one, in order, with its packet id."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import cbor2
from persist_support import EXPIRY, RawClient, drain, persistent_config, subscribe

from edge_broker.broker.message import make_message
from edge_broker.broker.persist.codec import encode_message, now_pair
from edge_broker.broker.persist.tables import BROKER_LOG, FORMAT, REF_PID, REF_WIDTH
from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.store import KeyedLog
from edge_broker.store.frame import scan
from edge_broker.store.keyed import _CREATE, RAW_PUT, RAW_SET


def _records(path: Path) -> list[Any]:
    frames = scan(path.read_bytes(), 0, 1 << 30)
    return [cbor2.loads(f.payload) for f in frames if hasattr(f, "payload")]


def _ops(flat: list[Any]) -> list[list[Any]]:
    """The ops of a flat record as written (batched ones whole)."""
    from edge_broker.store.keyed import _WIDTH

    ops, i = [], 0
    while i < len(flat):
        ops.append(flat[i : i + _WIDTH[flat[i]]])
        i += _WIDTH[flat[i]]
    return ops


def test_a_store_of_the_previous_format_loads_and_is_brought_forward(broker_factory, tmp_path):
    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("f2-sub", clean=False, properties=EXPIRY)
    sub.send(Subscribe(1, (Subscription("f2/#", 1),), Properties(subscription_identifiers=(7,))))
    assert sub.expect(Suback).reason_codes == (1,)
    sub.close()
    b.stop()
    # What the previous build wrote per turn (format 2): flat records (kind 7) with one row per
    # reference, ``[session, message id, qos, retain, packet id, released, *sub ids]``, and a
    # RAW_SET (kind 8) when one went into flight.
    keyed = KeyedLog.open(state / BROKER_LOG, fsync="never")
    keyed.write_flat([RAW_PUT, "meta", "format", 2], 1)
    now_mono, now_wall = now_pair(time.monotonic)
    flat: list[Any] = []
    for i in range(3):
        message = make_message(f"f2/{i}", b"two %d" % i, 1, False, NO_PROPERTIES, "f2-pub")
        flat += [RAW_PUT, "msg", 100 + 2 * i, encode_message(message, now_mono, now_wall)]
        flat += [RAW_PUT, "ref", 101 + 2 * i, ["f2-sub", 100 + 2 * i, 1, False, None, False, 7]]
    keyed.write_flat(flat, 6)
    keyed.write_flat([RAW_SET, "ref", 101, REF_PID, 9], 1)  # the first went out as 9
    keyed.close()
    b2 = broker_factory(config)
    sub = RawClient(b2.host, b2.port)
    assert sub.connect("f2-sub", clean=False, properties=EXPIRY).session_present
    first = sub.expect(Publish, 10.0)
    assert (first.payload, first.packet_id, first.dup) == (b"two 0", 9, True)
    sub.send(Puback(9))
    got = [first, *drain(sub, 1.0)]
    assert [(p.payload, p.properties.subscription_identifiers) for p in got] == [
        (b"two %d" % i, (7,)) for i in range(3)
    ]
    b2.stop()
    keyed = KeyedLog.open(state / BROKER_LOG, fsync="never")
    try:
        assert (keyed.count("ref"), keyed.count("msg")) == (0, 0)  # delivered, then released
        assert keyed.lookup("meta", "format") == FORMAT == 3
    finally:
        keyed.close()


def test_compaction_writes_the_references_the_sessions_hold_and_a_kill_restores_them(
    broker_factory, tmp_path
):
    state = tmp_path / "state"
    config = persistent_config(state, "none", compact_min_bytes=65536)
    b = broker_factory(config)
    for cid in ("kept-off", "kept-slow"):  # one offline (queued), one holding them in flight
        c = RawClient(b.host, b.port)
        c.connect(cid, clean=False, properties=EXPIRY)
        subscribe(c, ("kept/#", 1))
        if cid == "kept-off":
            c.close()
        else:
            slow = c
    churn = RawClient(b.host, b.port)
    churn.connect("churn-sub", clean=False, properties=EXPIRY)
    subscribe(churn, ("churn/#", 1))
    pub = RawClient(b.host, b.port)
    pub.connect("kept-pub")
    for i in range(20):
        pub.send(Publish(f"kept/{i}", b"kept %d" % i, 1, packet_id=i + 1))
        assert pub.expect(Puback).reason_code == 0
    held = [slow.expect(Publish, 10.0) for _ in range(20)]  # not acknowledged
    payload = b"c" * 1024
    compacted = False
    for _ in range(60):  # messages that come and go until a compaction rewrote the file
        for i in range(50):
            pub.send(Publish(f"churn/{i}", payload, 1, packet_id=100 + i))
        for _ in range(50):
            pub.expect(Puback)
        assert len(drain(churn, 0.2)) == 50
        records = _records(state / BROKER_LOG)
        if records and records[0][0] == _CREATE:
            compacted = True
            break
    assert compacted, "no compaction: the test's traffic is too small for compact_min_bytes"
    time.sleep(0.5)  # the compaction finished its switch (a kill during it is safe anyway)
    refs = [r for r in records if r[0] == RAW_PUT and r[1] == "ref"]
    assert len(refs) >= 40  # the journals' rows (20 queued, 20 in flight), from the compaction
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)
    b2 = broker_factory(config)
    off = RawClient(b2.host, b2.port)
    assert off.connect("kept-off", clean=False, properties=EXPIRY).session_present
    assert [p.payload for p in drain(off, 1.0)] == [b"kept %d" % i for i in range(20)]
    slow = RawClient(b2.host, b2.port)
    assert slow.connect("kept-slow", clean=False, properties=EXPIRY).session_present
    again = [slow.expect(Publish, 10.0) for _ in range(20)]
    assert [(p.payload, p.packet_id, p.dup) for p in again] == [
        (p.payload, p.packet_id, True) for p in held
    ]
    slow.nothing(0.5)


def test_a_message_sent_at_once_is_one_row_with_its_packet_id_and_comes_back_in_flight(
    broker_factory, tmp_path
):
    """An online subscriber's message goes into flight at once: its row is written once,
    already holding the packet id (no RAW_SETS), before the PUBLISH leaves; a kill -9 then
    restores it in flight under that id, DUP=1."""
    from edge_broker.store.keyed import _FLAT, RAW_ROWS, RAW_SETS

    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("turn-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("turn/#", 1))
    pub = RawClient(b.host, b.port)
    pub.connect("turn-pub")
    pub.send(Publish("turn/1", b"one turn", 1, packet_id=1))
    got = sub.expect(Publish, 10.0)  # not acknowledged
    ops = [op for r in _records(state / BROKER_LOG) if r[0] == _FLAT for op in _ops(r[1])]
    rows = [op for op in ops if op[0] == RAW_ROWS and op[1] == "ref"]
    assert len(rows) == 1 and rows[0][3][1 + REF_PID] == got.packet_id, rows
    assert not [op for op in ops if op[0] == RAW_SETS], ops
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)
    b2 = broker_factory(config)
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("turn-sub", clean=False, properties=EXPIRY).session_present
    again = sub2.expect(Publish, 10.0)
    assert (again.payload, again.packet_id, again.dup) == (b"one turn", got.packet_id, True)


def test_a_reference_queued_and_sent_in_one_turn_is_one_row_with_its_packet_id(
    tmp_path: Path,
) -> None:
    """Queued, then drained in the same event-loop turn (the common case under load): the
    row, not yet written, gets the packet id in place; one queued in an earlier turn gets a
    RAW_SETS pair. Both replay to rows in flight under their ids."""
    import asyncio

    from edge_broker.broker.message import Message
    from edge_broker.broker.persist.persistence import Persistence
    from edge_broker.broker.session import Outgoing
    from edge_broker.store.keyed import _FLAT, RAW_ROWS, RAW_SETS

    path = tmp_path / "broker.log"

    async def run() -> list[Any]:
        keyed = KeyedLog.open(path, fsync="never")
        store = Persistence(keyed)
        store._recording = True
        first = store.put_ref("s", Outgoing(Message("t/1", b"1", 1, False), 1, False))
        store.ref_sent(first, 7)  # the same turn
        second = store.put_ref("s", Outgoing(Message("t/2", b"2", 1, False), 1, False))
        store.write_ahead()  # the turn ends
        store.ref_sent(second, 8)
        store.write_ahead()
        await keyed.aclose()
        return [first[1], second[1]]

    seqs = asyncio.run(run())
    flats = [r[1] for r in _records(path) if r[0] == _FLAT]
    assert len(flats) == 2
    ops = _ops(flats[0])
    assert [op[0] for op in ops].count(RAW_SETS) == 0, ops
    (rows,) = [op[3] for op in ops if op[0] == RAW_ROWS]
    assert rows[:: REF_WIDTH + 1] == seqs and rows[1 + REF_PID :: REF_WIDTH + 1] == [7, None]
    assert flats[1] == [RAW_SETS, "ref", REF_PID, [seqs[1], 8]]
    again = KeyedLog.open(path, fsync="never")
    assert [row[REF_PID] for _, row in sorted(again.rows("ref").items())] == [7, 8]
    again.close()
