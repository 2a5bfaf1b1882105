"""Sessions across connections: takeover, clean start, expiry, redelivery, wills.

MQTT 5 §3.1, §4.4.
"""

from __future__ import annotations

import time

from broker_raw import RawClient, RawClients, unique_id

from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Will,
)


def cid(prefix: str = "s") -> str:
    return unique_id(prefix)


def sync(c: RawClient) -> None:
    c.send(Pingreq())
    c.expect(Pingresp)


def subscribed(client: RawClients, topic_filter: str) -> RawClient:
    """A new connection subscribed to ``topic_filter`` (QoS 0)."""
    w = client()
    w.connect(cid())
    w.subscribe(topic_filter)
    return w


def vanish_with_will(c: RawClient, name: str, will: Will, expiry: int = 60) -> None:
    """Connect ``name`` with Clean Start 0, a session of ``expiry`` seconds and ``will``, then
    drop the connection without DISCONNECT (network loss: the will is due, MQTT 5 §3.1.2.5)."""
    c.connect(name, clean=False, properties=Properties(session_expiry_interval=expiry), will=will)
    c.close()


def park_session(
    c: RawClient, name: str, expiry: int | None = 60, subscription: Subscription | None = None
) -> None:
    """Connect ``name`` with Clean Start 0, subscribe to ``subscription`` if given, and
    disconnect normally (0x00): the session outlives the connection for ``expiry`` seconds
    (None: no Session Expiry Interval, which means 0, MQTT 5 §3.1.2.11.2)."""
    props = NO_PROPERTIES if expiry is None else Properties(session_expiry_interval=expiry)
    c.connect(name, clean=False, properties=props)
    if subscription is not None:
        c.send(Subscribe(1, (subscription,)))
        c.expect(Suback)
    c.send(Disconnect())
    c.closed()


def test_takeover_sends_0x8e_to_old_connection(client):
    name = cid()
    old, new = client(), client()
    old.connect(name)
    assert new.connect(name).reason_code == 0
    got = old.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x8E


def test_takeover_v311_closes_old(client):
    name = cid()
    old, new = client(4), client(4)
    old.connect(name)
    new.connect(name)
    assert old.closed() == []


def test_session_resumed_with_subscriptions_and_queued_messages(client):
    name = cid()
    t = cid("q/")
    park_session(client(), name, subscription=Subscription(t, 1))
    pub = client()
    pub.connect(cid())
    pub.send(Publish(t, b"while away", 1, packet_id=1))
    assert pub.expect(Puback).reason_code == 0
    pub.send(Publish(t, b"qos0 lost", 0))
    sync(pub)
    back = client()
    ack = back.connect(name, clean=False, properties=Properties(session_expiry_interval=60))
    assert ack.session_present
    got = back.expect(Publish)
    assert got.payload == b"while away" and got.qos == 1
    back.nothing()


def test_clean_start_discards_session(client):
    name = cid()
    park_session(client(), name, expiry=60)
    again = client()
    assert not again.connect(name, clean=True).session_present


def test_session_expiry_zero_ends_session_at_disconnect(client):
    name = cid()
    park_session(client(), name, expiry=None)
    again = client()
    assert not again.connect(name, clean=False).session_present


def test_session_expires_after_interval(client):
    name = cid()
    park_session(client(), name, expiry=1)
    time.sleep(2.2)
    again = client()
    assert not again.connect(name, clean=False).session_present


def test_unacknowledged_redelivered_with_dup(client):
    name = cid()
    t = cid("dup/")
    s = client()
    s.connect(name, clean=False, properties=Properties(session_expiry_interval=60))
    s.subscribe(t + "/#", 2)
    pub = client()
    pub.connect(cid())
    pub.send(Publish(t + "/1", b"one", 1, packet_id=1))
    pub.send(Publish(t + "/2", b"two", 2, packet_id=2))
    first = s.expect(Publish)
    second = s.expect(Publish)
    s.send(Pubrec(second.packet_id))  # QoS 2: received, not completed
    assert s.expect(Pubrel).packet_id == second.packet_id
    s.close()  # network loss: nothing acknowledged for "one", PUBCOMP missing for "two"
    back = client()
    assert back.connect(
        name, clean=False, properties=Properties(session_expiry_interval=60)
    ).session_present
    again = back.expect(Publish)
    assert again.dup and again.payload == b"one" and again.packet_id == first.packet_id
    rel = back.expect(Pubrel)
    assert rel.packet_id == second.packet_id


