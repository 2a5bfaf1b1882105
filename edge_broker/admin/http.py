"""The broker's one HTTP stack: h11 (sans-io HTTP/1.1) under asyncio streams.

Every HTTP endpoint the broker serves (``[metrics]``: ``/metrics``, ``/healthz``, ``/readyz``;
``[admin]``: the API and the console) runs on :class:`HttpServer`. h11 parses and frames; this
module only moves bytes, applies the bounds and calls one handler per request.

Bounds, each per server (issue 31 item 5: an HTTP port must never take what MQTT needs):

- ``max_connections`` open at once; one more is closed at accept (counted as a limit hit);
- descriptors: a connection is accepted only while ``may_open()`` says the process keeps its
  reserve for the MQTT listeners (``broker/limits/fd_budget.py``), else closed at once;
- request head at most ``max_header_bytes`` (431), body at most ``max_body_bytes`` (413);
- a request must arrive whole within ``request_timeout`` s of its first byte awaited (408:
  slowloris), a kept-alive connection waits ``idle_timeout`` s for the next one;
- TLS handshakes within ``request_timeout`` s.

A handler's exception answers 500 with one log line (no traceback reaches the client).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

import h11

log = logging.getLogger("edge_broker.http")

READ_CHUNK = 4096
_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds of one HTTP server (module docstring)."""

    max_connections: int = 16
    max_header_bytes: int = 8192
    max_body_bytes: int = 64 * 1024
    request_timeout: float = 10.0
    idle_timeout: float = 30.0


@dataclass(slots=True)
class Request:
    method: str
    path: str  # percent-decoded segments are the handler's business: this is the raw path
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes
    remote: str  # the client's IP address
    tls: bool
    cookies: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)
    stream: AsyncIterator[bytes] | None = None  # a body sent as it comes (Server-Sent Events)


Handler = Callable[[Request], Awaitable[Response]]


def text(status: int, body: str) -> Response:
    return Response(status, body.encode())


