"""MQTT 5 packets as bytes: the encoders and decoders the device client needs (MQTT 5 §2, §3).

Pure functions over bytes, no sockets, so they run and are tested the same way under CPython and
MicroPython. Decoders take the packet body (everything after the fixed header) and return
tuples; every malformed body ends in MQTTError with reason 0x81 (Malformed Packet).
"""

import struct

try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Sequence
    from typing import Any
except Exception:  # no typing module on the board (or a stub without these)
    pass

# packet types (MQTT 5 §2.1.2)
CONNECT = 1
CONNACK = 2
PUBLISH = 3
PUBACK = 4
PUBREC = 5
PUBREL = 6
PUBCOMP = 7
SUBSCRIBE = 8
SUBACK = 9
UNSUBSCRIBE = 10
UNSUBACK = 11
PINGREQ = 12
PINGRESP = 13
DISCONNECT = 14
AUTH = 15

# property identifiers used by name in the client (MQTT 5 §2.2.2.2)
RESPONSE_TOPIC = 0x08
SESSION_EXPIRY = 0x11
ASSIGNED_CLIENT_ID = 0x12
SERVER_KEEP_ALIVE = 0x13
AUTH_METHOD = 0x15
AUTH_DATA = 0x16
REASON_STRING = 0x1F
RECEIVE_MAXIMUM = 0x21
TOPIC_ALIAS = 0x23
MAXIMUM_QOS = 0x24
USER_PROPERTY = 0x26
MAXIMUM_PACKET_SIZE = 0x27

CONTINUE_AUTHENTICATION = 0x18
RE_AUTHENTICATE = 0x19
MALFORMED = 0x81
PROTOCOL_ERROR = 0x82

# property id -> wire type: 1, 2, 4 = fixed-size integer, "v" varint, "s" string,
# "b" binary, "p" string pair
_PROPERTY_TYPES = {
    0x01: 1,
    0x02: 4,
    0x03: "s",
    0x08: "s",
    0x09: "b",
    0x0B: "v",
    0x11: 4,
    0x12: "s",
    0x13: 2,
    0x15: "s",
    0x16: "b",
    0x17: 1,
    0x18: 4,
    0x19: 1,
    0x1A: "s",
    0x1C: "s",
    0x1F: "s",
    0x21: 2,
    0x22: 2,
    0x23: 2,
    0x24: 1,
    0x25: 1,
    0x26: "p",
    0x27: 4,
    0x28: 1,
    0x29: 1,
    0x2A: 1,
}
_REPEATABLE = (0x0B, 0x26)  # subscription identifier, user property: values collect in a list

PINGREQ_BYTES = b"\xc0\x00"
DISCONNECT_BYTES = b"\xe0\x00"


class MQTTError(Exception):
    """An MQTT failure: ``reason`` is the MQTT 5 reason code, the message says what happened."""

    def __init__(self, reason: int, message: str) -> None:
        super().__init__("0x%02X %s" % (reason, message))
        self.reason = reason


# ---------------------------------------------------------------- encoding


def varint(n: int) -> bytes:
    """Variable Byte Integer (MQTT 5 §1.5.5), 0 <= n <= 268435455."""
    if n < 0 or n > 268435455:
        raise ValueError("variable byte integer out of range: %d" % n)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def utf8(s: str | bytes) -> bytes:
    """UTF-8 Encoded String (MQTT 5 §1.5.4): two-byte length, then the bytes."""
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    if len(b) > 65535:
        raise ValueError("MQTT strings hold at most 65535 bytes, got %d" % len(b))
    return struct.pack(">H", len(b)) + b


def properties(props: "Sequence[tuple[int, Any]]") -> bytes:
    """The property block for a list of (id, value) pairs, length first (MQTT 5 §2.2.2)."""
    out = bytearray()
    for pid, value in props:
        kind = _PROPERTY_TYPES[pid]
        out += varint(pid)
        if kind == 1:
            out.append(value)
        elif kind == 2:
            out += struct.pack(">H", value)
        elif kind == 4:
            out += struct.pack(">I", value)
        elif kind == "v":
            out += varint(value)
        elif kind == "p":
            out += utf8(value[0]) + utf8(value[1])
        else:  # "s" and "b" share the two-byte length prefix
            out += utf8(value)
    return varint(len(out)) + out


def fixed_header(first_byte: int, remaining: int) -> bytes:
    return bytes((first_byte,)) + varint(remaining)


