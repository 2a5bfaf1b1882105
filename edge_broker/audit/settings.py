"""``[audit]``: the decision and event log's section, its type and parser (``config/``
assembles the sections), and the log it opens.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config_section import Section

if TYPE_CHECKING:
    from .log import AuditLog


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``[audit]``: the decision and event log (format in ``edge_broker/audit/record.py``).

    Without ``dir`` no audit file is written; denials still reach the broker's log."""

    dir: str | None = None
    gateway_id: str | None = None  # default: [sync] gateway_id, else the host name
    max_segment_bytes: int = 4 * 1024 * 1024
    max_segments: int = 16
    log_allowed: bool = False  # also record allowed decisions (large; for what-if replays)
    stats_interval: int = 60  # seconds between client_stats events per active client; 0: none
    # repeated identical decisions: one record (and log line) with a count per window
    # (edge_broker/audit/aggregate.py); 0: every one written
    aggregate_window: float = 60.0
    aggregate_max_keys: int = 2000  # distinct keys held per window; past it counted as overflow


def parse_audit(s: Section) -> AuditConfig:
    d = AuditConfig()
    directory = s.file_path("dir")
    if directory == "":
        s.problem(
            "dir", 'empty: write a directory, e.g. "/var/lib/edge-broker/audit", or remove the key'
        )
        directory = None
    return AuditConfig(
        dir=directory,
        gateway_id=s.optional_string("gateway_id"),
        max_segment_bytes=s.integer("max_segment_bytes", d.max_segment_bytes, 1024, 1 << 30),
        max_segments=s.integer("max_segments", d.max_segments, 2, 100_000),
        log_allowed=s.boolean("log_allowed", d.log_allowed),
        stats_interval=s.integer("stats_interval", d.stats_interval, 0, 86_400),
        aggregate_window=s.number("aggregate_window", d.aggregate_window, 0, 86_400),
        aggregate_max_keys=s.integer("aggregate_max_keys", d.aggregate_max_keys, 1, 1_000_000),
    )


def open_audit_log(config: AuditConfig, sync_gateway_id: str = "") -> AuditLog | None:
    """The audit log of ``[audit]``, or None when no ``dir`` is configured. Its gateway id is
    ``[audit] gateway_id``, else ``[sync] gateway_id`` (the id bundles and the pipeline use)."""
    if config.dir is None:
        return None
    from .log import AuditLog  # only a configured log pays for its import

    return AuditLog(
        config.dir,
        config.gateway_id or sync_gateway_id or socket.gethostname(),
        max_segment_bytes=config.max_segment_bytes,
        max_segments=config.max_segments,
        log_allowed=config.log_allowed,
        stats_interval=config.stats_interval,
    )
