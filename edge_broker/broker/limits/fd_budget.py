"""Connections within the process's file-descriptor limit (issue 16: 300 half-open WebSockets
under a 256-descriptor limit locked every client out and made asyncio log 58k accept errors).

When ``accept()`` fails with EMFILE, asyncio (3.11) logs the error with a traceback for each of
up to ``backlog`` attempts and schedules as many retries: a log flood, while the descriptors
stay held. So the broker keeps connections below the limit: a connection accepted beyond
``soft limit - FD_RESERVE`` is closed at once, like one beyond ``max_connections + 64``. One
accept burst (asyncio accepts up to ``backlog`` sockets before any of them reaches the broker)
can still touch the limit; that accept error is counted and logged at most once per 10 s,
without a traceback, and the descriptors come back as the extra connections close. At start the
soft limit is raised towards the hard limit as far as ``max_connections`` needs (systemd's
default soft limit is 1024, its hard limit much higher).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from .limit_hits import LimitHits

log = logging.getLogger("edge_broker.broker")

FD_RESERVE = 32  # listeners, stores, logs, stdio, the event loop's own and a worker thread's
BEFORE_CONNECT_SLACK = 64  # connections past max_connections still accepted (refused at CONNECT)
LIMIT_KEY = "RLIMIT_NOFILE"
EVICT_AFTER = 1.0  # seconds a socket may sit without CONNECT before a newcomer may replace it


def raise_soft_limit(max_connections: int) -> int:
    """Raise the soft descriptor limit as far as ``max_connections`` needs (never beyond the
    hard limit); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + BEFORE_CONNECT_SLACK + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning(
            f"the file descriptor limit ({soft}) allows about {soft - FD_RESERVE} connections, "
            f"fewer than limits.max_connections ({max_connections}) + {BEFORE_CONNECT_SLACK}: "
            "raise LimitNOFILE in the systemd unit (or ulimit -n) or lower max_connections",
            extra={"event": "fd_limit_low", "limit": soft},
        )
    return int(soft)


def connection_cap(max_connections: int) -> int:
    """How many connections may be open at once (read at each accept: the limit can change)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    cap = max_connections + BEFORE_CONNECT_SLACK
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(1, min(cap, int(soft) - FD_RESERVE))


def log_cap_change(old: int, new: int) -> None:
    """One line when the descriptor limit moved the connection cap (``prlimit`` on a running
    broker, read at each accept), so the operator sees the new bound before any refusal."""
    log.info(
        f"connections capped at {new} (was {old}): RLIMIT_NOFILE is now "
        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}",
        extra={"event": "connection_cap", "cap": new},
    )


def accept_error_handler(
    hits: LimitHits,
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """A loop exception handler that turns asyncio's accept errors into counted, rate-limited
    warnings and passes everything else to the default handler."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            exc = context.get("exception")
            hits.hit(
                LIMIT_KEY,
                f"accept failed ({exc}): the process is out of file descriptors; "
                "connections are capped below the limit, raise LimitNOFILE",
            )
            return
        loop.default_exception_handler(context)

    return handle


def mqtt_reserve(soft: int) -> int:
    """Descriptors no HTTP server may take (issue 31 item 5): half of what the limit leaves
    after ``FD_RESERVE``, so ~350 idle sockets to the metrics port never lock out a CONNECT."""
    return max(1, (soft - FD_RESERVE) // 2)


def http_may_open(mqtt_open: int, http_open: int) -> bool:
    """May an HTTP server (metrics, admin) accept one more connection? Only while the MQTT
    listeners keep :func:`mqtt_reserve` descriptors free beyond what they hold now."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return True
    free = int(soft) - FD_RESERVE - mqtt_open - http_open
    return free > mqtt_reserve(int(soft))


class _Waiting(Protocol):
    """A connection as the eviction sees it (``broker.connection.Connection``)."""

    @property
    def awaiting_connect(self) -> bool: ...
    @property
    def closing(self) -> bool: ...
    @property
    def opened_at(self) -> float: ...


W = TypeVar("W", bound=_Waiting)


def oldest_unauthenticated(connections: Iterable[W], opened_before: float) -> W | None:
    """The connection that has waited longest without a CONNECT (a half-open socket, an
    unfinished WebSocket upgrade), if it was opened before ``opened_before``."""
    oldest: W | None = None
    for conn in connections:
        if not conn.awaiting_connect or conn.closing or conn.opened_at >= opened_before:
            continue
        if oldest is None or conn.opened_at < oldest.opened_at:
            oldest = conn
    return oldest
