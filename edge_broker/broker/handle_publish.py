"""PUBLISH and its acknowledgements in both directions (MQTT 5 §3.3–§3.7, §4.3; 3.1.1 §3.3–§3.7).

What the protocol alone decides is the engine's: ``engine/publish.py`` (Maximum QoS / Retain
Available 0x9B / 0x9A, topic aliases 0x94, Subscription Identifiers, Payload Format Indicator
0x99) and the acknowledgement flows of ``engine/connection.py`` (a QoS 2 duplicate held by
packet id until PUBREL is acknowledged and not routed again, method B of §4.3.3; one beyond
the Receive Maximum is 0x93; PUBACK / PUBREC / PUBREL / PUBCOMP move the session's flow, and
the engine writes every reply). Here: the broker's limits, the policy, routing, the journal
and the store an acknowledgement waits for, and what an acknowledged delivery frees (the next
queued message is sent).
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING

from ..authz.decision import Decision, GateName, deny
from ..engine.events import Flow, ProtocolViolation
from ..engine.publish import PublishRefused, capability_refusal, refused_ack, resolve
from ..matching.names import shown
from ..mqtt.packets import NO_PROPERTIES, Puback, Pubcomp, Publish, Pubrec, Pubrel
from ..mqtt.reason_codes import ReasonCode
from ..store import StoreError
from .awaiting import all_of
from .bridging import client_properties
from .handle_claims import handle_claim_publish
from .limits.publish_quota import quota_reason
from .limits.topic_limits import topic_limit, topic_limit_reason
from .message import Message, make_message
from .outcomes import publish_denied

if TYPE_CHECKING:
    from .handler_api import ClientContext
    from .topic_space import TopicSpace


def handle_publish(conn: ClientContext, packet: Publish) -> Awaitable[None] | None:
    broker = conn.broker
    broker.stats.messages_received += 1
    conn.msgs_in += 1
    qos = packet.qos
    cfg = broker.config.broker
    refused = capability_refusal(packet, cfg.maximum_qos, cfg.retain_available)  # engine
    if refused is not None:
        conn.violation(refused.reason_code, refused.reason)
        return None
    topic = packet.topic
    limits = broker.config.limits
    if topic and (
        len(topic) * 4 > limits.max_topic_length
        or topic.count(broker.separator) >= limits.max_topic_levels
    ):
        limit = topic_limit(topic, limits, broker.separator)
        if limit is not None:
            _refuse_topic(conn, packet, limit)
            return None
    quota = conn.publish_quota
    if quota is not None:
        crossed = quota.take(conn.last_rx, len(topic) + len(packet.payload))
        if crossed is not None:
            _refuse_rate(conn, packet, crossed)
            return None
    props = packet.properties
    if props is not NO_PROPERTIES:  # MQTT 5 only: aliases, identifiers, payload format
        resolved = resolve(packet, conn.engine.aliases_in)  # engine/publish.py
        if isinstance(resolved, PublishRefused):
            if resolved.violation:
                conn.violation(resolved.reason_code, resolved.reason)
            else:
                conn.send(refused_ack(qos, packet.packet_id or 0, resolved.reason_code, "", False))
            return None
        topic, props = resolved
        props = client_properties(broker.bridges, props)  # no forged bridge origin (issue 31)
    if qos == 2:
        pid = packet.packet_id
        assert pid is not None
        persistence = broker.persistence
        receive_maximum = broker.config.limits.receive_maximum
        # engine/connection.py: a duplicate is acknowledged (PUBREC) and not routed; one more
        # than the Receive Maximum is a violation
        flow = conn.engine.qos2_publish_received(pid, receive_maximum, persistence is None)
        if flow is Flow.DUPLICATE:
            if persistence is not None:  # after the first PUBREC, once it is stored
                return persistence.acknowledge(
                    conn, partial(_pubrec_again, conn, pid), receive_maximum
                )
            return None
        if isinstance(flow, ProtocolViolation):
            conn.violation(flow.reason_code, flow.reason)
            return None
    identity = conn.identity
    assert identity is not None
    if identity.smoker_id is not None and broker.policy.reserved_topics.claim_service(topic):
        if broker.claims is not None:  # SMOKER.md: the claim service answers, never routed
            return handle_claim_publish(conn, broker.claims, packet, topic, props)
        publish_denied(
            conn,
            packet,
            deny(GateName.RESERVED, None, "SMOKER claims are disabled on this broker ([claims])"),
        )
        return None
    # the one value every later step sees: gates, retained store, routing, delivery (issue 21)
    message = make_message(
        topic, packet.payload, qos, packet.retain, props, conn.client_id, broker.clock
    )
    verdict = broker.policy.check_publish(identity, message)
    if isinstance(verdict, Decision):
        return _decided(conn, packet, message, verdict)
    return _await_decision(conn, packet, message, verdict)


def _refuse_topic(conn: ClientContext, packet: Publish, limit: str) -> None:
    """A topic beyond ``[limits] max_topic_length/levels`` (broker/limits/topic_limits.py): 0x90."""
    broker = conn.broker
    reason = topic_limit_reason(packet.topic, limit, broker.config.limits, broker.separator)
    broker.limit_hits.limits_key(
        limit,
        conn.client_id,
        f"PUBLISH to {shown(packet.topic)} by {conn.client_id!r} refused: {reason}",
    )
    _refuse(conn, packet, ReasonCode.TOPIC_NAME_INVALID, ReasonCode.TOPIC_NAME_INVALID, reason)


def _refuse_rate(conn: ClientContext, packet: Publish, limit: str) -> None:
    """Over ``[limits] publish_rate`` / ``publish_byte_rate`` (broker/limits/publish_quota.py):
    0x97 in the acknowledgement (MQTT 5 §3.4.2.1 has no 0x96 there), else DISCONNECT 0x96."""
    broker = conn.broker
    reason = quota_reason(limit, broker.config.limits)
    broker.limit_hits.limits_key(
        limit, conn.client_id, f"PUBLISH by {conn.client_id!r} refused: {reason}"
    )
    _refuse(conn, packet, ReasonCode.QUOTA_EXCEEDED, ReasonCode.MESSAGE_RATE_TOO_HIGH, reason)


def _refuse(
    conn: ClientContext, packet: Publish, ack_code: ReasonCode, close_code: ReasonCode, reason: str
) -> None:
    """A PUBLISH refused by a limit: MQTT 5 QoS 1/2 get PUBACK/PUBREC ``ack_code`` and keep the
    connection; QoS 0 and 3.x are disconnected with ``close_code`` (nothing else tells them)."""
    if conn.v5 and packet.qos:
        _refused_ack(conn, packet, ack_code, reason)
        return
    conn.close(close_code, reason)


def _refused_ack(conn: ClientContext, packet: Publish, code: ReasonCode, reason: str) -> None:
    conn.send(
        refused_ack(packet.qos, packet.packet_id or 0, code, reason, conn.problem_information)
    )


async def _await_decision(
    conn: ClientContext, packet: Publish, message: Message, verdict: object
) -> None:
    decision = await verdict  # type: ignore[misc]
    if not conn.closing:
        stored = _decided(conn, packet, message, decision)
        if stored is not None:
            await stored


def _decided(
    conn: ClientContext, packet: Publish, message: Message, decision: Decision
) -> Awaitable[None] | None:
    if not decision.allowed:  # once per PUBLISH: the attribute, not the ``denied`` property
        publish_denied(conn, packet, decision)
        return None
    broker = conn.broker
    session = conn.session
    assert session is not None
    space = broker.topic_space(session.tenant)
    if packet.retain and not _retain(conn, packet, space, message):
        return None
    qos = packet.qos
    if qos == 2:  # held before any receiver can see it: a DUP resend is never routed again
        assert packet.packet_id is not None
        conn.engine.hold(packet.packet_id)
        session.journal.qos2_received(packet.packet_id)
    delivery = broker.delivery
    routed = delivery.route(space, message, publisher=True)
    # [limits] queue_overflow = "backpressure": a subscriber's queue went beyond its limit;
    # this publisher's next packets wait (broker/delivery.py)
    held = delivery.congestion() if delivery.congested else None
    if qos == 0:
        return held
    pid = packet.packet_id
    assert pid is not None
    persistence = broker.persistence
    if persistence is not None:
        # retained, queued for persistent sessions (issue 8), before the ack (issue 17), and
        # with durable bridges the bridge queue logs' write too (issue 19)
        bridged = broker.bridges.take_pending() if broker.bridges is not None else None
        acked = persistence.acknowledge(
            conn,
            partial(_ack_stored, conn, pid, qos, routed),
            broker.config.limits.receive_maximum,
            bridged,
        )
        if held is not None and acked is not None:
            return all_of(acked, held)
        return acked if acked is not None else held
    conn.engine.send_publish_ack(qos, pid, routed)  # PUBACK / PUBREC: the engine writes it
    return held


def _retain(conn: ClientContext, packet: Publish, space: TopicSpace, message: Message) -> bool:
    """Store (or clear) the retained message within the retained limits (``Broker.retain``).
    False when the PUBLISH was refused with 0x97 (MQTT 5 QoS 1/2): not routed either; QoS 0
    and 3.x are delivered, not retained (docs/limits-memory.md)."""
    refusal = conn.broker.retain(
        space,
        message,
        conn.client_id,
        f"retained PUBLISH to {shown(message.topic)} by {conn.client_id!r}",
        conn.session.owner if conn.session is not None else None,
    )
    if refusal is None or not (conn.v5 and packet.qos > 0):
        return True
    _refused_ack(conn, packet, ReasonCode.QUOTA_EXCEEDED, refusal[1])
    return False


def _ack_stored(
    conn: ClientContext, pid: int, qos: int, routed: int, error: StoreError | None
) -> None:
    """PUBACK/PUBREC once the log stored what this message changed; when it could not
    (disk full, read-only), MQTT 5 gets 0x97/0x80 with a Reason String and 3.x no
    acknowledgement, so the publisher does not count on it (issue 8)."""
    if error is not None:
        persistence = conn.broker.persistence
        assert persistence is not None
        code, reason = persistence.refusal(error)
        session = conn.session
        if qos == 2 and session is not None:
            conn.engine.unhold(pid)  # not stored: the id is not held (the client may resend)
            session.journal.qos2_released(pid)
        if conn.v5 and not conn.closing:
            conn.send(refused_ack(qos, pid, code, reason, conn.problem_information))
        return
    if not conn.closing:
        conn.engine.send_publish_ack(qos, pid, routed)  # PUBACK / PUBREC: the engine writes it


def _pubrec_again(conn: ClientContext, pid: int, error: StoreError | None) -> None:
    conn.engine.send_pubrec(pid)  # nothing once the connection ended


def handle_pubrel(conn: ClientContext, packet: Pubrel) -> Awaitable[None] | None:
    """Release an incoming QoS 2 packet id (MQTT 5 §4.3.3): the engine moves the flow and
    answers PUBCOMP (0x92 for an id not held). A persistent session's release is stored
    before PUBCOMP: a packet id still held after a restart would swallow the client's next
    message with that id (issue 8)."""
    pid = packet.packet_id
    persistence = conn.broker.persistence
    if conn.engine.pubrel_received(pid, persistence is None) is Flow.RELEASE:
        session = conn.session
        assert session is not None
        session.journal.qos2_released(pid)
        if persistence is not None:
            return persistence.acknowledge(
                conn, partial(_pubcomp, conn, pid), conn.broker.config.limits.receive_maximum
            )
    return None


def _pubcomp(conn: ClientContext, pid: int, error: StoreError | None) -> None:
    # After a failed store the client resends PUBREL; the packet id is released in memory.
    conn.engine.send_pubcomp(pid)  # nothing once the connection ended


def handle_puback(conn: ClientContext, packet: Puback) -> None:
    """The engine completes a QoS 1 message in flight (anything else is ignored); the journal
    lets it go and the window has room for the next queued message."""
    pid = packet.packet_id
    if conn.engine.puback_received(pid) is _DELIVERED:
        _delivered(conn, pid)


def _delivered(conn: ClientContext, pid: int) -> None:
    session = conn.session
    assert session is not None
    session.journal.completed(pid)
    if session.queue:
        conn.broker.delivery.drain(session)


def handle_pubrec(conn: ClientContext, packet: Pubrec) -> Awaitable[None] | None:
    """The engine moves the outgoing QoS 2 flow and answers (PUBREL, or 0x92 for an unknown
    id). PUBREL waits until "released" is stored when the session is persistent: a restart
    must resend PUBREL, never the PUBLISH the client may already have completed (exactly
    once, issue 8)."""
    session = conn.session
    assert session is not None
    pid = packet.packet_id
    persistence = conn.broker.persistence
    store_first = persistence is not None and persistence.tracks(session)
    flow = conn.engine.pubrec_received(pid, packet.reason_code, not store_first)
    if flow is Flow.REFUSED:  # the client refused it: the flow ends (MQTT 5 §4.3.3)
        session.journal.completed(pid)
        conn.broker.delivery.drain(session)
        return None
    if flow is not Flow.RELEASED:
        return None
    session.journal.released(pid)
    if store_first:
        assert persistence is not None
        return persistence.acknowledge(
            conn, partial(_pubrel, conn, pid), conn.broker.config.limits.receive_maximum
        )
    return None


def _pubrel(conn: ClientContext, pid: int, error: StoreError | None) -> None:
    # Not stored: PUBREL all the same (the flow in memory goes on; a crash resends PUBLISH).
    conn.engine.send_pubrel(pid)  # nothing once the connection ended


def handle_pubcomp(conn: ClientContext, packet: Pubcomp) -> None:
    """The engine completes a released QoS 2 message (anything else is ignored)."""
    pid = packet.packet_id
    if conn.engine.pubcomp_received(pid) is _DELIVERED:
        _delivered(conn, pid)


_DELIVERED = Flow.DELIVERED
