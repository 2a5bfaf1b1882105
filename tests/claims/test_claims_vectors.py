"""Golden vectors from a fixed key (SMOKER.md "Identity", "Claim payload"), checked with pynacl.

The literals below were produced once and are checked here against pynacl directly, so a change
in base32, canonical JSON or signing shows up as a failure, not as new "expected" values.
"""

from __future__ import annotations

import base64
import json

from nacl.signing import SigningKey, VerifyKey

from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.claims.parse import parse_claim
from edge_broker.claims.signature import sign_restriction, verify_claim
from edge_broker.claims.smoker_id import parse_smoker_id, smoker_id

SEED = bytes(range(1, 33))  # 0x01..0x20
SEED_2 = bytes(range(0x21, 0x41))
ID_1 = "PG2VMLUP4ZKPSQDYWEJORKMLU6IB7BJ242K35V7A4OIQXLIESZSA===="
ID_2 = "47YWFIIL5RKZV7VBSXSNZ2CLNFLI2XJMWCLD5NCGYBUF4KYX6LYA===="
CANONICAL_1 = (
    b'{"permissions":[{"activity":"SUBSCRIBE","clientId":"*"},{"activity":"PUBLISH",'
    b'"clientId":"47YWFIIL5RKZV7VBSXSNZ2CLNFLI2XJMWCLD5NCGYBUF4KYX6LYA===="}],'
    b'"restrictionType":"WHITELIST","topicName":'
    b'"restricted/PG2VMLUP4ZKPSQDYWEJORKMLU6IB7BJ242K35V7A4OIQXLIESZSA====/temperature"}'
)
SIGNATURE_1 = (
    "4erOxMU99DAobvx3sY62EbSVF5j+VCVQplEorZdQW6EEknMiRyy1PFwhCsSpvpSCTfK43zmXxSc/9LxcoqByCHsicGVy"
    "bWlzc2lvbnMiOlt7ImFjdGl2aXR5IjoiU1VCU0NSSUJFIiwiY2xpZW50SWQiOiIqIn0seyJhY3Rpdml0eSI6IlBVQkxJ"
    "U0giLCJjbGllbnRJZCI6IjQ3WVdGSUlMNVJLWlY3VkJTWFNOWjJDTE5GTEkyWEpNV0NMRDVOQ0dZQlVGNEtZWDZMWUE9"
    "PT09In1dLCJyZXN0cmljdGlvblR5cGUiOiJXSElURUxJU1QiLCJ0b3BpY05hbWUiOiJyZXN0cmljdGVkL1BHMlZNTFVQ"
    "NFpLUFNRRFlXRUpPUktNTFU2SUI3QkoyNDJLMzVWN0E0T0lRWExJRVNaU0E9PT09L3RlbXBlcmF0dXJlIn0="
)
CANONICAL_2 = (
    '{"permissions":[],"restrictionType":"BLACKLIST","topicName":'
    '"restricted/PG2VMLUP4ZKPSQDYWEJORKMLU6IB7BJ242K35V7A4OIQXLIESZSA====/küche/température"}'
).encode()
SIGNATURE_2 = (
    "shNJfO7af3x6mGPsnUUApMGlNSgyo74BWrmR4VFJ37vjzrHW4aBqySHyd2k1krHucwDbfD4Alt2IzppCHIECB3sicGVy"
    "bWlzc2lvbnMiOltdLCJyZXN0cmljdGlvblR5cGUiOiJCTEFDS0xJU1QiLCJ0b3BpY05hbWUiOiJyZXN0cmljdGVkL1BH"
    "MlZNTFVQNFpLUFNRRFlXRUpPUktNTFU2SUI3QkoyNDJLMzVWN0E0T0lRWExJRVNaU0E9PT09L2vDvGNoZS90ZW1ww6ly"
    "YXR1cmUifQ=="
)


def restriction_1() -> Restriction:
    return Restriction(
        f"restricted/{ID_1}/temperature",
        RestrictionType.WHITELIST,
        (Permission("*", Activity.SUBSCRIBE), Permission(ID_2, Activity.PUBLISH)),
    )


def test_smoker_ids_of_the_fixed_seeds() -> None:
    assert smoker_id(SigningKey(SEED).verify_key) == ID_1
    assert smoker_id(SigningKey(SEED_2).verify_key) == ID_2
    assert base64.b32decode(ID_1) == bytes(SigningKey(SEED).verify_key)
    assert len(ID_1) == 56 and ID_1.endswith("====")
    assert bytes(parse_smoker_id(ID_1)) == bytes(SigningKey(SEED).verify_key)


def test_canonical_bytes_are_the_literal() -> None:
    assert restriction_1().canonical_bytes() == CANONICAL_1
    # the same bytes as any sorted-keys, whitespace-free JSON of the object
    obj = json.loads(CANONICAL_1)
    assert json.dumps(obj, sort_keys=True, separators=(",", ":")).encode() == CANONICAL_1


def test_attached_signature_literal_verifies_with_pynacl() -> None:
    raw = base64.b64decode(SIGNATURE_1)
    assert len(raw) == 64 + len(CANONICAL_1)
    assert raw[64:] == CANONICAL_1
    assert VerifyKey(base64.b32decode(ID_1)).verify(raw) == CANONICAL_1
    # Ed25519 is deterministic: libsodium crypto_sign and pynacl give these very bytes
    assert bytes(SigningKey(SEED).sign(CANONICAL_1)) == raw
    assert base64.b64encode(
        sign_restriction(SigningKey(SEED), restriction_1()).attached_signature
    ) == (SIGNATURE_1.encode())


def test_non_ascii_topic_vector_keeps_utf8() -> None:
    r = Restriction(f"restricted/{ID_1}/küche/température", RestrictionType.BLACKLIST, ())
    assert r.canonical_bytes() == CANONICAL_2
    assert b"\\u" not in CANONICAL_2  # ensure_ascii=False: no escapes
    raw = base64.b64decode(SIGNATURE_2)
    assert VerifyKey(base64.b32decode(ID_1)).verify(raw) == CANONICAL_2


def test_golden_claims_parse_and_verify_in_any_key_order() -> None:
    for canonical, signature in ((CANONICAL_1, SIGNATURE_1), (CANONICAL_2, SIGNATURE_2)):
        restriction = json.loads(canonical)
        reordered = {k: restriction[k] for k in reversed(list(restriction))}
        reordered["permissions"] = [
            {"clientId": p["clientId"], "activity": p["activity"]}
            for p in restriction["permissions"]
        ]
        for r in (restriction, reordered):
            payload = json.dumps({"signature": signature, "restriction": r}, indent=2).encode()
            claim = parse_claim(payload)
            verify_claim(claim)
            assert claim.restriction.canonical_bytes() == canonical
