"""The states of one MQTT connection, seen from the server, written down once as data (the
model is h11's ``_state.py`` and its ``EVENT_TRIGGERED_TRANSITIONS``).

Which packet a client may send in which state (MQTT 5 §3.1, §4.1, §4.12; 3.1.1 §3.1.0) and
which event moves the connection to which state. Everything else is derived from these two
tables, never written again: the engine's reader (``mqtt/reader.py``) is given
:data:`READER_ADMITS` and refuses before decoding what may never arrive before or after CONNECT;
the broker's handler table (``broker/dispatch.py``) maps exactly the packets of each state's
row to their handlers; every state change goes through :func:`next_state`. Which packet types a
client or a server may send at all (MQTT 5 Table 2-1) is the codec's (``mqtt/packets.py``).
Nothing here knows sockets, clocks or the broker.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from types import MappingProxyType

from ..mqtt.packets import CLIENT_SENDS, PacketType


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

READER_ADMITS: tuple[frozenset[PacketType], frozenset[PacketType]] = (
    ADMITTED[ConnState.AWAIT_CONNECT],
    ADMITTED[ConnState.CONNECTED],
)
"""What the framing may let through before and after the CONNECT (``PacketReader(admitted=)``):
packets that arrive while authentication runs are decoded and judged by the state then."""
