"""Seed 000 examples through the whole token path: create -> verify -> tenant grants -> decide.

Each example's rule travels in a signed token (with '.' and with '/'), is verified and compiled
per tenant, and the decision is taken by ``can_publish`` / ``can_subscribe`` as the broker will.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from token_test_keys import HS_SECRET

from edge_broker.auth.token import TokenError, TokenVerifier, create_token
from edge_broker.auth.token_keys import TokenKey
from edge_broker.mqtt.reason_codes import ReasonCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "matching"))
from test_token_rules_seed import PUB_EXAMPLES, SUB_EXAMPLES  # noqa: E402

KEY = TokenKey.hs256(HS_SECRET, "seed")
NOW = 1_800_000_000.0


@pytest.mark.parametrize("sep", [".", "/"])
@pytest.mark.parametrize(("rule", "channel", "allowed"), PUB_EXAMPLES)
def test_seed_publish_examples_through_a_token(
    sep: str, rule: str, channel: str, allowed: bool
) -> None:
    rule, channel = rule.replace(".", sep), channel.replace(".", sep)
    grants = [{"tenant_ids": ["shop"], "allow_channels_pub": [rule]}]
    token = create_token(KEY, grants, ttl=60, now=NOW, separator=sep)
    verified = TokenVerifier([KEY], separator=sep).verify(token, tenant="shop", now=NOW)
    assert verified.for_tenant("shop").can_publish(channel) == (rule if allowed else None)


@pytest.mark.parametrize("sep", [".", "/"])
@pytest.mark.parametrize(("rule", "pattern", "allowed"), SUB_EXAMPLES)
def test_seed_subscribe_examples_through_a_token(
    sep: str, rule: str, pattern: str, allowed: bool
) -> None:
    rule, pattern = rule.replace(".", sep), pattern.replace(".", sep)
    grants = [{"tenant_ids": ["shop"], "allow_channels_sub": [rule]}]
    token = create_token(KEY, grants, ttl=60, now=NOW, separator=sep)
    verified = TokenVerifier([KEY], separator=sep).verify(token, tenant="shop", now=NOW)
    assert verified.for_tenant("shop").can_subscribe(pattern) == (rule if allowed else None)


@pytest.mark.parametrize("sep", [".", "/"])
def test_a_token_for_another_tenant_is_refused_0x87(sep: str) -> None:
    grants = [{"tenant_ids": ["shop"], "allow_channels_pub": [f"a{sep}#"]}]
    token = create_token(KEY, grants, ttl=60, now=NOW, separator=sep)
    with pytest.raises(TokenError) as info:
        TokenVerifier([KEY], separator=sep).verify(token, tenant="depot", now=NOW)
    assert info.value.reason_code is ReasonCode.NOT_AUTHORIZED


def test_rules_written_for_one_separator_are_refused_by_the_other() -> None:
    """A '.' rule with a tail read with '/' is one segment holding '#': invalid, not widened."""
    grants = [{"tenant_ids": ["shop"], "allow_channels_pub": ["store.sell.#"]}]
    dotted = create_token(KEY, grants, ttl=60, now=NOW, separator=".")
    with pytest.raises(TokenError) as info:
        TokenVerifier([KEY], separator="/").verify(dotted, now=NOW)
    assert "store.sell.#" in info.value.reason
