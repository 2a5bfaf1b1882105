"""MQTT control packets as immutable values (MQTT 3.1 §3, 3.1.1 §3, 5.0 §3).

One class per packet type. Fields use MQTT 5 names; MQTT 3.x packets leave the MQTT 5-only
fields at their defaults. ``Properties`` holds every MQTT 5 property (§2.2.2.2); which of them a
packet type may carry is checked by the codec, not here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum


class PacketType(IntEnum):
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


UserProperties = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Properties:
    """Every MQTT 5 property; ``None`` (or empty) means absent."""

    payload_format_indicator: int | None = None  # 0x01
    message_expiry_interval: int | None = None  # 0x02
    content_type: str | None = None  # 0x03
    response_topic: str | None = None  # 0x08
    correlation_data: bytes | None = None  # 0x09
    subscription_identifiers: tuple[int, ...] = ()  # 0x0B (one in SUBSCRIBE, several in PUBLISH)
    session_expiry_interval: int | None = None  # 0x11
    assigned_client_identifier: str | None = None  # 0x12
    server_keep_alive: int | None = None  # 0x13
    authentication_method: str | None = None  # 0x15
    authentication_data: bytes | None = None  # 0x16
    request_problem_information: int | None = None  # 0x17
    will_delay_interval: int | None = None  # 0x18
    request_response_information: int | None = None  # 0x19
    response_information: str | None = None  # 0x1A
    server_reference: str | None = None  # 0x1C
    reason_string: str | None = None  # 0x1F
    receive_maximum: int | None = None  # 0x21
    topic_alias_maximum: int | None = None  # 0x22
    topic_alias: int | None = None  # 0x23
    maximum_qos: int | None = None  # 0x24
    retain_available: int | None = None  # 0x25
    user_properties: UserProperties = ()  # 0x26
    maximum_packet_size: int | None = None  # 0x27
    wildcard_subscription_available: int | None = None  # 0x28
    subscription_identifier_available: int | None = None  # 0x29
    shared_subscription_available: int | None = None  # 0x2A

    def __repr__(self) -> str:
        """Only the properties present, so logged packets stay readable."""
        present = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) not in (None, ())
        )
        return f"Properties({present})"


NO_PROPERTIES = Properties()


@dataclass(frozen=True, slots=True)
class Will:
    """The Will Message carried in CONNECT (MQTT 5 §3.1.3.2–3.1.3.4)."""

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Connect:
    protocol_level: int
    client_id: str
    clean_start: bool = True  # "clean session" in 3.x
    keep_alive: int = 60
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    properties: Properties = NO_PROPERTIES
    protocol_name: str = "MQTT"  # "MQIsdp" for 3.1


@dataclass(frozen=True, slots=True)
class Connack:
    session_present: bool = False
    reason_code: int = 0  # MQTT 5 reason code, or the 3.x return code
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Publish:
    topic: str  # may be "" in MQTT 5 when properties.topic_alias is set
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None  # present iff qos > 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Puback:
    packet_id: int
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Pubrec:
    packet_id: int
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Pubrel:
    packet_id: int
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Pubcomp:
    packet_id: int
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic filter of a SUBSCRIBE with its options (MQTT 5 §3.8.3.1)."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    subscriptions: tuple[Subscription, ...]
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Suback:
    packet_id: int
    reason_codes: tuple[int, ...]  # 3.x: granted QoS or 0x80
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    topic_filters: tuple[str, ...]
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Unsuback:
    packet_id: int
    reason_codes: tuple[int, ...] = ()  # MQTT 5 only; empty for 3.x
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Pingreq:
    pass


@dataclass(frozen=True, slots=True)
class Pingresp:
    pass


@dataclass(frozen=True, slots=True)
class Disconnect:
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Auth:
    reason_code: int = 0
    properties: Properties = NO_PROPERTIES


Packet = (
    Connect
    | Connack
    | Publish
    | Puback
    | Pubrec
    | Pubrel
    | Pubcomp
    | Subscribe
    | Suback
    | Unsubscribe
    | Unsuback
    | Pingreq
    | Pingresp
    | Disconnect
    | Auth
)

PACKET_TYPE_OF: dict[type, PacketType] = {
    Connect: PacketType.CONNECT,
    Connack: PacketType.CONNACK,
    Publish: PacketType.PUBLISH,
    Puback: PacketType.PUBACK,
    Pubrec: PacketType.PUBREC,
    Pubrel: PacketType.PUBREL,
    Pubcomp: PacketType.PUBCOMP,
    Subscribe: PacketType.SUBSCRIBE,
    Suback: PacketType.SUBACK,
    Unsubscribe: PacketType.UNSUBSCRIBE,
    Unsuback: PacketType.UNSUBACK,
    Pingreq: PacketType.PINGREQ,
    Pingresp: PacketType.PINGRESP,
    Disconnect: PacketType.DISCONNECT,
    Auth: PacketType.AUTH,
}


CLIENT_SENDS = frozenset(
    {
        PacketType.CONNECT,
        PacketType.PUBLISH,
        PacketType.PUBACK,
        PacketType.PUBREC,
        PacketType.PUBREL,
        PacketType.PUBCOMP,
        PacketType.SUBSCRIBE,
        PacketType.UNSUBSCRIBE,
        PacketType.PINGREQ,
        PacketType.DISCONNECT,
        PacketType.AUTH,
    }
)
"""Packet types a client may send at all (MQTT 5 §2.1.2 Table 2-1)."""

SERVER_SENDS = frozenset(
    {
        PacketType.CONNACK,
        PacketType.PUBLISH,
        PacketType.PUBACK,
        PacketType.PUBREC,
        PacketType.PUBREL,
        PacketType.PUBCOMP,
        PacketType.SUBACK,
        PacketType.UNSUBACK,
        PacketType.PINGRESP,
        PacketType.DISCONNECT,
        PacketType.AUTH,
    }
)
"""Packet types a server may send at all (MQTT 5 §2.1.2 Table 2-1)."""

V5_ONLY_FROM_CLIENT = frozenset({PacketType.AUTH})
V5_ONLY_FROM_SERVER = frozenset({PacketType.AUTH, PacketType.DISCONNECT})
