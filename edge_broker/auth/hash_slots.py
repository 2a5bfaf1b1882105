"""How many password hashes may be checked at once, and whose turn it is (issues 16 and 31).

argon2id allocates its whole memory cost (``m=`` in the hash string, in KiB) for the duration
of one check. Hashes made with the old default (64 MiB) and the new one (7 MiB) live side by
side in one password file, so a count alone cannot keep a login storm inside the memory budget:
each check takes ``min(m, max_memory)`` of the budget and waits until both a slot and that much
memory are free. A hash whose cost exceeds the budget runs alone.

The waiting line is bounded: past ``max_waiting_per_source`` waiters from one source (a client
address, auth/login_fairness.py ``login_source``), or ``max_waiting`` in all, a check is
refused at once (the broker answers CONNACK 0x89 Server busy) rather than queued for a CONNACK
it would only get after its connect timeout. A full line is shared out: a newcomer from a
source with fewer waiters than the longest line takes the place of that line's newest waiter
(refused 0x89 in its stead), so many addresses together cannot lock out one more either.

Fair between sources (issue 31 item 4): every source has its own line, and a freed slot goes to
the sources in turn (round robin), each line first come first served. One address flooding
wrong passwords (or unknown users, which cost the same dummy check so that their answer tells
nothing) therefore gets one check in every ``n + 1`` while ``n`` other sources wait, however
many CONNECTs it sends; the others never wait behind its whole line.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict, deque

from .errors import AuthError

_MEMORY_RE = re.compile(rb"\$m=(\d+),")


def hash_memory_kib(encoded: bytes) -> int:
    """The argon2 memory cost of an encoded hash string, in KiB (0 if it names none)."""
    match = _MEMORY_RE.search(encoded)
    return int(match.group(1)) if match else 0


class SlotsFull(AuthError):
    """The waiting line is full: in all (``limit`` ``passwords.max_waiting``) or for this
    source (``passwords.max_waiting_per_source``)."""

    def __init__(self, limit: str, waiting: int) -> None:
        super().__init__(f"{waiting} logins already waiting ({limit})")
        self.limit = limit
        self.waiting = waiting


_Waiter = tuple[int, "asyncio.Future[None]"]


class HashSlots:
    __slots__ = (
        "max_concurrent",
        "max_memory_kib",
        "max_waiting",
        "max_waiting_per_source",
        "_running",
        "_used_kib",
        "_waiting",
        "_lines",
    )

    def __init__(
        self,
        max_concurrent: int,
        max_memory_kib: int,
        max_waiting: int,
        max_waiting_per_source: int | None = None,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.max_memory_kib = max_memory_kib
        self.max_waiting = max_waiting
        self.max_waiting_per_source = (
            max_waiting if max_waiting_per_source is None else max_waiting_per_source
        )
        self._running = 0
        self._used_kib = 0
        self._waiting = 0
        # one line per source with waiters, in turn order (the next to be served first)
        self._lines: OrderedDict[str, deque[_Waiter]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return self._waiting

    def waiting_from(self, source: str) -> int:
        line = self._lines.get(source)
        return len(line) if line is not None else 0

    @property
    def sources_waiting(self) -> int:
        return len(self._lines)

    def _fits(self, kib: int) -> bool:
        return self._running < self.max_concurrent and (
            self._running == 0 or self._used_kib + kib <= self.max_memory_kib
        )

    async def acquire(self, kib: int, source: str = "") -> int:
        """Wait for a slot for a check of ``kib`` from ``source``; returns the weight to
        :meth:`release`. Raises :class:`SlotsFull` when the line (all, or the source's) is full."""
        kib = min(kib, self.max_memory_kib)
        if not self._waiting and self._fits(kib):
            self._take(kib)
            return kib
        line = self._lines.get(source)
        if line is not None and len(line) >= self.max_waiting_per_source:
            raise SlotsFull("passwords.max_waiting_per_source", len(line))
        if self._waiting >= self.max_waiting and not self._push_out(len(line) if line else 0):
            raise SlotsFull("passwords.max_waiting", self._waiting)
        if line is None:
            line = self._lines[source] = deque()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (kib, future)
        line.append(waiter)
        self._waiting += 1
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(kib)  # granted just as we were cancelled: give it back
            else:
                self._forget(source, waiter)
            raise
        return kib

    def _push_out(self, mine: int) -> bool:
        """The line is full: make room for a source with ``mine`` waiters by refusing the
        newest waiter of the longest line, if that line is longer than ``mine + 1`` (so that
        a full line is shared out: nobody is refused while another source holds more)."""
        if not self._lines:
            return False
        source, longest = max(self._lines.items(), key=_line_length)
        if len(longest) <= mine + 1:
            return False
        _, future = longest.pop()
        self._waiting -= 1
        if not longest:
            del self._lines[source]
        if not future.done():
            future.set_exception(SlotsFull("passwords.max_waiting", self._waiting + 1))
        return True

    def _forget(self, source: str, waiter: _Waiter) -> None:
        line = self._lines.get(source)
        if line is None:
            return
        try:
            line.remove(waiter)
        except ValueError:
            return
        self._waiting -= 1
        if not line:
            del self._lines[source]

    def _take(self, kib: int) -> None:
        self._running += 1
        self._used_kib += kib

    def release(self, kib: int) -> None:
        self._running -= 1
        self._used_kib -= kib
        lines = self._lines
        while lines:
            source, line = next(iter(lines.items()))
            head_kib, future = line[0]
            if future.cancelled():
                line.popleft()
                self._waiting -= 1
                if not line:
                    del lines[source]
                continue
            if not self._fits(head_kib):
                break  # the next in turn is not overtaken: a big check does not wait forever
            line.popleft()
            self._waiting -= 1
            if line:
                lines.move_to_end(source)  # its next check waits for every other source's turn
            else:
                del lines[source]
            self._take(head_kib)
            future.set_result(None)


def _line_length(item: tuple[str, deque[_Waiter]]) -> int:
    return len(item[1])
