"""Fuzzing token verification: only TokenError escapes, and no altered token is ever accepted."""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from token_test_keys import GRANTS, signing_key, verify_key

from edge_broker.auth.token import TokenError, TokenVerifier, VerifiedToken, create_token
from edge_broker.authz.grants import Grants

NOW = 1_800_000_000.0
ALGS = ["EdDSA", "ES256", "RS256", "HS256"]


@lru_cache(maxsize=1)
def _verifier() -> TokenVerifier:
    return TokenVerifier([verify_key(a, f"k-{a}") for a in ALGS])


@lru_cache(maxsize=len(ALGS))
def _signed(alg: str) -> tuple[str, VerifiedToken]:
    token = create_token(signing_key(alg, f"k-{alg}"), GRANTS, ttl=600, now=NOW, subject="s")
    return token, _verifier().verify(token, now=NOW)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_arbitrary_input_only_raises_token_error(text: str | bytes) -> None:
    try:
        _verifier().verify(text, now=NOW)
    except TokenError as exc:
        assert exc.reason and int(exc.reason_code) == 0x86
    else:  # pragma: no cover - a random string is never a valid signed token
        pytest.fail(f"accepted {text!r}")


@pytest.mark.parametrize("alg", ALGS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_character_change_is_refused_or_harmless(alg: str, data: st.DataObject) -> None:
    token, original = _signed(alg)
    index = data.draw(st.integers(0, len(token) - 1))
    char = data.draw(st.sampled_from("ABCDEFabcdef0123456789-_.=+/ "))
    mutated = token[:index] + char + token[index + 1 :]
    if mutated == token:
        return
    try:
        again = _verifier().verify(mutated, now=NOW)
    except TokenError:
        return
    # base64url's unused low bits can change without changing the decoded bytes
    assert dict(again.claims) == dict(original.claims)
    assert again.algorithm == original.algorithm and again.kid == original.kid


rule_literal = st.sampled_from(["a", "b", "store", "sell", "x-1", "t_2"])
segment = st.one_of(
    rule_literal,
    st.lists(st.sampled_from(["eu", "us", "a*", "b*"]), min_size=1, max_size=3).map(
        lambda v: "(" + "|".join(v) + ")"
    ),
)
pub_rule = st.builds(
    lambda segs, tail: "/".join(segs + ([tail] if tail else [])),
    st.lists(segment, min_size=1, max_size=4),
    st.sampled_from([None, "#", ">"]),
)
sub_rule = st.builds(
    lambda segs, tail: "/".join(segs + ([tail] if tail else [])),
    st.lists(st.one_of(segment, st.sampled_from(["?", "*"])), min_size=1, max_size=4),
    st.sampled_from([None, "#", ">"]),
)
grant = st.fixed_dictionaries(
    {
        "tenant_ids": st.lists(
            st.sampled_from(["", "acme", "t.1", "~", "@x"]), min_size=1, max_size=3
        ),
        "allow_channels_pub": st.lists(pub_rule, max_size=4),
        "allow_channels_sub": st.lists(sub_rule, max_size=4),
    }
)


@settings(max_examples=60, deadline=None)
@given(grants=st.lists(grant, min_size=1, max_size=3), alg=st.sampled_from(ALGS))
def test_round_trip_of_random_valid_grants(grants: list[dict[str, list[str]]], alg: str) -> None:
    token = create_token(signing_key(alg, f"k-{alg}"), grants, ttl=60, now=NOW)
    verified = _verifier().verify(token, now=NOW)
    expected = Grants.parse(grants)
    assert verified.grants.to_json() == expected.to_json()
    assert verified.grants.tenants == expected.tenants
