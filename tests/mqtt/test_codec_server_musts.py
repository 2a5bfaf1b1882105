"""Each server obligation of MQTT 3.1.1 / MQTT 5 the codec enforces, from raw bytes.

Every case asserts the exact reason code of the ProtocolError the reader raises.
"""

from __future__ import annotations

import pytest

from edge_broker.mqtt.codec import PacketReader, ProtocolError, encode
from edge_broker.mqtt.packets import Connect, Publish, Subscribe, Subscription
from edge_broker.mqtt.wire import encode_varint

MALFORMED, PROTOCOL, UNSUPPORTED, TOPIC_NAME_INVALID = 0x81, 0x82, 0x84, 0x90
TOPIC_ALIAS_INVALID, TOO_LARGE = 0x94, 0x95


def pkt(first: int, body: bytes) -> bytes:
    return bytes((first,)) + encode_varint(len(body)) + body


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return len(raw).to_bytes(2, "big") + raw


def props(*items: bytes) -> bytes:
    body = b"".join(items)
    return encode_varint(len(body)) + body


def connect_body(
    level: int = 4,
    flags: int = 0x02,
    client_id: bytes = s("c"),
    extra: bytes = b"",
    properties: bytes = b"\x00",
    name: str = "MQTT",
) -> bytes:
    head = s(name) + bytes((level, flags)) + b"\x00\x3c"
    return head + (properties if level == 5 else b"") + client_id + extra


def connected(level: int) -> PacketReader:
    reader = PacketReader(side="server")
    reader.feed(
        encode(Connect(level, "c", protocol_name="MQIsdp" if level == 3 else "MQTT"), level)
    )
    return reader


def reject(reader: PacketReader, data: bytes, code: int) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        reader.feed(data)
    assert info.value.reason_code == code, str(info.value)
    return info.value


# ---- fixed header (MQTT 5 §2.1, 3.1.1 §2.2) ----

FIXED_HEADER_CASES = [
    ("type 0 is reserved", 4, b"\x00\x00", MALFORMED),
    ("type 15 in 3.1.1", 4, b"\xf0\x00", MALFORMED),
    ("type 15 in 3.1", 3, b"\xf0\x00", MALFORMED),
    ("client sends CONNACK", 5, b"\x20\x02\x00\x00", PROTOCOL),
    ("client sends SUBACK", 4, pkt(0x90, b"\x00\x01\x00"), PROTOCOL),
    ("client sends PINGRESP", 4, b"\xd0\x00", PROTOCOL),
    ("PUBREL flags must be 0010", 4, pkt(0x60, b"\x00\x01"), MALFORMED),
    ("SUBSCRIBE flags must be 0010", 4, pkt(0x80, b"\x00\x01" + s("a") + b"\x00"), MALFORMED),
    ("UNSUBSCRIBE flags must be 0010", 4, pkt(0xA0, b"\x00\x01" + s("a")), MALFORMED),
    ("PUBACK flags must be 0", 5, pkt(0x41, b"\x00\x01"), MALFORMED),
    ("PINGREQ flags must be 0", 4, b"\xc1\x00", MALFORMED),
    ("DISCONNECT flags must be 0", 5, b"\xe8\x00", MALFORMED),
    ("PUBLISH QoS 3", 4, pkt(0x36, s("t") + b"\x00\x01"), MALFORMED),
    ("PUBLISH DUP on QoS 0", 4, pkt(0x38, s("t")), MALFORMED),
    ("remaining length of five bytes", 4, b"\x30\xff\xff\xff\xff\x01", MALFORMED),
    ("second CONNECT", 4, pkt(0x10, connect_body()), PROTOCOL),
]


@pytest.mark.parametrize(
    ("level", "data", "code"),
    [c[1:] for c in FIXED_HEADER_CASES],
    ids=[c[0] for c in FIXED_HEADER_CASES],
)
def test_fixed_header(level: int, data: bytes, code: int) -> None:
    reject(connected(level), data, code)


def test_first_packet_must_be_connect() -> None:
    reject(PacketReader(), pkt(0x30, s("t")), PROTOCOL)


