"""Where a denial turns into what the client sees (AUTHZ.md §3): one function per action.

``deny_action = "reason"`` keeps the connection (MQTT 5 gets the reason code; 3.x QoS 0 is
dropped and QoS 1/2 acknowledged and dropped, as Mosquitto does). ``"disconnect"`` follows the
seed 003 tables. A Decision with ``disconnect`` set (authorizer outcome) always disconnects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..authz.decision import Decision, GateName
from ..mqtt.packets import Properties, Puback, Publish, Pubrec
from ..mqtt.reason_codes import SUBACK_FAILURE_V3, ReasonCode

if TYPE_CHECKING:
    from ..identity import Identity
    from .handler_api import ClientContext


def denial_reason(decision: Decision) -> str:
    if decision.reason:
        return decision.reason
    gate = decision.gate.value if decision.gate else "policy"
    rule = f" rule {decision.rule!r}" if decision.rule else ""
    return f"denied by {gate}{rule}"


def _props(conn: ClientContext, decision: Decision) -> Properties:
    return (
        Properties(reason_string=denial_reason(decision))
        if conn.problem_information
        else Properties()
    )


def publish_denied(conn: ClientContext, packet: Publish, decision: Decision) -> None:
    """A denied PUBLISH (AUTHZ.md §3 rows PUBLISH QoS 0/1/2 and authorizer ``disconnect``)."""
    code = decision.reason_code
    disconnect = decision.disconnect or conn.listener.deny_action == "disconnect"
    reason = denial_reason(decision)
    conn.broker.stats.publish_denied += 1
    if not conn.v5:
        if disconnect:
            conn.close(None, reason)
            return
        if packet.qos == 1:
            conn.send_packet(Puback(packet.packet_id or 0))
        elif packet.qos == 2:
            assert conn.session is not None and packet.packet_id is not None
            conn.session.hold_incoming(packet.packet_id)  # complete the flow on PUBREL
            conn.session.journal.qos2_received(packet.packet_id)
            conn.send_packet(Pubrec(packet.packet_id))
        return
    if decision.disconnect:  # authorizer outcome ``disconnect``: DISCONNECT with its code only
        conn.close(code, reason)
        return
    if packet.qos == 1:
        conn.send_packet(Puback(packet.packet_id or 0, code, _props(conn, decision)))
    elif packet.qos == 2:
        conn.send_packet(Pubrec(packet.packet_id or 0, code, _props(conn, decision)))
    if disconnect:
        conn.close(code, reason)


def subscribe_denied(conn: ClientContext, decision: Decision) -> int | None:
    """The SUBACK code for a denied filter, or ``None``: close the connection (3.1 has no
    failure code; a 3.x filter with invalid syntax closes, MQTT 3.1.1 §4.7 / AUTHZ.md gate 1)."""
    conn.broker.stats.subscribe_denied += 1
    if decision.disconnect and conn.v5:
        conn.close(decision.reason_code, denial_reason(decision))
        return None
    if conn.v5:
        return int(decision.reason_code)
    if conn.level == 3 or decision.gate is GateName.SYNTAX or decision.disconnect:
        conn.close(None, denial_reason(decision))
        return None
    return SUBACK_FAILURE_V3


def will_denied(conn: ClientContext, decision: Decision, identity: Identity | None = None) -> None:
    """A will the policy refuses (or permissions that cannot be bound for ``identity``): CONNACK
    0x87 (5) / 0x05 (3.x), close; never published. The audit record names the decision."""
    conn.refusal = (decision, identity)
    code = decision.reason_code if conn.v5 else ReasonCode.NOT_AUTHORIZED
    conn.refuse_connect(code, denial_reason(decision))
