"""The compact trie of token rule sets (PATTERNS.md "Matching structures", §3 D3).

Literal variants of alternatives share the literal dict of their node; a token that leads to
several edges (a literal edge and variants, or variants of several alternatives) keeps every
target, and the first rule in order still decides.
"""

from __future__ import annotations

import pytest

from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet

PUB = ["a/x/1", "a/(x|y)/2", "a/(x|z*)/3", "a/(w|x)/#", "a/(zz*|q)/>"]


@pytest.mark.parametrize(
    ("channel", "rule"),
    [
        ("a/x/1", "a/x/1"),
        ("a/x/2", "a/(x|y)/2"),  # literal edge x has no '2'; the variant x of (x|y) does
        ("a/y/2", "a/(x|y)/2"),
        ("a/x/3", "a/(x|z*)/3"),
        ("a/zebra/3", "a/(x|z*)/3"),
        ("a/x/9", "a/(w|x)/#"),
        ("a/x", "a/(w|x)/#"),  # '#' matches zero further tokens
        ("a/zz/3", "a/(x|z*)/3"),  # both prefix variants z* and zz* admit 'zz'; first rule
        ("a/zz/4", "a/(zz*|q)/>"),
        ("a/q", None),  # '>' needs one more token
        ("a/v/1", None),
    ],
)
def test_publish_merged_edges_keep_every_target(channel: str, rule: str | None) -> None:
    assert PubRuleSet(PUB, "/").allowed(channel) == rule


def test_publish_first_rule_in_order_decides_among_merged_targets() -> None:
    rules = ["a/(x|y)/#", "a/x/#", "a/(x|z)/#"]
    assert PubRuleSet(rules, "/").allowed("a/x/b") == "a/(x|y)/#"
    assert PubRuleSet(rules[::-1], "/").allowed("a/x/b") == "a/(x|z)/#"


@pytest.mark.parametrize(
    ("pattern", "rule"),
    [
        ("a/x/1", "a/x/1"),
        ("a/y/2", "a/(x|y)/2"),
        ("a/x/#", "a/(w|x)/#"),
        ("a/zo*/3", "a/(x|z*)/3"),  # D3: zo* under z*
        ("a/z*/3", "a/(x|z*)/3"),
        ("a/x*/3", None),  # D3: a literal variant never admits a prefix token
        ("a/*/1", None),  # D2: only '*' rules accept '*'
        ("a/zzz*/>", None),  # z* admits zzz*, but only '3' may follow it
    ],
)
def test_subscribe_merged_edges(pattern: str, rule: str | None) -> None:
    rules = ["a/x/1", "a/(x|y)/2", "a/(x|z*)/3", "a/(w|x)/#"]
    assert SubRuleSet(rules, "/").allowed(pattern) == rule


def test_subscribe_prefix_token_under_prefix_variant_with_tail() -> None:
    rules = ["a/(q|zz*)/>", "a/?/#"]
    subs = SubRuleSet(rules, "/")
    assert subs.allowed("a/zzz*/b") == "a/(q|zz*)/>"
    assert subs.allowed("a/zzz*/#") is None  # D4: '#' may match none, '>' needs one
    assert subs.allowed("a/q/#") == "a/?/#"  # '?' accepts the literal q, and '#' any rest
    assert subs.allowed("a/q/b") == "a/(q|zz*)/>"
