"""Key material for the token tests: one key of each allowed algorithm, generated once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from edge_broker.auth.token_keys import TokenKey

HS_SECRET = b"0123456789abcdef0123456789abcdef-test-secret"
GRANTS = [
    {
        "tenant_ids": ["acme", "beta"],
        "allow_channels_pub": ["store/sell/#", "orders/(eu|us|a*)/#"],
        "allow_channels_sub": ["store/?/status/#", "store/*/status"],
    },
    {"tenant_ids": [""], "allow_channels_pub": ["events/>"], "allow_channels_sub": []},
]


def private_pem(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def public_pem(key: Any) -> bytes:
    return bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


@lru_cache(maxsize=1)
def private_keys() -> dict[str, Any]:
    return {
        "EdDSA": ed25519.Ed25519PrivateKey.generate(),
        "ES256": ec.generate_private_key(ec.SECP256R1()),
        "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
    }


def signing_key(alg: str, kid: str | None = None) -> TokenKey:
    if alg == "HS256":
        return TokenKey.hs256(HS_SECRET, kid)
    return TokenKey.from_pem(private_pem(private_keys()[alg]), kid)


def verify_key(alg: str, kid: str | None = None) -> TokenKey:
    if alg == "HS256":
        return TokenKey.hs256(HS_SECRET, kid)
    return TokenKey.from_pem(public_pem(private_keys()[alg]), kid)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], payload: dict[str, Any], hs_secret: bytes | None) -> str:
    """A JWT built by hand: HMAC-SHA256 with ``hs_secret``, or no signature at all."""
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    if hs_secret is None:
        return signing_input + "."
    mac = hmac.new(hs_secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)
