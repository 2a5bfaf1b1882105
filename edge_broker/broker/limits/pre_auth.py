"""What an unauthenticated connection may make the broker hold (issue 16, "pre-authentication
budget").

The codec bounds the bytes (``limits.max_connect_packet_size``, enforced by the connection's
``PacketReader`` until CONNACK); this module bounds what those bytes decode into. A user
property of two empty strings is 5 bytes on the wire and about 70 bytes as Python objects, so
a CONNECT full of them would cost 12 times its size for as long as authentication takes (a
SMOKER nonce exchange, a wait for a password-check slot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ...config import LimitsConfig
from ...mqtt.packets import Connect
from ...mqtt.reason_codes import ReasonCode
from ...mqtt.session_states import ConnState

if TYPE_CHECKING:
    from .limit_hits import LimitHits


class Peer(Protocol):
    """A connection as the bounds before and around authentication see it (``Connection`` is
    one): its state, and the two ways it is ended."""

    @property
    def client_id(self) -> str: ...

    @property
    def state(self) -> ConnState: ...

    @property
    def closing(self) -> bool: ...

    def close(self, reason_code: int | None, reason: str, will: bool = True) -> None: ...

    def refuse_connect(self, reason_code: int, reason: str) -> None: ...


def user_properties_refusal(connect: Connect, limits: LimitsConfig) -> str | None:
    """The Reason String when the CONNECT and its will carry too many user properties."""
    count = len(connect.properties.user_properties)
    if connect.will is not None:
        count += len(connect.will.properties.user_properties)
    limit = limits.max_connect_user_properties
    if count <= limit:
        return None
    return (
        f"the CONNECT carries {count} user properties (will included); "
        f"limits.max_connect_user_properties allows {limit}"
    )


def connect_timed_out(conn: Peer, timeout: float, hits: LimitHits) -> None:
    """``broker.connect_timeout`` passed before CONNACK: say what did not finish in time.

    Waiting for CONNECT (TCP or a WebSocket that never finished its upgrade) is closed; a client
    whose CONNECT arrived but whose authentication did not finish (a login storm: waiting for a
    password-check slot) gets CONNACK 0x89 Server busy (3.x: 0x03), not a silent close; a client
    that never answered the enhanced-authentication challenge is dropped (SMOKER.md step 5).
    """
    if conn.closing:
        return  # already on its way out (a taken-over session's old connection flushing)
    limit = "broker.connect_timeout"
    if conn.state is ConnState.AWAIT_CONNECT:
        reason = f"no CONNECT within broker.connect_timeout ({timeout:g} s)"
        hits.hit(limit, f"connection closed: {reason}")
        conn.close(None, reason)
    elif conn.state is ConnState.CONNECTING:
        reason = (
            f"authentication did not finish within broker.connect_timeout ({timeout:g} s): "
            "the broker is busy, connect again later"
        )
        hits.hit(limit, f"CONNECT refused: {reason}", conn.client_id)
        conn.refuse_connect(ReasonCode.SERVER_BUSY, reason)
    else:
        reason = (
            f"the enhanced-authentication exchange did not finish within "
            f"broker.connect_timeout ({timeout:g} s)"
        )
        hits.hit(limit, f"connection closed: {reason}", conn.client_id)
        conn.close(None, reason)
