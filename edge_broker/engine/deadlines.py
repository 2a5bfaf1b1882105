"""``Deadlines``: things that fall due at a time, earliest first, for a clock given from
outside (the broker's will delays and session expiries, MQTT 5 §3.1.3.2.2, §3.1.2.11.2).

A heap with lazy removal: :meth:`Deadlines.set` and :meth:`Deadlines.discard` cost
O(log n) and O(1), and :meth:`Deadlines.due` pops only what is due, so the broker's periodic
tick no longer walks every offline session. Entries made stale by a discard or a new time are
skipped when they surface; the heap is rebuilt when they outnumber the live ones, so clients
that reconnect often with long expiries cannot grow it without bound.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

_SLACK = 64  # stale entries tolerated before the heap is rebuilt, beyond twice the live ones


class Deadlines(Generic[K]):
    """See the module docstring. One deadline per key; keys compare by identity or value as
    their type does (sessions: by identity)."""

    __slots__ = ("_heap", "_at", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._at: dict[K, float] = {}
        self._seq = itertools.count()  # ties never compare the keys

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def set(self, key: K, at: float) -> None:
        """``key`` falls due at ``at`` (replacing any earlier deadline of it)."""
        self._at[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))
        if len(self._heap) > 2 * len(self._at) + _SLACK:
            self._heap = [(t, next(self._seq), k) for k, t in self._at.items()]
            heapq.heapify(self._heap)

    def discard(self, key: K) -> None:
        """``key`` no longer falls due (nothing happens if it had no deadline)."""
        self._at.pop(key, None)

    def due(self, now: float) -> list[K]:
        """Remove and return every key whose deadline is ``now`` or earlier, earliest first."""
        heap, live = self._heap, self._at
        out: list[K] = []
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if live.get(key) == at:
                del live[key]
                out.append(key)
        return out

    def next_at(self) -> float | None:
        """The earliest live deadline, if any."""
        heap, live = self._heap, self._at
        while heap and live.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None
