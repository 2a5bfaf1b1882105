"""Names of seed 001 (PATTERNS.md §1): tenants (D14) and channels (D11), with both separators."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching.errors import RuleError
from edge_broker.matching.names import (
    DEFAULT_TENANT,
    is_literal,
    is_valid_channel,
    is_valid_tenant,
    normalize_tenant,
    validate_channel,
)

SEPARATORS = [".", "/"]


def test_empty_tenant_becomes_tilde_d14() -> None:
    assert normalize_tenant("") == DEFAULT_TENANT == "~"
    assert normalize_tenant(None) == "~"


@pytest.mark.parametrize("tenant", ["acme", "a", "A-Z_0.9~@x", "~", "t" * 128, "eu.west", "@home"])
def test_valid_tenants_are_kept(tenant: str) -> None:
    assert normalize_tenant(tenant) == tenant
    assert is_valid_tenant(tenant)


@pytest.mark.parametrize(
    ("tenant", "fragment"),
    [
        ("t" * 129, "129 bytes"),
        ("a/b", "'/'"),
        ("a b", "' '"),
        ("a*", "'*'"),
        ("a#", "'#'"),
        ("a>", "'>'"),
        ("é", "'é'"),
        ("a+b", "'+'"),
    ],
)
def test_invalid_tenants_are_refused_with_the_reason(tenant: str, fragment: str) -> None:
    with pytest.raises(RuleError) as info:
        normalize_tenant(tenant)
    assert fragment in str(info.value)
    assert info.value.rule == tenant
    assert not is_valid_tenant(tenant)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    "channel", ["a.b.c", "store.sell.status", "x", "A-Z_0~@", "c" * 256, "a/b.c"]
)
def test_valid_channels(sep: str, channel: str) -> None:
    channel = channel.replace(".", sep) if "/" not in channel else channel
    assert validate_channel(channel, sep) == channel
    assert is_valid_channel(channel, sep)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("channel", ["a..b", ".a", "a.", "..", "." * 40, ".".join("x" * 100)])
def test_d11_no_check_on_empty_tokens_or_token_count(sep: str, channel: str) -> None:
    channel = channel.replace(".", sep)
    assert validate_channel(channel, sep) == channel


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("channel", "fragment"),
    [
        ("", "must not be empty"),
        ("c" * 257, "257 bytes"),
        ("a.*.c", "'*' (a wildcard"),
        ("a.#", "'#' (a wildcard"),
        ("a.>", "'>' (a wildcard"),
        ("a.b*", "'*'"),
        ("a.?", "'?'"),
        ("a.+", "'+'"),
        ("a b", "' '"),
        ("a$b", "'$'"),
        ("ü", "'ü'"),
    ],
)
def test_invalid_channels(sep: str, channel: str, fragment: str) -> None:
    channel = channel.replace(".", sep)
    with pytest.raises(RuleError) as info:
        validate_channel(channel, sep)
    assert fragment in str(info.value)
    assert not is_valid_channel(channel, sep)


def test_literal_alphabet_depends_on_separator() -> None:
    assert is_literal("a/b", ".") and not is_literal("a/b", "/")
    assert is_literal("a.b", "/") and not is_literal("a.b", ".")
    assert not is_literal("", ".")
    assert not is_literal("a*", "/")


def test_unknown_separator_is_refused() -> None:
    with pytest.raises(ValueError, match="separator must be"):
        validate_channel("a", ":")


CHANNEL_ALPHABET = "ab.-_~@/*#>?+ $é"


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=CHANNEL_ALPHABET, max_size=12))
def test_channel_validity_equals_its_definition(sep: str, text: str) -> None:
    """§1: 1..256 bytes of [A-Za-z0-9_-~@.] plus the separator (D11: nothing else checked)."""
    expected = 1 <= len(text.encode()) <= 256 and all(c in "ab.-_~@/" for c in text)
    assert is_valid_channel(text, sep) is expected
    if expected:
        assert validate_channel(text, sep) == text
    else:
        with pytest.raises(RuleError):
            validate_channel(text, sep)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=CHANNEL_ALPHABET, max_size=12))
def test_tenant_validity_equals_its_definition(text: str) -> None:
    expected = len(text) <= 128 and all(c in "ab.-_~@" for c in text)
    if expected:
        assert normalize_tenant(text) == (text or "~")
    else:
        with pytest.raises(RuleError):
            normalize_tenant(text)
