"""MQTT over WebSocket (MQTT 5 §6, 3.1.1 §6): subprotocol ``mqtt``, binary frames.

The ``websockets`` package's sans-io ``ServerProtocol`` does the handshake and framing inside
an ``asyncio.Protocol``; the MQTT :class:`Connection` sees a transport-like object whose
``write`` sends binary frames, so the broker code is the same for every listener.

Reads are bounded like TCP reads (broker/limits/read_pool.py): the socket reads into the pool's
shared buffer no more than the connection may hold, and the bytes of a frame being received
(which ``websockets`` keeps until the frame is whole) count with the MQTT reader's. Once a
frame's header announces its size, the pool reserves what the frame (and the packet it carries)
needs beyond ``limits.read_buffer_size``, or the socket stops being read until it can; a frame
cannot be larger than ``limits.max_packet_size`` + 5 (closed with 1009 otherwise).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol

from .connection import Connection

if TYPE_CHECKING:
    pass

log = logging.getLogger("edge_broker.broker")

SUBPROTOCOL = "mqtt"


class WebSocketTransport(asyncio.Transport):
    """What the MQTT connection writes to: each write becomes one binary frame."""

    def __init__(self, outer: WebSocketProtocol) -> None:
        super().__init__()
        self._outer = outer

    def write(self, data: bytes | bytearray | memoryview) -> None:
        outer = self._outer
        if outer.transport is None or outer.transport.is_closing():
            return
        outer.ws.send_binary(bytes(data))
        outer.pump()

    def close(self) -> None:
        self._outer.close()

    def can_write_eof(self) -> bool:
        return True  # the end of the output is a Close frame, answered by the client

    def write_eof(self) -> None:
        self._outer.end_output()

    def abort(self) -> None:
        self._outer.abort()

    def is_closing(self) -> bool:
        t = self._outer.transport
        return t is None or t.is_closing() or self._outer.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        t = self._outer.transport
        return t.get_extra_info(name, default) if t is not None else default

    def pause_reading(self) -> None:
        if self._outer.transport is not None:
            self._outer.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._outer.transport is not None:
            self._outer.transport.resume_reading()

    def get_write_buffer_size(self) -> int:
        t = self._outer.transport
        return t.get_write_buffer_size() if t is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        t = self._outer.transport
        if t is not None:
            t.set_write_buffer_limits(high, low)


def _select_subprotocol(protocol: ServerProtocol, offered: Any) -> Any:
    return SUBPROTOCOL if SUBPROTOCOL in offered else None


class FrameSizes:
    """Follows the frame boundaries of the bytes a WebSocket client sends (RFC 6455 §5.2), so
    that the read pool knows what the frame being received holds and will hold. Bytes up to
    the end of the upgrade request are not frames (they are bounded by the pre-authentication
    budget, engine/connection.py)."""

    __slots__ = ("limit", "_request", "_tail", "_head", "_got", "_size", "_left")

    def __init__(self, limit: int) -> None:
        self.limit = limit  # the largest frame size counted (larger ones are refused)
        self._request = True  # still in the HTTP upgrade request
        self._tail = b""  # its last bytes, to find its end across reads
        self._head = bytearray()  # the frame header read so far
        self._got = 0  # bytes of the current frame read so far, header included
        self._size = 0  # its whole size once the header is read
        self._left = 0  # its payload bytes still to come

    @property
    def held(self) -> int:
        return self._got

    @property
    def frame_size(self) -> int:
        return self._size or self._got

    def feed(self, data: bytes) -> None:
        pos, n = 0, len(data)
        if self._request:
            buf = self._tail + data  # reads are small until the upgrade (read_buffer_size)
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._tail = buf[-3:]
                return
            self._request = False
            pos = end + 4 - len(self._tail)
            self._tail = b""
        while pos < n:
            if self._left:
                take = min(self._left, n - pos)
                pos += take
                self._left -= take
                self._got += take
                if not self._left:
                    self._got = self._size = 0  # the frame is whole
                continue
            head = self._head
            head.append(data[pos])
            pos += 1
            if len(head) < 2:
                self._got = len(head)
                continue
            code = head[1] & 0x7F
            extended = 2 if code == 126 else 8 if code == 127 else 0
            size = 2 + extended + (4 if head[1] & 0x80 else 0)
            if len(head) < size:
                self._got = len(head)
                continue
            payload = int.from_bytes(head[2 : 2 + extended], "big") if extended else code
            self._head = bytearray()
            if payload:
                self._left = payload
                self._got = size
                self._size = min(size + payload, self.limit)
            else:
                self._got = self._size = 0


class WebSocketProtocol(asyncio.BufferedProtocol):
    """The socket-facing protocol: HTTP upgrade, then frames in and out."""

    def __init__(self, mqtt: Connection) -> None:
        """``mqtt``: the connection its frames carry, made by the listener for this socket."""
        self.broker = broker = mqtt.broker
        self.listener = mqtt.listener
        self.transport: asyncio.Transport | None = None
        max_size = broker.config.limits.max_packet_size + 5
        self.ws = ServerProtocol(
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            select_subprotocol=_select_subprotocol,
            max_size=max_size,
        )
        self.frames = FrameSizes(max_size + 14)  # the longest header is 14 bytes
        mqtt.framing = self.frames
        self.mqtt = mqtt
        self.inner = WebSocketTransport(self)
        self.opened = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; not an isinstance check: uvloop's (the ``speed`` extra) are not
        # subclasses of asyncio.Transport
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        # Counted by max_connections and timed by connect_timeout from TCP accept, exactly like
        # a TCP connection (issue 16): a socket that never finishes the HTTP upgrade is a
        # connection that never sends CONNECT.
        self.mqtt.connection_made(self.inner)

    def get_buffer(self, sizehint: int) -> memoryview:
        pool = self.broker.read_pool
        if self.closed or self.mqtt.drain is not None:
            return pool.view  # read only to be thrown away (counted by the drain)
        return pool.buffer_for(self.mqtt)  # bounded reads (read_pool.py)

    def buffer_updated(self, nbytes: int) -> None:
        pool = self.broker.read_pool
        self.data_received(bytes(pool.view[:nbytes]))  # copied out before the next read
        if not self.closed:
            pool.after_read(self.mqtt)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            # our Close frame is sent: read on only for the client's (graceful_close.py);
            # its bytes are counted against the drain's bound and never reach MQTT
            self.mqtt.discard(len(data))
            if self.transport is None or self.transport.is_closing():
                return
        elif not self.opened:
            # The upgrade request is part of the pre-authentication budget: a handshake that
            # grows past it is refused, not buffered (websockets would take ~1 MB of headers).
            if self.mqtt.pre_auth_exceeded(len(data)):
                limit = self.broker.config.limits.max_connect_packet_size
                self.broker.limit_hits.hit(
                    "limits.max_connect_packet_size",
                    f"WebSocket upgrade request longer than {2 * limit} bytes refused "
                    f"(limits.max_connect_packet_size = {limit})",
                )
                self.mqtt.close(None, "WebSocket upgrade request too large")
                return
        if not self.closed:
            self.frames.feed(data)
        self.ws.receive_data(data)
        for event in self.ws.events_received():
            if isinstance(event, Request):
                self._handshake(event)
            elif isinstance(event, Frame):
                if event.opcode in (Opcode.BINARY, Opcode.CONT) and self.opened and not self.closed:
                    self.mqtt.data_received(bytes(event.data))
                elif event.opcode == Opcode.TEXT:
                    # MQTT 5 §6.0.0-1: data in a text frame closes the connection.
                    self.ws.fail(1003, "MQTT needs binary frames")
        self.pump()

    def _handshake(self, request: Request) -> None:
        if request.path.split("?", 1)[0] != self.listener.websocket_path:
            self.ws.send_response(self.ws.reject(404, f"no MQTT endpoint at {request.path}\n"))
            self.pump()
            self.close()
            return
        response: Response = self.ws.accept(request)
        if response.status_code == 101 and "Sec-WebSocket-Protocol" not in response.headers:
            response = self.ws.reject(400, "the WebSocket subprotocol must be 'mqtt'\n")
        self.ws.send_response(response)
        if response.status_code != 101:
            self.pump()
            self.close()
            return
        self.opened = True

    def pump(self) -> None:
        transport = self.transport
        if transport is None:
            return
        for chunk in self.ws.data_to_send():
            if chunk:
                transport.write(chunk)
            elif not transport.is_closing():
                transport.close()  # EOF requested by the protocol

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.opened:
            try:
                self.ws.send_close(1000)
            except Exception:  # the websocket is already closing
                pass
            self.pump()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def end_output(self) -> None:
        """A Close frame (1000), then the client's Close frame is awaited, reading on: the
        WebSocket closing handshake (RFC 6455 §7.1.2) ends with the TCP close once it answers.
        The MQTT connection bounds the wait (graceful_close.py). Before the upgrade, or when
        the Close frame cannot be sent: closed at once."""
        if self.closed:
            return
        if not self.opened:
            self.close()
            return
        try:
            self.ws.send_close(1000)
        except Exception:  # the websocket is already closing
            self.close()
            return
        self.closed = True
        self.pump()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.mqtt.connection_lost(exc)

    def pause_writing(self) -> None:
        self.mqtt.pause_writing()

    def resume_writing(self) -> None:
        self.mqtt.resume_writing()
