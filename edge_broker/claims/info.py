"""The claim information request (SMOKER.md "Optional: claim information request").

A client publishes to ``access/claims/<its ID>/request`` with Response Topic
``restricted/<its ID>/claims``; when it is subscribed to exactly that topic, the broker answers
there at QoS 1 with ``{"clientId", "ownedClaims", "involvedClaims"}``. Owned claims are the
client's own; involved claims are other owners' claims whose permissions name the client or
``*`` (as the reference broker does). A wrong Response Topic is 0x90 Topic Name invalid (the
reference broker's answer; SMOKER.md's "0x91 (Topic Name invalid)" names 0x90's meaning), a
missing one 0x83.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from ..mqtt.reason_codes import ReasonCode
from .model import ANY_CLIENT, Claim
from .topics import CLAIMS_REQUEST_PREFIX, claims_request_topic, claims_response_topic


@dataclass(frozen=True, slots=True)
class InfoRequestOutcome:
    """``reason_code`` for the request's PUBACK; ``response_topic`` set when the answer is due."""

    reason_code: ReasonCode
    reason_string: str | None
    response_topic: str | None = None


def check_claims_request(
    smoker_id: str | None, topic: str, response_topic: str | None
) -> InfoRequestOutcome:
    """Decide a PUBLISH to ``access/claims/…``: who may ask, and where the answer goes."""
    if smoker_id is None:
        return InfoRequestOutcome(
            ReasonCode.NOT_AUTHORIZED, "only SMOKER-authenticated clients may request claims"
        )
    if topic != claims_request_topic(smoker_id):
        shown = topic if len(topic) < 120 else topic[:120] + "…"
        return InfoRequestOutcome(
            ReasonCode.NOT_AUTHORIZED,
            f"{shown!r} is not your claims request topic; publish to "
            f"{CLAIMS_REQUEST_PREFIX}{smoker_id}/request",
        )
    if response_topic is None:
        return InfoRequestOutcome(
            ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
            f"no Response Topic: set it to {claims_response_topic(smoker_id)}",
        )
    expected = claims_response_topic(smoker_id)
    if response_topic != expected:
        return InfoRequestOutcome(
            ReasonCode.TOPIC_NAME_INVALID,
            f"the Response Topic must be {expected}, not {response_topic[:120]!r}",
        )
    return InfoRequestOutcome(ReasonCode.SUCCESS, None, expected)


def is_involved(claim: Claim, client_id: str) -> bool:
    """``claim`` belongs to someone else and one of its permissions names ``client_id`` or ``*``."""
    return claim.owner != client_id and any(
        p.client_id == client_id or p.client_id == ANY_CLIENT for p in claim.restriction.permissions
    )


def claims_info_payload(client_id: str, owned: Iterable[Claim], involved: Iterable[Claim]) -> bytes:
    """The UTF-8 JSON answer; claims in the wire form clients publish (SMOKER.md)."""
    body = {
        "clientId": client_id,
        "ownedClaims": [c.to_json_obj() for c in sorted(owned, key=_topic)],
        "involvedClaims": [c.to_json_obj() for c in sorted(involved, key=_topic)],
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _topic(claim: Claim) -> str:
    return claim.topic_name
