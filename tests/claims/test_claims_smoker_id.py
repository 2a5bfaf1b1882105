"""SMOKER IDs (SMOKER.md "Identity"): spelling, canonical form, valid Ed25519 points."""

from __future__ import annotations

import base64
import json

import pytest
from claims_helpers import OWNER, NoThrottle, smoker_identity
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from edge_broker.claims.errors import ClaimError
from edge_broker.claims.evaluate import evaluate_claim
from edge_broker.claims.smoker_id import (
    check_smoker_id,
    is_smoker_id,
    parse_smoker_id,
    smoker_id,
)
from edge_broker.mqtt.reason_codes import ReasonCode

ZERO_ID = "A" * 52 + "===="  # 32 zero bytes: spelt right, but a small-order point


@settings(max_examples=200, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32))
def test_every_generated_key_round_trips(seed: bytes) -> None:
    key = SigningKey(seed).verify_key
    text = smoker_id(key)
    assert len(text) == 56 and text.endswith("====") and text == text.upper()
    assert is_smoker_id(text)
    assert bytes(parse_smoker_id(text)) == bytes(key)


@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(min_size=32, max_size=32),
    last=st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
)
def test_exactly_one_spelling_per_key(raw: bytes, last: str) -> None:
    canonical = base64.b32encode(raw).decode()
    variant = canonical[:51] + last + "===="
    # the variant decodes to the same bytes whenever only the padding bits differ ...
    same_bytes = base64.b32decode(variant) == raw
    # ... and is then accepted only if it is the canonical spelling itself
    assert is_smoker_id(variant) == (variant == canonical or not same_bytes and last in "AQ")


@pytest.mark.parametrize(
    "text",
    [
        "",
        OWNER.lower(),
        OWNER[:-1],
        OWNER + "=",
        OWNER[:-4] + "AAAA",
        "1" + OWNER[1:],
        OWNER[:51] + "B====",
    ],
)
def test_bad_spellings(text: str) -> None:
    assert not is_smoker_id(text)
    with pytest.raises(ClaimError) as err:
        check_smoker_id(text)
    assert err.value.reason_code is ReasonCode.CLIENT_IDENTIFIER_NOT_VALID


def test_small_order_point_is_spelt_right_but_no_key() -> None:
    assert is_smoker_id(ZERO_ID)
    with pytest.raises(ClaimError) as err:
        parse_smoker_id(ZERO_ID)
    assert "valid Ed25519 public key" in err.value.message


def test_claim_in_the_area_of_a_non_key_cannot_verify() -> None:
    topic = f"restricted/{ZERO_ID}/t"
    restriction = {"topicName": topic, "restrictionType": "BLACKLIST", "permissions": []}
    canonical = json.dumps(restriction, sort_keys=True, separators=(",", ":")).encode()
    # an all-zero "signature" is the classic forgery against small-order keys
    payload = json.dumps(
        {"restriction": restriction, "signature": base64.b64encode(bytes(64) + canonical).decode()}
    ).encode()
    outcome = evaluate_claim(smoker_identity(ZERO_ID), 1, payload, NoThrottle(), 0.0)
    assert outcome.reason_code is ReasonCode.PAYLOAD_FORMAT_INVALID
    assert "does not verify" in (outcome.reason_string or "")


def test_smoker_id_of_wrong_length_key() -> None:
    with pytest.raises(ClaimError):
        smoker_id(b"short")
