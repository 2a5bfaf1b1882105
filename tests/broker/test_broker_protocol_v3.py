"""Raw-bytes tests of the server obligations of MQTT 3.1.1 and 3.1 (MQIsdp)."""

from __future__ import annotations

import pytest
from broker_raw import RawClients, unique_id

from edge_broker.mqtt.packets import (
    Connect,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
)


def cid() -> str:
    return unique_id("v3-")


@pytest.fixture
def client(module_broker):
    with RawClients(module_broker, level=4) as make:
        yield make


@pytest.mark.parametrize("level", [3, 4])
def test_pub_sub_all_qos(client, level):
    sub, pub = client(level), client(level)
    assert sub.connect(cid()).reason_code == 0
    pub.connect(cid())
    t = f"v3/{cid()}"
    sub.send(Subscribe(1, (Subscription(t + "/+", 2),)))
    assert sub.expect(Suback).reason_codes == (2,)
    for qos in (0, 1, 2):
        pub.send(Publish(f"{t}/{qos}", b"p", qos, packet_id=qos or None))
        if qos == 1:
            pub.expect(Puback)
        if qos == 2:
            pub.expect(Pubrec)
            pub.send(Pubrel(2))
            pub.expect(Pubcomp)
        got = sub.expect(Publish)
        assert got.qos == qos and got.topic == f"{t}/{qos}"
        if qos == 1:
            sub.send(Puback(got.packet_id))
        if qos == 2:
            sub.send(Pubrec(got.packet_id))
            sub.expect(Pubrel)
            sub.send(Pubcomp(got.packet_id))
    sub.send(Unsubscribe(3, (t + "/+",)))
    assert sub.expect(Unsuback).packet_id == 3


def test_zero_length_client_id_needs_clean_session(client):
    c = client(4)
    ack = c.connect("", clean=False)
    assert ack.reason_code == 0x02
    c.closed()
    ok = client(4)
    assert ok.connect("", clean=True).reason_code == 0


def test_mqtt31_needs_client_id(client):
    c = client(3)
    assert c.connect("", clean=True).reason_code == 0x02
    c.closed()


def test_first_packet_must_be_connect(client):
    c = client(4)
    c.send_raw(b"\x82\x06\x00\x01\x00\x01a\x00")  # SUBSCRIBE before CONNECT
    assert c.closed() == []


def test_second_connect_closes(client):
    c = client(4)
    c.connect(cid())
    c.send(Connect(4, cid()))
    assert c.closed() == []


def test_unacceptable_protocol_level(client):
    c = client(4)
    body = b"\x00\x04MQTT\x07\x02\x00\x3c\x00\x01x"
    c.send_raw(bytes([0x10, len(body)]) + body)
    got = c.closed()
    assert len(got) == 1 and got[0].reason_code == 0x01


def test_invalid_filter_closes_v311(client):
    c = client(4)
    c.connect(cid())
    c.send(Subscribe(1, (Subscription("a/#/b", 0),)))
    assert c.closed() == []


def test_denied_filter_gets_0x80(client):
    c = client(4)
    c.connect(cid())
    c.send(Subscribe(1, (Subscription("access/claim", 0), Subscription("ok", 1))))
    assert c.expect(Suback).reason_codes == (0x80, 1)


def test_denied_publish_acknowledged_and_dropped(client):
    sub, c = client(4), client(4)
    sub.connect(cid())
    sub.subscribe("$SYS/broker/x")
    c.connect(cid())
    c.send(Publish("$SYS/broker/x", b"x", 1, packet_id=4))
    assert c.expect(Puback).packet_id == 4
    c.send(Publish("$SYS/broker/x", b"x", 2, packet_id=5))
    c.expect(Pubrec)
    c.send(Pubrel(5))
    c.expect(Pubcomp)
    sub.nothing()


# test_keep_alive_one_and_a_half: on the in-memory broker (test_sessions_memory.py)


def test_dollar_topics_not_matched_by_leading_wildcards(client):
    sub, pub = client(4), client(4)
    sub.connect(cid())
    pub.connect(cid())
    sub.send(Subscribe(1, (Subscription("#", 0), Subscription("+/x", 0))))
    sub.expect(Suback)
    pub.send(Publish("$app/x", b"hidden", 0))
    sub.subscribe("$app/#", 0, packet_id=2)
    pub.send(Publish("$app/x", b"seen", 0))
    got = sub.expect(Publish)
    assert got.payload == b"seen"  # MQTT 3.1.1 §4.7.2: only the $app/# subscription matched
    while True:
        try:
            other = sub.recv(0.3)
        except TimeoutError:
            break
        assert not other.topic.startswith("$app"), other
