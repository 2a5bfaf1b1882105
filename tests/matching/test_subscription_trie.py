"""SubscriptionTrie against a linear scan with the regex oracle, under add/remove churn."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_oracle import FILTER_LITERALS, TOPIC_LEVELS, oracle_matches

from edge_broker.matching import RuleError, SubscriptionTrie
from tests.matching.trie_keys import match_keys


def as_dicts(result: tuple[object, ...]) -> list[dict[object, object]]:
    return sorted((dict(m) for m in result), key=repr)  # type: ignore[call-overload]


@pytest.mark.parametrize("sep", ["/", "."])
def test_basic_fan_out(sep: str) -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie(separator=sep)
    j = sep.join
    trie.add(j(["a", "+", "c"]), "c1", 0)
    trie.add(j(["a", "#"]), "c2", 1)
    trie.add("#", "c3", 2)
    trie.add(j(["a", "b", "c"]), "c4", 1)
    trie.add(j(["a", "b", "c"]), "c5", 2)
    trie.add(j(["$SYS", "#"]), "c6", 0)
    assert len(trie) == 6
    assert trie.filter_count == 5
    assert match_keys(trie, j(["a", "b", "c"])) == {"c1", "c2", "c3", "c4", "c5"}
    assert match_keys(trie, "a") == {"c2", "c3"}  # 'a/#' matches the parent
    assert match_keys(trie, j(["$SYS", "x"])) == {"c6"}  # '#' does not match '$' topics
    assert match_keys(trie, "$SYS") == {"c6"}
    assert match_keys(trie, j(["x", "$SYS"])) == {"c3"}
    trie.add(j(["a", "b", "c"]), "c4", 9)  # replace
    assert len(trie) == 6
    assert {"c4": 9, "c5": 2} in as_dicts(trie.match(j(["a", "b", "c"])))


def test_empty_levels_are_levels() -> None:
    trie: SubscriptionTrie[str, None] = SubscriptionTrie()
    trie.add("+/+", "two", None)
    trie.add("/+", "slash", None)
    trie.add("+", "one", None)
    assert match_keys(trie, "/finance") == {"two", "slash"}
    assert match_keys(trie, "finance") == {"one"}


def test_remove_prunes_every_node() -> None:
    trie: SubscriptionTrie[int, int] = SubscriptionTrie()
    filters = ["a/b/c", "a/+/c", "a/#", "#", "+/+/+/+", "x//y", "$SYS/+"]
    for n, f in enumerate(filters):
        trie.add(f, n, n)
        trie.add(f, n + 100, n)
    for _ in range(3):  # churn must not leave anything behind
        for n, f in enumerate(filters):
            assert trie.remove(f, n)
            assert trie.remove(f, n + 100)
            assert not trie.remove(f, n)
        assert len(trie) == 0
        assert trie.filter_count == 0
        assert trie.is_empty_structure()
        for n, f in enumerate(filters):
            trie.add(f, n, n)
            trie.add(f, n + 100, n)
    assert not trie.remove("never/added", 1)
    assert not trie.remove("a/b", 1)


def test_cache_sees_changes() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie(cache_size=2)
    assert trie.match("a/b") == ()
    gen = trie.generation
    trie.add("a/+", "k1", 1)
    assert trie.generation > gen
    assert match_keys(trie, "a/b") == {"k1"}
    trie.add("a/+", "k2", 1)  # same filter: the cached mapping is live
    assert match_keys(trie, "a/b") == {"k1", "k2"}
    trie.remove("a/+", "k1")
    assert match_keys(trie, "a/b") == {"k2"}
    trie.remove("a/+", "k2")
    assert match_keys(trie, "a/b") == set()
    for t in ["x", "y", "z", "w"]:  # more topics than the cache holds
        trie.match(t)


def test_invalid_filter_is_rejected_on_add() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    with pytest.raises(RuleError, match="'#' must be the last segment"):
        trie.add("a/#/b", "k", 1)
    with pytest.raises(ValueError):
        SubscriptionTrie(separator="//")


def test_filters_lists_every_subscription() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    for f in ["a", "a/#", "+/b", "#", "a//+"]:
        trie.add(f, f, 0)
    assert sorted(f for f, _ in trie.filters()) == sorted(["a", "a/#", "+/b", "#", "a//+"])


@st.composite
def filters(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from([*FILTER_LITERALS, "+"]), max_size=4))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return "/".join(body)


topics = (
    st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=5)
    .filter(lambda t: t != [""])
    .map("/".join)
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), filters(), st.integers(0, 4), st.integers(0, 3)),
        st.tuples(st.just("remove"), filters(), st.integers(0, 4), st.just(0)),
        st.tuples(st.just("match"), topics, st.just(0), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    ops,
    st.lists(topics, min_size=1, max_size=8),
    st.sampled_from([0, 1, 3, 4096]),
    st.sampled_from(["/", "."]),
)
def test_trie_equals_linear_scan(
    program: list[tuple[str, str, int, int]], probes: list[str], cache_size: int, sep: str
) -> None:
    trie: SubscriptionTrie[int, int] = SubscriptionTrie(separator=sep, cache_size=cache_size)
    model: dict[str, dict[int, int]] = {}
    program = [(op, arg.replace("/", sep), key, value) for op, arg, key, value in program]
    probes = [p.replace("/", sep) for p in probes]

    def check(topic: str) -> None:
        expected = sorted(
            sorted(subs.items())
            for f, subs in model.items()
            if subs and oracle_matches(f, topic, sep)
        )
        got = sorted(sorted(m.items()) for m in trie.match(topic))
        assert got == expected, topic

    for op, arg, key, value in program:
        if op == "add":
            trie.add(arg, key, value)
            model.setdefault(arg, {})[key] = value
        elif op == "remove":
            existed = key in model.get(arg, {})
            assert trie.remove(arg, key) == existed
            if existed:
                del model[arg][key]
        else:
            check(arg)
        assert len(trie) == sum(len(v) for v in model.values())
    for topic in probes:
        check(topic)
        check(topic)  # second time through the cache
    for f, subs in list(model.items()):
        for key in list(subs):
            assert trie.remove(f, key)
    assert len(trie) == 0 and trie.is_empty_structure()
