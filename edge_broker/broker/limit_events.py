"""Limits crossed by clients (issue 16): one counter per ``[limits]`` key and a log line that
cannot flood the log.

Every refusal a limit causes goes through :meth:`LimitEvents.hit`: the counter behind
``$SYS/broker/limits/<key>/refused`` and ``edge_broker_limit_refused_total{limit=...}`` moves,
and a warning names the key, the client and what happened, at most once per
:data:`LOG_INTERVAL` seconds per key; the next line says how many were not logged in between
(20,000 refused retained messages write a handful of lines, not 21 MB).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("edge_broker.broker")

LOG_INTERVAL = 10.0  # seconds between two log lines about the same limit


class LimitEvents:
    """Counters and the rate-limited log of :mod:`limit_events` (one per Broker)."""

    __slots__ = ("counts", "_logged_at", "_unlogged")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # [limits] key -> refusals since start
        self._logged_at: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def hit(self, limit: str, client_id: str, what: str, now: float | None = None) -> None:
        """Count a refusal due to ``[limits] limit`` and log it unless one was logged recently.

        ``what`` says what was refused, short (never a whole topic: see :func:`shown`)."""
        self.counts[limit] = self.counts.get(limit, 0) + 1
        if now is None:
            now = time.monotonic()
        last = self._logged_at.get(limit)
        if last is not None and now - last < LOG_INTERVAL:
            self._unlogged[limit] = self._unlogged.get(limit, 0) + 1
            return
        self._logged_at[limit] = now
        skipped = self._unlogged.pop(limit, 0)
        more = f" ({skipped} more since the last line about it)" if skipped else ""
        log.warning(f"limits.{limit}: {what}{more}",
                    extra={"event": "limit", "limit": limit, "client_id": client_id,
                           "unlogged": skipped or None})
