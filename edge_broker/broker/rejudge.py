"""Judging a session again when what it was admitted under changes (issue 15;
docs/sessions-and-authorization.md "What is judged again, and when").

A policy reload or bundle, a re-authentication, a resumed session and a restart all take this
one path: every subscription of the session is checked against the policy in force now for the
identity connected now (:func:`judge_subscriptions`), the denied ones are removed
(:func:`remove_subscription`: unrouted, logged, counted, audited), and what was queued or left
in flight under them goes with them (:func:`purge_undeliverable`): a message stays only while a
remaining subscription of the session matches it and the delivery gates allow it now. A will is
judged again when it is published (:func:`judge_will`), and a reload ends connections whose
password entry is gone or changed (:func:`recheck_credentials`). The judging itself (what the
policy says of each subscription, queued message and will) is
:mod:`edge_broker.authz.session_verdicts`; this module acts on its verdicts.

Live deliveries need none of this on the hot path: a message is routed only through
subscriptions that passed the policy in force (this path keeps that true) and the policy's
per-delivery gates (``Policy.check_deliver``) still judge each one where they can deny. Where
they can is decided here too, per subscription (``SubscriptionEntry.egress``, issue 21): a
reload that adds an egress deny rule marks the subscriptions it meets before the next message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from ..authz.decision import ALLOW, Decision, GateName
from ..authz.request import Publication
from ..authz.session_verdicts import (
    TOKEN_EXPIRED,
    TOKEN_NOT_KEPT,
    SessionFilters,
    Verdict,
    delivery_right,
    subscription_verdicts,
    will_verdict,
)
from ..engine.states import ConnState
from ..identity import Identity
from ..matching.errors import RuleError
from ..matching.subscription_patterns import subscription_pattern
from ..mqtt.reason_codes import ReasonCode
from .message import Message
from .session import Attached, Outgoing, Session, SubscriptionEntry

if TYPE_CHECKING:
    from ..audit.log import AuditLog
    from ..auth.password import PasswordEntry
    from ..authz.policy import Policy
    from ..config import Config
    from .delivery import Delivery
    from .limits.quotas import Quotas
    from .session import SessionStore
    from .stats import BrokerStats
    from .topic_space import TopicSpace

log = logging.getLogger("edge_broker.broker")


class LiveConnection(Attached, Protocol):
    """What judging again reads and changes of a live connection (``Connection`` is one): an
    attached connection (its state, and the close that revokes it), who it is, the credentials
    that admitted it, and its session."""

    client_id: str
    identity: Identity | None
    password_entry: PasswordEntry | None
    token_credential: bytes | None

    @property
    def session(self) -> Session | None: ...


class RejudgeHost(Protocol):
    """What judging again reads and changes in the broker (``Broker`` is one): the policy at each
    use (a reload swaps it), the sessions and live connections it judges, the topic spaces their
    subscriptions leave, and where a removal is counted and audited."""

    @property
    def policy(self) -> Policy: ...

    @property
    def separator(self) -> str: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def connections(self) -> Iterable[LiveConnection]: ...

    @property
    def delivery(self) -> Delivery: ...

    @property
    def quotas(self) -> Quotas: ...

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def audit(self) -> AuditLog | None: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    def topic_space(self, tenant: str) -> TopicSpace: ...


async def judge_subscriptions(
    broker: RejudgeHost, session: Session, identity: Identity
) -> tuple[int, list[Verdict[SubscriptionEntry]]]:
    """(subscriptions checked, verdicts that change something) for ``session`` as ``identity``
    under ``broker.policy`` (``authz.session_verdicts.subscription_verdicts``). Without
    asynchronous authorizers nothing here suspends, so a caller that awaits this and then
    applies it sees no delivery in between."""
    return await subscription_verdicts(
        broker.policy, broker.separator, identity, session.subscriptions
    )


def apply_verdicts(
    broker: RejudgeHost, session: Session, verdicts: list[Verdict[SubscriptionEntry]], why: str
) -> int:
    """Remove the denied subscriptions, re-mark the others; returns how many were removed."""
    removed = 0
    for v in verdicts:
        if session.subscriptions.get(v.topic_filter) is not v.entry:
            continue  # changed by the client while an authorizer answered
        if v.decision.denied:
            remove_subscription(broker, session, v.topic_filter, why, v.decision)
            removed += 1
        else:
            changed = replace(v.entry, recheck=v.decision.recheck, egress=v.egress)
            _replace(broker, session, changed, v.topic_filter)
    return removed


async def rejudge_session(broker: RejudgeHost, session: Session, why: str) -> tuple[int, int]:
    """Judge ``session`` again as its current identity: subscriptions, then what is queued and
    in flight. Returns (subscriptions checked, removed). A token session restored from disk has
    no grants yet: the token gate abstains and the gates that never read grants (site ACL,
    claims, authorizers) judge it now, as any session; its grants apply when its client resumes
    with a token (a reload skipping it left what the ACL revoked in place until then)."""
    identity = session.identity
    if identity is None:
        return 0, 0
    checked, verdicts = await judge_subscriptions(broker, session, identity)
    removed = apply_verdicts(broker, session, verdicts, why)
    if purge_undeliverable(broker, session, why, removed):
        conn = session.connection
        if conn is not None and conn.state is ConnState.CONNECTED:
            broker.delivery.drain(session)  # the window may have room again
    return checked, removed


async def recheck_subscriptions(broker: RejudgeHost, why: str) -> tuple[int, int]:
    """Every session (online and offline) judged again after a policy change or at start."""
    checked = removed = 0
    for session in list(broker.sessions):
        c, r = await rejudge_session(broker, session, why)
        checked += c
        removed += r
    return checked, removed


# -- subscriptions ------------------------------------------------------------------------


def _split(broker: RejudgeHost, session: Session, topic_filter: str) -> tuple[str, object]:
    identity = session.identity
    patterns = identity is not None and identity.subscription_patterns
    try:
        _, inner, pattern = subscription_pattern(topic_filter, broker.separator, patterns)
    except RuleError:
        return topic_filter, None
    return inner, pattern


def remove_subscription(
    broker: RejudgeHost, session: Session, topic_filter: str, why: str, decision: Decision
) -> None:
    """Remove a subscription a policy change no longer allows: unrouted, logged, counted and
    audited. Every such removal (reload, bundle, re-authentication, resumed session, restart)
    goes here."""
    entry = session.subscriptions.pop(topic_filter, None)
    if entry is None:
        return
    session.journal.changed()
    broker.topic_space(session.tenant).unsubscribe(entry, entry.routed_filter(broker.separator))
    broker.quotas.hold_subscriptions(session)
    broker.stats.subscriptions_removed += 1
    identity = session.identity
    log.info(
        "subscription removed after %s",
        why,
        extra={
            "event": "subscription_removed",
            "client_id": session.client_id,
            "tenant": session.tenant,
            "topic_filter": topic_filter,
            "reason": decision.reason,
        },
    )
    if broker.audit is not None:
        broker.audit.decision(
            action="subscribe",
            client=session.client_id,
            tenant=session.tenant,
            user=identity.username if identity is not None else None,
            topic=topic_filter,
            outcome="deny",
            gate=decision.gate.value if decision.gate else None,
            rule=decision.rule,
            rc=int(decision.reason_code),
            reason=f"removed after {why}: {decision.reason}",
        )


def _replace(
    broker: RejudgeHost, session: Session, entry: SubscriptionEntry, topic_filter: str
) -> None:
    inner, pattern = _split(broker, session, topic_filter)
    session.subscriptions[topic_filter] = entry
    session.journal.changed()
    broker.topic_space(session.tenant).subscribe(entry, inner, pattern)  # type: ignore[arg-type]
    broker.quotas.hold_subscriptions(session)


# -- queued and in-flight messages -----------------------------------------------------------


def purge_undeliverable(broker: RejudgeHost, session: Session, why: str, removed: int = 0) -> int:
    """Drop what is queued or in flight for ``session`` that it may no longer receive (counted
    in ``$SYS/broker/authz/deliveries_revoked``, logged, audited). QoS 2 messages past PUBREC
    stay: the client has them already, only PUBREL is left. Returns how many were dropped.

    Without gates 3–6 (no pipeline) a message can only have lost its subscription: when this
    judgement ``removed`` none, there is nothing to look at (every earlier judgement purged
    its own), so a broker without a policy pays nothing on resume."""
    if broker.policy.pipeline is None and not removed:
        return 0
    if not session.queue and not session.inflight:
        return 0
    filters = SessionFilters(broker.separator, session.subscriptions, session.identity)
    queue = session.queue
    denied_queue: dict[int, Decision] = {}
    for i, outgoing in enumerate(queue):
        decision = delivery_right(broker.policy, session, outgoing.message, filters)
        if decision.denied:
            denied_queue[i] = decision
    dropped = 0
    if denied_queue:
        kept: list[Outgoing] = []
        denied: list[Outgoing] = []
        for i in range(len(queue)):
            outgoing = queue.popleft()
            session.queued_bytes -= outgoing.message.size
            refusal = denied_queue.get(i)
            if refusal is None:
                kept.append(outgoing)
            else:
                denied.append(outgoing)
                _revoked(broker, session, outgoing.message, why, refusal)
                dropped += 1
        session.journal.dropped_many(denied)  # else a restart would bring them back
        for outgoing in kept:
            queue.append(outgoing)
            session.queued_bytes += outgoing.message.size
    for pid, inflight in list(session.inflight.items()):
        if inflight.released:
            continue
        decision = delivery_right(broker.policy, session, inflight.outgoing.message, filters)
        if decision.denied:
            del session.inflight[pid]
            session.journal.completed(pid)
            _revoked(broker, session, inflight.outgoing.message, why, decision)
            dropped += 1
    return dropped


def _revoked(
    broker: RejudgeHost, session: Session, message: Message, why: str, decision: Decision
) -> None:
    broker.stats.deliveries_revoked += 1
    log.info(
        "queued message dropped after %s",
        why,
        extra={
            "event": "delivery_revoked",
            "client_id": session.client_id,
            "tenant": session.tenant,
            "topic": message.topic,
            "reason": decision.reason,
        },
    )
    if broker.audit is not None and decision.gate is None:  # gates audit their own denials
        identity = session.identity
        broker.audit.decision(
            action="deliver",
            client=session.client_id,
            tenant=session.tenant,
            user=identity.username if identity is not None else None,
            topic=message.topic,
            outcome="deny",
            gate=None,
            rule=None,
            rc=int(decision.reason_code),
            reason=f"dropped after {why}: {decision.reason}",
        )


# -- wills ------------------------------------------------------------------------------------


def judge_will(
    broker: RejudgeHost, session: Session, will: Publication
) -> Decision | Awaitable[Decision]:
    """A will at the moment it is published, as ``authz.session_verdicts.will_verdict`` judges
    it: the policy in force then, for the session's identity then, unless its token expired."""
    identity = session.identity
    if identity is None:
        return ALLOW
    expires = identity.token_expires_at
    # exp is wall-clock time (RFC 7519 §4.1.4); the last connection's deadline for it is on the
    # broker's clock (token_expiry.py): whichever has passed ends the token (fail closed)
    deadline = session.token_deadline
    expired = expires is not None and (
        time.time() >= expires or (deadline is not None and broker.clock() >= deadline)
    )
    return will_verdict(broker.policy, identity, will, expired)


