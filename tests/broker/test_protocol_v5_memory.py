"""Raw-bytes tests of the server obligations of MQTT 5 on the in-memory broker
(engine_harness.py): the real Broker and Connection behind an in-memory transport, so "nothing
more comes" is exact instead of a 0.3 s wait. Moved from test_broker_protocol_v5.py (which ran
them against a broker process), assertions unchanged; the socket path is covered by
test_broker_protocol_v3.py, the conformance and interop suites."""

from __future__ import annotations

from broker_raw import unique_id
from engine_harness import MemoryBroker

from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)


def cid(prefix: str = "c") -> str:
    return unique_id(prefix)


def test_empty_client_id_gets_assigned_identifier(mb):
    c = mb.client()
    ack = c.connect("")
    assert ack.reason_code == 0
    assert ack.properties.assigned_client_identifier


def test_first_packet_must_be_connect(mb):
    c = mb.client()
    c.send_raw(b"\xc0\x00")  # PINGREQ
    c.closed()


def test_second_connect_is_protocol_error(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Connect(5, cid()))
    got = c.closed()
    assert got and isinstance(got[0], Disconnect) and got[0].reason_code == 0x82


def test_unsupported_protocol_level_gets_0x84_or_0x01(mb):
    c = mb.client()
    # CONNECT with protocol name MQTT, level 6
    body = b"\x00\x04MQTT\x06\x02\x00\x3c\x00\x00\x00\x01x"
    c.reader.protocol_level = 4  # the answer is a 3.1.1 CONNACK (it comes back at once here)
    c.send_raw(bytes([0x10, len(body)]) + body)
    got = c.closed()
    assert len(got) == 1 and isinstance(got[0], Connack) and got[0].reason_code == 0x01


def test_malformed_packet_gets_disconnect_0x81(mb):
    c = mb.client()
    c.connect(cid())
    c.send_raw(b"\x30\x00")  # PUBLISH without a topic
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x81


def test_reserved_flags_wrong_close(mb):
    c = mb.client()
    c.connect(cid())
    c.send_raw(b"\x80\x06\x00\x01\x00\x01a\x00"[:2] + b"\x00\x01\x00\x01a\x00")  # SUBSCRIBE flags 0
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code in (0x81, 0x82)


def test_pingreq_pingresp(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Pingreq())
    c.expect(Pingresp)


def test_publish_to_sys_denied_and_not_routed(mb):
    sub, pub = mb.client(), mb.client()
    sub.connect(cid())
    sub.subscribe("$SYS/broker/fake")
    pub.connect(cid())
    pub.send(Publish("$SYS/broker/fake", b"x", 1, packet_id=1))
    assert pub.expect(Puback).reason_code == 0x87
    sub.nothing()


def test_claim_topics_reserved(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Subscribe(1, (Subscription("access/claim", 0), Subscription("x/y", 0))))
    assert c.expect(Suback).reason_codes == (0x87, 0)
    c.send(Publish("access/claim", b"{}", 1, packet_id=2))
    assert c.expect(Puback).reason_code == 0x87


def test_subscribe_invalid_filter_0x8f_per_filter(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Subscribe(1, (Subscription("a/#/b", 0), Subscription("ok/+", 1))))
    assert c.expect(Suback).reason_codes == (0x8F, 1)


def test_no_local_on_shared_is_protocol_error(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Subscribe(1, (Subscription("$share/g/x", 0, no_local=True),)))
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x82


def test_unsubscribe_reason_codes(mb):
    c = mb.client()
    c.connect(cid())
    c.subscribe("u/1")
    c.send(Unsubscribe(2, ("u/1", "u/2")))
    assert c.expect(Unsuback).reason_codes == (0x00, 0x11)


def test_no_local_and_retain_as_published(mb):
    c = mb.client()
    c.connect(cid())
    t = cid("nl/")
    c.send(Subscribe(1, (Subscription(t, 0, no_local=True),)))
    c.expect(Suback)
    c.send(Publish(t, b"x", 0))
    c.nothing()
    c.send(
        Subscribe(
            2,
            (Subscription(t + "/rap", 0, retain_as_published=True), Subscription(t + "/plain", 0)),
        )
    )
    c.expect(Suback)
    c.send(Publish(t + "/rap", b"r", 0, retain=True))
    assert c.expect(Publish).retain is True
    c.send(Publish(t + "/plain", b"r", 0, retain=True))
    assert c.expect(Publish).retain is False


