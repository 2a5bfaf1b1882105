"""UNSUBSCRIBE (MQTT 5 §3.10–§3.11; 3.1.1 §3.10–§3.11): each filter removed from the session
and its topic space; UNSUBACK 0x11 No subscription existed for a filter the session did not
have (MQTT 5 only: 3.x UNSUBACK carries no codes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..matching.subscription_patterns import split_shared
from ..mqtt.packets import Properties, Unsuback, Unsubscribe
from ..mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    from .handler_api import ClientContext


def handle_unsubscribe(conn: ClientContext, packet: Unsubscribe) -> None:
    broker = conn.broker
    session = conn.session
    assert session is not None
    space = broker.topic_space(session.tenant)
    codes: list[int] = []
    for topic_filter in packet.topic_filters:
        entry = session.subscriptions.pop(topic_filter, None)
        if entry is None:
            codes.append(ReasonCode.NO_SUBSCRIPTION_EXISTED)
            continue
        session.journal.changed()
        shared = split_shared(topic_filter, broker.separator, True)
        space.unsubscribe(entry, shared.filter if shared is not None else topic_filter)
        codes.append(ReasonCode.SUCCESS)
    broker.quotas.hold_subscriptions(session)  # what its tenant and owner hold (quotas.py)
    conn.send_packet(Unsuback(packet.packet_id, tuple(codes) if conn.v5 else (), Properties()))
