"""What the broker writes to the audit log: gate decisions (``decision``: every field a gate
reads), refused CONNECTs and TLS handshakes (``connect_refused``, ``tls_refused``), and the
connect, disconnect, claim and periodic ``client_stats`` events (format in ``record.py``; read by
the pipeline's ``audit`` job: ``top_talkers`` sums ``client_stats``).

The broker calls these from one line each (``handle_connect``, ``Connection._refused``,
``connection_closed``, ``handle_claims``, ``tick``, the gate pipeline's ``_count``) so that the
record fields are decided here, next to the format. Decisions, refusals and refused claims go
through the broker's :class:`~.aggregate.DecisionWindow`, which writes repeated identical ones
once per window with a ``count`` and logs their INFO line the same way (each function passes it
the ``line`` that logs it). ``client_stats`` is bounded: at most one record per connected client
per ``[audit] stats_interval`` seconds (0: none at all), only for clients that sent or received
something since their last one (plus a last one at disconnect), carrying the *deltas* since
then, so summing the records of a client gives its totals with no double counting.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

authz_log = logging.getLogger("edge_broker.authz")  # the denial lines' logger, as before
broker_log = logging.getLogger("edge_broker.broker")

STAT_FIELDS = ("msgs_in", "msgs_out", "bytes_in", "bytes_out")


def _who(conn: Any) -> dict[str, Any]:
    identity = conn.identity
    return {
        "client": conn.client_id or None,
        "user": getattr(identity, "username", None),
        "tenant": getattr(identity, "tenant", None),
        "method": getattr(identity, "method", None),
    }


def _say(
    logger: logging.Logger,
    head: str,
    args: tuple[Any, ...],
    reason: str | None,
    extra: dict[str, Any],
    repeats: int,
    seconds: float,
) -> None:
    """A decision's INFO line: ``head: reason`` for the first of its kind, ``head N more
    time(s) in S s: reason`` (and ``count`` in the structured fields) when its window ends."""
    if repeats:
        logger.info(
            head + " %d more time(s) in %.0f s: %s",
            *args,
            repeats,
            seconds,
            reason,
            extra={**extra, "count": repeats},
        )
    else:
        logger.info(head + ": %s", *args, reason, extra=extra)


def _host(address: Any) -> str | None:
    return str(address[0]) if address else None


def connected(audit: Any, conn: Any) -> None:
    """CONNACK 0x00 sent: the ``connect`` event; with ``[audit] log_allowed`` also the allowed
    ``connect`` decision, with the fields a refused one has (``connect_refused``)."""
    if audit is None:
        return
    audit.event("connect", **_who(conn), detail=f"listener {conn.listener.name}")
    if audit.log_allowed:
        audit.decision(
            action="connect",
            **_who(conn),
            **identity_fields(conn.identity),
            addr=_host(conn.info.remote_address),
            topic="",
            outcome="allow",
            rc=0,
            detail=f"listener {conn.listener.name}",
        )


def claim(audit: Any, conn: Any, topic: str, reason_code: int, reason: str | None) -> None:
    """A SMOKER claim or unclaim request answered with ``reason_code`` (0x97: rate limited).
    Refused ones are aggregated (``aggregate.py``): a claim flood writes a count, not a flood."""
    if audit is None:
        return
    fields = {
        "event": "unclaim" if topic.endswith("unclaim") else "claim",
        **_who(conn),
        "topic": topic,
        "rc": int(reason_code),
        "outcome": "allow" if reason_code < 0x80 else "deny",
        "reason": reason or None,
    }
    window = getattr(conn.broker, "decisions", None)
    if reason_code >= 0x80 and window is not None:
        window.note("event", fields)
    else:
        audit.record("event", **fields)


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
    """The client's last ``client_stats`` delta (none with ``stats_interval = 0``: off), then
    the disconnect event."""
    if audit is None or conn.identity is None:
        return
    if audit.stats_interval:
        _stats(audit, conn)
    audit.event("disconnect", **_who(conn), reason=conn.disconnect_reason)


def client_stats(audit: Any, connections: Any, now: float) -> None:
    """Called every broker tick; writes the deltas every ``audit.stats_interval`` seconds."""
    if audit is None or not audit.stats_interval or now < audit.next_stats_at:
        return
    audit.next_stats_at = now + audit.stats_interval
    for conn in list(connections):
        _stats(audit, conn)


@lru_cache(maxsize=256)
def grants_digest(grants: Any) -> str:
    """sha256 hex of a token client's grants for its tenant, as the canonical JSON
    ``{"allow_channels_pub": [...], "allow_channels_sub": [...]}`` (the rule texts of every
    grant naming the tenant, in token order; keys sorted, no spaces, UTF-8): equal digests mean
    equal grants, and whoever holds the token can compute it again."""
    canonical = json.dumps(
        {
            "allow_channels_pub": list(grants.pub.texts),
            "allow_channels_sub": list(grants.sub.texts),
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    import hashlib  # only token clients' grants are digested (issue 32: fresh RSS)

    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def identity_fields(identity: Any) -> dict[str, Any]:
    """What the gates read of the principal beyond client, user, tenant and method: ``roles``
    (sorted), certificate ``cn``, interface ``iface``, token ``grants`` digest."""
    if identity is None:
        return {}
    grants = identity.grants
    return {
        "roles": sorted(identity.roles) if identity.roles else None,
        "cn": identity.cert_cn,
        "iface": identity.interface,
        "grants": grants_digest(grants) if grants is not None else None,
    }


def decision(
    audit: Any,
    action: str,
    identity: Any,
    topic: str,
    decided: Any,
    origin: str | None = None,
    qos: int | None = None,
    retain: bool | None = None,
    permission_set: str | None = None,
    msg: str | None = None,
) -> None:
    """A gate decision (``authz.gates``): every denial, logged at INFO and written to the
    audit log (``audit``: a :class:`~.aggregate.DecisionWindow`, or None: the line alone);
    allowed ones only with ``[audit] log_allowed`` and never for ``deliver`` (one per receiver
    per message would dwarf the rest; what-if replays publishes and subscribes). Every field a
    gate reads is written (``qos``, ``retain``, ``roles``, ``cn``, ``iface``, ``grants``,
    ``set`` and the site ACL's message kind ``msg``: the record's docstring). A ``deliver``
    record names the receiver in ``to`` and the publisher (when known) in ``client``; its
    ``user``, ``tenant`` and the principal's fields are the receiver's, whom the gates
    judged."""
    if decided.allowed and (audit is None or not audit.log_allowed or action == "deliver"):
        return
    outcome = "allow" if decided.allowed else ("disconnect" if decided.disconnect else "deny")
    gate = decided.gate.value if decided.gate is not None else None
    client = identity.client_id
    who: dict[str, Any] = {
        "client": client,
        "user": identity.username,
        "tenant": identity.tenant,
        "method": identity.method,
    }
    if action == "deliver":
        who = {"client": origin, "to": client, "user": identity.username, "tenant": identity.tenant}
    elif action == "connect":
        who["addr"] = _host(identity.remote_address)
    rc = int(decided.reason_code)
    reason = None if decided.allowed else decided.reason
    line = None
    if not decided.allowed:

        def line(repeats: int, seconds: float) -> None:
            extra = {
                "event": "denied",
                "action": action,
                "client_id": client,
                "topic": topic,
                "gate": gate or "none",
                "rule": decided.rule,
                "reason_code": rc,
            }
            _say(
                authz_log,
                "denied %s %r for %s",
                (action, topic, client),
                reason,
                extra,
                repeats,
                seconds,
            )

    if audit is None:
        if line is not None:
            line(0, 0.0)
        return
    audit.decision(
        line,
        action=action,
        **who,
        **identity_fields(identity),
        topic=topic,
        qos=qos,
        retain=retain,
        set=permission_set,
        msg=msg,
        outcome=outcome,
        gate=gate,
        rule=decided.rule,
        rc=rc,
        reason=reason,
    )


def connect_refused(audit: Any, conn: Any, reason_code: int, reason: str) -> None:
    """A CONNACK refusal (every one: authentication, client id, tenant, connect rate, limits,
    protocol errors, session ownership, permissions that cannot be bound, a refused will):
    logged at INFO and written as a ``connect`` decision with who as far as known (client id,
    user name, method, certificate CN), from where (``addr``, ``iface``) and why (``rc``,
    ``reason``, and ``gate``/``rule`` when a policy decision refused it: ``conn.refusal``). A
    refusal the gate pipeline already wrote (its ``connect`` or ``will`` decision) is only
    logged. ``audit`` is the broker's :class:`~.aggregate.DecisionWindow`."""
    refusal = getattr(conn, "refusal", None)
    decided, identity = refusal if refusal is not None else (None, None)
    gate = decided.gate.value if decided is not None and decided.gate is not None else None
    packet = getattr(conn, "connect_packet", None)
    info = conn.info
    authenticator = getattr(conn, "authenticator", None)
    client = conn.client_id or None
    remote = info.remote_address
    listener = conn.listener.name

    def line(repeats: int, seconds: float) -> None:
        extra = {
            "event": "connect_refused",
            "client_id": conn.client_id,
            "reason_code": f"0x{reason_code:02X}",
            "reason": reason,
            "remote": remote and f"{remote[0]}:{remote[1]}",
            "listener": listener,
        }
        _say(broker_log, "connect refused", (), reason, extra, repeats, seconds)

    if audit is None:
        line(0, 0.0)
        return
    if gate not in (None, "syntax", "reserved"):
        return  # the gate pipeline wrote and logged it (aggregated) as its own decision
    if identity is not None:
        who = {
            "client": client,
            "user": identity.username,
            "tenant": identity.tenant,
            "method": identity.method,
            **identity_fields(identity),
        }
    else:
        who = {
            "client": client,
            "user": getattr(packet, "username", None),
            "method": getattr(authenticator, "method", None),
            "cn": info.cert_cn,
            "iface": info.interface,
        }
    audit.decision(
        line,
        action="connect",
        **who,
        addr=_host(remote),
        topic="",
        outcome="deny",
        gate=gate,
        rule=decided.rule if decided is not None else None,
        rc=int(reason_code),
        reason=reason,
        detail=f"listener {listener}",
    )


def tls_refused(audit: Any, info: Any, exc: BaseException) -> None:
    """A TLS listener's handshake failed (an untrusted, expired or missing client certificate,
    or plain MQTT sent to the TLS port): no CONNECT was read, so no ``rc``; logged at INFO and
    written as a refused ``connect`` decision with where it came from, aggregated like the
    others. ``info``: the connection's ``ConnectionInfo``."""
    detail = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
    reason = f"TLS handshake failed: {detail or type(exc).__name__}"
    remote = info.remote_address
    listener = info.listener

    def line(repeats: int, seconds: float) -> None:
        extra = {
            "event": "tls_refused",
            "reason": reason,
            "remote": remote and f"{remote[0]}:{remote[1]}",
            "listener": listener,
        }
        _say(broker_log, "TLS handshake refused", (), reason, extra, repeats, seconds)

    audit.decision(
        line,
        action="connect",
        addr=_host(remote),
        iface=info.interface,
        topic="",
        outcome="deny",
        reason=reason,
        detail=f"listener {listener}",
    )
