"""Bounded caches invalidated by a generation number (PATTERNS.md "Matching structures":
cache decisions per (client, action, topic); any policy, token, claim or subscription change
bumps the generation; bounded size). When a cache is full it is emptied (the NATS sublist does
the same): cheap, and a hot working set refills in a few lookups.

:class:`DecisionCache`, for the gates: each entry remembers the generation it was computed in;
:meth:`DecisionCache.bump` is O(1) and makes every older entry invisible at once. The routing
tries keep a simpler result cache of their own (:mod:`.routing_index`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 65536
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""Issue 16: a count alone does not bound memory when keys hold topics of up to 64 KB (65,536
such entries were 4 GB). :func:`entry_bytes` estimates what an entry holds; a cache whose
estimate would pass ``max_bytes`` is emptied like a full one."""

ENTRY_OVERHEAD = 120  # dict slot, the (generation, value) tuple, the value object's header


def entry_bytes(key: object, value: object) -> int:
    """Estimated bytes an entry holds: its key's strings and the value's ``reason`` text (a
    Decision's Reason String) plus a fixed overhead. Called on misses only."""
    size = ENTRY_OVERHEAD + _size(key)
    reason = getattr(value, "reason", None)
    if type(reason) is str:
        size += 49 + len(reason)
    return size


def _size(obj: object) -> int:
    if isinstance(obj, (str, bytes)):
        return 49 + len(obj)
    if isinstance(obj, tuple):
        return 40 + sum(_size(part) for part in obj)
    return 16


class DecisionCache(Generic[K, V]):
    """``key -> value`` for the current generation only; at most ``max_entries`` entries and
    about ``max_bytes`` bytes (:func:`entry_bytes`).

    ``max_entries=0`` disables caching (every :meth:`get` misses) without changing callers.
    ``hits``/``misses`` count lookups for the metrics endpoint.
    """

    __slots__ = ("_entries", "_max", "_max_bytes", "_bytes", "_generation", "hits", "misses")

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self._entries: dict[K, tuple[int, V]] = {}
        self._max = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0  # estimate of what the entries hold (a replaced entry counts twice)
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

    @property
    def held_bytes(self) -> int:
        """The estimate of bytes the entries hold (at most ``max_bytes``)."""
        return self._bytes

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
        self._store(key, self._generation, value)

    def _store(self, key: K, generation: int, value: V) -> None:
        entries = self._entries
        cost = entry_bytes(key, value)
        if cost > self._max_bytes:
            return  # larger than the whole budget: never cached
        if (len(entries) >= self._max and key not in entries) or (
            self._bytes + cost > self._max_bytes
        ):
            entries.clear()
            self._bytes = 0
        self._bytes += cost
        entries[key] = (generation, value)

    def clear(self) -> None:
        """Drop every entry (the generation is kept)."""
        self._entries.clear()
        self._bytes = 0
