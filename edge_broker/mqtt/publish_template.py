"""Encode a PUBLISH once, send it to every subscriber (DESIGN.md "encode each PUBLISH once").

A fan-out sends the same topic, payload and properties to many sessions; only the Packet
Identifier (QoS 1/2) and, on redelivery, the DUP flag differ (MQTT 5 §3.3.1.1, §3.3.2.2). A
``PublishTemplate`` holds the bytes before and after the packet id, so each copy costs one
join and no re-encoding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from .errors import ProtocolError
from .packets import NO_PROPERTIES, PacketType, Properties
from .properties import encode_properties
from .reason_codes import ReasonCode
from .wire import MALFORMED, encode_string, encode_varint, u16


@dataclass(frozen=True, slots=True)
class PublishTemplate:
    """The pre-encoded parts of one PUBLISH variant.

    For QoS 0, ``data`` is the whole packet. For QoS 1/2, ``for_packet_id(pid)`` returns it with
    the packet id filled in, and ``for_packet_id(pid, dup=True)`` the redelivery form.
    ``size`` is the packet's length in bytes, for the receiver's Maximum Packet Size check.
    """

    qos: int
    size: int
    head: bytes  # fixed header + topic name (QoS 1/2), or the whole packet (QoS 0)
    tail: bytes  # properties + payload (QoS 1/2); empty for QoS 0

    @property
    def data(self) -> bytes:
        if self.qos:
            raise ProtocolError(
                ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                "a QoS 1/2 PUBLISH template needs a packet id: call for_packet_id(pid)",
            )
        return self.head

    def for_packet_id(self, packet_id: int, dup: bool = False) -> bytes:
        if not self.qos:
            raise ProtocolError(
                ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                "a QoS 0 PUBLISH carries no packet id: use .data",
            )
        if not 0 < packet_id < 0x10000:
            raise ProtocolError(
                ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                f"packet id {packet_id} is outside 1..65535",
            )
        head = self.head
        if dup:  # redelivery is rare: set the DUP bit on demand (MQTT 5 §3.3.1.1)
            head = bytes((head[0] | 0x08,)) + head[1:]
        return b"".join((head, packet_id.to_bytes(2, "big"), self.tail))


def _slot_setters() -> list[Callable[[PublishTemplate, object], None]]:
    """The slot writers ``_new_template`` uses, after checking the fields are still these."""
    names = ("qos", "size", "head", "tail")
    if tuple(f.name for f in fields(PublishTemplate)) != names:
        raise RuntimeError("PublishTemplate fields changed: update publish_template._new_template")
    return [getattr(PublishTemplate, name).__set__ for name in names]


_SET_QOS, _SET_SIZE, _SET_HEAD, _SET_TAIL = _slot_setters()


def _new_template(qos: int, size: int, head: bytes, tail: bytes) -> PublishTemplate:
    """``PublishTemplate(...)`` through the slots: one is built per message variant."""
    template: PublishTemplate = object.__new__(PublishTemplate)
    _SET_QOS(template, qos)
    _SET_SIZE(template, size)
    _SET_HEAD(template, head)
    _SET_TAIL(template, tail)
    return template


def encode_publish_template(
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    dup: bool,
    properties: Properties,
    protocol_level: int,
) -> PublishTemplate:
    """Pre-encode a PUBLISH for ``protocol_level``.

    ``dup=True`` sets DUP in every copy (for a template used only for redelivery); with QoS 0
    it is refused (MQTT 5 §3.3.1.1).
    """
    if protocol_level not in (3, 4, 5):
        raise ProtocolError(
            ReasonCode.MALFORMED_PACKET,
            f"cannot encode for protocol level {protocol_level}; use 3, 4 or 5",
        )
    # The one definition of a PUBLISH's layout (MQTT 5 §3.3.1–§3.3.2; ``encode`` uses it
    # too), built flat: the broker encodes one per message and subscriber variant.
    if not 0 <= qos <= 2:
        raise ProtocolError(MALFORMED, f"PUBLISH QoS {qos} is not 0, 1 or 2")
    if dup and qos == 0:
        raise ProtocolError(MALFORMED, "PUBLISH with QoS 0 must not set DUP")
    try:
        raw = topic.encode("utf-8")
    except UnicodeEncodeError:
        raw = encode_string(topic, "topic name")  # raises its error (a lone surrogate)
    size = len(raw)
    if size > 0xFFFF or b"\x00" in raw:
        encode_string(topic, "topic name")  # raises its error (U+0000, too long)
    if protocol_level != 5:
        tail = payload
    elif properties is NO_PROPERTIES:
        tail = b"\x00" + payload
    else:
        tail = encode_properties(properties, PacketType.PUBLISH) + payload
    # the Remaining Length counts the packet id of QoS 1/2, which goes between head and tail
    length = size + 2 + len(tail) + (2 if qos else 0)
    first = 0x30 | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    if length < 0x80:
        head = bytes((first, length, size >> 8, size & 0xFF)) + raw
    else:
        head = b"".join((bytes((first,)), encode_varint(length), u16(size), raw))
    if not qos:
        packet = head + tail
        return _new_template(0, len(packet), packet, b"")
    return _new_template(qos, len(head) + 2 + len(tail), head, tail)
