"""CONNECT negotiation, PUBLISH validation and the QoS acknowledgement flows (MQTT 5
§3.2.2.3, §3.3, §4.3) on the in-memory broker (engine_harness.py): protocol, not sockets.
Moved from test_broker_protocol_v5.py, assertions unchanged."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from broker_raw import unique_id
from engine_harness import MemoryBroker, MemoryClient

from edge_broker.mqtt.packets import (
    Disconnect,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
)


@pytest.fixture
def client(mb: MemoryBroker) -> Callable[[], MemoryClient]:
    """``client()`` → a new MQTT 5 client of the in-memory broker (as the socket fixture)."""
    return mb.client


def cid(prefix: str = "c") -> str:
    return unique_id(prefix)


def test_connack_announces_capabilities(client):
    c = client()
    ack = c.connect(cid())
    assert ack.reason_code == 0 and not ack.session_present
    p = ack.properties
    assert p.receive_maximum == 32
    assert p.maximum_packet_size == 1_048_576
    assert p.topic_alias_maximum == 10
    assert p.retain_available == 1
    assert p.wildcard_subscription_available == 1
    assert p.subscription_identifier_available == 1
    assert p.shared_subscription_available == 1
    assert p.maximum_qos is None  # QoS 2 supported: the property is absent (§3.2.2.3.4)


def test_qos0_1_2_roundtrip_and_puback_0x10(client):
    sub, pub = client(), client()
    sub.connect(cid())
    pub.connect(cid())
    topic = cid("t/")
    pub.send(Publish(topic + "/none", b"x", 1, packet_id=7))
    ack = pub.expect(Puback)
    assert ack.packet_id == 7 and ack.reason_code == 0x10  # no matching subscribers
    sub.send(Subscribe(1, (Subscription(topic + "/#", 2),)))
    assert sub.expect(Suback).reason_codes == (2,)
    for qos in (0, 1, 2):
        pub.send(Publish(topic + f"/{qos}", b"m%d" % qos, qos, packet_id=qos or None))
        got = sub.expect(Publish)
        assert (got.topic, got.payload, got.qos) == (topic + f"/{qos}", b"m%d" % qos, qos)
        if qos == 1:
            assert pub.expect(Puback).reason_code == 0
            sub.send(Puback(got.packet_id))
        if qos == 2:
            assert pub.expect(Pubrec).reason_code == 0
            pub.send(Pubrel(2))
            pub.expect(Pubcomp)
            sub.send(Pubrec(got.packet_id))
            assert sub.expect(Pubrel).packet_id == got.packet_id
            sub.send(Pubcomp(got.packet_id))


def test_qos2_duplicate_not_routed_twice(client):
    sub, pub = client(), client()
    sub.connect(cid())
    pub.connect(cid())
    topic = cid("dup/")
    sub.subscribe(topic)
    pub.send(Publish(topic, b"once", 2, packet_id=9))
    pub.expect(Pubrec)
    pub.send(Publish(topic, b"once", 2, dup=True, packet_id=9))
    pub.expect(Pubrec)
    assert sub.expect(Publish).payload == b"once"
    sub.nothing()
    pub.send(Pubrel(9))
    pub.expect(Pubcomp)
    pub.send(Pubrel(9))  # unknown now
    assert pub.expect(Pubcomp).reason_code == 0x92


def test_payload_format_indicator_checked_0x99(client):
    c = client()
    c.connect(cid())
    c.send(
        Publish(
            cid("pf/"),
            b"\xff\xfe",
            1,
            packet_id=1,
            properties=Properties(payload_format_indicator=1),
        )
    )
    assert c.expect(Puback).reason_code == 0x99
    c.send(Publish(cid("pf/"), b"\xff", 0, properties=Properties(payload_format_indicator=1)))
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x99


def test_inbound_topic_alias(client):
    sub, pub = client(), client()
    sub.connect(cid())
    pub.connect(cid())
    t = cid("al/")
    sub.subscribe(t)
    pub.send(Publish(t, b"1", 0, properties=Properties(topic_alias=3)))
    pub.send(Publish("", b"2", 0, properties=Properties(topic_alias=3)))
    assert sub.expect(Publish).topic == t
    assert sub.expect(Publish).topic == t
    pub.send(Publish("", b"3", 0, properties=Properties(topic_alias=11)))
    got = pub.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x94


def test_unknown_inbound_alias_is_protocol_error(client):
    c = client()
    c.connect(cid())
    c.send(Publish("", b"2", 0, properties=Properties(topic_alias=4)))
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x82


def test_outbound_topic_alias(client):
    sub, pub = client(), client()
    sub.connect(cid(), properties=Properties(topic_alias_maximum=2))
    pub.connect(cid())
    t = cid("oa/")
    sub.subscribe(t + "/#")
    pub.send(Publish(t + "/a", b"1", 0))
    pub.send(Publish(t + "/a", b"2", 0))
    first, second = sub.expect(Publish), sub.expect(Publish)
    assert first.topic == t + "/a" and first.properties.topic_alias == 1
    assert second.topic == "" and second.properties.topic_alias == 1
    for name in ("b", "c"):  # alias 2, then no alias left: full topic
        pub.send(Publish(f"{t}/{name}", b"x", 0))
    assert sub.expect(Publish).properties.topic_alias == 2
    last = sub.expect(Publish)
    assert last.topic == t + "/c" and last.properties.topic_alias is None


def test_maximum_packet_size_of_client_respected(client):
    sub, pub = client(), client()
    sub.connect(cid(), properties=Properties(maximum_packet_size=64))
    pub.connect(cid())
    t = cid("mp/")
    sub.subscribe(t)
    pub.send(Publish(t, b"x" * 200, 0))
    pub.send(Publish(t, b"small", 0))
    assert sub.expect(Publish).payload == b"small"
