"""Bytes waiting in the transports' write buffers, bounded broker-wide (issue 16,
docs/limits-memory.md).

One connection's transport buffer is bounded by ``limits.write_buffer_high`` (past it the
connection is slow: ``pause_writing``). Over 2,000 connections that is 500 MiB, so the sum has
its own bound, ``limits.max_write_buffer_total``: while the broker's transports hold more than
that, a connection that writes and cannot send everything at once is held back as if it had
passed its own high-water mark (its transport is told ``high = low = 0``), until its buffer is
empty again. A held-back connection receives no new deliveries: QoS 0 messages are dropped and
counted, QoS 1/2 wait in the session queue under its limits and ``queue_overflow``
(broker/delivery.py), never in the transport. Each hold is counted and logged as
``limits.max_write_buffer_total``.

The sum is what each transport reported after our last write to it; buffers that drain without
a write are sampled again every broker tick (``resample``), so between two ticks the sum may be
high, never low. The bound can be passed by what one event-loop turn writes to each connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...config import Config
    from .limit_hits import LimitHits

LIMIT_KEY = "max_write_buffer_total"


class LimitsHost(Protocol):
    """Where a broker-wide bound reads its limits (``Broker`` is one): the config at each use,
    since a reload swaps it, and the counters of refusals."""

    @property
    def config(self) -> Config: ...

    @property
    def limit_hits(self) -> LimitHits: ...


class Writer(Protocol):
    """What the budget reads and sets on a connection (``Connection`` is one)."""

    transport: Any  # its asyncio transport; None once closed
    write_held: int  # bytes of it counted in ``WriteBudget.total``
    held_back: bool

    @property
    def client_id(self) -> str: ...


class WriteBudget:
    """See the module docstring; one per broker. ``total``: bytes the transports hold."""

    __slots__ = ("broker", "total", "_holding")

    def __init__(self, broker: LimitsHost) -> None:
        self.broker = broker
        self.total = 0
        self._holding: set[Writer] = set()  # connections whose transports hold bytes

    def after_write(self, conn: Writer) -> None:
        """``conn`` wrote to its transport: count what the transport could not send yet."""
        size = conn.transport.get_write_buffer_size()
        if size == conn.write_held:
            if not size:
                return  # the common case: the socket took everything
        else:
            self._set(conn, size)
        if (
            size
            and not conn.held_back
            and self.total > self.broker.config.limits.max_write_buffer_total
        ):
            self._hold_back(conn)

    def resumed(self, conn: Writer) -> None:
        """The transport of ``conn`` has drained to its low-water mark (``resume_writing``)."""
        if conn.held_back:
            conn.held_back = False
            limits = self.broker.config.limits
            conn.transport.set_write_buffer_limits(
                high=limits.write_buffer_high, low=limits.write_buffer_low
            )
        self._set(conn, conn.transport.get_write_buffer_size())

    def resample(self) -> None:
        """Buffers drain without telling us: read again those we counted as holding bytes."""
        for conn in list(self._holding):
            self._set(conn, 0 if conn.transport is None else conn.transport.get_write_buffer_size())

    def forget(self, conn: Writer) -> None:
        """``conn`` is closed: its transport's bytes are freed with it."""
        self._set(conn, 0)

    def _set(self, conn: Writer, size: int) -> None:
        self.total += size - conn.write_held
        conn.write_held = size
        if size:
            self._holding.add(conn)
        else:
            self._holding.discard(conn)

    def _hold_back(self, conn: Writer) -> None:
        conn.held_back = True
        limit = self.broker.config.limits.max_write_buffer_total
        self.broker.limit_hits.limits_key(
            LIMIT_KEY,
            conn.client_id,
            f"deliveries held back until the client has read its {conn.write_held} unsent "
            f"bytes: the transports hold {self.total} bytes, more than {limit}",
        )
        # high = low = 0: the transport calls pause_writing now (it holds bytes) and
        # resume_writing once it is empty; until then broker/delivery.py sees conn.paused.
        conn.transport.set_write_buffer_limits(high=0, low=0)
