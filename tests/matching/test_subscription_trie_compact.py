"""The path-compressed SubscriptionTrie: exact on deep filters, canonical shape, bytes per entry.

The oracle test next door draws filters of up to 4 levels; here filters are deep (up to 12
levels from a small alphabet, so runs are shared, split and merged again) and the shape after
any add/remove history must equal the shape of a trie built fresh from the surviving filters.
"""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_oracle import oracle_matches

from edge_broker.matching import SubscriptionTrie

LEVELS = ["a", "b", "", "ab"]

deep_filters = st.builds(
    lambda body, tail: "/".join(body + (["#"] if tail else [])) or "#",
    st.lists(st.sampled_from([*LEVELS, "+"]), min_size=1, max_size=12),
    st.booleans(),
)
deep_topics = st.lists(st.sampled_from([*LEVELS, "$x"]), min_size=1, max_size=13).map("/".join)


def fresh_node_count(model: dict[str, set[int]]) -> int:
    trie: SubscriptionTrie[int, int] = SubscriptionTrie()
    for topic_filter, keys in sorted(model.items(), reverse=True):
        for key in keys:
            trie.add(topic_filter, key, key)
    return trie.node_count()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), deep_filters, st.integers(0, 2)), max_size=40),
    st.lists(deep_topics, min_size=1, max_size=10),
)
def test_deep_filters_match_exactly_and_shape_is_canonical(
    program: list[tuple[bool, str, int]], probes: list[str]
) -> None:
    trie: SubscriptionTrie[int, int] = SubscriptionTrie(cache_size=0)
    model: dict[str, set[int]] = {}
    for is_add, topic_filter, key in program:
        if is_add:
            trie.add(topic_filter, key, key)
            model.setdefault(topic_filter, set()).add(key)
        else:
            existed = key in model.get(topic_filter, set())
            assert trie.remove(topic_filter, key) == existed
            if existed:
                model[topic_filter].discard(key)
                if not model[topic_filter]:
                    del model[topic_filter]
        assert trie.node_count() == fresh_node_count(model)
    for topic in probes:
        got = sorted(sorted(m) for m in trie.match(topic))
        want = sorted(sorted(keys) for f, keys in model.items() if oracle_matches(f, topic, "/"))
        assert got == want, topic
    assert sorted(f for f, _ in trie.filters()) == sorted(model)


def test_a_deep_filter_is_one_node() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    trie.add("/".join(f"level{i}" for i in range(32)), "c", 1)
    assert trie.node_count() == 1
    trie.add("/".join(f"level{i}" for i in range(16)) + "/+/x", "c", 2)
    # the run splits once where the second filter leaves it; '+' then 'x' is one node
    assert trie.node_count() == 3
    trie.remove("/".join(f"level{i}" for i in range(32)), "c")
    assert trie.node_count() == 2  # the tail went: the run, then '+' with its 'x'


def test_bytes_per_deep_subscription_are_about_its_bytes() -> None:
    """Issue: 32-level 1 KB filters cost ~12 kB each with one node and dict per level."""
    n = 300
    filters = [
        "/".join(f"{c:04d}" + "x" * 27 for _ in range(32))[:1000] + f"/{c}"
        for c in range(n)  # distinct from the first level on: nothing shared
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trie: SubscriptionTrie[str, int] = SubscriptionTrie()
        for topic_filter in filters:
            trie.add(topic_filter, "client", 1)
        per_filter = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_filter < 1000 + 600, per_filter  # the run's bytes, one node, one dict entry
