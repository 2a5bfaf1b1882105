"""Broker counters behind ``$SYS/broker/...`` (names as Mosquitto's, DESIGN.md)."""

from __future__ import annotations

import time
from collections.abc import Callable


class BrokerStats:
    """Plain integer counters, bumped on the hot path (no locks: one event loop)."""

    __slots__ = (
        "_clock",
        "started",
        "clients_connected",
        "clients_maximum",
        "connections_total",
        "messages_received",
        "messages_sent",
        "bytes_received",
        "bytes_sent",
        "dropped",
        "dropped_oversize",
        "protocol_errors",
        "connections_refused",
        "publish_denied",
        "subscribe_denied",
        "subscriptions_removed",
        "deliveries_revoked",
        "wills_denied",
        "sessions_refused",
        "connections_revoked",
    )

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # the broker's clock (Broker.clock): uptime is on it too
        self.started = clock()
        self.clients_connected = 0
        self.clients_maximum = 0
        self.connections_total = 0
        self.messages_received = 0
        self.messages_sent = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self.dropped = 0  # QoS 0 to slow clients, full queues
        self.dropped_oversize = 0  # larger than the client's Maximum Packet Size
        self.protocol_errors = 0
        self.connections_refused = 0
        self.publish_denied = 0
        self.subscribe_denied = 0
        self.subscriptions_removed = 0  # by a policy change (reload, bundle)
        # issue 15 (broker/rejudge.py, broker/ownership.py)
        self.deliveries_revoked = 0  # queued / in-flight messages the receiver lost the right to
        self.wills_denied = 0  # wills refused when they were due to be published
        self.sessions_refused = 0  # CONNECTs refused: the session belongs to another principal
        self.connections_revoked = 0  # live connections ended by a reload (password entry)

    def uptime(self) -> int:
        return int(self._clock() - self.started)


def resident_bytes() -> int | None:
    """The process's resident set (Linux ``/proc/self/statm``), None elsewhere: what the
    metrics endpoint and the admin API's overview report."""
    import os

    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
