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


# Path compression: a run of single-edge segments (literals, one alternatives, '?' or '*'
# segment) becomes one path (a publish path of literals is compared in place against the
# channel text), and a subtree of one rule becomes its leaf. The cases below sit on the
# boundaries of those compressed parts.

CHAINS = [
    "site/dev1/state/v1",  # leaf under a chain shared with the rules below
    "site/dev1/state/#",
    "site/dev1/cfg/>",
    "site/dev2/(t|h|p*)/>",  # a shared path, then a leaf of an alternatives step
    "site/dev22",
    "solo/a/b/c",  # one rule: the root's edge is a single leaf
    "solo/(a|b)",
]


@pytest.mark.parametrize(
    ("channel", "rule"),
    [
        ("site/dev1/state/v1", "site/dev1/state/v1"),
        ("site/dev1/state/v2", "site/dev1/state/#"),
        ("site/dev1/state", "site/dev1/state/#"),  # '#' with no further token
        ("site/dev1/stat", None),  # a literal must match whole, not as a prefix
        ("site/dev1/stateX", None),
        ("site/dev1/cfg", None),  # '>' needs one more token
        ("site/dev1/cfg/", "site/dev1/cfg/>"),  # an empty token counts (D11)
        ("site/dev1/cfg/a/b", "site/dev1/cfg/>"),
        ("site/dev2/t/x", "site/dev2/(t|h|p*)/>"),
        ("site/dev2/pressure/x", "site/dev2/(t|h|p*)/>"),
        ("site/dev2/x/x", None),
        ("site/dev2/t", None),
        ("site/dev22", "site/dev22"),
        ("site/dev2", None),
        ("site/dev222", None),
        ("solo/a/b/c", "solo/a/b/c"),
        ("solo/a/b/c/d", None),
        ("solo/a/b", None),
        ("solo/a/b/", None),
        ("solo/b", "solo/(a|b)"),
        ("solo", None),
    ],
)
@pytest.mark.parametrize("sep", ["/", "."])
def test_publish_compressed_paths(channel: str, rule: str | None, sep: str) -> None:
    rules = PubRuleSet([r.replace("/", sep) for r in CHAINS], sep)
    expected = rule.replace("/", sep) if rule else None
    assert rules.allowed(channel.replace("/", sep)) == expected


def test_publish_first_rule_wins_across_leaves_and_nodes() -> None:
    # The later rule sits in a leaf reached first by the walk; the earlier one at a node.
    rules = ["a/#", "a/(b*)/c", "a/b/c"]
    assert PubRuleSet(rules, "/").allowed("a/b/c") == "a/#"
    assert PubRuleSet(rules[1:], "/").allowed("a/b/c") == "a/(b*)/c"
    assert PubRuleSet(rules[:0:-1], "/").allowed("a/b/c") == "a/b/c"


def test_subscribe_first_rule_wins_when_a_later_leaf_is_walked_last() -> None:
    # Found by hypothesis: the prefix edge (rule 0) is walked before the shared edge of
    # rule 2, which must not replace the better rule 1 found meanwhile.
    rules = ["(a*)", "a/#", "(a)/#"]
    assert SubRuleSet(rules, "/").allowed("a/a") == "a/#"
    assert SubRuleSet(rules, "/").allowed("a") == "(a*)"


@pytest.mark.parametrize(
    ("pattern", "rule"),
    [
        ("s/d/status/#", "s/?/status/#"),
        ("s/d/status", "s/?/status/#"),
        ("s/+/status", "s/*/status"),  # '?' refuses '+', '*' accepts it (D1, D2)
        ("s/d*/status", "s/*/status"),
        ("s/+/status/x", None),
        ("s/d/stat", None),
        ("t/sell/x/#", "t/(sell|bay|b*)/#"),
        ("t/bag*/>", "t/(sell|bay|b*)/#"),  # D3: bag* under b*
        ("t/+/x", None),
        ("t/pay/x", None),
        ("u/dev/x", "u/dev/>"),
        ("u/dev/#", None),  # D4: '>' needs a token, '#' may match none
        ("u/dev/+/#", "u/dev/>"),
        ("u/dev", None),
        ("u/+/x", None),  # a literal segment accepts only that literal
    ],
)
def test_subscribe_compressed_paths(pattern: str, rule: str | None) -> None:
    rules = ["s/?/status/#", "s/*/status", "t/(sell|bay|b*)/#", "u/dev/>"]
    assert SubRuleSet(rules, "/").allowed(pattern) == rule


def test_large_sets_compress_to_one_path_per_rule() -> None:
    """10,000 device rules: each root edge is one path (a leaf), sharing its steps."""
    from edge_broker.matching import token_trie

    rules = [f"site{i}/dev{i % 7}/#" for i in range(5000)]
    rules += [f"hall{i}/(t|h)/x" for i in range(5000)]
    pub = PubRuleSet(rules, "/")
    root = pub._root
    assert isinstance(root, token_trie.Node) and len(root) == 10000
    paths = list(root.values())
    assert all(isinstance(p, token_trie.Path) and p.next is None for p in paths)
    assert {p.text for p in paths} == set(rules)  # type: ignore[union-attr]
    # literal steps become text, equal ones shared; "(t|h)/x" is one shared steps tuple
    assert len({id(p.rest) for p in paths if p.rest}) == 7  # type: ignore[union-attr]
    assert len({id(p.steps) for p in paths if p.steps}) == 1  # type: ignore[union-attr]
    assert pub.allowed("site42/dev0/a") == "site42/dev0/#"
    assert pub.allowed("hall7/h/x") == "hall7/(t|h)/x"
    assert pub.allowed("hall7/q/x") is None
    assert pub.allowed("hall7/t/x/y") is None


@pytest.mark.parametrize("prefix", ["", "x/"])
def test_a_rule_ending_beside_a_wild_edge_keeps_the_edge(prefix: str) -> None:
    """A node where one rule ends and a '?' edge leads on to a node where two rules end (an
    empty literal dict, which is falsy) must stay a node, not become the first rule's leaf."""
    rules = [f"{prefix}a", f"{prefix}a/?", f"{prefix}a/?/#"]
    subs = SubRuleSet(rules, "/")
    assert subs.allowed(f"{prefix}a") == f"{prefix}a"
    assert subs.allowed(f"{prefix}a/x") == f"{prefix}a/?"
    assert subs.allowed(f"{prefix}a/x/y") == f"{prefix}a/?/#"
    stars = SubRuleSet([f"{prefix}a", f"{prefix}a/*", f"{prefix}a/*/>"], "/")
    assert stars.allowed(f"{prefix}a/+") == f"{prefix}a/*"
    assert stars.allowed(f"{prefix}a/+/y") == f"{prefix}a/*/>"
