"""The judging half of judging a session again (docs/sessions-and-authorization.md "What is
judged again, and when"): what the policy in force now says of a session's subscriptions, of
what is queued or in flight for it, and of its will. The broker (``broker/rejudge.py``) acts on
the answers: it unroutes, logs, counts, audits and drops.

Nothing here imports the broker: a session's subscriptions are any mapping of the filter as
written to an entry with the MQTT 5 subscription options and the two marks the policy keeps
(:class:`JudgedSubscription`, the broker's ``SubscriptionEntry``), and the recipient of a
delivery anything with the identity connected now (:class:`~edge_broker.authz.policy.Recipient`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ..identity import Identity
from ..matching.errors import RuleError
from ..matching.subscription_patterns import SubscriptionPattern, subscription_pattern
from ..matching.subscription_trie import SubscriptionTrie
from ..mqtt.reason_codes import ReasonCode
from .decision import Decision, GateName, deny
from .policy import DeliveryRoute, MaybeDecision, Policy, Recipient, SubscriptionOptions
from .request import Publication, SubscribeFilter

TOKEN_EXPIRED = "token-expired"  # the rule id of a will refused because its token expired
TOKEN_NOT_KEPT = "token-not-kept"  # ... because its grants were not kept across a restart


class JudgedSubscription(SubscriptionOptions, DeliveryRoute, Protocol):
    """One subscription of a session as the policy judges it again: its options, the route
    its deliveries take, and the marks the policy keeps on it."""

    @property
    def queryable(self) -> bool: ...

    @property
    def egress(self) -> bool: ...


E = TypeVar("E", bound=JudgedSubscription)


@dataclass(frozen=True, slots=True)
class Verdict(Generic[E]):
    """What the policy in force says of one subscription that must change."""

    topic_filter: str
    entry: E  # as it was judged (a client change meanwhile wins)
    decision: Decision
    egress: bool = True  # Policy.delivers_need_check now (SubscriptionEntry.egress)


def judged_later(identity: Identity | None) -> bool:
    """A session restored from disk for a token client has no grants until the client presents
    its token again; its grants are applied then (the resumed-session path) and its will cannot
    be judged before (the other gates judge it meanwhile: ``broker.rejudge.rejudge_session``)."""
    return identity is None or (identity.method == "token" and identity.grants is None)


async def subscription_verdicts(
    policy: Policy, separator: str, identity: Identity, subscriptions: Mapping[str, E]
) -> tuple[int, list[Verdict[E]]]:
    """(subscriptions checked, verdicts that change something) for ``subscriptions`` (filter
    as written → entry) as ``identity`` under ``policy``. Without asynchronous authorizers
    nothing here suspends, so a caller that awaits this and then applies it sees no delivery in
    between."""
    if policy.pipeline is None:
        # gates 1-2 only: syntax and reserved topics cannot change while the broker runs, and
        # without gates 3-6 nothing is checked per delivery (a stale mark costs nothing)
        return len(subscriptions), []
    verdicts: list[Verdict[E]] = []
    checked = 0
    for topic_filter, entry in list(subscriptions.items()):
        checked += 1
        subscription = SubscribeFilter(
            topic_filter,
            entry.qos,
            entry.no_local,
            entry.retain_as_published,
            entry.retain_handling,
        )
        user_properties = (("queryable", "true"),) if entry.queryable else ()
        verdict = policy.check_subscribe(identity, subscription, user_properties)
        decision = verdict if isinstance(verdict, Decision) else await verdict
        # whether gates 5-6 can deny its deliveries changes with the policy and the identity
        egress = egress_check(policy, separator, identity, topic_filter)
        if decision.denied or decision.recheck != entry.recheck or egress != entry.egress:
            verdicts.append(Verdict(topic_filter, entry, decision, egress))
    return checked, verdicts


def egress_check(policy: Policy, separator: str, identity: Identity, topic_filter: str) -> bool:
    """``SubscriptionEntry.egress`` for ``topic_filter`` as ``identity`` under ``policy`` (True
    for a filter that cannot be parsed: it is checked, never skipped)."""
    try:
        _, inner, _ = subscription_pattern(topic_filter, separator, identity.subscription_patterns)
    except RuleError:
        return True
    return policy.delivers_need_check(identity, inner)


# -- queued and in-flight messages -----------------------------------------------------------


class SessionFilters(Generic[E]):
    """A session's subscriptions, parsed and indexed once per purge: MQTT filters in a
    :class:`SubscriptionTrie` (a queue of Q messages costs Q trie lookups, not Q x S filter
    comparisons), runtime patterns checked one by one (rare)."""

    __slots__ = ("separator", "trie", "patterns")

    def __init__(
        self, separator: str, subscriptions: Mapping[str, E], identity: Identity | None
    ) -> None:
        self.separator = separator
        self.trie: SubscriptionTrie[str, E] = SubscriptionTrie(separator)
        self.patterns: list[tuple[E, SubscriptionPattern]] = []
        allowed = identity is not None and identity.subscription_patterns
        for topic_filter, entry in subscriptions.items():
            try:
                _, inner, pattern = subscription_pattern(topic_filter, separator, allowed)
            except RuleError:
                continue
            if pattern is None:
                self.trie.add(inner, topic_filter, entry)
            else:
                self.patterns.append((entry, pattern))

    def matching(self, topic: str) -> list[E]:
        found = [entry for hits in self.trie.match(topic) for entry in hits.values()]
        if self.patterns and topic[:1] != "$":
            found += [entry for entry, pattern in self.patterns if pattern.matches(topic)]
        return found


def delivery_right(
    policy: Policy, recipient: Recipient, message: Publication, filters: SessionFilters[E]
) -> Decision:
    """May ``recipient`` receive ``message`` now: through a subscription it still holds
    (``filters``), and past the delivery gates of ``policy`` (``Policy.check_deliver``, which
    counts and audits its own denials)."""
    matching = filters.matching(message.topic)
    if not matching:
        return Decision(
            False,
            None,
            None,
            ReasonCode.NOT_AUTHORIZED,
            "no subscription of the session admits this topic any more",
        )
    # as live routing does (delivery.py _deliver_merged): an unmarked subscription admits the
    # topic already; when all are marked, the widest one is checked per topic
    through = None if any(not e.recheck for e in matching) else max(matching, key=lambda e: e.qos)
    return policy.check_deliver(recipient, message, through)


# -- wills ------------------------------------------------------------------------------------


def will_verdict(
    policy: Policy, identity: Identity, will: Publication, token_expired: bool
) -> MaybeDecision:
    """A will at the moment it is published (MQTT 5 §3.1.2.5; a delayed will at the end of its
    delay): the policy and claims in force then, for the session's identity then. A will whose
    client's token has expired by then (``token_expired``) is not published, nor the will of a
    token client whose grants died with a restart (nothing can judge it: fail closed)."""
    if judged_later(identity):
        return deny(
            GateName.TOKEN,
            TOKEN_NOT_KEPT,
            "the token grants of the will's client were not "
            "kept across the restart; its will cannot be judged",
        )
    if token_expired:
        return deny(GateName.TOKEN, TOKEN_EXPIRED, "the token of the will's client has expired")
    return policy.check_will(identity, will)
