"""encode → PacketReader.feed gives the same packets back, whole or split at random points."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_codec_strategies import LEVELS, client_packets, connects, server_packets

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Packet


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


def _feed_all(reader: PacketReader, pieces: list[bytes]) -> list[Packet]:
    out: list[Packet] = []
    for piece in pieces:
        out.extend(reader.feed(piece))
        assert reader.buffered <= reader.max_packet_size + 5
    assert reader.buffered == 0
    return out


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_client_to_server_round_trip(level: int, data: st.DataObject) -> None:
    connect = data.draw(connects(level))
    rest = data.draw(st.lists(client_packets(level), max_size=6))
    packets: list[Packet] = [connect, *rest]
    wire = b"".join(encode(p, level) for p in packets)
    whole = PacketReader(side="server")
    assert whole.feed(wire) == packets
    assert whole.protocol_level == level
    cuts = data.draw(st.lists(st.integers(0, 1 << 16), max_size=8))
    assert _feed_all(PacketReader(side="server"), _split(wire, cuts)) == packets


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_server_to_client_round_trip(level: int, data: st.DataObject) -> None:
    packets = data.draw(st.lists(server_packets(level), min_size=1, max_size=6))
    wire = b"".join(encode(p, level) for p in packets)
    assert PacketReader(side="client", protocol_level=level).feed(wire) == packets
    cuts = data.draw(st.lists(st.integers(0, 1 << 16), max_size=8))
    reader = PacketReader(side="client", protocol_level=level)
    assert _feed_all(reader, _split(wire, cuts)) == packets


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_byte_at_a_time(level: int, data: st.DataObject) -> None:
    packets = [data.draw(connects(level)), data.draw(client_packets(level))]
    wire = b"".join(encode(p, level) for p in packets)
    reader = PacketReader(side="server")
    assert _feed_all(reader, [wire[i : i + 1] for i in range(len(wire))]) == packets
