"""Packet bodies → packet objects (MQTT 3.1, 3.1.1 §3 and MQTT 5 §3), one function per type.

Each decoder gets the fixed-header flags, the buffer, the body's start and end, the protocol
level and whether the packet comes from a client (server side) or from a server. It checks what
the specifications say the receiver must check and raises ``ProtocolError`` otherwise. Framing
(fixed header, packet size) is ``reader.py``'s job.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import ProtocolError
from .fast_construct import new_puback, new_pubcomp, new_publish, new_pubrec, new_pubrel
from .names import SHARE_PREFIX
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
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from .properties import WILL, decode_properties
from .reason_codes import (
    AUTH_REASON_CODES_FROM_CLIENT,
    AUTH_REASON_CODES_FROM_SERVER,
    CONNACK_REASON_CODES,
    DISCONNECT_REASON_CODES_FROM_CLIENT,
    DISCONNECT_REASON_CODES_FROM_SERVER,
    PUBACK_REASON_CODES,
    PUBREL_REASON_CODES,
    SUBACK_REASON_CODES,
    SUBACK_RETURN_CODES_V3,
    UNSUBACK_REASON_CODES,
    ReasonCode,
)
from .wire import (
    MALFORMED,
    PROTOCOL,
    decode_utf8,
    read_binary,
    read_string,
    read_u8,
    read_u16,
    read_varint,
)

Decoder = Callable[[int, bytes, int, int, int, bool], Packet]

PROTOCOL_NAMES = {"MQTT": (4, 5), "MQIsdp": (3,)}


def _trailing(pos: int, end: int, what: str) -> None:
    if pos != end:
        raise ProtocolError(MALFORMED, f"{end - pos} unexpected byte(s) at the end of {what}")


def _packet_id(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Packet Identifier: two bytes, never 0 (MQTT 5 §2.2.1, 3.1.1 §2.3.1)."""
    if pos + 2 > end:
        raise ProtocolError(MALFORMED, f"{what} ends inside its packet identifier")
    packet_id = (buf[pos] << 8) | buf[pos + 1]
    if packet_id == 0:
        raise ProtocolError(MALFORMED, f"{what} has packet identifier 0; use 1..65535")
    return packet_id, pos + 2


def _reason(code: int, allowed: frozenset[int], what: str) -> int:
    if code not in allowed:
        raise ProtocolError(MALFORMED, f"reason code 0x{code:02X} is not valid in {what}")
    return code


