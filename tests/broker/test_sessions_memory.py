"""Session lifecycle over time (MQTT 5 §3.1.2.5, §3.1.2.10, §3.1.2.11, §3.1.3.2.2, §3.3.2.3.3)
on the in-memory broker with a fake clock (engine_harness.py): will delay, session expiry,
keep alive, connect timeout and message expiry, without sleeping. Moved here from
test_broker_sessions.py and test_broker_protocol_v5.py, assertions unchanged; the timing
ones are now exact (the will comes at the delay and not a tick before)."""

from __future__ import annotations

from broker_raw import unique_id
from engine_harness import MemoryBroker, MemoryClient, memory_broker

from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Will,
)


def cid(prefix: str = "s") -> str:
    return unique_id(prefix)


def subscribed(mb: MemoryBroker, topic_filter: str) -> MemoryClient:
    w = mb.client()
    w.connect(cid())
    w.subscribe(topic_filter)
    return w


def vanish_with_will(c: MemoryClient, name: str, will: Will, expiry: int = 60) -> None:
    """Connect with Clean Start 0, a session of ``expiry`` seconds and ``will``, then lose the
    connection without DISCONNECT (the will is due, MQTT 5 §3.1.2.5)."""
    c.connect(name, clean=False, properties=Properties(session_expiry_interval=expiry), will=will)
    c.close()


def park_session(
    c: MemoryClient, name: str, expiry: int | None = 60, subscription: Subscription | None = None
) -> None:
    props = NO_PROPERTIES if expiry is None else Properties(session_expiry_interval=expiry)
    c.connect(name, clean=False, properties=props)
    if subscription is not None:
        c.send(Subscribe(1, (subscription,)))
        c.expect(Suback)
    c.send(Disconnect())
    c.closed()


def test_session_expires_after_interval(mb: MemoryBroker) -> None:
    name = cid()
    park_session(mb.client(), name, expiry=2)
    mb.advance(1.5)
    assert mb.client().connect(name, clean=False).session_present  # not yet expired
    park_session(mb.client(), name, expiry=2)
    mb.advance(2.0)
    assert not mb.client().connect(name, clean=False).session_present


def test_will_delay_and_cancel_on_reconnect(mb: MemoryBroker) -> None:
    t = cid("wd/")
    watcher = subscribed(mb, t + "/#")
    vanish_with_will(
        mb.client(), cid(), Will(t + "/x", b"late", properties=Properties(will_delay_interval=1))
    )
    watcher.nothing()
    mb.advance(0.5)
    watcher.nothing()
    mb.advance(0.5)
    assert watcher.expect(Publish).payload == b"late"
    # Reconnecting before the delay cancels the will.
    name2 = cid()
    vanish_with_will(
        mb.client(), name2, Will(t + "/y", b"never", properties=Properties(will_delay_interval=2))
    )
    mb.advance(0.5)
    b2 = mb.client()
    assert b2.connect(
        name2, clean=False, properties=Properties(session_expiry_interval=60)
    ).session_present
    mb.advance(2.5)
    watcher.nothing()


def test_retained_will(mb: MemoryBroker) -> None:
    t = cid("rw/")
    a = mb.client()
    a.connect(cid(), will=Will(t, b"retained will", retain=True))
    a.close()
    w = subscribed(mb, t)
    got = w.expect(Publish)
    assert got.retain and got.payload == b"retained will"


def test_will_published_when_session_expires_before_will_delay(mb: MemoryBroker) -> None:
    t = cid("wexp/")
    watcher = subscribed(mb, t)
    vanish_with_will(
        mb.client(),
        cid(),
        Will(t, b"session ended", properties=Properties(will_delay_interval=30)),
        expiry=1,
    )
    mb.advance(0.5)
    watcher.nothing()
    mb.advance(0.5)  # the session ends after 1 s: its will goes then, not after 30 s
    assert watcher.expect(Publish).payload == b"session ended"