def test_will_published_on_network_loss_not_on_normal_disconnect(client):
    t = cid("will/")
    watcher = subscribed(client, t + "/#")
    a = client()
    a.connect(cid(), will=Will(t + "/a", b"a gone"))
    a.close()
    assert watcher.expect(Publish).payload == b"a gone"
    b = client()
    b.connect(cid(), will=Will(t + "/b", b"b gone"))
    b.send(Disconnect(0))
    b.closed()
    watcher.nothing(0.5)
    c = client()
    c.connect(cid(), will=Will(t + "/c", b"c gone"))
    c.send(Disconnect(0x04))
    assert watcher.expect(Publish).payload == b"c gone"


def test_will_on_protocol_error(client):
    t = cid("willpe/")
    watcher = subscribed(client, t)
    a = client()
    a.connect(cid(), will=Will(t, b"bye"))
    a.send_raw(b"\x30\x00")
    a.closed()
    assert watcher.expect(Publish).payload == b"bye"


def test_will_delay_and_cancel_on_reconnect(client):
    t = cid("wd/")
    watcher = subscribed(client, t + "/#")
    vanish_with_will(
        client(), cid(), Will(t + "/x", b"late", properties=Properties(will_delay_interval=1))
    )
    watcher.nothing(0.5)
    assert watcher.expect(Publish, timeout=3).payload == b"late"
    # Reconnecting before the delay cancels the will.
    name2 = cid()
    vanish_with_will(
        client(), name2, Will(t + "/y", b"never", properties=Properties(will_delay_interval=2))
    )
    time.sleep(0.3)
    b2 = client()
    assert b2.connect(
        name2, clean=False, properties=Properties(session_expiry_interval=60)
    ).session_present
    watcher.nothing(2.5)


def test_retained_will(client):
    t = cid("rw/")
    a = client()
    a.connect(cid(), will=Will(t, b"retained will", retain=True))
    a.close()
    time.sleep(0.3)
    w = subscribed(client, t)
    got = w.expect(Publish)
    assert got.retain and got.payload == b"retained will"


def test_offline_queue_bounded(broker_factory):
    b = broker_factory({"limits": {"max_queued_messages": 3}})
    name = cid()
    t = cid("bq/")
    with RawClient(b.host, b.port) as s:
        park_session(s, name, subscription=Subscription(t, 1))
    with RawClient(b.host, b.port) as p:
        p.connect(cid())
        for i in range(10):
            p.send(Publish(t, b"%d" % i, 1, packet_id=i + 1))
            p.expect(Puback)
    with RawClient(b.host, b.port) as s:
        s.connect(name, clean=False, properties=Properties(session_expiry_interval=60))
        got = [s.expect(Publish).payload for _ in range(3)]
        assert got == [b"0", b"1", b"2"]
        s.nothing()


def test_will_published_when_session_expires_before_will_delay(client):
    t = cid("wexp/")
    watcher = subscribed(client, t)
    vanish_with_will(
        client(),
        cid(),
        Will(t, b"session ended", properties=Properties(will_delay_interval=30)),
        expiry=1,
    )
    start = time.monotonic()
    assert watcher.expect(Publish, timeout=4).payload == b"session ended"
    assert time.monotonic() - start < 3


def test_shared_group_prefers_online_members_and_queues_for_offline(client):
    t = cid("sho/")
    offline_name = cid()
    park_session(client(), offline_name, subscription=Subscription(f"$share/g/{t}", 1))
    on = client()
    on.connect(cid())
    on.subscribe(f"$share/g/{t}", 1)
    pub = client()
    pub.connect(cid())
    for i in range(4):
        pub.send(Publish(t, b"%d" % i, 1, packet_id=i + 1))
        pub.expect(Puback)
    assert [on.expect(Publish).payload for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    on.close()
    time.sleep(0.2)
    pub.send(Publish(t, b"for the offline member", 1, packet_id=9))
    pub.expect(Puback)
    back = client()
    back.connect(offline_name, clean=False, properties=Properties(session_expiry_interval=60))
    assert back.expect(Publish).payload == b"for the offline member"


def test_connection_without_connect_is_closed(broker_factory):
    b = broker_factory({"broker": {"connect_timeout": 0.5}})
    with RawClient(b.host, b.port) as c:
        start = time.monotonic()
        assert c.closed(timeout=4) == []
        assert time.monotonic() - start < 3


def test_max_session_expiry_bounds_v3_persistent_sessions(broker_factory):
    b = broker_factory({"broker": {"max_session_expiry": 1}})
    name = cid()
    with RawClient(b.host, b.port, level=4) as c:
        c.connect(name, clean=False)
    with RawClient(b.host, b.port, level=4) as c:
        assert c.connect(name, clean=False).session_present  # within the second
    time.sleep(2.2)
    with RawClient(b.host, b.port, level=4) as c:
        assert not c.connect(name, clean=False).session_present
    with RawClient(b.host, b.port) as c:
        ack = c.connect(cid(), clean=False, properties=Properties(session_expiry_interval=600))
        assert ack.properties.session_expiry_interval == 1  # the server's value is announced
