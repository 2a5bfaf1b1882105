"""What :class:`~edge_broker.engine.connection.ConnectionEngine` tells the broker (the shape of
aioquic's ``quic/events.py``): ``receive(data, now)``, ``handle_timer(now, …)`` and the
engine's closing calls return a list of these, and the bytes the engine decided to send wait in
``data_to_send()``.

A decoded packet is its own "packet received" event: wrapping every PUBLISH in one more object
would cost an allocation per message on the hot path (issue 21: CPU per message must not rise),
so the list ``receive`` returns is the reader's list of packets unchanged until something else
happens. Everything else is one of the classes below, always after the packets of the same
read; the engine's ``ending`` flag says whether a list holds any (one attribute read on the hot
path), and :data:`ENGINE_EVENTS` tells them apart from packets.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from ..mqtt.packets import Packet


class Flow(Enum):
    """What an acknowledgement (or a QoS 2 PUBLISH) did to the session's QoS flow, returned by
    the engine's acknowledgement calls (``ConnectionEngine.puback_received`` …). The event is
    this member with the packet's own packet id: no object is made per message (the hot path).
    Any reply the flow needs is already in ``data_to_send()`` unless the broker asked to store
    first (``reply_now=False``), in which case it calls ``send_pubrec`` / ``send_pubrel`` /
    ``send_pubcomp`` once stored."""

    DELIVERED = "delivery acknowledged: the outgoing message under this packet id is complete"
    """PUBACK of a QoS 1, PUBCOMP of a released QoS 2 message: free what was kept for it, and
    send the next queued message (the window has room)."""
    REFUSED = "the client refused the outgoing QoS 2 message (PUBREC >= 0x80): its flow ends"
    RELEASED = "the outgoing QoS 2 message was received (PUBREC): PUBREL sent or due"
    RELEASE = "release: the client's QoS 2 message under this packet id is no longer held"
    """PUBREL of a held packet id: PUBCOMP sent or due (MQTT 5 §4.3.3)."""
    UNKNOWN = "nothing in flight under this packet id: answered (0x92) or ignored"
    NEW = "a QoS 2 PUBLISH under a packet id not held: judge and route it, then hold the id"
    DUPLICATE = "a QoS 2 PUBLISH under a packet id still held: PUBREC sent or due, not routed"


class Timeout(Enum):
    """What ran out of time (:meth:`ConnectionEngine.timeout`)."""

    KEEP_ALIVE = "keep alive"
    """Nothing received for 1.5 × Keep Alive (MQTT 5 §3.1.2.10): DISCONNECT 0x8D and close."""
    CONNECT = "connect timeout"
    """No CONNACK 0x00 within ``broker.connect_timeout`` (broker/limits/pre_auth.py says why)."""
    TOKEN = "token expired"
    """The token that admitted the client expired (broker/token_expiry.py): DISCONNECT 0xA0."""


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The client broke a protocol rule: malformed bytes (found by the reader) or a
    well-formed packet the broker refuses (``Connection.violation``). The engine answers it
    with :meth:`ConnectionEngine.answer` (CONNACK or DISCONNECT with ``reason_code`` and
    ``reason`` in the client's protocol version, or nothing) and ends the connection."""

    reason_code: int
    reason: str
    protocol_level: int | None = None  # the CONNECT's, when the error was found in one


@dataclass(frozen=True, slots=True)
class PreAuthExceeded:
    """More bytes than the pre-authentication budget arrived before CONNACK (issue 16): the
    engine refused (CONNACK 0x97 when a CONNECT was decoded, else a silent close)."""

    reason: str
    client_id: str  # of the CONNECT that read decoded, "" if none


@dataclass(frozen=True, slots=True)
class ConnectRefused:
    """A CONNACK refusal is in ``data_to_send()`` (MQTT 5: ``reason_code`` with ``reason``
    as Reason String if the client allows it; 3.x: the mapped return code)."""

    reason_code: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionEnded:
    """The connection is over: what ``data_to_send()`` holds is the last of it; close."""

    reason: str


@dataclass(frozen=True, slots=True)
class TimedOut:
    """``what`` ran out at the ``now`` given to ``handle_timer``. A keep-alive timeout comes
    with its DISCONNECT 0x8D and :class:`ConnectionEnded`; the connect timeout and an expired
    token are the broker's to answer (they depend on authentication and policy)."""

    what: Timeout


Event: TypeAlias = (
    Packet | ProtocolViolation | PreAuthExceeded | ConnectRefused | ConnectionEnded | TimedOut
)

ENGINE_EVENTS: frozenset[type] = frozenset(
    {ProtocolViolation, PreAuthExceeded, ConnectRefused, ConnectionEnded, TimedOut}
)
"""The event classes that are not packets: ``type(event) in ENGINE_EVENTS``."""
