"""The answer to a claim or unclaim, as one pure function each (SMOKER.md PUBACK table).

The checks run in the table's order and the first failure answers. A ``0x00`` outcome means
"store this": the caller writes it (and answers 0x80 instead if the store cannot make it
durable). QoS 0 claims are not processed (``reason_code is None``): nothing can be answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError, shown
from .model import Claim
from .parse import parse_claim
from .pool import claim_charge
from .signature import verify_claim
from .topics import validate_claim_topic


class Publisher(Protocol):
    """What the claim checks need of an ``identity.Identity``."""

    @property
    def client_id(self) -> str: ...

    @property
    def smoker_id(self) -> str | None: ...


class ClaimThrottle(Protocol):
    """Flood limits: ``None`` to admit (and spend the tokens), else why it is 0x97."""

    def admit(
        self, owner: str, topic: str, size: int, now: float, charge: int = 0
    ) -> str | None: ...  # ``charge``: what the claim takes of the byte pool (claims/pool.py)


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    """``reason_code`` for the PUBACK/PUBREC (``None``: QoS 0, not processed) and a Reason String.

    ``claim`` is set exactly when ``reason_code`` is 0x00: the verified claim to store.
    """

    reason_code: ReasonCode | None
    reason_string: str | None
    claim: Claim | None = None

    @property
    def accepted(self) -> bool:
        return self.reason_code is ReasonCode.SUCCESS


@dataclass(frozen=True, slots=True)
class UnclaimOutcome:
    """Like ``ClaimOutcome``; ``topic`` is set exactly when the claim on it is to be removed."""

    reason_code: ReasonCode | None
    reason_string: str | None
    topic: str | None = None

    @property
    def accepted(self) -> bool:
        return self.reason_code is ReasonCode.SUCCESS


NOT_SMOKER = "only SMOKER-authenticated clients may publish to the SMOKER access topics"
QOS_0 = "a claim needs QoS 1 or 2: at QoS 0 nothing can be answered, so it is not processed"


def evaluate_claim(
    publisher: Publisher, qos: int, payload: bytes, throttle: ClaimThrottle, now: float
) -> ClaimOutcome:
    """SMOKER.md "What the broker answers to a claim", rows in order."""
    if publisher.smoker_id is None:
        return ClaimOutcome(ReasonCode.NOT_AUTHORIZED, NOT_SMOKER)
    if qos == 0:
        return ClaimOutcome(None, QOS_0)
    try:
        claim = parse_claim(payload)
        verify_claim(claim)
    except ClaimError as exc:
        return ClaimOutcome(exc.reason_code, exc.message)
    if claim.owner != publisher.smoker_id:
        return ClaimOutcome(
            ReasonCode.NOT_AUTHORIZED,
            f"topic {shown(claim.topic_name)} belongs to {claim.owner}; a client may only claim "
            f"topics under restricted/{publisher.smoker_id}/",
        )
    refusal = throttle.admit(claim.owner, claim.topic_name, len(payload), now, claim_charge(claim))
    if refusal is not None:
        return ClaimOutcome(ReasonCode.QUOTA_EXCEEDED, refusal)
    return ClaimOutcome(ReasonCode.SUCCESS, None, claim)


def evaluate_unclaim(publisher: Publisher, qos: int, payload: bytes) -> UnclaimOutcome:
    """SMOKER.md "Unclaim": not SMOKER 0x87, QoS 0 ignored, malformed 0x99, not owner 0x87."""
    if publisher.smoker_id is None:
        return UnclaimOutcome(ReasonCode.NOT_AUTHORIZED, NOT_SMOKER)
    if qos == 0:
        return UnclaimOutcome(None, QOS_0.replace("a claim", "an unclaim"))
    if not payload:
        return UnclaimOutcome(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            "the unclaim payload is empty; send the full restricted/<ID>/… topic as UTF-8",
        )
    try:
        topic = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        return UnclaimOutcome(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"the unclaim payload is not UTF-8 ({exc.reason} at byte {exc.start})",
        )
    try:
        owner = validate_claim_topic(topic)
    except ClaimError as exc:
        return UnclaimOutcome(exc.reason_code, f"unclaim: {exc.message}")
    if owner != publisher.smoker_id:
        return UnclaimOutcome(
            ReasonCode.NOT_AUTHORIZED,
            f"topic {shown(topic)} belongs to {owner}; only its owner may unclaim it",
        )
    return UnclaimOutcome(ReasonCode.SUCCESS, None, topic)
