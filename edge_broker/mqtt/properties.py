"""MQTT 5 properties: which exist, on which packets they may appear, and their wire form.

MQTT 5 §2.2.2.2 (Table 2-4) lists every property with its identifier, data type and the packets
that may carry it; that table is ``PROPERTY_SPECS`` below, written down once as data. Rules:

* an unknown identifier is a Malformed Packet (0x81);
* a property on a packet type that may not carry it is a Protocol Error (0x82);
* a property given twice is a Protocol Error, except User Property and, in PUBLISH only,
  Subscription Identifier (§3.3.2.3.8);
* out-of-range values are Protocol Errors (booleans other than 0/1, Receive Maximum 0,
  Maximum Packet Size 0, Subscription Identifier 0), except Topic Alias 0, which is 0x94
  Topic Alias invalid (§3.3.2.3.4);
* the Property Length must match the properties exactly (§2.2.2.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Any

from .errors import ProtocolError
from .packets import NO_PROPERTIES, PacketType, Properties
from .reason_codes import ReasonCode
from .wire import (
    MALFORMED,
    PROTOCOL,
    encode_binary,
    encode_string,
    encode_varint,
    read_binary,
    read_string,
    read_u8,
    read_u16,
    read_u32,
    read_varint,
)

WILL = 0
"""Context of the Will Properties in CONNECT; packet type 0 is reserved so it never collides."""


class ValueKind(IntEnum):
    BYTE = 1
    TWO_BYTE = 2
    FOUR_BYTE = 4
    VARINT = 5
    STRING = 6
    BINARY = 7
    STRING_PAIR = 8


@dataclass(frozen=True, slots=True)
class PropertySpec:
    identifier: int
    field: str
    kind: ValueKind
    allowed_in: frozenset[int]  # packet types, or WILL


_T = PacketType
_PUB_WILL = frozenset({_T.PUBLISH, WILL})
_ACKS_WITH_REASON = frozenset(
    {
        _T.CONNACK,
        _T.PUBACK,
        _T.PUBREC,
        _T.PUBREL,
        _T.PUBCOMP,
        _T.SUBACK,
        _T.UNSUBACK,
        _T.DISCONNECT,
        _T.AUTH,
    }
)
_ALL_WITH_PROPERTIES = _ACKS_WITH_REASON | {
    _T.CONNECT,
    _T.PUBLISH,
    WILL,
    _T.SUBSCRIBE,
    _T.UNSUBSCRIBE,
}
_B, _U16, _U32, _V = ValueKind.BYTE, ValueKind.TWO_BYTE, ValueKind.FOUR_BYTE, ValueKind.VARINT
_S, _BIN, _PAIR = ValueKind.STRING, ValueKind.BINARY, ValueKind.STRING_PAIR

PROPERTY_SPECS: tuple[PropertySpec, ...] = (
    PropertySpec(0x01, "payload_format_indicator", _B, _PUB_WILL),
    PropertySpec(0x02, "message_expiry_interval", _U32, _PUB_WILL),
    PropertySpec(0x03, "content_type", _S, _PUB_WILL),
    PropertySpec(0x08, "response_topic", _S, _PUB_WILL),
    PropertySpec(0x09, "correlation_data", _BIN, _PUB_WILL),
    PropertySpec(0x0B, "subscription_identifiers", _V, frozenset({_T.PUBLISH, _T.SUBSCRIBE})),
    PropertySpec(
        0x11,
        "session_expiry_interval",
        _U32,
        frozenset({_T.CONNECT, _T.CONNACK, _T.DISCONNECT}),
    ),
    PropertySpec(0x12, "assigned_client_identifier", _S, frozenset({_T.CONNACK})),
    PropertySpec(0x13, "server_keep_alive", _U16, frozenset({_T.CONNACK})),
    PropertySpec(0x15, "authentication_method", _S, frozenset({_T.CONNECT, _T.CONNACK, _T.AUTH})),
    PropertySpec(0x16, "authentication_data", _BIN, frozenset({_T.CONNECT, _T.CONNACK, _T.AUTH})),
    PropertySpec(0x17, "request_problem_information", _B, frozenset({_T.CONNECT})),
    PropertySpec(0x18, "will_delay_interval", _U32, frozenset({WILL})),
    PropertySpec(0x19, "request_response_information", _B, frozenset({_T.CONNECT})),
    PropertySpec(0x1A, "response_information", _S, frozenset({_T.CONNACK})),
    PropertySpec(0x1C, "server_reference", _S, frozenset({_T.CONNACK, _T.DISCONNECT})),
    PropertySpec(0x1F, "reason_string", _S, _ACKS_WITH_REASON),
    PropertySpec(0x21, "receive_maximum", _U16, frozenset({_T.CONNECT, _T.CONNACK})),
    PropertySpec(0x22, "topic_alias_maximum", _U16, frozenset({_T.CONNECT, _T.CONNACK})),
    PropertySpec(0x23, "topic_alias", _U16, frozenset({_T.PUBLISH})),
    PropertySpec(0x24, "maximum_qos", _B, frozenset({_T.CONNACK})),
    PropertySpec(0x25, "retain_available", _B, frozenset({_T.CONNACK})),
    PropertySpec(0x26, "user_properties", _PAIR, _ALL_WITH_PROPERTIES),
    PropertySpec(0x27, "maximum_packet_size", _U32, frozenset({_T.CONNECT, _T.CONNACK})),
    PropertySpec(0x28, "wildcard_subscription_available", _B, frozenset({_T.CONNACK})),
    PropertySpec(0x29, "subscription_identifier_available", _B, frozenset({_T.CONNACK})),
    PropertySpec(0x2A, "shared_subscription_available", _B, frozenset({_T.CONNACK})),
)

SPEC_BY_ID: MappingProxyType[int, PropertySpec] = MappingProxyType(
    {spec.identifier: spec for spec in PROPERTY_SPECS}
)

# Byte properties whose only values are 0 and 1 (Maximum QoS too: §3.2.2.3.4).
_BOOLEAN_IDS = frozenset({0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A})
# Two- and four-byte properties for which 0 is a Protocol Error.
_NONZERO_IDS = frozenset({0x21, 0x27})
_MAX_SUBSCRIPTION_ID = 268_435_455


def context_name(context: int) -> str:
    return "Will Properties" if context == WILL else PacketType(context).name


def decode_properties(buf: bytes, pos: int, end: int, context: int) -> tuple[Properties, int]:
    """Read a Property Length and the properties it covers; return them and the next position."""
    length, pos = read_varint(buf, pos, end, "property length")
    if length == 0:
        return NO_PROPERTIES, pos
    stop = pos + length
    if stop > end:
        raise ProtocolError(
            MALFORMED,
            f"{context_name(context)} property length {length} runs past the end of the packet",
        )
    values: dict[str, Any] = {}
    user_properties: list[tuple[str, str]] = []
    subscription_ids: list[int] = []
    where = context_name(context)
    while pos < stop:
        identifier, pos = read_varint(buf, pos, stop, "property identifier")
        spec = SPEC_BY_ID.get(identifier)
        if spec is None:
            raise ProtocolError(
                MALFORMED, f"unknown property identifier 0x{identifier:02X} in {where}"
            )
        if context not in spec.allowed_in:
            raise ProtocolError(
                PROTOCOL, f"property {spec.field} (0x{identifier:02X}) is not allowed in {where}"
            )
        value: Any
        kind = spec.kind
        if kind is _PAIR:
            name, pos = read_string(buf, pos, stop, "user property name")
            text, pos = read_string(buf, pos, stop, "user property value")
            user_properties.append((name, text))
            continue
        if kind is _B:
            value, pos = read_u8(buf, pos, stop, spec.field)
        elif kind is _U16:
            value, pos = read_u16(buf, pos, stop, spec.field)
        elif kind is _U32:
            value, pos = read_u32(buf, pos, stop, spec.field)
        elif kind is _V:
            value, pos = read_varint(buf, pos, stop, spec.field)
        elif kind is _S:
            value, pos = read_string(buf, pos, stop, spec.field)
        else:
            value, pos = read_binary(buf, pos, stop, spec.field)
        _check_value(identifier, spec.field, value, where)
        if identifier == 0x0B:
            if subscription_ids and context != PacketType.PUBLISH:
                raise ProtocolError(PROTOCOL, f"subscription_identifiers given twice in {where}")
            subscription_ids.append(value)
            continue
        if spec.field in values:
            raise ProtocolError(PROTOCOL, f"property {spec.field} given twice in {where}")
        values[spec.field] = value
    if "authentication_data" in values and "authentication_method" not in values:
        raise ProtocolError(
            PROTOCOL, f"{where} carries authentication_data without an authentication_method"
        )
    if user_properties:
        values["user_properties"] = tuple(user_properties)
    if subscription_ids:
        values["subscription_identifiers"] = tuple(subscription_ids)
    return Properties(**values), stop


def _check_value(identifier: int, field: str, value: Any, where: str) -> None:
    if identifier in _BOOLEAN_IDS:
        if value > 1:
            raise ProtocolError(PROTOCOL, f"{field} is {value} in {where}; it must be 0 or 1")
    elif identifier in _NONZERO_IDS:
        if value == 0:
            raise ProtocolError(PROTOCOL, f"{field} is 0 in {where}; it must be at least 1")
    elif identifier == 0x0B:
        if value == 0:
            raise ProtocolError(PROTOCOL, f"subscription identifier 0 in {where}; use 1..268435455")
    elif identifier == 0x23:
        if value == 0:
            raise ProtocolError(
                ReasonCode.TOPIC_ALIAS_INVALID, f"topic alias 0 in {where}; aliases start at 1"
            )
    elif identifier == 0x08 and ("+" in value or "#" in value):
        raise ProtocolError(
            PROTOCOL, f"response topic {value!r} in {where} contains a wildcard ('+' or '#')"
        )


def encode_properties(props: Properties, context: int) -> bytes:
    """Property Length followed by every present property, in identifier order.

    Refuses what ``decode_properties`` would refuse (same rules, same reason codes), so the
    codec never puts on the wire what it would not accept itself.
    """
    if props is NO_PROPERTIES:
        return b"\x00"
    parts: list[bytes] = []
    where = context_name(context)
    for spec in PROPERTY_SPECS:
        value = getattr(props, spec.field)
        if value is None or value == ():
            continue
        if context not in spec.allowed_in:
            raise ProtocolError(
                PROTOCOL, f"cannot encode property {spec.field}: {where} may not carry it"
            )
        ident = bytes((spec.identifier,))
        kind = spec.kind
        if kind is _V:
            if len(value) > 1 and context != PacketType.PUBLISH:
                raise ProtocolError(PROTOCOL, f"{where} carries one subscription identifier")
            for number in value:
                _check_value(spec.identifier, spec.field, number, where)
        elif kind is not _PAIR:
            _check_value(spec.identifier, spec.field, value, where)
        if kind is _PAIR:
            for name, text in value:
                parts.append(
                    ident
                    + encode_string(name, "user property name")
                    + encode_string(text, "user property value")
                )
        elif kind is _V:
            for number in value:
                parts.append(ident + encode_varint(number))
        elif kind is _B:
            parts.append(ident + bytes((value,)))
        elif kind is _U16:
            parts.append(ident + value.to_bytes(2, "big"))
        elif kind is _U32:
            parts.append(ident + value.to_bytes(4, "big"))
        elif kind is _S:
            parts.append(ident + encode_string(value, spec.field))
        else:
            parts.append(ident + encode_binary(value, spec.field))
    if props.authentication_data is not None and props.authentication_method is None:
        raise ProtocolError(
            PROTOCOL, f"{where} carries authentication_data without an authentication_method"
        )
    body = b"".join(parts)
    return encode_varint(len(body)) + body
