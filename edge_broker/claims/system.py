"""What the broker calls: SMOKER's system topics, SUBSCRIBE and delivery checks (SMOKER.md).

- ``handle_system_publish``: a PUBLISH to ``access/claim``, ``access/unclaim`` or
  ``access/claims/…`` → the PUBACK/PUBREC reason code, a Reason String, and for a claims request
  the answer to send to the publisher (if it is subscribed to exactly that topic). Nothing
  published there is ever routed.
- ``subscribe_decision``: an exact (wildcard-free) filter in the restricted area is decided at
  SUBSCRIBE time (0x87, or 0x83 for a compromised claim); a wildcard filter is accepted and its
  deliveries are checked one by one. Nobody may subscribe to the system topics.
- ``delivery_allowed``: every delivery of a message on a restricted topic (wildcard, shared and
  retained included), with activity SUBSCRIBE, against the claims as they are now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..identity import Identity
from ..mqtt.reason_codes import ReasonCode
from .access import AccessResult
from .errors import shown
from .model import Activity
from .service import ClaimService
from .topics import (
    CLAIM_TOPIC,
    CLAIMS_REQUEST_PREFIX,
    UNCLAIM_TOPIC,
    is_restricted,
    is_smoker_system_topic,
)

_SHARE_PREFIX = "$share/"


@dataclass(frozen=True, slots=True)
class SystemPublishOutcome:
    """``reason_code`` ``None``: a QoS 0 claim/unclaim, not processed (nothing to answer).

    ``response`` is ``(topic, payload)`` to publish to the requester at QoS 1, for a claims
    information request, when the requester is subscribed to exactly ``topic``.
    """

    reason_code: ReasonCode | None
    reason_string: str | None
    response: tuple[str, bytes] | None = None
    limit: str | None = None  # the config key of a bound that refused it (counted, logged)


async def handle_system_publish(
    service: ClaimService,
    identity: Identity,
    topic: str,
    qos: int,
    payload: bytes,
    response_topic: str | None = None,
    may_receive: Callable[[str], bool] | None = None,
) -> SystemPublishOutcome:
    """Dispatch a PUBLISH to one of SMOKER's system topics; ``ValueError`` for any other topic.

    ``may_receive(topic)``: would the publisher receive a message on ``topic`` (is it
    subscribed to exactly it)? A claims request is answered only then, and built only then."""
    if topic == CLAIM_TOPIC:
        claimed = await service.claim(identity, qos, payload)
        return SystemPublishOutcome(claimed.reason_code, claimed.reason_string)
    if topic == UNCLAIM_TOPIC:
        unclaimed = await service.unclaim(identity, qos, payload)
        return SystemPublishOutcome(unclaimed.reason_code, unclaimed.reason_string)
    if topic.startswith(CLAIMS_REQUEST_PREFIX):
        outcome, answer = service.claims_request(
            identity, topic, response_topic, payload, may_receive
        )
        response = None
        if answer is not None and outcome.response_topic is not None:
            response = (outcome.response_topic, answer)
        return SystemPublishOutcome(
            outcome.reason_code, outcome.reason_string, response, outcome.limit
        )
    raise ValueError(f"{shown(topic)} is not a SMOKER system topic")


def _inner_filter(topic_filter: str) -> str:
    """``$share/<group>/<filter>`` → ``<filter>``; anything else unchanged."""
    if topic_filter.startswith(_SHARE_PREFIX):
        group_end = topic_filter.find("/", len(_SHARE_PREFIX))
        if group_end >= 0:
            return topic_filter[group_end + 1 :]
    return topic_filter


def subscribe_decision(
    service: ClaimService, identity: Identity, topic_filter: str
) -> AccessResult | None:
    """The SUBACK answer for one filter, or ``None`` when the claims do not decide it now."""
    inner = _inner_filter(topic_filter)
    if is_smoker_system_topic(inner):
        return AccessResult(
            False,
            ReasonCode.NOT_AUTHORIZED,
            f"{shown(inner)} is a SMOKER system topic: no one subscribes",
        )
    if "+" in inner or "#" in inner or not is_restricted(inner):
        return None
    return service.decide(identity, inner, Activity.SUBSCRIBE)


def delivery_allowed(service: ClaimService, identity: Identity, topic: str) -> bool:
    """May a message on ``topic`` be delivered to ``identity`` now?"""
    return not is_restricted(topic) or service.decide(identity, topic, Activity.SUBSCRIBE).allowed


def publish_decision(service: ClaimService, identity: Identity, topic: str) -> AccessResult:
    """Gate 6 at PUBLISH on a concrete topic (allowed outside the restricted area)."""
    return service.decide(identity, topic, Activity.PUBLISH)
