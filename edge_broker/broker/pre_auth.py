"""What an unauthenticated connection may make the broker hold (issue 16, "pre-authentication
budget").

The codec bounds the bytes (``limits.max_connect_packet_size``, enforced by the connection's
``PacketReader`` until CONNACK); this module bounds what those bytes decode into. A user
property of two empty strings is 5 bytes on the wire and about 70 bytes as Python objects, so
a CONNECT full of them would cost 12 times its size for as long as authentication takes (a
SMOKER nonce exchange, a wait for a password-check slot).
"""

from __future__ import annotations

from ..config import LimitsConfig
from ..mqtt.packets import Connect


def user_properties_refusal(connect: Connect, limits: LimitsConfig) -> str | None:
    """The Reason String when the CONNECT and its will carry too many user properties."""
    count = len(connect.properties.user_properties)
    if connect.will is not None:
        count += len(connect.will.properties.user_properties)
    limit = limits.max_connect_user_properties
    if count <= limit:
        return None
    return (f"the CONNECT carries {count} user properties (will included); "
            f"limits.max_connect_user_properties allows {limit}")
