"""What the broker writes to the audit log besides gate decisions: connect, disconnect, claim
and periodic ``client_stats`` events (format in ``record.py``; read by the pipeline's ``audit``
job: ``top_talkers`` sums ``client_stats``).

The broker calls these from one line each (``handle_connect``, ``connection_closed``,
``handle_claims``, ``tick``) so that the record fields are decided here, next to the format.
``client_stats`` is bounded: at most one record per connected client per ``[audit]
stats_interval`` seconds, only for clients that sent or received something since their last
one (plus a last one at disconnect), carrying the *deltas* since then, so summing the records
of a client gives its totals with no double counting.
"""

from __future__ import annotations

from typing import Any

STAT_FIELDS = ("msgs_in", "msgs_out", "bytes_in", "bytes_out")


def _who(conn: Any) -> dict[str, Any]:
    identity = conn.identity
    return {
        "client": conn.client_id or None,
        "user": getattr(identity, "username", None),
        "tenant": getattr(identity, "tenant", None),
        "method": getattr(identity, "method", None),
    }


def connected(audit: Any, conn: Any) -> None:
    if audit is not None:
        audit.event("connect", **_who(conn), detail=f"listener {conn.listener.name}")


def claim(audit: Any, conn: Any, topic: str, reason_code: int, reason: str | None) -> None:
    """A SMOKER claim or unclaim request answered with ``reason_code`` (0x97: rate limited)."""
    if audit is not None:
        audit.event(
            "unclaim" if topic.endswith("unclaim") else "claim",
            **_who(conn),
            topic=topic,
            rc=int(reason_code),
            outcome="allow" if reason_code < 0x80 else "deny",
            reason=reason or None,
        )


def _stats(audit: Any, conn: Any) -> None:
    now = tuple(int(getattr(conn, f, 0)) for f in STAT_FIELDS)
    before = getattr(conn, "audit_reported", (0, 0, 0, 0))
    if now == before or conn.identity is None:
        return
    conn.audit_reported = now
    audit.event(
        "client_stats",
        **_who(conn),
        **{f: n - b for f, n, b in zip(STAT_FIELDS, now, before, strict=True)},
    )


def disconnected(audit: Any, conn: Any) -> None:
    """The client's last ``client_stats`` delta, then the disconnect event."""
    if audit is None or conn.identity is None:
        return
    _stats(audit, conn)
    audit.event("disconnect", **_who(conn), reason=conn.disconnect_reason)


def client_stats(audit: Any, connections: Any, now: float) -> None:
    """Called every broker tick; writes the deltas every ``audit.stats_interval`` seconds."""
    if audit is None or not audit.stats_interval or now < audit.next_stats_at:
        return
    audit.next_stats_at = now + audit.stats_interval
    for conn in list(connections):
        _stats(audit, conn)


def decision(
    audit: Any, action: str, identity: Any, topic: str, decided: Any, origin: str | None = None
) -> None:
    """A gate decision (``authz.gates``): every denial; allowed ones only with ``[audit]
    log_allowed`` and never for ``deliver`` (one per receiver per message would dwarf the rest;
    what-if replays publishes and subscribes). A ``deliver`` record names the receiver in ``to``
    and the publisher (when known) in ``client``; its ``tenant`` is the receiver's."""
    if decided.allowed and (not audit.log_allowed or action == "deliver"):
        return
    outcome = "allow" if decided.allowed else ("disconnect" if decided.disconnect else "deny")
    gate = decided.gate.value if decided.gate is not None else None
    who: dict[str, Any] = {
        "client": identity.client_id,
        "user": identity.username,
        "tenant": identity.tenant,
        "method": identity.method,
    }
    if action == "deliver":
        who = {"client": origin, "to": identity.client_id, "tenant": identity.tenant}
    audit.decision(
        action=action,
        **who,
        topic=topic,
        outcome=outcome,
        gate=gate,
        rule=decided.rule,
        rc=int(decided.reason_code),
        reason=None if decided.allowed else decided.reason,
    )