def test_oversized_packet_refused_from_its_header_alone() -> None:
    reader = PacketReader(max_packet_size=100)
    reader.feed(pkt(0x10, connect_body()))
    reject(reader, b"\x30" + encode_varint(200), TOO_LARGE)
    assert reader.buffered == 0


def test_packet_of_exactly_max_size_is_accepted() -> None:
    reader = PacketReader(max_packet_size=50)
    reader.feed(pkt(0x10, connect_body()))
    publish = pkt(0x30, s("t") + b"x" * (50 - 2 - 3))
    assert len(publish) == 50
    assert len(reader.feed(publish)) == 1
    reject(reader, pkt(0x30, s("t") + b"x" * 46), TOO_LARGE)


def test_long_remaining_length_encoding_is_accepted() -> None:
    """Minimal encoding of the Remaining Length is not required of the sender."""
    reader = connected(4)
    [packet] = reader.feed(b"\x30\x83\x80\x00" + s("t"))
    assert packet == Publish("t")


def test_reader_is_dead_after_an_error() -> None:
    reader = connected(4)
    reject(reader, b"\x00\x00", MALFORMED)
    reject(reader, b"\xc0\x00", MALFORMED)


def test_packets_before_the_error_are_kept_on_the_exception() -> None:
    reader = connected(4)
    exc = reject(reader, pkt(0x30, s("a/b") + b"hi") + b"\xc1\x00", MALFORMED)
    assert exc.packets_before_error == (Publish("a/b", b"hi"),)


# ---- CONNECT (MQTT 5 §3.1, 3.1.1 §3.1) ----


@pytest.mark.parametrize(
    ("name", "level"), [("MQTT", 6), ("MQTT", 3), ("MQIsdp", 4), ("MQTT", 0), ("MQIsdp", 5)]
)
def test_unsupported_protocol_level_carries_the_level(name: str, level: int) -> None:
    exc = reject(PacketReader(), pkt(0x10, s(name) + bytes((level,))), UNSUPPORTED)
    assert exc.protocol_level == level


@pytest.mark.parametrize("name", ["MQTX", "mqtt", "", "MQIsdp!"])
def test_unknown_protocol_name_is_malformed(name: str) -> None:
    reject(PacketReader(), pkt(0x10, connect_body(name=name)), MALFORMED)


CONNECT_CASES = [
    ("reserved flag bit 0", 4, connect_body(flags=0x03), MALFORMED),
    ("will QoS without will flag", 4, connect_body(flags=0x0A), MALFORMED),
    ("will retain without will flag", 4, connect_body(flags=0x22), MALFORMED),
    ("will QoS 3", 4, connect_body(flags=0x1E, extra=s("w") + s("p")), MALFORMED),
    ("password without user name 3.1.1", 4, connect_body(flags=0x42, extra=s("pw")), MALFORMED),
    (
        "password without user name 3.1",
        3,
        connect_body(level=3, name="MQIsdp", flags=0x42, extra=s("pw")),
        MALFORMED,
    ),
    ("trailing byte", 4, connect_body() + b"\x00", MALFORMED),
    ("missing client id", 4, connect_body(client_id=b""), MALFORMED),
    ("client id not UTF-8", 4, connect_body(client_id=s(b"\xff")), MALFORMED),
    ("client id with U+0000", 4, connect_body(client_id=s(b"a\x00")), MALFORMED),
    ("client id with a surrogate", 4, connect_body(client_id=s(b"\xed\xa0\x80")), MALFORMED),
    ("client id overlong UTF-8", 4, connect_body(client_id=s(b"\xc0\xaf")), MALFORMED),
    ("user name not UTF-8", 4, connect_body(flags=0x82, extra=s(b"\xfe")), MALFORMED),
    ("will topic missing", 4, connect_body(flags=0x06), MALFORMED),
    ("request problem information 2", 5, connect_body(5, properties=props(b"\x17\x02")), PROTOCOL),
    ("request response information 2", 5, connect_body(5, properties=props(b"\x19\x02")), PROTOCOL),
    ("receive maximum 0", 5, connect_body(5, properties=props(b"\x21\x00\x00")), PROTOCOL),
    ("maximum packet size 0", 5, connect_body(5, properties=props(b"\x27" + bytes(4))), PROTOCOL),
    (
        "duplicate session expiry",
        5,
        connect_body(5, properties=props(b"\x11" + bytes(4), b"\x11" + bytes(4))),
        PROTOCOL,
    ),
    (
        "topic alias is not a CONNECT property",
        5,
        connect_body(5, properties=props(b"\x23\x00\x01")),
        PROTOCOL,
    ),
    ("unknown property identifier", 5, connect_body(5, properties=props(b"\x7f\x00")), MALFORMED),
    (
        "authentication data without method",
        5,
        connect_body(5, properties=props(b"\x16" + s("x"))),
        PROTOCOL,
    ),
    ("property length past the end", 5, connect_body(5, properties=b"\x09\x11"), MALFORMED),
    (
        "property value cut by property length",
        5,
        connect_body(5, properties=b"\x03\x11\x00\x00"),
        MALFORMED,
    ),
    (
        "session expiry is not a Will property",
        5,
        connect_body(5, flags=0x06, extra=props(b"\x11" + bytes(4)) + s("w") + s("p")),
        PROTOCOL,
    ),
    (
        "will payload format indicator 2",
        5,
        connect_body(5, flags=0x06, extra=props(b"\x01\x02") + s("w") + s("p")),
        PROTOCOL,
    ),
]


