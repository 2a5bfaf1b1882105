"""SUBSCRIBE (MQTT 5 §3.8–§3.9, §4.8.2; 3.1.1 §3.8–§3.9); UNSUBSCRIBE: handle_unsubscribe.py.

Each filter is decided on its own: syntax and the broker's capabilities (wildcards, shared
subscriptions, subscription identifiers), the per-client subscription limit (0x97), then the
policy. The SUBACK goes out before the retained messages the new subscriptions select (Retain
Handling 0: always, 1: only for a new subscription, 2: never; never for shared subscriptions).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..authz.decision import Decision
from ..matching.errors import RuleError
from ..matching.names import SHOWN_CHARS, shown
from ..matching.subscription_patterns import SubscriptionPattern, subscription_pattern
from ..mqtt.packets import (
    NO_PROPERTIES,
    Properties,
    Suback,
    Subscribe,
    Subscription,
)
from ..mqtt.reason_codes import ReasonCode
from .limits.quotas import UNATTRIBUTED
from .limits.topic_limits import topic_limit, topic_limit_reason
from .outcomes import denial_reason, subscribe_denied
from .session import Outgoing, Session, SubscriptionEntry

if TYPE_CHECKING:
    from .handler_api import ClientContext


def handle_subscribe(conn: ClientContext, packet: Subscribe) -> Awaitable[None] | None:
    cfg = conn.broker.config.broker
    sub_id = (
        packet.properties.subscription_identifiers[0]
        if (packet.properties.subscription_identifiers)
        else None
    )
    if sub_id is not None and not cfg.subscription_identifiers:
        conn.violation(
            ReasonCode.SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED,
            "subscription identifiers are not supported",
        )
        return None
    # No Local on a shared subscription (MQTT 5 §3.8.3.1) never gets here: the decoder refuses it.
    user_properties = packet.properties.user_properties
    verdicts = [_check(conn, sub, user_properties) for sub in packet.subscriptions]
    if all(isinstance(v, (Decision, int)) for v in verdicts):
        _subscribe(conn, packet, sub_id, verdicts)  # type: ignore[arg-type]
        return None
    return _await_verdicts(conn, packet, sub_id, verdicts)


async def _await_verdicts(
    conn: ClientContext, packet: Subscribe, sub_id: int | None, verdicts: list[object]
) -> None:
    resolved: list[Decision | int] = []
    for v in verdicts:
        resolved.append(v if isinstance(v, (Decision, int)) else await v)  # type: ignore[misc]
    if not conn.closing:
        _subscribe(conn, packet, sub_id, resolved)


def _check(
    conn: ClientContext, sub: Subscription, user_properties: tuple[tuple[str, str], ...] = ()
) -> object:
    """A reason code the broker decides itself, or the policy's (maybe awaitable) Decision."""
    broker = conn.broker
    cfg = broker.config.broker
    topic_filter = sub.topic_filter
    limit = topic_limit(topic_filter, broker.config.limits, broker.separator)
    if limit is not None:
        reason = topic_limit_reason(topic_filter, limit, broker.config.limits, broker.separator)
        broker.limit_hits.limits_key(
            limit,
            conn.client_id,
            f"SUBSCRIBE to {shown(topic_filter)} by {conn.client_id!r} refused: {reason}",
        )
        return int(ReasonCode.TOPIC_FILTER_INVALID)
    identity = conn.identity
    assert identity is not None
    try:
        shared, inner, pattern = subscription_pattern(
            topic_filter, broker.separator, identity.subscription_patterns
        )
    except RuleError:
        shared, inner, pattern = None, topic_filter, None  # the policy's syntax gate reports it
    if shared is not None and not cfg.shared_subscriptions:
        return int(ReasonCode.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED)
    if not cfg.wildcard_subscriptions and ("+" in inner or "#" in inner or pattern is not None):
        return int(ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED)
    return broker.policy.check_subscribe(identity, sub, user_properties)


