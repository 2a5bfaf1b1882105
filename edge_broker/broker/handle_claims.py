"""PUBLISH to SMOKER's system topics by a SMOKER-authenticated client (SMOKER.md "System topics",
"What the broker answers to a claim", "Optional: claim information request").

``access/claim``, ``access/unclaim`` and ``access/claims/<ID>/request`` go to the claim service and
are never routed. The answer is the PUBACK (QoS 1) or PUBREC (QoS 2) reason code of the SMOKER
table with a Reason String when the client allows problem information; 0x00 is sent only once the
claim is durable (the store's group commit). QoS 0 claims and unclaims are logged and not
processed. A claims request is answered on its Response Topic at QoS 1 when the requester is
subscribed to exactly that topic, checked before the answer is built (claims/info.py: rate
limit, one page per answer).

Non-SMOKER clients never get here: gate 2 of the policy refuses their publishes to these topics.
The connection waits for the answer before it reads the client's next packet (packet order).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..audit import events as audit_events
from ..claims.system import handle_system_publish
from ..matching.reserved_topics import CLAIMS_REQUEST_PREFIX
from ..mqtt.packets import NO_PROPERTIES, Properties, Puback, Publish, Pubrec
from ..mqtt.reason_codes import ReasonCode
from .message import make_message
from .session import Outgoing

if TYPE_CHECKING:
    from ..claims.runtime import ClaimsRuntime
    from .handler_api import ClientContext

log = logging.getLogger("edge_broker.claims")


def handle_claim_publish(
    conn: ClientContext, claims: ClaimsRuntime, packet: Publish, topic: str, props: Properties
) -> Awaitable[None] | None:
    """Start handling a SMOKER system-topic PUBLISH; the awaitable sends the answer."""
    if packet.qos == 0 and not topic.startswith(CLAIMS_REQUEST_PREFIX):
        log.warning(
            f"QoS 0 publish to {topic!r} by {conn.client_id!r} not processed: "
            "claims need QoS 1 (the PUBACK carries the answer)",
            extra={"event": "claim_qos0", "client_id": conn.client_id, "topic": topic},
        )
        return None
    return _answer(conn, claims, packet, topic, props)


async def _answer(
    conn: ClientContext, claims: ClaimsRuntime, packet: Publish, topic: str, props: Properties
) -> None:
    identity = conn.identity
    assert identity is not None
    session = conn.session
    outcome = await handle_system_publish(
        claims.service,
        identity,
        topic,
        packet.qos,
        packet.payload,
        props.response_topic,
        may_receive=lambda t: session is not None and t in session.subscriptions,
    )
    code = ReasonCode.SUCCESS if outcome.reason_code is None else outcome.reason_code
    if outcome.limit is not None:
        conn.broker.limit_hits.hit(
            outcome.limit,
            f"claims request by {conn.client_id} refused: {outcome.reason_string}",
            conn.client_id,
        )
    audit_events.claim(conn.broker.audit, conn, topic, int(code), outcome.reason_string)
    log.info(
        f"{topic} by {conn.client_id}: 0x{code:02X} {outcome.reason_string or ''}".rstrip(),
        extra={
            "event": "claim",
            "client_id": conn.client_id,
            "tenant": identity.tenant,
            "topic": topic,
            "reason_code": int(code),
            "reason": outcome.reason_string,
        },
    )
    if conn.closing:
        return  # durable or not, nobody is left to answer
    pid = packet.packet_id
    if pid is not None and outcome.reason_code is not None:
        reason = outcome.reason_string
        ack_props = (
            Properties(reason_string=reason)
            if reason and conn.problem_information and code != ReasonCode.SUCCESS
            else NO_PROPERTIES
        )
        if packet.qos == 1:
            conn.send_packet(Puback(pid, code, ack_props))
        else:
            session = conn.session
            assert session is not None
            if code < 0x80:
                session.hold_incoming(pid)  # PUBREL then gets its PUBCOMP
                session.journal.qos2_received(pid)
            conn.send_packet(Pubrec(pid, code, ack_props))
    if outcome.response is not None:
        _respond(conn, *outcome.response)


def _respond(conn: ClientContext, topic: str, payload: bytes) -> None:
    """The claims information, to the requester only, if subscribed to exactly ``topic``."""
    session = conn.session
    if session is None:
        return
    entry = session.subscriptions.get(topic)
    if entry is None:
        return
    message = make_message(
        topic,
        payload,
        1,
        False,
        Properties(payload_format_indicator=1),
        conn.client_id,
        conn.broker.clock,
    )
    sub_ids = (entry.subscription_id,) if entry.subscription_id else ()
    conn.broker.delivery.send(session, Outgoing(message, min(1, entry.qos), False, sub_ids))
