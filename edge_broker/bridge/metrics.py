"""The bridges' families on the metrics endpoint (``edge_broker_bridge_*``, label ``bridge``);
``edge-broker bridge status`` reads them back (cli/bridge.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .service import Bridges

COUNTERS = (
    ("queued", "messages accepted into the outbound queue"),
    ("sent", "PUBLISH packets sent to the remote, resends included"),
    ("acknowledged", "messages the remote acknowledged (QoS 0: when written)"),
    ("dropped", "messages dropped by the queue bounds (overflow policy)"),
    ("rejected", "messages the remote refused with an error reason code"),
    ("received", "PUBLISH packets received from the remote"),
    ("denied_out", "local messages the bridge principal may not receive (never forwarded)"),
    ("denied_in", "remote messages the bridge principal may not publish (never routed)"),
    ("echoes", "messages dropped by loop prevention"),
    ("forged_origin", "client messages whose forged edge-bridge-origin naming it was stripped"),
    ("connects", "successful connections to the remote"),
)


def write_bridge_metrics(w: Any, bridges: Bridges) -> None:
    items = bridges.bridges
    w.family(
        "edge_broker_bridge_connected",
        "gauge",
        "1 while the bridge is connected to its remote",
        [({"bridge": b.name}, int(b.stats.connected)) for b in items],
    )
    w.family(
        "edge_broker_bridge_queue_messages",
        "gauge",
        "messages in the outbound queue (in flight included)",
        [({"bridge": b.name}, len(b.queue)) for b in items],
    )
    w.family(
        "edge_broker_bridge_queue_bytes",
        "gauge",
        "bytes in the outbound queue",
        [({"bridge": b.name}, b.queue.bytes) for b in items],
    )
    w.family(
        "edge_broker_bridge_inflight",
        "gauge",
        "QoS 1/2 messages sent and not yet acknowledged",
        [({"bridge": b.name}, len(b.queue.inflight)) for b in items],
    )
    for name, text in COUNTERS:
        w.family(
            f"edge_broker_bridge_{name}_total",
            "counter",
            text,
            [({"bridge": b.name}, getattr(b.stats, name)) for b in items],
        )
    w.family(
        "edge_broker_bridge_last_error_info",
        "gauge",
        "the bridge's last error (label error; empty when none)",
        [
            ({"bridge": b.name, "error": b.stats.last_error or (b.store.last_error or "")}, 1)
            for b in items
        ],
    )
