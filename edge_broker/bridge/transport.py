"""Byte streams to the remote broker: TCP, TLS (CA, client certificate, server name check) and
WebSocket (subprotocol ``mqtt``, MQTT 5 §6), plain or over TLS.

:func:`open_stream` returns a :class:`Stream`; the link never sees which transport it is.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..config.bridges import BridgeConfig
from ..tls import client_context

READ_SIZE = 65536


class Stream(Protocol):
    async def read(self) -> bytes:
        """The next bytes; ``b""`` once the remote closed."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class _TcpStream:
    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self) -> bytes:
        return await self._reader.read(READ_SIZE)

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()


class _WebSocketStream:
    __slots__ = ("_ws", "_out")

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._out: list[bytes] = []

    async def read(self) -> bytes:
        from websockets.exceptions import ConnectionClosed

        try:
            data = await self._ws.recv()
        except ConnectionClosed:
            return b""
        return data if isinstance(data, bytes) else data.encode()

    def write(self, data: bytes) -> None:
        self._out.append(data)

    async def drain(self) -> None:
        if self._out:
            data = b"".join(self._out)
            self._out.clear()
            await self._ws.send(data)

    def close(self) -> None:
        asyncio.get_running_loop().create_task(self._ws.close())


async def open_stream(config: BridgeConfig) -> Stream:
    """Connect within ``connect_timeout``; raises OSError, ssl.SSLError or TimeoutError."""
    secure = config.transport in ("tls", "websockets")
    context = None
    if secure:  # tls_ca (system CAs when unset), the client certificate, the name check
        c = config
        context = client_context(c.tls_ca, c.tls_cert, c.tls_key, c.tls_verify_hostname)
    server_name = config.tls_server_name or config.address
    if config.transport in ("tcp", "tls"):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                config.address,
                config.port,
                ssl=context,
                server_hostname=server_name if secure else None,
                limit=READ_SIZE * 4,
            ),
            config.connect_timeout,
        )
        return _TcpStream(reader, writer)
    from websockets.asyncio.client import connect

    scheme = "wss" if secure else "ws"
    uri = f"{scheme}://{config.address}:{config.port}{config.websocket_path}"
    kwargs: dict[str, Any] = {
        "subprotocols": ["mqtt"],
        "open_timeout": config.connect_timeout,
        "max_size": None,
        "compression": None,
    }
    if context is not None:
        kwargs["ssl"] = context
        kwargs["server_hostname"] = server_name
    from websockets.exceptions import WebSocketException

    try:
        ws = await connect(uri, **kwargs)
    except WebSocketException as exc:  # a refused handshake is a failed attempt like any other
        raise ConnectionError(f"WebSocket handshake with {uri} failed: {exc}") from exc
    return _WebSocketStream(ws)
