"""The broker as a service (issue 9; DESIGN.md "gateway operations"): what ``edge-broker run``
does around :class:`~edge_broker.broker.server.Broker`.

Order: the persisted policy bundle is applied first (``[sync]``), then the listeners start;
READY=1 (sd_notify) once they accept, with a STATUS line; WATCHDOG=1 every
``watchdog_interval`` from a timer on the event loop itself, so a hung loop stops the pings and
systemd restarts the broker; the metrics endpoint and the cloud uplink start after READY. On
stop: STOPPING=1, the uplink and metrics close, then the broker shuts down gracefully.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..sdnotify import SystemdNotifier

if TYPE_CHECKING:
    from ..admin.http import HttpServer
    from ..admin.server import AdminServer
    from ..broker.server import Broker
    from ..sync.service import SyncService
    from .metrics import MetricsServer

log = logging.getLogger("edge_broker.service")


def status_line(broker: Broker, sync: SyncService | None) -> str:
    listeners = ", ".join(f"{name} {host}:{port}" for name, _, host, port in broker.bound)
    clients = broker.stats.clients_connected
    text = f"serving {len(broker.bound)} listener(s): {listeners}; {clients} client(s)"
    if sync is not None:
        version = sync.status.version
        text += f"; policy bundle {'v' + str(version) if version else 'none'}"
    return text


class Watchdog:
    """WATCHDOG=1 from ``loop.call_later``: only a running loop keeps systemd satisfied."""

    def __init__(self, notifier: SystemdNotifier, loop: asyncio.AbstractEventLoop) -> None:
        self._notifier = notifier
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._notifier.watchdog_interval is not None:
            self._ping()

    def _ping(self) -> None:
        self._notifier.watchdog()
        interval = self._notifier.watchdog_interval
        assert interval is not None
        self._handle = self._loop.call_later(interval, self._ping)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _route_sighup(loop: asyncio.AbstractEventLoop, broker: Broker, sync: SyncService) -> None:
    """With sync running, SIGHUP reloads the file with the applied bundle over it again."""
    import signal

    tasks: set[asyncio.Task[object]] = set()

    from ..broker.listeners import reload_tls

    def on_hup() -> None:
        reload_tls(broker.tls_contexts, broker.config.listeners)
        task: asyncio.Task[object] = loop.create_task(sync.reload_base(sync.base.file))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, on_hup)
    except (NotImplementedError, RuntimeError):  # not the main thread (tests): SIGHUP as it was
        pass


async def _start_admin(
    broker: Broker,
    sync: SyncService | None,
    http_servers: list[HttpServer],
    http_open: Callable[[], int],
) -> AdminServer:
    """``[admin]``: the operator interface over this broker, and the admin listener."""
    from ..admin.server import AdminServer
    from ..broker.limits.fd_budget import http_may_open
    from ..broker.operator import Operator
    from ..config import EMBEDDED_FILE

    config = broker.config
    reload = None
    if sync is not None:
        running = sync

        async def reload_with_sync() -> Any:  # as SIGHUP does with sync (_route_sighup)
            from ..broker.listeners import reload_tls

            reload_tls(broker.tls_contexts, broker.config.listeners)
            return await running.reload_base(running.base.file)

        reload = reload_with_sync
    operator = Operator(
        broker,
        memory_budget=lambda: _memory_budget(broker),
        bridges=lambda: _bridges_view(broker),
        reload=reload,
        policy_bundle=(lambda: _bundle_view(running)) if sync is not None else None,
    )
    admin = AdminServer(
        operator,
        config.admin,
        may_open=lambda: http_may_open(len(broker.connections), http_open()),
        on_refused=broker.limit_hits.hit,
        port_fallback=config.file == EMBEDDED_FILE,
    )
    await admin.start()
    http_servers.append(admin.http)
    return admin


def _memory_budget(broker: Broker) -> int | None:
    """The worst case of the [limits] (what ``edge-broker check`` prints), computed once."""
    cached = getattr(broker, "_admin_budget", None)
    if cached is None:
        from .memory_budget import memory_budget

        cached = sum(term.bytes for term in memory_budget(broker.config))
        broker._admin_budget = cached  # type: ignore[attr-defined]
    return int(cached)


def _bridges_view(broker: Broker) -> list[dict[str, Any]]:
    from ..bridge.service import Bridges

    bridges = broker.bridges
    if not isinstance(bridges, Bridges):
        return []
    from ..bridge.metrics import COUNTERS

    items = []
    for b in bridges.bridges:
        items.append(
            {
                "name": b.name,
                "state": "connected" if b.stats.connected else "disconnected",
                "queue_depth": len(b.queue),
                "counters": {name: getattr(b.stats, name) for name, _ in COUNTERS},
                "last_error": getattr(b.stats, "last_error", None) or None,
            }
        )
    return items


def _bundle_view(sync: SyncService) -> dict[str, Any]:
    bundle = sync.bundle
    if bundle is None:
        return {"version": None, "signer": None}
    return {"version": bundle.version, "signer": bundle.kid}


async def run_service(
    broker: Broker, stop: asyncio.Event, notifier: SystemdNotifier | None = None
) -> None:
    """Start everything, wait for ``stop``, shut everything down (module docstring)."""
    notifier = notifier if notifier is not None else SystemdNotifier()
    config = broker.config
    sync: SyncService | None = None
    if config.sync.enabled:
        from ..sync.service import SyncService

        sync = SyncService(broker, config)
        await sync.restore()
    if config.bridges and broker.open_bridges is None:
        from ..bridge.service import Bridges

        broker.open_bridges = Bridges.open  # opened by start(), before the listeners
    await broker.start()
    loop = asyncio.get_running_loop()
    watchdog = Watchdog(notifier, loop)
    metrics: MetricsServer | None = None
    admin: AdminServer | None = None
    http_servers: list[HttpServer] = []  # every HTTP port shares the descriptors MQTT leaves

    def http_open() -> int:
        return sum(server.open for server in http_servers)

    try:
        if config.metrics.enabled:
            from ..broker.limits.fd_budget import http_may_open
            from .metrics import METRICS_LIMITS, MetricsServer, readiness, render_metrics

            def render() -> str:
                return render_metrics(
                    broker, sync.status if sync else None, sync.upload if sync else None
                )

            metrics = MetricsServer(
                render,
                config.metrics.bind,
                config.metrics.port,
                lambda: readiness(broker),
                replace(
                    METRICS_LIMITS,
                    max_connections=config.metrics.max_connections,
                    request_timeout=config.metrics.request_timeout,
                ),
                may_open=lambda: http_may_open(len(broker.connections), http_open()),
                on_refused=broker.limit_hits.hit,
            )
            await metrics.start()
            http_servers.append(metrics.http)
        if config.admin.enabled:
            admin = await _start_admin(broker, sync, http_servers, http_open)
        if sync is not None:
            await sync.start()
            _route_sighup(loop, broker, sync)
        notifier.ready(status_line(broker, sync))
        watchdog.start()
        # the status line every 30 s only for a systemd that reads it: otherwise no wake-ups
        status_every = 30.0 if notifier.enabled else None
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), status_every)
            except TimeoutError:
                notifier.status(status_line(broker, sync))
    finally:
        notifier.stopping()
        watchdog.stop()
        if sync is not None:
            await sync.close()
        if metrics is not None:
            await metrics.close()
        if admin is not None:
            await admin.close()
        await broker.shutdown()
        notifier.close()
