"""Signed policy bundles (DESIGN.md "Cloud policy sync").

A bundle is a CBOR document of two layers::

    envelope = {"format": "edge-broker/bundle/1", "kid": <key id>, "body": <bytes>, "sig": <bytes>}
    body     = canonical CBOR of {
                 "format": "edge-broker/policy/1",
                 "version": <int, >= 1, strictly increasing per gateway>,
                 "gateway": <gateway id or "*">,
                 "issued_at": <int, Unix seconds>,
                 "policy": {<section>: <value>, ...}}

``sig`` is the Ed25519 signature of the ``body`` bytes by the cloud key named by ``kid`` (the
first 16 hex digits of the SHA-256 of the raw public key). Signing the exact bytes, not a
re-encoding, means a verifier never depends on how a CBOR library orders maps. The body is
encoded canonically (RFC 8949 §4.2.1: sorted map keys, shortest forms) and Ed25519 is
deterministic, so the same input always gives the same bundle, byte for byte: the Spark
compiler and ``edge-broker bundle create`` can be compared directly.

The policy sections are the same tables as in the TOML config (``permissions``, ``tokens``,
``acl``, ``passwords``, ``authorizers``, ``claims``); this module checks their shape only; the
gateway compiles them with the broker's own loaders before it swaps anything in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cbor2
import nacl.exceptions
import nacl.signing

from .errors import SyncError

ENVELOPE_FORMAT = "edge-broker/bundle/1"
BODY_FORMAT = "edge-broker/policy/1"
POLICY_SECTIONS = frozenset({"permissions", "tokens", "acl", "passwords", "authorizers", "claims"})
MAX_BUNDLE_BYTES = 8 * 1024 * 1024
ANY_GATEWAY = "*"


class BundleError(SyncError):
    """A bundle that is malformed, not genuine, or not meant for this gateway."""


@dataclass(frozen=True, slots=True)
class PolicyBundle:
    """A verified bundle: its header fields, its policy, and the exact bytes it came in."""

    version: int
    gateway: str
    issued_at: int
    policy: Mapping[str, Any]
    kid: str
    raw: bytes

    def applies_to(self, gateway_id: str) -> bool:
        return self.gateway in (ANY_GATEWAY, gateway_id)


def key_id(verify_key: nacl.signing.VerifyKey) -> str:
    """The id a bundle names its signing key by: 16 hex digits of SHA-256(public key)."""
    return hashlib.sha256(bytes(verify_key)).hexdigest()[:16]


def _check_policy(policy: Any) -> dict[str, Any]:
    if not isinstance(policy, Mapping):
        raise BundleError("bundle policy must be a map of sections")
    unknown = sorted(set(policy) - POLICY_SECTIONS)
    if unknown:
        raise BundleError(
            f"bundle policy has unknown section(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(POLICY_SECTIONS))}"
        )
    return dict(policy)


def _check_header(version: Any, gateway: Any, issued_at: Any) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"bundle version must be an integer >= 1, not {version!r}")
    if not isinstance(gateway, str) or not gateway:
        raise BundleError(f"bundle gateway must be a gateway id or '*', not {gateway!r}")
    if not isinstance(issued_at, int) or isinstance(issued_at, bool) or issued_at < 0:
        raise BundleError(f"bundle issued_at must be Unix seconds (an integer), not {issued_at!r}")


def bundle_body(*, version: int, gateway: str, issued_at: int, policy: Mapping[str, Any]) -> bytes:
    """The canonical, unsigned body of a policy bundle (safe to compute anywhere: the Spark
    compiler computes it on the executors, which never see the signing key)."""
    _check_header(version, gateway, issued_at)
    return bytes(
        cbor2.dumps(
            {
                "format": BODY_FORMAT,
                "version": version,
                "gateway": gateway,
                "issued_at": issued_at,
                "policy": _check_policy(policy),
            },
            canonical=True,
        )
    )


def sign_body(signing_key: nacl.signing.SigningKey, body: bytes) -> bytes:
    """The signed envelope around ``body``: ``sign_body(key, bundle_body(...))`` is
    :func:`create_bundle`, byte for byte."""
    envelope = {
        "format": ENVELOPE_FORMAT,
        "kid": key_id(signing_key.verify_key),
        "body": bytes(body),
        "sig": signing_key.sign(bytes(body)).signature,
    }
    data = bytes(cbor2.dumps(envelope, canonical=True))
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"bundle is {len(data)} bytes; the limit is {MAX_BUNDLE_BYTES}")
    return data


def create_bundle(
    signing_key: nacl.signing.SigningKey,
    *,
    version: int,
    gateway: str,
    issued_at: int,
    policy: Mapping[str, Any],
) -> bytes:
    """Encode and sign a bundle; deterministic for the same arguments."""
    body = bundle_body(version=version, gateway=gateway, issued_at=issued_at, policy=policy)
    return sign_body(signing_key, body)


def _decode(data: bytes, what: str) -> Any:
    try:
        return cbor2.loads(data)
    except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError) as exc:
        raise BundleError(f"{what} is not valid CBOR: {exc}") from exc


def read_envelope(data: bytes) -> dict[str, Any]:
    """The envelope's fields after shape checks (no signature check)."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"bundle is {len(data)} bytes; the limit is {MAX_BUNDLE_BYTES}")
    envelope = _decode(data, "bundle")
    if not isinstance(envelope, dict) or envelope.get("format") != ENVELOPE_FORMAT:
        raise BundleError(f"not an edge-broker bundle (expected format {ENVELOPE_FORMAT!r})")
    extra = sorted(set(envelope) - {"format", "kid", "body", "sig"})
    if extra:
        raise BundleError(f"bundle envelope has unknown field(s) {extra}")
    if not isinstance(envelope.get("kid"), str):
        raise BundleError("bundle envelope field 'kid' must be a string")
    if not isinstance(envelope.get("body"), bytes) or not isinstance(envelope.get("sig"), bytes):
        raise BundleError("bundle envelope fields 'body' and 'sig' must be byte strings")
    return envelope


