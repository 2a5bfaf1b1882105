"""What an operator may do to sessions: list them and drop one (docs/sessions.md).

``edge-broker session list|drop`` reaches these through the local control channel
(``broker/control_channel.py``), and the admin API calls the same functions: one definition of
what a listing shows and of what a drop does.

A drop ends the client's connection (MQTT 5: DISCONNECT 0x98 Administrative action with a
Reason String; 3.x: the socket is closed), discards its will (an operator's action is not the
client's failure), removes the session with its subscriptions, queue and in-flight messages from
memory and from ``<state_dir>/broker.log``, and writes a ``session_dropped`` audit event. The
client id is then free for whoever may use it (docs/sessions.md "Whose client ids").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..mqtt.reason_codes import ReasonCode
from .ownership import bound_session

if TYPE_CHECKING:
    from ..audit.log import AuditLog
    from ..config import Config
    from .ownership import ClientIdBindings
    from .session import Session

log = logging.getLogger("edge_broker.broker")


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as an operator sees it. ``expires_at`` is Unix time (seconds), ``None``
    while the client is connected or when the session never expires."""

    client_id: str
    tenant: str
    owner: str  # the principal that owns it, e.g. "password 'dave'" (broker/ownership.py)
    connected: bool
    expires_at: float | None
    queued: int  # messages waiting in its queue
    queued_bytes: int
    inflight: int  # QoS 1/2 messages sent and not yet acknowledged

    def to_json(self) -> dict[str, object]:
        return {
            "client_id": self.client_id,
            "tenant": self.tenant,
            "owner": self.owner,
            "connected": self.connected,
            "expires_at": self.expires_at,
            "queued": self.queued,
            "queued_bytes": self.queued_bytes,
            "inflight": self.inflight,
        }


class SessionHost(Protocol):
    """What session control reads and changes in the broker (``Broker`` is one)."""

    @property
    def sessions(self) -> Iterable[Session]: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def audit(self) -> AuditLog | None: ...

    def end_session(self, session: Session, reason_code: int, reason: str) -> None: ...


def session_info(session: Session, now: float, wall: float) -> SessionInfo:
    """``session`` as :class:`SessionInfo` (``now`` on the broker clock, ``wall`` Unix time)."""
    expires = session.expires_at
    return SessionInfo(
        client_id=session.client_id,
        tenant=session.tenant,
        owner=str(session.owner) if session.owner is not None else "unknown",
        connected=session.connection is not None,
        expires_at=None if expires is None else round(wall + (expires - now), 3),
        queued=len(session.queue),
        queued_bytes=session.queued_bytes,
        inflight=len(session.inflight),
    )


def list_sessions(
    broker: SessionHost, tenant: str | None = None, client_id: str | None = None
) -> list[SessionInfo]:
    """Every session (of ``tenant`` / with ``client_id`` when given), sorted by tenant and
    client id; offline sessions whose expiry has passed are not listed (they are gone)."""
    now = broker.clock()
    wall = time.time()
    found = [
        session_info(s, now, wall)
        for s in broker.sessions
        if (tenant is None or s.tenant == tenant)
        and (client_id is None or s.client_id == client_id)
        and not (s.connection is None and s.expires_at is not None and s.expires_at <= now)
    ]
    found.sort(key=lambda info: (info.tenant, info.client_id))
    return found


def drop_session(
    broker: SessionHost, client_id: str, tenant: str | None = None, by: str = "operator"
) -> bool:
    """End the session of ``client_id`` (in ``tenant``; ``None``: in every tenant) as the
    module docstring says. True when a session was dropped, False when there was none.
    ``by`` names who asked, for the log and the audit event."""
    targets = [
        s
        for s in broker.sessions
        if s.client_id == client_id and (tenant is None or s.tenant == tenant)
    ]
    for session in targets:
        owner = str(session.owner) if session.owner is not None else "unknown"
        was = "connected" if session.connection is not None else "offline"
        queued = len(session.queue)
        broker.end_session(
            session, ReasonCode.ADMINISTRATIVE_ACTION, f"session dropped by the {by}"
        )
        detail = (
            f"{client_id} (tenant {session.tenant}, owner {owner}, {was}, {queued} queued): "
            f"dropped by the {by}"
        )
        log.info(
            "session dropped: %s",
            detail,
            extra={
                "event": "session_dropped",
                "client_id": client_id,
                "tenant": session.tenant,
                "owner": owner,
            },
        )
        if broker.audit is not None:
            broker.audit.event("session_dropped", detail=detail)
    return bool(targets)


class OwnersHost(SessionHost, Protocol):
    """What judging the owners again reads besides sessions (``Broker`` is one)."""

    @property
    def config(self) -> Config: ...

    def client_id_bindings(self) -> ClientIdBindings: ...


def lost_right(broker: OwnersHost, session: Session) -> str | None:
    """Why ``session``'s owner may no longer hold it under the configuration in force, or
    ``None``: a password owner whose entry is gone, or no longer lists the session's tenant or
    client id; an owner whose credentials do not bind the client id when the password file now
    binds it to others (docs/sessions.md "Whose client ids")."""
    owner = session.owner
    if owner is not None and owner.method == "password":
        passwords = broker.config.passwords
        entry = passwords.entries.get(owner.name) if passwords.file is not None else None
        if entry is None:
            return f"the password entry of user {owner.name!r} was removed"
        if entry.tenants and session.tenant not in entry.tenants:
            return f"user {owner.name!r} may no longer use tenant {session.tenant!r}"
        if not entry.allows_client_id(session.client_id):
            return f"user {owner.name!r} may no longer use client id {session.client_id!r}"
    if not bound_session(session) and broker.client_id_bindings().reserved(
        session.tenant, session.client_id
    ):
        return f"client id {session.client_id!r} is now bound to other credentials"
    return None


def end_sessions_of_lost_owners(broker: OwnersHost, why: str) -> int:
    """After a reload or a restart: end every session (connected or offline) whose owner lost
    the right to it (:func:`lost_right`), as the connections of a removed user end: MQTT 5
    DISCONNECT 0x87 with the reason, 3.x closed, the session and its queue removed, logged and
    audited. Returns how many ended."""
    ended = 0
    for session in list(broker.sessions):
        reason = lost_right(broker, session)
        if reason is None:
            continue
        reason = f"{reason} ({why}): its session ended"
        ended += 1
        broker.end_session(session, ReasonCode.NOT_AUTHORIZED, reason)
        log.info(
            "session ended: %s",
            reason,
            extra={
                "event": "session_owner_revoked",
                "client_id": session.client_id,
                "tenant": session.tenant,
                "owner": str(session.owner),
            },
        )
        if broker.audit is not None:
            broker.audit.event("session_owner_revoked", detail=f"{session.client_id}: {reason}")
    return ended
