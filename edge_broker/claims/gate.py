"""Gate 6 of the authorization pipeline: SMOKER claims (AUTHZ.md §2; SMOKER.md "Access decision").

- PUBLISH (and the will, at CONNECT) to a concrete ``restricted/…`` topic: the access decision
  with activity PUBLISH; 0x87, or 0x83 when the claim is compromised.
- An exact SUBSCRIBE to a restricted topic is decided now (activity SUBSCRIBE). Every accepted
  subscription whose filter reaches into the restricted area (``#``, ``+/X/t``,
  ``restricted/+/t``, and the exact ones too) is marked ``recheck``: each delivery through it is
  decided again on the concrete topic with the claims as they are at delivery time (retained
  messages and shared subscriptions included). Claim updates and unclaims therefore never remove a
  subscription; they take effect at the next message.
- Nobody subscribes to the SMOKER system topics (0x87).

The gate answers ``None`` where it does not apply (topics and filters that cannot touch the
restricted area). Claims are per tenant: decisions use ``Identity.tenant``.
"""

from __future__ import annotations

from ..authz.decision import Decision, GateName, deny
from ..authz.request import Publication, SubscribeFilter
from ..identity import Identity
from ..matching.decision_cache import DEFAULT_MAX_BYTES, DecisionCache
from ..matching.mqtt_topics import filters_overlap
from ..matching.subscription_patterns import is_runtime_pattern
from .errors import shown
from .model import Activity
from .service import ClaimService
from .topics import RESTRICTED_PREFIX, is_restricted, is_smoker_system_topic

RESTRICTED_AREA = RESTRICTED_PREFIX + "+/#"  # every topic is_restricted() accepts
_RULE = "smoker"


def reaches_restricted(topic_filter: str) -> bool:
    """Can a message on a restricted topic match ``topic_filter`` (without ``$share/…``)?

    Conservative: a filter holding ``*`` or ``>`` or a prefix ``#`` (the runtime subscription
    patterns of PATTERNS.md §2, e.g. ``>``, ``r*/#``, ``r#``) is treated as reaching the area, so
    its deliveries are checked one by one; a check too many costs a lookup, one too few would
    leak (issue 21: only these subscriptions' deliveries are checked at all).
    """
    if is_runtime_pattern(topic_filter):
        return True
    return is_restricted(topic_filter) or filters_overlap(topic_filter, RESTRICTED_AREA)


class ClaimsGate:
    """The ``PolicyGate`` of SMOKER claims over one :class:`ClaimService` (module docstring)."""

    __slots__ = ("service", "_cache", "_seen")

    # A delivery gate: the broker asks delivers_need_check per subscription (at SUBSCRIBE and on
    # every re-judgement, restored sessions included) and calls check_deliver for the deliveries
    # of those that reach ``restricted/``; queued messages drained later are all checked.
    checks_every_delivery = True

    def __init__(
        self,
        service: ClaimService,
        cache_entries: int = 16384,
        cache_bytes: int = DEFAULT_MAX_BYTES,  # [limits] decision_cache_bytes
    ) -> None:
        self.service = service
        # (tenant, SMOKER id, topic, activity) -> Decision, valid while the claims are unchanged
        self._cache: DecisionCache[tuple[str, str | None, str, Activity], Decision] = DecisionCache(
            cache_entries, cache_bytes
        )
        self._seen = service.generation

    @property
    def gate(self) -> GateName:
        return GateName.CLAIMS

    def _decide(self, identity: Identity, topic: str, activity: Activity) -> Decision:
        """``topic`` is in the restricted area (the caller read the message's fact)."""
        service = self.service
        if service.generation != self._seen:  # a claim, update or unclaim: decide afresh
            self._seen = service.generation
            self._cache.bump()
        key = (identity.tenant, identity.smoker_id, topic, activity)
        decision = self._cache.get(key)
        if decision is None:
            decision = service.decide(identity, topic, activity).decision()
            self._cache.put(key, decision)
        return decision

    def check_publish(self, identity: Identity, message: Publication) -> Decision | None:
        if not message.restricted:  # computed once per message (authz/request.py)
            return None
        return self._decide(identity, message.topic, Activity.PUBLISH)

    def check_will(self, identity: Identity, will: Publication) -> Decision | None:
        if not will.restricted:
            return None
        return self._decide(identity, will.topic, Activity.PUBLISH)

    def check_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        share_group: str | None,
    ) -> Decision | None:
        if is_smoker_system_topic(topic_filter):
            return deny(
                GateName.CLAIMS,
                _RULE,
                f"{shown(topic_filter)} is a SMOKER system topic: no one subscribes",
            )
        if not reaches_restricted(topic_filter):
            return None
        if not any(c in topic_filter for c in "+#*>"):
            # reaches_restricted without a wildcard: the filter is a restricted topic
            decision = self._decide(identity, topic_filter, Activity.SUBSCRIBE)
            if decision.denied:
                return decision
            return Decision(
                True, GateName.CLAIMS, None, decision.reason_code, decision.reason, recheck=True
            )
        return Decision(
            True,
            GateName.CLAIMS,
            None,
            reason="reaches into restricted/: every delivery is checked",
            recheck=True,
        )

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        return reaches_restricted(topic_filter)

    def check_deliver(self, identity: Identity, message: Publication) -> Decision | None:
        if not message.restricted:
            return None
        return self._decide(identity, message.topic, Activity.SUBSCRIBE)
