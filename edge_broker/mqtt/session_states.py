"""The states of one MQTT connection, seen from the server, written down once as data (the
model is h11's ``_state.py`` and its ``EVENT_TRIGGERED_TRANSITIONS``).

Which packet a client may send in which state (MQTT 5 §3.1, §4.1, §4.12; 3.1.1 §3.1.0) and
which event moves the connection to which state. The reader (``reader.py``) refuses what may
never arrive before or after CONNECT; the broker (``broker/dispatch.py``) hands each admitted
packet to the handler of its type, and every state change goes through :func:`next_state`.
Nothing here knows sockets, clocks or the broker.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from types import MappingProxyType

from .packets import PacketType


class ConnState(IntEnum):
    """Where a server-side connection is (MQTT 5 §3.1, §4.12)."""

    AWAIT_CONNECT = 0
    """Nothing received yet: the first packet must be CONNECT (MQTT 5 §4.1, 3.1.1 §3.1.0-1)."""
    CONNECTING = 1
    """CONNECT received, authentication runs: later packets wait until it ends."""
    AUTHENTICATING = 2
    """The server sent AUTH 0x18 at CONNECT: only the client's AUTH (or DISCONNECT) may come."""
    CONNECTED = 3
    """CONNACK 0x00 sent."""
    CLOSED = 4
    """Either side ended the connection (DISCONNECT, an error, a takeover, the network): no
    packet of it is handled any more and it is no longer its session's connection."""


class Trigger(Enum):
    """The events that move a connection from one state to another."""

    CONNECT = "CONNECT received"
    AUTH_CONTINUE = "AUTH 0x18 Continue authentication sent"
    CONNACK_SUCCESS = "CONNACK 0x00 sent"
    CLOSE = "connection ended"


_CLOSE = {Trigger.CLOSE: ConnState.CLOSED}

TRANSITIONS: MappingProxyType[ConnState, MappingProxyType[Trigger, ConnState]] = MappingProxyType(
    {
        ConnState.AWAIT_CONNECT: MappingProxyType(
            {Trigger.CONNECT: ConnState.CONNECTING, **_CLOSE}
        ),
        ConnState.CONNECTING: MappingProxyType(
            {
                Trigger.AUTH_CONTINUE: ConnState.AUTHENTICATING,
                Trigger.CONNACK_SUCCESS: ConnState.CONNECTED,
                **_CLOSE,
            }
        ),
        ConnState.AUTHENTICATING: MappingProxyType(
            {
                Trigger.AUTH_CONTINUE: ConnState.AUTHENTICATING,
                Trigger.CONNACK_SUCCESS: ConnState.CONNECTED,
                **_CLOSE,
            }
        ),
        ConnState.CONNECTED: MappingProxyType(_CLOSE),
        ConnState.CLOSED: MappingProxyType(_CLOSE),  # ending twice changes nothing
    }
)
"""state → {event: next state}; an event missing from a state's row cannot happen there."""


def next_state(state: ConnState, trigger: Trigger) -> ConnState:
    """The state ``trigger`` leads to from ``state``; ValueError names an impossible move (a
    broker bug, never a client's doing: the reader and the admitted packets stop those)."""
    target = TRANSITIONS[state].get(trigger)
    if target is None:
        raise ValueError(f"a connection in state {state.name} cannot take {trigger.value!r}")
    return target


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

ADMITTED: MappingProxyType[ConnState, frozenset[PacketType]] = MappingProxyType(
    {
        ConnState.AWAIT_CONNECT: frozenset({PacketType.CONNECT}),
        # Pipelined packets wait in the connection's backlog until authentication ends.
        ConnState.CONNECTING: frozenset(),
        # MQTT 5 §4.12: the client continues the exchange, or gives up with DISCONNECT.
        ConnState.AUTHENTICATING: frozenset({PacketType.AUTH, PacketType.DISCONNECT}),
        ConnState.CONNECTED: CLIENT_SENDS - {PacketType.CONNECT},
        ConnState.CLOSED: frozenset(),
    }
)
"""state → the client packets handled in it (before the protocol level's own exclusions:
AUTH is MQTT 5 only). A packet that decodes but is not admitted in the state it arrives in is
refused by the broker (AUTHENTICATING: CONNACK 0x82)."""
