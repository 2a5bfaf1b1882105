"""DISCONNECT from the client (MQTT 5 §3.14; 3.1.1 §3.14): 0x00 discards the will, 0x04
keeps it; a Session Expiry Interval may change, but not from 0 (§3.14.2.2.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.events import ProtocolViolation
from ..engine.negotiation import expiry_at_disconnect
from ..mqtt.packets import Disconnect
from ..mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    from .handler_api import ClientContext


def handle_disconnect(conn: ClientContext, packet: Disconnect) -> None:
    """Client DISCONNECT: 0x00 discards the will, 0x04 keeps it (MQTT 5 §3.14.2.1, §3.1.2.5)."""
    session = conn.session
    new_expiry = packet.properties.session_expiry_interval
    if conn.v5 and new_expiry is not None and session is not None:
        maximum = conn.broker.config.broker.max_session_expiry
        expiry = expiry_at_disconnect(session.expiry_interval, new_expiry, maximum)  # engine
        if isinstance(expiry, ProtocolViolation):
            conn.violation(expiry.reason_code, expiry.reason)
            return
        session.expiry_interval = expiry
    keep_will = conn.v5 and packet.reason_code == ReasonCode.DISCONNECT_WITH_WILL_MESSAGE
    reason = (
        "client disconnected"
        if packet.reason_code == 0
        else (f"client disconnected with reason 0x{packet.reason_code:02X}")
    )
    conn.close(None, reason, will=keep_will)
