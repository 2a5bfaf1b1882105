"""Listeners: TCP, TLS (``ssl``, optional or required client certificates) and WebSocket, and
what the broker learns about a connection before its CONNECT (addresses, the local interface,
the client certificate's subject CN)."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..auth.method_api import ConnectionInfo
from ..config import ListenerConfig
from ..tls import load_server_files, server_context
from .network_interfaces import InterfaceMap

log = logging.getLogger("edge_broker.broker")


def tls_context(listener: ListenerConfig) -> ssl.SSLContext:
    """A server context from the listener's PEM files; client certificates optional or
    required (their subject CN is kept for authentication, AUTHZ.md §1)."""
    assert listener.tls_cert is not None and listener.tls_key is not None
    return server_context(
        listener.tls_cert, listener.tls_key, listener.tls_ca, listener.require_client_cert
    )


def _load_files(ctx: ssl.SSLContext, listener: ListenerConfig) -> None:
    assert listener.tls_cert is not None and listener.tls_key is not None
    load_server_files(ctx, listener.tls_cert, listener.tls_key, listener.tls_ca)


def reload_tls(contexts: Mapping[str, ssl.SSLContext], listeners: Sequence[ListenerConfig]) -> int:
    """SIGHUP: load each TLS listener's certificate, key and CA files again into its live
    context, as Mosquitto does, so certificates rotate without dropping devices. OpenSSL copies
    the certificate into each connection when it is accepted: connections made after this get
    the new certificate, existing ones keep theirs. The files are first loaded into a scratch
    context, so a half-written or mismatched pair is refused (logged) and the running
    certificate stays. A CA file only adds certificates: removing a CA needs a restart.
    Returns how many listeners were reloaded."""
    reloaded = 0
    for listener in listeners:
        ctx = contexts.get(listener.name)
        if ctx is None:
            continue
        try:
            tls_context(listener)
            _load_files(ctx, listener)
        except (OSError, ValueError) as exc:
            log.error(
                "listener %s: TLS files not reloaded (%s); the running certificate stays",
                listener.name,
                exc,
                extra={"event": "tls_reload_refused", "listener": listener.name},
            )
            continue
        reloaded += 1
        log.info(
            "listener %s: TLS certificate and key reloaded from %s",
            listener.name,
            listener.tls_cert,
            extra={"event": "tls_reloaded", "listener": listener.name},
        )
    return reloaded


def certificate_cn(transport: asyncio.BaseTransport) -> str | None:
    cert = transport.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _pair(value: Any) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return (str(value[0]), int(value[1]))
    return None


def connection_info(
    listener: ListenerConfig, transport: asyncio.BaseTransport, interfaces: InterfaceMap
) -> ConnectionInfo:
    """``interfaces``: the broker's address → interface map (broker/network_interfaces.py); the
    interface is computed here once per connection."""
    local = _pair(transport.get_extra_info("sockname"))
    remote = _pair(transport.get_extra_info("peername"))
    interface = interfaces.lookup(local[0]) if local is not None else None
    return ConnectionInfo(
        listener=listener.name,
        transport=listener.transport,
        local_address=local,
        remote_address=remote,
        interface=interface,
        cert_cn=certificate_cn(transport) if listener.uses_tls else None,
    )


HandshakeRefused = Callable[[ListenerConfig, asyncio.BaseTransport, BaseException], None]


class TlsAcceptor(asyncio.Protocol):
    """A TLS listener's connection until its handshake is done: the handshake runs here
    (``loop.start_tls``) instead of inside ``create_server``, so that one that fails (an
    untrusted or missing client certificate, a client speaking plain MQTT to the TLS port) is
    reported with the peer's address (``refused``: the broker logs and audits it) instead of
    vanishing in asyncio. Once it succeeds the real protocol gets the TLS transport."""

    def __init__(
        self,
        listener: ListenerConfig,
        factory: Callable[[], asyncio.BaseProtocol],
        ctx: ssl.SSLContext,
        refused: HandshakeRefused | None,
    ) -> None:
        self._listener = listener
        self._factory = factory
        self._ctx = ctx
        self._refused = refused
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; not an isinstance check: uvloop's (the ``speed`` extra) are not
        # subclasses of asyncio.Transport
        transport = cast(asyncio.Transport, transport)
        transport.pause_reading()  # the ClientHello waits for start_tls, which resumes reading
        self._task = asyncio.get_running_loop().create_task(self._handshake(transport))

    def connection_lost(self, exc: Exception | None) -> None:
        pass  # before the handshake ended: start_tls raises, _handshake reports it

    async def _handshake(self, transport: asyncio.Transport) -> None:
        early = _Handshaking()
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, early, self._ctx, server_side=True
            )
        except (OSError, ssl.SSLError, ConnectionError, TimeoutError, RuntimeError) as exc:
            if self._refused is not None:
                self._refused(self._listener, transport, exc)
            transport.abort()
            return
        if tls is None:  # closed during the handshake
            return
        app = self._factory()
        tls.set_protocol(app)
        app.connection_made(tls)
        early.hand_over(app)


class _Handshaking(asyncio.Protocol):
    """The protocol ``start_tls`` talks to until it returns: what arrives between the end of
    the handshake and then (a CONNECT sent right after it) is kept and handed over, in order."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost: tuple[Exception | None] | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = (exc,)

    def hand_over(self, app: Any) -> None:
        for chunk in self.data:
            app.data_received(chunk)
        if self.eof:
            app.eof_received()
        if self.lost is not None:
            app.connection_lost(self.lost[0])


async def start_listener(
    listener: ListenerConfig,
    factory: Callable[[], asyncio.Protocol],
    contexts: dict[str, ssl.SSLContext] | None = None,
    refused: HandshakeRefused | None = None,
) -> asyncio.Server:
    """Bind one listener. An OSError (address in use, permission, a TLS file) says which
    listener and where, for ``run``'s one-line message (issue 20)."""
    loop = asyncio.get_running_loop()
    where = (
        f"listener {listener.name!r} ({listener.transport} {listener.bind or '*'}:{listener.port})"
    )
    try:
        ssl_ctx = tls_context(listener) if listener.uses_tls else None
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"{where}: cannot load tls_cert / tls_key: {exc.strerror or exc}; "
            "`edge-broker check` says what is wrong with them",
        ) from exc
    if ssl_ctx is not None and contexts is not None:
        contexts[listener.name] = ssl_ctx
    host = listener.bind or None
    serve: Callable[[], asyncio.BaseProtocol] = factory
    if ssl_ctx is not None:  # the handshake in TlsAcceptor: a failed one is reported
        tls_ctx = ssl_ctx
        serve = lambda: TlsAcceptor(listener, factory, tls_ctx, refused)  # noqa: E731
    try:
        return await loop.create_server(
            serve, host=host, port=listener.port, reuse_address=True, backlog=1024
        )
    except OSError as exc:
        hint = {
            98: "another process (or listener) holds that port: stop it or change the port",
            13: "ports below 1024 need CAP_NET_BIND_SERVICE (the unit grants it) or root",
            99: "that address is not on this machine: write one of its addresses or 0.0.0.0",
        }
        reason = (
            os.strerror(exc.errno) if exc.errno else str(exc)
        )  # asyncio's text repeats the address
        raise OSError(
            exc.errno,
            f"{where}: cannot listen: {reason}"
            + (f"; {hint[exc.errno]}" if exc.errno in hint else ""),
        ) from exc