def connect(
    client_id: str,
    keepalive: int,
    clean_start: bool = True,
    props: "Sequence[tuple[int, Any]]" = (),
    username: str | None = None,
    password: str | bytes | None = None,
    will: tuple[str, bytes, int, bool] | None = None,
) -> bytes:
    """CONNECT (MQTT 5 §3.1). ``will`` is (topic, payload, qos, retain) or None."""
    flags = 0x02 if clean_start else 0
    payload = utf8(client_id)
    if will is not None:
        topic, message, qos, retain = will
        flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
        payload += properties(()) + utf8(topic) + utf8(message)
    if username is not None:
        flags |= 0x80
        payload += utf8(username)
    if password is not None:
        flags |= 0x40
        payload += utf8(password)
    body = (
        b"\x00\x04MQTT\x05"
        + bytes((flags,))
        + struct.pack(">H", keepalive)
        + properties(props)
        + payload
    )
    return fixed_header(0x10, len(body)) + body


def auth(reason: int, props: "Sequence[tuple[int, Any]]" = ()) -> bytes:
    """AUTH (MQTT 5 §3.15)."""
    body = bytes((reason,)) + properties(props)
    return fixed_header(0xF0, len(body)) + body


def publish_header(
    topic: str,
    payload_len: int,
    qos: int = 0,
    retain: bool = False,
    dup: bool = False,
    packet_id: int = 0,
    props: "Sequence[tuple[int, Any]]" = (),
) -> bytes:
    """Everything of a PUBLISH (MQTT 5 §3.3) before its payload, so a large payload is sent
    from its own buffer instead of being copied into one packet."""
    if qos not in (0, 1, 2):
        raise ValueError("QoS must be 0, 1 or 2, got %r" % (qos,))
    var = utf8(topic)
    if qos:
        var += struct.pack(">H", packet_id)
    var += properties(props)
    first = 0x30 | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    return fixed_header(first, len(var) + payload_len) + var


def ack(packet_type: int, packet_id: int, reason: int = 0) -> bytes:
    """PUBACK, PUBREC, PUBREL or PUBCOMP (MQTT 5 §3.4-3.7); reason 0 uses the short form."""
    first = (packet_type << 4) | (0x02 if packet_type == PUBREL else 0)
    if reason:
        return fixed_header(first, 4) + struct.pack(">HBB", packet_id, reason, 0)
    return fixed_header(first, 2) + struct.pack(">H", packet_id)


def subscribe(packet_id: int, filters: "Sequence[tuple[str, int]]") -> bytes:
    """SUBSCRIBE (MQTT 5 §3.8); ``filters`` is a list of (topic filter, options byte)."""
    body = bytearray(struct.pack(">H", packet_id)) + properties(())
    for topic_filter, options in filters:
        body += utf8(topic_filter) + bytes((options,))
    return fixed_header(0x82, len(body)) + body


def subscription_options(
    qos: int = 0,
    no_local: bool = False,
    retain_as_published: bool = False,
    retain_handling: int = 0,
) -> int:
    """The options byte of one subscription (MQTT 5 §3.8.3.1)."""
    return (
        qos
        | (0x04 if no_local else 0)
        | (0x08 if retain_as_published else 0)
        | (retain_handling << 4)
    )


def unsubscribe(packet_id: int, filters: "Sequence[str]") -> bytes:
    """UNSUBSCRIBE (MQTT 5 §3.10)."""
    body = bytearray(struct.pack(">H", packet_id)) + properties(())
    for topic_filter in filters:
        body += utf8(topic_filter)
    return fixed_header(0xA2, len(body)) + body


def disconnect(reason: int = 0) -> bytes:
    """DISCONNECT (MQTT 5 §3.14)."""
    if reason == 0:
        return DISCONNECT_BYTES
    return fixed_header(0xE0, 2) + bytes((reason, 0))


# ---------------------------------------------------------------- decoding


def _need(body: bytes | bytearray, pos: int, n: int, what: str) -> None:
    if pos + n > len(body):
        raise MQTTError(MALFORMED, "packet ends inside its %s" % what)


