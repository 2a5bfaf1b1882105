"""Prometheus metrics endpoint.

``[metrics] enabled = true`` serves ``GET /metrics`` in the text exposition format 0.0.4 on the
broker's one HTTP stack (``admin/http.py``, h11): connections, messages, bytes, drops, authorization
decisions by gate and rule, claim store statistics, audit log and policy sync status. It binds
to loopback by default; anything else answers 404 (unknown path) or 405 (not GET/HEAD).

Decision counters belong to the compiled policy: a reload or a bundle starts them again at
zero, which Prometheus treats as a counter reset (``rate()`` stays right).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..admin.http import Handler, HttpLimits, HttpServer, Request, Response
from ..broker.stats import resident_bytes

if TYPE_CHECKING:
    from ..broker.server import Broker
    from ..sync.state import SyncStatus
    from ..sync.upload import UploadStatus

log = logging.getLogger("edge_broker.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# a scraper sends one small GET: few connections, no body
METRICS_LIMITS = HttpLimits(max_connections=8, max_header_bytes=8192, max_body_bytes=1024)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(
        self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]
    ) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            sample = f"{name}{{{label_text}}}" if label_text else name
            self.lines.append(f"{sample} {float(value)!r}")

    def one(self, name: str, kind: str, help_text: str, value: float) -> None:
        self.family(name, kind, help_text, [({}, value)])

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render_metrics(
    broker: Broker, sync: SyncStatus | None = None, upload: UploadStatus | None = None
) -> str:
    """The exposition text for ``broker`` (and the sync / upload status when they run)."""
    w = _Writer()
    st = broker.stats
    w.one("edge_broker_up", "gauge", "1 while the broker serves", 1)
    w.one("edge_broker_uptime_seconds", "gauge", "seconds since the broker started", st.uptime())
    w.one("edge_broker_clients_connected", "gauge", "connected MQTT clients", st.clients_connected)
    w.one(
        "edge_broker_clients_maximum", "gauge", "most clients connected at once", st.clients_maximum
    )
    w.one(
        "edge_broker_connections_open",
        "gauge",
        "network connections open (also before CONNECT)",
        len(broker.connections),
    )
    w.one(
        "edge_broker_connections_refused_total",
        "counter",
        "CONNECTs refused",
        st.connections_refused,
    )
    w.family(
        "edge_broker_messages_total",
        "counter",
        "PUBLISH packets by direction",
        [
            ({"direction": "received"}, st.messages_received),
            ({"direction": "sent"}, st.messages_sent),
        ],
    )
    w.family(
        "edge_broker_bytes_total",
        "counter",
        "bytes on the wire by direction",
        [({"direction": "received"}, st.bytes_received), ({"direction": "sent"}, st.bytes_sent)],
    )
    w.family(
        "edge_broker_dropped_total",
        "counter",
        "messages dropped, by reason",
        [({"reason": "queue"}, st.dropped), ({"reason": "oversize"}, st.dropped_oversize)],
    )
    w.one(
        "edge_broker_protocol_errors_total",
        "counter",
        "connections closed for protocol errors",
        st.protocol_errors,
    )
    w.family(
        "edge_broker_denied_total",
        "counter",
        "requests denied, by action",
        [
            ({"action": "publish"}, st.publish_denied),
            ({"action": "subscribe"}, st.subscribe_denied),
        ],
    )
    w.one(
        "edge_broker_subscriptions_removed_total",
        "counter",
        "subscriptions removed by a policy change",
        st.subscriptions_removed,
    )
    w.family(
        "edge_broker_revoked_total",
        "counter",
        "what a state change took away (docs/sessions-and-authorization.md), by kind",
        [
            ({"kind": "delivery"}, st.deliveries_revoked),
            ({"kind": "will"}, st.wills_denied),
            ({"kind": "foreign_session"}, st.sessions_refused),
            ({"kind": "connection"}, st.connections_revoked),
        ],
    )
    w.family(
        "edge_broker_limit_hits_total",
        "counter",
        "requests refused by a configured bound, by config key (broker/limits/limit_hits.py)",
        [({"limit": k}, v) for k, v in sorted(broker.limit_hits.counts.items())],
    )
    w.one("edge_broker_topic_spaces", "gauge", "tenant topic spaces held", len(broker.topic_spaces))
    w.one(
        "edge_broker_policy_generation",
        "gauge",
        "policy changes applied since start",
        broker.generation,
    )
    pipeline = broker.policy.pipeline
    samples: list[tuple[dict[str, str], float]] = []
    if pipeline is not None:
        for (gate, rule), count in sorted(pipeline.hits.items()):
            samples.append(({"gate": gate, "rule": rule, "outcome": "allow"}, count))
        for (gate, rule), count in sorted(pipeline.denials.items()):
            samples.append(({"gate": gate, "rule": rule, "outcome": "deny"}, count))
    w.family(
        "edge_broker_authz_decisions_total",
        "counter",
        "authorization decisions of gates 3-6 by gate, rule and outcome",
        samples,
    )
    _state_metrics(w, broker)
    if broker.claims is not None:
        cs = broker.claims.stats()
        w.family(
            "edge_broker_claims",
            "gauge",
            "claims in the store, by state",
            [
                ({"state": "indexed"}, cs.claims),
                ({"state": "pending"}, cs.pending),
                ({"state": "quarantined"}, cs.quarantined),
            ],
        )
        w.one(
            "edge_broker_claims_pool_bytes",
            "gauge",
            "bytes of [claims] max_claims_bytes the live claims are charged",
            cs.pool_bytes,
        )
        w.one(
            "edge_broker_claims_pool_limit_bytes",
            "gauge",
            "[claims] max_claims_bytes: what the live claims may be charged in all",
            cs.pool_limit,
        )
        w.one(
            "edge_broker_claims_throttled_clients",
            "gauge",
            "clients the claim flood guard tracks",
            cs.throttled_clients,
        )
        w.one(
            "edge_broker_claims_store_healthy",
            "gauge",
            "1 when the claim store accepts writes",
            int(cs.store_healthy),
        )
    if broker.audit is not None:
        au = broker.audit.stats()
        w.one(
            "edge_broker_audit_records_written_total",
            "counter",
            "audit records written",
            au.records_written,
        )
        w.one(
            "edge_broker_audit_records_dropped_total",
            "counter",
            "audit records deleted by rotation",
            au.records_dropped,
        )
        w.one(
            "edge_broker_audit_bytes", "gauge", "bytes of audit segments on disk", au.bytes_on_disk
        )
    if broker.bridges is not None:  # issue 19
        from ..bridge.metrics import write_bridge_metrics
        from ..bridge.service import Bridges

        if isinstance(broker.bridges, Bridges):  # what run_service registers
            write_bridge_metrics(w, broker.bridges)
    if sync is not None:
        w.one(
            "edge_broker_sync_policy_version",
            "gauge",
            "version of the applied policy bundle (0: none)",
            sync.version or 0,
        )
        w.one(
            "edge_broker_sync_last_success_timestamp_seconds",
            "gauge",
            "Unix time the last bundle was applied (0: never)",
            sync.last_success or 0.0,
        )
        w.family(
            "edge_broker_sync_bundles_total",
            "counter",
            "bundles received, by outcome",
            [({"outcome": "applied"}, sync.applied), ({"outcome": "refused"}, sync.refused)],
        )
        w.one(
            "edge_broker_sync_connected",
            "gauge",
            "1 while the cloud uplink is connected",
            int(sync.connected),
        )
    if upload is not None:
        w.one(
            "edge_broker_audit_upload_batches_total",
            "counter",
            "audit batches acknowledged by the cloud",
            upload.batches_acked,
        )
        w.one(
            "edge_broker_audit_upload_records_total",
            "counter",
            "audit records acknowledged by the cloud",
            upload.records_acked,
        )
        w.one(
            "edge_broker_audit_upload_segments_lost_total",
            "counter",
            "audit segments rotated away before they were uploaded",
            upload.segments_lost,
        )
    return w.text()


def _state_metrics(w: _Writer, broker: Broker) -> None:
    """What ``$SYS`` shows and Prometheus lacked (issue 20): sessions, queues, subscriptions,
    retained messages, the broker store's health, the process's memory."""
    spaces = broker.topic_spaces.values()
    w.one(
        "edge_broker_sessions",
        "gauge",
        "sessions held (connected and offline persistent ones)",
        len(broker.sessions),
    )
    queued = 0
    for session in broker.sessions:
        queued += len(session.queue)
    w.one("edge_broker_queued_messages", "gauge", "QoS 1/2 messages queued for sessions", queued)
    # One view of the queues' bytes (issue 16): as limits.max_queued_bytes_total counts
    # them, the messages and a per-entry overhead; $SYS/broker/limits/queued/bytes is the same.
    w.one(
        "edge_broker_queued_bytes",
        "gauge",
        "bytes queued for sessions, as limits.max_queued_bytes_total counts them",
        broker.delivery.queued_total,
    )
    w.one(
        "edge_broker_subscriptions",
        "gauge",
        "subscriptions in every topic space",
        sum(space.subscription_count() for space in spaces),
    )
    # kept up to date by every retained set/delete (broker/limits/retained_budget.py): no walk
    budget = broker.retained_budget
    w.one(
        "edge_broker_retained_messages",
        "gauge",
        "retained messages outside $ topics, as max_retained_messages counts them",
        budget.count,
    )
    w.one(
        "edge_broker_retained_bytes",
        "gauge",
        "topic + payload + properties of those, as max_retained_bytes counts them",
        budget.bytes,
    )
    persistence = broker.persistence
    if persistence is not None:
        w.one(
            "edge_broker_store_healthy",
            "gauge",
            "1 when the broker store accepts writes",
            int(persistence.healthy),
        )
        w.one(
            "edge_broker_store_refused_total",
            "counter",
            "QoS 1/2 publishes refused because they could not be stored",
            persistence.refused,
        )
    rss = resident_bytes()
    if rss is not None:
        w.one(
            "process_resident_memory_bytes", "gauge", "resident memory of the broker process", rss
        )


def readiness(broker: Broker) -> list[str]:
    """Why the broker is not ready to serve (``/readyz`` answers 503 with these), or nothing:
    every listener bound, the broker store and the claim store accepting writes."""
    problems = []
    if not broker.bound:
        problems.append("no listener is bound yet")
    if broker.persistence is not None and not broker.persistence.healthy:
        problems.append(f"the broker store refuses writes: {broker.persistence.last_error}")
    if broker.claims is not None and not broker.claims.stats().store_healthy:
        problems.append("the claim store refuses writes")
    return problems


def metrics_handler(
    render: Callable[[], str], ready: Callable[[], list[str]] | None = None
) -> Handler:
    """The ``[metrics]`` port's routes: ``/metrics``, ``/healthz`` (answered by the event loop:
    alive), ``/readyz`` (503 with the problems); 404 elsewhere, 405 for anything but GET/HEAD."""

    async def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response(405, b"use GET /metrics\n", headers=[("Allow", "GET, HEAD")])
        if request.path == "/healthz":
            return Response(200, b"ok\n")
        if request.path == "/readyz":
            problems = ready() if ready is not None else []
            body = ("".join(p + "\n" for p in problems) or "ready\n").encode()
            return Response(503 if problems else 200, body)
        if request.path != "/metrics":
            return Response(404, b"the metrics are at /metrics, health at /healthz and /readyz\n")
        return Response(200, render().encode(), CONTENT_TYPE)

    return handle


class MetricsServer:
    """``[metrics]``: the routes of :func:`metrics_handler` on the broker's HTTP stack
    (``admin/http.py``: h11, with its connection cap, size limits and timeouts)."""

    def __init__(
        self,
        render: Callable[[], str],
        bind: str,
        port: int,
        ready: Callable[[], list[str]] | None = None,
        limits: HttpLimits = METRICS_LIMITS,
        may_open: Callable[[], bool] | None = None,
        on_refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.http = HttpServer(
            "metrics",
            bind,
            port,
            metrics_handler(render, ready),
            limits,
            may_open=may_open,
            on_refused=on_refused,
        )
        self._bind = bind
        self.port = 0

    async def start(self) -> None:
        await self.http.start()
        self.port = self.http.port
        log.info(
            "metrics on http://%s:%d/metrics",
            self._bind,
            self.port,
            extra={"event": "metrics_listening", "host": self._bind, "port": self.port},
        )

    async def close(self) -> None:
        await self.http.close()
