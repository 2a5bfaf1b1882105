"""Large token-rule sets: the tries agree with a linear scan over thousands of rules.

The property tests use a handful of rules; here many rules share prefixes, alternatives
edges, wildcard edges and tails, which is what the subtree-minimum pruning and the shared
alternatives edges must get right.
"""

from __future__ import annotations

import random

import pytest

from edge_broker.matching.pattern_tokens import pattern_tokens
from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet
from edge_broker.matching.token_rules import PubRule, SubRule

LITS = ["a", "b", "ab", "ba", "c"]
ALTS = ["(a|b)", "(a*)", "(b*|c)", "(ab|ba*)", "(a|b|c)"]


def _rule(rng: random.Random, sub: bool, sep: str) -> str:
    choices = LITS + ALTS + (["?", "*"] if sub else [])
    segs = [rng.choice(choices) for _ in range(rng.randint(1, 5))]
    tail = rng.choice([None, None, "#", ">"])
    return sep.join(segs + ([tail] if tail else []))


def _channel(rng: random.Random, sep: str) -> str:
    return sep.join(rng.choice(LITS + ["bb", "abc", ""]) for _ in range(rng.randint(1, 7)))


def _pattern(rng: random.Random, sep: str) -> str:
    mids = LITS + ["*", "a*", "b*", "ab*"]
    lasts = mids + ["#", ">", "a#", "b>"]
    tokens = [rng.choice(mids) for _ in range(rng.randint(0, 5))] + [rng.choice(lasts)]
    return sep.join(tokens)


@pytest.mark.parametrize("sep", [".", "/"])
def test_pub_trie_equals_linear_scan_on_2000_rules(sep: str) -> None:
    rng = random.Random(11)
    texts = [_rule(rng, False, sep) for _ in range(2000)]
    rules = [PubRule.parse(t, sep) for t in texts]
    trie = PubRuleSet(rules, sep)
    hits = 0
    for _ in range(400):
        chan = _channel(rng, sep)
        expected = next((r.text for r in rules if r.matches(chan)), None)
        assert trie.allowed(chan) == expected, chan
        hits += expected is not None
    assert 40 < hits < 400  # both outcomes are exercised


@pytest.mark.parametrize("sep", [".", "/"])
def test_sub_trie_equals_linear_scan_on_2000_rules(sep: str) -> None:
    rng = random.Random(12)
    texts = [_rule(rng, True, sep) for _ in range(2000)]
    rules = [SubRule.parse(t, sep) for t in texts]
    trie = SubRuleSet(rules, sep)
    hits = 0
    for _ in range(400):
        tokens = pattern_tokens(_pattern(rng, sep), sep)
        expected = next((r.text for r in rules if r.accepts(tokens)), None)
        assert trie.allowed(tokens) == expected, tokens
        hits += expected is not None
    assert 40 < hits < 400
