"""Applying a new policy at run time (AUTHZ.md §2 "Policies change at run time"; issue 4 reload).

``apply_config`` is the one path every policy change takes: SIGHUP and ``edge-broker reload``
(a new config file), and signed bundles from the cloud (``edge_broker.sync``). It never fails
open: the new configuration was validated by :func:`~edge_broker.config.load_config`, and here
everything is compiled (authorizers instantiated, permission sets, gates) before anything is
swapped; a failure keeps the old policy and says why. After the swap the generation moves,
authentication chains are rebuilt on the next CONNECT (new password file, token keys), and
every existing subscription — online and offline sessions — is checked again: those the new
policy denies are removed (logged, counted, audited), those it allows take the new policy's
``recheck`` marking.

Listeners cannot change without a restart; a reload that changes them applies everything else
and logs that the listener changes wait for a restart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..authz.decision import Decision
from ..matching.errors import RuleError
from ..mqtt.packets import Subscription
from .pattern_subscriptions import subscription_pattern
from .session import Session, SubscriptionEntry

if TYPE_CHECKING:
    from ..config import Config
    from .server import Broker

log = logging.getLogger("edge_broker.broker")


@dataclass(frozen=True, slots=True)
class ReloadResult:
    ok: bool
    message: str
    subscriptions_checked: int = 0
    subscriptions_removed: int = 0


async def apply_config(broker: Broker, new: Config, source: str) -> ReloadResult:
    """Compile ``new``'s policy, swap it in, re-check subscriptions (module docstring)."""
    old = broker.config
    if new.listeners != old.listeners:
        log.warning("%s: listener changes take effect after a restart; applying the rest", source,
                    extra={"event": "reload_listeners_kept"})
        new = replace(new, listeners=old.listeners)
    if new.topics.separator != old.topics.separator:
        message = f"{source}: topics.separator cannot change at run time; restart the broker to change it"
        log.error(message, extra={"event": "reload_refused"})
        _audit(broker, "policy_rejected", message)
        return ReloadResult(False, message)
    try:
        policy = broker.build_policy(new)
    except Exception as exc:  # a plugin's constructor, a key file gone since validation, ...
        message = f"{source}: the new policy cannot be compiled ({exc}); the running policy is kept"
        log.error(message, extra={"event": "reload_refused"})
        _audit(broker, "policy_rejected", message)
        return ReloadResult(False, message)
    old_pipeline = broker.policy.pipeline
    if old_pipeline is not None and policy.pipeline is not None:
        # per-rule counters are monotonic across policy changes (Prometheus counters)
        policy.pipeline.hits, policy.pipeline.denials = old_pipeline.hits, old_pipeline.denials
    broker.config = new
    broker.policy = policy
    broker.reset_authentication()
    broker.generation += 1
    checked, removed = await recheck_subscriptions(broker, source)
    message = (f"{source}: policy applied (generation {broker.generation}); "
               f"{checked} subscription(s) checked, {removed} removed")
    log.info(message, extra={"event": "policy_applied", "generation": broker.generation,
                             "subscriptions_removed": removed})
    _audit(broker, "policy_applied", message)
    return ReloadResult(True, message, checked, removed)


def _audit(broker: Broker, event: str, detail: str) -> None:
    if broker.audit is not None:
        broker.audit.event(event, detail=detail)


async def recheck_subscriptions(broker: Broker, why: str) -> tuple[int, int]:
    """Check every subscription of every session against ``broker.policy``; remove the denied."""
    checked = removed = 0
    for session in list(broker.sessions):
        identity = session.identity
        if identity is None or (identity.method == "token" and identity.grants is None):
            continue  # a restored token session: its grants are judged when the token comes back
        for topic_filter, entry in list(session.subscriptions.items()):
            checked += 1
            subscription = Subscription(topic_filter, entry.qos, entry.no_local,
                                        entry.retain_as_published, entry.retain_handling)
            user_properties = (("queryable", "true"),) if entry.queryable else ()
            verdict = broker.policy.check_subscribe(identity, subscription, user_properties)
            decision = verdict if isinstance(verdict, Decision) else await verdict
            if session.subscriptions.get(topic_filter) is not entry:
                continue  # changed by the client while an authorizer answered
            if decision.denied:
                remove_subscription(broker, session, topic_filter, why, decision)
                removed += 1
            elif decision.recheck != entry.recheck:
                _replace(broker, session, replace(entry, recheck=decision.recheck), topic_filter)
    return checked, removed


def _split(broker: Broker, session: Session, topic_filter: str) -> tuple[str, object]:
    identity = session.identity
    patterns = identity is not None and identity.subscription_patterns
    try:
        _, inner, pattern = subscription_pattern(topic_filter, broker.separator, patterns)
    except RuleError:
        return topic_filter, None
    return inner, pattern


def remove_subscription(broker: Broker, session: Session, topic_filter: str, why: str,
                        decision: Decision) -> None:
    """Remove a subscription a policy change no longer allows: unrouted, logged, counted and
    audited. Every such removal (reload, bundle, re-authentication, resumed session) goes here."""
    entry = session.subscriptions.pop(topic_filter, None)
    if entry is None:
        return
    session.journal.changed()
    broker.topic_space(session.tenant).unsubscribe(entry, entry.routed_filter(broker.separator))
    broker.stats.subscriptions_removed += 1
    identity = session.identity
    log.info("subscription removed after %s", why,
             extra={"event": "subscription_removed", "client_id": session.client_id,
                    "tenant": session.tenant, "topic_filter": topic_filter,
                    "reason": decision.reason})
    if broker.audit is not None:
        broker.audit.decision(
            action="subscribe", client=session.client_id, tenant=session.tenant,
            user=identity.username if identity is not None else None, topic=topic_filter,
            outcome="deny", gate=decision.gate.value if decision.gate else None, rule=decision.rule,
            rc=int(decision.reason_code), reason=f"removed after {why}: {decision.reason}",
        )


def _replace(broker: Broker, session: Session, entry: SubscriptionEntry, topic_filter: str) -> None:
    inner, pattern = _split(broker, session, topic_filter)
    session.subscriptions[topic_filter] = entry
    session.journal.changed()
    broker.topic_space(session.tenant).subscribe(entry, inner, pattern)  # type: ignore[arg-type]