@pytest.mark.parametrize(
    ("level", "body", "code"), [c[1:] for c in CONNECT_CASES], ids=[c[0] for c in CONNECT_CASES]
)
def test_connect(level: int, body: bytes, code: int) -> None:
    exc = reject(PacketReader(), pkt(0x10, body), code)
    assert exc.protocol_level == level


def test_v5_allows_password_without_user_name() -> None:
    [connect] = PacketReader().feed(pkt(0x10, connect_body(5, flags=0x42, extra=s("pw"))))
    assert connect == Connect(5, "c", True, 60, password=b"pw")


def test_client_id_length_is_not_the_codecs_business() -> None:
    long_id = "x" * 40
    body = connect_body(3, name="MQIsdp", client_id=s(long_id))
    [connect] = PacketReader().feed(pkt(0x10, body))
    assert connect.client_id == long_id and connect.protocol_name == "MQIsdp"


def test_will_with_properties_decodes() -> None:
    body = connect_body(5, flags=0x2E, extra=props(b"\x18\x00\x00\x00\x05") + s("w/t") + s("p"))
    [connect] = PacketReader().feed(pkt(0x10, body))
    assert connect.will is not None
    assert (connect.will.qos, connect.will.retain) == (1, True)
    assert connect.will.properties.will_delay_interval == 5


# ---- PUBLISH (MQTT 5 §3.3, 3.1.1 §3.3) ----

PUBLISH_CASES = [
    ("'+' in topic name", 4, pkt(0x30, s("a/+")), TOPIC_NAME_INVALID),
    ("'#' in topic name", 5, pkt(0x30, s("a/#") + b"\x00"), TOPIC_NAME_INVALID),
    ("U+0000 in topic name", 4, pkt(0x30, s(b"a\x00")), MALFORMED),
    ("topic not UTF-8", 4, pkt(0x30, s(b"\x80")), MALFORMED),
    ("empty topic in 3.1.1", 4, pkt(0x30, s("")), PROTOCOL),
    ("empty topic in 3.1", 3, pkt(0x30, s("")), PROTOCOL),
    ("empty topic without alias", 5, pkt(0x30, s("") + b"\x00"), PROTOCOL),
    ("packet id 0", 4, pkt(0x32, s("t") + b"\x00\x00"), MALFORMED),
    ("packet id missing", 4, pkt(0x32, s("t") + b"\x00"), MALFORMED),
    ("topic longer than the packet", 4, pkt(0x30, b"\x00\x09ab"), MALFORMED),
    ("body of one byte", 4, pkt(0x30, b"\x00"), MALFORMED),
    ("subscription identifier from a client", 5, pkt(0x30, s("t") + props(b"\x0b\x01")), PROTOCOL),
    ("topic alias 0", 5, pkt(0x30, s("t") + props(b"\x23\x00\x00")), TOPIC_ALIAS_INVALID),
    (
        "duplicate message expiry",
        5,
        pkt(0x30, s("t") + props(b"\x02" + bytes(4), b"\x02" + bytes(4))),
        PROTOCOL,
    ),
    ("payload format indicator 2", 5, pkt(0x30, s("t") + props(b"\x01\x02")), PROTOCOL),
    (
        "duplicate topic alias",
        5,
        pkt(0x30, s("t") + props(b"\x23\x00\x01", b"\x23\x00\x01")),
        PROTOCOL,
    ),
    (
        "session expiry is not a PUBLISH property",
        5,
        pkt(0x30, s("t") + props(b"\x11" + bytes(4))),
        PROTOCOL,
    ),
    ("response topic with wildcard", 5, pkt(0x30, s("t") + props(b"\x08" + s("r/#"))), PROTOCOL),
    ("property length past the end", 5, pkt(0x30, s("t") + b"\x05\x01"), MALFORMED),
    ("missing property length", 5, pkt(0x30, s("t")), MALFORMED),
    ("user property value missing", 5, pkt(0x30, s("t") + props(b"\x26" + s("k"))), MALFORMED),
]