def will_refused(
    broker: RejudgeHost, session: Session, will: Publication, decision: Decision
) -> None:
    broker.stats.wills_denied += 1
    log.info(
        "will not published: %s",
        decision.reason,
        extra={
            "event": "will_denied",
            "client_id": session.client_id,
            "tenant": session.tenant,
            "topic": will.topic,
            "reason": decision.reason,
        },
    )
    # the pipeline audits its gates' denials itself; gates 1-2 and an expired token are ours
    if broker.audit is not None and (
        decision.gate in (GateName.RESERVED, GateName.SYNTAX)
        or decision.rule in (TOKEN_EXPIRED, TOKEN_NOT_KEPT)
    ):
        identity = session.identity
        broker.audit.decision(
            action="will",
            client=session.client_id,
            tenant=session.tenant,
            user=identity.username if identity is not None else None,
            topic=will.topic,
            outcome="deny",
            gate=decision.gate.value if decision.gate else None,
            rule=decision.rule,
            rc=int(decision.reason_code),
            reason=f"will not published: {decision.reason}",
        )


# -- live credentials ----------------------------------------------------------------------------


def recheck_credentials(broker: RejudgeHost, new: Config, why: str) -> int:
    """After a reload: every live password connection whose entry is gone or whose hash changed
    is ended (MQTT 5 DISCONNECT 0x87 with a Reason String; 3.x: closed); changed roles or
    tenants take effect (a tenant or client id no longer listed ends the connection); every live
    token connection's JWT is verified again under the new ``[tokens]`` (a key removed, a new
    audience or issuer, client-id binding now required: ended). Returns how many ended.
    Runs before the subscriptions are judged again, so those see the new roles."""
    ended = _recheck_tokens(broker, new, why)
    live = [
        c
        for c in broker.connections
        if c.state is ConnState.CONNECTED
        and c.identity is not None
        and c.identity.method == "password"
    ]
    if not live:
        return ended
    # the new configuration's entries as load_config read them (no password file: nobody)
    entries = None if new.passwords.file is None else new.passwords.entries
    ended = 0
    for conn in live:
        identity = conn.identity
        assert identity is not None and identity.username is not None
        admitted = conn.password_entry
        entry = entries.get(identity.username) if entries is not None else None
        reason = None
        if entry is None:
            reason = f"the password entry of user {identity.username!r} was removed ({why})"
        elif admitted is not None and entry.hash != admitted.hash:
            reason = f"the password of user {identity.username!r} was changed ({why})"
        elif entry.tenants and identity.tenant not in entry.tenants:
            reason = (
                f"user {identity.username!r} may no longer use tenant {identity.tenant!r} ({why})"
            )
        elif not entry.allows_client_id(conn.client_id):
            reason = (
                f"user {identity.username!r} may no longer connect as {conn.client_id!r} ({why})"
            )
        if reason is not None:
            _revoke_connection(broker, conn, reason)
            ended += 1
            continue
        assert entry is not None
        conn.password_entry = entry
        if entry.roles != identity.roles:
            changed = replace(identity, roles=entry.roles)
            conn.identity = changed
            if conn.session is not None and conn.session.connection is conn:
                conn.session.identity = changed
    return ended


