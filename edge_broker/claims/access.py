"""Who may publish or subscribe in the restricted area (SMOKER.md "Access decision").

``decide`` is called at PUBLISH, at an exact SUBSCRIBE and at every delivery of a message on a
restricted topic (activity SUBSCRIBE for the receiver), with the claims as they are at that
moment, so that an update or unclaim applies from the next message on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..authz.decision import Decision, GateName, deny
from ..mqtt.reason_codes import ReasonCode
from .model import Activity, Claim
from .topics import is_restricted, owner_segment


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A stored claim that failed re-verification (signature, or owner not in its topic).

    Its topic answers 0x83 until the owner claims it again or unclaims it (SMOKER.md "Claim
    store").
    """

    topic_name: str
    reason: str


ClaimRecord = Claim | Quarantined
ClaimsLookup = Callable[[str], ClaimRecord | None]


@dataclass(frozen=True, slots=True)
class AccessResult:
    """``allowed``, the reason code for a denial (0x87, or 0x83 for a compromised claim), why."""

    allowed: bool
    reason_code: ReasonCode
    reason: str

    def decision(self) -> Decision:
        """The same answer as an authorization pipeline ``Decision`` of gate 6 (AUTHZ.md §2)."""
        if self.allowed:
            return Decision(True, GateName.CLAIMS, None, ReasonCode.SUCCESS, self.reason)
        return deny(GateName.CLAIMS, None, self.reason, self.reason_code)


OUTSIDE = AccessResult(True, ReasonCode.SUCCESS, "not in the restricted area")
OWNER = AccessResult(True, ReasonCode.SUCCESS, "the owner has full access to its own area")
NOT_SMOKER = AccessResult(
    False, ReasonCode.NOT_AUTHORIZED, "only SMOKER-authenticated clients may use restricted/…"
)
UNCLAIMED = AccessResult(
    False, ReasonCode.NOT_AUTHORIZED, "nobody but the owner may use an unclaimed restricted topic"
)


def decide(
    client_smoker_id: str | None, topic: str, activity: Activity, claims_lookup: ClaimsLookup
) -> AccessResult:
    """SMOKER.md steps 1–5 for a concrete ``topic``; ``activity`` is PUBLISH or SUBSCRIBE.

    Topics outside ``restricted/`` are allowed: this gate does not apply to them.
    """
    if not is_restricted(topic):
        return OUTSIDE
    if client_smoker_id is None:
        return NOT_SMOKER
    if owner_segment(topic) == client_smoker_id:
        return OWNER
    record = claims_lookup(topic)
    if record is None:
        return UNCLAIMED
    if isinstance(record, Quarantined):
        return AccessResult(
            False,
            ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
            f"the claim on this topic is compromised ({record.reason})",
        )
    if record.restriction.allows(client_smoker_id, activity):
        return AccessResult(
            True, ReasonCode.SUCCESS, f"allowed by the {record.restriction.restriction_type} claim"
        )
    return AccessResult(
        False,
        ReasonCode.NOT_AUTHORIZED,
        f"denied by the {record.restriction.restriction_type} claim for {activity}",
    )
