"""How many password hashes may be checked at once: bounded by count and by memory (issue 16).

argon2id allocates its whole memory cost (``m=`` in the hash string, in KiB) for the duration
of one check. Hashes made with the old default (64 MiB) and the new one (7 MiB) live side by
side in one password file, so a count alone cannot keep a login storm inside the memory budget:
each check takes ``min(m, max_memory)`` of the budget and waits, first come first served,
until both a slot and that much memory are free. A hash whose cost exceeds the budget runs alone.

The waiting line is bounded too: past ``max_waiting`` waiters a check is refused at once
(the broker answers CONNACK 0x89 Server busy) rather than queued for a CONNACK it would only get
after its connect timeout.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque

from .errors import AuthError

_MEMORY_RE = re.compile(rb"\$m=(\d+),")


def hash_memory_kib(encoded: bytes) -> int:
    """The argon2 memory cost of an encoded hash string, in KiB (0 if it names none)."""
    match = _MEMORY_RE.search(encoded)
    return int(match.group(1)) if match else 0


class SlotsFull(AuthError):
    """More than ``max_waiting`` checks are already waiting."""


class HashSlots:
    __slots__ = (
        "max_concurrent",
        "max_memory_kib",
        "max_waiting",
        "_running",
        "_used_kib",
        "_waiters",
    )

    def __init__(self, max_concurrent: int, max_memory_kib: int, max_waiting: int) -> None:
        self.max_concurrent = max_concurrent
        self.max_memory_kib = max_memory_kib
        self.max_waiting = max_waiting
        self._running = 0
        self._used_kib = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _fits(self, kib: int) -> bool:
        return self._running < self.max_concurrent and (
            self._running == 0 or self._used_kib + kib <= self.max_memory_kib
        )

    async def acquire(self, kib: int) -> int:
        """Wait for a slot for a check of ``kib``; returns the weight to :meth:`release`."""
        kib = min(kib, self.max_memory_kib)
        if not self._waiters and self._fits(kib):
            self._take(kib)
            return kib
        if len(self._waiters) >= self.max_waiting:
            raise SlotsFull
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (kib, future)
        self._waiters.append(waiter)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(kib)  # granted just as we were cancelled: give it back
            else:
                self._waiters.remove(waiter)
            raise
        return kib

    def _take(self, kib: int) -> None:
        self._running += 1
        self._used_kib += kib

    def release(self, kib: int) -> None:
        self._running -= 1
        self._used_kib -= kib
        while self._waiters:
            head_kib, future = self._waiters[0]
            if future.cancelled():
                self._waiters.popleft()
                continue
            if not self._fits(head_kib):
                break  # first come first served: a big check is not overtaken forever
            self._waiters.popleft()
            self._take(head_kib)
            future.set_result(None)
