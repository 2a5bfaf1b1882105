"""Random and mutated bytes into PacketReader: only ProtocolError may come out, and the reader
never holds more than max_packet_size + 5 bytes between calls (or, below a limit of 9, the 9
bytes of an oversized CONNECT's variable header that hold its protocol level, so the refusal
is written in the client's format)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mqtt_codec_strategies import LEVELS, client_packets, connects, server_packets

from edge_broker.mqtt.codec import PacketReader, ProtocolError, encode
from edge_broker.mqtt.packets import Connect, Packet
from edge_broker.mqtt.reader import _CONNECT_LEVEL_AT

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _feed_chunks(reader: PacketReader, data: bytes, cuts: list[int]) -> None:
    """Feed ``data`` in pieces; only ProtocolError may escape; the buffer stays bounded.

    Whatever decodes must survive encode → decode unchanged (decode is a left inverse of
    encode on everything the reader accepts).
    """
    start = 0
    packets: list[Packet] = []
    first_level = reader.protocol_level
    for cut in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
        try:
            packets.extend(reader.feed(data[start:cut]))
        except ProtocolError as exc:
            packets.extend(exc.packets_before_error)
            break
        assert reader.buffered <= max(reader.max_packet_size, _CONNECT_LEVEL_AT) + 5
        start = cut
    level = reader.protocol_level
    if not packets or level is None:
        return
    again = PacketReader(side=reader.side, protocol_level=first_level)
    assert again.feed(b"".join(encode(p, level) for p in packets)) == packets


@pytest.mark.parametrize("side", ["server", "client"])
@SETTINGS
@given(
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=5),
    limit=st.sampled_from([2, 16, 64, 268_435_455]),
    level=st.sampled_from(LEVELS),
)
def test_random_bytes(side: str, data: bytes, cuts: list[int], limit: int, level: int) -> None:
    if side == "server":
        reader = PacketReader(side="server", max_packet_size=limit)
    else:
        reader = PacketReader(side="client", max_packet_size=limit, protocol_level=level)
    _feed_chunks(reader, data, cuts)


@st.composite
def _mutations(draw: st.DrawFn, wire: bytes) -> bytes:
    data = bytearray(wire)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 4))]
        else:
            del data[i:]
    return bytes(data)


@pytest.mark.parametrize("level", LEVELS)
@SETTINGS
@given(data=st.data())
def test_mutated_client_packets(level: int, data: st.DataObject) -> None:
    packets = [data.draw(connects(level)), *data.draw(st.lists(client_packets(level), max_size=3))]
    wire = b"".join(encode(p, level) for p in packets)
    mutated = data.draw(_mutations(wire))
    limit = data.draw(st.sampled_from([32, 256, 268_435_455]))
    cuts = data.draw(st.lists(st.integers(0, 1024), max_size=4))
    _feed_chunks(PacketReader(side="server", max_packet_size=limit), mutated, cuts)


@pytest.mark.parametrize("level", LEVELS)
@SETTINGS
@given(data=st.data())
def test_mutated_packets_after_a_valid_connect(level: int, data: st.DataObject) -> None:
    """Mutations that spare the CONNECT reach every packet decoder."""
    packets = data.draw(st.lists(client_packets(level), min_size=1, max_size=3))
    mutated = data.draw(_mutations(b"".join(encode(p, level) for p in packets)))
    reader = PacketReader(side="server")
    name = "MQIsdp" if level == 3 else "MQTT"
    reader.feed(encode(Connect(level, "fuzz", protocol_name=name), level))
    _feed_chunks(reader, mutated, data.draw(st.lists(st.integers(0, 1024), max_size=4)))


@pytest.mark.parametrize("level", LEVELS)
@SETTINGS
@given(data=st.data())
def test_mutated_server_packets(level: int, data: st.DataObject) -> None:
    packets = data.draw(st.lists(server_packets(level), min_size=1, max_size=3))
    mutated = data.draw(_mutations(b"".join(encode(p, level) for p in packets)))
    reader = PacketReader(side="client", protocol_level=level)
    _feed_chunks(reader, mutated, data.draw(st.lists(st.integers(0, 1024), max_size=4)))


def test_endless_remaining_length_is_cut_at_four_bytes() -> None:
    reader = PacketReader(side="server")
    reader.feed(encode(Connect(4, "c"), 4))
    reader.feed(b"\x30\xff\xff")
    assert reader.buffered == 3
    with pytest.raises(ProtocolError) as info:
        reader.feed(b"\xff\xff")
    assert info.value.reason_code == 0x81


def test_slow_large_packet_is_held_only_up_to_its_size() -> None:
    reader = PacketReader(side="server", max_packet_size=10_003)
    reader.feed(encode(Connect(4, "c"), 4))
    head = b"\x30" + bytes((0x90, 0x4E)) + b"\x00\x01t"  # remaining length 10000
    reader.feed(head)
    for _ in range(99):
        assert reader.feed(b"x" * 100) == []
        assert reader.buffered <= 10_003
    packets = reader.feed(b"x" * (10_000 - 3 - 9_900) + b"\xc0\x00")
    assert len(packets) == 2 and reader.buffered == 0


@pytest.mark.soak
@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_soak_mutated_sessions(level: int, data: st.DataObject) -> None:
    """The mutation fuzz at 100x the CI budget: run with ``pytest -m soak tests/mqtt``."""
    packets = [data.draw(connects(level)), *data.draw(st.lists(client_packets(level), max_size=5))]
    mutated = data.draw(_mutations(b"".join(encode(p, level) for p in packets)))
    cuts = data.draw(st.lists(st.integers(0, 2048), max_size=6))
    _feed_chunks(PacketReader(side="server", max_packet_size=512), mutated, cuts)


def test_a_short_oversized_connect_is_refused_without_waiting_past_its_end() -> None:
    """A CONNECT over the limit whose body is shorter than the level peek: refused at once
    (it waited for bytes of the next packet to read a level the packet does not have)."""
    reader = PacketReader(side="server", max_packet_size=2)
    with pytest.raises(ProtocolError) as err:
        reader.feed(b"\x10\x01\x00")
    assert "CONNECT of 3 bytes exceeds the maximum packet size of 2 bytes" in str(err.value)
    assert err.value.protocol_level is None
