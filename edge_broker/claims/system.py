"""What the broker calls for SMOKER's system topics (SMOKER.md "System topics").

``handle_system_publish``: a PUBLISH to ``access/claim``, ``access/unclaim`` or
``access/claims/…`` → the PUBACK/PUBREC reason code, a Reason String, and for a claims request
the answer to send to the publisher (if it is subscribed to exactly that topic). Nothing
published there is ever routed. SUBSCRIBE and delivery decisions are the claims gate's
(``claims/gate.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..identity import Identity
from ..mqtt.reason_codes import ReasonCode
from .errors import shown
from .service import ClaimService
from .topics import (
    CLAIM_TOPIC,
    CLAIMS_REQUEST_PREFIX,
    UNCLAIM_TOPIC,
)


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