def decode_connect(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Connect:
    """CONNECT (MQTT 5 §3.1, 3.1.1 §3.1, 3.1 §3.1); ``level`` is ignored: the packet names it."""
    name_raw, pos = read_binary(buf, pos, end, "protocol name")
    try:
        name = name_raw.decode("ascii")
    except UnicodeDecodeError:
        name = ""
    if name not in PROTOCOL_NAMES:
        raise ProtocolError(
            MALFORMED, f"CONNECT names protocol {name_raw!r}; expected 'MQTT' or 'MQIsdp'"
        )
    level, pos = read_u8(buf, pos, end, "protocol level")
    if level not in PROTOCOL_NAMES[name]:
        raise ProtocolError(
            ReasonCode.UNSUPPORTED_PROTOCOL_VERSION,
            f"CONNECT asks for protocol {name!r} level {level}; supported are MQIsdp 3, "
            "MQTT 4 (3.1.1) and MQTT 5",
            protocol_level=level,
        )
    try:
        return _connect_after_level(name, level, buf, pos, end)
    except ProtocolError as exc:
        exc.protocol_level = level
        raise


def _connect_after_level(name: str, level: int, buf: bytes, pos: int, end: int) -> Connect:
    connect_flags, pos = read_u8(buf, pos, end, "connect flags")
    if connect_flags & 0x01:
        raise ProtocolError(MALFORMED, "CONNECT reserved flag (bit 0) is set; it must be 0")
    clean_start = bool(connect_flags & 0x02)
    will_flag = connect_flags & 0x04
    will_qos = (connect_flags >> 3) & 0x03
    will_retain = bool(connect_flags & 0x20)
    has_password = connect_flags & 0x40
    has_username = connect_flags & 0x80
    if not will_flag and (will_qos or will_retain):
        raise ProtocolError(MALFORMED, "CONNECT sets will QoS or will retain without the will flag")
    if will_qos == 3:
        raise ProtocolError(MALFORMED, "CONNECT will QoS is 3; it must be 0, 1 or 2")
    if level < 5 and has_password and not has_username:
        raise ProtocolError(
            MALFORMED, "CONNECT sets the password flag without the user name flag (MQTT 3.x)"
        )
    keep_alive, pos = read_u16(buf, pos, end, "keep alive")
    properties = NO_PROPERTIES
    if level == 5:
        properties, pos = decode_properties(buf, pos, end, PacketType.CONNECT)
    client_id, pos = read_string(buf, pos, end, "client identifier")
    will = None
    if will_flag:
        will_properties = NO_PROPERTIES
        if level == 5:
            will_properties, pos = decode_properties(buf, pos, end, WILL)
        will_topic, pos = read_string(buf, pos, end, "will topic")
        will_payload, pos = read_binary(buf, pos, end, "will payload")
        will = Will(will_topic, will_payload, will_qos, will_retain, will_properties)
    username = None
    password = None
    if has_username:
        username, pos = read_string(buf, pos, end, "user name")
    if has_password:
        password, pos = read_binary(buf, pos, end, "password")
    _trailing(pos, end, "CONNECT")
    return Connect(
        level, client_id, clean_start, keep_alive, will, username, password, properties, name
    )


def decode_connack(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Connack:
    """CONNACK (MQTT 5 §3.2, 3.1.1 §3.2); in 3.1 the acknowledge-flags byte is unused."""
    ack_flags, pos = read_u8(buf, pos, end, "connect acknowledge flags")
    code, pos = read_u8(buf, pos, end, "connect reason code")
    if level == 3:
        ack_flags = 0
    if ack_flags & 0xFE:
        raise ProtocolError(MALFORMED, "CONNACK acknowledge flags bits 7-1 must be 0")
    properties = NO_PROPERTIES
    if level == 5:
        _reason(code, CONNACK_REASON_CODES, "CONNACK")
        properties, pos = decode_properties(buf, pos, end, PacketType.CONNACK)
    elif code > 5:
        raise ProtocolError(MALFORMED, f"CONNACK return code {code} is not 0..5 (MQTT 3.x)")
    _trailing(pos, end, "CONNACK")
    return Connack(bool(ack_flags), code, properties)


PROPERTY_CACHE_ENTRIES = 64
"""How many distinct PUBLISH property blocks a reader remembers (see ``decode_publish``)."""
PROPERTY_CACHE_BLOCK_BYTES = 512
"""Only blocks up to this size are remembered (issue 16): the cache then holds at most
64 × 512 raw bytes and their decoded form per connection, where 64 blocks of 1 MB of empty user
properties held 982 MB. The blocks worth caching (an alias, a few fixed user properties) are
small; a large block is decoded each time and freed with its message."""


def decode_publish(
    flags: int,
    buf: bytes,
    pos: int,
    end: int,
    level: int,
    from_client: bool,
    cache: dict[bytes, Properties] | None = None,
) -> Publish:
    """PUBLISH (MQTT 5 §3.3, 3.1.1 §3.3): the hot path, so the common case is kept flat.

    ``cache`` maps raw property blocks to their decoded, already validated ``Properties``: a
    client that sends the same properties with every message (a topic alias, fixed user
    properties) pays for decoding them once per connection, not once per message.
    """
    qos = (flags >> 1) & 0x03
    if pos + 2 > end:
        raise ProtocolError(MALFORMED, "PUBLISH ends inside the length of its topic name")
    stop = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if stop > end:
        raise ProtocolError(MALFORMED, "PUBLISH topic name runs past the end of the packet")
    try:
        topic = buf[pos + 2 : stop].decode()
    except UnicodeDecodeError:
        topic = decode_utf8(buf[pos + 2 : stop], "topic name")  # raises with the details
    if "\x00" in topic:
        decode_utf8(buf[pos + 2 : stop], "topic name")  # raises: U+0000 is forbidden
    pos = stop
    if "+" in topic or "#" in topic:
        raise ProtocolError(
            ReasonCode.TOPIC_NAME_INVALID,
            f"PUBLISH topic name {topic!r} contains a wildcard ('+' or '#')",
        )
    packet_id = None
    if qos:
        if pos + 2 <= end and (buf[pos] or buf[pos + 1]):
            packet_id = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
        else:
            packet_id, pos = _packet_id(buf, pos, end, "PUBLISH")  # raises with the details
    properties = NO_PROPERTIES
    if level == 5:
        if pos < end and buf[pos] == 0:
            pos += 1
        else:
            properties, pos = _publish_properties(buf, pos, end, cache)
            if from_client and properties.subscription_identifiers:
                raise ProtocolError(
                    PROTOCOL, "a client's PUBLISH must not carry a subscription identifier"
                )
        if not topic and properties.topic_alias is None:
            raise ProtocolError(PROTOCOL, "PUBLISH has an empty topic name and no topic alias")
    elif not topic:
        raise ProtocolError(PROTOCOL, "PUBLISH has an empty topic name (MQTT 3.x)")
    return new_publish(
        topic, buf[pos:end], qos, bool(flags & 0x01), bool(flags & 0x08), packet_id, properties
    )


def _publish_properties(
    buf: bytes, pos: int, end: int, cache: dict[bytes, Properties] | None
) -> tuple[Properties, int]:
    if cache is None:
        return decode_properties(buf, pos, end, PacketType.PUBLISH)
    length, start = read_varint(buf, pos, end, "property length")
    if length > PROPERTY_CACHE_BLOCK_BYTES:
        return decode_properties(buf, pos, end, PacketType.PUBLISH)  # never cached: no copy
    stop = start + length
    raw = buf[pos:stop]
    cached = cache.get(raw)
    if cached is not None and stop <= end:
        return cached, stop
    properties, after = decode_properties(buf, pos, end, PacketType.PUBLISH)
    if len(cache) < PROPERTY_CACHE_ENTRIES:
        cache[raw] = properties
    return properties, after


def _decode_ack(
    name: str, allowed: frozenset[int], context: int, buf: bytes, pos: int, end: int, level: int
) -> tuple[int, int, Properties]:
    """PUBACK/PUBREC/PUBREL/PUBCOMP: packet id, then in MQTT 5 optional reason and properties."""
    if end - pos == 2:  # the common form: packet identifier only
        packet_id = (buf[pos] << 8) | buf[pos + 1]
        if packet_id:
            return packet_id, 0, NO_PROPERTIES
    packet_id, pos = _packet_id(buf, pos, end, name)
    if level < 5 or pos == end:
        _trailing(pos, end, name)
        return packet_id, 0, NO_PROPERTIES
    code = _reason(buf[pos], allowed, name)
    pos += 1
    properties = NO_PROPERTIES
    if pos < end:
        properties, pos = decode_properties(buf, pos, end, context)
    _trailing(pos, end, name)
    return packet_id, code, properties


def decode_puback(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Puback:
    """PUBACK (MQTT 5 §3.4, 3.1.1 §3.4)."""
    return new_puback(*_decode_ack("PUBACK", PUBACK_REASON_CODES, 4, buf, pos, end, level))


def decode_pubrec(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Pubrec:
    """PUBREC (MQTT 5 §3.5, 3.1.1 §3.5)."""
    return new_pubrec(*_decode_ack("PUBREC", PUBACK_REASON_CODES, 5, buf, pos, end, level))


def decode_pubrel(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Pubrel:
    """PUBREL (MQTT 5 §3.6, 3.1.1 §3.6)."""
    return new_pubrel(*_decode_ack("PUBREL", PUBREL_REASON_CODES, 6, buf, pos, end, level))


def decode_pubcomp(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Pubcomp:
    """PUBCOMP (MQTT 5 §3.7, 3.1.1 §3.7)."""
    return new_pubcomp(*_decode_ack("PUBCOMP", PUBREL_REASON_CODES, 7, buf, pos, end, level))


def decode_subscribe(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Subscribe:
    """SUBSCRIBE (MQTT 5 §3.8, 3.1.1 §3.8).

    Filter *syntax* is not checked here: in MQTT 5 a bad filter earns a per-filter SUBACK 0x8F,
    so the broker calls ``validate_topic_filter``. No Local on a shared subscription is a
    Protocol Error for the whole packet (§3.8.3.1) and is checked here.
    """
    packet_id, pos = _packet_id(buf, pos, end, "SUBSCRIBE")
    properties = NO_PROPERTIES
    if level == 5:
        properties, pos = decode_properties(buf, pos, end, PacketType.SUBSCRIBE)
    subscriptions: list[Subscription] = []
    while pos < end:
        topic_filter, pos = read_string(buf, pos, end, "topic filter")
        options, pos = read_u8(buf, pos, end, "subscription options")
        qos = options & 0x03
        if level < 5:
            if options & 0xFC:
                raise ProtocolError(
                    MALFORMED, "SUBSCRIBE requested-QoS byte has reserved bits 7-2 set"
                )
            if qos == 3:
                raise ProtocolError(MALFORMED, "SUBSCRIBE requests QoS 3; use 0, 1 or 2")
            subscriptions.append(Subscription(topic_filter, qos))
            continue
        if options & 0xC0:
            raise ProtocolError(MALFORMED, "SUBSCRIBE options have reserved bits 7-6 set")
        if qos == 3:
            raise ProtocolError(PROTOCOL, "SUBSCRIBE requests maximum QoS 3; use 0, 1 or 2")
        retain_handling = (options >> 4) & 0x03
        if retain_handling == 3:
            raise ProtocolError(PROTOCOL, "SUBSCRIBE retain handling is 3; use 0, 1 or 2")
        no_local = bool(options & 0x04)
        if no_local and topic_filter.startswith(SHARE_PREFIX):
            raise ProtocolError(
                PROTOCOL, f"No Local is set on shared subscription {topic_filter!r}"
            )
        subscriptions.append(
            Subscription(topic_filter, qos, no_local, bool(options & 0x08), retain_handling)
        )
    if not subscriptions:
        raise ProtocolError(PROTOCOL, "SUBSCRIBE carries no topic filter")
    return Subscribe(packet_id, tuple(subscriptions), properties)


def decode_suback(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Suback:
    """SUBACK (MQTT 5 §3.9, 3.1.1 §3.9)."""
    packet_id, pos = _packet_id(buf, pos, end, "SUBACK")
    properties = NO_PROPERTIES
    allowed = SUBACK_RETURN_CODES_V3
    if level == 5:
        properties, pos = decode_properties(buf, pos, end, PacketType.SUBACK)
        allowed = SUBACK_REASON_CODES
    codes = tuple(_reason(code, allowed, "SUBACK") for code in buf[pos:end])
    if not codes:
        raise ProtocolError(PROTOCOL, "SUBACK carries no reason code")
    return Suback(packet_id, codes, properties)


def decode_unsubscribe(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Unsubscribe:
    """UNSUBSCRIBE (MQTT 5 §3.10, 3.1.1 §3.10)."""
    packet_id, pos = _packet_id(buf, pos, end, "UNSUBSCRIBE")
    properties = NO_PROPERTIES
    if level == 5:
        properties, pos = decode_properties(buf, pos, end, PacketType.UNSUBSCRIBE)
    filters: list[str] = []
    while pos < end:
        topic_filter, pos = read_string(buf, pos, end, "topic filter")
        filters.append(topic_filter)
    if not filters:
        raise ProtocolError(PROTOCOL, "UNSUBSCRIBE carries no topic filter")
    return Unsubscribe(packet_id, tuple(filters), properties)


def decode_unsuback(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Unsuback:
    """UNSUBACK (MQTT 5 §3.11, 3.1.1 §3.11)."""
    packet_id, pos = _packet_id(buf, pos, end, "UNSUBACK")
    if level < 5:
        _trailing(pos, end, "UNSUBACK")
        return Unsuback(packet_id)
    properties, pos = decode_properties(buf, pos, end, PacketType.UNSUBACK)
    codes = tuple(_reason(code, UNSUBACK_REASON_CODES, "UNSUBACK") for code in buf[pos:end])
    if not codes:
        raise ProtocolError(PROTOCOL, "UNSUBACK carries no reason code")
    return Unsuback(packet_id, codes, properties)


def decode_pingreq(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Pingreq:
    """PINGREQ (MQTT 5 §3.12): no variable header, no payload."""
    _trailing(pos, end, "PINGREQ")
    return Pingreq()


def decode_pingresp(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Pingresp:
    """PINGRESP (MQTT 5 §3.13): no variable header, no payload."""
    _trailing(pos, end, "PINGRESP")
    return Pingresp()


def _reason_and_properties(
    name: str, allowed: frozenset[int], context: int, buf: bytes, pos: int, end: int
) -> tuple[int, Properties]:
    """DISCONNECT/AUTH in MQTT 5: both parts may be omitted when 0 and empty (§3.14.2.1)."""
    if pos == end:
        return _reason(0, allowed, name), NO_PROPERTIES
    code = _reason(buf[pos], allowed, name)
    pos += 1
    properties = NO_PROPERTIES
    if pos < end:
        properties, pos = decode_properties(buf, pos, end, context)
    _trailing(pos, end, name)
    return code, properties


def decode_disconnect(
    flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool
) -> Disconnect:
    """DISCONNECT (MQTT 5 §3.14; 3.1.1 §3.14 has no body)."""
    if level < 5:
        _trailing(pos, end, "DISCONNECT")
        return Disconnect()
    allowed = (
        DISCONNECT_REASON_CODES_FROM_CLIENT if from_client else DISCONNECT_REASON_CODES_FROM_SERVER
    )
    code, properties = _reason_and_properties(
        "DISCONNECT", allowed, PacketType.DISCONNECT, buf, pos, end
    )
    return Disconnect(code, properties)


def decode_auth(flags: int, buf: bytes, pos: int, end: int, level: int, from_client: bool) -> Auth:
    """AUTH (MQTT 5 §3.15); a client never sends Success (0x00), a server never 0x19."""
    allowed = AUTH_REASON_CODES_FROM_CLIENT if from_client else AUTH_REASON_CODES_FROM_SERVER
    code, properties = _reason_and_properties("AUTH", allowed, PacketType.AUTH, buf, pos, end)
    return Auth(code, properties)


# Indexed by packet type (0 is reserved): a tuple lookup is the cheapest dispatch.
DECODERS: tuple[Decoder | None, ...] = (
    None,
    decode_connect,
    decode_connack,
    decode_publish,
    decode_puback,
    decode_pubrec,
    decode_pubrel,
    decode_pubcomp,
    decode_subscribe,
    decode_suback,
    decode_unsubscribe,
    decode_unsuback,
    decode_pingreq,
    decode_pingresp,
    decode_disconnect,
    decode_auth,
)
