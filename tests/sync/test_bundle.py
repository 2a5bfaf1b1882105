"""Signed policy bundles: determinism, verification, tampering, targeting, anti-rollback."""

from __future__ import annotations

import cbor2
import nacl.signing
import pytest

from edge_broker.sync.bundle import (
    BundleError,
    PolicyBundle,
    check_acceptable,
    create_bundle,
    key_id,
    verify_bundle,
)

SEED = bytes(range(32))
POLICY = {"permissions": {"default": [{"topic": "a/#"}]}, "acl": {"enabled": False}}


@pytest.fixture
def key() -> nacl.signing.SigningKey:
    return nacl.signing.SigningKey(SEED)


def make(key: nacl.signing.SigningKey, **overrides: object) -> bytes:
    args: dict[str, object] = {
        "version": 2,
        "gateway": "gw-1",
        "issued_at": 1_700_000_000,
        "policy": POLICY,
    }
    args.update(overrides)
    return create_bundle(key, **args)  # type: ignore[arg-type]


def test_deterministic_and_verifies(key: nacl.signing.SigningKey) -> None:
    first = make(key)
    assert first == make(key)
    # map key order in the input does not change the bytes
    assert first == make(
        key, policy={"acl": {"enabled": False}, "permissions": {"default": [{"topic": "a/#"}]}}
    )
    bundle = verify_bundle(first, [key.verify_key])
    assert isinstance(bundle, PolicyBundle)
    assert (bundle.version, bundle.gateway, bundle.issued_at) == (2, "gw-1", 1_700_000_000)
    assert bundle.policy == POLICY and bundle.kid == key_id(key.verify_key) and bundle.raw == first


def test_untrusted_key_refused(key: nacl.signing.SigningKey) -> None:
    other = nacl.signing.SigningKey(bytes(32))
    with pytest.raises(BundleError, match="does not trust"):
        verify_bundle(make(key), [other.verify_key])


def test_tampered_body_refused(key: nacl.signing.SigningKey) -> None:
    envelope = cbor2.loads(make(key))
    body = cbor2.loads(envelope["body"])
    body["version"] = 99
    envelope["body"] = cbor2.dumps(body, canonical=True)
    with pytest.raises(BundleError, match="signature does not verify"):
        verify_bundle(cbor2.dumps(envelope), [key.verify_key])


def test_every_flipped_byte_is_refused(key: nacl.signing.SigningKey) -> None:
    data = make(key)
    for index in range(0, len(data), 7):
        mutated = bytearray(data)
        mutated[index] ^= 0x40
        with pytest.raises(BundleError):
            verify_bundle(bytes(mutated), [key.verify_key])


def test_forged_signature_with_own_key_and_same_kid(key: nacl.signing.SigningKey) -> None:
    attacker = nacl.signing.SigningKey(bytes([7]) * 32)
    forged = cbor2.loads(make(attacker))
    forged["kid"] = key_id(key.verify_key)
    with pytest.raises(BundleError, match="signature does not verify"):
        verify_bundle(cbor2.dumps(forged), [key.verify_key])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"version": 0}, "version must be an integer >= 1"),
        ({"version": True}, "version must be an integer"),
        ({"gateway": ""}, "gateway must be"),
        ({"issued_at": -1}, "issued_at"),
        ({"policy": {"bogus": 1}}, "unknown section"),
        ({"policy": []}, "must be a map"),
    ],
)
def test_create_rejects_bad_input(
    key: nacl.signing.SigningKey, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(BundleError, match=message):
        make(key, **overrides)


@pytest.mark.parametrize(
    "data", [b"", b"\xff\xff", cbor2.dumps([1, 2]), cbor2.dumps({"format": "other"})]
)
def test_garbage_refused(key: nacl.signing.SigningKey, data: bytes) -> None:
    with pytest.raises(BundleError):
        verify_bundle(data, [key.verify_key])


def test_targeting_and_anti_rollback(key: nacl.signing.SigningKey) -> None:
    mine = verify_bundle(make(key, version=3), [key.verify_key])
    check_acceptable(mine, "gw-1", None)
    check_acceptable(mine, "gw-1", 2)
    with pytest.raises(BundleError, match="not newer"):
        check_acceptable(mine, "gw-1", 3)
    with pytest.raises(BundleError, match="not newer"):
        check_acceptable(mine, "gw-1", 5)
    with pytest.raises(BundleError, match="for gateway 'gw-1', not 'gw-2'"):
        check_acceptable(mine, "gw-2", None)
    everyone = verify_bundle(make(key, gateway="*"), [key.verify_key])
    check_acceptable(everyone, "gw-2", 1)