def test_shared_group_prefers_online_members_and_queues_for_offline(mb: MemoryBroker) -> None:
    t = cid("sho/")
    offline_name = cid()
    park_session(mb.client(), offline_name, subscription=Subscription(f"$share/g/{t}", 1))
    on = mb.client()
    on.connect(cid())
    on.subscribe(f"$share/g/{t}", 1)
    pub = mb.client()
    pub.connect(cid())
    for i in range(4):
        pub.send(Publish(t, b"%d" % i, 1, packet_id=i + 1))
        pub.expect(Puback)
    assert [on.expect(Publish).payload for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    on.close()
    pub.send(Publish(t, b"for the offline member", 1, packet_id=9))
    pub.expect(Puback)
    back = mb.client()
    back.connect(offline_name, clean=False, properties=Properties(session_expiry_interval=60))
    assert back.expect(Publish).payload == b"for the offline member"


def test_connection_without_connect_is_closed() -> None:
    for mb in memory_broker({"broker": {"connect_timeout": 0.5}}):
        c = mb.client()
        c.nothing()
        mb.advance(0.5)
        c.nothing()  # closed after the timeout, not at it
        mb.advance(0.5)
        assert c.closed() == []


def test_max_session_expiry_bounds_v3_persistent_sessions() -> None:
    for mb in memory_broker({"broker": {"max_session_expiry": 1}}):
        name = cid()
        mb.client(level=4).connect(name, clean=False)
        mb.clients[-1].close()
        assert mb.client(level=4).connect(name, clean=False).session_present  # within the second
        mb.clients[-1].close()
        mb.advance(1.0)
        assert not mb.client(level=4).connect(name, clean=False).session_present


def test_server_keep_alive_and_timeout() -> None:
    for mb in memory_broker({"broker": {"server_keep_alive": 1}}):
        c = mb.client()
        ack = c.connect(cid(), keep_alive=60)
        assert ack.properties.server_keep_alive == 1
        mb.advance(1.0)
        c.send(Pingreq())  # any packet keeps the connection alive
        c.expect(Pingresp)
        mb.advance(1.5)
        c.nothing()  # 1.5 × keep alive since the PINGREQ: not yet over
        mb.advance(0.5)
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x8D


def test_keep_alive_one_and_a_half(mb: MemoryBroker) -> None:
    """MQTT 3.1.1 §3.1.2.10: closed once 1.5 × Keep Alive pass without a packet, not before
    (moved from test_broker_protocol_v3.py, which allowed 1.4-3.5 s of wall clock)."""
    c = mb.client(level=4)
    c.connect(cid(), keep_alive=1)
    c.send(Pingreq())
    c.expect(Pingresp)
    mb.advance(1.5)
    c.nothing()  # exactly 1.5 s after the PINGREQ: not yet
    assert not c.eof
    mb.advance(1e-6)
    assert c.closed() == []  # 3.1.1 has no DISCONNECT from the server


def test_message_expiry_remaining_sent_and_expired_dropped(mb: MemoryBroker) -> None:
    c = mb.client()
    c.connect(cid())
    t = cid("exp/")
    c.send(
        Publish(t + "/a", b"a", 0, retain=True, properties=Properties(message_expiry_interval=100))
    )
    c.send(
        Publish(t + "/b", b"b", 0, retain=True, properties=Properties(message_expiry_interval=1))
    )
    mb.advance(1.5)
    c.subscribe(t + "/#")
    got = c.expect(Publish)
    assert got.topic == t + "/a" and 98 <= got.properties.message_expiry_interval <= 100
    c.nothing()


def test_session_present_v311(mb: MemoryBroker) -> None:
    name = cid()
    a = mb.client(4)
    assert not a.connect(name, clean=False).session_present
    a.close()
    b = mb.client(4)
    assert b.connect(name, clean=False).session_present
    b.close()
    c = mb.client(4)
    assert not c.connect(name, clean=True).session_present


def test_a_queued_will_expires_on_the_broker_clock(mb: MemoryBroker) -> None:
    """The will's Message Expiry Interval runs on the broker's clock (MQTT 5 §3.1.3.2.4,
    §3.3.2.3.3): queued for an offline session, it is gone once that much time has passed,
    and still there a second before."""
    t = cid("wme/")
    late, early = cid(), cid()
    for name in (late, early):
        park_session(mb.client(), name, subscription=Subscription(t, 1))
    expiring = Will(t, b"bye", qos=1, properties=Properties(message_expiry_interval=5))
    vanish_with_will(mb.client(), cid(), expiring)
    mb.advance(4.0)
    back = mb.client()
    back.connect(early, clean=False, properties=Properties(session_expiry_interval=60))
    got = back.expect(Publish)
    assert got.payload == b"bye" and got.properties.message_expiry_interval == 1
    mb.advance(1.0)
    again = mb.client()
    again.connect(late, clean=False, properties=Properties(session_expiry_interval=60))
    again.nothing()
