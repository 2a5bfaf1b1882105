"""Keys, identities and signed claims for the claims tests (fixed seeds: reproducible)."""

from __future__ import annotations

import json
from typing import Any

from nacl.signing import SigningKey

from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.identity import Identity

OWNER_KEY = SigningKey(bytes(range(1, 33)))
OTHER_KEY = SigningKey(bytes(range(0x21, 0x41)))
THIRD_KEY = SigningKey(bytes(range(0x41, 0x61)))
OWNER = smoker_id(OWNER_KEY.verify_key)
OTHER = smoker_id(OTHER_KEY.verify_key)
THIRD = smoker_id(THIRD_KEY.verify_key)


def key(n: int) -> SigningKey:
    return SigningKey(n.to_bytes(4, "big") * 8)


def smoker_identity(client_id: str = OWNER) -> Identity:
    return Identity(client_id=client_id, method="smoker", smoker_id=client_id)


def plain_identity(client_id: str = "sensor-1") -> Identity:
    return Identity(client_id=client_id, method="anonymous")


def restriction(
    topic: str | None = None,
    kind: RestrictionType = RestrictionType.WHITELIST,
    *permissions: tuple[str, Activity],
    owner: str = OWNER,
) -> Restriction:
    return Restriction(
        topic or f"restricted/{owner}/temperature",
        kind,
        tuple(Permission(c, a) for c, a in permissions),
    )


def claim_payload(r: Restriction, signing_key: SigningKey = OWNER_KEY) -> bytes:
    return sign_restriction(signing_key, r).to_json().encode()


def claim_obj(r: Restriction, signing_key: SigningKey = OWNER_KEY) -> dict[str, Any]:
    return json.loads(claim_payload(r, signing_key))


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


class NoThrottle:
    """Admits everything and records what it was asked (the limits are tested on FloodGuard)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, int, float]] = []

    def admit(self, owner: str, topic: str, size: int, now: float, charge: int = 0) -> str | None:
        self.asked.append((owner, topic, size, now))
        return None
