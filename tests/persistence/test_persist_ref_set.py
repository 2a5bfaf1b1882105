"""Queued messages going into flight, and QoS 2 messages released, change their reference rows
with one batched ``RAW_SETS`` op per turn (store/keyed.py: set one item of many stored arrays)
instead of writing the whole rows again, and the new rows of a turn are one ``RAW_ROWS`` op
(issue 17: ten persistent subscribers cost one op per step, not ten). Each test reads the log
for those ops, then kill -9s the broker and checks the restart restores exactly the state the
client holds."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.broker.message import make_message
from edge_broker.broker.persist.codec import encode_message, now_pair
from edge_broker.broker.persist.tables import BROKER_LOG, REF_PID, REF_RELEASED, REF_WIDTH
from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
)
from edge_broker.store import KeyedLog, Put
from edge_broker.store.keyed import _FLAT, _WIDTH, RAW_PUT, RAW_ROWS, RAW_SET, RAW_SETS


def _flat_ops(state: Path) -> list[list[Any]]:
    """Every op of the broker's flat records, in log order (batched ops as they are)."""
    import cbor2

    from edge_broker.store.frame import scan

    frames = scan((state / BROKER_LOG).read_bytes(), 0, 1 << 30)
    ops: list[list[Any]] = []
    for frame in frames:
        record = cbor2.loads(frame.payload) if hasattr(frame, "payload") else None
        if not (isinstance(record, list) and record[0] == _FLAT):
            continue
        flat, i = record[1], 0
        while i < len(flat):
            width = _WIDTH[flat[i]]
            ops.append(flat[i : i + width])
            i += width
    return ops


def _kill(b) -> None:
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)


def test_queued_messages_go_into_flight_with_one_batched_set_and_come_back_in_flight(
    broker_factory, tmp_path
):
    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("set-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("set/#", 1))
    sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("set-pub")
    for i in range(3):
        pub.send(Publish(f"set/{i}", b"m%d" % i, 1, packet_id=i + 1))
        assert pub.expect(Puback).reason_code == 0
    sub = RawClient(b.host, b.port)
    assert sub.connect("set-sub", clean=False, properties=EXPIRY).session_present
    first = [sub.expect(Publish, 10.0) for _ in range(3)]  # not acknowledged
    assert [p.payload for p in first] == [b"m0", b"m1", b"m2"]
    ops = _flat_ops(state)  # written before the PUBLISHes left (write-ahead)
    assert not [op for op in ops if op[0] in (RAW_PUT, RAW_SET) and op[1] == "ref"], ops[-8:]
    sets = [op for op in ops if op[0] == RAW_SETS and op[1] == "ref"]
    assert len(sets) == 1 and sets[0][2] == REF_PID, ops[-8:]  # one op for the three
    assert sets[0][3][1::2] == [p.packet_id for p in first], sets
    rows = [op for op in ops if op[0] == RAW_ROWS and op[1] == "ref"]
    assert len(rows) == 3 and all(op[2] == REF_WIDTH for op in rows), rows  # one per publish
    assert all(op[3][1 + REF_PID] is None for op in rows), rows  # queued
    _kill(b)
    b2 = broker_factory(config)
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("set-sub", clean=False, properties=EXPIRY).session_present
    again = [sub2.expect(Publish, 10.0) for _ in range(3)]
    assert [(p.payload, p.packet_id, p.dup) for p in again] == [
        (p.payload, p.packet_id, True) for p in first
    ]
    for p in again:
        sub2.send(Puback(p.packet_id or 0))
    sub2.nothing(0.5)
    sub2.close()
    b2.stop()
    keyed = KeyedLog.open(state / BROKER_LOG)
    try:
        assert keyed.count("ref") == 0 and keyed.count("msg") == 0
    finally:
        keyed.close()


def test_a_released_qos2_message_is_one_batched_set_and_comes_back_as_its_pubrel(
    broker_factory, tmp_path
):
    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("rel-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("rel/#", 2))
    pub = RawClient(b.host, b.port)
    pub.connect("rel-pub")
    pub.send(Publish("rel/1", b"twice never", 2, packet_id=5))
    assert pub.expect(Pubrec).reason_code == 0
    pub.send(Pubrel(5))
    pub.expect(Pubcomp)
    got = sub.expect(Publish, 10.0)
    sub.send(Pubrec(got.packet_id or 0))
    assert sub.expect(Pubrel).packet_id == got.packet_id
    sets = [op for op in _flat_ops(state) if op[0] == RAW_SETS and op[3][1::2] == [True]]
    assert [op[2] for op in sets] == [REF_RELEASED], sets
    _kill(b)
    b2 = broker_factory(config)
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("rel-sub", clean=False, properties=EXPIRY).session_present
    assert sub2.expect(Pubrel, 10.0).packet_id == got.packet_id  # not the PUBLISH again
    sub2.send(Pubcomp(got.packet_id or 0))
    sub2.nothing(0.5)


def test_rows_a_set_could_not_change_are_rewritten_at_recovery(broker_factory, tmp_path):
    """A row of the earlier shape (packet id one place later) and a queued row still naming a
    packet id (its id was taken when it was restored) are written again in the current shape,
    so a later RAW_SET changes the right item; the messages are delivered and then released."""
    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("old-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("old/#", 2))
    sub.close()
    b.stop()
    now_mono, now_wall = now_pair(time.monotonic)
    keyed = KeyedLog.open(state / BROKER_LOG)
    ops = []
    for i, row in enumerate(
        (
            ["old-sub", 900, 2, False, [], 3, False],  # earlier shape, in flight as 3
            ["old-sub", 902, 2, False, 3, True],  # also claims 3: back to the queue
        )
    ):
        message = make_message(f"old/{i}", b"old %d" % i, 2, False, NO_PROPERTIES, "old-pub")
        ops += [Put("msg", 900 + 2 * i, encode_message(message, now_mono, now_wall))]
        ops += [Put("ref", 901 + 2 * i, row)]
    keyed.commit_sync(ops)
    keyed.close()
    b2 = broker_factory(config)
    sub = RawClient(b2.host, b2.port)
    assert sub.connect("old-sub", clean=False, properties=EXPIRY).session_present
    first = sub.expect(Publish, 10.0)
    assert (first.payload, first.packet_id, first.dup) == (b"old 0", 3, True)
    second = sub.expect(Publish, 10.0)
    assert second.payload == b"old 1" and second.packet_id != 3
    sub.send(Pubrec(3))
    assert sub.expect(Pubrel).packet_id == 3
    _kill(b2)  # 3 released, the other one in flight: both set on rewritten rows
    keyed = KeyedLog.open(state / BROKER_LOG)
    try:
        rows = keyed.rows("ref")
    finally:
        keyed.close()
    assert rows == {
        901: ["old-sub", 900, 2, False, 3, True],
        903: ["old-sub", 902, 2, False, second.packet_id, False],
    }
    b3 = broker_factory(config)
    sub = RawClient(b3.host, b3.port)
    assert sub.connect("old-sub", clean=False, properties=EXPIRY).session_present
    assert sub.expect(Pubrel, 10.0).packet_id == 3
    again = sub.expect(Publish, 10.0)
    assert (again.payload, again.packet_id, again.dup) == (b"old 1", second.packet_id, True)
