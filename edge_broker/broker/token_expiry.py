"""Token expiry during a session, and what a re-authentication changes (AUTHZ.md §2, last
paragraph; issue 5).

A client accepted with a token whose ``exp`` is set has ``Identity.token_expires_at`` (``exp``
plus the verifier's leeway, wall-clock seconds). One timer per connection fires then and ends the
session: MQTT 5 gets DISCONNECT 0xA0 Maximum connect time with a Reason String, 3.x is closed.
A successful re-authentication (AUTH 0x19 with a fresh token, MQTT 5 §4.12.1) replaces the
identity: the timer is rescheduled for the new token, and the session is judged again under
the new grants (``broker/rejudge.py``: subscriptions no longer accepted are removed with what
was queued under them). The same judgement runs when a client resumes a session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("edge_broker.broker")


def schedule_token_expiry(conn: Connection) -> None:
    """(Re)arm the connection's expiry timer for its current identity's token."""
    cancel_token_expiry(conn)
    identity = conn.identity
    if identity is None or identity.token_expires_at is None or conn.closing:
        return
    deadline = identity.token_expires_at
    delay = max(0.0, deadline - time.time())
    loop = asyncio.get_running_loop()
    conn.token_timer = loop.call_later(delay, _expired, conn, deadline)


def cancel_token_expiry(conn: Connection) -> None:
    timer = conn.token_timer
    if timer is not None:
        timer.cancel()
        conn.token_timer = None


def _expired(conn: Connection, deadline: float) -> None:
    conn.token_timer = None
    identity = conn.identity
    if conn.closing or identity is None or identity.token_expires_at != deadline:
        return  # closed meanwhile, or re-authenticated with another token
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
