"""An oversized CONNECT is refused from its fixed header, with the client's protocol level
when its first bytes have arrived (issue 16: the broker answers CONNACK 0x95 in the client's
format without buffering the body)."""

from __future__ import annotations

import pytest

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.errors import ProtocolError
from edge_broker.mqtt.packets import Connect, Properties


@pytest.mark.parametrize(("level", "name"), [(5, "MQTT"), (4, "MQTT"), (3, "MQIsdp")])
def test_oversized_connect_names_its_level_without_its_body(level: int, name: str) -> None:
    props = Properties(user_properties=(("k", "v" * 300),)) if level == 5 else Properties()
    data = encode(
        Connect(level, "c", True, 60, properties=props, protocol_name=name, username="u" * 300),
        level,
    )
    reader = PacketReader(side="server", max_packet_size=100)
    assert reader.feed(data[:4]) == []  # the level byte has not arrived: wait, holding 4 bytes
    assert reader.buffered == 4
    with pytest.raises(ProtocolError) as refused:
        reader.feed(data[4:12])
    assert refused.value.reason_code == 0x95 and refused.value.protocol_level == level


def test_oversized_packet_with_an_unknown_protocol_name_has_no_level() -> None:
    body = b"\x00\x04ABCD\x05" + b"\x00" * 200
    reader = PacketReader(side="server", max_packet_size=100)
    with pytest.raises(ProtocolError) as refused:
        reader.feed(b"\x10" + bytes([len(body) & 0x7F | 0x80, len(body) >> 7]) + body)
    assert refused.value.reason_code == 0x95 and refused.value.protocol_level is None
