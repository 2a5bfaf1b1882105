"""Bounded caches invalidated by a generation number (PATTERNS.md "Matching structures":
cache decisions per (client, action, topic); any policy, token, claim or subscription change
bumps the generation; bounded size). When a cache is full it is emptied (the NATS sublist does
the same): cheap, and a hot working set refills in a few lookups.

- :class:`DecisionCache`, for the gates: each entry remembers the generation it was computed
  in; :meth:`DecisionCache.bump` is O(1) and makes every older entry invisible at once.
- :class:`RoutingIndex`, the base of the two routing tries (``subscription_trie``,
  ``pattern_trie``): their subscriber bookkeeping, generation and result cache in one place.
  Its cache is a plain dict emptied on every change, so a hit costs one dict lookup on the
  broker's hot path (no generation tag, no hit counter).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
SK = TypeVar("SK")  # a subscriber key (e.g. client id) of a routing index
SV = TypeVar("SV")  # its value (e.g. subscription options)

DEFAULT_MAX_ENTRIES = 65536
DEFAULT_RESULT_CACHE_SIZE = 4096


class DecisionCache(Generic[K, V]):
    """``key -> value`` for the current generation only; at most ``max_entries`` entries.

    ``max_entries=0`` disables caching (every :meth:`get` misses) without changing callers.
    ``hits``/``misses`` count lookups for the metrics endpoint.
    """

    __slots__ = ("_entries", "_max", "_generation", "hits", "misses")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self._entries: dict[K, tuple[int, V]] = {}
        self._max = max_entries
        self._generation = 0
        self.hits = 0
        self.misses = 0

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def max_entries(self) -> int:
        return self._max

    def __len__(self) -> int:
        """Stored entries, stale ones included (they are dropped when the cache fills)."""
        return len(self._entries)

    def bump(self) -> int:
        """Invalidate every cached decision; returns the new generation."""
        self._generation += 1
        return self._generation

    def get(self, key: K) -> V | None:
        """The value cached for ``key`` in the current generation, else ``None``."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] == self._generation:
            self.hits += 1
            return entry[1]
        self.misses += 1
        return None

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` for ``key`` in the current generation."""
        if not self._max:
            return
        entries = self._entries
        if len(entries) >= self._max and key not in entries:
            entries.clear()
        entries[key] = (self._generation, value)

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The cached value, or ``compute()`` stored for the current generation.

        If ``compute`` itself bumps the generation (say it reloads a policy), its result is
        returned but not cached, since it may predate the change.
        """
        entry = self._entries.get(key)
        generation = self._generation
        if entry is not None and entry[0] == generation:
            self.hits += 1
            return entry[1]
        self.misses += 1
        value = compute()
        if self._max and generation == self._generation:
            entries = self._entries
            if len(entries) >= self._max and key not in entries:
                entries.clear()
            entries[key] = (generation, value)
        return value

    def clear(self) -> None:
        """Drop every entry (the generation is kept)."""
        self._entries.clear()


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

    __slots__ = ("_sep", "_count", "_mappings", "_generation", "_cache", "_cache_size")

    def __init__(self, separator: str, cache_size: int) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self._sep = separator
        self._count = 0  # (filter, key) subscriptions
        self._mappings = 0  # filters with at least one key, i.e. dicts match can return
        self._generation = 0
        self._cache: dict[str, tuple[Mapping[SK, SV], ...]] = {}
        self._cache_size = cache_size

    @property
    def generation(self) -> int:
        """Moves whenever the set of matching structures changes; cached results older than
        the current generation are never returned."""
        return self._generation

    @property
    def separator(self) -> str:
        return self._sep

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
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[topic] = result
        return result

    def match_keys(self, topic: str) -> set[SK]:
        """The set of keys subscribed through at least one filter or pattern matching ``topic``."""
        keys: set[SK] = set()
        for subs in self.match(topic):
            keys.update(subs)
        return keys

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
