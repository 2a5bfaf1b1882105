"""The bounded decision cache of token rule sets (PATTERNS.md "Matching structures").

A cached set must decide exactly as an uncached one, including denials and across the
emptying of a full cache; bad sizes are refused with a message naming the parameter.
"""

from __future__ import annotations

import random

import pytest

from edge_broker.matching.errors import RuleError
from edge_broker.matching.pattern_tokens import pattern_tokens
from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet

LITS = ["a", "b", "ab", "c"]
ALTS = ["(a|b)", "(a*)", "(b*|c)", "(ab|ba*)"]


def _rule(rng: random.Random, sub: bool, sep: str) -> str:
    segs = [rng.choice(LITS + ALTS + (["?", "*"] if sub else [])) for _ in range(rng.randint(1, 4))]
    tail = rng.choice([None, None, "#", ">"])
    return sep.join(segs + ([tail] if tail else []))


def _channel(rng: random.Random, sep: str) -> str:
    return sep.join(rng.choice(LITS + ["bb", "abc"]) for _ in range(rng.randint(1, 5)))


def _pattern(rng: random.Random, sep: str) -> str:
    mids = LITS + ["*", "a*", "b*"]
    tokens = [rng.choice(mids) for _ in range(rng.randint(0, 4))]
    return sep.join(tokens + [rng.choice(mids + ["#", ">"])])


@pytest.mark.parametrize("cache_entries", [1, 7, 4096])
def test_cached_pub_decisions_equal_the_trie(cache_entries: int) -> None:
    rng = random.Random(21)
    texts = [_rule(rng, False, "/") for _ in range(25)]
    plain, cached = PubRuleSet(texts, "/"), PubRuleSet(texts, "/", cache_entries=cache_entries)
    channels = [_channel(rng, "/") for _ in range(60)]
    outcomes = set()
    for _ in range(3):  # repeated: the second and third rounds are served by the cache
        for channel in rng.sample(channels, len(channels)):
            expected = plain.allowed(channel)
            assert cached.allowed(channel) == expected, channel
            outcomes.add(expected is None)
    assert outcomes == {True, False}  # allows and denials are both cached and replayed


@pytest.mark.parametrize("cache_entries", [1, 7, 4096])
def test_cached_sub_decisions_equal_the_trie(cache_entries: int) -> None:
    rng = random.Random(22)
    texts = [_rule(rng, True, "/") for _ in range(300)]
    plain, cached = SubRuleSet(texts, "/"), SubRuleSet(texts, "/", cache_entries=cache_entries)
    patterns = [_pattern(rng, "/") for _ in range(60)]
    outcomes = set()
    for _ in range(3):
        for pattern in rng.sample(patterns, len(patterns)):
            expected = plain.allowed(pattern)
            assert cached.allowed(pattern) == expected, pattern
            assert cached.allowed(pattern_tokens(pattern, "/")) == expected  # not cached
            outcomes.add(expected is None)
    assert outcomes == {True, False}


def test_a_denial_is_replayed_as_none() -> None:
    pubs = PubRuleSet(["a/#"], "/", cache_entries=8)
    assert pubs.allowed("b/c") is None
    assert pubs.allowed("b/c") is None
    assert pubs.allowed("a/c") == "a/#"
    assert pubs.allowed("a/c") == "a/#"


def test_an_invalid_pattern_is_an_error_every_time() -> None:
    subs = SubRuleSet(["a/#"], "/", cache_entries=8)
    for _ in range(2):
        with pytest.raises(RuleError):
            subs.allowed("a/#/b")


@pytest.mark.parametrize("bad", [-1, 2.5, "10"])
def test_bad_cache_size_is_refused(bad: object) -> None:
    for make in (PubRuleSet, SubRuleSet):
        with pytest.raises(ValueError, match="cache_entries must be an integer >= 0"):
            make(["a/#"], "/", cache_entries=bad)  # type: ignore[arg-type]
