"""The claim information request (SMOKER.md "Optional: claim information request").

A client publishes to ``access/claims/<its ID>/request`` with Response Topic
``restricted/<its ID>/claims``; when it is subscribed to exactly that topic, the broker answers
there at QoS 1 with ``{"clientId", "ownedClaims", "involvedClaims"}``. Owned claims are the
client's own; involved claims are other owners' claims whose permissions name the client or
``*`` (as the reference broker does). A wrong Response Topic is 0x90 Topic Name invalid (the
reference broker's answer; SMOKER.md's "0x91 (Topic Name invalid)" names 0x90's meaning), a
missing one 0x83.

Bounded answers (issue 16): whether the requester is subscribed is checked before anything is
built (not subscribed: PUBACK 0x10 No matching subscribers, nothing built), requests are
rate-limited per client (0x97), and one answer holds at most one page: owned claims first, then
involved ones, each in topic order, at most ``request_page_claims`` claims and about
``request_page_bytes`` bytes (always at least one claim). When more remain the answer carries
``"nextPage": "<cursor>"``; the client asks for the next page by publishing the same request
with the payload ``{"after": "<cursor>"}``. An empty payload asks for the first page, so a
client that has fewer claims than a page sees exactly the answer it always saw. The cursor is
the last topic sent, so claims added or removed between pages neither repeat nor vanish.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    limit: str | None = None  # the config key of the bound that refused the request


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


OWNED = "owned"
INVOLVED = "involved"
# the one answer to every malformed page request (both checks below give it)
AFTER_PAYLOAD = (
    'the payload must be empty (first page) or JSON {"after": "<nextPage of the last answer>"}'
)


@dataclass(frozen=True, slots=True)
class PageCursor:
    """Where a page ends: the section (``owned`` or ``involved``) and the last topic sent."""

    section: str
    topic: str

    def to_text(self) -> str:
        return f"{self.section}:{self.topic}"


def parse_page_request(payload: bytes) -> PageCursor | None | str:
    """The request's payload: empty (first page), ``{"after": "<cursor>"}``; else the error."""
    if not payload.strip():
        return None
    try:
        body = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return AFTER_PAYLOAD
    if not isinstance(body, dict) or set(body) != {"after"} or not isinstance(body["after"], str):
        return AFTER_PAYLOAD
    section, sep, topic = body["after"].partition(":")
    if not sep or section not in (OWNED, INVOLVED) or not topic:
        return f"{body['after'][:120]!r} is not a nextPage cursor this broker issued"
    return PageCursor(section, topic)


@dataclass(frozen=True, slots=True)
class ClaimsPage:
    payload: bytes
    claims: int
    next_page: PageCursor | None


def claims_info_page(
    client_id: str,
    owned: Iterator[Claim],
    involved: Iterator[Claim],
    max_claims: int,
    max_bytes: int,
) -> ClaimsPage:
    """One page of the answer. ``owned`` and ``involved`` yield claims in topic order, already
    past the cursor; they are consumed only as far as the page reaches (plus one claim to know
    whether another page follows), so a large claim set costs a page, not the whole set."""
    parts: dict[str, list[str]] = {OWNED: [], INVOLVED: []}
    size = 0
    count = 0
    last: PageCursor | None = None
    more = False
    for section, claims in ((OWNED, owned), (INVOLVED, involved)):
        for claim in claims:
            text = json.dumps(claim.to_json_obj(), ensure_ascii=False, separators=(",", ":"))
            if count and (count >= max_claims or size + len(text) > max_bytes):
                more = True
                break
            parts[section].append(text)
            size += len(text) + 1
            count += 1
            last = PageCursor(section, claim.topic_name)
        if more:
            break
    head = json.dumps(client_id, ensure_ascii=False)
    body = (
        f'{{"clientId":{head},"ownedClaims":[{",".join(parts[OWNED])}],'
        f'"involvedClaims":[{",".join(parts[INVOLVED])}]'
    )
    next_page = last if more else None
    if next_page is not None:
        body += f',"nextPage":{json.dumps(next_page.to_text(), ensure_ascii=False)}'
    return ClaimsPage((body + "}").encode("utf-8"), count, next_page)
