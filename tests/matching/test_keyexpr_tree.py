"""KeTree (matching/ketree.py) against a linear scan with ``KeyExpr.includes`` (itself checked
against eclipse-zenoh in test_keyexpr_oracle.py): same answer and same first payload."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching.errors import RuleError
from edge_broker.matching.ketree import KeTree
from edge_broker.matching.keyexpr import KeyExpr, is_valid

CHUNKS = ["a", "b", "ab", "ba", "*", "**", "a$*", "$*b", "$*a$*", "a$*b", "ab$*ba", "@a", "@b",
          "@$*", "$*@"]  # fmt: skip

exprs = st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=5).map("/".join).filter(is_valid)


def linear_first(rules: list[str], request: str) -> str | None:
    req = KeyExpr.parse(request)
    for i, rule in enumerate(rules):
        if KeyExpr.parse(rule).includes(req):
            return f"r{i}"
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(exprs, max_size=12), st.lists(exprs, min_size=1, max_size=10))
def test_tree_agrees_with_linear_scan(rules: list[str], requests: list[str]) -> None:
    tree = KeTree.build((rule, f"r{i}") for i, rule in enumerate(rules))
    assert len(tree) == len(rules)
    for request in requests:
        expected = linear_first(rules, request)
        assert tree.first_including(request) == expected, (rules, request)
        assert tree.includes(request) is (expected is not None)


def test_seed_rules_in_one_tree() -> None:
    tree = KeTree.build(
        [("test/demo/*", "star"), ("test/d$*/a", "dsl"), ("test/@demo/*", "verbatim")]
    )
    assert tree.first_including("test/demo/a") == "star"  # earliest member wins
    assert tree.first_including("test/do/a") == "dsl"
    assert tree.first_including("test/@demo/x") == "verbatim"
    assert tree.first_including("test/**") is None  # superset
    assert tree.first_including("test/@demo") is None


def test_duplicate_members_keep_the_first_payload() -> None:
    tree = KeTree.build([("a/**", "first"), ("a/**", "second")])
    assert tree.first_including("a/b/c") == "first"


def test_empty_tree_includes_nothing() -> None:
    tree = KeTree.build(())
    assert not tree.includes("**")


def test_invalid_members_and_requests_raise_rule_error() -> None:
    with pytest.raises(RuleError):
        KeTree.build([("a//b", "x")])
    with pytest.raises(RuleError):
        KeTree.build([("a", "x")]).includes("a/#")


def test_many_patterns_with_shared_prefixes() -> None:
    members = [(f"dev/s{i}$*/x", f"p{i}") for i in range(50)] + [("dev/$*9/x", "nine")]
    tree = KeTree.build(members)
    assert tree.first_including("dev/s17abc/x") == "p1"  # "s1$*" also includes "s17abc"
    assert tree.first_including("dev/s49/x") == "p4"
    assert tree.first_including("dev/q9/x") == "nine"
    assert tree.first_including("dev/q8/x") is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(exprs, st.integers(0, 3)), max_size=14),
    st.lists(exprs, min_size=1, max_size=8),
)
def test_union_equals_one_tree_of_all_members(
    members: list[tuple[str, int]], requests: list[str]
) -> None:
    # Members are spread over 4 trees; ranks are global (the ACL's rule positions).
    ranked = [(expr, rank, f"m{rank}") for rank, (expr, _) in enumerate(members)]
    parts = [
        KeTree.build_ranked(m for m, (_, which) in zip(ranked, members, strict=True) if which == i)
        for i in range(4)
    ]
    before = [[p.first_including(r) for r in requests] for p in parts]
    union = KeTree.union(parts)
    whole = KeTree.build_ranked(ranked)
    assert len(union) == len(whole)
    for request in requests:
        assert union.first_including(request) == whole.first_including(request)
    # Shared subtrees are never modified by a union.
    assert [[p.first_including(r) for r in requests] for p in parts] == before


def test_ranks_decide_which_member_is_reported() -> None:
    tree = KeTree.build_ranked([("a/*", 5, "late"), ("a/b", 1, "early"), ("a/**", 3, "mid")])
    assert tree.first_including("a/b") == "early"
    assert tree.first_including("a/c") == "mid"
    assert KeTree.union([]).first_including("a") is None