def _cookies(header: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name:
            found[name] = value
    return found


def _request(event: h11.Request, body: bytes, remote: str, tls: bool) -> Request:
    target = event.target.decode("latin-1")
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
    return Request(
        event.method.decode("latin-1"),
        split.path or "/",
        query,
        headers,
        body,
        remote,
        tls,
        _cookies(headers.get("cookie", "")),
    )


def path_segment(raw: str) -> str:
    """One percent-encoded path segment as text (``%2F`` is a ``/`` inside a client id)."""
    return unquote(raw, errors="strict")


class _TooLarge(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpServer:
    """One listening socket served by h11 (module docstring)."""

    def __init__(
        self,
        name: str,
        bind: str,
        port: int,
        handler: Handler,
        limits: HttpLimits = HttpLimits(),
        ssl_context: ssl.SSLContext | None = None,
        may_open: Callable[[], bool] | None = None,
        on_refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.name = name  # the config section, e.g. "metrics" or "admin"
        self._bind = bind
        self._port = port
        self._handler = handler
        self.limits = limits
        self._ssl = ssl_context
        self._may_open = may_open
        self._on_refused = on_refused  # (limit key, reason): the broker's limit-hit counter
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.open = 0  # connections being served
        self.refused = 0  # connections closed at accept (cap or descriptor reserve)
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self._ssl is not None else "http"

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(
                self._accepted,
                self._bind,
                self._port,
                ssl=self._ssl,
                ssl_handshake_timeout=self.limits.request_timeout if self._ssl else None,
                limit=self.limits.max_header_bytes,
            )
        except OSError as exc:  # one line naming the section, as for a listener
            import os

            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise OSError(
                exc.errno,
                f"[{self.name}] ({self._bind}:{self._port}): cannot listen: {reason}; "
                f"change [{self.name}] port or stop what holds it",
            ) from exc
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):  # long-lived streams (SSE) end with the server
            task.cancel()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 1.0)
        except TimeoutError:
            pass

    def _refuse(self, writer: asyncio.StreamWriter, key: str, reason: str) -> None:
        self.refused += 1
        if self._on_refused is not None:
            self._on_refused(key, reason)
        transport = writer.transport
        transport.abort()  # no goodbye: the descriptor comes back at once

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self.limits.max_connections:
            self._refuse(
                writer,
                f"{self.name}.max_connections",
                f"HTTP connection closed at accept: {self.open} open, [{self.name}] "
                f"max_connections is {self.limits.max_connections}",
            )
            return
        if self._may_open is not None and not self._may_open():
            self._refuse(
                writer,
                "RLIMIT_NOFILE",
                f"HTTP connection to [{self.name}] closed at accept: the descriptors left are "
                "kept for the MQTT listeners (raise LimitNOFILE)",
            )
            return
        self.open += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self.open -= 1
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        peer = writer.get_extra_info("peername")
        remote = str(peer[0]) if peer else ""
        tls = writer.get_extra_info("ssl_object") is not None
        first = True
        while True:
            wait = self.limits.request_timeout if first else self.limits.idle_timeout
            try:
                got = await self._read_request(conn, reader, wait)
            except h11.RemoteProtocolError as exc:
                # h11's hint: 431 for a head over max_incomplete_event_size, else 400
                await self._send_error(conn, writer, exc.error_status_hint, f"bad request: {exc}\n")
                return
            except _TooLarge as exc:
                await self._send_error(conn, writer, exc.status, f"{exc}\n")
                return
            except TimeoutError:
                if conn.their_state is not h11.IDLE or first:  # a request started, or none came
                    await self._send_error(
                        conn,
                        writer,
                        408,
                        f"the request did not arrive within {self.limits.request_timeout:g} s\n",
                    )
                return
            if got is None:  # the client closed
                return
            first = False
            event, body = got
            request = _request(event, body, remote, tls)
            try:
                response = await self._handler(request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one line, never a traceback to the client
                log.error(
                    "[%s] %s %s failed: %r",
                    self.name,
                    request.method,
                    request.path,
                    exc,
                    extra={"event": "http_error", "section": self.name},
                )
                response = text(500, "internal error: see the broker log\n")
            await self._send(conn, writer, response, request.method == "HEAD")
            if conn.our_state is h11.MUST_CLOSE or response.stream is not None:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, wait: float
    ) -> tuple[h11.Request, bytes] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        started = False
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                data = await asyncio.wait_for(reader.read(READ_CHUNK), remaining)
                if data and not started:  # the request's own time starts with its first byte
                    started = True
                    deadline = loop.time() + self.limits.request_timeout
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
                length = dict(event.headers).get(b"content-length")
                if length is not None and int(length) > self.limits.max_body_bytes:
                    raise _TooLarge(
                        413,
                        f"request body of {int(length)} bytes is over the limit of "
                        f"{self.limits.max_body_bytes}",
                    )
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.limits.max_body_bytes:
                    raise _TooLarge(
                        413, f"request body over the limit of {self.limits.max_body_bytes} bytes"
                    )
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            else:  # ConnectionClosed: the client went away between requests
                return None

    async def _send_error(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, message: str
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        response = text(status, message)
        response.headers.append(("Connection", "close"))
        try:
            await self._send(conn, writer, response, False)
        except (h11.LocalProtocolError, ConnectionError):
            pass

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, response: Response, head: bool
    ) -> None:
        headers = [("Content-Type", response.content_type), *response.headers]
        if response.stream is None:
            headers.append(("Content-Length", str(len(response.body))))
        reason = _REASONS.get(response.status, b"")
        event = h11.Response(status_code=response.status, headers=headers, reason=reason)
        writer.write(conn.send(event))
        if response.stream is not None:
            await writer.drain()
            async for chunk in response.stream:
                writer.write(conn.send(h11.Data(data=chunk)))
                await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()))
        else:
            if response.body and not head:
                writer.write(conn.send(h11.Data(data=response.body)))
            writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