def _subscribe(
    conn: ClientContext, packet: Subscribe, sub_id: int | None, verdicts: list[Decision | int]
) -> None:
    broker = conn.broker
    session = conn.session
    assert session is not None
    space = broker.topic_space(session.tenant)
    max_qos = broker.config.broker.maximum_qos
    total: int | None = None  # subscriptions in the broker (max_subscriptions_total)
    codes: list[int] = []
    reasons: list[str] = []  # the Reason String names each denied filter's gate and rule
    retained_for: list[tuple[SubscriptionEntry, str, SubscriptionPattern | None]] = []
    patterns = conn.identity is not None and conn.identity.subscription_patterns
    # kept so that re-checks after a reload ask the site ACL the same question (declare_queryable)
    queryable = any(
        name == "queryable" and value.strip().lower() == "true"
        for name, value in packet.properties.user_properties
    )
    for sub, verdict in zip(packet.subscriptions, verdicts, strict=True):
        if isinstance(verdict, Decision):
            if verdict.denied:
                code = subscribe_denied(conn, verdict)
                if code is None:
                    return
                codes.append(code)
                reasons.append(f"{_named(sub.topic_filter)}: {denial_reason(verdict)}")
                continue
            recheck = verdict.recheck
        else:
            if not conn.v5:
                if verdict == ReasonCode.TOPIC_FILTER_INVALID and conn.level == 3:
                    conn.close(None, "topic filter beyond [limits]")  # 3.1 has no 0x80
                    return
                codes.append(0x80)
                continue
            codes.append(verdict)
            if verdict == ReasonCode.TOPIC_FILTER_INVALID:
                limits = broker.config.limits
                crossed = topic_limit(sub.topic_filter, limits, broker.separator)
                assert crossed is not None
                why = topic_limit_reason(sub.topic_filter, crossed, limits, broker.separator)
                reasons.append(f"{_named(sub.topic_filter)}: {why}")
            continue
        existing = session.subscriptions.get(sub.topic_filter)
        if existing is None:
            if total is None:  # once per SUBSCRIBE: it walks the topic spaces
                total = sum(s.subscription_count() for s in broker.topic_spaces.values())
            crossed = _subscription_quota(conn, session, total)
            if crossed is not None:
                codes.append(int(ReasonCode.QUOTA_EXCEEDED) if conn.v5 else 0x80)
                reasons.append(f"{_named(sub.topic_filter)}: {crossed}")
                continue
            total += 1
        shared, inner, pattern = subscription_pattern(sub.topic_filter, broker.separator, patterns)
        qos = min(sub.qos, max_qos)
        assert conn.identity is not None
        egress = broker.policy.delivers_need_check(conn.identity, inner)
        entry = SubscriptionEntry(
            session,
            sub.topic_filter,
            qos,
            sub.no_local,
            sub.retain_as_published,
            sub.retain_handling,
            sub_id,
            shared.group if shared is not None else None,
            recheck,
            queryable,
            egress,
        )
        session.subscriptions[sub.topic_filter] = entry
        session.journal.changed()
        space.subscribe(entry, inner, pattern)
        broker.quotas.hold_subscriptions(session)  # its tenant's and owner's share (quotas.py)
        codes.append(qos)
        if shared is None and (
            sub.retain_handling == 0 or (sub.retain_handling == 1 and existing is None)
        ):
            retained_for.append((entry, inner, pattern))
    props = (
        Properties(reason_string="; ".join(reasons))
        if (reasons and conn.v5 and conn.problem_information)
        else NO_PROPERTIES
    )
    conn.send_packet(Suback(packet.packet_id, tuple(codes), props))
    if retained_for:
        _send_retained(conn, retained_for)


def _subscription_quota(conn: ClientContext, session: Session, total: int) -> str | None:
    """The Reason String when a new subscription would pass ``max_subscriptions_per_client``
    (held by this session), ``max_subscriptions_total`` (``total`` in the broker) or the
    tenant's or the session owner's share of it (broker/limits/quotas.py)."""
    broker = conn.broker
    limits = broker.config.limits
    held = len(session.subscriptions)
    if held >= limits.max_subscriptions_per_client:
        limit, reason = (
            "max_subscriptions_per_client",
            (f"this client has {held} subscriptions (limits.max_subscriptions_per_client)"),
        )
    elif total >= limits.max_subscriptions_total:
        limit, reason = (
            "max_subscriptions_total",
            (f"the broker has {total} subscriptions (limits.max_subscriptions_total)"),
        )
    else:
        return broker.quotas.refusal(
            broker.quotas.subscriptions,
            limits,
            session.tenant,
            session.owner or UNATTRIBUTED,
            1,
            broker.limit_hits,
            conn.client_id,
            f"SUBSCRIBE by {conn.client_id!r}",
        )
    broker.limit_hits.limits_key(
        limit, conn.client_id, f"SUBSCRIBE by {conn.client_id!r} refused: {reason}"
    )
    return reason


def _named(topic_filter: str) -> str:
    """A filter as the SUBACK's Reason String names it: as written, long ones cut (issue 16)."""
    return topic_filter if len(topic_filter) <= SHOWN_CHARS else shown(topic_filter)


def _send_retained(
    conn: ClientContext, wanted: list[tuple[SubscriptionEntry, str, SubscriptionPattern | None]]
) -> None:
    """Retained messages for new subscriptions, RETAIN set (MQTT 5 §3.3.1.3)."""
    broker = conn.broker
    session = conn.session
    assert session is not None
    space = broker.topic_space(session.tenant)
    now = broker.clock()
    policy = broker.policy
    for entry, inner, pattern in wanted:
        sub_ids = (entry.subscription_id,) if entry.subscription_id else ()
        for message in space.retained_matching(inner, pattern, now):
            if not policy.routable(message):
                continue
            if (
                (policy.has_delivery_gates and entry.egress) or entry.recheck
            ) and not policy.check_deliver(session, message, entry).allowed:
                continue
            qos = min(entry.qos, message.qos)
            broker.delivery.send(session, Outgoing(message, qos, True, sub_ids))
