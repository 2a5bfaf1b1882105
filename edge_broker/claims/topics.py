"""The topics SMOKER reserves and the shape of the restricted area (SMOKER.md "System topics").

``restricted/<ownerID>/<rest>``: ``<rest>`` is one or more non-empty levels. A claim's
``topicName`` must have exactly this shape; access decisions apply to every topic that starts
with ``restricted/`` (a topic there whose second level is not a SMOKER ID has no owner and can
carry no claim, so every client is denied on it).
"""

from __future__ import annotations

# defined once, in matching.reserved_topics; re-exported for the claim modules
from ..matching.mqtt_topics import MAX_TOPIC_BYTES
from ..matching.reserved_topics import CLAIM_TOPIC as CLAIM_TOPIC
from ..matching.reserved_topics import CLAIMS_REQUEST_PREFIX as CLAIMS_REQUEST_PREFIX
from ..matching.reserved_topics import RESTRICTED_PREFIX as RESTRICTED_PREFIX
from ..matching.reserved_topics import UNCLAIM_TOPIC as UNCLAIM_TOPIC
from ..matching.reserved_topics import is_claim_service_topic
from ..matching.reserved_topics import is_restricted as is_restricted
from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError, shown
from .smoker_id import is_smoker_id

CLAIMS_RESPONSE_LEVEL = "claims"


def is_smoker_system_topic(topic: str) -> bool:
    """``access/claim``, ``access/unclaim`` and ``access/claims/…`` as SMOKER.md spells them
    (the one definition is :mod:`edge_broker.matching.reserved_topics`, which also knows the
    separator's spelling)."""
    return is_claim_service_topic(topic)


def owner_segment(topic: str) -> str | None:
    """The second level of a restricted topic (the would-be owner), ``None`` outside the area."""
    if not is_restricted(topic):
        return None
    rest = topic[len(RESTRICTED_PREFIX) :]
    slash = rest.find("/")
    return rest if slash < 0 else rest[:slash]


def claims_request_topic(client_id: str) -> str:
    return f"{CLAIMS_REQUEST_PREFIX}{client_id}/request"


def claims_response_topic(client_id: str) -> str:
    return f"{RESTRICTED_PREFIX}{client_id}/{CLAIMS_RESPONSE_LEVEL}"


def validate_claim_topic(topic: str) -> str:
    """Check a claim's ``topicName`` (SMOKER.md PUBACK table) and return its owner ID.

    Raises ``ClaimError`` 0x99 naming the rule: empty or whitespace only, ``+``/``#``/U+0000,
    a surrogate code point, too long, an empty level, or not ``restricted/<valid ID>/<rest>``.
    """
    if not topic.strip():
        raise ClaimError(ReasonCode.PAYLOAD_FORMAT_INVALID, "topicName is empty or only whitespace")
    for bad, name in (("+", "'+'"), ("#", "'#'"), ("\x00", "U+0000")):
        if bad in topic:
            raise ClaimError(
                ReasonCode.PAYLOAD_FORMAT_INVALID,
                f"topicName {shown(topic)} contains {name}: claims name one exact topic, no "
                "wildcards",
            )
    try:
        size = len(topic.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"topicName {shown(topic)} contains a surrogate code point, which MQTT forbids",
        ) from exc
    if size > MAX_TOPIC_BYTES:
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"topicName has {size} UTF-8 bytes; MQTT allows at most {MAX_TOPIC_BYTES}",
        )
    levels = topic.split("/")
    if "" in levels:
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID, f"topicName {shown(topic)} has an empty level"
        )
    if levels[0] != "restricted" or len(levels) < 3 or not is_smoker_id(levels[1]):
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"topicName {shown(topic)} must be restricted/<owner SMOKER ID>/<one or more levels>",
        )
    return levels[1]
