"""Token keys: each bound to one allowed algorithm; loading errors name the file and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from token_test_keys import HS_SECRET, private_keys, private_pem, public_pem

from edge_broker.auth.token import TokenError, TokenVerifier, create_token
from edge_broker.auth.token_keys import TokenKey, TokenKeyError, load_jwks, parse_jwks

NOW = 1_800_000_000.0
GRANTS = [{"tenant_ids": ["t"], "allow_channels_pub": ["#"]}]


@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
def test_pem_files_private_and_public(tmp_path: Path, alg: str) -> None:
    key = private_keys()[alg]
    (tmp_path / "priv.pem").write_bytes(private_pem(key))
    (tmp_path / "pub.pem").write_bytes(public_pem(key))
    signer = TokenKey.load(tmp_path / "priv.pem", kid="k1")
    public = TokenKey.load(tmp_path / "pub.pem", kid="k1", algorithm=alg)
    assert signer.algorithm == public.algorithm == alg
    assert signer.can_sign and not public.can_sign
    text = create_token(signer, GRANTS, ttl=60, now=NOW)
    assert TokenVerifier([public]).verify(text, now=NOW).kid == "k1"
    with pytest.raises(ValueError, match="a public key cannot sign"):
        create_token(public, GRANTS, ttl=60, now=NOW)


def test_hs256_secret_file(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(HS_SECRET + b"\n")
    key = TokenKey.load(tmp_path / "secret", algorithm="HS256")
    assert key.verify_key == HS_SECRET
    with pytest.raises(TokenKeyError, match="not a PEM key; for an HS256 secret"):
        TokenKey.load(tmp_path / "secret")


def test_hs256_secret_rules() -> None:
    with pytest.raises(TokenKeyError, match="12 bytes; use at least 32"):
        TokenKey.hs256(b"short secret")
    for alg in ["EdDSA", "ES256", "RS256"]:
        with pytest.raises(TokenKeyError, match="must not be a PEM or SSH key"):
            TokenKey.hs256(public_pem(private_keys()[alg]))
    with pytest.raises(TokenKeyError, match="must not be a PEM or SSH key"):
        TokenKey.hs256(b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0000000000000000000 me@host")


def test_key_type_and_requested_algorithm_must_agree() -> None:
    pem = public_pem(private_keys()["RS256"])
    with pytest.raises(TokenKeyError, match="is a RS256 key but algorithm 'ES256'"):
        TokenKey.from_pem(pem, algorithm="ES256")
    with pytest.raises(TokenKeyError, match="not allowed"):
        TokenKey.load(__file__, algorithm="PS256")


def test_weak_or_foreign_keys_are_refused() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(TokenKeyError, match="1024 bits; use at least 2048"):
        TokenKey.from_pem(public_pem(small))
    p384 = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(TokenKeyError, match="secp384r1 is not allowed; ES256 needs P-256"):
        TokenKey.from_pem(public_pem(p384))
    with pytest.raises(TokenKeyError, match="not a usable PEM key"):
        TokenKey.from_pem(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")


def test_unreadable_key_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokenKeyError, match="missing.pem: cannot read key file"):
        TokenKey.load(tmp_path / "missing.pem")


def _jwk(alg: str, kid: str) -> dict[str, object]:
    if alg == "HS256":
        jwk = json.loads(jwt.algorithms.HMACAlgorithm.to_jwk(HS_SECRET))
    else:
        algo = jwt.get_algorithm_by_name(alg)
        jwk = json.loads(algo.to_jwk(private_keys()[alg].public_key()))
    jwk["kid"] = kid
    return dict(jwk)


def test_jwks_file_with_each_algorithm(tmp_path: Path) -> None:
    algs = ["EdDSA", "ES256", "RS256", "HS256"]
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [_jwk(a, f"j-{a}") for a in algs]}))
    keys = load_jwks(path)
    assert [k.algorithm for k in keys] == algs
    assert [k.kid for k in keys] == [f"j-{a}" for a in algs]
    verifier = TokenVerifier(keys)
    for alg in algs:
        signer = (
            TokenKey.hs256(HS_SECRET, f"j-{alg}")
            if alg == "HS256"
            else TokenKey.from_pem(private_pem(private_keys()[alg]), f"j-{alg}")
        )
        text = create_token(signer, GRANTS, ttl=60, now=NOW)
        assert verifier.verify(text, now=NOW).algorithm == alg


def test_jwks_key_with_wrong_alg_cannot_be_confused() -> None:
    jwk = _jwk("RS256", "r")
    jwk["alg"] = "HS256"  # an RSA key declared as HMAC
    with pytest.raises(TokenKeyError, match=r"keys\[0\]"):
        parse_jwks({"keys": [jwk]})


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ([], 'a JWKS must be an object {"keys": [...]}'),
        ({"keys": {}}, 'a JWKS must be an object {"keys": [...]}'),
        ({"keys": []}, "the JWKS holds no keys"),
        ({"keys": [5]}, "keys[0]: must be a JWK object"),
        ({"keys": [{"kty": "nope"}]}, "keys[0]: unusable JWK"),
        ({"keys": [{"kty": "oct", "k": "c2hvcnQ", "alg": "HS384"}]}, "'HS384' is not allowed"),
        ({"keys": [{"kty": "oct", "k": "c2hvcnQ", "kid": 7}]}, "'kid' must be a string"),
        ({"keys": [{"kty": "oct", "k": "c2hvcnQ"}]}, "HS256 secret is 5 bytes"),
        ({"keys": [{"kty": "oct", "k": "c2hvcnQ", "use": "enc"}]}, "must be signature keys"),
    ],
)
def test_jwks_errors(document: object, fragment: str) -> None:
    with pytest.raises(TokenKeyError) as info:
        parse_jwks(document, "keys.json")
    assert fragment in str(info.value) and str(info.value).startswith("keys.json")


def test_jwks_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TokenKeyError, match="cannot read JWKS file"):
        load_jwks(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(TokenKeyError, match="not valid JSON"):
        load_jwks(tmp_path / "bad.json")


def test_two_keys_same_algorithm_without_kid_are_both_tried() -> None:
    first = TokenKey.hs256(b"A" * 32)
    second = TokenKey.hs256(b"B" * 32)
    text = create_token(second, GRANTS, ttl=60, now=NOW)
    assert TokenVerifier([first, second]).verify(text, now=NOW).algorithm == "HS256"
    with pytest.raises(TokenError, match="does not verify"):
        TokenVerifier([first]).verify(text, now=NOW)
