"""SMOKER claims as the device sends them (SMOKER.md "Claim payload").

A claim is ``{"restriction": Restriction, "signature": base64(sig || canonical restriction)}``
published at QoS 1 to ``access/claim``; an unclaim is the bare topic published to
``access/unclaim``. The restriction is checked here before signing so that a device learns about
a malformed claim from a clear ValueError instead of a 0x99 from the broker.
"""

import binascii

from smokermqtt import canonjson

try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Sequence
    from typing import Any, Protocol

    class Signer(Protocol):
        """What signs for a SMOKER client: smokermqtt.ed25519.SigningKey."""

        public_key: bytes

        def sign_attached(self, message: bytes) -> bytes: ...
except Exception:  # no typing module on the board (or a stub without these)
    pass

CLAIM_TOPIC = "access/claim"
UNCLAIM_TOPIC = "access/unclaim"
CLAIMS_REQUEST = "access/claims/%s/request"  # % own ID (SMOKER.md "claim information request")
CLAIMS_RESPONSE = "restricted/%s/claims"  # % own ID
RESTRICTION_TYPES = ("WHITELIST", "BLACKLIST")
ACTIVITIES = ("PUBLISH", "SUBSCRIBE", "ALL")


def check_topic(topic: str, owner_id: str) -> None:
    """ValueError unless ``topic`` is ``restricted/<owner_id>/<rest>`` with valid levels."""
    prefix = "restricted/" + owner_id + "/"
    if not topic.startswith(prefix) or len(topic) == len(prefix):
        raise ValueError(
            "claim topic %r must start with %r and name at least one more level" % (topic, prefix)
        )
    for level in topic[len(prefix) :].split("/"):
        if not level:
            raise ValueError("claim topic %r has an empty level" % topic)
    for bad in ("+", "#", "\x00"):
        if bad in topic:
            raise ValueError(
                "claim topic %r contains %r; claims name one exact topic" % (topic, bad)
            )


def restriction(
    topic: str, owner_id: str, restriction_type: str, permissions: "Sequence[tuple[str, str]]"
) -> "dict[str, Any]":
    """The Restriction object; ``permissions`` is a list of (clientId or "*", activity)."""
    check_topic(topic, owner_id)
    if restriction_type not in RESTRICTION_TYPES:
        raise ValueError(
            "restrictionType must be one of %s, got %r"
            % (", ".join(RESTRICTION_TYPES), restriction_type)
        )
    perms: list[dict[str, str]] = []
    for client, activity in permissions:
        if activity not in ACTIVITIES:
            raise ValueError(
                "permission activity must be one of %s, got %r" % (", ".join(ACTIVITIES), activity)
            )
        if client != "*" and (len(client) != 56 or not client.endswith("====")):
            raise ValueError("permission clientId must be '*' or a SMOKER ID, got %r" % client)
        perms.append({"clientId": client, "activity": activity})
    return {"topicName": topic, "restrictionType": restriction_type, "permissions": perms}


def signed_claim(signing_key: "Signer", owner_id: str, restr: "dict[str, Any]") -> bytes:
    """The claim payload (UTF-8 JSON) for ``restr``, signed with ``signing_key``.

    ``signing_key`` has ``sign_attached(bytes) -> bytes`` (smokermqtt.ed25519.SigningKey).
    """
    check_topic(restr["topicName"], owner_id)
    canonical = canonjson.dumpb(restr)
    signature = binascii.b2a_base64(signing_key.sign_attached(canonical)).strip().decode()
    return canonjson.dumpb({"restriction": restr, "signature": signature})


def claim(
    signing_key: "Signer",
    owner_id: str,
    topic: str,
    restriction_type: str = "WHITELIST",
    permissions: "Sequence[tuple[str, str]]" = (),
) -> bytes:
    """Shortcut: the signed claim payload for a topic and its permissions."""
    return signed_claim(
        signing_key, owner_id, restriction(topic, owner_id, restriction_type, permissions)
    )


def unclaim(topic: str, owner_id: str) -> bytes:
    """The payload for ``access/unclaim``: the claimed topic as UTF-8."""
    check_topic(topic, owner_id)
    return topic.encode("utf-8")