def read_varint(body: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(value, next position) of a Variable Byte Integer at ``pos``."""
    value = 0
    shift = 0
    while True:
        _need(body, pos, 1, "variable byte integer")
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 21:
            raise MQTTError(MALFORMED, "variable byte integer longer than 4 bytes")


def _read_bytes(body: bytes | bytearray, pos: int, what: str) -> tuple[bytes, int]:
    _need(body, pos, 2, what)
    n = (body[pos] << 8) | body[pos + 1]
    _need(body, pos + 2, n, what)
    return bytes(body[pos + 2 : pos + 2 + n]), pos + 2 + n


def read_string(body: bytes | bytearray, pos: int, what: str = "string") -> tuple[str, int]:
    raw, pos = _read_bytes(body, pos, what)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeError:
        raise MQTTError(MALFORMED, "%s is not UTF-8" % what) from None


def read_properties(body: bytes | bytearray, pos: int) -> "tuple[dict[int, Any], int]":
    """(dict id -> value, next position); repeatable properties collect into lists."""
    length, pos = read_varint(body, pos)
    end = pos + length
    _need(body, pos, length, "properties")
    props: dict[int, Any] = {}
    value: Any = None
    while pos < end:
        pid, pos = read_varint(body, pos)
        kind = _PROPERTY_TYPES.get(pid)
        if kind is None:
            raise MQTTError(MALFORMED, "unknown property identifier 0x%02X" % pid)
        if kind in (1, 2, 4):
            _need(body, pos, kind, "property 0x%02X" % pid)
            value = int.from_bytes(body[pos : pos + kind], "big")
            pos += kind
        elif kind == "v":
            value, pos = read_varint(body, pos)
        elif kind == "s":
            value, pos = read_string(body, pos, "property 0x%02X" % pid)
        elif kind == "b":
            value, pos = _read_bytes(body, pos, "property 0x%02X" % pid)
        else:
            key, pos = read_string(body, pos, "user property name")
            val, pos = read_string(body, pos, "user property value")
            value = (key, val)
        if pos > end:
            raise MQTTError(MALFORMED, "property 0x%02X runs past the property length" % pid)
        if pid in _REPEATABLE:
            props.setdefault(pid, []).append(value)
        elif pid in props:
            raise MQTTError(PROTOCOL_ERROR, "property 0x%02X appears twice" % pid)
        else:
            props[pid] = value
    return props, pos


def parse_connack(body: bytes | bytearray) -> "tuple[bool, int, dict[int, Any]]":
    """CONNACK body -> (session_present, reason, props) (MQTT 5 §3.2)."""
    _need(body, 0, 2, "CONNACK header")
    props, _ = read_properties(body, 2) if len(body) > 2 else ({}, 2)
    return bool(body[0] & 1), body[1], props


def parse_reason_and_properties(body: bytes | bytearray) -> "tuple[int, dict[int, Any]]":
    """AUTH or DISCONNECT body -> (reason, props); an empty body means reason 0x00."""
    if not body:
        return 0, {}
    if len(body) == 1:
        return body[0], {}
    props, _ = read_properties(body, 1)
    return body[0], props


def parse_publish(
    flags: int, body: bytes | bytearray
) -> "tuple[str, bytes, int, bool, int, dict[int, Any]]":
    """PUBLISH -> (topic, payload, qos, retain, packet_id, props) (MQTT 5 §3.3)."""
    qos = (flags >> 1) & 3
    if qos == 3:
        raise MQTTError(MALFORMED, "PUBLISH with QoS 3")
    topic, pos = read_string(body, 0, "topic name")
    packet_id = 0
    if qos:
        _need(body, pos, 2, "packet identifier")
        packet_id = (body[pos] << 8) | body[pos + 1]
        pos += 2
    props, pos = read_properties(body, pos)
    return topic, bytes(body[pos:]), qos, bool(flags & 1), packet_id, props


def parse_ack(body: bytes | bytearray) -> "tuple[int, int, dict[int, Any]]":
    """PUBACK/PUBREC/PUBREL/PUBCOMP -> (packet_id, reason, props) (MQTT 5 §3.4.2)."""
    _need(body, 0, 2, "packet identifier")
    packet_id = (body[0] << 8) | body[1]
    if len(body) == 2:
        return packet_id, 0, {}
    if len(body) == 3:
        return packet_id, body[2], {}
    props, _ = read_properties(body, 3)
    return packet_id, body[2], props


def parse_suback(body: bytes | bytearray) -> "tuple[int, bytes, dict[int, Any]]":
    """SUBACK/UNSUBACK -> (packet_id, reason codes, props) (MQTT 5 §3.9, §3.11)."""
    _need(body, 0, 2, "packet identifier")
    packet_id = (body[0] << 8) | body[1]
    props, pos = read_properties(body, 2)
    return packet_id, bytes(body[pos:]), props
