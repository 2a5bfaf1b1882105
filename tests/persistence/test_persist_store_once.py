"""Each message stored once, referred to by every session holding it (issue 17), and a state
directory of the previous format (a whole message per session: tables ``m``/``f``) migrated on
start, never discarded."""

from __future__ import annotations

import time
from pathlib import Path

from persist_support import EXPIRY, RawClient, drain, persistent_config, subscribe

from edge_broker.broker.message import make_message
from edge_broker.broker.persist.codec import encode_outgoing, now_pair
from edge_broker.broker.persist.tables import BROKER_LOG
from edge_broker.broker.session import Outgoing
from edge_broker.mqtt.packets import NO_PROPERTIES, Properties, Puback, Publish, Pubrec
from edge_broker.store import KeyedLog, Put


def _tables(state: Path) -> dict[str, int]:
    keyed = KeyedLog.open(state / BROKER_LOG)
    try:
        return {name: keyed.count(name) for name in keyed.tables()}
    finally:
        keyed.close()


def _refs(tables: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in tables.items() if k in ("msg", "ref")}


def test_a_message_for_ten_sessions_is_stored_once(broker_factory, tmp_path):
    state = tmp_path / "state"
    config = persistent_config(state, "none")
    b = broker_factory(config)
    for k in range(10):
        c = RawClient(b.host, b.port)
        c.connect(f"once-{k}", clean=False, properties=EXPIRY)
        subscribe(c, ("once/#", 1))
        c.close()
    pub = RawClient(b.host, b.port)
    pub.connect("once-pub")
    props = Properties(user_properties=(("k", "v"),), message_expiry_interval=3600)
    pub.send(Publish("once/1", b"x" * 1000, 1, packet_id=1, properties=props))
    assert pub.expect(Puback).reason_code == 0
    b.stop()
    tables = _tables(state)
    assert (tables.get("msg"), tables.get("ref")) == (1, 10)
    keyed = KeyedLog.open(state / BROKER_LOG)
    keyed.compact()  # compaction keeps one message and its references
    keyed.close()
    assert _refs(_tables(state)) == _refs(tables) == {"msg": 1, "ref": 10}
    b2 = broker_factory(config)
    for k in range(10):
        c = RawClient(b2.host, b2.port)
        assert c.connect(f"once-{k}", clean=False, properties=EXPIRY).session_present
        got = drain(c, 0.5)
        assert [(p.payload, p.properties.user_properties) for p in got] == [
            (b"x" * 1000, (("k", "v"),))
        ]
        c.close()
    b2.stop()
    tables = _tables(state)
    assert (tables.get("msg", 0), tables.get("ref", 0)) == (0, 0)  # deleted with the last


def test_previous_format_is_migrated_on_start(broker_factory, tmp_path):
    state = tmp_path / "state"
    config = persistent_config(state, "sync")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("mig-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("mig/#", 2))
    sub.close()
    b.stop()
    # Write what the previous version kept for this session: one in flight (packet id 5, QoS 2
    # released) and two queued, each a whole message in table "m" (and "f" when in flight).
    keyed = KeyedLog.open(state / BROKER_LOG)
    if keyed.has_table("meta"):  # the previous version wrote no format marker
        keyed.drop_table_sync("meta")
    now_mono, now_wall = now_pair(time.monotonic)
    ops = []
    for seq, (topic, payload, qos) in enumerate(
        [("mig/a", b"in flight", 2), ("mig/b", b"queued 1", 1), ("mig/c", b"queued 2", 2)],
        start=100,
    ):
        message = make_message(topic, payload, qos, False, NO_PROPERTIES, "mig-pub")
        ops.append(
            Put(
                "m",
                seq,
                encode_outgoing("mig-sub", Outgoing(message, qos, False), now_mono, now_wall),
            )
        )
    ops.append(Put("f", 100, [5, False]))
    keyed.commit_sync(ops)
    keyed.close()
    b2 = broker_factory(config)
    assert "migrated 3 queued messages" in b2.log()
    sub = RawClient(b2.host, b2.port)
    assert sub.connect("mig-sub", clean=False, properties=EXPIRY).session_present
    first = sub.expect(Publish)
    assert (first.payload, first.packet_id, first.dup) == (b"in flight", 5, True)
    sub.send(Pubrec(5))
    got = [first] + drain(sub, 1.0, held={5})
    assert [p.payload for p in got] == [b"in flight", b"queued 1", b"queued 2"]
    b2.stop()
    tables = _tables(state)
    assert tables.get("m", 0) == 0 and tables.get("f", 0) == 0
    assert tables.get("msg", 0) == 0 and tables.get("ref", 0) == 0  # all delivered
    b3 = broker_factory(config)  # nothing comes back twice
    sub = RawClient(b3.host, b3.port)
    assert sub.connect("mig-sub", clean=False, properties=EXPIRY).session_present
    assert drain(sub, 1.0) == []


def test_references_hold_no_nested_array_and_rows_of_either_shape_are_restored(
    broker_factory, tmp_path
):
    """A reference row lays its subscription ids at its tail (an array inside the row cost
    as much to encode as the row's data, issue 17); rows written by earlier builds
    (``[…, retain, [sub ids], packet id, released]``) are restored as well."""
    from edge_broker.broker.persist.codec import encode_message
    from edge_broker.mqtt.packets import Suback, Subscribe, Subscription

    state = tmp_path / "state"
    config = persistent_config(state, "sync")
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("sid-sub", clean=False, properties=EXPIRY)
    sub.send(Subscribe(1, (Subscription("sid/#", 1),), Properties(subscription_identifiers=(7,))))
    assert sub.expect(Suback).reason_codes == (1,)
    sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("sid-pub")
    pub.send(Publish("sid/new", b"new row", 1, packet_id=1))
    pub.expect(Puback)
    b.stop()
    keyed = KeyedLog.open(state / BROKER_LOG)
    rows = keyed.rows("ref")
    assert len(rows) == 1
    (row,) = rows.values()
    assert not any(isinstance(field, list) for field in row), row
    assert row[0] == "sid-sub" and row[-1] == 7
    now_mono, now_wall = now_pair(time.monotonic)
    old = make_message("sid/old", b"old row", 1, False, NO_PROPERTIES, "sid-pub")
    keyed.commit_sync(
        [
            Put("msg", 900, encode_message(old, now_mono, now_wall)),
            Put("ref", 901, ["sid-sub", 900, 1, False, [7], None, False]),
        ]
    )
    keyed.close()
    b2 = broker_factory(config)
    sub = RawClient(b2.host, b2.port)
    assert sub.connect("sid-sub", clean=False, properties=EXPIRY).session_present
    got = drain(sub, 1.0)
    assert [(p.payload, p.properties.subscription_identifiers) for p in got] == [
        (b"new row", (7,)),
        (b"old row", (7,)),
    ]
