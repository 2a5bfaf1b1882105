"""The firmware's MQTT 5 bytes (smokermqtt/packets.py) against the project's codec.

What the device encodes must decode in edge_broker.mqtt as the packet meant; what the broker's
encoder writes must decode on the device; and no byte string makes a device decoder fail with
anything but MQTTError.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smokermqtt import packets
from smokermqtt.packets import MQTTError

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Unsubscribe,
)

ID = "A" * 52 + "===="


def decode_from_client(data: bytes) -> list[object]:
    reader = PacketReader(side="server")
    first = reader.feed(packets.connect("c", 10))  # the reader wants CONNECT first
    assert isinstance(first[0], Connect)
    return list(reader.feed(data))


def test_connect_bytes_exactly() -> None:
    data = packets.connect(
        ID, 30, True, [(packets.MAXIMUM_PACKET_SIZE, 16384), (packets.AUTH_METHOD, "SMOKER")]
    )
    body = (
        b"\x00\x04MQTT\x05\x02\x00\x1e"  # protocol name, level 5, clean start, keepalive 30
        b"\x0e\x27\x00\x00\x40\x00\x15\x00\x06SMOKER"  # 14 bytes of properties
        b"\x00\x38" + ID.encode()
    )
    assert data == b"\x10" + bytes([len(body)]) + body


def test_connect_decodes_in_the_broker_codec() -> None:
    data = packets.connect(
        ID,
        45,
        False,
        [(packets.SESSION_EXPIRY, 3600), (packets.AUTH_METHOD, "SMOKER")],
        username="u",
        password=b"tok\x00en",
        will=("w/t", b"bye", 1, True),
    )
    (connect,) = PacketReader(side="server").feed(data)
    assert isinstance(connect, Connect)
    assert connect.protocol_level == 5 and connect.client_id == ID
    assert connect.keep_alive == 45 and connect.clean_start is False
    assert connect.properties.session_expiry_interval == 3600
    assert connect.properties.authentication_method == "SMOKER"
    assert connect.username == "u" and connect.password == b"tok\x00en"
    assert connect.will is not None
    assert (connect.will.topic, connect.will.payload, connect.will.qos, connect.will.retain) == (
        "w/t",
        b"bye",
        1,
        True,
    )


def test_auth_publish_subscribe_decode_in_the_broker_codec() -> None:
    sig = bytes(range(96))
    data = (
        packets.auth(0x18, [(packets.AUTH_METHOD, "SMOKER"), (packets.AUTH_DATA, sig)])
        + packets.publish_header("a/é", 3, 1, True, False, 513)
        + b"xyz"
        + packets.publish_header("q0", 0)
        + packets.subscribe(7, [("s/#", packets.subscription_options(1, True, True, 2))])
        + packets.unsubscribe(8, ["s/#", "t"])
        + packets.ack(packets.PUBACK, 9)
        + packets.ack(packets.PUBACK, 10, 0x10)
        + packets.disconnect(0x04)
        + packets.PINGREQ_BYTES
    )
    auth, pub, pub0, sub, unsub, ack1, ack2, disc, _ping = decode_from_client(data)
    assert auth == Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=sig))
    assert pub == Publish("a/é", b"xyz", 1, True, False, 513)
    assert pub0 == Publish("q0", b"", 0, False, False, None)
    assert isinstance(sub, Subscribe) and sub.packet_id == 7
    s = sub.subscriptions[0]
    assert (s.topic_filter, s.qos, s.no_local, s.retain_as_published, s.retain_handling) == (
        "s/#",
        1,
        True,
        True,
        2,
    )
    assert unsub == Unsubscribe(8, ("s/#", "t"))
    assert ack1 == Puback(9) and ack2 == Puback(10, 0x10)
    assert disc == Disconnect(0x04)


def test_server_packets_decode_on_the_device() -> None:
    connack = encode(
        Connack(
            True,
            0,
            Properties(
                authentication_method="SMOKER",
                server_keep_alive=20,
                maximum_qos=1,
                reason_string="ok",
            ),
        ),
        5,
    )
    assert connack[0] >> 4 == packets.CONNACK
    present, reason, props = packets.parse_connack(connack[2:])
    assert present and reason == 0
    assert props == {
        packets.AUTH_METHOD: "SMOKER",
        packets.SERVER_KEEP_ALIVE: 20,
        packets.MAXIMUM_QOS: 1,
        packets.REASON_STRING: "ok",
    }
    nonce = bytes(range(32))
    auth = encode(
        Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=nonce)), 5
    )
    assert packets.parse_reason_and_properties(auth[2:]) == (
        0x18,
        {packets.AUTH_METHOD: "SMOKER", packets.AUTH_DATA: nonce},
    )
    pub = encode(
        Publish(
            "t/1",
            b"hi",
            1,
            True,
            False,
            77,
            Properties(user_properties=(("k", "v"), ("k", "w")), subscription_identifiers=(5,)),
        ),
        5,
    )
    assert packets.parse_publish(pub[0], pub[2:]) == (
        "t/1",
        b"hi",
        1,
        True,
        77,
        {packets.USER_PROPERTY: [("k", "v"), ("k", "w")], 0x0B: [5]},
    )
    puback = encode(Puback(77, 0x99, Properties(reason_string="bad claim")), 5)
    assert packets.parse_ack(puback[2:]) == (77, 0x99, {packets.REASON_STRING: "bad claim"})
    assert packets.parse_ack(encode(Puback(3), 5)[2:]) == (3, 0, {})
    suback = encode(Suback(4, (1, 0x87)), 5)
    assert packets.parse_suback(suback[2:]) == (4, b"\x01\x87", {})
    disc = encode(Disconnect(0x8E, Properties(reason_string="taken over")), 5)
    assert packets.parse_reason_and_properties(disc[2:]) == (
        0x8E,
        {packets.REASON_STRING: "taken over"},
    )


@pytest.mark.parametrize("n", [0, 127, 128, 16383, 16384, 2097151, 2097152, 268435455])
def test_varint_round_trip(n: int) -> None:
    data = packets.varint(n)
    assert packets.read_varint(data, 0) == (n, len(data))


def test_varint_limits() -> None:
    with pytest.raises(ValueError):
        packets.varint(268435456)
    with pytest.raises(MQTTError) as info:
        packets.read_varint(b"\xff\xff\xff\xff\x01", 0)
    assert info.value.reason == 0x81


def test_duplicate_property_is_a_protocol_error() -> None:
    with pytest.raises(MQTTError) as info:
        packets.read_properties(b"\x06\x13\x00\x01\x13\x00\x02", 0)
    assert info.value.reason == 0x82


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=15))
def test_decoders_fail_only_with_mqtt_error(body: bytes, flags: int) -> None:
    for decode in (
        packets.parse_connack,
        packets.parse_reason_and_properties,
        packets.parse_ack,
        packets.parse_suback,
        lambda b: packets.parse_publish(0x30 | flags, b),
    ):
        try:
            decode(body)
        except MQTTError as exc:
            assert 0x80 <= exc.reason <= 0x82