@pytest.mark.parametrize(
    ("level", "data", "code"), [c[1:] for c in PUBLISH_CASES], ids=[c[0] for c in PUBLISH_CASES]
)
def test_publish(level: int, data: bytes, code: int) -> None:
    reject(connected(level), data, code)


def test_publish_empty_topic_with_alias_and_repeated_user_properties() -> None:
    body = s("") + props(b"\x23\x00\x07", b"\x26" + s("k") + s("1"), b"\x26" + s("k") + s("2"))
    [publish] = connected(5).feed(pkt(0x30, body + b"data"))
    assert isinstance(publish, Publish)
    assert publish.topic == "" and publish.payload == b"data"
    assert publish.properties.topic_alias == 7
    assert publish.properties.user_properties == (("k", "1"), ("k", "2"))


def test_server_may_send_several_subscription_identifiers() -> None:
    reader = PacketReader(side="client", protocol_level=5)
    [publish] = reader.feed(pkt(0x30, s("t") + props(b"\x0b\x01", b"\x0b\x80\x01")))
    assert isinstance(publish, Publish)
    assert publish.properties.subscription_identifiers == (1, 128)


# ---- PUBACK / PUBREC / PUBREL / PUBCOMP (MQTT 5 §3.4–3.7) ----

ACK_CASES = [
    ("PUBACK packet id 0", 4, pkt(0x40, b"\x00\x00"), MALFORMED),
    ("PUBACK with a reason byte in 3.1.1", 4, pkt(0x40, b"\x00\x01\x00"), MALFORMED),
    ("PUBREC too short", 4, pkt(0x50, b"\x00"), MALFORMED),
    ("PUBACK reason 0x92", 5, pkt(0x40, b"\x00\x01\x92"), MALFORMED),
    ("PUBREC reason 0x04", 5, pkt(0x50, b"\x00\x01\x04"), MALFORMED),
    ("PUBREL reason 0x10", 5, pkt(0x62, b"\x00\x01\x10"), MALFORMED),
    ("PUBCOMP reason 0x80", 5, pkt(0x70, b"\x00\x01\x80"), MALFORMED),
    ("PUBACK trailing byte after properties", 5, pkt(0x40, b"\x00\x01\x00\x00\x00"), MALFORMED),
    (
        "PUBACK property not allowed",
        5,
        pkt(0x40, b"\x00\x01\x00" + props(b"\x23\x00\x01")),
        PROTOCOL,
    ),
    (
        "PUBACK duplicate reason string",
        5,
        pkt(0x40, b"\x00\x01\x10" + props(b"\x1f" + s("a"), b"\x1f" + s("b"))),
        PROTOCOL,
    ),
]


@pytest.mark.parametrize(
    ("level", "data", "code"), [c[1:] for c in ACK_CASES], ids=[c[0] for c in ACK_CASES]
)
def test_acks(level: int, data: bytes, code: int) -> None:
    reject(connected(level), data, code)


# ---- SUBSCRIBE / UNSUBSCRIBE (MQTT 5 §3.8, §3.10) ----

