"""Packet objects → bytes for MQTT 3.1 (``MQIsdp``), 3.1.1 and 5.0 (MQTT 5 §3, 3.1.1 §3).

``encode(packet, protocol_level)`` writes any of the 15 packet types. For levels 3 and 4 the
MQTT 5-only parts (properties, reason codes other than CONNACK's return code and SUBACK's
granted QoS) are left out. Anything that cannot be expressed on the wire (a string over 65535
bytes, a lone surrogate, a packet over 268,435,455 bytes, a QoS>0 PUBLISH without a packet id,
a property on a packet that may not carry it) raises ``ProtocolError``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from .errors import ProtocolError
from .packets import (
    NO_PROPERTIES,
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from .properties import WILL, encode_properties
from .publish_template import encode_publish_template
from .wire import MALFORMED, encode_binary, encode_string, encode_varint, u16

_PROTOCOL_NAME_FIELD = {3: b"\x00\x06MQIsdp", 4: b"\x00\x04MQTT", 5: b"\x00\x04MQTT"}


def frame(first_byte: int, body: bytes) -> bytes:
    """Fixed header (type, flags, Remaining Length) followed by ``body``."""
    return bytes((first_byte,)) + encode_varint(len(body)) + body


_LEVELS = frozenset({3, 4, 5})


def _empty(props: Properties) -> bool:
    return props is NO_PROPERTIES or props == NO_PROPERTIES


def _check_level(level: int) -> None:
    if level not in (3, 4, 5):
        raise ProtocolError(MALFORMED, f"cannot encode for protocol level {level}; use 3, 4 or 5")


def _packet_id(packet_id: int | None, what: str) -> bytes:
    if packet_id is None or not 1 <= packet_id <= 0xFFFF:
        raise ProtocolError(MALFORMED, f"{what} needs a packet identifier in 1..65535")
    return u16(packet_id)


def _props(props: Properties, context: int, level: int) -> bytes:
    return encode_properties(props, context) if level == 5 else b""


def encode_connect(p: Connect, level: int) -> bytes:
    flags = 0x02 if p.clean_start else 0
    parts = [_PROTOCOL_NAME_FIELD[level], bytes((level,)), b"", u16(p.keep_alive)]
    parts.append(_props(p.properties, PacketType.CONNECT, level))
    parts.append(encode_string(p.client_id, "client identifier"))
    if p.will is not None:
        will = p.will
        if not 0 <= will.qos <= 2:
            raise ProtocolError(MALFORMED, f"will QoS {will.qos} is not 0, 1 or 2")
        flags |= 0x04 | (will.qos << 3) | (0x20 if will.retain else 0)
        parts.append(_props(will.properties, WILL, level))
        parts.append(encode_string(will.topic, "will topic"))
        parts.append(encode_binary(will.payload, "will payload"))
    if p.username is not None:
        flags |= 0x80
        parts.append(encode_string(p.username, "user name"))
    if p.password is not None:
        flags |= 0x40
        parts.append(encode_binary(p.password, "password"))
    parts[2] = bytes((flags,))
    return frame(0x10, b"".join(parts))


def encode_connack(p: Connack, level: int) -> bytes:
    flags = 1 if p.session_present and level > 3 else 0
    body = bytes((flags, p.reason_code)) + _props(p.properties, PacketType.CONNACK, level)
    return frame(0x20, body)


def encode_publish(p: Publish, level: int) -> bytes:
    """The wire form is the template's (``publish_template.py``, one definition of the
    layout): its head, the packet id (QoS 1/2), its tail."""
    template = encode_publish_template(
        p.topic, p.payload, p.qos, p.retain, p.dup, p.properties, level
    )
    if not p.qos:
        return template.head
    return b"".join((template.head, _packet_id(p.packet_id, "a QoS 1/2 PUBLISH"), template.tail))


def _ack(
    first: int, context: int, packet_id: int, code: int, props: Properties, level: int
) -> bytes:
    """PUBACK/PUBREC/PUBREL/PUBCOMP with the MQTT 5 short forms (§3.4.2.1).

    The broker sends one per QoS 1/2 message, so the plain form is built directly.
    """
    if not 0 < packet_id < 0x10000:
        raise ProtocolError(
            MALFORMED, f"{PacketType(context).name} needs a packet identifier in 1..65535"
        )
    if level < 5 or (code == 0 and (props is NO_PROPERTIES or props == NO_PROPERTIES)):
        return bytes((first, 2, packet_id >> 8, packet_id & 0xFF))
    pid = u16(packet_id)
    if _empty(props):
        return frame(first, pid + bytes((code,)))
    return frame(first, pid + bytes((code,)) + encode_properties(props, context))


def encode_puback(p: Puback, level: int) -> bytes:
    return _ack(0x40, PacketType.PUBACK, p.packet_id, p.reason_code, p.properties, level)


def encode_pubrec(p: Pubrec, level: int) -> bytes:
    return _ack(0x50, PacketType.PUBREC, p.packet_id, p.reason_code, p.properties, level)


def encode_pubrel(p: Pubrel, level: int) -> bytes:
    return _ack(0x62, PacketType.PUBREL, p.packet_id, p.reason_code, p.properties, level)


def encode_pubcomp(p: Pubcomp, level: int) -> bytes:
    return _ack(0x70, PacketType.PUBCOMP, p.packet_id, p.reason_code, p.properties, level)


def encode_subscribe(p: Subscribe, level: int) -> bytes:
    parts = [
        _packet_id(p.packet_id, "SUBSCRIBE"),
        _props(p.properties, PacketType.SUBSCRIBE, level),
    ]
    for sub in p.subscriptions:
        if not (0 <= sub.qos <= 2 and 0 <= sub.retain_handling <= 2):
            raise ProtocolError(
                MALFORMED,
                f"subscription {sub.topic_filter!r}: QoS {sub.qos} and retain handling "
                f"{sub.retain_handling} must each be 0, 1 or 2",
            )
        options = sub.qos
        if level == 5:
            options |= (
                (0x04 if sub.no_local else 0)
                | (0x08 if sub.retain_as_published else 0)
                | (sub.retain_handling << 4)
            )
        parts.append(encode_string(sub.topic_filter, "topic filter") + bytes((options,)))
    return frame(0x82, b"".join(parts))


def encode_suback(p: Suback, level: int) -> bytes:
    body = (
        _packet_id(p.packet_id, "SUBACK")
        + _props(p.properties, PacketType.SUBACK, level)
        + bytes(p.reason_codes)
    )
    return frame(0x90, body)


def encode_unsubscribe(p: Unsubscribe, level: int) -> bytes:
    parts = [
        _packet_id(p.packet_id, "UNSUBSCRIBE"),
        _props(p.properties, PacketType.UNSUBSCRIBE, level),
    ]
    parts.extend(encode_string(f, "topic filter") for f in p.topic_filters)
    return frame(0xA2, b"".join(parts))


def encode_unsuback(p: Unsuback, level: int) -> bytes:
    body = _packet_id(p.packet_id, "UNSUBACK")
    if level == 5:
        body += encode_properties(p.properties, PacketType.UNSUBACK) + bytes(p.reason_codes)
    return frame(0xB0, body)


def encode_pingreq(p: Pingreq, level: int) -> bytes:
    return b"\xc0\x00"


def encode_pingresp(p: Pingresp, level: int) -> bytes:
    return b"\xd0\x00"


def _reason_and_props(first: int, context: int, code: int, props: Properties) -> bytes:
    """DISCONNECT/AUTH in MQTT 5: omit both when reason 0 and no properties (§3.14.2.1)."""
    if _empty(props):
        return frame(first, b"" if code == 0 else bytes((code,)))
    return frame(first, bytes((code,)) + encode_properties(props, context))


def encode_disconnect(p: Disconnect, level: int) -> bytes:
    if level < 5:
        return b"\xe0\x00"
    return _reason_and_props(0xE0, PacketType.DISCONNECT, p.reason_code, p.properties)


def encode_auth(p: Auth, level: int) -> bytes:
    if level < 5:
        raise ProtocolError(MALFORMED, "AUTH exists only in MQTT 5")
    return _reason_and_props(0xF0, PacketType.AUTH, p.reason_code, p.properties)


_ENCODERS: MappingProxyType[type, Callable[[Any, int], bytes]] = MappingProxyType(
    {
        Connect: encode_connect,
        Connack: encode_connack,
        Publish: encode_publish,
        Puback: encode_puback,
        Pubrec: encode_pubrec,
        Pubrel: encode_pubrel,
        Pubcomp: encode_pubcomp,
        Subscribe: encode_subscribe,
        Suback: encode_suback,
        Unsubscribe: encode_unsubscribe,
        Unsuback: encode_unsuback,
        Pingreq: encode_pingreq,
        Pingresp: encode_pingresp,
        Disconnect: encode_disconnect,
        Auth: encode_auth,
    }
)


def encode(packet: Packet, protocol_level: int) -> bytes:
    """The wire bytes of ``packet`` for ``protocol_level`` 3 (MQIsdp), 4 (3.1.1) or 5."""
    encoder = _ENCODERS.get(type(packet))
    if encoder is None:
        raise ProtocolError(MALFORMED, f"cannot encode {type(packet).__name__}")
    if protocol_level not in _LEVELS:
        _check_level(protocol_level)
    try:
        return encoder(packet, protocol_level)
    except (OverflowError, ValueError) as exc:
        raise ProtocolError(
            MALFORMED, f"cannot encode {type(packet).__name__}: a field is out of range ({exc})"
        ) from None
