"""Helpers for token tests against the real broker: key files, a ``[tokens]`` config, tokens.

``token_config(dir, separator=...)`` writes an Ed25519 key pair and an HS256 secret into ``dir``
and returns the broker TOML (a TCP listener accepting ``token`` then ``anonymous``);
``make_token(grants, ...)`` signs with the Ed25519 key (kid ``ed``) unless told otherwise.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from token_test_keys import HS_SECRET, private_keys, private_pem, public_pem

from edge_broker.auth.token import create_token
from edge_broker.auth.token_keys import TokenKey

ED_KID = "ed"
HS_KID = "hs"


def ed_signing_key() -> TokenKey:
    return TokenKey.from_pem(private_pem(private_keys()["EdDSA"]), ED_KID)


def hs_signing_key() -> TokenKey:
    return TokenKey.hs256(HS_SECRET, HS_KID)


def token_config(
    directory: Path,
    *,
    separator: str = "/",
    leeway: float = 0,
    patterns: str = "mqtt",
    extra_tokens: str = "",
    methods: tuple[str, ...] = ("token", "anonymous"),
) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    pub = directory / "ed25519.pub.pem"
    pub.write_bytes(public_pem(private_keys()["EdDSA"]))
    secret = directory / "hs256.secret"
    secret.write_bytes(HS_SECRET)
    return f"""
[topics]
separator = {json.dumps(separator)}

[sys]
interval = 0

[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
auth_methods = {json.dumps(list(methods))}
subscription_patterns = {json.dumps(patterns)}

[tokens]
leeway = {leeway}
{extra_tokens}

[[tokens.keys]]
file = {json.dumps(str(pub))}
kid = {json.dumps(ED_KID)}

[[tokens.keys]]
file = {json.dumps(str(secret))}
kid = {json.dumps(HS_KID)}
alg = "HS256"
"""


def make_token(
    grants: Any,
    *,
    ttl: float | None = 300,
    key: TokenKey | None = None,
    separator: str = "/",
    now: float | None = None,
    **claims: Any,
) -> str:
    return create_token(
        key or ed_signing_key(),
        grants,
        ttl=ttl,
        separator=separator,
        now=time.time() if now is None else now,
        **claims,
    )


def grant(tenants: list[str], pub: list[str] = (), sub: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "tenant_ids": list(tenants),
        "allow_channels_pub": list(pub),
        "allow_channels_sub": list(sub),
    }
