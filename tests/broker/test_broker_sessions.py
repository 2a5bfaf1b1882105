"""Sessions across connections over real sockets: takeover, clean start, redelivery, wills
(MQTT 5 §3.1, §4.4). What depends on time passing (will delay, session expiry, keep alive,
connect timeout) runs on the in-memory broker with a fake clock: test_sessions_memory.py."""

from __future__ import annotations

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


# test_offline_queue_bounded: on the in-memory broker (test_limits_answers_memory.py)
