"""``Scheduler``: when the broker next has something to do, on the broker's one clock, and the
single asyncio timer that wakes it then (issue 21).

Every timed duty of the broker has a due time here: the deadlines of connections (keep alive,
connect timeout, token expiry), offline sessions (will delay, session expiry) are asked from
their heaps (``sources``, engine/deadlines.py), and the periodic duties (``$SYS``, audit flush
and ``client_stats``, the persistence probe, the topic-space sweep, the write-budget resample)
are named entries with their own period. ``Broker.tick(now)`` runs what is due and
:meth:`next_at` says when to come back, so an idle broker sleeps until then instead of waking
every half second; with no deadline and no periodic duty it does not wake at all.

The asyncio side is one ``TimerHandle`` (aioquic's ``_transmit_task`` shape): :meth:`arm`
moves it earlier when a new, earlier deadline appears (a Keep Alive agreed at CONNACK, a will
delay, a session expiry, a token), never later: a wake-up that finds nothing due re-arms at
the true next deadline, which costs one spurious wake instead of a cancel on every deadline
that moves later (each byte received moves a keep-alive deadline). Before :meth:`start` (the
in-memory harness, tests/broker/engine_harness.py) nothing is armed: the test drives
``tick`` itself, jumping from one :meth:`next_at` to the next.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from ..engine.deadlines import Deadlines


class Scheduler:
    """See the module docstring. ``clock`` is ``Broker.clock``; ``on_fire`` runs the broker's
    tick and is called by the armed timer once its time has come."""

    __slots__ = (
        "_clock",
        "_on_fire",
        "_duties",
        "_periods",
        "_sources",
        "_loop",
        "_handle",
        "_armed_at",
        "_held_until",
    )

    def __init__(self, clock: Callable[[], float], on_fire: Callable[[], None]) -> None:
        self._clock = clock
        self._on_fire = on_fire
        self._duties: Deadlines[str] = Deadlines()  # periodic duty → its next due time
        self._periods: dict[str, float] = {}
        self._sources: list[Callable[[], float | None]] = []  # the heaps' next_at
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = math.inf  # the broker-clock time the handle fires at
        self._held_until = -math.inf  # no wake-up before this (after a failed tick)

    def __contains__(self, name: object) -> bool:
        """Whether duty ``name`` is planned."""
        return name in self._duties

    # -- what is due ------------------------------------------------------------------------

    def add_source(self, next_at: Callable[[], float | None]) -> None:
        """Another heap of deadlines (its earliest live one, or None)."""
        self._sources.append(next_at)

    def every(self, name: str, period: float | None, now: float) -> None:
        """Run duty ``name`` every ``period`` seconds from ``now`` (None or 0: not at all). A
        duty already planned with the same period keeps its due time, so this may be called
        on every tick to say "while this condition holds"."""
        if not period:
            self._periods.pop(name, None)
            self._duties.discard(name)
            return
        if self._periods.get(name) == period and name in self._duties:
            return
        self._periods[name] = period
        self.at(name, now + period)

    def at(self, name: str, when: float) -> None:
        """Duty ``name`` is next due at ``when`` (its period, if any, continues from then)."""
        self._duties.set(name, when)
        self.arm(when)

    def due(self, now: float) -> set[str]:
        """The duties due at ``now``; each periodic one is planned again a period later."""
        names = self._duties.due(now)
        for name in names:
            period = self._periods.get(name)
            if period:
                self._duties.set(name, now + period)
        return set(names)

    def next_at(self) -> float | None:
        """The earliest due time of any duty or source; None: nothing is ever due."""
        times = [at for at in (source() for source in self._sources) if at is not None]
        duty = self._duties.next_at()
        if duty is not None:
            times.append(duty)
        return min(times, default=None)

    # -- the asyncio timer ------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Arm the timer from now on (``Broker.start``)."""
        self._loop = loop
        self.rearm()

    def stop(self) -> None:
        self._loop = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_at = math.inf

    def hold(self, until: float) -> None:
        """No wake-up before ``until`` (broker clock): after a tick that failed, whatever it
        left due is still due, and re-arming at once would spin the loop and flood the log;
        this retries it at the pace of the old half-second poll instead."""
        self._held_until = until

    def arm(self, when: float) -> None:
        """Wake the broker by ``when`` (broker clock); an earlier wake-up already armed stays."""
        when = max(when, self._held_until)
        loop = self._loop
        if loop is None or when >= self._armed_at:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = loop.call_later(max(0.0, when - self._clock()), self._fired)

    def rearm(self) -> None:
        """Arm at :meth:`next_at` (after a tick ran what was due)."""
        when = self.next_at()
        if when is not None:
            self.arm(when)

    def _fired(self) -> None:
        self._handle = None
        self._armed_at = math.inf
        self._on_fire()
        self.rearm()
