"""SMOKER IDs and claims made on the device are what the broker's own code accepts.

The broker side is edge_broker.claims (parse_claim, verify_claim, smoker_id): a claim the
firmware signs must parse and verify there, and the IDs must be the same strings.
"""

from __future__ import annotations

import base64
import json

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smokermqtt import claims, ed25519, ids

from edge_broker.claims.model import canonical_json
from edge_broker.claims.parse import parse_claim
from edge_broker.claims.signature import verify_claim
from edge_broker.claims.smoker_id import parse_smoker_id, smoker_id

SEED = bytes(range(32))
KEY = ed25519.SigningKey(SEED)
OWNER = ids.client_id(KEY.public_key)
OTHER = ids.client_id(bytes(nacl.signing.SigningKey(b"\x07" * 32).verify_key))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_base32_agrees_with_the_standard_library(data: bytes) -> None:
    text = ids.b32encode(data)
    assert text == base64.b32encode(data).decode()
    assert ids.b32decode(text) == data


def test_client_id_is_the_brokers() -> None:
    assert OWNER == smoker_id(KEY.public_key)
    assert len(OWNER) == 56 and OWNER.endswith("====")
    assert ids.public_key(OWNER) == bytes(parse_smoker_id(OWNER))


@pytest.mark.parametrize(
    "bad", ["", "A" * 56, OWNER.lower(), OWNER[:-5] + "1====", OWNER[:-4] + "AAAA"]
)
def test_public_key_rejects_what_is_no_smoker_id(bad: str) -> None:
    with pytest.raises(ValueError):
        ids.public_key(bad)


def test_base32_decode_names_the_bad_character() -> None:
    with pytest.raises(ValueError, match="'1' at 0"):
        ids.b32decode("1AAAAAAA")


def test_claim_parses_and_verifies_on_the_broker() -> None:
    payload = claims.claim(
        KEY,
        OWNER,
        f"restricted/{OWNER}/temp",
        "WHITELIST",
        [(OTHER, "SUBSCRIBE"), ("*", "PUBLISH")],
    )
    claim = parse_claim(payload)
    verify_claim(claim)
    assert claim.topic_name == f"restricted/{OWNER}/temp"
    obj = json.loads(payload)
    signed = base64.b64decode(obj["signature"])
    assert signed[64:] == canonical_json(obj["restriction"])
    nacl.signing.VerifyKey(KEY.public_key).verify(signed[64:], signed[:64])


@settings(max_examples=25, deadline=None)
@given(
    rest=st.lists(
        st.text(
            st.characters(exclude_categories=("Cs",), exclude_characters="/+#\x00"),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=3,
    ),
    kind=st.sampled_from(claims.RESTRICTION_TYPES),
    perms=st.lists(
        st.tuples(st.sampled_from(["*", OTHER]), st.sampled_from(claims.ACTIVITIES)), max_size=3
    ),
)
def test_any_valid_claim_verifies_on_the_broker(
    rest: list[str], kind: str, perms: list[tuple[str, str]]
) -> None:
    topic = f"restricted/{OWNER}/" + "/".join(rest)
    verify_claim(parse_claim(claims.claim(KEY, OWNER, topic, kind, perms)))


@pytest.mark.parametrize(
    ("topic", "why"),
    [
        ("restricted/X/temp", "must start with"),
        (f"restricted/{OTHER}/temp", "must start with"),
        (f"restricted/{OWNER}/", "must start with"),
        (f"restricted/{OWNER}/a//b", "empty level"),
        (f"restricted/{OWNER}/a/+", "'\\+'"),
        (f"restricted/{OWNER}/#", "'#'"),
    ],
)
def test_bad_claim_topics_are_refused_before_signing(topic: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        claims.claim(KEY, OWNER, topic)


def test_bad_restriction_fields_are_refused() -> None:
    topic = f"restricted/{OWNER}/t"
    with pytest.raises(ValueError, match="restrictionType"):
        claims.claim(KEY, OWNER, topic, "whitelist")
    with pytest.raises(ValueError, match="activity"):
        claims.claim(KEY, OWNER, topic, "WHITELIST", [("*", "READ")])
    with pytest.raises(ValueError, match="clientId"):
        claims.claim(KEY, OWNER, topic, "WHITELIST", [("bob", "ALL")])


def test_unclaim_payload() -> None:
    assert claims.unclaim(f"restricted/{OWNER}/t", OWNER) == f"restricted/{OWNER}/t".encode()
    with pytest.raises(ValueError):
        claims.unclaim(f"restricted/{OTHER}/t", OWNER)
