"""Claims as immutable values, and the bytes their signature covers (SMOKER.md "Claim payload").

``Restriction.canonical_bytes()`` is the exact serialisation the owner signs: keys sorted at
every level, no whitespace, non-ASCII kept as UTF-8 (``ensure_ascii=False``). On the wire a
claim carries the *attached* signature (64-byte Ed25519 signature + the canonical bytes); a
``Claim`` keeps only the 64 signature bytes, since the rest is its own canonical restriction
(checked when parsed), and rebuilds the attached form for the wire.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

ANY_CLIENT = "*"
SIGNATURE_BYTES = 64


class Activity(StrEnum):
    """What a permission covers; a request is always ``PUBLISH`` or ``SUBSCRIBE``."""

    PUBLISH = "PUBLISH"
    SUBSCRIBE = "SUBSCRIBE"
    ALL = "ALL"


class RestrictionType(StrEnum):
    WHITELIST = "WHITELIST"
    BLACKLIST = "BLACKLIST"


@dataclass(frozen=True, slots=True)
class Permission:
    """``client_id`` is a SMOKER ID or ``*``."""

    client_id: str
    activity: Activity

    def covers(self, client_id: str, activity: Activity) -> bool:
        return (self.client_id == client_id or self.client_id == ANY_CLIENT) and (
            self.activity is activity or self.activity is Activity.ALL
        )

    def to_json_obj(self) -> dict[str, str]:
        return {"clientId": self.client_id, "activity": self.activity.value}


@dataclass(frozen=True, slots=True)
class Restriction:
    """What the owner signs: one exact topic, the list type and the permissions (may be empty)."""

    topic_name: str
    restriction_type: RestrictionType
    permissions: tuple[Permission, ...] = ()

    @property
    def owner(self) -> str:
        """The second level of ``topic_name`` (validated as a SMOKER ID when parsed)."""
        return self.topic_name.split("/", 2)[1]

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "restrictionType": self.restriction_type.value,
            "permissions": [p.to_json_obj() for p in self.permissions],
        }

    def canonical_bytes(self) -> bytes:
        """The signed bytes; raises ``UnicodeEncodeError`` on a lone surrogate (never valid)."""
        return canonical_json(self.to_json_obj())

    def allows(self, client_id: str, activity: Activity) -> bool:
        """SMOKER.md "Access decision" step 5 (the owner and integrity are checked before)."""
        match = any(p.covers(client_id, activity) for p in self.permissions)
        return match if self.restriction_type is RestrictionType.WHITELIST else not match


@dataclass(frozen=True, slots=True)
class Claim:
    """A restriction with the owner's 64-byte Ed25519 signature over its canonical bytes."""

    restriction: Restriction
    signature: bytes

    @property
    def attached_signature(self) -> bytes:
        """libsodium ``crypto_sign`` form: signature followed by the signed bytes."""
        return self.signature + self.restriction.canonical_bytes()

    @property
    def topic_name(self) -> str:
        return self.restriction.topic_name

    @property
    def owner(self) -> str:
        return self.restriction.owner

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "restriction": self.restriction.to_json_obj(),
            "signature": base64.b64encode(self.attached_signature).decode("ascii"),
        }

    def to_json(self) -> str:
        """The claim as a client publishes it to ``access/claim``."""
        return json.dumps(self.to_json_obj(), ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: Any) -> bytes:
    """SMOKER.md: ``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )
