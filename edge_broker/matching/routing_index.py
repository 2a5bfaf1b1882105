"""The bookkeeping both routing tries share (``subscription_trie``, ``pattern_trie``).

Their subscriber counts, generation and result cache in one place (PATTERNS.md "Matching
structures"). The cache is a plain dict emptied on every change that matters, so a hit costs one
dict lookup on the broker's hot path (no generation tag, no hit counter, unlike
:class:`~edge_broker.matching.decision_cache.DecisionCache`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Generic, TypeVar

SK = TypeVar("SK")  # a subscriber key (e.g. client id) of a routing index
SV = TypeVar("SV")  # its value (e.g. subscription options)

DEFAULT_RESULT_CACHE_SIZE = 4096
DEFAULT_RESULT_CACHE_BYTES = 1024 * 1024
"""Issue 16: the result cache is bounded in bytes too (topics are the keys): estimated as
the topic, the result tuple and a fixed overhead, see :meth:`RoutingIndex.match`."""


class RoutingIndex(ABC, Generic[SK, SV]):
    """The bookkeeping both routing tries share (:class:`SubscriptionTrie`, :class:`PatternTrie`).

    Every filter or pattern with at least one subscriber owns one dict ``key -> value``, and
    :meth:`match` returns those dicts themselves, one per matching filter. Because the dicts
    are live, a cached result stays right while keys come and go in a dict that keeps at least
    one; the generation moves (and the result cache is emptied) only when a dict gains its first
    key or loses its last one, which is exactly when the set of dicts changes (PATTERNS.md
    "Matching structures"). A full cache is emptied rather than evicted piecemeal, as in
    :class:`DecisionCache`. Subclasses hold the nodes and implement :meth:`_match`; they call
    :meth:`_subscribe` and :meth:`_unsubscribe` on the dict at the end of a filter's path.
    """

    __slots__ = (
        "_sep",
        "_count",
        "_mappings",
        "_generation",
        "_cache",
        "_cache_size",
        "_cache_bytes",
        "_cache_max_bytes",
    )

    def __init__(
        self, separator: str, cache_size: int, cache_bytes: int = DEFAULT_RESULT_CACHE_BYTES
    ) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self._sep = separator
        self._count = 0  # (filter, key) subscriptions
        self._mappings = 0  # filters with at least one key, i.e. dicts match can return
        self._generation = 0
        self._cache: dict[str, tuple[Mapping[SK, SV], ...]] = {}
        self._cache_size = cache_size
        self._cache_bytes = 0  # estimate of what the cached results hold
        self._cache_max_bytes = cache_bytes

    @property
    def generation(self) -> int:
        """Moves whenever the set of matching structures changes; cached results older than
        the current generation are never returned."""
        return self._generation

    @property
    def separator(self) -> str:
        return self._sep

    @property
    def cached_bytes(self) -> int:
        """The estimate of bytes the result cache holds (at most ``cache_bytes`` but one entry)."""
        return self._cache_bytes

    def __len__(self) -> int:
        """Number of (filter or pattern, key) subscriptions."""
        return self._count

    def match(self, topic: str) -> tuple[Mapping[SK, SV], ...]:
        """The subscriber mappings of every filter or pattern matching the concrete ``topic``
        (a seed 001 channel for a :class:`PatternTrie`).

        ``topic`` must be a valid topic name (the broker validates a PUBLISH before routing).
        """
        cached = self._cache.get(topic)
        if cached is not None:
            return cached
        result = self._match(topic)
        if self._cache_size:
            cost = 150 + len(topic) + 8 * len(result)
            if len(self._cache) >= self._cache_size or (
                self._cache_bytes + cost > self._cache_max_bytes
            ):
                self._cache.clear()
                self._cache_bytes = 0
            self._cache_bytes += cost
            self._cache[topic] = result
        return result

    @abstractmethod
    def _match(self, topic: str) -> tuple[Mapping[SK, SV], ...]:
        """The uncached walk of the subclass's nodes."""

    def _subscribe(self, subs: dict[SK, SV], key: SK, value: SV) -> None:
        """Store ``key -> value`` in the dict at the end of a filter's path; an empty ``subs``
        is one the caller has just created and attached."""
        if not subs:
            self._mappings += 1
            self._invalidate()
        if key not in subs:
            self._count += 1
        subs[key] = value

    def _unsubscribe(self, subs: dict[SK, SV], key: SK) -> bool:
        """Remove ``key`` (which must be there) from a filter's dict. True when that left the
        dict empty: the generation has moved, and the caller must detach the dict and prune
        the nodes that became empty."""
        del subs[key]
        self._count -= 1
        if subs:
            return False
        self._mappings -= 1
        self._invalidate()
        return True

    def _invalidate(self) -> None:
        self._generation += 1
        self._cache.clear()
        self._cache_bytes = 0