SUBSCRIBE_CASES = [
    ("no filter 3.1.1", 4, pkt(0x82, b"\x00\x01"), PROTOCOL),
    ("no filter 5", 5, pkt(0x82, b"\x00\x01\x00"), PROTOCOL),
    ("packet id 0", 4, pkt(0x82, b"\x00\x00" + s("a") + b"\x00"), MALFORMED),
    (
        "3.1.1 reserved bits in requested QoS",
        4,
        pkt(0x82, b"\x00\x01" + s("a") + b"\x04"),
        MALFORMED,
    ),
    ("3.1.1 QoS 3", 4, pkt(0x82, b"\x00\x01" + s("a") + b"\x03"), MALFORMED),
    ("3.1 QoS 3", 3, pkt(0x82, b"\x00\x01" + s("a") + b"\x03"), MALFORMED),
    ("5 QoS 3", 5, pkt(0x82, b"\x00\x01\x00" + s("a") + b"\x03"), PROTOCOL),
    ("5 reserved bits 7-6", 5, pkt(0x82, b"\x00\x01\x00" + s("a") + b"\x40"), MALFORMED),
    ("5 retain handling 3", 5, pkt(0x82, b"\x00\x01\x00" + s("a") + b"\x30"), PROTOCOL),
    (
        "5 No Local on a shared subscription",
        5,
        pkt(0x82, b"\x00\x01\x00" + s("$share/g/a") + b"\x04"),
        PROTOCOL,
    ),
    (
        "5 subscription identifier 0",
        5,
        pkt(0x82, b"\x00\x01" + props(b"\x0b\x00") + s("a") + b"\x00"),
        PROTOCOL,
    ),
    (
        "5 subscription identifier twice",
        5,
        pkt(0x82, b"\x00\x01" + props(b"\x0b\x01", b"\x0b\x02") + s("a") + b"\x00"),
        PROTOCOL,
    ),
    (
        "5 subscription identifier of five bytes",
        5,
        pkt(0x82, b"\x00\x01" + props(b"\x0b\xff\xff\xff\xff\x01") + s("a") + b"\x00"),
        MALFORMED,
    ),
    ("filter without options byte", 4, pkt(0x82, b"\x00\x01" + s("a")), MALFORMED),
    ("filter not UTF-8", 4, pkt(0x82, b"\x00\x01" + s(b"\xc3") + b"\x00"), MALFORMED),
    ("UNSUBSCRIBE no filter", 4, pkt(0xA2, b"\x00\x01"), PROTOCOL),
    ("UNSUBSCRIBE no filter 5", 5, pkt(0xA2, b"\x00\x01\x00"), PROTOCOL),
    ("UNSUBSCRIBE packet id 0", 5, pkt(0xA2, b"\x00\x00\x00" + s("a")), MALFORMED),
    ("UNSUBSCRIBE filter cut short", 4, pkt(0xA2, b"\x00\x01\x00\x05ab"), MALFORMED),
]


@pytest.mark.parametrize(
    ("level", "data", "code"),
    [c[1:] for c in SUBSCRIBE_CASES],
    ids=[c[0] for c in SUBSCRIBE_CASES],
)
def test_subscribe(level: int, data: bytes, code: int) -> None:
    reject(connected(level), data, code)


def test_filter_syntax_is_left_to_the_broker() -> None:
    """MQTT 5 answers a bad filter with SUBACK 0x8F, so the codec must not raise for it."""
    [sub] = connected(5).feed(pkt(0x82, b"\x00\x01\x00" + s("a/#/b") + b"\x00" + s("") + b"\x01"))
    assert sub == Subscribe(1, (Subscription("a/#/b", 0), Subscription("", 1)))


# ---- PINGREQ, DISCONNECT, AUTH ----

