"""Issue 16: the decision and routing caches are bounded in bytes, not only in entries."""

from __future__ import annotations

from edge_broker.authz.decision import GateName, deny
from edge_broker.matching.decision_cache import DecisionCache, entry_bytes
from edge_broker.matching.subscription_trie import SubscriptionTrie


def test_decision_cache_holds_at_most_its_byte_budget() -> None:
    cache: DecisionCache[tuple[str, str], object] = DecisionCache(65536, max_bytes=1_000_000)
    for i in range(2000):
        topic = f"t/{i}/" + "x" * 60_000
        cache.put(("client", topic), deny(GateName.PERMISSIONS, None, "denied"))
        assert cache.held_bytes <= 1_000_000
        assert cache.get(("client", topic)) is not None  # the newest entry is always kept
    assert len(cache) < 20


def test_entry_bytes_counts_key_strings_and_reason() -> None:
    small = entry_bytes(("c", "t"), deny(GateName.ACL, None, "r"))
    big = entry_bytes(("c", "t" * 10_000), deny(GateName.ACL, None, "r" * 5_000))
    assert big - small >= 14_990


def test_entry_larger_than_the_budget_is_not_cached() -> None:
    cache: DecisionCache[str, int] = DecisionCache(10, max_bytes=1000)
    cache.put("k" * 2000, 1)
    assert cache.get("k" * 2000) is None and len(cache) == 0


def test_routing_cache_is_bounded_in_bytes() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie("/")
    trie.add("#", "c", 1)
    for i in range(200):
        topic = f"{i}/" + "y" * 60_000
        assert trie.match(topic)[0] == {"c": 1}
    assert trie._cache_bytes <= 1024 * 1024
    assert len(trie._cache) <= 1024 * 1024 // 60_000 + 1
