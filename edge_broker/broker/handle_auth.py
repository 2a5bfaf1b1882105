"""AUTH (MQTT 5 §3.15, §4.12): the client's answers during enhanced authentication at CONNECT
(``handle_auth_continue``, state AUTHENTICATING) and re-authentication of a connected client
(``handle_reauth``, AUTH 0x19 then 0x18 exchanges, §4.12.1). Any other packet while the
exchange at CONNECT runs is refused (``refuse_before_auth``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..auth.method_api import AuthRequest, Continue, Refused, requested_tenant
from ..mqtt.packets import Auth, Connect, Disconnect, Properties
from ..mqtt.reason_codes import ReasonCode
from .handle_connect import after_auth, send_auth_continue
from .pattern_subscriptions import listener_identity
from .token_expiry import schedule_token_expiry

if TYPE_CHECKING:
    from .handler_api import ClientContext


def handle_auth_continue(conn: ClientContext, packet: Auth) -> Awaitable[None] | None:
    """The client's AUTH during enhanced authentication at CONNECT (MQTT 5 §4.12)."""
    connect = conn.connect_packet
    assert connect is not None
    method = connect.properties.authentication_method
    if packet.reason_code != ReasonCode.CONTINUE_AUTHENTICATION or (
        packet.properties.authentication_method != method
    ):
        conn.refuse_connect(
            ReasonCode.PROTOCOL_ERROR, "expected AUTH 0x18 with the CONNECT's authentication method"
        )
        return None
    return _continue_auth(conn, connect, packet)


async def _continue_auth(conn: ClientContext, connect: Connect, packet: Auth) -> None:
    authenticator = conn.authenticator
    assert authenticator is not None
    tenant = requested_tenant(connect)
    assert isinstance(tenant, str)
    request = AuthRequest(
        connect=connect, info=conn.info, tenant=tenant, auth=packet, state=conn.auth_state
    )
    await after_auth(conn, request, await authenticator.authenticate(request))


def handle_reauth(conn: ClientContext, packet: Auth) -> Awaitable[None] | None:
    """Re-authentication (AUTH 0x19, then 0x18 exchanges) by the method that accepted the
    connection (MQTT 5 §4.12.1)."""
    connect = conn.connect_packet  # kept after CONNACK only when it named a method
    assert conn.identity is not None
    method = None if connect is None else connect.properties.authentication_method
    if connect is None or method is None or packet.properties.authentication_method != method:
        conn.violation(
            ReasonCode.PROTOCOL_ERROR, "AUTH needs the authentication method the CONNECT used"
        )
        return None
    if packet.reason_code not in (ReasonCode.RE_AUTHENTICATE, ReasonCode.CONTINUE_AUTHENTICATION):
        conn.violation(ReasonCode.PROTOCOL_ERROR, "a client sends AUTH with 0x18 or 0x19 only")
        return None
    return _reauth(conn, connect, packet, method)


async def _reauth(conn: ClientContext, connect: Connect, packet: Auth, method: str) -> None:
    authenticator = conn.authenticator
    assert authenticator is not None and conn.identity is not None
    request = AuthRequest(
        connect=connect,
        info=conn.info,
        tenant=conn.identity.tenant,
        auth=packet,
        state=conn.auth_state,
        reauthenticating=True,
        identity=conn.identity,
    )
    outcome = await authenticator.authenticate(request)
    if isinstance(outcome, Refused):
        conn.close(outcome.reason_code, outcome.reason)
    elif isinstance(outcome, Continue):
        send_auth_continue(conn, method, outcome)
    else:
        conn.auth_state = None
        identity = listener_identity(outcome.identity, conn.listener)
        conn.identity = identity
        if identity.method == "token":  # the fresh JWT is what a reload verifies from now on
            conn.token_credential = packet.properties.authentication_data
        if conn.session is not None:
            conn.session.identity = identity
        conn.send_packet(
            Auth(
                ReasonCode.SUCCESS,
                Properties(
                    authentication_method=method, authentication_data=outcome.authentication_data
                ),
            )
        )
        schedule_token_expiry(conn)
        if conn.session is not None:  # the new grants decide from now on (broker/rejudge.py)
            await conn.broker.rejudge(conn.session, "re-authentication")


def refuse_before_auth(conn: ClientContext, packet: object) -> None:
    """Only AUTH (or DISCONNECT) may come while enhanced authentication runs (MQTT 5 §4.12)."""
    if isinstance(packet, Disconnect):
        conn.close(None, "client gave up authentication", will=False)
        return
    conn.refuse_connect(
        ReasonCode.PROTOCOL_ERROR,
        f"{type(packet).__name__.upper()} before authentication completed",
    )
