"""The local control channel: ``<state_dir>/control.sock`` (docs/sessions.md "Operator
commands"), what ``edge-broker session list|drop`` talks to.

A Unix stream socket, mode 0600 and only for the broker's own user (or root: the peer's
credentials are checked, ``SO_PEERCRED``). One JSON object per line each way:

- ``{"op": "list"}`` (optional ``"tenant"``, ``"client_id"``, ``"limit"``) →
  ``{"ok": true, "total": N, "sessions": [...]}`` (``session_control.SessionInfo.to_json``);
- ``{"op": "drop", "client_id": "..."}`` (optional ``"tenant"``; without: every tenant) →
  ``{"ok": true, "dropped": true|false}``;
- anything else → ``{"ok": false, "error": "..."}`` naming what to change.

Bounded: at most :data:`MAX_CLIENTS` connections at once (more are answered with an error and
closed), :data:`MAX_LINE` bytes a request, :data:`IDLE_TIMEOUT` seconds between requests.

The socket is made under a temporary name, given mode 0600, then renamed into place, so nobody
connects before its mode is set. A socket file another running broker answers on is left alone
(this broker then has no control channel, and says so); a stale one is replaced. The channel is
started when the state directory exists (an installed gateway; ``[persistence]`` creates it):
the broker never creates a directory only for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from pathlib import Path
from typing import Any

from ..store.state_dir import state_dir
from .session_control import OwnersHost, drop_session, list_sessions

log = logging.getLogger("edge_broker.broker")

SOCKET_NAME = "control.sock"
MAX_CLIENTS = 4
MAX_LINE = 4096
IDLE_TIMEOUT = 10.0
DEFAULT_LIMIT = 10_000  # sessions in one listing unless the request asks for fewer or more
MAX_LIMIT = 1_000_000
_UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


def socket_path(config: object) -> Path:
    """Where the control socket of a broker with ``config`` is."""
    return state_dir(config) / SOCKET_NAME


class ControlChannel:
    """The server side; :meth:`start` returns None (and logs why) when it cannot listen."""

    def __init__(self, broker: OwnersHost, path: Path) -> None:
        self.broker = broker
        self.path = path
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._inode = 0  # of the socket file this broker made: only that one is removed

    @classmethod
    async def start(cls, broker: OwnersHost) -> ControlChannel | None:
        path = socket_path(broker.config)
        if not path.parent.is_dir():
            log.info(
                "no control channel: the state directory %s does not exist (edge-broker "
                "session needs it: set [persistence] state_dir)",
                path.parent,
                extra={"event": "control_channel_off"},
            )
            return None
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            log.warning(
                "no control channel: %s is longer than a Unix socket path may be (%d bytes); "
                "use a shorter [persistence] state_dir",
                path,
                _UNIX_PATH_MAX,
                extra={"event": "control_channel_off"},
            )
            return None
        if await _answers(path):
            log.warning(
                "no control channel: another running broker answers on %s; give each broker "
                "its own [persistence] state_dir",
                path,
                extra={"event": "control_channel_off"},
            )
            return None
        channel = cls(broker, path)
        try:
            channel._server = await channel._listen()
        except OSError as exc:
            log.warning(
                "no control channel: cannot listen on %s: %s",
                path,
                exc,
                extra={"event": "control_channel_off"},
            )
            return None
        log.info(
            "control channel listening on %s",
            path,
            extra={"event": "control_channel", "path": str(path)},
        )
        return channel

    async def _listen(self) -> asyncio.Server:
        temporary = self.path.with_name(f".{SOCKET_NAME}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(temporary))
            os.chmod(temporary, 0o600)
            self._inode = os.stat(temporary).st_ino
            os.replace(temporary, self.path)  # only now can anyone connect by the name
            sock.listen(MAX_CLIENTS)
            sock.setblocking(False)
            return await asyncio.start_unix_server(self._client, sock=sock, limit=MAX_LINE + 2)
        except BaseException:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            raise

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._clients):
            task.cancel()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:  # not another broker's since
                self.path.unlink()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            if len(self._clients) >= MAX_CLIENTS:
                await _answer(
                    writer,
                    _error(f"{MAX_CLIENTS} control clients are connected already: try again"),
                )
                return
            self._clients.add(task)
            if not _peer_allowed(writer):
                await _answer(
                    writer,
                    _error("only the broker's own user (or root) may use the control channel"),
                )
                return
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT)
                except TimeoutError:
                    return
                except (ValueError, asyncio.LimitOverrunError):
                    await _answer(
                        writer, _error(f"a request is one JSON line of at most {MAX_LINE} bytes")
                    )
                    return
                if not line:
                    return
                await _answer(writer, self.handle(line))
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._clients.discard(task)
            writer.close()

    def handle(self, line: bytes) -> dict[str, Any]:
        """One request line → its answer (never raises for bad input)."""
        try:
            request = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return _error('not JSON: send one object per line, e.g. {"op": "list"}')
        if not isinstance(request, dict):
            return _error('a request is a JSON object, e.g. {"op": "list"}')
        op = request.get("op")
        tenant = request.get("tenant")
        if tenant is not None and not isinstance(tenant, str):
            return _error('"tenant" must be a string')
        if op == "list":
            client_id = request.get("client_id")
            if client_id is not None and not isinstance(client_id, str):
                return _error('"client_id" must be a string')
            limit = request.get("limit", DEFAULT_LIMIT)
            if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_LIMIT:
                return _error(f'"limit" must be an integer from 1 to {MAX_LIMIT}')
            found = list_sessions(self.broker, tenant, client_id)
            return {
                "ok": True,
                "total": len(found),
                "sessions": [info.to_json() for info in found[:limit]],
            }
        if op == "drop":
            client_id = request.get("client_id")
            if not isinstance(client_id, str) or not client_id:
                return _error('"drop" needs "client_id": the client id whose session to drop')
            return {"ok": True, "dropped": drop_session(self.broker, client_id, tenant)}
        return _error(f'unknown "op" {op!r}: use "list" or "drop"')


def _error(message: str) -> dict[str, Any]:
    return {"ok": False, "error": message}


async def _answer(writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
    writer.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
    await writer.drain()


def _peer_allowed(writer: asyncio.StreamWriter) -> bool:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return True  # the socket's mode 0600 is the guard where credentials cannot be read
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", raw)
    return uid in (0, os.getuid())


async def _answers(path: Path) -> bool:
    """Whether something listens on the socket ``path`` (another running broker)."""
    if not path.exists():
        return False
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
