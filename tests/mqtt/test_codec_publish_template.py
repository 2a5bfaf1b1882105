"""PublishTemplate gives exactly the bytes encode(Publish(...)) gives, for every packet id."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_codec_strategies import LEVELS, payloads, properties, topic_names

from edge_broker.mqtt.codec import (
    PacketReader,
    ProtocolError,
    encode,
    encode_publish_template,
)
from edge_broker.mqtt.decoder import PROPERTY_CACHE_ENTRIES
from edge_broker.mqtt.packets import NO_PROPERTIES, Connect, PacketType, Properties, Publish


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_template_matches_encode(level: int, data: st.DataObject) -> None:
    topic = data.draw(topic_names)
    payload = data.draw(payloads)
    qos = data.draw(st.integers(0, 2))
    retain = data.draw(st.booleans())
    props = (
        data.draw(properties(PacketType.PUBLISH, from_client=False))
        if level == 5
        else (NO_PROPERTIES)
    )
    template = encode_publish_template(topic, payload, qos, retain, False, props, level)
    if qos == 0:
        expected = encode(Publish(topic, payload, 0, retain, False, None, props), level)
        assert template.data == expected and template.size == len(expected)
        return
    packet_id = data.draw(st.integers(1, 0xFFFF))
    for dup in (False, True):
        expected = encode(Publish(topic, payload, qos, retain, dup, packet_id, props), level)
        assert template.for_packet_id(packet_id, dup=dup) == expected
        assert template.size == len(expected)
    reader = PacketReader(side="client", protocol_level=level)
    assert reader.feed(template.for_packet_id(packet_id)) == [
        Publish(topic, payload, qos, retain, False, packet_id, props)
    ]


def test_template_misuse_is_refused() -> None:
    qos0 = encode_publish_template("t", b"", 0, False, False, NO_PROPERTIES, 4)
    qos1 = encode_publish_template("t", b"", 1, False, False, NO_PROPERTIES, 4)
    with pytest.raises(ProtocolError, match="for_packet_id"):
        _ = qos1.data
    with pytest.raises(ProtocolError, match="no packet id"):
        qos0.for_packet_id(1)
    with pytest.raises(ProtocolError, match="1..65535"):
        qos1.for_packet_id(0)
    with pytest.raises(ProtocolError, match="DUP"):
        encode_publish_template("t", b"", 0, False, True, NO_PROPERTIES, 4)
    with pytest.raises(ProtocolError, match="level 6"):
        encode_publish_template("t", b"", 0, False, False, NO_PROPERTIES, 6)
    with pytest.raises(ProtocolError, match="may not carry"):
        encode_publish_template("t", b"", 0, False, False, Properties(receive_maximum=5), 5)


def test_dup_template_default() -> None:
    template = encode_publish_template("t", b"p", 1, False, True, NO_PROPERTIES, 4)
    assert template.for_packet_id(5)[0] == 0x3A  # PUBLISH, DUP, QoS 1


def test_property_cache_is_bounded_and_correct() -> None:
    """Distinct property blocks beyond the cache size still decode correctly."""
    reader = PacketReader()
    reader.feed(encode(Connect(5, "c"), 5))
    sent = [
        Publish("t", b"", 0, properties=Properties(message_expiry_interval=n, topic_alias=1))
        for n in range(PROPERTY_CACHE_ENTRIES * 2)
    ]
    wire = b"".join(encode(p, 5) for p in sent)
    assert reader.feed(wire) == sent
    assert reader.feed(wire) == sent  # now partly from the cache


def test_cache_never_reads_past_the_packet() -> None:
    """A property block cut short by the Remaining Length is malformed even if the bytes that
    follow the packet would complete a block the cache knows."""
    reader = PacketReader()
    reader.feed(encode(Connect(5, "c"), 5))
    good = b"\x30\x08\x00\x01t\x03\x23\x00\x01x"  # topic alias 1, payload "x"
    assert len(reader.feed(good)) == 1
    cut = b"\x30\x06\x00\x01t\x03\x23\x00" + b"\x01"
    with pytest.raises(ProtocolError) as info:
        reader.feed(cut)
    assert info.value.reason_code == 0x81
    assert info.value.packets_before_error == ()  # the cut PUBLISH itself was refused


def _remaining_length(n: int) -> bytes:
    """MQTT's variable byte integer, written out independently of the codec (MQTT 5 §1.5.5)."""
    out = bytearray()
    while True:
        n, digit = n >> 7, n & 0x7F
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


@pytest.mark.parametrize("size", [0, 1, 119, 120, 121, 122, 123, 200, 16_380, 16_390])
def test_publish_bytes_written_out_by_hand(size: int) -> None:
    """The wire form pinned byte by byte (both the templates and ``encode`` build a PUBLISH
    through one ``publish_parts``): fixed header with a one- or two-byte Remaining Length
    either side of 127 and 16,383, topic, packet id, MQTT 5 property length, payload."""
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    qos1 = b"\x00\x04a/\xc3\xa9\x01\x02"  # "a/é" in UTF-8, then packet id 0x0102
    cases = [
        (4, 1, False, qos1 + payload, 0x32),
        (5, 1, True, qos1 + b"\x00" + payload, 0x33),
        (3, 0, True, b"\x00\x04a/\xc3\xa9" + payload, 0x31),
        (5, 0, False, b"\x00\x04a/\xc3\xa9\x00" + payload, 0x30),
    ]
    for level, qos, retain, body, first in cases:
        expected = bytes((first,)) + _remaining_length(len(body)) + body
        template = encode_publish_template("a/é", payload, qos, retain, False, NO_PROPERTIES, level)
        got = template.for_packet_id(0x0102) if qos else template.data
        assert got == expected and template.size == len(expected), (level, qos, size)
        packet = Publish("a/é", payload, qos, retain, False, 0x0102 if qos else None)
        assert encode(packet, level) == expected


@pytest.mark.parametrize(
    ("topic", "why"),
    [("a\ud800", "surrogate"), ("a\x00", r"U\+0000"), ("x" * 65_536, "65535")],
)
def test_template_refuses_what_encode_refuses(topic: str, why: str) -> None:
    for level in LEVELS:
        with pytest.raises(ProtocolError, match=why):
            encode_publish_template(topic, b"", 1, False, False, NO_PROPERTIES, level)