def _revoke_connection(broker: RejudgeHost, conn: LiveConnection, reason: str) -> None:
    identity = conn.identity
    broker.stats.connections_revoked += 1
    log.info(
        "connection ended: %s",
        reason,
        extra={
            "event": "credentials_revoked",
            "client_id": conn.client_id,
            "tenant": identity.tenant if identity is not None else None,
        },
    )
    if broker.audit is not None:
        broker.audit.event("credentials_revoked", detail=f"{conn.client_id}: {reason}")
    conn.close(ReasonCode.NOT_AUTHORIZED, reason)


def _recheck_tokens(broker: RejudgeHost, new: Config, why: str) -> int:
    """Verify every live token connection's JWT again as a CONNECT under ``new`` would: the
    keys, audience, issuer and client-id binding of the reloaded ``[tokens]``, and grants that
    still name the connection's tenant. Expiry has its own timer (token_expiry.py)."""
    from ..auth.token import TokenError
    from ..auth.token_method import build_verifier

    live = [
        c
        for c in broker.connections
        if c.state is ConnState.CONNECTED
        and c.identity is not None
        and c.identity.method == "token"
        and c.token_credential is not None
    ]
    if not live:
        return 0
    verifier = build_verifier(new.tokens, new.topics.separator)
    ended = 0
    for conn in live:
        identity = conn.identity
        assert identity is not None and conn.token_credential is not None
        reason = None
        try:
            verified = verifier.verify(conn.token_credential, client_id=conn.client_id)
            verified.for_tenant(identity.tenant)
            if new.tokens.require_client_id_binding and verified.client_id is None:
                reason = f"tokens must now be bound to the Client Identifier ({why})"
        except TokenError as exc:
            reason = f"the token no longer verifies ({why}): {exc.reason}"
        if reason is not None:
            _revoke_connection(broker, conn, reason)
            ended += 1
    return ended
