"""Repeated identical decisions become one audit record with a ``count``, and one log line.

A client that repeats a refused request (a device retrying a wrong password, a bridge whose
principal may publish nothing, a flood of claims) would otherwise write one record and one INFO
line per attempt, and rotate real security events out of the bounded audit log (``log.py``).

Per key (every field of the record but its time: client, user, action, topic, gate, rule, rc,
reason, ...): the first occurrence is written at once, as before, and opens a *window* of
``[audit] aggregate_window`` seconds; repeats inside the window are only counted. When the
window ends and there were repeats, one record with the same fields plus ``count`` (the
repeats), ``first_ts`` and ``last_ts`` is written, and the key is forgotten: the next
occurrence opens a new window. A key therefore writes at most two records per window however
fast it repeats, and summing ``count`` (absent: 1) over the records gives the true number.

Memory is bounded by ``[audit] aggregate_max_keys`` open keys, holding at most
``aggregate_max_keys * KEY_BYTES`` bytes of text (a client chooses its topics, up to 64 KB
each). Past either cap, a new key is not
written but counted in one ``audit_overflow`` event (``count``, ``first_ts``, ``last_ts``)
written when its own window ends, and a warning is logged once per window: the loss is visible,
never silent, and the log stays bounded (at most ``2 * max_keys + 1`` records per window).

Windows run on the broker's clock (``clock``); the times written are wall-clock (``wall``). The
broker asks :meth:`DecisionWindow.next_due` when to come back and calls :meth:`expire` then,
and :meth:`close` at shutdown writes what is still open.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("edge_broker.audit")

DEFAULT_WINDOW = 60.0
DEFAULT_MAX_KEYS = 2000

Line = Callable[[int, float], None]
"""Logs the line of a decision: ``(0, 0)`` for the first occurrence, ``(repeats, seconds)``
for the summary at the end of its window."""


# Bytes one open key may hold on average: the key cap alone does not bound memory, since a
# client chooses its topics (1,500 denied publishes to distinct 60 KB topics held +106 MB).
# Past max_keys * KEY_BYTES of open keys' text, new keys overflow as past the key cap.
KEY_BYTES = 1024
_ENTRY_OVERHEAD = 200  # the key tuple, the dicts and the entry, beyond the text they hold


def _weight(fields: dict[str, Any]) -> int:
    return _ENTRY_OVERHEAD + sum(len(v) for v in fields.values() if isinstance(v, str))


@dataclass(slots=True)
class _Open:
    type_: str
    fields: dict[str, Any]
    line: Line | None
    ends: float  # broker clock
    weight: int = 0
    repeats: int = 0
    first_ts: float = 0.0  # wall clock of the first repeat
    last_ts: float = 0.0


@dataclass(slots=True)
class _Overflow:
    ends: float
    count: int
    first_ts: float
    last_ts: float


def _key(type_: str, fields: dict[str, Any]) -> tuple[Any, ...]:
    return (
        type_,
        *((k, tuple(v) if isinstance(v, list) else v) for k, v in fields.items() if v is not None),
    )


class DecisionWindow:
    """The aggregation of the module docstring, in front of an audit log (or of the log lines
    alone when no ``[audit] dir`` is configured: ``audit`` is then None)."""

    def __init__(
        self,
        audit: Any,
        *,
        window: float = DEFAULT_WINDOW,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if window < 0:
            raise ValueError(f"aggregate_window must be >= 0 seconds, not {window}")
        if max_keys < 1:
            raise ValueError(f"aggregate_max_keys must be at least 1, not {max_keys}")
        self.audit = audit  # AuditLog | None
        self.window = float(window)
        self.max_keys = max_keys
        self.clock = clock
        self.wall = wall
        self._open: dict[tuple[Any, ...], _Open] = {}
        self._bytes = 0  # what the open keys hold (_weight), at most max_keys * KEY_BYTES
        self._overflow: _Overflow | None = None
        # the broker arms its timer for this time (broker clock) when a window opens
        self.on_due: Callable[[float], None] | None = None
        # the admin API's ring of recent denials (broker/operator.py): every denial, before
        # aggregation; None (no cost) unless [admin] runs
        self.on_denial: Callable[[str, dict[str, Any]], None] | None = None

    @property
    def log_allowed(self) -> bool:
        """``[audit] log_allowed``: the gates write allowed decisions too."""
        return self.audit is not None and bool(self.audit.log_allowed)

    @property
    def open_keys(self) -> int:
        return len(self._open)

    # -- recording --------------------------------------------------------------------------

    def decision(self, line: Line | None = None, **fields: Any) -> None:
        self.note("decision", fields, line)

    def note(self, type_: str, fields: dict[str, Any], line: Line | None = None) -> None:
        """One occurrence of a ``type_`` record (``decision`` or ``event``) with ``fields``."""
        if self.on_denial is not None and fields.get("outcome") in ("deny", "disconnect"):
            self.on_denial(type_, fields)
        if self.window <= 0:  # aggregation off: every occurrence written and logged
            self._write(type_, fields)
            if line is not None:
                line(0, 0.0)
            return
        key = _key(type_, fields)
        found = self._open.get(key)
        if found is not None:
            now = self.wall()
            if not found.repeats:
                found.first_ts = now
            found.repeats += 1
            found.last_ts = now
            return
        weight = _weight(fields)
        if len(self._open) >= self.max_keys or self._bytes + weight > self.max_keys * KEY_BYTES:
            self._overflowed()
            return
        ends = self.clock() + self.window
        self._open[key] = _Open(type_, fields, line, ends, weight)
        self._bytes += weight
        self._write(type_, fields)
        if line is not None:
            line(0, 0.0)
        if self.on_due is not None and len(self._open) == 1:
            self.on_due(ends)

    def _overflowed(self) -> None:
        now = self.wall()
        over = self._overflow
        if over is None:
            ends = self.clock() + self.window
            self._overflow = _Overflow(ends, 1, now, now)
            log.warning(
                "audit aggregation holds %d distinct keys ([audit] aggregate_max_keys): further "
                "distinct decisions are counted in one audit_overflow record until the window "
                "ends",
                self.max_keys,
                extra={"event": "audit_overflow", "max_keys": self.max_keys},
            )
            if self.on_due is not None:
                self.on_due(ends)
            return
        over.count += 1
        over.last_ts = now

    def _write(self, type_: str, fields: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.record(type_, **fields)

    # -- windows ending ---------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When the earliest open window ends (broker clock), or None."""
        first = next(iter(self._open.values()), None)
        times = [x.ends for x in (first, self._overflow) if x is not None]
        return min(times, default=None)

    def expire(self, now: float) -> None:
        """Write the summaries of the windows that ended by ``now`` (broker clock)."""
        # windows open in order of their end (the window length is fixed): stop at the first
        # still open
        while self._open:
            key, found = next(iter(self._open.items()))
            if found.ends > now:
                break
            del self._open[key]
            self._bytes -= found.weight
            if found.repeats:
                self._write(
                    found.type_,
                    {
                        **found.fields,
                        "count": found.repeats,
                        "first_ts": round(found.first_ts, 3),
                        "last_ts": round(found.last_ts, 3),
                    },
                )
                if found.line is not None:
                    found.line(found.repeats, found.last_ts - found.first_ts)
        over = self._overflow
        if over is not None and over.ends <= now:
            self._overflow = None
            self._write(
                "event",
                {
                    "event": "audit_overflow",
                    "count": over.count,
                    "first_ts": round(over.first_ts, 3),
                    "last_ts": round(over.last_ts, 3),
                    "detail": (
                        f"{over.count} decision(s) beyond [audit] aggregate_max_keys = "
                        f"{self.max_keys} distinct keys were counted, not written"
                    ),
                },
            )
            log.warning(
                "%d audit decision(s) beyond [audit] aggregate_max_keys were counted, not written",
                over.count,
                extra={"event": "audit_overflow", "count": over.count},
            )

    def close(self) -> None:
        """Shutdown: every open window ends now."""
        self.expire(math.inf)
