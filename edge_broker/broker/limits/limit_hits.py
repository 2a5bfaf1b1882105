"""Every time a configured bound refuses something: a counter per limit and a rate-limited
log line (issue 16 "crossing it gets ... a log line (rate-limited) and a counter").

A flood against one limit (a login storm, 300 half-open WebSockets) must not turn into a flood
of log lines: each limit logs at most one warning per ``interval`` seconds, and that line says
how many hits it stands for. The counters are published as ``$SYS/broker/limits/<key>/hits``
and as ``edge_broker_limit_hits_total{limit="<key>"}``; keys are the config keys the operator
would change (``limits.max_connect_packet_size``, ``passwords.max_waiting`` ...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("edge_broker.limits")

LOG_INTERVAL = 10.0  # seconds between two warnings about the same limit


class LimitHits:
    """Counters and log throttling for limit hits; one per broker."""

    __slots__ = ("counts", "interval", "_clock", "_logged_at", "_unlogged")

    def __init__(
        self, interval: float = LOG_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.counts: dict[str, int] = {}
        self.interval = interval
        self._clock = clock  # the broker's clock (Broker.clock)
        self._logged_at: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def hit(self, limit: str, message: str, client_id: str = "", now: float | None = None) -> None:
        """Count one hit of ``limit`` and log ``message`` unless this limit logged recently."""
        self.counts[limit] = self.counts.get(limit, 0) + 1
        now = self._clock() if now is None else now
        last = self._logged_at.get(limit)
        if last is not None and now - last < self.interval:
            self._unlogged[limit] = self._unlogged.get(limit, 0) + 1
            return
        self._logged_at[limit] = now
        skipped = self._unlogged.pop(limit, 0)
        suffix = f" ({skipped} more hit(s) since the last line about it)" if skipped else ""
        log.warning(
            f"{message}{suffix}",
            extra={
                "event": "limit_hit",
                "limit": limit,
                "client_id": client_id or None,
                "hits": self.counts[limit],
            },
        )

    def limits_key(self, key: str, client_id: str, what: str, now: float | None = None) -> None:
        """:meth:`hit` for the ``[limits]`` key ``key``: counted as ``limits.<key>``, and the log
        line starts with that name, so the operator reads which key to raise. ``what`` says what
        was refused, short (never a whole topic: ``matching.names.shown``)."""
        self.hit(f"limits.{key}", f"limits.{key}: {what}", client_id, now)
