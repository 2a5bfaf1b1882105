"""CONNECT (MQTT 5 §3.1, §3.2; 3.1.1 §3.1, §3.2).

``handle_connect`` checks what the codec cannot (client identifier rules, limits), runs the
listener's authentication chain, and on success takes over or resumes the session and sends
CONNACK with the capability properties. Enhanced authentication (§4.12) pauses in the
AUTHENTICATING state until the client's AUTH arrives (``handle_auth.py``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..audit import events as audit_events
from ..auth.method_api import (
    Accepted,
    AuthOutcome,
    AuthRequest,
    Continue,
    Refused,
    requested_tenant,
)
from ..auth.smoker import refuse_smoker_impostor
from ..auth.tenant_choice import tenant_refusal
from ..authz.decision import Decision
from ..authz.session_verdicts import judged_later
from ..engine.negotiation import client_id_refusal, negotiate, will_refusal
from ..engine.states import Trigger
from ..identity import Identity
from ..mqtt.packets import Auth, Connect, Properties
from ..mqtt.reason_codes import ReasonCode
from .limits.pre_auth import user_properties_refusal
from .limits.topic_limits import topic_limit, topic_limit_reason
from .message import will_message
from .outcomes import will_denied
from .ownership import (
    Principal,
    bound_session,
    foreign_session_reason,
    may_resume,
    principal_of,
    reserved_for_others,
)
from .pattern_subscriptions import listener_identity
from .token_expiry import schedule_token_expiry
from .topic_space import new_tenant_refusal

if TYPE_CHECKING:
    from ..auth.password import PasswordEntry  # argon2: imported only where passwords are used
    from .handler_api import ClientContext
    from .session import Session

log = logging.getLogger("edge_broker.broker")


def handle_connect(conn: ClientContext, packet: Connect) -> Awaitable[None] | None:
    """The first packet; returns the coroutine that authenticates (packet order is kept)."""
    conn.trigger(Trigger.CONNECT)  # the engine knows the protocol level from this CONNECT
    conn.client_id = packet.client_id
    conn.connect_packet = packet
    too_many = user_properties_refusal(packet, conn.broker.config.limits)
    if too_many is not None:  # refused before anything keeps the decoded properties
        conn.connect_packet = None
        conn.broker.limit_hits.hit(
            "limits.max_connect_user_properties", f"CONNECT refused: {too_many}", packet.client_id
        )
        conn.refuse_connect(ReasonCode.QUOTA_EXCEEDED, too_many)
        return None
    return _connect(conn, packet)


async def _connect(conn: ClientContext, packet: Connect) -> None:
    broker = conn.broker
    cfg = broker.config.broker
    refusal = broker.admit(conn)
    if refusal is not None:
        conn.refuse_connect(*refusal)
        return
    invalid = client_id_refusal(packet, cfg.allow_zero_length_client_id)  # engine
    if invalid is not None:
        conn.refuse_connect(invalid.reason_code, invalid.reason)
        return
    client_id = packet.client_id
    if client_id == "":
        client_id = cfg.assigned_client_id_prefix + secrets.token_hex(8)
        conn.assigned_client_id = client_id
        packet = replace(packet, client_id=client_id)
        conn.connect_packet = packet
    conn.client_id = client_id
    tenant = requested_tenant(packet)
    if isinstance(tenant, Refused):
        conn.refuse_connect(tenant.reason_code, tenant.reason)
        return
    request = AuthRequest(connect=packet, info=conn.info, tenant=tenant)
    authenticator, outcome = await conn.broker.auth_chain(conn.listener).authenticate(request)
    conn.authenticator = authenticator
    await after_auth(conn, request, outcome)


async def after_auth(conn: ClientContext, request: AuthRequest, outcome: AuthOutcome) -> None:
    """The authentication chain answered (at CONNECT or an AUTH during it): refuse, challenge
    (AUTHENTICATING) or accept."""
    if conn.closing:
        return
    if isinstance(outcome, Refused):
        if outcome.limit is not None:
            conn.broker.limit_hits.hit(
                outcome.limit, f"CONNECT refused: {outcome.reason}", conn.client_id
            )
        conn.refuse_connect(outcome.reason_code, outcome.reason)
        return
    method = request.connect.properties.authentication_method
    if isinstance(outcome, Continue):
        if not conn.v5 or method is None:
            conn.refuse_connect(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                "enhanced authentication needs MQTT 5 and an Authentication Method",
            )
            return
        conn.trigger(Trigger.AUTH_CONTINUE)
        send_auth_continue(conn, method, outcome)
        return
    impostor = refuse_smoker_impostor(outcome.identity)  # SMOKER.md rule 6, every listener
    if impostor is not None:
        conn.refuse_connect(impostor.reason_code, impostor.reason)
        return
    unproven = tenant_refusal(outcome.identity, conn.listener)  # issue 15: no self-chosen tenant
    if unproven is not None:
        conn.refuse_connect(unproven.reason_code, unproven.reason)
        return
    await _accept(conn, request.connect, outcome)


async def _accept(conn: ClientContext, connect: Connect, accepted: Accepted) -> None:
    broker = conn.broker
    identity = accepted.identity
    admitted = broker.policy.admit(identity)
    if not admitted.allowed:
        will_denied(conn, admitted, identity)  # CONNACK 0x87 / 0x05 with the reason, then close
        return
    will = connect.will
    if will is not None:
        unsupported = will_refusal(will, broker.offer())  # engine/negotiation.py
        if unsupported is not None:
            conn.refuse_connect(unsupported.reason_code, unsupported.reason)
            return
        crossed = topic_limit(will.topic, broker.config.limits, broker.separator)  # issue 16
        if crossed is not None:
            reason = topic_limit_reason(will.topic, crossed, broker.config.limits, broker.separator)
            broker.limit_hits.limits_key(
                crossed, conn.client_id, f"will of {conn.client_id!r}: {reason}"
            )
            conn.refuse_connect(ReasonCode.TOPIC_NAME_INVALID, f"will {reason}")
            return
        message = will_message(will, conn.client_id, broker.clock)  # as gates judge it
        verdict = broker.policy.check_will(identity, message)
        decision = verdict if isinstance(verdict, Decision) else await verdict
        if not decision.allowed:
            will_denied(conn, decision, identity)
            return
    if conn.closing:
        return
    identity = listener_identity(identity, conn.listener)  # runtime patterns allowed here?
    principal = principal_of(identity, conn.listener.name)
    # A resumed session is judged as the identity connecting now (broker/rejudge.py), before
    # it is attached: an asynchronous authorizer's answer must not let deliveries in first.
    prior = None if connect.clean_start else broker.live_session(identity.tenant, conn.client_id)
    verdicts = None
    if prior is not None and may_resume(prior, principal) and not judged_later(identity):
        verdicts = await broker.judge_resumed(prior, identity)
        if conn.closing:
            return
    # the session this client id has now: no await from here to the attach
    existing = broker.live_session(identity.tenant, conn.client_id)
    crossed = _connection_share(conn, identity, principal, existing) or new_tenant_refusal(
        broker, identity.tenant, broker.config.limits.max_tenants, conn.client_id
    )  # issue 34: a new tenant's space is made here, or refused at max_tenants
    if crossed is not None:
        conn.refuse_connect(ReasonCode.QUOTA_EXCEEDED, crossed)
        return
    fresh = _foreign_session(conn, identity, principal, existing)
    if fresh is None:
        return
    conn.identity = identity
    conn.will = will
    conn.password_entry = _password_entry(conn, identity)
    conn.token_credential = _token_credential(connect, identity)
    offer = broker.offer()  # as configured now (a reload may have come during the awaits)
    # engine/negotiation.py: Keep Alive, expiry, windows and the CONNACK's properties
    agreement = negotiate(connect, offer, accepted.authentication_data, conn.assigned_client_id)
    expiry = agreement.session_expiry
    session, present = broker.attach_session(conn, connect, identity, expiry, principal, fresh)
    if present:
        if verdicts is not None and session is prior:
            broker.apply_resumed(session, verdicts, "a resumed session")
        else:  # raced with another CONNECT during an authorizer's answer
            await broker.rejudge(session, "a resumed session")
    conn.accept(
        agreement, present, agreement.connack
    )  # CONNACK; the pre-authentication bound lifts
    schedule_token_expiry(conn)
    audit_events.connected(broker.audit, conn)
    log.info(
        "client connected",
        extra={
            "event": "connect",
            "client_id": conn.client_id,
            "tenant": identity.tenant,
            "method": identity.method,
            "protocol": conn.level,
            "clean_start": connect.clean_start,
            "session_present": present,
            "listener": conn.listener.name,
            "cert_cn": identity.cert_cn,
            "interface": identity.interface,
            "remote": conn.info.remote_address
            and f"{conn.info.remote_address[0]}:{conn.info.remote_address[1]}",
        },
    )
    if present:
        conn.resend_inflight()
    broker.delivery.drain(session)


def _connection_share(
    conn: ClientContext, identity: Identity, principal: Principal, existing: Session | None
) -> str | None:
    """The Reason String when one more connection would take the tenant or the principal past
    its share of ``max_connections`` (broker/limits/quotas.py). Taking over a connection of the
    same principal and tenant adds none."""
    broker = conn.broker
    ledger = broker.quotas.connections
    if existing is not None and existing.connection is not None:
        held = ledger.holders.get(existing.connection)
        if held is not None and held[0] == identity.tenant and held[1] == principal:
            return None
    return broker.quotas.refusal(
        ledger,
        broker.config.limits,
        identity.tenant,
        principal,
        1,
        broker.limit_hits,
        conn.client_id,
        f"CONNECT of {conn.client_id!r}",
    )


def _foreign_session(
    conn: ClientContext, identity: Identity, principal: Principal, existing: Session | None
) -> bool | None:
    """Session ownership (broker/ownership.py): False when the CONNECT may go on as asked, True
    when it goes on with a fresh session (the other principal's ends), None when it was refused
    with CONNACK 0x87 / 3.x 0x05 (the owner's connection and session untouched).

    A client id that credentials bind is reserved for the principals they admit, whatever
    ``foreign_session`` says: anyone else is refused, and a bound principal ends a session an
    unbound one made under its id (issue 31 item 1). Among principals that are all bound, or
    all unbound, ``[broker] foreign_session`` decides."""
    broker = conn.broker
    if reserved_for_others(broker.client_id_bindings(), identity, existing):
        _refuse_foreign(conn, identity, principal)
        return None
    if existing is None or may_resume(existing, principal):
        return False
    owner = existing.owner
    if identity.client_id_verified and not bound_session(existing):
        why = "its credentials bind the client id; the session's owner's do not"
    elif owner is not None and owner.named and broker.config.broker.foreign_session == "refuse":
        _refuse_foreign(conn, identity, principal)
        return None
    else:
        why = '[broker] foreign_session = "fresh"'
    log.info(
        "session of another principal ended for a fresh one",
        extra={
            "event": "foreign_session_ended",
            "client_id": conn.client_id,
            "tenant": identity.tenant,
            "owner": str(owner),
            "principal": str(principal),
            "why": why,
        },
    )
    return True


def _refuse_foreign(conn: ClientContext, identity: Identity, principal: Principal) -> None:
    conn.broker.stats.sessions_refused += 1
    conn.refusal = (
        Decision(False, None, "session-ownership", ReasonCode.NOT_AUTHORIZED),
        identity,
    )
    conn.refuse_connect(
        ReasonCode.NOT_AUTHORIZED, foreign_session_reason(conn.client_id, principal)
    )


def _password_entry(conn: ClientContext, identity: Identity) -> PasswordEntry | None:
    """The password entry that admitted ``identity`` (a reload compares it, broker/rejudge.py)."""
    if identity.method != "password" or identity.username is None:
        return None
    entries = getattr(conn.authenticator, "entries", None)  # PasswordAuthenticator.entries
    return entries.get(identity.username) if isinstance(entries, dict) else None


def _token_credential(connect: Connect, identity: Identity) -> bytes | None:
    """The JWT that admitted a token client: Authentication Data with method ``TOKEN``, else
    the CONNECT password (auth/token_method.py reads it the same way)."""
    if identity.method != "token":
        return None
    props = connect.properties
    if props.authentication_method is not None:
        return props.authentication_data
    return connect.password


def send_auth_continue(conn: ClientContext, method: str, outcome: Continue) -> None:
    """One more step of enhanced authentication (MQTT 5 §4.12): keep the authenticator's state
    and send AUTH 0x18 with its data, at CONNECT and at re-authentication alike."""
    conn.auth_state = outcome.state
    conn.send_packet(
        Auth(
            ReasonCode.CONTINUE_AUTHENTICATION,
            Properties(
                authentication_method=method, authentication_data=outcome.authentication_data
            ),
        )
    )
