"""DecisionCache: generation invalidation and the size bound."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching import DecisionCache


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
    assert cache.get_or_compute("a", lambda: 5) == 5
    assert len(cache) == 0
    with pytest.raises(ValueError):
        DecisionCache(max_entries=-1)


def test_get_or_compute_does_not_cache_across_a_bump() -> None:
    cache: DecisionCache[str, int] = DecisionCache()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert cache.get_or_compute("k", compute) == 1
    assert cache.get_or_compute("k", compute) == 1
    cache.bump()
    assert cache.get_or_compute("k", compute) == 2

    def bumping() -> int:
        cache.bump()
        return 99

    assert cache.get_or_compute("j", bumping) == 99
    assert cache.get("j") is None


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
