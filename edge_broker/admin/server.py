"""``[admin]``: the admin listener — :class:`~.http.HttpServer` serving :class:`~.api.AdminApi`
— started by ``ops/service.py`` after the MQTT listeners, on the broker's event loop.

With ``one_time_login`` (the embedded default) a random one-time login link is printed at start
(stderr and the log), as Jupyter does: the console needs no default password.
"""

from __future__ import annotations

import errno
import logging
import sys
import time
from collections.abc import Callable
from typing import Protocol

from ..broker.operator import Operator
from .api import AdminApi
from .http import HttpLimits, HttpServer
from .sessions import AdminAuth

log = logging.getLogger("edge_broker.admin")


class AdminSettings(Protocol):
    """What the admin listener reads of ``[admin]`` (``config/service.py`` ``AdminConfig``)."""

    @property
    def bind(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def users_file(self) -> str | None: ...
    @property
    def tls_cert(self) -> str | None: ...
    @property
    def tls_key(self) -> str | None: ...
    @property
    def one_time_login(self) -> bool: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def request_timeout(self) -> float: ...
    @property
    def idle_timeout(self) -> float: ...
    @property
    def max_body_bytes(self) -> int: ...
    @property
    def session_ttl(self) -> float: ...
    @property
    def max_sessions(self) -> int: ...


class AdminServer:
    def __init__(
        self,
        operator: Operator,
        config: AdminSettings,
        *,
        may_open: Callable[[], bool] | None = None,
        on_refused: Callable[[str, str], None] | None = None,
        port_fallback: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.operator = operator
        self.auth = AdminAuth(config.users_file, clock, config.session_ttl, config.max_sessions)
        self.api = AdminApi(operator, self.auth)
        context = None
        if config.tls_cert is not None and config.tls_key is not None:
            from ..tls import server_context

            context = server_context(config.tls_cert, config.tls_key, None, False)
        self._port_fallback = port_fallback  # the embedded default: another port if 9884 is taken
        self._args = (context, may_open, on_refused)
        self.http = self._server(config.port)

    def _server(self, port: int) -> HttpServer:
        context, may_open, on_refused = self._args
        limits = HttpLimits(
            max_connections=self.config.max_connections,
            max_header_bytes=8192,
            max_body_bytes=self.config.max_body_bytes,
            request_timeout=self.config.request_timeout,
            idle_timeout=self.config.idle_timeout,
        )
        return HttpServer(
            "admin",
            self.config.bind,
            port,
            self.api.handle,
            limits,
            context,
            may_open=may_open,
            on_refused=on_refused,
        )

    @property
    def url(self) -> str:
        host = self.config.bind
        host = f"[{host}]" if ":" in host else host
        return f"{self.http.scheme}://{host}:{self.http.port}"

    async def start(self) -> None:
        try:
            await self.http.start()
        except OSError as exc:
            if not (self._port_fallback and exc.errno == errno.EADDRINUSE):
                raise
            log.warning(
                "[admin] port %d is taken: the console listens on another port",
                self.config.port,
                extra={"event": "admin_port_taken", "port": self.config.port},
            )
            self.http = self._server(0)
            await self.http.start()
        self.operator.attach()
        log.info(
            "admin console on %s/",
            self.url,
            extra={"event": "admin_listening", "host": self.config.bind, "port": self.http.port},
        )
        if self.config.one_time_login:
            link = f"{self.url}/login/once?token={self.auth.issue_once()}"
            # stderr as Jupyter does; not the structured log (a log shipper would keep it)
            print(
                f"edge-broker: open the console (this link logs you in once):\n    {link}",
                file=sys.stderr,
                flush=True,
            )

    async def close(self) -> None:
        self.operator.detach()
        await self.http.close()
