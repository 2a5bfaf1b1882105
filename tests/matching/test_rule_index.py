"""FirstMatchIndex (seed 003 first-match, AUTHZ.md gate 4) against linear scans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_oracle import FILTER_LITERALS, TOPIC_LEVELS, oracle_matches

from edge_broker.matching import (
    FirstMatchIndex,
    RuleError,
    filter_contains,
    filters_overlap,
)


@pytest.mark.parametrize("sep", ["/", "."])
def test_hivemq_blacklist_example(sep: str) -> None:
    # Seed 003 "Add Blacklist permission": DENY admin/#, default ALLOW.
    rules = FirstMatchIndex(
        [s.replace("/", sep) for s in ["admin/#", "clients/+/status", "#"]], sep
    )
    j = sep.join
    assert rules.first_match(j(["admin", "users"])) == 0
    assert rules.first_match("admin") == 0  # 'admin/#' matches the parent
    assert rules.first_match(j(["clients", "c1", "status"])) == 1
    assert rules.first_match(j(["clients", "c1"])) == 2
    assert rules.first_match(j(["$SYS", "x"])) is None  # '#' does not match '$' topics
    assert rules.matches(j(["admin", "x"])) == [0, 2]
    # Gate 4: SUBSCRIBE '#' is contained by rule 2 only; rule 0 (admin/#) overlaps before it.
    assert rules.containing("#") == [2]
    assert rules.overlapping("#", before=rules.first_containing("#")) == [0, 1]
    assert rules.first_containing(j(["admin", "+"])) == 0
    assert rules.overlapping(j(["admin", "+"]), before=0) == []
    assert rules.overlapping(j(["clients", "+", "#"])) == [1]


def test_a_plus_never_admits_a_hash() -> None:
    rules = FirstMatchIndex(["a/+"])
    assert rules.first_containing("a/x") == 0
    assert rules.first_containing("a/+") == 0
    assert rules.first_containing("a/#") is None
    assert rules.overlapping("a/#") == [0]


def test_identical_filters_keep_their_order() -> None:
    rules = FirstMatchIndex(["x/y", "a/#", "a/#", "a/+"])
    assert rules.first_match("a/b") == 1
    assert rules.matches("a/b") == [1, 2, 3]
    assert rules.containing("a/b") == [1, 2, 3]


def test_shadowed_rules() -> None:
    rules = FirstMatchIndex(["a/#", "a/b", "+/c", "x/c", "a/#", "b/+", "b/x/y"])
    assert [rules.shadowed_by(i) for i in range(len(rules))] == [None, 0, None, 2, 0, None, None]
    with pytest.raises(IndexError):
        rules.shadowed_by(7)


def test_invalid_rule_names_its_position() -> None:
    with pytest.raises(RuleError, match=r"rule 2 of 3") as info:
        FirstMatchIndex(["a", "a/#/b", "c"])
    assert info.value.rule == "a/#/b"
    assert info.value.segment == "#"


def test_empty_index() -> None:
    rules = FirstMatchIndex([])
    assert len(rules) == 0
    assert rules.first_match("a") is None
    assert rules.matches("a") == []
    assert rules.containing("#") == []
    assert rules.overlapping("#") == []


def test_many_rules_still_find_the_first() -> None:
    # 30k rules keep the test quick; scripts/bench_matching.py runs 100k.
    filters = [f"tenant{i % 100}/device{i}/+/status" for i in range(30_000)]
    filters.append("tenant7/#")
    rules = FirstMatchIndex(filters)
    assert rules.first_match("tenant7/device29907/x/status") == 29907
    assert rules.first_match("tenant7/device5/x/status") == 30_000
    assert rules.first_match("tenant8/device5/x/status") is None
    assert rules.first_containing("tenant7/device7/+/status") == 7
    assert rules.overlapping("tenant7/+/x/status", before=30_000)[:3] == [7, 107, 207]
    assert rules.overlapping("tenant7/+/x/status", before=200) == [7, 107]


@st.composite
def filters(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from([*FILTER_LITERALS, "+"]), max_size=3))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return "/".join(body)


topics = (
    st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=5)
    .filter(lambda t: t != [""])
    .map("/".join)
)


@settings(max_examples=400, deadline=None)
@given(st.lists(filters(), max_size=30), st.lists(topics, min_size=1, max_size=5))
def test_topic_queries_equal_a_linear_scan(rules: list[str], probes: list[str]) -> None:
    index = FirstMatchIndex(rules)
    for topic in probes:
        expected = [i for i, f in enumerate(rules) if oracle_matches(f, topic)]
        assert index.matches(topic) == expected
        assert index.first_match(topic) == (expected[0] if expected else None)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(filters(), max_size=30),
    st.lists(filters(), min_size=1, max_size=5),
    st.integers(0, 31),
    st.sampled_from(["/", "."]),
)
def test_filter_queries_equal_a_linear_scan(
    rules: list[str], queries: list[str], before: int, sep: str
) -> None:
    rules = [r.replace("/", sep) for r in rules]
    index = FirstMatchIndex(rules, sep)
    for j, f in enumerate(rules):
        earlier = [i for i in range(j) if filter_contains(rules[i], f, sep)]
        assert index.shadowed_by(j) == (earlier[0] if earlier else None)
    for raw in queries:
        q = raw.replace("/", sep)
        contain = [i for i, f in enumerate(rules) if filter_contains(f, q, sep)]
        assert index.containing(q) == contain, q
        assert index.first_containing(q) == (contain[0] if contain else None)
        over = [
            i
            for i, f in enumerate(rules)
            if filters_overlap(f, q, sep) and not filter_contains(f, q, sep)
        ]
        assert index.overlapping(q) == over, q
        assert index.overlapping(q, before=before) == [i for i in over if i < before]


def test_exhaustive_small_universe() -> None:
    """Every filter of up to three levels over the tiny alphabet, all in one index, each also
    used as a query: the index answers exactly what a linear scan answers."""
    import itertools

    rules: list[str] = []
    for n in range(4):
        for body in itertools.product([*FILTER_LITERALS, "+"], repeat=n):
            for tail in ([], ["#"]):
                levels = [*body, *tail]
                if levels not in ([], [""]):
                    rules.append("/".join(levels))
    index = FirstMatchIndex(rules)
    for q in rules:
        contain = [i for i, f in enumerate(rules) if filter_contains(f, q)]
        over = [i for i, f in enumerate(rules) if filters_overlap(f, q) and i not in contain]
        assert index.containing(q) == contain, q
        assert index.overlapping(q) == over, q
        first = contain[0] if contain else None
        assert index.overlapping(q, before=first) == [i for i in over if first is None or i < first]


WIDE = [f"l{i}" for i in range(12)] + ["$w", ""]


@st.composite
def wide_filters(draw: st.DrawFn) -> str:
    """Filters over a wide alphabet, so nodes get more children than the ordered threshold."""
    body = draw(st.lists(st.sampled_from([*WIDE, "+"]), max_size=3))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return "/".join(body)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(wide_filters(), min_size=20, max_size=60),
    st.lists(wide_filters(), min_size=1, max_size=5),
    st.integers(0, 61),
)
def test_wide_nodes_equal_a_linear_scan(rules: list[str], queries: list[str], before: int) -> None:
    index = FirstMatchIndex(rules)
    for q in queries:
        contain = [i for i, f in enumerate(rules) if filter_contains(f, q)]
        over = [i for i, f in enumerate(rules) if filters_overlap(f, q) and i not in contain]
        assert index.containing(q) == contain, q
        assert index.overlapping(q) == over, q
        assert index.overlapping(q, before=before) == [i for i in over if i < before], q
        topic = q.replace("+", "l3").replace("#", "l5")
        expected = [i for i, f in enumerate(rules) if oracle_matches(f, topic)]
        assert index.matches(topic) == expected
        assert index.first_match(topic) == (expected[0] if expected else None)
