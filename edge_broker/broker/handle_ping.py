"""PINGREQ (MQTT 5 §3.12; 3.1.1 §3.12): answered with PINGRESP. Any packet received keeps the
connection alive (keep-alive is the connection's last receive time, not the PINGREQ)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..mqtt.packets import Pingreq

if TYPE_CHECKING:
    from .handler_api import ClientContext

PINGRESP = b"\xd0\x00"


def handle_pingreq(conn: ClientContext, packet: Pingreq) -> None:
    conn.send(PINGRESP)