def test_retain_handling(mb):
    c = mb.client()
    c.connect(cid())
    t = cid("rh/")
    c.send(Publish(t, b"kept", 0, retain=True))
    c.send(Subscribe(1, (Subscription(t, 0, retain_handling=2),)))
    c.expect(Suback)
    c.nothing()
    c.send(Subscribe(2, (Subscription(t, 0, retain_handling=1),)))  # existing: not sent
    c.expect(Suback)
    c.nothing()
    c.send(Subscribe(3, (Subscription(t, 0, retain_handling=0),)))  # always sent
    c.expect(Suback)
    got = c.expect(Publish)
    assert got.retain and got.payload == b"kept"
    c.send(Publish(t, b"", 0, retain=True))  # clears it
    c.expect(Publish)
    c.subscribe(t, 0, packet_id=4)
    c.nothing()


def test_overlapping_subscriptions_one_copy_all_identifiers(mb):
    c = mb.client()
    c.connect(cid())
    t = cid("ov/")
    c.send(Subscribe(1, (Subscription(t + "/#", 0),), Properties(subscription_identifiers=(5,))))
    c.expect(Suback)
    c.send(Subscribe(2, (Subscription(t + "/+", 1),), Properties(subscription_identifiers=(9,))))
    c.expect(Suback)
    c.send(Publish(t + "/x", b"m", 1, packet_id=1))
    got = [c.recv(), c.recv()]
    pub = next(p for p in got if isinstance(p, Publish))
    assert pub.qos == 1 and sorted(pub.properties.subscription_identifiers) == [5, 9]
    c.nothing()


def test_request_response_properties_passed_through(mb):
    c = mb.client()
    c.connect(cid())
    t = cid("rr/")
    c.subscribe(t)
    props = Properties(
        response_topic=t + "/reply",
        correlation_data=b"\x00\x01",
        content_type="text/plain",
        user_properties=(("a", "1"), ("a", "2"), ("b", "3")),
        payload_format_indicator=1,
    )
    c.send(Publish(t, b"req", 0, properties=props))
    got = c.expect(Publish).properties
    assert got.response_topic == t + "/reply" and got.correlation_data == b"\x00\x01"
    assert got.content_type == "text/plain" and got.payload_format_indicator == 1
    assert got.user_properties == (("a", "1"), ("a", "2"), ("b", "3"))


def test_shared_subscription_round_robin(mb):
    a, b, pub = mb.client(), mb.client(), mb.client()
    for x in (a, b, pub):
        x.connect(cid())
    t = cid("sh/")
    for x in (a, b):
        x.subscribe(f"$share/grp/{t}/#")
    for i in range(6):
        pub.send(Publish(f"{t}/{i}", b"%d" % i, 0))
    pub.send(Pingreq())
    pub.expect(Pingresp)
    got_a = [a.expect(Publish).payload for _ in range(3)]
    got_b = [b.expect(Publish).payload for _ in range(3)]
    assert sorted(got_a + got_b) == [b"%d" % i for i in range(6)]
    a.nothing()
    b.nothing()


def test_packet_too_large_for_broker():
    with MemoryBroker({"limits": {"max_packet_size": 1024}}) as mb:
        c = mb.client()
        c.connect(cid())
        c.send(Publish("big", b"x" * 2000, 0))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x95


def test_auth_without_method_is_protocol_error(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Auth(0x19, Properties(authentication_method="X")))
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x82


def test_unknown_enhanced_auth_method_refused_0x8c(mb):
    c = mb.client()
    ack = c.connect(cid(), properties=Properties(authentication_method="NOPE"))
    assert ack.reason_code == 0x8C
    c.closed()


def test_will_qos_and_invalid_topic(mb):
    c = mb.client()
    ack = c.connect(cid(), will=Will("$SYS/x", b"w"))
    assert ack.reason_code == 0x87


def test_disconnect_session_expiry_from_zero_is_protocol_error(mb):
    c = mb.client()
    c.connect(cid())
    c.send(Disconnect(0, Properties(session_expiry_interval=30)))
    got = c.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x82