def verify_bundle(
    data: bytes, trusted_keys: Mapping[str, nacl.signing.VerifyKey] | list[nacl.signing.VerifyKey]
) -> PolicyBundle:
    """Check the signature against the trusted keys and the body's shape.

    ``trusted_keys`` maps key ids to keys (or is a list, ids computed). Raises BundleError.
    """
    keys = (
        trusted_keys if isinstance(trusted_keys, Mapping) else {key_id(k): k for k in trusted_keys}
    )
    envelope = read_envelope(data)
    key = keys.get(envelope["kid"])
    if key is None:
        raise BundleError(
            f"bundle is signed by key {envelope['kid']}, which this gateway does not trust"
        )
    try:
        key.verify(envelope["body"], envelope["sig"])
    except (nacl.exceptions.BadSignatureError, ValueError) as exc:
        raise BundleError(
            "bundle signature does not verify: the bundle was altered or signed by another key"
        ) from exc
    body = _decode(envelope["body"], "bundle body")
    if not isinstance(body, dict) or body.get("format") != BODY_FORMAT:
        raise BundleError(f"bundle body must have format {BODY_FORMAT!r}")
    extra = sorted(set(body) - {"format", "version", "gateway", "issued_at", "policy"})
    if extra:
        raise BundleError(f"bundle body has unknown field(s) {extra}")
    _check_header(body.get("version"), body.get("gateway"), body.get("issued_at"))
    policy = _check_policy(body.get("policy"))
    return PolicyBundle(
        body["version"], body["gateway"], body["issued_at"], policy, envelope["kid"], data
    )


def check_acceptable(bundle: PolicyBundle, gateway_id: str, current_version: int | None) -> None:
    """Anti-rollback and targeting: refuse bundles for other gateways and non-newer versions."""
    if not bundle.applies_to(gateway_id):
        raise BundleError(
            f"bundle v{bundle.version} is for gateway {bundle.gateway!r}, not {gateway_id!r}"
        )
    if current_version is not None and bundle.version <= current_version:
        raise BundleError(
            f"bundle v{bundle.version} is not newer than the applied v{current_version}; refused "
            "(anti-rollback)"
        )


def stored_damage(data: bytes, trusted_keys: Mapping[str, nacl.signing.VerifyKey]) -> str | None:
    """What is wrong with a saved bundle when its bytes are damaged (not an envelope, or a
    signature that a trusted key's does not match: bytes changed after signing), else None.

    A sound bundle signed by a key no longer trusted, or for another gateway, is not damage:
    ``[persistence] on_damage = "set-aside"`` never moves it, since starting on the base config
    instead of a policy the operator deliberately stopped trusting must be a decision."""
    try:
        envelope = read_envelope(data)
    except BundleError as exc:
        return str(exc)
    key = trusted_keys.get(envelope["kid"])
    if key is None:
        return None
    try:
        key.verify(envelope["body"], envelope["sig"])
    except (nacl.exceptions.BadSignatureError, ValueError):
        return "its signature does not verify: the file was altered after it was saved"
    return None
