"""The broker's audit log, opened from ``[audit]`` (the policy it records for lives in
:mod:`edge_broker.authz.policy`).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..audit.log import AuditLog
    from ..audit.settings import AuditConfig


def open_audit_log(config: AuditConfig, sync_gateway_id: str = "") -> AuditLog | None:
    """The audit log of ``[audit]``, or None when no ``dir`` is configured. Its gateway id is
    ``[audit] gateway_id``, else ``[sync] gateway_id`` (the id bundles and the pipeline use)."""
    if config.dir is None:
        return None
    from ..audit.log import AuditLog

    return AuditLog(
        config.dir,
        config.gateway_id or sync_gateway_id or socket.gethostname(),
        max_segment_bytes=config.max_segment_bytes,
        max_segments=config.max_segments,
        log_allowed=config.log_allowed,
        stats_interval=config.stats_interval,
    )
