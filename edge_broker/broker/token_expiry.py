"""Token expiry during a session, and what a re-authentication changes (AUTHZ.md §2, last
paragraph; issue 5).

A client accepted with a token whose ``exp`` is set has ``Identity.token_expires_at`` (``exp``
plus the verifier's leeway, wall-clock seconds). The connection's engine holds that moment as a
deadline on the broker's clock (engine/connection.py); the broker's tick ends the session once
it has passed: MQTT 5 gets DISCONNECT 0xA0 Maximum connect time with a Reason String, 3.x is
closed. A successful re-authentication (AUTH 0x19 with a fresh token, MQTT 5 §4.12.1) replaces
the identity: the deadline moves to the new token's, and the session is judged again under
the new grants (``broker/rejudge.py``: subscriptions no longer accepted are removed with what
was queued under them). The same judgement runs when a client resumes a session.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    from .handler_api import ClientContext

log = logging.getLogger("edge_broker.broker")


def schedule_token_expiry(conn: ClientContext) -> None:
    """(Re)set the connection's deadline for its current identity's token."""
    identity = conn.identity
    if identity is None or identity.token_expires_at is None or conn.closing:
        conn.engine.token_deadline = None
        return
    # exp is wall-clock time (RFC 7519 §4.1.4); the engine's deadlines are on the broker's clock
    left = max(0.0, identity.token_expires_at - time.time())
    conn.engine.token_deadline = conn.broker.clock() + left
    conn.broker.watch(conn)  # a new token may expire before the deadline the broker had


def token_expired(conn: ClientContext) -> None:
    """The broker's tick found the token's deadline passed (``Timeout.TOKEN``)."""
    conn.engine.token_deadline = None
    identity = conn.identity
    if conn.closing or identity is None or identity.token_expires_at is None:
        return
    deadline = identity.token_expires_at
    when = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reason = (
        f"the token expired ({when} including leeway); re-authenticate with a fresh "
        "token (AUTH 0x19, method TOKEN) before it expires"
    )
    log.info(
        "token expired",
        extra={"event": "token_expired", "client_id": conn.client_id, "tenant": identity.tenant},
    )
    # the will goes too: a will whose client's token expired is not published (issue 15)
    conn.close(ReasonCode.MAXIMUM_CONNECT_TIME, reason, will=False)