OTHER_CASES = [
    ("PINGREQ with a body", 4, pkt(0xC0, b"\x00"), MALFORMED),
    ("DISCONNECT with a body in 3.1.1", 4, pkt(0xE0, b"\x00"), MALFORMED),
    ("DISCONNECT with a body in 3.1", 3, pkt(0xE0, b"\x00"), MALFORMED),
    ("DISCONNECT reason 0x05", 5, pkt(0xE0, b"\x05"), MALFORMED),
    ("DISCONNECT trailing byte", 5, pkt(0xE0, b"\x00\x00\x00"), MALFORMED),
    ("DISCONNECT topic alias property", 5, pkt(0xE0, b"\x00" + props(b"\x23\x00\x01")), PROTOCOL),
    ("AUTH reason 0x01", 5, pkt(0xF0, b"\x01"), MALFORMED),
    ("DISCONNECT 0x8B is the server's", 5, pkt(0xE0, b"\x8b"), MALFORMED),
    ("DISCONNECT 0x8E is the server's", 5, pkt(0xE0, b"\x8e\x00"), MALFORMED),
    ("AUTH Success is the server's", 5, pkt(0xF0, b"\x00\x00"), MALFORMED),
    ("AUTH without body means Success", 5, b"\xf0\x00", MALFORMED),
    ("AUTH data without method", 5, pkt(0xF0, b"\x18" + props(b"\x16" + s("d"))), PROTOCOL),
]


@pytest.mark.parametrize(
    ("level", "data", "code"), [c[1:] for c in OTHER_CASES], ids=[c[0] for c in OTHER_CASES]
)
def test_other_packets(level: int, data: bytes, code: int) -> None:
    reject(connected(level), data, code)


# ---- what a client-side reader checks in server packets ----

CLIENT_SIDE_CASES = [
    ("CONNACK reserved flags", 4, pkt(0x20, b"\x02\x00"), MALFORMED),
    ("CONNACK return code 6", 4, pkt(0x20, b"\x00\x06"), MALFORMED),
    ("CONNACK reason 0x8E", 5, pkt(0x20, b"\x00\x8e\x00"), MALFORMED),
    ("SUBACK return code 3", 4, pkt(0x90, b"\x00\x01\x03"), MALFORMED),
    ("SUBACK reason 0x11", 5, pkt(0x90, b"\x00\x01\x00\x11"), MALFORMED),
    ("SUBACK without codes", 4, pkt(0x90, b"\x00\x01"), PROTOCOL),
    ("UNSUBACK reason 0x10", 5, pkt(0xB0, b"\x00\x01\x00\x10"), MALFORMED),
    ("DISCONNECT from a 3.1.1 server", 4, b"\xe0\x00", MALFORMED),
    ("DISCONNECT 0x04 is the client's", 5, pkt(0xE0, b"\x04"), MALFORMED),
    ("AUTH 0x19 is the client's", 5, pkt(0xF0, b"\x19"), MALFORMED),
    ("server sends CONNECT", 4, pkt(0x10, connect_body()), PROTOCOL),
    ("server sends PINGREQ", 5, b"\xc0\x00", PROTOCOL),
    (
        "assigned client id twice",
        5,
        pkt(0x20, b"\x00\x00" + props(b"\x12" + s("a"), b"\x12" + s("b"))),
        PROTOCOL,
    ),
    ("maximum QoS 2", 5, pkt(0x20, b"\x00\x00" + props(b"\x24\x02")), PROTOCOL),
]


@pytest.mark.parametrize(
    ("level", "data", "code"),
    [c[1:] for c in CLIENT_SIDE_CASES],
    ids=[c[0] for c in CLIENT_SIDE_CASES],
)
def test_client_side(level: int, data: bytes, code: int) -> None:
    reject(PacketReader(side="client", protocol_level=level), data, code)


def test_client_side_reader_needs_a_level() -> None:
    with pytest.raises(ValueError, match="protocol_level"):
        PacketReader(side="client").feed(b"\xd0\x00")


def test_bom_is_kept_not_stripped() -> None:
    """MQTT 5 §1.5.4: a leading U+FEFF MUST NOT be skipped or stripped by the receiver."""
    [publish] = connected(4).feed(pkt(0x30, s("\ufeffa/b")))
    assert isinstance(publish, Publish) and publish.topic == "\ufeffa/b"


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"side": "broker"}, "side"),
        ({"max_packet_size": 1}, "max_packet_size"),
        ({"protocol_level": 6}, "protocol_level"),
    ],
)
def test_reader_arguments_are_checked(kwargs: dict[str, object], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        PacketReader(**kwargs)  # type: ignore[arg-type]


def test_protocol_level_set_later_is_checked() -> None:
    reader = PacketReader(side="client")
    reader.protocol_level = 6
    with pytest.raises(ValueError, match="protocol_level"):
        reader.feed(b"\xd0\x00")
