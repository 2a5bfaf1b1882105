"""Closing a client's socket so that the client reads the broker's last packet.

When the broker ends a connection (a DISCONNECT with a reason code, a refused CONNACK, a 3.x
close after a rule was broken) the client has often sent more already: the PUBLISH after the
one that broke Receive Maximum, the SUBSCRIBE pipelined behind a CONNECT with a wrong password.
A socket closed with those bytes unread makes the kernel answer with RST (RFC 1122 §4.2.2.13,
RFC 2525 §2.17); the client's next send then fails with a broken pipe, and a client stack that
acts on that error first never reads the reason code it was sent.

So, after its last bytes, the broker:

1. ends its output and keeps reading. TCP: FIN after the buffered bytes (``write_eof``).
   WebSocket: a Close frame, then the client's Close frame is awaited (``websocket.py``).
   TLS has no half-close that asyncio can keep reading after (its TLS layer treats data
   arriving after our close_notify as an error and drops the connection, which is the reset
   again): its output stays open until the client closes or the time bound passes, then
   close_notify is sent and the client gets :data:`CLOSE_GRACE` more to answer it.
2. reads and discards whatever the client still sends, at most :data:`DRAIN_BYTES`, for at
   most :data:`DRAIN_SECONDS` of the event loop's own time;
3. closes when the client closes its side, or aborts the socket at a bound: a client that keeps
   sending, or never reads what is queued for it, holds neither the socket nor memory past
   them. Discarded bytes are never buffered.

The MQTT connection is over at step 1: the session is detached and the client no longer counted
as connected (``Connection._forget``); only the socket waits, and it stays counted among the
open connections (file descriptors) until it is gone. A connection that never sent a byte
(closed at accept, no CONNECT in time) has nothing to protect and is closed at once.
"""

from __future__ import annotations

import asyncio

DRAIN_SECONDS = 2.0  # a client on a slow link reads the last packet and closes well within this
DRAIN_BYTES = 1024 * 1024  # read and discarded at most, then the socket is aborted
CLOSE_GRACE = 1.0  # TLS: after the time bound's close_notify, the peer's answer awaited this long


class Drain:
    """The bounded wait of one closing socket (see the module docstring)."""

    __slots__ = ("transport", "left", "output_ended", "_timer")

    def __init__(
        self, transport: asyncio.BaseTransport, seconds: float, max_bytes: int, output_ended: bool
    ) -> None:
        self.transport = transport
        self.left = max_bytes
        self.output_ended = output_ended  # False: TLS, closed when the time bound passes
        self._timer = asyncio.get_running_loop().call_later(seconds, self._time_bound)

    def discard(self, nbytes: int) -> None:
        """``nbytes`` more were read and thrown away; past the bound the socket is aborted."""
        self.left -= nbytes
        if self.left < 0:
            self.abort()

    def _time_bound(self) -> None:
        if self.output_ended:
            self.abort()
            return
        self.output_ended = True
        self.transport.close()  # TLS close_notify after the buffered bytes
        self._timer = asyncio.get_running_loop().call_later(CLOSE_GRACE, self.abort)

    def abort(self) -> None:
        """A bound was hit: drop the socket now (what is still unsent or unread is lost)."""
        self._timer.cancel()
        abort = getattr(self.transport, "abort", None)
        if abort is not None:
            abort()
        else:  # pragma: no cover - every asyncio transport we get can abort
            self.transport.close()

    def finished(self) -> None:
        """The socket is gone (``connection_lost``): the timer is no longer needed."""
        self._timer.cancel()


def close_gracefully(
    transport: asyncio.WriteTransport,
    seconds: float = DRAIN_SECONDS,
    max_bytes: int = DRAIN_BYTES,
) -> Drain | None:
    """End the output of ``transport`` after its buffered bytes (steps 1–3 of the module
    docstring). Returns the :class:`Drain` the protocol feeds with the bytes it discards, or
    None when the transport was closed outright (already closing, or one without any end of
    output of its own, as the tests' in-memory transport)."""
    if transport.is_closing():
        return None
    try:
        half_close = transport.can_write_eof()
    except NotImplementedError:
        transport.close()
        return None
    if half_close:
        # TCP: FIN once the buffered bytes are sent; WebSocket: a Close frame. Reading goes on.
        transport.write_eof()
    return Drain(transport, seconds, max_bytes, output_ended=half_close)
