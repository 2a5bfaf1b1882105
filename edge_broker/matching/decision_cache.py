"""Bounded caches invalidated by a generation number (PATTERNS.md "Matching structures":
cache decisions per (client, action, topic); any policy, token, claim or subscription change
bumps the generation; bounded size). When a cache is full it is emptied (the NATS sublist does
the same): cheap, and a hot working set refills in a few lookups.

:class:`DecisionCache`, for the gates: each entry remembers the generation it was computed in;
:meth:`DecisionCache.bump` is O(1) and makes every older entry invisible at once. The routing
tries keep a simpler result cache of their own (:mod:`.routing_index`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 65536


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
