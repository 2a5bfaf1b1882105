"""``ConnectionEngine``: the sans-io core of one server-side MQTT connection (the shape of
aioquic's ``QuicConnection``: ``receive(data, now)``, ``timeout(now)``).

It frames the bytes into packets (``mqtt/reader.py``), holds the connection's state and moves
it only along ``mqtt/session_states.py``'s transitions, bounds what an unauthenticated client
may send (issue 16), and knows when the connection's time is up: the keep-alive deadline, one
and a half times the Keep Alive after the last packet (MQTT 5 §3.1.2.10, 3.1.1 §3.1.2.10), and
the connect timeout before CONNACK, and the expiry of the token that admitted the client. The
broker's ``Connection`` (an ``asyncio.Protocol``) feeds
it and acts on what it returns; the broker's tick asks it :meth:`ConnectionEngine.timeout`.
"""

from __future__ import annotations

from enum import Enum

from ..mqtt.packets import Packet
from ..mqtt.reader import PacketReader
from ..mqtt.session_states import ConnState, Trigger, next_state
from .aliases import InboundAliases, OutboundAliases


class Timeout(Enum):
    """What ran out of time (:meth:`ConnectionEngine.timeout`)."""

    KEEP_ALIVE = "keep alive"
    """Nothing received for 1.5 × Keep Alive (MQTT 5 §3.1.2.10): DISCONNECT 0x8D and close."""
    CONNECT = "connect timeout"
    """No CONNACK 0x00 within ``broker.connect_timeout`` (broker/pre_auth.py says why)."""
    TOKEN = "token expired"
    """The token that admitted the client expired (broker/token_expiry.py): DISCONNECT 0xA0."""


class ConnectionEngine:
    """See the module docstring. ``now`` is the broker's clock (``Broker.clock``)."""

    __slots__ = (
        "reader",
        "state",
        "created",
        "last_rx",
        "keep_alive",
        "token_deadline",
        "pre_auth_bytes",
        "aliases_in",
        "aliases_out",
        "_pre_auth_budget",
        "_max_packet_size",
    )

    def __init__(
        self,
        now: float,
        max_connect_packet_size: int,
        max_packet_size: int,
        topic_alias_maximum: int = 0,
    ) -> None:
        # Until CONNACK the client has proved nothing: a CONNECT (and whatever it pipelines
        # after it) is bounded by the small pre-authentication limit, raised to
        # max_packet_size when the connection is accepted (issue 16).
        self.reader = PacketReader(
            side="server", max_packet_size=min(max_connect_packet_size, max_packet_size)
        )
        self.state = ConnState.AWAIT_CONNECT
        self.created = self.last_rx = now
        self.keep_alive = 0  # seconds, as agreed at CONNACK (0: none)
        self.token_deadline: float | None = None  # when the admitting token expires
        self.pre_auth_bytes = 0
        # topic aliases (engine/aliases.py): ours as announced in CONNACK; the client's
        # outbound maximum is known only from its CONNECT (None: it takes none)
        self.aliases_in = InboundAliases(topic_alias_maximum)
        self.aliases_out: OutboundAliases | None = None
        self._pre_auth_budget = 2 * max_connect_packet_size
        self._max_packet_size = max_packet_size

    def receive(self, data: bytes | bytearray | memoryview, now: float) -> list[Packet]:
        """The packets ``data`` completes; raises ``ProtocolError`` (with
        ``packets_before_error``) at the first violation. Any bytes keep the connection alive."""
        self.last_rx = now
        return self.reader.feed(data)

    def pre_auth_exceeded(self, size: int) -> bool:
        """Count ``size`` bytes received before CONNACK; True once past twice the
        pre-authentication budget (one CONNECT plus as much pipelined after it). Reading pauses
        while authentication runs, so this bounds the one read that may come first."""
        self.pre_auth_bytes += size
        return self.pre_auth_bytes > self._pre_auth_budget

    def trigger(self, event: Trigger) -> ConnState:
        """Move along ``event`` (ValueError for a move the table does not have); return the
        new state."""
        state = self.state = next_state(self.state, event)
        if state is ConnState.CONNECTED:
            self.reader.max_packet_size = self._max_packet_size  # past the pre-auth bound
        return state

    def accept_aliases(self, maximum: int) -> None:
        """The client's Topic Alias Maximum from its CONNECT (MQTT 5 §3.1.2.11.5): up to that
        many topics are given aliases on the way out."""
        self.aliases_out = OutboundAliases(min(maximum, 65535)) if maximum > 0 else None

    def next_deadline(self, connect_timeout: float) -> float | None:
        """The earliest moment :meth:`timeout` could report something, if any: the broker
        looks again then and not before. Bytes received only move it later, so a deadline
        computed earlier is never too late; a new Keep Alive or token deadline must be asked
        for again (the broker does at CONNACK and at every token change)."""
        state = self.state
        if state is ConnState.CONNECTED:
            deadline = self.token_deadline
            keep_alive = self.keep_alive
            if keep_alive:
                at = self.last_rx + keep_alive * 1.5
                if deadline is None or at < deadline:
                    return at
            return deadline
        if state is ConnState.CLOSED:
            return None
        return self.created + connect_timeout

    def timeout(self, now: float, connect_timeout: float) -> Timeout | None:
        """What has run out of time at ``now``, if anything."""
        state = self.state
        if state is ConnState.CONNECTED:
            keep_alive = self.keep_alive
            if keep_alive and now - self.last_rx > keep_alive * 1.5:
                return Timeout.KEEP_ALIVE
            deadline = self.token_deadline
            if deadline is not None and now >= deadline:
                return Timeout.TOKEN
        elif state is not ConnState.CLOSED and now - self.created > connect_timeout:
            return Timeout.CONNECT
        return None
