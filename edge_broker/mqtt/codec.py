"""The codec's public face: everything the broker and test clients call.

    reader = PacketReader(side="server", max_packet_size=...)
    packets = reader.feed(data)            # list of packets; raises ProtocolError
    data = encode(packet, protocol_level)  # bytes for MQTT 3.1 (3), 3.1.1 (4) or 5
    template = encode_publish_template(topic, payload, qos, retain, dup, properties, level)
    template.data / template.for_packet_id(pid)

The payload check whose consequence is the broker's decision is a plain function:
``payload_is_valid_utf8``. Topic names and filters are validated by ``edge_broker.matching``.
"""

from __future__ import annotations

from .encoder import encode
from .errors import ProtocolError
from .names import payload_is_valid_utf8
from .publish_template import PublishTemplate, encode_publish_template
from .reader import MAX_PACKET_SIZE, PacketReader, Side

__all__ = [
    "MAX_PACKET_SIZE",
    "PacketReader",
    "ProtocolError",
    "PublishTemplate",
    "Side",
    "encode",
    "encode_publish_template",
    "payload_is_valid_utf8",
]
