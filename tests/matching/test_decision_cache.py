"""DecisionCache: generation invalidation and the size bound; RoutingIndex: the counts,
generation and result cache both routing tries share."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching import (
    DecisionCache,
    PatternTrie,
    SubscriptionTrie,
    pattern_trie,
    subscription_trie,
)
from edge_broker.matching.routing_index import RoutingIndex
from tests.matching.trie_keys import match_keys


def test_bump_hides_older_decisions() -> None:
    cache: DecisionCache[tuple[str, str, str], bool] = DecisionCache(max_entries=8)
    key = ("client1", "publish", "a/b")
    assert cache.get(key) is None
    cache.put(key, True)
    assert cache.get(key) is True
    assert cache.bump() == 1
    assert cache.get(key) is None
    cache.put(key, False)
    assert cache.get(key) is False
    assert (cache.hits, cache.misses) == (2, 2)


def test_size_is_bounded() -> None:
    cache: DecisionCache[int, int] = DecisionCache(max_entries=3)
    for i in range(100):
        cache.put(i, i)
        assert len(cache) <= 3
        assert cache.get(i) == i
    cache.clear()
    for i in range(3):
        cache.put(i, i)
    cache.put(2, 7)  # replacing an existing key never empties a full cache
    assert [cache.get(i) for i in range(3)] == [0, 1, 7]


def test_disabled_cache_never_hits() -> None:
    cache: DecisionCache[str, int] = DecisionCache(max_entries=0)
    cache.put("a", 1)
    assert cache.get("a") is None
    assert len(cache) == 0
    with pytest.raises(ValueError):
        DecisionCache(max_entries=-1)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.integers(0, 9), st.integers()),
            st.tuples(st.just("get"), st.integers(0, 9), st.just(0)),
            st.tuples(st.just("bump"), st.just(0), st.just(0)),
        ),
        max_size=80,
    ),
    st.integers(1, 6),
)
def test_never_returns_a_stale_or_wrong_value(ops: list[tuple[str, int, int]], size: int) -> None:
    cache: DecisionCache[int, int] = DecisionCache(max_entries=size)
    truth: dict[int, int] = {}  # what was put in the current generation
    for op, key, value in ops:
        if op == "put":
            cache.put(key, value)
            truth[key] = value
        elif op == "bump":
            cache.bump()
            truth.clear()
        else:
            got = cache.get(key)
            assert got is None or got == truth.get(key)
        assert len(cache) <= size


# RoutingIndex: the bookkeeping both routing tries share, checked through both of them.

Index = SubscriptionTrie[str, int] | PatternTrie[str, int]
TRIES = [SubscriptionTrie, PatternTrie]
# Filters both languages read alike with '/' ('+' is '*' to a PatternTrie); no '$' topics,
# where the MQTT '$' rule would set them apart.
SHARED_FILTERS = ["a/b", "a/+", "a/#", "#", "+/b", "+/+/c"]
SHARED_TOPICS = ["a", "a/b", "b/b", "a/b/c", "x/y/c", "x"]


def test_routing_index_cannot_be_used_without_a_trie() -> None:
    with pytest.raises(TypeError, match="abstract"):
        RoutingIndex("/", 0)  # type: ignore[abstract]


@pytest.mark.parametrize("make", TRIES)
def test_generation_moves_only_when_a_filter_gains_or_loses_its_last_key(
    make: type[Index],
) -> None:
    trie: Index = make("/", 16)
    assert (trie.generation, len(trie), trie.separator) == (0, 0, "/")
    empty = trie.match("a/b")
    assert empty == () and trie.match("a/b") is empty  # cached
    trie.add("a/+", "k1", 1)
    assert trie.generation == 1 and len(trie) == 1
    first = trie.match("a/b")
    assert [dict(m) for m in first] == [{"k1": 1}]
    trie.add("a/+", "k2", 2)  # same filter: no new dict, so the cached tuple stays right
    trie.add("a/+", "k1", 3)  # a replaced value is not a new subscription
    assert trie.generation == 1 and len(trie) == 2
    assert trie.match("a/b") is first and dict(first[0]) == {"k1": 3, "k2": 2}
    assert trie.remove("a/+", "k1") and trie.generation == 1 and len(trie) == 1
    assert not trie.remove("a/+", "k1") and not trie.remove("a/b", "k2")
    assert trie.generation == 1
    assert trie.remove("a/+", "k2")
    assert trie.generation == 2 and len(trie) == 0
    assert trie.match("a/b") == () and match_keys(trie, "a/b") == set()
    assert trie.is_empty_structure()


@pytest.mark.parametrize("make", TRIES)
def test_both_tries_refuse_a_negative_cache_size_alike(make: type[Index]) -> None:
    with pytest.raises(ValueError, match=r"^cache_size must be >= 0, got -1$"):
        make("/", -1)


def test_both_tries_default_to_the_same_cache_size() -> None:
    assert subscription_trie.DEFAULT_CACHE_SIZE == pattern_trie.DEFAULT_CACHE_SIZE
    assert SubscriptionTrie[str, int]()._cache_size == PatternTrie[str, int]()._cache_size


routing_ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "match"]),
        st.sampled_from(SHARED_FILTERS),
        st.sampled_from(SHARED_TOPICS),
        st.sampled_from(["k0", "k1", "k2"]),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(routing_ops, st.sampled_from(TRIES), st.sampled_from([1, 2, 5]))
def test_cached_index_keeps_the_books_of_an_uncached_one(
    ops: list[tuple[str, str, str, str]], make: type[Index], cache_size: int
) -> None:
    trie: Index = make("/", cache_size)
    plain: Index = make("/", 0)  # the same trie with its result cache off
    model: dict[str, dict[str, int]] = {}
    for n, (op, topic_filter, topic, key) in enumerate(ops):
        live_before = {f for f, subs in model.items() if subs}
        generation = trie.generation
        if op == "add":
            trie.add(topic_filter, key, n)
            plain.add(topic_filter, key, n)
            model.setdefault(topic_filter, {})[key] = n
        elif op == "remove":
            there = key in model.get(topic_filter, {})
            assert trie.remove(topic_filter, key) is there
            assert plain.remove(topic_filter, key) is there
            model.get(topic_filter, {}).pop(key, None)
        else:
            got = sorted(sorted(m.items()) for m in trie.match(topic))
            assert got == sorted(sorted(m.items()) for m in plain.match(topic))
            assert match_keys(trie, topic) == match_keys(plain, topic)
        live = {f for f, subs in model.items() if subs}
        assert trie.generation == generation + (live != live_before)
        assert len(trie) == sum(len(subs) for subs in model.values())
        count = trie.filter_count if isinstance(trie, SubscriptionTrie) else trie.pattern_count
        assert count == len(live)
        assert len(trie._cache) <= cache_size and not plain._cache
