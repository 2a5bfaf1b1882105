"""What encode refuses to put on the wire, the MQTT 5 short forms, and how v3 drops v5 fields."""

from __future__ import annotations

import pytest

from edge_broker.mqtt.codec import PacketReader, ProtocolError, encode
from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Properties,
    Puback,
    Publish,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Will,
)
from edge_broker.mqtt.wire import encode_varint


@pytest.mark.parametrize(
    ("packet", "level", "why"),
    [
        (Publish("t", qos=1), 4, "packet identifier"),
        (Publish("t", qos=3), 4, "QoS 3"),
        (Publish("t", dup=True), 4, "DUP"),
        (Publish("x" * 65_536), 4, "65535"),
        (Publish("a\ud800"), 4, "surrogate"),
        (Publish("a\x00"), 4, r"U\+0000"),
        (Puback(0), 4, "packet identifier"),
        (Puback(70_000), 4, "packet identifier"),
        (Auth(), 4, "only in MQTT 5"),
        (Connect(4, "c"), 6, "level 6"),
        (Connect(5, "c", will=Will("w", b"", qos=3)), 5, "will QoS"),
        (Publish("t", properties=Properties(message_expiry_interval=1 << 32)), 5, "out of range"),
        (Publish("t", properties=Properties(session_expiry_interval=1)), 5, "may not carry"),
        (
            Subscribe(1, (Subscription("a"),), Properties(subscription_identifiers=(1 << 28,))),
            5,
            "variable byte integer",
        ),
        (Subscribe(1, (Subscription("a", qos=4),)), 5, "must each be 0, 1 or 2"),
        (Subscribe(1, (Subscription("a", retain_handling=3),)), 5, "must each be 0, 1 or 2"),
        (Suback(1, (256,)), 5, "out of range"),
        (Connack(False, 300), 4, "out of range"),
    ],
)
def test_encode_refuses(packet: object, level: int, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        encode(packet, level)  # type: ignore[arg-type]


def test_remaining_length_limit() -> None:
    assert encode_varint(268_435_455) == b"\xff\xff\xff\x7f"
    with pytest.raises(ProtocolError, match="variable byte integer"):
        encode_varint(268_435_456)


def test_encode_refuses_non_packets() -> None:
    with pytest.raises(ProtocolError, match="cannot encode str"):
        encode("PUBLISH", 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("packet", "wire"),
    [
        (Puback(1), b"\x40\x02\x00\x01"),
        (Puback(1, 0x10), b"\x40\x03\x00\x01\x10"),
        (Puback(1, 0, Properties(reason_string="r")), b"\x40\x08\x00\x01\x00\x04\x1f\x00\x01r"),
        (Pubrel(2), b"\x62\x02\x00\x02"),
        (Disconnect(), b"\xe0\x00"),
        (Disconnect(0x8B), b"\xe0\x01\x8b"),
        (Auth(0x18, Properties(authentication_method="M")), b"\xf0\x06\x18\x04\x15\x00\x01M"),
        (Connack(True, 0), b"\x20\x03\x01\x00\x00"),
    ],
)
def test_v5_wire_forms(packet: object, wire: bytes) -> None:
    assert encode(packet, 5) == wire  # type: ignore[arg-type]


def test_v3_drops_v5_fields() -> None:
    props = Properties(reason_string="dropped", user_properties=(("k", "v"),))
    assert encode(Puback(1, 0x10, props), 4) == b"\x40\x02\x00\x01"
    assert encode(Disconnect(0x8B, props), 4) == b"\xe0\x00"
    assert encode(Unsuback(3, (0x11,), props), 4) == b"\xb0\x02\x00\x03"
    assert encode(Connack(True, 0, props), 3) == b"\x20\x02\x00\x00"  # 3.1 has no session present
    sub = Subscribe(1, (Subscription("a", 1, no_local=True, retain_handling=2),), props)
    assert encode(sub, 4) == b"\x82\x06\x00\x01\x00\x01a\x01"
    connect = encode(Connect(3, "c", will=Will("w", b"p", properties=props), properties=props), 3)
    assert connect.startswith(b"\x10") and b"\x00\x06MQIsdp\x03" in connect
    [decoded] = PacketReader().feed(connect)
    assert decoded == Connect(3, "c", will=Will("w", b"p"), protocol_name="MQIsdp")


def test_suback_v3_codes_pass_through() -> None:
    assert encode(Suback(7, (0, 1, 2, 0x80)), 4) == b"\x90\x06\x00\x07\x00\x01\x02\x80"


def test_properties_repr_shows_only_what_is_present() -> None:
    props = Properties(topic_alias=3, user_properties=(("a", "b"),), payload_format_indicator=0)
    assert repr(props) == (
        "Properties(payload_format_indicator=0, topic_alias=3, user_properties=(('a', 'b'),))"
    )
    assert repr(Properties()) == "Properties()"


def test_fast_constructors_build_ordinary_equal_packets() -> None:
    from edge_broker.mqtt.fast_construct import new_puback, new_pubcomp, new_publish, new_pubrel

    props = Properties(topic_alias=2)
    fast = new_publish("t", b"p", 1, True, False, 9, props)
    slow = Publish("t", b"p", 1, True, False, 9, props)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert new_puback(3, 0x10, props) == Puback(3, 0x10, props)
    assert new_pubrel(3, 0, props) == Pubrel(3, 0, props)
    assert new_pubcomp(4, 0x92, props) != Pubrel(4, 0x92, props)  # the type is part of equality
