"""Bytes of packets being read, bounded broker-wide (issue 16, docs/limits-memory.md).

Each connection may hold ``limits.read_buffer_size`` bytes of an unfinished packet on its own.
A packet larger than that (a 1 MiB PUBLISH) needs the rest from one pool shared by every
connection, ``limits.read_pool_size``, reserved whole as soon as its Remaining Length is known
(a packet either gets all its bytes or waits: partial reservations could deadlock). When the
pool cannot give them, the connection stops reading (``transport.pause_reading()``): the bytes
stay in the kernel, not in the broker. Waiters are served first come first served as bytes come
back; one that waits longer than ``limits.read_pool_timeout`` is closed with DISCONNECT 0x97
Quota exceeded and a Reason String, counted and logged as ``limits.read_pool_size``.

Without it, ``max_connections × max_packet_size`` (2 GiB with the defaults) could be held by
clients that each send the start of a largest packet and stop.

The read side uses ``asyncio.BufferedProtocol``: the connection reads into one buffer that all
connections share (the event loop is one thread and copies out before the next read), and each
read is cut so that a connection never holds more than its own bytes plus its reservation. So
that a busy publisher still reads up to ``READ_MAX`` bytes at a time, a read beyond its own
bytes borrows the difference from the pool for that read, when nobody waits; the read's
``after_read`` keeps what the unfinished packet needs and gives back the rest.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from ...engine.states import ConnState
from ...mqtt.reason_codes import ReasonCode
from .pre_auth import Peer
from .write_budget import LimitsHost

if TYPE_CHECKING:
    from collections import deque

    from ...mqtt.packets import Packet
    from .write_budget import WriteBudget

CONNECTED, CONNECTING = ConnState.CONNECTED, ConnState.CONNECTING

LIMIT_KEY = "read_pool_size"
# The most one socket read takes. asyncio reads 256 KiB; a quarter of it keeps the bytes one
# event-loop turn can route to a subscriber (write_budget.py) small, at no cost in throughput
# measured (scripts/bench, docs/limits-memory.md).
READ_MAX = 64 * 1024


class PoolHost(LimitsHost, Protocol):
    """What the pool reads of the broker (``Broker`` is one): reads wait while the write buffers
    are over their bound too."""

    @property
    def write_budget(self) -> WriteBudget: ...


class Framing(Protocol):
    """A socket protocol that holds bytes before they reach the MQTT reader (the WebSocket
    frame being received, broker/websocket.py): they count against the same bound."""

    @property
    def held(self) -> int: ...  # bytes of the unfinished frame read so far

    @property
    def frame_size(self) -> int: ...  # its whole size once its header is read, else ``held``


class Reader(Peer, Protocol):
    """What the pool reads, sets and calls on a connection (``Connection`` is one)."""

    transport: Any  # its asyncio transport: paused while it waits for bytes
    read_grant: int  # bytes of the pool reserved for its unfinished packet

    @property
    def backlog(self) -> deque[Packet] | None: ...  # packets read while it was paused

    @property
    def read_held(self) -> int: ...  # bytes read and not yet packets (framing included)

    @property
    def read_needed(self) -> int: ...  # what they will be once the unfinished packet is whole


class ReadPool:
    """See the module docstring; one per broker. ``used`` counts reserved bytes."""

    __slots__ = ("broker", "used", "view", "_waiting", "_lent_to", "_lent")

    def __init__(self, broker: PoolHost) -> None:
        self.broker = broker
        self.used = 0
        self.view = memoryview(bytearray(READ_MAX))  # what every read goes into
        # connection → (bytes it still needs, its timeout); insertion order is arrival order
        self._waiting: dict[Reader, tuple[int, asyncio.TimerHandle]] = {}
        # bytes lent for the read under way: get_buffer and buffer_updated come in one call
        # of the transport, so a loan still open at the next get_buffer was for a read that
        # brought nothing (EAGAIN, a partial TLS record) and goes back then
        self._lent_to: Reader | None = None
        self._lent = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def buffer_for(self, conn: Reader) -> memoryview:
        """Where the next socket read of ``conn`` goes: no more than it may hold."""
        if self._lent_to is not None:
            self._end_loan()
        limits = self.broker.config.limits
        room = limits.read_buffer_size + conn.read_grant - conn.read_held
        if room <= 0:
            # Only when something else resumed reading while the connection waits for the pool
            # (the end of an authentication): stop again; one byte is the least a read may take.
            conn.transport.pause_reading()
            return self.view[:1]
        if (
            room < READ_MAX
            and not self._waiting
            # no loans while the write buffers are over their bound: smaller reads route less
            # to the slow readers in one turn
            and self.broker.write_budget.total <= limits.max_write_buffer_total
        ):
            size = limits.read_pool_size
            # what an unauthenticated connection keeps of a loan stays within its half (_fits)
            borrow = min(
                READ_MAX - room, (size if conn.state == CONNECTED else size // 2) - self.used
            )
            if borrow > 0:
                self.used += borrow
                conn.read_grant += borrow
                room += borrow
                self._lent_to = conn
                self._lent = borrow
        return self.view[:room] if room < READ_MAX else self.view

    def after_read(self, conn: Reader) -> None:
        """Reserve what the unfinished packet of ``conn`` needs beyond its own bytes, give back
        what it no longer needs; wait (not reading) when the pool is short."""
        if self._lent_to is conn:
            self._lent_to = None  # settled below: the grant becomes what the packet needs
        if conn.closing:
            self.forget(conn)
            return
        if not conn.read_held:  # the common case: every packet read is complete
            if conn.read_grant:
                self.used -= conn.read_grant
                conn.read_grant = 0
                if self._waiting:
                    self._serve_waiting()
            return
        want = conn.read_needed - self.broker.config.limits.read_buffer_size
        have = conn.read_grant
        if want <= have:
            if have:
                self._give_back(conn, max(want, 0))
            return
        if conn in self._waiting:
            return
        if not self._waiting and self._fits(conn, want - have):
            self.used += want - have
            conn.read_grant = want
            return
        conn.transport.pause_reading()
        timeout = self.broker.config.limits.read_pool_timeout
        timer = asyncio.get_running_loop().call_later(timeout, self._timed_out, conn, want)
        self._waiting[conn] = (want, timer)
        self._serve_waiting()  # it may fit now, past unauthenticated waiters that do not

    def forget(self, conn: Reader) -> None:
        """``conn`` is closed: its reservation goes back, it waits no more."""
        if self._lent_to is conn:
            self._lent_to = None  # its grant, loan included, goes back below
        waiting = self._waiting.pop(conn, None)
        if waiting is not None:
            waiting[1].cancel()
        if conn.read_grant:
            self._give_back(conn, 0)

    def _end_loan(self) -> None:
        conn = self._lent_to
        assert conn is not None
        self._lent_to = None
        amount = min(self._lent, conn.read_grant)
        conn.read_grant -= amount
        self.used -= amount
        if self._waiting:
            self._serve_waiting()

    def _fits(self, conn: Reader, extra: int) -> bool:
        """Unauthenticated connections (a CONNECT larger than read_buffer_size) reserve only
        while the pool is less than half used, so that they can never starve clients that
        have logged in."""
        size = self.broker.config.limits.read_pool_size
        return self.used + extra <= (size if conn.state == CONNECTED else size // 2)

    def _give_back(self, conn: Reader, keep: int) -> None:
        self.used -= conn.read_grant - keep
        conn.read_grant = keep
        if self._waiting:
            self._serve_waiting()

    def _serve_waiting(self) -> None:
        """Reserve for waiting connections in arrival order while their whole need fits (an
        unauthenticated one that does not fit its half is passed over)."""
        for conn, (want, timer) in list(self._waiting.items()):
            extra = want - conn.read_grant
            if not self._fits(conn, extra):
                if conn.state == CONNECTED:
                    return
                continue
            del self._waiting[conn]
            timer.cancel()
            self.used += extra
            conn.read_grant = want
            if conn.backlog is None and not conn.closing:
                # a connection whose handler is still running resumes reading when it is done
                conn.transport.resume_reading()

    def _timed_out(self, conn: Reader, want: int) -> None:
        if self._waiting.pop(conn, None) is None or conn.closing:
            return
        limits = self.broker.config.limits
        reason = (
            f"a packet of {want + limits.read_buffer_size} bytes waited more than "
            f"{limits.read_pool_timeout:g} s for limits.{LIMIT_KEY} ({limits.read_pool_size} "
            f"bytes shared by all connections for packets beyond limits.read_buffer_size); "
            f"send it again later"
        )
        self.broker.limit_hits.limits_key(LIMIT_KEY, conn.client_id, f"connection closed: {reason}")
        if conn.state == CONNECTED:
            conn.close(ReasonCode.QUOTA_EXCEEDED, reason)
        elif conn.state == CONNECTING:
            conn.refuse_connect(ReasonCode.QUOTA_EXCEEDED, reason)
        else:
            conn.close(None, reason)
        self.forget(conn)
