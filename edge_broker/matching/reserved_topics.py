"""The one definition of the topics clients may not use freely (AUTHZ.md §2 gate 2).

Two families, whatever the configured separator:

- **``$SYS``**: the broker's own status topics. No client publishes there (nor as a will). The
  broker writes them with the configured separator (``$SYS/broker/…`` or ``$SYS.broker.…``);
  both spellings, and ``$SYS`` alone, are reserved, because a client on a ``.`` broker that
  publishes ``$SYS/broker/x`` would otherwise plant a retained value a monitoring tool reads.
- **SMOKER system topics**: ``access/claim``, ``access/unclaim`` and ``access/claims/…``.
  SMOKER.md names these exact bytes; a SMOKER client publishes them whatever the broker's
  separator, so they are what the claim service answers (:meth:`ReservedTopics.claim_service`).
  With the ``.`` separator the same names spelled with ``.`` (``access.claim``, …) are reserved
  too, so neither spelling can ever be published by a non-SMOKER client, subscribed to, or
  routed. (Issue 15 item 9: a copy of this rule that only knew the separator spelling let
  clients publish and retain ``access/claim`` on a ``.`` broker.)

Every check of these families (the policy's gate 2, routing, the claim service's SUBSCRIBE
answer, ``explain``) goes through this module; nothing else spells these topics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SYS_ROOT = "$SYS"
CLAIM_TOPIC = "access/claim"
UNCLAIM_TOPIC = "access/unclaim"
CLAIMS_REQUEST_PREFIX = "access/claims/"
_SMOKER_ROOT = "access"  # first level of every SMOKER system topic (cheap pre-check on routing)
RESTRICTED_PREFIX = "restricted/"  # SMOKER.md's owner-only area (the claims gate decides it)

# What :meth:`ReservedTopics.classify` answers: a published message carries it, computed once
# (``authz.request.Publication.reservation``), for the policy's gate 2 and for routing.
NOT_RESERVED, SYS, SMOKER_SYSTEM = range(3)


def is_restricted(topic: str) -> bool:
    """True for every topic in the restricted area, valid owner or not."""
    return topic.startswith(RESTRICTED_PREFIX)


def is_claim_service_topic(topic: str) -> bool:
    """``access/claim``, ``access/unclaim`` or ``access/claims/…`` exactly as SMOKER.md spells
    them: the topics the claim service answers (any separator)."""
    return topic in (CLAIM_TOPIC, UNCLAIM_TOPIC) or topic.startswith(CLAIMS_REQUEST_PREFIX)


def _spelled(topic: str, separator: str) -> str:
    return topic.replace("/", separator)


@dataclass(frozen=True, slots=True)
class ReservedTopics:
    """The reserved topics of a broker whose topic levels are split by ``separator``."""

    separator: str = "/"
    _sys_prefixes: tuple[str, ...] = field(init=False, repr=False)
    _exact: frozenset[str] = field(init=False, repr=False)
    _prefixes: tuple[str, ...] = field(init=False, repr=False)
    _claim_topics: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sep = self.separator
        object.__setattr__(self, "_sys_prefixes", tuple(sorted({SYS_ROOT + "/", SYS_ROOT + sep})))
        exact = {
            CLAIM_TOPIC,
            UNCLAIM_TOPIC,
            _spelled(CLAIM_TOPIC, sep),
            _spelled(UNCLAIM_TOPIC, sep),
        }
        object.__setattr__(self, "_exact", frozenset(exact))
        prefixes = {CLAIMS_REQUEST_PREFIX, _spelled(CLAIMS_REQUEST_PREFIX, sep)}
        object.__setattr__(self, "_prefixes", tuple(sorted(prefixes)))
        object.__setattr__(self, "_claim_topics", frozenset((CLAIM_TOPIC, UNCLAIM_TOPIC)))

    def is_sys(self, topic: str) -> bool:
        """``$SYS`` itself or below it, in either spelling."""
        return topic == SYS_ROOT or topic.startswith(self._sys_prefixes)

    def is_smoker_system(self, topic: str) -> bool:
        """A SMOKER system topic (or filter naming one exactly), in either spelling."""
        if not topic.startswith(_SMOKER_ROOT):
            return False
        return topic in self._exact or topic.startswith(self._prefixes)

    def claim_service(self, topic: str) -> bool:
        """A topic the claim service answers (SMOKER.md's own spelling)."""
        return topic.startswith(_SMOKER_ROOT) and is_claim_service_topic(topic)

    def smoker_may_publish(self, topic: str) -> bool:
        """``access/claim`` and ``access/unclaim``: what gate 2 lets a SMOKER client publish
        (the claim service then answers; ``access/claims/<ID>/request`` goes there directly)."""
        return topic in self._claim_topics

    def routable(self, topic: str) -> bool:
        """SMOKER system topics are never routed to subscribers, in either spelling (``$SYS``
        is: the broker publishes its own status there)."""
        return not self.is_smoker_system(topic)

    def classify(self, topic: str) -> int:
        """:data:`SYS`, :data:`SMOKER_SYSTEM` or :data:`NOT_RESERVED`: the one test gate 2 and
        routing share, run once per published message (issue 21)."""
        if topic.startswith(_SMOKER_ROOT):
            if topic in self._exact or topic.startswith(self._prefixes):
                return SMOKER_SYSTEM
            return NOT_RESERVED
        if topic == SYS_ROOT or topic.startswith(self._sys_prefixes):
            return SYS
        return NOT_RESERVED

    def reserved(self, topic: str) -> bool:
        """No client publishes here (except SMOKER clients to the claim service topics)."""
        return self.is_sys(topic) or self.is_smoker_system(topic)
